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
* SQLite and PostgreSQL: ``DISTINCT`` followed by more than one expression in an aggregate
  (``count(DISTINCT a, b)``, MySQL's form; SQLite: "wrong number of arguments", PostgreSQL: no
  such function);
* SQLite only: an aggregate in ``ORDER BY`` or ``HAVING`` of a query that is not an aggregate
  query (no ``GROUP BY`` and no aggregate in its select list). PostgreSQL accepts
  ``SELECT 1 FROM t ORDER BY count(*)`` and fails only on ungrouped columns (a rule with
  functional dependencies, not modelled here); MySQL/MariaDB accept it outright.

A call with ``OVER`` is a window, not an aggregate. Nothing is guessed: an aggregate in a
subquery that reads a column of an enclosing query may belong to that query (SQL's outer
aggregates), so it is judged only when every column it reads is qualified by a FROM item of
its own query; compound queries' ORDER BY is not judged.

One finding carries a mechanical fix (``Finding.edits``): a condition on an aggregate that
is one AND-conjunct of the WHERE of a query *with* a GROUP BY moves to that query's HAVING
(``WHERE a = 1 AND count(*) > 2 GROUP BY b`` → ``WHERE a = 1 GROUP BY b HAVING count(*) >
2``). A per-row filter on a per-group value means nothing; the per-group filter is the only
reading under which the statement is valid SQL, and the GROUP BY the model wrote says what a
group is. Without a GROUP BY there is no such reading (HAVING on an ungrouped query turns it
into one group), so nothing is proposed. The move is made on the token stream and only where
it is unambiguous: no top-level OR or BETWEEN in the WHERE, no top-level OR in the HAVING; a
moved condition the HAVING already states is dropped instead of repeated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from grid_sql.dialect import Dialect
from grid_sql.policy.conformance import Finding

# Clauses of a SELECT where no dialect takes an aggregate of that SELECT.
_NEVER = {
    "where": "WHERE",
    "group": "GROUP BY",
    "joins": "ON",
    "limit": "LIMIT",
    "offset": "OFFSET",
}


def _is_aggregate(node: exp.Expr, dialect: str) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    agg = Dialect.get(dialect).linked_aggregates() if isinstance(node, exp.Anonymous) else None
    if agg is not None:  # an aggregate sqlglot does not know, e.g. a SQLite extension's
        name, n = str(node.name).lower(), len(node.expressions)
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


# Tokens that end a WHERE condition, a GROUP BY list or a HAVING condition at their depth.
_CLAUSE_END = frozenset(
    getattr(TokenType, n)
    for n in (
        "GROUP_BY",
        "HAVING",
        "ORDER_BY",
        "LIMIT",
        "OFFSET",
        "FETCH",
        "WINDOW",
        "QUALIFY",
        "UNION",
        "INTERSECT",
        "EXCEPT",
        "SEMICOLON",
        "FOR",
        "LOCK",
    )
    if hasattr(TokenType, n)
)
_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.CASE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.END})


def _clause(tokens: Sequence[Token], i: int) -> tuple[int, list[tuple[int, int]], set[str]]:
    """From token ``i`` (just after a clause keyword): the index of the token ending the
    clause, its top-level AND-separated parts as (first, last) token indices, and the
    top-level operator words seen (``OR``, ``BETWEEN``)."""
    depth = 0
    parts: list[tuple[int, int]] = []
    seen: set[str] = set()
    first = i
    j = i
    while j < len(tokens):
        tt = tokens[j].token_type
        if depth == 0 and (tt in _CLAUSE_END or tt in _CLOSE and tt != TokenType.END):
            break
        if tt in _OPEN:
            depth += 1
        elif tt in _CLOSE:
            depth -= 1
        elif depth == 0 and tt == TokenType.AND:
            parts.append((first, j - 1))
            first = j + 1
        elif depth == 0 and tt in (TokenType.OR, TokenType.BETWEEN):
            seen.add(tt.name)
        j += 1
    parts.append((first, j - 1))
    return j, parts, seen


def _conjuncts(cond: exp.Expr) -> list[exp.Expr]:
    return list(cond.flatten()) if isinstance(cond, exp.And) else [cond.unnest()]


def having_edits(
    select: exp.Select, sql: str, dialect: str, positions: Sequence[int]
) -> tuple[tuple[int, int, str], ...]:
    """The text edits moving the WHERE conjuncts of ``select`` that hold the aggregate calls
    written at ``positions`` to its HAVING (see the module doc), or () when the move is not
    clean. The token split is cross-checked against sqlglot's own reading of the clauses."""
    where, having = select.args.get("where"), select.args.get("having")
    if where is None or not select.args.get("group") or not positions:
        return ()
    try:
        tokens = sqlglot.Dialect.get_or_raise(Dialect.get(dialect).sqlglot).tokenize(sql)
    except (TokenError, ValueError):
        return ()
    starts = {t.start: k for k, t in enumerate(tokens)}
    at = [starts.get(p) for p in positions]
    if any(k is None for k in at):
        return ()
    # the WHERE keyword: back from the first call at its own depth
    k = min(a for a in at if a is not None)
    depth = 0
    while k >= 0:
        tt = tokens[k].token_type
        if tt in _CLOSE:
            depth += 1
        elif tt in _OPEN:
            depth -= 1
            if depth < 0:
                return ()
        elif depth == 0 and tt == TokenType.WHERE:
            break
        k -= 1
    if k < 0:
        return ()
    w_end, w_parts, w_ops = _clause(tokens, k + 1)
    if w_ops or w_end >= len(tokens) or tokens[w_end].token_type != TokenType.GROUP_BY:
        return ()
    w_ast = _conjuncts(where.this)
    if len(w_ast) != len(w_parts) or any(a > w_end for a in at if a is not None):
        return ()
    g_end, _, _ = _clause(tokens, w_end + 1)
    h_ast: list[exp.Expr] = []
    insert_at = tokens[g_end - 1].end + 1
    if having is not None:
        if g_end >= len(tokens) or tokens[g_end].token_type != TokenType.HAVING:
            return ()
        h_end, h_parts, h_ops = _clause(tokens, g_end + 1)
        h_ast = _conjuncts(having.this)
        if "OR" in h_ops or len(h_ast) != len(h_parts):
            return ()
        insert_at = tokens[h_end - 1].end + 1

    def text(part: tuple[int, int]) -> str:
        return sql[tokens[part[0]].start : tokens[part[1]].end + 1]

    moved, kept = [], []
    for part, node in zip(w_parts, w_ast, strict=True):
        if any(a is not None and part[0] <= a <= part[1] for a in at):
            if not any(node == h for h in h_ast):
                moved.append(text(part))
        else:
            kept.append(text(part))
    if len(kept) == len(w_parts):
        return ()
    w_start = tokens[k].start
    w_stop = tokens[w_end - 1].end + 1
    if kept:
        edits = [(w_start, w_stop, sql[w_start : tokens[k].end + 1] + " " + " AND ".join(kept))]
    else:  # the whole WHERE goes, with the blank before it
        while w_start > 0 and sql[w_start - 1] in " \t\r\n":
            w_start -= 1
        edits = [(w_start, w_stop, "")]
    if moved:
        head = " AND " if having is not None else " HAVING "
        edits.append((insert_at, insert_at, head + " AND ".join(moved)))
    return tuple(edits)


def aggregate_misuse(stmt: exp.Expr, sql: str, dialect: str) -> list[Finding]:
    """Aggregate calls in clauses where ``dialect`` refuses them (see the module doc)."""
    out: list[Finding] = []
    d = Dialect.get(dialect)
    label = d.label
    # per SELECT, the positions of its WHERE aggregates (for the HAVING move)
    in_where: dict[int, tuple[exp.Select, list[int]]] = {}
    if d.distinct_takes_one_expression:
        for agg in stmt.find_all(exp.AggFunc):
            arg = agg.this
            if isinstance(arg, exp.Distinct) and len(arg.expressions) > 1:
                a_pos, a_text = _span(agg, sql)
                listed = ", ".join(e.sql() for e in arg.expressions)
                a_fix = (
                    f"count the distinct combinations with `SELECT count(*) FROM (SELECT "
                    f"DISTINCT {listed} FROM ...)`"
                    if isinstance(agg, exp.Count)
                    else "apply DISTINCT to one expression"
                )
                out.append(
                    Finding(
                        "aggregate_misuse",
                        f"`{a_text}`: {label} takes one expression after DISTINCT in an aggregate.",
                        a_fix,
                        position=a_pos,
                        snippet=a_text if a_pos is not None else None,
                        column=None,
                    )
                )
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
        elif where in ("order", "having") and d.aggregate_needs_grouping:
            if _is_aggregate_query(select, dialect):
                continue
            clause = "ORDER BY" if where == "order" else "HAVING"
            msg = (
                f"`{text}` in {clause}: this query has no GROUP BY and no aggregate in its "
                f"select list, so {label} cannot use an aggregate in its {clause}"
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
        if where == "where" and outer is None and pos is not None:
            in_where.setdefault(id(select), (select, []))[1].append(pos)
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
    for select, positions in in_where.values():
        edits = having_edits(select, sql, dialect, positions)
        if not edits:
            continue
        for i, f in enumerate(out):
            if f.position in positions and not f.edits:
                out[i] = dataclasses.replace(
                    f,
                    fix=f"move the condition on `{f.snippet}` from WHERE to HAVING (the query "
                    "groups with GROUP BY)",
                    edits=edits,
                )
    return out


def nests_aggregates(sql: str, dialect: str) -> bool:
    """``sql`` calls an aggregate directly inside another's arguments, neither a window (the
    nesting :func:`aggregate_misuse` refuses): what the Asker's repair round narrows its
    language against (``grammar/scope_aggregates.py``). False when ``sql`` does not parse."""
    read = Dialect.get(dialect).sqlglot_read
    try:
        trees = sqlglot.parse(sql, read=read)
    except (sqlglot.errors.ParseError, TokenError, RecursionError):
        return False
    for tree in trees:
        for call in tree.find_all(exp.Func) if tree is not None else ():
            if not _is_aggregate(call, dialect) or _windowed(call):
                continue
            select, where, calls = _owner(call)
            if select is None or where is None:
                continue
            outer = next((c for c in calls if _is_aggregate(c, dialect)), None)
            if outer is not None and not _windowed(outer):
                return True
    return False
