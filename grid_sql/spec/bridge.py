"""The one door from the grammar IR into the executable specification.

The oracle (:mod:`grid_sql.spec.oracle`) is built from a neutral description so that it stays
independent of the implementation it checks; this module is the only place that reads a
:class:`~grid_sql.grammar.ir.Grammar` to write that description. It used to be
``Grammar.to_spec``, which made the grammar layer import the spec above it.
"""

from __future__ import annotations

from ..grammar.ir import Grammar
from ..grammar.scope import unbindable_qualifiers
from .oracle import SpecGrammar, SpecTerminal


def to_spec(grammar: Grammar) -> SpecGrammar:
    """The neutral description of ``grammar`` (terminals, rules, lexicon, scope settings)."""
    g = grammar
    lex: dict[str, tuple[frozenset[bytes], bool]] = {}
    if g.lexicon is not None:
        lex = {n: (c.words, c.fold_bare_case) for n, c in g.lexicon.categories.items()}
    return SpecGrammar(
        terminals=tuple(
            SpecTerminal(t.name, t.pattern, t.priority, t.is_string) for t in g.terminals
        ),
        rules=tuple((r.lhs, r.rhs) for r in g.rules),
        start=g.start,
        ignored=frozenset(t.name for t in g.terminals if t.ignored),
        lexicon=lex,
        scopes=None
        if g.scopes is None
        else (
            dict(g.scopes.columns),
            g.scopes.schemas,
            g.scopes.bind_select_list,
            g.scopes.fresh_aliases,
            g.scopes.alias_refuse,
            unbindable_qualifiers(g, g.scopes),
            g.scopes.cte_names and "cte_ref" in g.tables.nonterminal_ids,
            g.scopes.alias_clauses,
            g.scopes.output_refuse,
            None
            if g.scopes.schema_columns is None
            else {
                sch: {t: frozenset(cs) for t, cs in ts.items()}
                for sch, ts in (g.scopes.nested_schemas() or {}).items()
            },
            g.scopes.default_schema,
            g.scopes.bare_reaches_all,
            g.scopes.aggregates
            if g.lexicon is not None and "FUNCTION_NAME" in g.lexicon.categories
            else frozenset(),
            g.scopes.nested_aggregates,
            g.scopes.table_functions,
        ),
    )
