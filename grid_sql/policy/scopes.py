"""Schema → scope table: the input of scope-aware column lexicons (``docs/scope.md``).

Kept apart from ``policy/grammar.py`` so the role grammar's language is unchanged unless a
caller asks for scopes: ``role_grammar(...).with_scopes(role_scopes(snapshot))``.
"""

from __future__ import annotations

import functools

from ..dialect import Dialect
from ..grammar.scope import ScopeTable
from ..schema.model import SchemaSnapshot
from .model import Policy

# Dialects whose keywords no table alias may spell: the three supported ones and T-SQL, whose
# idioms (`TOP 5`) small models write in every dialect (issue #30: `JOIN invoiceline AS TOP`).
KEYWORD_DIALECTS = (*(Dialect.get(name).sqlglot for name in Dialect.names()), "tsql")


@functools.cache
def dialect_keywords() -> frozenset[str]:
    """Every single-word keyword sqlglot's tokenizers know for :data:`KEYWORD_DIALECTS`
    (a well-kept list, not ours to curate): reserved and non-reserved words alike, since
    either one as a table alias reads as a construct, not a name."""
    from sqlglot.dialects.dialect import Dialect

    out: set[str] = set()
    for d in KEYWORD_DIALECTS:
        for w in Dialect.get_or_raise(d).tokenizer_class.KEYWORDS:
            if w.replace("_", "").isalpha() and w.isascii():
                out.add(w)
    return frozenset(out)


def role_scopes(
    snapshot: SchemaSnapshot,
    *,
    bind_select_list: bool = False,
    fresh_aliases: bool | None = None,
    hijack_free: bool = True,
    cte_names: bool = True,
    output_aliases: bool = True,
    policy: Policy | None = None,
    aggregates: bool = True,
    nested_aggregates: bool = True,
) -> ScopeTable:
    """Every table (and view) of the snapshot with all of its columns, plus its schemas.

    Columns are not filtered by the policy here: the scope rule only narrows the role's
    ``COLUMN_NAME`` lexicon (which already holds just the columns the role may name), so the
    words admitted at a position are (columns of the tables in scope) ∩ (role's lexicon).
    Tables of the same name in several schemas are merged (a union only widens), except
    where the table-names-by-schema rule below is on: there each FROM item reads the columns
    of its own schema's table.
    ``bind_select_list``: a FROM clause may not close while a select-list reference before
    it is bound nowhere (``docs/scope.md``, select-list obligations).
    ``fresh_aliases`` (default: on for SQLite only, where names compare case-insensitively
    quoted or not): a table's alias may not repeat a name its FROM exposes or be a qualifier
    the select list reads a missing column through (``docs/scope.md``, "Fresh aliases").
    ``hijack_free`` (default on, every dialect): no table alias may spell a table or column
    name of the snapshot (denied ones included: the snapshot is what the service sees) or a
    keyword of :data:`KEYWORD_DIALECTS` (``docs/scope.md``, "No hijacked names"); with
    ``policy`` too, no output alias may spell a name the role may not read
    (:func:`denied_only_names`).
    ``cte_names`` (default on): a FROM item read as a CTE reference must spell a CTE name
    the statement binds there (``docs/scope.md``, "CTE names"); what lets a role grammar
    built with ``role_grammar(..., ctes=True)`` keep CTE references.
    ``output_aliases`` (default on): a bare name may be an output alias of the select list
    in the clauses where the snapshot's dialect resolves one
    (:attr:`grid_sql.dialect.Dialect.output_alias_clauses`;
    ``docs/scope.md``, "Output aliases").
    With tables outside the default schema (the policy's, else the snapshot's: where the
    checker resolves a bare name), a bare table name in FROM admits only the default
    schema's tables and ``s.`` only the tables of ``s`` (``docs/scope.md``, "Table names by
    schema"): a bare ``FROM restaurant`` for ``restaurants.restaurant`` is refused by the
    checker and by the server's search_path, so the mask does not offer it.
    ``aggregates`` (default on): no aggregate of :attr:`Dialect.mask_aggregates` is called
    in a clause where none runs (``docs/scope.md``, "Aggregates where they run");
    ``nested_aggregates=False`` also none inside an aggregate's arguments (the repair round
    after the checker refused a nesting).
    """
    tables: dict[str, list[str]] = {}
    schemas: list[str] = []
    by_schema: dict[str, dict[str, list[str]]] = {}
    for schema, t in snapshot.iter_tables():
        schemas.append(schema)
        tables.setdefault(t.name, []).extend(t.column_names)
        by_schema.setdefault(schema, {}).setdefault(t.name, []).extend(t.column_names)
    default = (policy.default_schema if policy is not None else None) or snapshot.default_schema
    multi = default is not None and any(s != default for s in by_schema)
    dialect = Dialect.get(snapshot.dialect)
    if fresh_aliases is None:
        fresh_aliases = dialect.fresh_aliases
    refuse: set[str] = set()
    if hijack_free:
        refuse.update(tables)
        refuse.update(c for cs in tables.values() for c in cs)
        refuse.update(dialect_keywords())
    return ScopeTable(
        tables,
        schemas,
        bind_select_list=bind_select_list,
        fresh_aliases=fresh_aliases,
        alias_refuse=refuse,
        cte_names=cte_names,
        alias_clauses=dialect.output_alias_clauses if output_aliases else (),
        output_refuse=denied_only_names(snapshot, policy) if hijack_free and policy else (),
        table_schemas=by_schema if multi else None,
        default_schema=default if multi else None,
        bare_reaches_all=dialect.bare_names_search_every_schema,
        aggregates=dialect.mask_aggregates if aggregates else (),
        nested_aggregates=nested_aggregates,
        table_functions=dialect.table_functions if cte_names else None,
    )


def denied_only_names(snapshot: SchemaSnapshot, policy: Policy) -> frozenset[str]:
    """Lower-cased names of tables and columns the role may not read that name nothing it
    may read (``Title`` of a denied ``Employee`` is also ``Album.Title``: not refused), so an
    output alias spelling one can only make a blocked name look answered."""
    denied: set[str] = set()
    readable: set[str] = set()
    for schema, t in snapshot.iter_tables():
        tp = policy.table(t.name, schema)
        if tp is None or not tp.allows("select"):
            denied.add(t.name.lower())
            denied.update(c.lower() for c in t.column_names)
            continue
        readable.add(t.name.lower())
        for c in t.column_names:
            (readable if tp.readable(c) else denied).add(c.lower())
    return frozenset(denied - readable)
