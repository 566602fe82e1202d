"""Schema conformance: does every name in a finished statement mean something here?

The grammar's schema lexicon admits any column of any allowed table at any identifier
position, and the SELECT list precedes FROM (paper Proposition 11), so a small model can write
``T2.name`` where ``name`` lives on ``T1``, a column of a table it never joined, or a function
another dialect has. The engine then fails with "no such column", and its message tells
neither the model nor the user what to write instead.

This module resolves every column reference of a query against the tables in *its* scope
(FROM/JOIN items with their aliases, CTEs, derived tables, correlated outer scopes) using the
:class:`SchemaSnapshot`, and checks every function call against what the dialect provides.
Each :class:`Finding` carries a self-contained ``message`` that names the table, the alias
and the columns the table does have, and a ``fix`` that is one short concrete instruction
("replace `T2.name` with `T1.name`"), because small models follow those best in the repair
round.

Why a separate pass from the policy checker's sqlglot ``qualify``: qualify stops at the first
unknown qualified column with a message that names neither the table nor the alias, and it
quietly picks one table for an ambiguous bare name. Here nothing is guessed: a name that
cannot be judged (a source whose columns are unknown, e.g. ``SELECT *`` in a derived table)
is left alone, so gold SQL is never flagged; the policy checker still fails closed on it.

Suggestions (other tables' columns, close names) only ever mention what the role may read,
so a repair message never discloses a hidden column.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, traverse_scope

from grid_sql.policy.functions import sqlite_functions  # noqa: F401 - re-exported (tests, idioms)
from grid_sql.policy.model import Policy
from grid_sql.schema.model import SchemaSnapshot, TableInfo

FindingKind = Literal[
    "unknown_column",
    "unknown_table",
    "ambiguous_column",
    "unknown_function",
    "duplicate_alias",
    "aggregate_misuse",
]

DIALECT_LABEL = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mysql": "MySQL/MariaDB"}
_MAX_LISTED = 15


@dataclass(frozen=True)
class Finding:
    """One schema-conformance problem: ``message`` says what is wrong, ``fix`` what to write."""

    kind: FindingKind
    message: str
    fix: str | None = None
    table: str | None = None
    column: str | None = None
    position: int | None = None
    snippet: str | None = None
    # Text edits (start, end, replacement) on the checked SQL that carry out ``fix``; empty
    # when the fix is not mechanical (an ambiguous name, a function's arguments).
    edits: tuple[tuple[int, int, str], ...] = ()


def apply_edits(sql: str, edits: Iterable[tuple[int, int, str]]) -> str | None:
    """``sql`` with every edit applied (duplicates once); None if two edits overlap."""
    todo = sorted(set(edits), key=lambda e: (e[0], e[1]), reverse=True)
    if not todo:
        return None
    out = sql
    limit = len(sql) + 1
    for start, end, text in todo:
        if end > limit or start > end:
            return None
        out = out[:start] + text + out[end:]
        limit = start
    return out


@dataclass(frozen=True)
class CertainEdit:
    """A fix the schema alone decides (no guess): one text edit at a column reference.

    ``kind`` is ``requalify`` (``T2.name`` where only one FROM item in scope has ``name``) or
    ``equal_join`` (a bare name several FROM items have, all joined by ``=`` on it, so every
    candidate holds the same value). ``start``/``end`` are offsets into the checked SQL;
    ``old`` is the text there, ``new`` its replacement; ``reason`` says why in words.
    """

    start: int
    end: int
    old: str
    new: str
    reason: str
    kind: Literal["requalify", "equal_join"]


# --------------------------------------------------------------------------- dialect functions


# Functions that models borrow from another dialect and that the named dialect does not have
# (checked against the servers in tests). PostgreSQL and MySQL catalogs are extensible, so
# for them this is a deny-list of certain absences, never an allow-list.
_FOREIGN: dict[str, dict[str, str]] = {
    "postgresql": {
        "year": "EXTRACT(YEAR FROM x)",
        "month": "EXTRACT(MONTH FROM x)",
        "day": "EXTRACT(DAY FROM x)",
        "date_format": "to_char(x, 'YYYY-MM-DD')",
        "strftime": "to_char(x, 'YYYY-MM-DD')",
        "julianday": "x::date - y::date (a number of days)",
        "datediff": "x::date - y::date (a number of days)",
        "ifnull": "COALESCE(x, y)",
        "nvl": "COALESCE(x, y)",
        "iif": "CASE WHEN c THEN a ELSE b END",
        "if": "CASE WHEN c THEN a ELSE b END",
        "group_concat": "string_agg(x, ',')",
        "instr": "strpos(s, sub)",
        "locate": "strpos(s, sub)",
        "charindex": "strpos(s, sub)",
        "len": "length(s)",
        "getdate": "now()",
        "curdate": "CURRENT_DATE",
    },
    "mysql": {
        "strftime": "DATE_FORMAT(x, '%Y-%m-%d')",
        "julianday": "TO_DAYS(x)",
        "date_trunc": "DATE_FORMAT(x, '%Y-%m-01')",
        "date_part": "EXTRACT(YEAR FROM x)",
        "string_agg": "GROUP_CONCAT(x SEPARATOR ',')",
        "iif": "IF(c, a, b)",
        "len": "CHAR_LENGTH(s)",
        "getdate": "NOW()",
        "charindex": "LOCATE(sub, s)",
        "generate_series": "a recursive CTE",
        "age": "TIMESTAMPDIFF(YEAR, x, y)",
    },
}

# What to write in SQLite instead of a function it lacks.
_SQLITE_INSTEAD: dict[str, str] = {
    "year": "strftime('%Y', x)",
    "month": "strftime('%m', x)",
    "day": "strftime('%d', x)",
    "hour": "strftime('%H', x)",
    "date_format": "strftime('%Y-%m-%d', x)",
    "to_char": "strftime('%Y-%m-%d', x)",
    "date_trunc": "strftime('%Y-%m-01', x)",
    "extract": "strftime('%Y', x)",
    "datediff": "julianday(x) - julianday(y)",
    "timestampdiff": "julianday(x) - julianday(y)",
    "now": "datetime('now')",
    "getdate": "datetime('now')",
    "curdate": "date('now')",
    "concat": "a || b",
    "left": "substr(s, 1, n)",
    "right": "substr(s, -n)",
    "len": "length(s)",
    "char_length": "length(s)",
    "isnull": "ifnull(x, y)",
    "nvl": "ifnull(x, y)",
    "if": "iif(c, a, b) or CASE WHEN c THEN a ELSE b END",
    "string_agg": "group_concat(x, ',')",
    "locate": "instr(s, sub)",
    "charindex": "instr(s, sub)",
    "position": "instr(s, sub)",
    "to_date": "date(x)",
    "str_to_date": "date(x)",
}


def function_instead(name: str, dialect: str) -> str | None:
    """What to write in ``dialect`` instead of function ``name`` where a replacement is
    known (the repair hints of the checker and of blocked foreign idioms share them)."""
    low = name.lower()
    if dialect == "sqlite":
        return _SQLITE_INSTEAD.get(low)
    return _FOREIGN.get(dialect, {}).get(low)


# sqlglot node types that are syntax, not calls of a named function.
_SYNTAX = (
    exp.Cast,
    exp.Case,
    exp.Exists,
    exp.In,
    exp.Between,
    exp.Connector,
    exp.Not,
    exp.Paren,
)
# Built-in names the engines parse specially (no function_list entry) in every dialect.
_KEYWORD_FUNCS = frozenset({"cast", "exists", "count", "any", "all", "some", "values"})


def dialect_functions(stmt: exp.Expr, sql: str, dialect: str) -> list[Finding]:
    """Calls of functions the dialect does not have, by the name written in ``sql``."""
    out: list[Finding] = []
    seen: set[tuple[str, int | None]] = set()
    for node in stmt.find_all(exp.Func):
        if isinstance(node, _SYNTAX):
            continue
        meta = node.meta
        if isinstance(node, exp.Extract):
            name, pos = "extract", _keyword_position(sql, "extract")
        elif "start" in meta and "end" in meta:
            pos = int(meta["start"])
            name = sql[pos : int(meta["end"]) + 1]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name):
                continue  # operator-shaped nodes (`->`), quoted names: not judged
        else:
            continue
        low = name.lower()
        if low in _KEYWORD_FUNCS or (low, pos) in seen:
            continue
        if isinstance(node.parent, exp.Dot) or node.args.get("db"):
            continue  # schema-qualified (user-defined) function: the catalog decides
        instead: str | None
        if dialect == "sqlite":
            if low in sqlite_functions():
                continue
            instead = _SQLITE_INSTEAD.get(low)
        else:
            instead = _FOREIGN.get(dialect, {}).get(low)
            if instead is None:
                continue
        seen.add((low, pos))
        label = DIALECT_LABEL.get(dialect, dialect)
        snippet = name if low != "extract" or pos is None else sql[pos : pos + len("extract")]
        msg = f"`{name}(...)`: {label} has no function {name.upper()}"
        fix = None
        if instead:
            msg += f"; use {instead} instead"
            fix = f"replace `{name}(...)` with {instead}"
        out.append(
            Finding("unknown_function", msg + ".", fix, position=pos, snippet=snippet, column=None)
        )
    return out


def _keyword_position(sql: str, word: str) -> int | None:
    m = re.search(rf"(?<![\w$]){word}\s*\(", sql, re.IGNORECASE)
    return m.start() if m else None


# --------------------------------------------------------------------------- SELECT TOP
_TOP = re.compile(r"\bSELECT\s+(?:DISTINCT\s+)?(TOP)\s+\(?\s*(\d+)", re.IGNORECASE)


def top_clause(sql: str, dialect: str) -> Finding | None:
    """``SELECT TOP n`` (SQL Server) is not SQL in any supported dialect: say LIMIT n."""
    m = _TOP.search(sql)
    if m is None:
        return None
    n = m.group(2)
    label = DIALECT_LABEL.get(dialect, dialect)
    return Finding(
        "unknown_function",
        f"`TOP {n}`: {label} has no SELECT TOP; end the statement with LIMIT {n} instead.",
        f"remove `TOP {n}` and append `LIMIT {n}`",
        position=m.start(1),
        snippet=sql[m.start(1) : m.end(2)],
    )


# --------------------------------------------------------------------------- names and tables
class SchemaView:
    """Name resolution the way the engine does it, plus the role's visible columns.

    PostgreSQL folds unquoted names to lower case and compares exactly; SQLite and MySQL
    compare names case-insensitively.
    """

    def __init__(self, snapshot: SchemaSnapshot, policy: Policy, dialect: str) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.dialect = dialect
        self.exact = dialect == "postgresql"
        self.default_schema = policy.default_schema or snapshot.default_schema

    def key(self, name: str) -> str:
        return name if self.exact else name.lower()

    def ident(self, node: exp.Expr | None) -> str:
        """The lookup key of an identifier node as written in the query."""
        if not isinstance(node, exp.Identifier):
            return self.key(node.name) if isinstance(node, exp.Expr) else ""
        if self.exact and not node.quoted:
            return node.name.lower()
        return self.key(node.name)

    def table(self, name: str, schema: str | None) -> tuple[str, TableInfo] | None:
        """(schema name, table) for a key made by :meth:`ident`."""
        for sname in [schema, None] if schema else [None]:
            s = self.snapshot.schema(sname if sname is not None else self.default_schema)
            if s is None:
                continue
            for t in s.tables:
                if self.key(t.name) == name:
                    return s.name, t
        return None

    def has(self, info: TableInfo, column: str) -> bool:
        return any(self.key(c.name) == column for c in info.columns)

    def visible_columns(self, schema: str, info: TableInfo) -> list[str]:
        tp = self.policy.table(info.name, schema)
        if tp is None:
            return []
        return [c.name for c in info.columns if tp.readable(c.name)]

    def visible_tables(self) -> list[tuple[str, TableInfo]]:
        out = []
        for schema, info in self.snapshot.iter_tables():
            tp = self.policy.table(info.name, schema)
            if tp is not None and tp.any_right:
                out.append((schema, info))
        return out


@dataclass
class _Source:
    """One FROM item of a scope: a real table, a derived table/CTE, or something opaque."""

    alias: str  # as written (for messages)
    key: str
    schema: str | None = None
    info: TableInfo | None = None
    outputs: set[str] | None = None  # derived table/CTE column keys (None: unknown)
    opaque: bool = False  # unknown table, table function: columns cannot be judged
    end: int | None = None  # offset just after the FROM item's text (name or alias)
    span: tuple[int, int] | None = None  # the table name as written
    written: str | None = None  # the alias (or bare table name) exactly as the query spells it

    def provides(self, view: SchemaView, column: str) -> bool | None:
        """True/False, or None when this source's columns are unknown."""
        if self.info is not None:
            return view.has(self.info, column)
        if self.outputs is not None:
            return column in self.outputs
        return None

    def label(self) -> str:
        if self.info is None:
            return f"`{self.alias}`"
        if self.alias.lower() == self.info.name.lower():
            return f"table `{self.info.name}`"
        return f"table `{self.info.name}` (alias {self.alias})"


class _Conformance:
    def __init__(self, view: SchemaView, sql: str) -> None:
        self.view = view
        self.sql = sql
        self.out: list[Finding] = []
        self._seen: set[tuple[object, ...]] = set()
        self._sources: dict[int, dict[str, _Source]] = {}
        self.dml_ctes: set[str] = set()  # CTEs with a DML body: sqlglot gives them no scope
        self._swap: dict[int, tuple[_Source, TableInfo]] = {}
        self.certain: list[CertainEdit] = []  # fixes the schema alone decides (autofix)

    def q(self, name: str) -> str:
        return quote_name(name, self.view.dialect)

    def add(self, f: Finding) -> None:
        key = (f.kind, f.table, f.column, f.position, f.snippet)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(f)

    # ---------------------------------------------------------------- sources
    def sources(self, scope: Scope) -> dict[str, _Source]:
        cached = self._sources.get(id(scope))
        if cached is not None:
            return cached
        out: dict[str, _Source] = {}
        for alias, (node, src) in scope.selected_sources.items():
            key = self.view.key(alias)
            if isinstance(src, Scope):
                out[key] = _Source(
                    alias, key, outputs=self._outputs(src), written=_alias_text(node, self.sql)
                )
            elif isinstance(src, exp.Table):
                if isinstance(src.this, exp.Func) or not isinstance(src.this, exp.Identifier):
                    out[key] = _Source(alias, key, opaque=True)
                    continue
                found = self.view.table(
                    self.view.ident(src.this), src.db if src.args.get("db") else None
                )
                if found is None:
                    if self.view.dialect == "mysql" and src.name.lower() == "dual":
                        continue
                    if not src.args.get("db") and self.view.ident(src.this) in self.dml_ctes:
                        out[key] = _Source(alias, key, opaque=True)
                        continue
                    out[key] = _Source(alias, key, opaque=True)
                    self._unknown_table(src)
                    continue
                pos, snip = _span(src.this, self.sql)
                out[key] = _Source(
                    alias,
                    key,
                    schema=found[0],
                    info=found[1],
                    end=_item_end(src, self.sql),
                    span=(pos, pos + len(snip)) if pos is not None and snip else None,
                    written=_alias_text(src, self.sql),
                )
            else:
                out[key] = _Source(alias, key, opaque=True)
        self._sources[id(scope)] = out
        return out

    def _outputs(self, scope: Scope) -> set[str] | None:
        """Column keys a derived table or CTE exposes (None when ``*`` hides them)."""
        expr = scope.expression
        holder = expr.parent
        alias = holder.args.get("alias") if isinstance(holder, exp.CTE | exp.Subquery) else None
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return {self.view.ident(c) for c in alias.columns}
        while isinstance(expr, exp.SetOperation):
            expr = expr.this
        if isinstance(expr, exp.Subquery):
            expr = expr.unnest()
        if not isinstance(expr, exp.Select):
            return None
        names: set[str] = set()
        for p in expr.expressions:
            if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star):
                return None
            if isinstance(p, exp.Alias):
                names.add(self.view.ident(p.args.get("alias")))
            elif isinstance(p, exp.Column):
                names.add(self.view.ident(p.this))
            else:
                names.add(self.view.key(p.sql()))  # engine-named expression column
        return names

    def _unknown_table(self, table: exp.Table) -> None:
        name = table.name
        pos, snip = _span(table.this, self.sql)
        tables = [t.name for _, t in self.view.visible_tables()]
        close = _close(name, tables)
        msg = f"`{name}`: there is no table `{name}` in this database"
        fix = None
        edits: tuple[tuple[int, int, str], ...] = ()
        if close:
            msg += f"; did you mean `{self.q(close)}`?"
            fix = f"replace `{name}` with `{self.q(close)}`"
            if pos is not None and snip is not None:
                edits = ((pos, pos + len(snip), self.q(close)),)
        else:
            msg += f"; tables: {_listed(tables)}."
        self.add(
            Finding("unknown_table", msg, fix, table=name, position=pos, snippet=snip, edits=edits)
        )

    # ---------------------------------------------------------------- scope walk
    def scope(self, scope: Scope) -> None:
        own = self.sources(scope)
        expr = scope.expression
        select_aliases: set[str] = set()
        if isinstance(expr, exp.Select):
            select_aliases = {
                self.view.ident(e.args.get("alias"))
                for e in expr.expressions
                if isinstance(e, exp.Alias)
            }
        self._wrong_table(scope, own, select_aliases)
        for col in scope.find_all(exp.Column):
            if not isinstance(col.this, exp.Identifier | exp.Star):
                continue
            if col.args.get("catalog"):
                continue  # catalog.schema.table.column: left to the policy checker
            if col.args.get("db"):
                self._three_part(scope, col)
                continue
            if col.args.get("table") is not None:
                self._qualified(scope, col)
            elif isinstance(col.this, exp.Identifier):
                if isinstance(expr, exp.SetOperation):
                    continue  # ORDER BY of a UNION names output columns
                self._bare(scope, own, col, select_aliases)

    def _wrong_table(self, scope: Scope, own: dict[str, _Source], aliases: set[str]) -> None:
        """A one-table query none of whose columns the table has, all of which one other
        table has: the model picked the wrong table (``SELECT Country FROM singer_in_concert``
        for ``singer``). Swapping the table is the fix; a join would change the row count."""
        if len(own) != 1:
            return
        (src,) = own.values()
        if src.info is None or src.span is None:
            return
        keys: set[str] = set()
        for col in scope.find_all(exp.Column):
            if not isinstance(col.this, exp.Identifier):
                continue
            qual = col.args.get("table")
            if qual is not None and self.view.ident(qual) != src.key:
                continue
            key = self.view.ident(col.this)
            if qual is None and key in aliases:
                continue
            if self.view.has(src.info, key):
                return  # the table is used for something: not a wrong table
            keys.add(key)
        if not keys:
            return
        owners = [
            info
            for schema, info in self.view.visible_tables()
            if info is not src.info
            and keys <= {self.view.key(c) for c in self.view.visible_columns(schema, info)}
        ]
        if len(owners) == 1:
            self._swap[id(scope)] = (src, owners[0])

    def _chain(
        self, scope: Scope, node: exp.Expr | None = None
    ) -> Iterable[tuple[Scope, dict[str, _Source]]]:
        """The scopes a name written at ``node`` (in ``scope``) may resolve in, innermost
        first. SQLite resolves the GROUP BY and ORDER BY of a SELECT against that SELECT
        alone (resolve.c: "The ORDER BY and GROUP BY clauses may not refer to terms in
        outer queries"), which also hides the outer levels from subqueries nested there."""
        s: Scope | None = scope
        at: exp.Expr | None = node
        cut = node is not None and self.view.dialect == "sqlite"
        while s is not None:
            yield s, self.sources(s)
            if cut and at is not None and _in_group_or_order(at, s):
                return
            at = s.expression
            s = s.parent

    def _qualified(self, scope: Scope, col: exp.Column) -> None:
        qual = self.view.ident(col.args["table"])
        src = next((srcs[qual] for _, srcs in self._chain(scope, col) if qual in srcs), None)
        written, pos = _written(col, self.sql)
        if src is None:
            if isinstance(col.this, exp.Star):
                return  # `x.*` of an unknown alias: the policy checker reports it
            self._unknown_alias(scope, col, written, pos)
            return
        if isinstance(col.this, exp.Star):
            return
        key = self.view.ident(col.this)
        if src.provides(self.view, key) is not False:
            return
        self._requalify(scope, col, src, key, pos)
        self._missing(scope, col, src, key, written, pos)

    def _bare(
        self, scope: Scope, own: dict[str, _Source], col: exp.Column, aliases: set[str]
    ) -> None:
        key = self.view.ident(col.this)
        written, pos = _written(col, self.sql)
        first = True
        for s, srcs in self._chain(scope, col):
            verdicts = [(src, src.provides(self.view, key)) for src in srcs.values()]
            if any(v is None for _, v in verdicts):
                return  # a source with unknown columns might provide it
            hits = [src for src, v in verdicts if v]
            if len(hits) == 1:
                return
            if len(hits) > 1:
                if first and not _shared_by_join(s.expression, key, self.view):
                    self._ambiguous(col, hits, written, pos)
                    self._equal_qualify(s, hits, key, written, pos)
                return
            if first and key in aliases:
                return  # an output alias (ORDER BY/GROUP BY/HAVING; SQLite also WHERE)
            first = False
        self._missing(scope, col, None, key, written, pos)

    # ---------------------------------------------------------------- certain fixes
    def _requalify(
        self, scope: Scope, col: exp.Column, src: _Source, key: str, pos: int | None
    ) -> None:
        """``q.c`` where ``q`` lacks ``c``: requalify when exactly one other FROM item visible
        here (this level or an enclosing one, by the same resolution rules as the finding)
        has ``c``, that item and ``q``'s are both FROM items of this level (moving a reference
        between levels would change what the subquery correlates to), every item's columns
        are known, and the new qualifier binds to that item at this point."""
        if pos is None:
            return
        swap = self._swap.get(id(scope))
        if swap is not None and swap[0] is src:
            return  # the table itself is the wrong one: a different fix, not certain
        verdicts = [
            (s, s.provides(self.view, key)) for s in self._in_scope(scope, col) if s is not src
        ]
        if any(v is None for _, v in verdicts):
            return  # a FROM item with unknown columns might have it too
        owners = [s for s, v in verdicts if v]
        if len(owners) != 1:
            return
        o = owners[0]
        own = self.sources(scope)
        if own.get(o.key) is not o or own.get(src.key) is not src:
            return  # across query levels the edit would add or drop a correlation: a guess
        if o.written is None or (o.info is not None and not self._readable(o, key)):
            return  # never point a reference at a column the role may not read
        bound = next((srcs[o.key] for _, srcs in self._chain(scope, col) if o.key in srcs), None)
        if bound is not o:
            return
        if _compared_with(col, o.key, key, self.view):
            return  # `T1.c = T2.c` -> `T2.c = T2.c` would turn a join condition into TRUE
        cpos, ctext = _span(col.this, self.sql)
        if cpos is None or ctext is None:
            return
        end = cpos + len(ctext)
        self.certain.append(
            CertainEdit(
                pos,
                end,
                self.sql[pos:end],
                f"{o.written}.{ctext}",
                f"{src.label()} has no column `{col.name}`; {o.label()} is the only table "
                "in scope that has it",
                "requalify",
            )
        )

    def _equal_qualify(
        self, scope: Scope, hits: list[_Source], key: str, written: str, pos: int | None
    ) -> None:
        """An ambiguous bare ``c``: qualify it when every candidate is provably equal — all
        candidates are real tables whose ``c`` has one declared type, joined by ``=`` on ``c``
        (top-level AND chains of inner-join ON clauses and WHERE), with no outer join in the
        query (a NULL-extended side would break the equality)."""
        sel = scope.expression
        if pos is None or not isinstance(sel, exp.Select):
            return
        if any(s.info is None or s.written is None for s in hits):
            return
        types = set()
        for s in hits:
            assert s.info is not None
            c = next((c for c in s.info.columns if self.view.key(c.name) == key), None)
            if c is None:
                return
            types.add(c.type.strip().lower())
        if len(types) != 1:
            return  # affinity could make `=` true between values that differ
        joins = sel.args.get("joins") or []
        conds: list[exp.Expr] = []
        for j in joins:
            kind = j.text("kind").upper()
            if j.text("side") or j.args.get("method") or kind not in ("", "INNER", "CROSS"):
                return
            if j.args.get("on") is not None:
                conds.append(j.args["on"])
        where = sel.args.get("where")
        if where is not None:
            conds.append(where.this)
        own = self.sources(scope)
        parent: dict[int, int] = {id(s): id(s) for s in hits}

        def find(x: int) -> int:
            while parent[x] != x:
                x = parent[x]
            return x

        for cond in conds:
            for eq in _conjuncts(cond):
                if not isinstance(eq, exp.EQ):
                    continue
                ends = []
                for side in (eq.this, eq.expression):
                    side = side.unnest() if isinstance(side, exp.Paren) else side
                    if not isinstance(side, exp.Column) or side.args.get("table") is None:
                        break
                    if not isinstance(side.this, exp.Identifier):
                        break
                    if self.view.ident(side.this) != key:
                        break
                    bound = own.get(self.view.ident(side.args["table"]))
                    if bound is None or id(bound) not in parent:
                        break
                    ends.append(id(bound))
                if len(ends) == 2:
                    parent[find(ends[0])] = find(ends[1])
        if len({find(id(s)) for s in hits}) != 1:
            return
        choice = next((s for s in hits if self._readable(s, key)), None)
        if choice is None or own.get(choice.key) is not choice:
            return
        labels = " and ".join(s.label() for s in hits)
        self.certain.append(
            CertainEdit(
                pos,
                pos + len(written),
                written,
                f"{choice.written}.{written}",
                f"`{written}` is ambiguous, but {labels} are joined by `=` on it, so every "
                "candidate holds the same value",
                "equal_join",
            )
        )

    # ---------------------------------------------------------------- messages
    def _in_scope(self, scope: Scope, node: exp.Expr | None = None) -> list[_Source]:
        out: list[_Source] = []
        for _, srcs in self._chain(scope, node):
            out.extend(srcs.values())
        return out

    def _hidden_outer(self, scope: Scope, col: exp.Column, key: str) -> list[_Source]:
        """Sources of enclosing queries that have ``key`` but that SQLite hides from ``col``
        (a subquery's GROUP BY/ORDER BY), for the message."""
        seen = {id(s) for s in self._in_scope(scope, col)}
        return [
            s for s in self._in_scope(scope) if id(s) not in seen and s.provides(self.view, key)
        ]

    def _missing(
        self,
        scope: Scope,
        col: exp.Column,
        src: _Source | None,
        key: str,
        written: str,
        pos: int | None,
    ) -> None:
        name = col.name
        in_scope = self._in_scope(scope, col)
        owners = [s for s in in_scope if s is not src and s.provides(self.view, key)]
        owners = [s for s in owners if s.info is None or self._readable(s, key)]
        parts: list[str] = []
        fix: str | None = None
        edits: list[tuple[int, int, str]] = []
        here = (pos, pos + len(written)) if pos is not None else None
        if src is not None:
            parts.append(f"`{written}`: {src.label()} has no column `{name}`")
            cols = self._columns_of(src)
            if cols:
                parts.append(f"it has {_listed(cols)}")
        elif len(self.sources(scope)) == 1:
            only = next(iter(self.sources(scope).values()))
            parts.append(f"`{written}`: {only.label()} has no column `{name}`")
            cols = self._columns_of(only)
            if cols:
                parts.append(f"it has {_listed(cols)}")
        else:
            labels = ", ".join(s.label() for s in self.sources(scope).values())
            labels = f" ({labels})" if labels else ""
            parts.append(f"`{written}`: no table in this query{labels} has a column `{name}`")
        hidden = self._hidden_outer(scope, col, key)
        if hidden:
            labels = ", ".join(s.label() for s in hidden)
            parts.append(
                f"{labels} of the enclosing query has `{name}`, but SQLite resolves a "
                "subquery's GROUP BY and ORDER BY against the subquery's own FROM only"
            )
        swap = self._swap.get(id(scope))
        if swap is not None and (src is None or src is swap[0]) and swap[0].span is not None:
            wrong, right = swap
            t = self.q(right.name)
            parts.append(
                f"`{name}` is a column of `{right.name}`, which has every column this query "
                f"reads from `{wrong.info.name if wrong.info else wrong.alias}`"
            )
            fix = f"replace table `{wrong.info.name if wrong.info else wrong.alias}` with `{t}`"
            edits.append((*swap[0].span, t))
        elif owners:
            o = owners[0]
            where = ", ".join(s.label() for s in owners)
            parts.append(f"`{name}` is a column of {where}")
            target = f"{o.alias}.{self.q(_col_name(o, key, name))}"
            fix = f"replace `{written}` with `{target}`"
            if here:
                edits.append((*here, target))
        else:
            elsewhere = self._elsewhere(key, in_scope)
            if elsewhere:
                names = ", ".join(f"`{t.name}`" for _, t in elsewhere[:5])
                parts.append(f"`{name}` is a column of {names}, which this query does not join")
                same = self._fk_column(in_scope, elsewhere, key)
                if same is not None:
                    s_src, fk_col, owner = same
                    target = self.q(fk_col)
                    target = f"{s_src.alias}.{target}" if src is not None else target
                    label = s_src.info.name if s_src.info is not None else s_src.alias
                    ref = _col_name_of(owner_info(elsewhere, owner), key, name)
                    parts.append(
                        f"`{label}.{fk_col}` holds the same values (foreign key to `{owner}.{ref}`)"
                    )
                    fix = f"replace `{written}` with `{target}`"
                    if here:
                        edits.append((*here, target))
                else:
                    fix, join_edits = self._join_fix(scope, in_scope, elsewhere, key, written, here)
                    edits.extend(join_edits)
            else:
                close = self._close_in(src, in_scope, name)
                if close is not None:
                    alias, cname = close
                    target = f"{alias}.{self.q(cname)}" if src is not None else self.q(cname)
                    parts.append(f"did you mean `{target}`?")
                    fix = f"replace `{written}` with `{target}`"
                    if here:
                        edits.append((*here, target))
        table = src.info.name if src is not None and src.info is not None else None
        self.add(
            Finding(
                "unknown_column",
                "; ".join(parts) + ("" if parts[-1].endswith("?") else "."),
                fix,
                table=table,
                column=name,
                position=pos,
                snippet=written if pos is not None else None,
                edits=tuple(edits),
            )
        )

    def _readable(self, src: _Source, key: str) -> bool:
        assert src.info is not None and src.schema is not None
        return any(self.view.key(c) == key for c in self.view.visible_columns(src.schema, src.info))

    def _columns_of(self, src: _Source) -> list[str]:
        if src.info is not None and src.schema is not None:
            return self.view.visible_columns(src.schema, src.info)
        return sorted(src.outputs or ())

    def _elsewhere(self, key: str, in_scope: list[_Source]) -> list[tuple[str, TableInfo]]:
        """Visible tables outside the query with a readable column ``key``."""
        joined = {id(s.info) for s in in_scope if s.info is not None}
        out = []
        for schema, info in self.view.visible_tables():
            if id(info) in joined:
                continue
            if any(self.view.key(c) == key for c in self.view.visible_columns(schema, info)):
                out.append((schema, info))
        return out

    def _fk_column(
        self, in_scope: list[_Source], elsewhere: list[tuple[str, TableInfo]], key: str
    ) -> tuple[_Source, str, str] | None:
        """An in-scope foreign-key column referring to ``owner.key`` for a missing ``key``:
        the model wanted the key value, which the joined table already holds."""
        owners = {t.name.lower() for _, t in elsewhere}
        for src in in_scope:
            if src.info is None:
                continue
            for fk in src.info.foreign_keys:
                if fk.referred_table.lower() not in owners:
                    continue
                for c, r in zip(fk.columns, fk.referred_columns, strict=False):
                    if self.view.key(r) == key:
                        return src, c, fk.referred_table
        return None

    def _join_fix(
        self,
        scope: Scope,
        in_scope: list[_Source],
        elsewhere: list[tuple[str, TableInfo]],
        key: str,
        written: str,
        here: tuple[int, int] | None,
    ) -> tuple[str, list[tuple[int, int, str]]]:
        """``JOIN t ON t.k = a.fk`` along a foreign key between a joined table and an owner,
        with the edits that insert it right after that table's FROM item."""
        for _, owner in elsewhere:
            for src in in_scope:
                if src.info is None:
                    continue
                on = _fk_condition(src, owner, self.q)
                if on is not None:
                    cname = next(c.name for c in owner.columns if self.view.key(c.name) == key)
                    t = self.q(owner.name)
                    target = f"{t}.{self.q(cname)}"
                    edits: list[tuple[int, int, str]] = []
                    if here and src.end is not None:
                        edits = [(src.end, src.end, f" JOIN {t} ON {on}"), (*here, target)]
                        edits += self._qualify_shared(scope, src, [owner])
                    fix = f"add `JOIN {t} ON {on}` and replace `{written}` with `{target}`"
                    return fix, edits
        # Two hops through a link table (many-to-many: teacher - course_arrange - course).
        joined = {id(s.info) for s in in_scope if s.info is not None}
        for _, owner in elsewhere:
            for src in in_scope:
                if src.info is None:
                    continue
                for _, bridge in self.view.visible_tables():
                    if id(bridge) in joined or bridge is owner:
                        continue
                    first = _fk_condition(src, bridge, self.q)
                    via = _Source(bridge.name, self.view.key(bridge.name), info=bridge)
                    second = _fk_condition(via, owner, self.q) if first else None
                    if first is None or second is None:
                        continue
                    cname = next(c.name for c in owner.columns if self.view.key(c.name) == key)
                    b, t = self.q(bridge.name), self.q(owner.name)
                    target = f"{t}.{self.q(cname)}"
                    clause = f" JOIN {b} ON {first} JOIN {t} ON {second}"
                    edits = []
                    if here and src.end is not None:
                        edits = [(src.end, src.end, clause), (*here, target)]
                        edits += self._qualify_shared(scope, src, [bridge, owner])
                    fix = f"add `{clause.strip()}` and replace `{written}` with `{target}`"
                    return fix, edits
        owner = elsewhere[0][1]
        cname = next(c.name for c in owner.columns if self.view.key(c.name) == key)
        t = self.q(owner.name)
        return f"join table `{t}` and write `{t}.{self.q(cname)}`", []

    def _qualify_shared(
        self, scope: Scope, src: _Source, added: list[TableInfo]
    ) -> list[tuple[int, int, str]]:
        """Edits qualifying the bare names of ``src`` that the added tables also have (a
        join on a shared key column would otherwise make ``course_id`` ambiguous)."""
        out: list[tuple[int, int, str]] = []
        if src.info is None:
            return out
        for col in scope.find_all(exp.Column):
            if col.args.get("table") is not None or not isinstance(col.this, exp.Identifier):
                continue
            key = self.view.ident(col.this)
            if not self.view.has(src.info, key):
                continue
            if any(self.view.has(t, key) for t in added):
                written, pos = _written(col, self.sql)
                if pos is not None:
                    out.append((pos, pos + len(written), f"{src.alias}.{written}"))
        return out

    def _close_in(
        self, src: _Source | None, in_scope: list[_Source], name: str
    ) -> tuple[str, str] | None:
        cands: list[tuple[str, str]] = []
        for s in [src] if src is not None else in_scope:
            if s is None:
                continue
            for c in self._columns_of(s):
                cands.append((s.alias, c))
        close = _close(name, [c for _, c in cands])
        if close is None:
            return None
        return next(pair for pair in cands if pair[1] == close)

    def _unknown_alias(self, scope: Scope, col: exp.Column, written: str, pos: int | None) -> None:
        qual = col.table
        in_scope = self._in_scope(scope, col)
        labels = ", ".join(
            f"`{s.info.name}` AS {s.alias}" if s.info is not None else f"`{s.alias}`"
            for s in in_scope
        )
        key = self.view.ident(col.this)
        msg = f"`{written}`: there is no table or alias `{qual}` in this query"
        if labels:
            msg += f" (in scope: {labels})"
        if any(self.view.ident(col.args["table"]) in srcs for _, srcs in self._chain(scope)):
            msg += (
                f"; `{qual}` belongs to the enclosing query, but SQLite resolves a subquery's "
                "GROUP BY and ORDER BY against the subquery's own FROM only"
            )
        owners = [s for s in in_scope if s.provides(self.view, key)]
        fix = None
        if len(owners) == 1:
            o = owners[0]
            cname = _col_name(o, key, col.name)
            msg += f"; `{col.name}` is a column of {o.label()}"
            fix = f"replace `{written}` with `{o.alias}.{self.q(cname)}`"
        edits: tuple[tuple[int, int, str], ...] = ()
        if fix is not None and pos is not None:
            edits = ((pos, pos + len(written), f"{owners[0].alias}.{self.q(cname)}"),)
        self.add(
            Finding(
                "unknown_table",
                msg + ".",
                fix,
                table=qual,
                column=col.name,
                position=pos,
                snippet=written if pos is not None else None,
                edits=edits,
            )
        )

    def _three_part(self, scope: Scope, col: exp.Column) -> None:
        """``a.b.c`` is ``schema.table.column``. When ``a`` names no schema of this database
        the reference cannot resolve anywhere (SQLite: "no such column: a.b.c"), however the
        rest reads — typically a model that wrote ``table.column`` and went on with ``. x``.
        A real schema is left to the policy checker, as before."""
        db = self.view.ident(col.args["db"])
        schemas = {self.view.key(sc.name) for sc in self.view.snapshot.schemas}
        if self.view.dialect == "sqlite":
            schemas |= {"main", "temp"}
        if db in schemas or isinstance(col.this, exp.Star):
            return
        start, _ = _span(col.args["db"], self.sql)
        cpos, ctext = _span(col.this, self.sql)
        pos: int | None = None
        if start is not None and cpos is not None and ctext is not None:
            written, pos = self.sql[start : cpos + len(ctext)], start
        else:
            written = f"{col.args['db'].name}.{col.table}.{col.name}"
        msg = (
            f"`{written}`: `{col.args['db'].name}` is not a schema of this database, so this "
            "three-part name (schema.table.column) cannot resolve; a column is written "
            "`table.column` or `alias.column`"
        )
        fix = None
        edits: tuple[tuple[int, int, str], ...] = ()
        src = next((srcs[db] for _, srcs in self._chain(scope, col) if db in srcs), None)
        middle = self.view.ident(col.args["table"])
        if src is not None and src.provides(self.view, middle):
            new = f"{src.alias}.{self.q(_col_name(src, middle, col.table))}"
            fix = f"replace `{written}` with `{new}`"
            if pos is not None:
                edits = ((pos, pos + len(written), new),)
        self.add(
            Finding(
                "unknown_column",
                msg + ".",
                fix,
                table=col.args["db"].name,
                column=col.name,
                position=pos,
                snippet=written if pos is not None else None,
                edits=edits,
            )
        )

    def _ambiguous(
        self, col: exp.Column, hits: list[_Source], written: str, pos: int | None
    ) -> None:
        key = self.view.ident(col.this)
        name = col.name
        labels = " and ".join(s.label() for s in hits)
        options = " or ".join(f"`{s.alias}.{self.q(_col_name(s, key, name))}`" for s in hits)
        self.add(
            Finding(
                "ambiguous_column",
                f"`{written}` is ambiguous: {labels} both have a column `{name}`; "
                f"qualify it as {options}.",
                f"replace `{written}` with {options}",
                column=name,
                position=pos,
                snippet=written if pos is not None else None,
            )
        )


def _compared_with(col: exp.Column, qual: str, key: str, view: SchemaView) -> bool:
    """Is ``col`` one side of a comparison whose other side is ``qual.key`` already?"""
    parent = col.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not isinstance(parent, exp.Binary) or isinstance(parent, exp.Connector):
        return False
    for side in (parent.this, parent.expression):
        side = side.unnest() if isinstance(side, exp.Paren) else side
        if side is col or not isinstance(side, exp.Column):
            continue
        t = side.args.get("table")
        if t is not None and view.ident(t) == qual and view.ident(side.this) == key:
            return True
    return False


def _conjuncts(node: exp.Expr) -> Iterable[exp.Expr]:
    """The top-level AND chain of a condition (parentheses looked through)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _alias_text(node: exp.Expr | None, sql: str) -> str | None:
    """A FROM item's alias (else its table name) exactly as written, quotes included."""
    if node is None:
        return None
    alias = node.args.get("alias")
    ident = alias.this if isinstance(alias, exp.TableAlias) else None
    if ident is None and isinstance(node, exp.Table):
        ident = node.this
    if not isinstance(ident, exp.Identifier):
        return None
    _, text = _span(ident, sql)
    return text


def _in_group_or_order(node: exp.Expr, scope: Scope) -> bool:
    """Is ``node`` inside the GROUP BY or ORDER BY of ``scope``'s own SELECT (not of a
    window, whose ORDER BY sees outer columns)?"""
    sel = scope.expression
    if not isinstance(sel, exp.Select):
        return False
    targets = [sel.args.get("group"), sel.args.get("order")]
    n: exp.Expr | None = node
    while n is not None and n is not sel:
        if isinstance(n, exp.Window):
            return False
        if any(n is t for t in targets if t is not None):
            return True
        n = n.parent
    return False


def _col_name(src: _Source, key: str, written: str) -> str:
    if src.info is not None:
        for c in src.info.columns:
            if c.name == key or c.name.lower() == key.lower():
                return c.name
    return written


def owner_info(elsewhere: list[tuple[str, TableInfo]], name: str) -> TableInfo | None:
    return next((t for _, t in elsewhere if t.name.lower() == name.lower()), None)


def _col_name_of(info: TableInfo | None, key: str, written: str) -> str:
    if info is not None:
        for c in info.columns:
            if c.name.lower() == key.lower():
                return c.name
    return written


def _fk_condition(src: _Source, owner: TableInfo, q: Callable[[str], str]) -> str | None:
    assert src.info is not None
    o = q(owner.name)
    for fk in src.info.foreign_keys:
        if fk.referred_table.lower() == owner.name.lower():
            return " AND ".join(
                f"{o}.{q(r)} = {src.alias}.{q(c)}"
                for c, r in zip(fk.columns, fk.referred_columns, strict=False)
            )
    for fk in owner.foreign_keys:
        if fk.referred_table.lower() == src.info.name.lower():
            return " AND ".join(
                f"{o}.{q(c)} = {src.alias}.{q(r)}"
                for c, r in zip(fk.columns, fk.referred_columns, strict=False)
            )
    return None


def _shared_by_join(select: exp.Expr, key: str, view: SchemaView) -> bool:
    """``JOIN ... USING (c)`` and NATURAL joins make a shared column name unambiguous."""
    for join in select.args.get("joins") or []:
        if join.args.get("method") and str(join.args["method"]).upper() == "NATURAL":
            return True
        if "natural" in (join.text("kind").lower(), join.text("side").lower()):
            return True
        using = join.args.get("using")
        if using and any(
            view.ident(u if isinstance(u, exp.Identifier) else u.this) == key for u in using
        ):
            return True
    return False


def _item_end(table: exp.Table, sql: str) -> int | None:
    """Offset just after a FROM item as written (``t``, ``t AS x``, ``t x``), or after its
    whole JOIN clause (``JOIN t AS x ON ...``): a join inserted there may refer to it."""
    root: exp.Expr = table.parent if isinstance(table.parent, exp.Join) else table
    starts: list[int] = []
    ends: list[int] = []
    for node in root.walk():
        meta = node.meta if isinstance(node, exp.Expr) else {}
        if "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]) + 1)  # meta spans the quotes of a quoted name
    if not ends:
        return None
    end = max(ends)
    depth = sql[min(starts) : end].count("(") - sql[min(starts) : end].count(")")
    while depth > 0:  # `ON (a = b)`: step over the closing parentheses
        rest = sql[end:]
        stripped = rest.lstrip()
        if not stripped.startswith(")"):
            break
        end += len(rest) - len(stripped) + 1
        depth -= 1
    return end


def _span(node: exp.Expr | None, sql: str) -> tuple[int | None, str | None]:
    meta = getattr(node, "meta", None) or {}
    if "start" in meta and "end" in meta:
        start, end = int(meta["start"]), int(meta["end"])
        return start, sql[start : end + 1]
    return None, None


def _written(col: exp.Column, sql: str) -> tuple[str, int | None]:
    """The reference as written (``T2.name``) and its offset, or a rebuilt text."""
    start, snip = _span(col.this, sql)
    tpos, _ = _span(col.args.get("table"), sql)
    if start is not None and snip is not None:
        end = start + len(snip)
        if tpos is not None and tpos < start:
            start = tpos
        return sql[start:end], start
    table = col.table
    return (f"{table}.{col.name}" if table else col.name), None


def _close(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` ignoring case and underscores, if it is close."""
    norm = {re.sub(r"[_\s]", "", c.lower()): c for c in candidates}
    target = re.sub(r"[_\s]", "", name.lower())
    if target in norm:
        return norm[target]
    hit = difflib.get_close_matches(target, list(norm), n=1, cutoff=0.8)
    return norm[hit[0]] if hit else None


def quote_name(name: str, dialect: str) -> str:
    """``name`` as it must be written in ``dialect`` (PostgreSQL: quoted unless lower case)."""
    plain = r"[a-z_][a-z0-9_$]*" if dialect == "postgresql" else r"[A-Za-z_][A-Za-z0-9_$]*"
    if re.fullmatch(plain, name):
        return name
    if dialect == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (", …" if len(names) > _MAX_LISTED else "")


# --------------------------------------------------------------------------- entry point
def check_query(query: exp.Expr, sql: str, view: SchemaView) -> list[Finding]:
    """Schema findings for one parsed query (a SELECT, set operation or WITH query)."""
    return _check(query, sql, view).out


def certain_fixes(query: exp.Expr, sql: str, view: SchemaView) -> list[CertainEdit]:
    """The fixes of :func:`check_query`'s column findings that the schema alone decides
    (see :class:`CertainEdit`); everything else (close spellings, several candidates,
    unknown tables) has none here."""
    return _check(query, sql, view).certain


def _check(query: exp.Expr, sql: str, view: SchemaView) -> _Conformance:
    if view.exact:  # PostgreSQL: fold unquoted names once, then compare exactly
        query = normalize_identifiers(query.copy(), dialect="postgres")
    run = _Conformance(view, sql)
    run.dml_ctes = {
        view.key(cte.alias_or_name)
        for cte in query.find_all(exp.CTE)
        if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete | exp.Merge)
    }
    for scope in traverse_scope(query):
        try:
            scope.selected_sources  # noqa: B018 - sqlglot raises here on a reused name
        except OptimizeError as exc:
            name = str(exc).split(": ", 1)[-1]
            run.add(
                Finding(
                    "duplicate_alias",
                    f"`{name}` names two FROM items of one query; no column can be read "
                    "through it unambiguously.",
                    f"give each FROM item its own alias (e.g. `{name}2` for the second).",
                    table=name,
                )
            )
            continue  # its columns cannot be resolved
        run.scope(scope)
    return run
