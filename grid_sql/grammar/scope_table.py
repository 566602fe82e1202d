"""The schema side of the scope rule (:class:`ScopeTable`) and the name comparison it uses.

Split out of :mod:`grid_sql.grammar.scope` (which re-exports every name here): the table is
configuration — which tables have which columns, which schema names and pseudo-columns a
qualifier or column may be — while ``scope.py`` holds the rule that folds it over a parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .aliases import ALIAS_CLAUSES
from .fingerprint import fingerprint

# Schema names that exist without being listed: `main.t.c` in SQLite, `public.t.c` in
# PostgreSQL. A qualifier equal to one of them may start a three-part name.
DEFAULT_SCHEMAS = frozenset({"main", "temp", "public", "pg_catalog", "information_schema"})
WILDCARD = "*"  # an item bound to an unknown name (matches every qualifier)
# Bare words some dialects take as keywords inside function arguments
# (``TIMESTAMPDIFF(YEAR, a, b)`` in MySQL) that the grammar scans as a column reference:
# they stay admitted at every unqualified column position (if the role's lexicon has them).
KEYWORD_ARGS = frozenset(
    {"microsecond", "second", "minute", "hour", "day", "week", "month", "quarter", "year"}
)

# Bare select-list words every table answers without listing them as columns, and
# PostgreSQL's reserved ``user`` (the current role even where a table has a ``user``
# column): never an obligation of the FROM clause.
PSEUDO_COLUMNS = frozenset(
    {"rowid", "oid", "_rowid_", "ctid", "xmin", "xmax", "cmin", "cmax", "tableoid", "user"}
)
# At most this many distinct select-list references are tracked per level; beyond, the
# select list has no obligations (keeps stack values small on very long select lists).
MAX_REFS = 32


def norm_name(lexeme: bytes | str) -> str:
    """The comparison form of an identifier: quotes removed, ASCII lower-cased.

    Case-insensitive even for quoted names: the comparison only ever widens what is
    admitted (two spellings that one dialect tells apart are treated as one name).
    """
    s = lexeme.decode("utf-8", "replace") if isinstance(lexeme, bytes) else lexeme
    if len(s) >= 2 and s[0] in '"`' and s[-1] == s[0]:
        s = s[1:-1].replace(s[0] * 2, s[0])
    elif len(s) >= 2 and s[0] == "[" and s[-1] == "]":
        s = s[1:-1]
    return s.lower()


class ScopeTable:
    """The schema side of the scope rule: table -> column names (compared by
    :func:`norm_name`), plus the schema names a qualifier may also be.

    ``ScopeTable({"singer": ["Singer_ID", "Name"], ...})``. Tables of the same name in
    different schemas should be merged by the caller (the union is sound).

    ``bind_select_list``: also refuse to close a FROM clause while a reference of the select
    list before it is bound nowhere (``docs/scope.md``, "Select-list obligations"). It is
    part of the language, so it is part of the fingerprint (only when on: fingerprints of
    tables without it are unchanged).

    ``fresh_aliases``: a table's alias may not be a name its query's FROM already exposes
    (``docs/scope.md``, "Fresh aliases"). Sound only where names compare
    ASCII-case-insensitively quoted or not (SQLite); likewise in the fingerprint only when on.

    ``alias_refuse``: names no table alias may spell in any dialect, compared ASCII-case-folded
    (``docs/scope.md``, "No hijacked names"): the catalog's table and column names and the
    keywords of the supported dialects and of T-SQL, so ``JOIN invoice AS BirthDate`` and
    ``JOIN invoiceline AS TOP`` cannot be written. A deliberate narrowing, not a soundness
    rule: such an alias is valid SQL, but it makes a blocked name or a foreign idiom look
    answered. In the fingerprint only when non-empty.

    ``cte_names``: a name read as a CTE reference (``cte_ref``: an identifier in FROM that no
    table lexicon word is) admits only the CTE names the statement binds where it is written
    (``docs/scope.md``, "CTE names"): what lets a role grammar keep ``cte_ref`` without it
    becoming a way to name any relation. It also admits the columns CTEs and derived tables
    define (their output aliases) where the whole column lexicon is admitted. In the
    fingerprint only when on.

    ``alias_clauses``: the clauses (of ``where``, ``group``, ``having``, ``order``) in which
    the dialect resolves a bare name to an output alias of the select list
    (``docs/scope.md``, "Output aliases"); there an unqualified column position also admits
    the innermost query's output aliases that name no catalog column. In the fingerprint
    only when non-empty.
    ``output_refuse``: names no output alias of a select list may spell (``SELECT x AS
    BirthDate``), the names the role may not read (``role_scopes(policy=...)``), compared
    likewise; ``SUM(Total) AS Total`` stays. In the fingerprint only when non-empty.
    ``table_schemas`` with ``default_schema``: schema -> table -> its columns, for a catalog
    of several schemas (``docs/scope.md``, "Table names by schema"): a bare table name in
    FROM admits only the tables of ``default_schema`` (what a bare name reaches for the
    checker), and after ``s.`` only the tables of ``s``; a FROM item's columns are those of
    the table in the schema it names (``academic.author`` has ``aid``, ``scholar.author``
    does not), not the union over same-named tables. Off (None) when every table is in the
    default schema; in the fingerprint only when on. ``bare_reaches_all``: the dialect looks
    a bare table name up in every schema (SQLite's attached databases): bare names keep
    every table, ``s.`` is still held to the tables of ``s``.
    ``aggregates``: names that are aggregate functions whatever their arguments
    (``docs/scope.md``, "Aggregates where they run"): a called name (``FUNCTION_NAME``) in a
    ``WHERE``, join ``ON``, ``GROUP BY``, ``LIMIT``/``OFFSET``/``FETCH`` or ``FILTER`` of a
    query level admits none of them (every engine refuses an aggregate there). With
    ``nested_aggregates=False``, a deliberate narrowing for a repair round, neither inside an
    aggregate call's arguments (``SUM(COUNT(x))``; valid only as a window's argument, which
    the first round keeps). In the fingerprint only when non-empty (and the narrowing only
    when on).
    ``table_functions``: function -> the columns a FROM item calling it exposes (``()``: one,
    named by the item's alias, else by the function; :attr:`Dialect.table_functions`): with
    ``cte_names`` they count among the columns the statement defines (``FROM
    generate_series(1, 12) AS m ... WHERE m > 3``, ``FROM json_each(x) AS j ... j.value``).
    In the fingerprint only when non-empty.
    """

    def __init__(
        self,
        tables: Mapping[str, Iterable[str]],
        schemas: Iterable[str] = (),
        *,
        bind_select_list: bool = False,
        fresh_aliases: bool = False,
        alias_refuse: Iterable[str] = (),
        cte_names: bool = False,
        alias_clauses: Iterable[str] = (),
        output_refuse: Iterable[str] = (),
        table_schemas: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
        default_schema: str | None = None,
        bare_reaches_all: bool = False,
        aggregates: Iterable[str] = (),
        nested_aggregates: bool = True,
        table_functions: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        cols: dict[str, set[str]] = {}
        for t, cs in tables.items():
            cols.setdefault(norm_name(t), set()).update(norm_name(c) for c in cs)
        self.columns: dict[str, frozenset[str]] = {t: frozenset(c) for t, c in sorted(cols.items())}
        self.schemas: frozenset[str] = DEFAULT_SCHEMAS | {norm_name(s) for s in schemas}
        self.bind_select_list = bind_select_list
        self.fresh_aliases = fresh_aliases
        self.alias_refuse: frozenset[str] = frozenset(norm_name(n) for n in alias_refuse)
        self.cte_names = cte_names
        self.alias_clauses: frozenset[str] = frozenset(alias_clauses) & frozenset(
            ALIAS_CLAUSES.values()
        )
        self.output_refuse: frozenset[str] = frozenset(norm_name(n) for n in output_refuse)
        self.all_columns: frozenset[str] = frozenset().union(*self.columns.values())
        # schema -> tables, (schema, table) -> columns (normalized); None: off
        self.table_schemas: dict[str, frozenset[str]] | None = None
        self.schema_columns: dict[tuple[str, str], frozenset[str]] | None = None
        self.default_schema: str | None = None
        if table_schemas is not None and default_schema is not None:
            by: dict[tuple[str, str], set[str]] = {}
            for sch, ts in table_schemas.items():
                for t, cs in ts.items():
                    key = (norm_name(sch), norm_name(t))
                    by.setdefault(key, set()).update(norm_name(c) for c in cs)
            self.schema_columns = {k: frozenset(v) for k, v in sorted(by.items())}
            names: dict[str, set[str]] = {}
            for sch, t in self.schema_columns:
                names.setdefault(sch, set()).add(t)
            self.table_schemas = {k: frozenset(v) for k, v in sorted(names.items())}
            self.default_schema = norm_name(default_schema)
        # a bare table name reaches every schema's tables (SQLite), not only the default's
        self.bare_reaches_all = bare_reaches_all and self.schema_columns is not None
        self.aggregates: frozenset[str] = frozenset(norm_name(n) for n in aggregates)
        self.nested_aggregates = nested_aggregates or not self.aggregates
        self.table_functions: dict[str, tuple[str, ...]] = {
            norm_name(f): tuple(norm_name(c) for c in cs)
            for f, cs in sorted((table_functions or {}).items())
        }
        body: dict[str, Any] = {
            "tables": {t: sorted(c) for t, c in self.columns.items()},
            "schemas": sorted(self.schemas),
        }
        if bind_select_list:
            body["bind_select_list"] = True
        if fresh_aliases:
            body["fresh_aliases"] = True
        if self.alias_refuse:
            body["alias_refuse"] = sorted(self.alias_refuse)
        if cte_names:
            body["cte_names"] = True
        if self.alias_clauses:
            body["alias_clauses"] = sorted(self.alias_clauses)
        if self.output_refuse:
            body["output_refuse"] = sorted(self.output_refuse)
        if self.schema_columns is not None:
            body["table_schemas"] = self.nested_schemas()
            body["default_schema"] = self.default_schema
            if self.bare_reaches_all:
                body["bare_reaches_all"] = True
        if self.aggregates:
            body["aggregates"] = sorted(self.aggregates)
            if not self.nested_aggregates:
                body["nested_aggregates"] = False
        if self.table_functions:
            body["table_functions"] = {f: list(cs) for f, cs in self.table_functions.items()}
        self.fingerprint: str = fingerprint("scope-table", body)

    def nested_schemas(self) -> dict[str, dict[str, list[str]]] | None:
        """``table_schemas`` as schema -> table -> sorted columns (what the fingerprint and
        the audit archive hold; None when off)."""
        if self.schema_columns is None:
            return None
        out: dict[str, dict[str, list[str]]] = {}
        for (sch, t), cs in self.schema_columns.items():
            out.setdefault(sch, {})[t] = sorted(cs)
        return out

    def function_outs(self, function: str, alias: str | None) -> tuple[str, ...]:
        """The columns a FROM item calling ``function`` (normalized) exposes, with ``alias``
        (normalized, no column list) or none: :attr:`table_functions`; a function returning
        one scalar names its column by the alias, else by itself (PostgreSQL's rule)."""
        cols = self.table_functions.get(function)
        if cols is None:
            return ()
        return cols or ((alias,) if alias is not None else (function,))

    def bare_tables(self) -> frozenset[str] | None:
        """The tables a bare name in FROM reaches (None: every table)."""
        if self.table_schemas is None or self.default_schema is None:
            return None
        if self.bare_reaches_all:
            return frozenset(self.columns)
        return self.table_schemas.get(self.default_schema, frozenset())

    def __repr__(self) -> str:
        return f"ScopeTable({len(self.columns)} tables, fp={self.fingerprint[:12]})"
