"""Aggregate calls where the engine refuses them (``misuse of aggregate``), found before execution.

A grammar cannot tell ``ORDER BY count(*)`` in a grouped query from the same words in an
ungrouped one, and the scope masks do not model grouping, so a small model writes
``SELECT name FROM breeds ORDER BY count(*) DESC LIMIT 1`` (it meant "the breed with the most
dogs" and forgot the GROUP BY). SQLite then fails with "misuse of aggregate: count()", which
tells the model nothing it can act on. This pass names the call, the clause and what to write
instead, so the statement is refused with a quotable message and goes to the repair round
instead of to the database.

What is refused is exactly what the engines refuse (checked against the three servers in
``tests/policy/test_aggregates.py``):

* every dialect: an aggregate in ``WHERE``, ``GROUP BY``, a join's ``ON``, ``LIMIT`` /
  ``OFFSET``, or directly inside another aggregate's arguments (not through a subquery, and
  not when the outer call is a window: ``sum(count(*)) OVER ()`` is valid);
* SQLite only: an aggregate in ``ORDER BY`` or ``HAVING`` of a query that is not an aggregate
  query (no ``GROUP BY`` and no aggregate in its select list). PostgreSQL accepts
  ``SELECT 1 FROM t ORDER BY count(*)`` and fails only on ungrouped columns (a rule with
  functional dependencies, not modelled here); MySQL/MariaDB accept it outright.

A call with ``OVER`` is a window, not an aggregate. Nothing is guessed: an aggregate in a
subquery that reads a column of an enclosing query may belong to that query (SQL's outer
aggregates), so it is judged only when every column it reads is qualified by a FROM item of
its own query; compound queries' ORDER BY is not judged.
"""

from __future__ import annotations

import functools
import sqlite3

from sqlglot import exp

from grid_sql.policy.conformance import DIALECT_LABEL, Finding

# Window-only functions of SQLite's function list: not aggregates (and an error without OVER
# for another reason).
_WINDOW_ONLY = frozenset(
    {
        "cume_dist",
        "dense_rank",
        "first_value",
        "lag",
        "last_value",
        "lead",
        "nth_value",
        "ntile",
        "percent_rank",
        "rank",
        "row_number",
    }
)
# Clauses of a SELECT where no dialect takes an aggregate of that SELECT.
_NEVER = {
    "where": "WHERE",
    "group": "GROUP BY",
    "joins": "ON",
    "limit": "LIMIT",
    "offset": "OFFSET",
}


@functools.lru_cache(maxsize=1)
def sqlite_aggregates() -> frozenset[tuple[str, int]]:
    """(name, argument count) of the linked SQLite's aggregate functions; count -1 = any."""
    con = sqlite3.connect(":memory:")
    try:
        rows = con.execute(
            "SELECT name, narg FROM pragma_function_list WHERE type IN ('a', 'w')"
        ).fetchall()
    finally:
        con.close()
    return frozenset((str(n).lower(), int(k)) for n, k in rows if n.lower() not in _WINDOW_ONLY)


def _is_aggregate(node: exp.Expr, dialect: str) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    if dialect == "sqlite" and isinstance(node, exp.Anonymous):
        name, n = str(node.name).lower(), len(node.expressions)
        agg = sqlite_aggregates()
        return (name, n) in agg or (name, -1) in agg
    return False


def _windowed(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Filter | exp.IgnoreNulls | exp.RespectNulls | exp.WithinGroup):
        parent = parent.parent
    return isinstance(parent, exp.Window)


def _owner(node: exp.Expr) -> tuple[exp.Select | None, str | None, list[exp.Func]]:
    """The SELECT whose aggregate this is, the SELECT argument it sits in, and the calls
    enclosing it below that SELECT (innermost first)."""
    child, parent = node, node.parent
    calls: list[exp.Func] = []
    while parent is not None:
        if isinstance(parent, exp.Select):
            return parent, child.arg_key, calls
        if isinstance(parent, exp.Query | exp.Subquery):
            return None, None, []  # the ORDER BY of a compound, or through a subquery
        if isinstance(parent, exp.Func):
            calls.append(parent)
        child, parent = parent, parent.parent
    return None, None, []


def _local_names(select: exp.Select) -> set[str]:
    """The names ``select``'s own FROM and JOIN items answer to (not those inside them)."""
    items = [select.args.get("from_") or select.args.get("from"), *select.args.get("joins", [])]
    return {i.this.alias_or_name.lower() for i in items if i is not None and i.this is not None}


def _own_level(call: exp.Expr, select: exp.Select) -> bool:
    """True if the call certainly aggregates over ``select``'s rows (see the module doc)."""
    if select.find_ancestor(exp.Select) is None:
        return True
    local = _local_names(select)
    return all(col.table and col.table.lower() in local for col in call.find_all(exp.Column))


def _is_aggregate_query(select: exp.Select, dialect: str) -> bool:
    if select.args.get("group"):
        return True
    for e in select.expressions:
        for f in e.find_all(exp.Func):
            owner, _, _ = _owner(f)
            if owner is select and _is_aggregate(f, dialect) and not _windowed(f):
                return True
    return False


def _span(node: exp.Expr, sql: str) -> tuple[int | None, str]:
    """Where the call is written (name through its closing parenthesis), else its SQL."""
    start = node.meta.get("start") if node.meta else None
    text = node.sql()
    if start is None:
        return None, text
    i = sql.find("(", int(start))
    if i < 0:
        return None, text
    depth, quote = 0, ""
    for j in range(i, len(sql)):
        ch = sql[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return int(start), sql[int(start) : j + 1]
    return None, text


def _columns(select: exp.Select, sql: str) -> list[str]:
    """The select list's plain column references, as written (the GROUP BY to suggest)."""
    out: list[str] = []
    for e in select.expressions:
        col = e.this if isinstance(e, exp.Alias) else e
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            continue
        meta = col.this.meta
        table = col.args.get("table")
        start = table.meta.get("start") if isinstance(table, exp.Identifier) else None
        start = meta.get("start") if start is None else start
        end = meta.get("end")
        out.append(col.sql() if start is None or end is None else sql[int(start) : int(end) + 1])
    return out


def aggregate_misuse(stmt: exp.Expr, sql: str, dialect: str) -> list[Finding]:
    """Aggregate calls in clauses where ``dialect`` refuses them (see the module doc)."""
    out: list[Finding] = []
    label = DIALECT_LABEL.get(dialect, dialect)
    for call in stmt.find_all(exp.Func):
        if not _is_aggregate(call, dialect) or _windowed(call):
            continue
        select, where, calls = _owner(call)
        if select is None or where is None or not _own_level(call, select):
            continue
        pos, text = _span(call, sql)
        msg = fix = None
        outer = next((c for c in calls if _is_aggregate(c, dialect)), None)
        if outer is not None and not _windowed(outer):
            _, otext = _span(outer, sql)
            msg = f"`{otext}`: aggregate calls cannot be nested in {label}"
            fix = f"compute `{text}` per group in a subquery and aggregate its result outside"
        elif where in _NEVER:
            clause = _NEVER[where]
            msg = f"`{text}` in {clause}: {label} does not allow an aggregate in {clause}"
            if where == "where":
                fix = (
                    f"move the condition on `{text}` to HAVING after a GROUP BY, or compare "
                    f"with a subquery `(SELECT {text} FROM ...)`"
                )
            elif where == "group":
                fix = "group by columns; put the aggregate in the select list or in HAVING"
            else:
                fix = f"use a subquery `(SELECT {text} FROM ...)` there"
        elif where in ("order", "having") and dialect == "sqlite":
            if _is_aggregate_query(select, dialect):
                continue
            clause = "ORDER BY" if where == "order" else "HAVING"
            msg = (
                f"`{text}` in {clause}: this query has no GROUP BY and no aggregate in its "
                f"select list, so SQLite cannot use an aggregate in its {clause}"
            )
            cols = _columns(select, sql)
            if cols:
                fix = (
                    f"add `GROUP BY {', '.join(cols)}` before {clause} to aggregate per group, "
                    f"or {'order by a column' if where == 'order' else 'drop the HAVING'}"
                )
            else:
                fix = "add a GROUP BY before it, or drop the aggregate"
        if msg is None:
            continue
        out.append(
            Finding(
                "aggregate_misuse",
                msg + ".",
                fix,
                position=pos,
                snippet=text if pos is not None else None,
                column=None,
            )
        )
    return out
