"""The checker's rules for data-changing statements: INSERT, UPDATE, DELETE and MERGE.

Split out of :mod:`grid_sql.policy.checker` along its seam: these methods judge the target
table's write rights and the columns a DML statement reads (WHERE, SET right-hand sides,
USING/ON, MERGE branches); queries nested inside are handed back to the checker's scope walk.
They run as methods of the checker's per-statement run (``self`` is a ``checker._Run``).
Each method annotates ``self: _Run`` so that every attribute it uses is type-checked; mypy
refuses a self type narrower than the class (``[misc]``), hence the ignore on each ``def``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlglot import exp

from .refs import (
    _columns_outside_queries,
    _Ref,
    _tables_in,
    _top_queries,
)

if TYPE_CHECKING:
    from .checker import _Run


class DmlRules:
    """DML and MERGE rules of ``checker._Run`` (a mixin: no state of its own)."""

    def _dml(self: _Run, q: exp.Expr) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        target = q.this
        columns_node = None
        if isinstance(target, exp.Schema):  # INSERT INTO t (a, b)
            columns_node = target
            target = target.this
        if not isinstance(target, exp.Table):
            return
        ref = self._lookup(target)
        if ref is None:
            self._unknown_table(target)
            return
        verb = self._verb(q)
        env: dict[str, _Ref] = {target.alias_or_name: ref, ref.info.name: ref}
        with_ = q.args.get("with")
        for cte in with_.expressions if with_ is not None else []:
            if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete):
                self._dml(cte.this)  # PostgreSQL data-modifying CTE
        for key in ("using", "from_", "from", "joins"):  # sqlglot >= 26 names it from_
            extra = q.args.get(key)
            for t in _tables_in(extra):
                r = self._lookup(t)
                if r is None:
                    self._unknown_table(t)
                    continue
                self._need_table(r, "select", t)
                env[t.alias_or_name] = r
        if isinstance(q, exp.Merge):
            self._merge(q, ref, env)
            return
        table_ok = self._need_table(ref, verb, target)
        # Subqueries anywhere in the statement: scoped, correlated names resolve to env.
        self._queries(_top_queries(q), env)
        reads: list[exp.Column] = []
        if isinstance(q, exp.Insert):
            if table_ok:
                for name, node in self._insert_columns(q, ref, columns_node):
                    self._need_column(ref, name, "insert", node)
            conflict = q.args.get("conflict")
            if conflict is not None:
                # ON CONFLICT DO UPDATE / ON DUPLICATE KEY UPDATE: SET targets need UPDATE,
                # everything else in the clause is read (conflict keys, WHERE, SET values).
                for eq in conflict.expressions:
                    if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column):
                        self._need_column(ref, eq.this.name, "update", eq.this)
                        reads.extend(_columns_outside_queries(eq.expression))
                for key in ("conflict_keys", "where"):
                    val = conflict.args.get(key)
                    for part in val if isinstance(val, list) else [val]:
                        reads.extend(_columns_outside_queries(part))
        elif isinstance(q, exp.Update):
            for eq in q.expressions:
                if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column):
                    if table_ok:
                        self._need_column(ref, eq.this.name, "update", eq.this)
                    reads.extend(_columns_outside_queries(eq.expression))
            for key in ("where",):
                if q.args.get(key) is not None:
                    reads.extend(_columns_outside_queries(q.args[key]))
        elif isinstance(q, exp.Delete):
            if q.args.get("where") is not None:
                reads.extend(_columns_outside_queries(q.args["where"]))
        returning = q.args.get("returning")
        if returning is not None:
            for e in returning.expressions:
                if isinstance(e, exp.Star):
                    for c in ref.info.columns:
                        self._need_column(ref, c.name, "select", None)
                else:
                    reads.extend(_columns_outside_queries(e))
        for col in reads:
            self._dml_read(col, env)

    def _dml_read(self: _Run, col: exp.Column, env: dict[str, _Ref]) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        if col.table:
            ref = env.get(col.table) or next(
                (r for r in env.values() if r.info.name.lower() == col.table.lower()), None
            )
            if ref is None:
                if col.table.lower() in ("excluded", "new", "old"):
                    return  # ON CONFLICT's EXCLUDED row / MySQL's alias for the new row
                self._unknown_alias(col)
                return
            self._need_column(ref, col.name, "select", col)
            return
        owners = {id(r): r for r in env.values() if r.info.column(col.name) is not None}
        # An ambiguous name is a server error anyway; judging it against every candidate
        # table can only report more, never approve a read the server would deny.
        for owner in owners.values():
            self._need_column(owner, col.name, "select", col)
        if not owners:  # reported as unknown in the statement's target table
            self._need_column(next(iter(env.values())), col.name, "select", col)

    def _insert_columns(  # type: ignore[misc]  # self is the checker run (module doc)
        self: _Run, q: exp.Insert, ref: _Ref, columns_node: exp.Schema | None
    ) -> Iterator[tuple[str, exp.Expr | None]]:
        if columns_node is not None:
            for c in columns_node.expressions:
                yield c.name, c
            return
        source = q.expression
        width: int | None = None
        if isinstance(source, exp.Values) and source.expressions:
            first = source.expressions[0]
            width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
        elif isinstance(source, exp.Select):
            width = len(source.expressions)
        cols = ref.info.columns if width is None else ref.info.columns[:width]
        for c in cols:
            yield c.name, None

    def _merge(self: _Run, q: exp.Merge, ref: _Ref, env: dict[str, _Ref]) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        """MERGE: the target needs the verb of every WHEN action; sources are read."""
        using = q.args.get("using")
        for t in _tables_in(using):
            r = self._lookup(t)
            if r is None:
                self._unknown_table(t)
            else:
                self._need_table(r, "select", t)
                env[t.alias_or_name] = r
        self._queries(_top_queries(q), env)
        whens = q.args.get("whens")
        for when in whens.expressions if whens is not None else []:
            then = when.args.get("then")
            if isinstance(then, exp.Insert):
                self._need_table(ref, "insert", q.this)
            elif isinstance(then, exp.Update):
                self._need_table(ref, "update", q.this)
            elif isinstance(then, exp.Var) and then.name.upper() == "DELETE":
                self._need_table(ref, "delete", q.this)
        on = q.args.get("on")
        if on is not None:
            for col in _columns_outside_queries(on):
                self._dml_read(col, env)
