"""The conformance pass's messages: what a finding says and which fix it proposes.

Split out of :mod:`grid_sql.policy.conformance`: given a column that does not resolve in its
scope, these methods list the tables in scope, the readable columns elsewhere, close
spellings and the join that would bring the column in, and write the one-sentence message and
fix. They run as methods of the pass (``self`` is a ``conformance._Conformance``); each
annotates ``self`` so that every attribute it uses is type-checked, and mypy refuses a self
type narrower than the class (``[misc]``), hence the ignore on each ``def``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from grid_sql.schema.model import TableInfo

from .findings import Finding
from .sources import (
    _close,
    _col_name,
    _col_name_of,
    _fk_condition,
    _listed,
    _Source,
    _span,
    _written,
    owner_info,
)

if TYPE_CHECKING:
    from .conformance import _Conformance


class ConformanceMessages:
    """Message and fix rules of ``conformance._Conformance`` (a mixin: no state of its own)."""

    # ---------------------------------------------------------------- messages
    def _in_scope(self: _Conformance, scope: Scope, node: exp.Expr | None = None) -> list[_Source]:  # type: ignore[misc]  # self: the pass (module doc)
        out: list[_Source] = []
        for _, srcs in self._chain(scope, node):
            out.extend(srcs.values())
        return out

    def _hidden_outer(self: _Conformance, scope: Scope, col: exp.Column, key: str) -> list[_Source]:  # type: ignore[misc]  # self: the pass (module doc)
        """Sources of enclosing queries that have ``key`` but that SQLite hides from ``col``
        (a subquery's GROUP BY/ORDER BY), for the message."""
        seen = {id(s) for s in self._in_scope(scope, col)}
        return [
            s for s in self._in_scope(scope) if id(s) not in seen and s.provides(self.view, key)
        ]

    def _missing(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance,
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

    def _readable(self: _Conformance, src: _Source, key: str) -> bool:  # type: ignore[misc]  # self: the pass (module doc)
        assert src.info is not None and src.schema is not None
        return any(self.view.key(c) == key for c in self.view.visible_columns(src.schema, src.info))

    def _columns_of(self: _Conformance, src: _Source) -> list[str]:  # type: ignore[misc]  # self: the pass (module doc)
        if src.info is not None and src.schema is not None:
            return self.view.visible_columns(src.schema, src.info)
        return sorted(src.outputs or ())

    def _elsewhere(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance, key: str, in_scope: list[_Source]
    ) -> list[tuple[str, TableInfo]]:
        """Visible tables outside the query with a readable column ``key``."""
        joined = {id(s.info) for s in in_scope if s.info is not None}
        out = []
        for schema, info in self.view.visible_tables():
            if id(info) in joined:
                continue
            if any(self.view.key(c) == key for c in self.view.visible_columns(schema, info)):
                out.append((schema, info))
        return out

    def _fk_column(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance,
        in_scope: list[_Source],
        elsewhere: list[tuple[str, TableInfo]],
        key: str,
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

    def _join_fix(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance,
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

    def _qualify_shared(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance, scope: Scope, src: _Source, added: list[TableInfo]
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

    def _close_in(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance, src: _Source | None, in_scope: list[_Source], name: str
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

    def _unknown_alias(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance, scope: Scope, col: exp.Column, written: str, pos: int | None
    ) -> None:
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

    def _three_part(self: _Conformance, scope: Scope, col: exp.Column) -> None:  # type: ignore[misc]  # self: the pass (module doc)
        """``a.b.c`` is ``schema.table.column``. When ``a`` names no schema of this database
        the reference cannot resolve anywhere (SQLite: "no such column: a.b.c"), however the
        rest reads — typically a model that wrote ``table.column`` and went on with ``. x``.
        A real schema is left to the policy checker, as before."""
        db = self.view.ident(col.args["db"])
        schemas = {self.view.key(sc.name) for sc in self.view.snapshot.schemas}
        schemas |= self.view.d.implicit_schemas
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

    def _ambiguous(  # type: ignore[misc]  # self: the pass (module doc)
        self: _Conformance, col: exp.Column, hits: list[_Source], written: str, pos: int | None
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
