"""CTE names as scoped relations in the parser's lexicon views (issue #25 §1).

A role grammar drops ``cte_ref`` unless the scope rule holds it: the rule admits at a FROM
item an identifier read as a CTE reference only when it spells, byte for byte, a CTE name
the statement binds where it is written (``ScopeRules.bound_ctes``; ``docs/scope.md``, "CTE
names"). Kept out of ``incremental.py`` (the runtime calls :func:`cte_ref_words` while it
builds a scope view); the spec evaluates the same rule on its parse forest
(``ScopeSpec.cte_words``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..grammar.lexicon import CategoryWords

if TYPE_CHECKING:
    from ..grammar.scope import Context, ScopeRules
    from .incremental import ParserRuntime
    from .stack import StackNode


def cte_ref_words(
    rt: ParserRuntime, node: StackNode, sem: ScopeRules, allowed: int
) -> tuple[tuple[int, CategoryWords], ...]:
    """``((IDENT, words),)`` where an ``IDENT`` shifted at ``node`` can only reduce to
    ``cte_ref`` (its state after the word reduces by ``cte_ref`` and nothing else): the CTE
    names bound there, compared byte for byte. Else ``()``.

    Why only IDENT: a word of the role's table lexicon lexes as ``TABLE_NAME`` (a CTE named
    like a readable table is read as that table by the grammar and as the CTE by the
    database and the checker: both fine); every other word that reaches ``cte_ref`` is an
    ``IDENT`` or one of the role's schema names. An empty list is no dead end: where a FROM
    item starts, ``TABLE_NAME`` and ``(`` are allowed too.
    """
    tid = sem.t_ident
    if not sem.cte_names or tid < 0 or not (allowed >> tid) & 1:
        return ()
    kinds = rt._reduced_to(rt.shift(node, tid))
    if kinds is None or kinds != {sem.nt_cte_ref}:
        return ()
    return ((tid, CategoryWords(sem.bound_ctes(rt.ctx_at(node)))),)


def defined_column_words(
    rt: ParserRuntime, sem: ScopeRules, ctx: Context, aliases: frozenset[str]
) -> frozenset[bytes] | None:
    """At a column position that admits the role's whole column lexicon: the lexicon's
    ``COLUMN_NAME`` words plus every bare and quoted spelling (lower case) of the columns
    the statement's CTEs and derived tables define (``ScopeRules.defined_columns``: never a
    catalog column name) and of ``aliases`` (:func:`alias_extra`); None when there are none
    (the lexicon alone)."""
    spelled = name_spellings(rt, sem, sem.defined_columns(ctx) | aliases)
    if not spelled:
        return None
    return rt.lexicon[sem.column_tid].words | spelled


def name_spellings(rt: ParserRuntime, sem: ScopeRules, names: frozenset[str]) -> frozenset[bytes]:
    """Every bare and quoted spelling of the ASCII ``names`` that lexes as ``COLUMN_NAME``."""
    if not names:
        return frozenset()
    return rt._spellings(frozenset(n for n in names if n.isascii()), sem.column_tid) or frozenset()


def alias_extra(
    rt: ParserRuntime, node: StackNode, sem: ScopeRules, ctx: Context
) -> frozenset[str]:
    """The output aliases an unqualified column position at ``node`` also admits
    (``ScopeTable.alias_clauses``): those of the innermost query level naming no catalog
    column (``ScopeRules.alias_names``), when the nearest clause keyword below the position
    on the stack opens a clause where the dialect resolves output aliases. The search stops
    at a token that starts another construct of the level or a nested query (``SELECT``,
    ``FROM``, ``ON``, ``LIMIT``, ...: ``ALIAS_STOPS``) and answers none there."""
    clauses, other = sem.alias_clause_tids, sem.alias_other_tids
    if not clauses or node.symbol == sem.t_dot:
        return frozenset()
    m: StackNode | None = node
    while m is not None and m.parent is not None:
        if m.symbol in clauses:
            return sem.alias_names(ctx)
        if m.symbol in other:
            return frozenset()
        m = m.parent
    return frozenset()
