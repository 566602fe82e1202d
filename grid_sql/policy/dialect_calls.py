"""Function calls and ``SELECT TOP`` that the statement's dialect does not have.

Split out of :mod:`grid_sql.policy.conformance` (which re-exports these names): models borrow
functions and clauses from other dialects; these findings name the dialect's own spelling.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..dialect import Dialect
from ..dialect.sqlite import library_functions
from .findings import Finding

# --------------------------------------------------------------------------- dialect functions
# Which functions a dialect lacks and what to write instead are the dialect's settings
# (``Dialect.function_replacements``, ``Dialect.lacks_function``: SQLite asks its linked
# library, the servers' extensible catalogs get a deny-list of certain absences).
sqlite_functions = library_functions  # kept for callers: the linked SQLite's functions


def function_instead(name: str, dialect: str) -> str | None:
    """What to write in ``dialect`` instead of function ``name`` where a replacement is
    known (the repair hints of the checker and of blocked foreign idioms share them)."""
    return Dialect.lookup(dialect).function_instead(name)


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
    """Calls of functions the dialect does not have, by the name written in ``sql``, and
    calls that give arguments to a function that takes none (``Dialect.niladic_functions``:
    ``statement_timestamp('2021-01-01')`` resolves on no server)."""
    out: list[Finding] = []
    seen: set[tuple[str, int | None]] = set()
    d = Dialect.lookup(dialect)
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
        if low in d.niladic_functions and pos is not None:
            after = sql[pos + len(name) :]
            if re.match(r"\s*\(", after) and not re.match(r"\s*\(\s*\)", after):
                seen.add((low, pos))
                out.append(
                    Finding(
                        "unknown_function",
                        f"`{name}(...)`: {name.upper()} takes no arguments; write {name}().",
                        f"call {name}() with no arguments",
                        position=pos,
                        snippet=name,
                        column=None,
                    )
                )
            continue
        if not d.lacks_function(low) or _table_function(node, low, d):
            continue
        instead = d.function_instead(low)
        seen.add((low, pos))
        label = d.label or dialect
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


def _table_function(node: exp.Func, low: str, d: Dialect) -> bool:
    """A FROM item's call of a table function the dialect has (SQLite's ``json_each`` is a
    virtual-table module, not in its function list)."""
    return isinstance(node.parent, exp.Table | exp.Lateral) and low in d.table_function_names(
        frozenset(d.table_functions), frozenset()
    )


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
    label = Dialect.lookup(dialect).label or dialect
    return Finding(
        "unknown_function",
        f"`TOP {n}`: {label} has no SELECT TOP; end the statement with LIMIT {n} instead.",
        f"remove `TOP {n}` and append `LIMIT {n}`",
        position=m.start(1),
        snippet=sql[m.start(1) : m.end(2)],
    )
