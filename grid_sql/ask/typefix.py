"""Deterministic fixes for the type errors a strict database reported (issue #25 §3).

Why: on defog's PostgreSQL questions the statements the database refused were type errors,
and the repair round mostly wrote the same statement again (a small model does not act on
"operator does not exist: text = bigint", nor on the dialect's hint). Some of those errors have
exactly one reading, which the column types alone decide, so no model is needed:

* **text compared for equality with a number** (``text = bigint``): a text column equal to
  (or ``IN``) an integer column, an integer literal, or an ``IN (SELECT int_col ...)``. The
  number side is written as text: a literal is quoted (``zip = 12345`` -> ``zip = '12345'``),
  a column is cast (``T1.business_id = CAST(T2.bid AS TEXT)``). Casting the text side to a
  number instead could fail on rows that are not numbers; equality of a number's text with a
  text value is what a join on mismatched key types means. Ordering comparisons (``<``) are
  left alone: on text they compare letters, not numbers, so the reading is not certain.
* **LIKE on a column that is not text** (``date ~~ unknown``): the column is cast to text
  (``CAST(order_date AS TEXT) LIKE '2020%'``), the only way the pattern can apply.
* **a text column used as a date** (``text >= timestamp``, ``extract(unknown, text)``;
  defog keeps dates as text in some tables): compared with a date or time value (``=``,
  ``<``, ...), or the source of ``EXTRACT``, the column is cast to that type
  (``CAST(cm.start_dt AS TIMESTAMP) >= t.start_dt - INTERVAL '14 days'``; ``DATE`` against a
  date): a comparison with a time is about time, and EXTRACT reads only dates and times. A
  text that is no date then fails at run time, as the statement did.
* **days between two dates taken as an interval** (``EXTRACT(DAY FROM d1 - d2)`` with both
  operands DATE columns or ``CURRENT_DATE``: ``extract(unknown, integer)``): on PostgreSQL
  the difference of two dates is already the number of days, so the EXTRACT is dropped
  (``(d1 - d2)``). The call's extent is not in the token positions, so this one regenerates
  the statement (below).
* **the year of a year** (``EXTRACT(YEAR FROM year)`` with ``year`` an integer column whose
  name says it holds years: ``extract(unknown, bigint)``): the column already is the year,
  so the call becomes the column (defog's scholar and yelp tables keep years as integers).
  An integer column named otherwise (epoch seconds, a count) is left alone. Regenerated too.

and one grouping error whose fix changes no answer the statement could have meant:

* **a column that is neither grouped nor aggregated** (PostgreSQL's 42803, ``column "t2.name"
  must appear in the GROUP BY clause``; SQLite and MariaDB's default mode run such a statement,
  returning one of the column's values per group): the reported column, and every other bare
  column of that SELECT's list outside aggregates, is appended to its ``GROUP BY`` (``GROUP BY
  T1.did`` -> ``GROUP BY T1.did, T2.name``); a column named in ORDER BY or HAVING is added
  alone. MySQL and MariaDB under ``ONLY_FULL_GROUP_BY`` (MySQL's default) refuse the same
  statements (1055); each dialect reads the column from its message
  (``Dialect.ungrouped_column``). Where the column depends on the grouped key (the name of a
  grouped id: what the model meant) the groups are the same; where it does not, each value is
  its own group, which is the only way the column has one value per row. Only a SELECT that has
  a GROUP BY is changed (one without it asked for an aggregate over everything).
  Regenerated with sqlglot, like the two below.

and one whose statement has one reading that runs:

* **a subquery compared with ``=`` returned several rows** (PostgreSQL's 21000 ``more than
  one row returned by a subquery used as an expression``, MySQL's 1242; SQLite takes the
  first row): ``x = (SELECT ...)`` becomes ``x IN (SELECT ...)`` (``<>``: ``NOT IN``), what
  equality with a set of rows means, for every such comparison whose subquery is not
  single-row by its shape (``LIMIT 1``, aggregates only). Ordering comparisons are left
  alone (``ANY`` or ``ALL``: no single reading). Regenerated.

and one error that SQL itself gives a value for:

* **division by zero** (PostgreSQL's 22012, where SQLite and MySQL return NULL): every
  denominator that is not a non-zero number becomes ``NULLIF(denominator, 0)``, so a ratio
  over an empty group is NULL, SQL's "no value" (defog's own gold ratios are written so).
  A denominator's extent is not in sqlglot's token positions (a function call's name and
  parentheses are not), so this fix regenerates the statement with sqlglot and says so in its
  one edit; the role grammar and the checker judge the result as for the others.

The fixes are applied only when the database reported that error (the dialect's codes:
``Dialect.is_type_error``) on a dialect that does not convert implicitly
(``Dialect.strict_comparison_types``), as exact text edits at the tokens' positions (the
model's formatting is kept), and only if re-parsing the edited statement gives exactly the
tree the same change makes in sqlglot (so an edit can never land anywhere else). The caller
then checks it again (role grammar and checker) before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ..dialect import Dialect
from ..policy.findings import apply_edits
from ..schema.model import SchemaSnapshot

__all__ = ["TypeFix", "cardinality_fix", "group_by_fix", "type_fix", "zero_division_fix"]

_TEXT = exp.DataType.TEXT_TYPES
_NUMBER = exp.DataType.INTEGER_TYPES
_TIMES = exp.DataType.TEMPORAL_TYPES - {exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ}


@dataclass(frozen=True)
class TypeFix:
    """A statement with its type errors fixed: ``sql``, and each edit as ``(start, end, old,
    new, reason)`` over the original text."""

    sql: str
    edits: tuple[tuple[int, int, str, str, str], ...]


def _type(node: exp.Expr) -> object:
    """The annotated type's kind (a ``DataType.Type``), None when not annotated."""
    t = node.type
    return None if t is None else t.this


def _pos(node: exp.Expr) -> tuple[str, int]:
    """A column's or literal's identity across copies of a tree: its kind and the offset of
    its token in the text (sqlglot keeps token positions in the nodes' meta)."""
    meta = (node.this if isinstance(node, exp.Column) else node).meta
    return type(node).__name__, int(meta.get("start", -1))


def _span(sql: str, col: exp.Column) -> tuple[int, int] | None:
    """[start, end) of a column reference (qualifier included) in ``sql``, from the tokens'
    positions sqlglot keeps; None if they are missing."""
    name = col.this.meta
    if "start" not in name or "end" not in name:
        return None
    start, end = name["start"], name["end"] + 1
    table = col.args.get("table")
    if isinstance(table, exp.Identifier):
        if "start" not in table.meta:
            return None
        start = table.meta["start"]
    if start > 0 and sql[start - 1] == '"' and sql[end : end + 1] == '"':
        start, end = start - 1, end + 1  # a quoted identifier: its quotes belong to it
    return start, end


def _converted(node: exp.Expr, to: str) -> exp.Expr | None:
    """The edit that writes ``node`` as type ``to``: a number literal as a quoted one (to
    text), a column as a cast."""
    if to == "TEXT" and isinstance(node, exp.Literal) and not node.is_string:
        return exp.Literal.string(node.this)
    if isinstance(node, exp.Column):
        return exp.Cast(this=node.copy(), to=exp.DataType.build(to))
    return None


def _mismatches(tree: exp.Expr) -> Iterator[tuple[exp.Expr, str, str]]:
    """(node to convert, reason, the type to convert it to) for every certain type mismatch
    in an annotated tree."""
    for ext in tree.find_all(exp.Extract):
        col = ext.expression
        if isinstance(col, exp.Column) and _type(col) in _TEXT:
            yield col, "EXTRACT needs a date or time, this column is text", "TIMESTAMP"
    for node in tree.find_all(
        exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Like, exp.ILike
    ):
        if isinstance(node, (exp.Like, exp.ILike)):
            left = node.this
            t = _type(left)
            if isinstance(left, exp.Column) and t is not None and t not in _TEXT:
                if t != exp.DataType.Type.UNKNOWN:
                    kind = str(t).rsplit(".", 1)[-1]
                    yield left, f"LIKE needs text, this column is {kind}", "TEXT"
            continue
        if isinstance(node, exp.In):
            left = node.this
            if _type(left) not in _TEXT:
                continue
            query = node.args.get("query")
            sides = list(node.expressions)
            if isinstance(query, exp.Subquery) and isinstance(query.this, exp.Select):
                sides = list(query.this.expressions)[:1] if len(query.this.expressions) == 1 else []
            for side in (x.unalias() for x in sides):  # qualify aliases a projection
                if _type(side) in _NUMBER:
                    yield side, "a number compared with a text column", "TEXT"
            continue
        a, b = node.this, node.expression
        for text_side, other in ((a, b), (b, a)):
            if _type(text_side) not in _TEXT:
                continue
            if isinstance(node, (exp.EQ, exp.NEQ)) and _type(other) in _NUMBER:
                yield other, "a number compared with a text column", "TEXT"
            elif isinstance(text_side, exp.Column) and _type(other) in _TIMES:
                to = "DATE" if _type(other) == exp.DataType.Type.DATE else "TIMESTAMP"
                yield text_side, "a text column compared with a date or time", to


def _is_date(node: exp.Expr) -> bool:
    """A DATE operand: a DATE column, or ``CURRENT_DATE`` (a date on PostgreSQL, so today
    minus a date column is days too)."""
    if isinstance(node, exp.CurrentDate):
        return True
    return isinstance(node, exp.Column) and _type(node) == exp.DataType.Type.DATE


def _date_differences(tree: exp.Expr) -> Iterator[exp.Column]:
    """A column of every ``EXTRACT(DAY FROM d1 - d2)`` with two DATE operands, one of them
    a column (the handle by which the call is found again in the original tree)."""
    for node in tree.find_all(exp.Extract):
        diff = node.expression
        unit = node.this.name.upper() if isinstance(node.this, (exp.Var, exp.Identifier)) else ""
        if unit != "DAY" or not isinstance(diff, exp.Sub):
            continue
        a, b = diff.this, diff.expression
        if _is_date(a) and _is_date(b):
            handle = a if isinstance(a, exp.Column) else b
            if isinstance(handle, exp.Column):
                yield handle


def _year_columns(tree: exp.Expr) -> Iterator[exp.Column]:
    """The column of every ``EXTRACT(YEAR FROM c)`` with ``c`` an integer column whose name
    says it holds years (``year``, ``publication_year``)."""
    for node in tree.find_all(exp.Extract):
        unit = node.this.name.upper() if isinstance(node.this, (exp.Var, exp.Identifier)) else ""
        col = node.expression
        if (
            unit == "YEAR"
            and isinstance(col, exp.Column)
            and _type(col) in _NUMBER
            and "year" in col.name.lower()
        ):
            yield col


def type_fix(sql: str, snapshot: SchemaSnapshot, dialect: str | Dialect) -> TypeFix | None:
    """``sql`` with its certain type mismatches written out (module doc), or None when there
    is none, the dialect converts types itself, or an edit cannot be placed exactly."""
    d = Dialect.lookup(dialect)
    if not d.strict_comparison_types:
        return None
    read = d.sqlglot_read
    mapping: dict[str, object] = {
        s.name: {t.name: {c.name: c.type or "UNKNOWN" for c in t.columns} for t in s.tables}
        for s in snapshot.schemas
    }
    try:
        original = sqlglot.parse_one(sql, read=read)
        annotated = annotate_types(
            qualify(
                original.copy(),
                schema=mapping,
                dialect=read,
                db=snapshot.default_schema,
                validate_qualify_columns=False,
                identify=False,
                expand_stars=False,
            ),
            schema=mapping,
            dialect=read,
        )
    except (ParseError, TokenError, RecursionError, ValueError, KeyError):
        return None
    by_pos = {_pos(n): n for n in original.find_all(exp.Column, exp.Literal)}
    edits: list[tuple[int, int, str, str, str]] = []
    expected = original.copy()
    targets: list[tuple[exp.Expr, exp.Expr]] = []
    seen: set[tuple[str, int]] = set()
    for node, reason, to in _mismatches(annotated):
        if _pos(node) in seen:
            continue  # (a column both extracted from and compared: one cast)
        seen.add(_pos(node))
        meta = (node.this if isinstance(node, exp.Column) else node).meta
        orig = by_pos.get(_pos(node))
        new = None if orig is None else _converted(orig, to)
        if orig is None or new is None:
            return None  # a mismatch we cannot write exactly: leave it to the repair round
        if isinstance(orig, exp.Column):
            span = _span(sql, orig)
        else:
            span = (meta["start"], meta["end"] + 1) if "end" in meta else None
        if span is None:
            return None
        old = sql[span[0] : span[1]]
        text = f"CAST({old} AS {to})" if isinstance(orig, exp.Column) else new.sql(dialect=read)
        edits.append((span[0], span[1], old, text, f"{old}: {reason}"))
        targets.append((orig, new))
    days = list(_date_differences(annotated))
    years = list(_year_columns(annotated))
    if not edits and not days and not years:
        return None
    if days or years:  # regenerate: every change made in the tree, one edit for the statement
        nodes = {_pos(n): n for n in expected.find_all(exp.Column, exp.Literal)}
        for target, change in targets:
            twin = nodes.get(_pos(target))
            if twin is None:
                return None
            twin.replace(change.copy())
        for first in days:
            twin = nodes.get(_pos(first))
            extract = None if twin is None else twin.find_ancestor(exp.Extract)
            if extract is None:
                return None
            extract.replace(exp.Paren(this=extract.expression.copy()))
        for col in years:
            twin = nodes.get(_pos(col))
            extract = None if twin is None else twin.find_ancestor(exp.Extract)
            if twin is None or extract is None:
                return None
            extract.replace(twin.copy())
        new_sql = expected.sql(dialect=read)
        reasons = [r for *_, r in edits]
        if days:
            reasons.append(
                "EXTRACT(DAY FROM date - date): the difference of two dates is already days"
            )
        if years:
            reasons.append("EXTRACT(YEAR FROM an integer year column): it already is the year")
        return TypeFix(new_sql, ((0, len(sql), sql, new_sql, "; ".join(reasons)),))
    fixed = apply_edits(sql, [(s, e, t) for s, e, _, t, _ in edits])
    if fixed is None:
        return None
    twins: dict[tuple[str, int], exp.Expr] = {
        _pos(n): n for n in expected.find_all(exp.Column, exp.Literal)
    }
    for target, change in targets:  # the same change in the tree: the edits must give it
        same = twins.get(_pos(target))
        if same is None:
            return None
        same.replace(change.copy())
    try:
        if sqlglot.parse_one(fixed, read=read).sql(dialect=read) != expected.sql(dialect=read):
            return None
    except (ParseError, TokenError, RecursionError):
        return None
    return TypeFix(fixed, tuple(edits))


def _parsed(sql: str, dialect: str | Dialect) -> tuple[exp.Expr, str] | None:
    """``sql``'s tree and the dialect's sqlglot name, for the fixes that regenerate the
    statement (None: it does not parse)."""
    read = Dialect.lookup(dialect).sqlglot_read
    try:
        return sqlglot.parse_one(sql, read=read), read
    except (ParseError, TokenError, RecursionError):
        return None


def zero_division_fix(sql: str, dialect: str | Dialect) -> TypeFix | None:
    """``sql`` with every denominator ``NULLIF(d, 0)`` (module doc), or None when there is no
    division to guard or the statement does not parse."""
    got = _parsed(sql, dialect)
    if got is None:
        return None
    tree, read = got
    changed = False
    for div in list(tree.find_all(exp.Div)):
        den = div.expression
        if isinstance(den, exp.Nullif) or (
            isinstance(den, exp.Literal) and not den.is_string and float(den.this) != 0
        ):
            continue
        den.replace(exp.Nullif(this=den.copy(), expression=exp.Literal.number(0)))
        changed = True
    if not changed:
        return None
    fixed = tree.sql(dialect=read)
    reason = "division by zero: each denominator d is written NULLIF(d, 0) (regenerated)"
    return TypeFix(fixed, ((0, len(sql), sql, fixed, reason),))


def _single_row(query: exp.Expr) -> bool:
    """``query`` returns at most one row by its shape: ``LIMIT 1``, or one SELECT whose
    list is aggregates only with no GROUP BY."""
    if not isinstance(query, exp.Select):
        return False
    limit = query.args.get("limit")
    if limit is not None and limit.expression is not None and limit.expression.sql() == "1":
        return True
    if query.args.get("group") is not None or not query.expressions:
        return False
    return all(
        isinstance(e.unalias(), exp.AggFunc) and not isinstance(e.unalias().parent, exp.Window)
        for e in query.expressions
    )


def cardinality_fix(sql: str, dialect: str | Dialect) -> TypeFix | None:
    """``sql`` with every ``x = (SELECT ...)`` that may return several rows written
    ``x IN (SELECT ...)`` (``<>``/``!=``: ``NOT IN``; module doc), or None when there is
    none or the statement does not parse."""
    got = _parsed(sql, dialect)
    if got is None:
        return None
    tree, read = got
    changed = False
    for cmp in list(tree.find_all(exp.EQ, exp.NEQ)):
        for sub, other in ((cmp.expression, cmp.this), (cmp.this, cmp.expression)):
            if (
                isinstance(sub, exp.Subquery)
                and not isinstance(other, exp.Subquery)
                and not _single_row(sub.this)
            ):
                member: exp.Expr = exp.In(this=other.copy(), query=sub.copy())
                if isinstance(cmp, exp.NEQ):
                    member = exp.Not(this=member)
                cmp.replace(member)
                changed = True
                break
    if not changed:
        return None
    fixed = tree.sql(dialect=read)
    reason = (
        "a subquery compared with = returned several rows: `x = (SELECT ...)` is written "
        "`x IN (SELECT ...)` (regenerated)"
    )
    return TypeFix(fixed, ((0, len(sql), sql, fixed, reason),))


def _outside_aggregates(root: exp.Expr) -> list[exp.Column]:
    """The column references of ``root`` outside aggregates, window functions and nested
    queries."""
    out: list[exp.Column] = []
    for col in root.find_all(exp.Column):
        node: exp.Expr | None = col
        inside = False
        while node is not None and node is not root:
            node = node.parent
            if isinstance(node, (exp.AggFunc, exp.Window, exp.Select, exp.Subquery)):
                inside = True
                break
        if not inside:
            out.append(col)
    return out


def _bare_columns(select: exp.Select) -> list[exp.Column]:
    """The column references of ``select``'s list outside aggregates, window functions and
    nested queries."""
    return [c for item in select.expressions for c in _outside_aggregates(item)]


def _sort_and_having_columns(select: exp.Select) -> list[exp.Column]:
    """The bare column references of ``select``'s ORDER BY and HAVING outside aggregates
    (names of its own output aliases excluded: they are not columns to group by)."""
    aliases = {e.alias.lower() for e in select.expressions if e.alias}
    out: list[exp.Column] = []
    for part in (select.args.get("order"), select.args.get("having")):
        if part is not None:
            out.extend(
                c for c in _outside_aggregates(part) if c.table or c.name.lower() not in aliases
            )
    return out


def group_by_fix(sql: str, message: str, dialect: str | Dialect) -> TypeFix | None:
    """``sql`` with the column the database named as ungrouped (``message``, read by
    :meth:`Dialect.ungrouped_column`: PostgreSQL names it ``table.column`` even where it is
    written bare), and the other bare columns of its SELECT list, appended to that SELECT's
    GROUP BY (module doc); None when the message names no column, the column is not found
    outside an aggregate (in the list, or in ORDER BY / HAVING, where only the named column
    is added), or its SELECT has no GROUP BY."""
    d = Dialect.lookup(dialect)
    named = d.ungrouped_column(message)
    if named is None:
        return None
    qual, _, name = named.rpartition(".")
    got = _parsed(sql, d)
    if got is None:
        return None
    tree, read = got

    def key(c: exp.Column) -> tuple[str, str]:
        return c.table.lower(), c.name.lower()

    def is_named(c: exp.Column) -> bool:
        return c.name.lower() == name.lower() and c.table.lower() in ("", qual.lower())

    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        bare = _bare_columns(select)
        if group is None:
            continue
        if not any(is_named(c) for c in bare):
            later = [c for c in _sort_and_having_columns(select) if is_named(c)]
            if not later:
                continue
            bare = bare + later[:1]
        grouped = {key(g) for g in group.expressions if isinstance(g, exp.Column)}
        added: list[str] = []
        for c in bare:
            if key(c) not in grouped:
                grouped.add(key(c))
                group.append("expressions", c.copy())
                added.append(c.sql(dialect=read))
        if not added:
            return None
        fixed = tree.sql(dialect=read)
        reason = (
            f"column {named} is neither grouped nor aggregated: "
            f"{', '.join(added)} added to GROUP BY (regenerated)"
        )
        return TypeFix(fixed, ((0, len(sql), sql, fixed, reason),))
    return None
