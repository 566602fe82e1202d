"""Function calls and ``SELECT TOP`` that the statement's dialect does not have.

Split out of :mod:`grid_sql.policy.conformance` (which re-exports these names): models borrow
functions and clauses from other dialects; these findings name the dialect's own spelling.
"""

from __future__ import annotations

import functools
import re
import sqlite3

from sqlglot import exp

from .findings import DIALECT_LABEL, Finding

# --------------------------------------------------------------------------- dialect functions


@functools.lru_cache(maxsize=1)
def sqlite_functions() -> frozenset[str]:
    """Every function the linked SQLite library provides (``PRAGMA function_list``).

    Why ask the library: math and JSON functions are compile-time options, and ``concat``
    only arrived in 3.44; the library that will run the statement is the authority.
    """
    con = sqlite3.connect(":memory:")
    try:
        return frozenset(r[0].lower() for r in con.execute("SELECT name FROM pragma_function_list"))
    finally:
        con.close()


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
