"""The checker's scope walk: resolve every alias, CTE and subquery scope of a query.

Split out of :mod:`grid_sql.policy.checker`: sqlglot's ``qualify`` + ``traverse_scope`` give
the scopes; these methods bind each column to a real table (``_Ref``) through the aliases
visible in its scope and the enclosing ones, expand ``*``, and ask the checker whether the
role may read it. They run as methods of the checker's per-statement run (``self`` is a
``checker._Run``). Each method annotates ``self: _Run`` so that every attribute it uses is
type-checked; mypy refuses a self type narrower than the class (``[misc]``), hence the
ignore on each ``def``. Conformance (``policy.conformance``) still walks scopes on its own; one
resolver for both is issue #24 §4's remaining step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from .refs import (
    _SCOPE,
    _Ref,
)
from .violation import Violation

if TYPE_CHECKING:
    from .checker import _Run


class ScopeRules:
    """Scope resolution of ``checker._Run`` (a mixin: no state of its own)."""

    def _resolve(self: _Run, stmt: exp.Expr) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        q = self._qualified(stmt)
        if q is None:
            return
        for cte in q.find_all(exp.CTE):
            if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete):
                # sqlglot builds no scope for a DML body, so references to the CTE look like
                # tables; remember the name (the body itself is checked as DML).
                self._ctes.add(cte.alias_or_name.lower())
        if isinstance(q, exp.Query):
            # PostgreSQL data-modifying CTEs under a SELECT: each DML body checked as DML.
            for node in q.find_all(exp.Insert, exp.Update, exp.Delete):
                self._dml(node)
            self._queries([q], {})
            return
        if isinstance(q, exp.Create):
            body = q.expression
            if isinstance(body, exp.Query):
                self._queries([body], {})
            return
        if isinstance(q, exp.TruncateTable):
            for t in q.expressions:
                if isinstance(t, exp.Table):
                    ref = self._lookup(t)
                    if ref is None:
                        self._unknown_table(t)
                    else:
                        self._need_table(ref, "truncate", t)
            return
        if isinstance(q, exp.Insert | exp.Update | exp.Delete | exp.Merge):
            self._dml(q)

    # -------------------------------------------------------------- queries (scopes)
    def _queries(self: _Run, roots: Iterable[exp.Expr], outer: dict[str, _Ref]) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        for root in roots:
            for scope in traverse_scope(root):
                self._scope(scope, outer)

    def _scope(self: _Run, scope: Scope, outer: dict[str, _Ref]) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        refs: dict[str, _Ref | None] = {}
        for alias, source in scope.sources.items():
            if self.c.d.dual_table and self._is_dual(source):
                continue
            if isinstance(source, exp.Table) and isinstance(source.this, exp.Func):
                refs[alias] = None  # table function (generate_series, unnest): no table
                continue
            if isinstance(source, exp.Table):
                ref = self._lookup(source)
                if ref is None and source.name.lower() in self._ctes:
                    refs[alias] = None  # a CTE of the enclosing DML: checked on its own
                    continue
                if ref is None:
                    self._unknown_table(source)
                else:
                    self._need_table(ref, "select", source)
                refs[alias] = ref
        # Every source that is a derived table must resolve to *something*; if any source is
        # unknown, column names cannot be judged (the unknown table is already reported).
        opaque = any(r is None for r in refs.values())
        select_aliases = set()
        if isinstance(scope.expression, exp.Select):
            select_aliases = {
                e.alias.lower() for e in scope.expression.expressions if isinstance(e, exp.Alias)
            }
        for col in scope.columns:
            alias = col.table
            if alias:
                found = self._find_alias(scope, alias, outer)
                if found is _SCOPE:
                    continue
                if not isinstance(found, _Ref):
                    if alias not in refs:  # an alias/table name never introduced
                        self._unknown_alias(col)
                    continue
                if self._partial_star(found, col):
                    continue
                self._need_column(found, col.name, "select", col)
                continue
            # Unqualified and unresolved by qualify.
            if isinstance(scope.expression, exp.SetOperation):
                continue  # ORDER BY of a UNION names output columns
            if opaque:
                continue
            if col.name.lower() in select_aliases and col.find_ancestor(exp.Ordered):
                continue  # ORDER BY naming an output column
            if any(not isinstance(s, exp.Table) for s in scope.sources.values()):
                continue  # may come from a derived table whose columns qualify did not know
            owner = self._outer_owner(col.name, outer)
            if owner is not None:
                self._need_column(owner, col.name, "select", col)
                continue
            pos, snip = self.where(col)
            self.add(
                Violation(
                    "unknown_column",
                    f"Column {col.name} does not exist in "
                    f"{', '.join(r.info.name for r in refs.values() if r) or 'the query'}.",
                    column=col.name,
                    position=pos,
                    snippet=snip,
                    why="schema conformance",
                )
            )
        # Star expansion already happened in qualify; a star left over (unknown source) is
        # covered by the unknown-table report.

    def _partial_star(self: _Run, ref: _Ref, col: exp.Column) -> bool:  # type: ignore[misc]  # self is the checker run (module doc)
        """MySQL/MariaDB hide the columns a user has no privilege on, so the snapshot of a
        column-restricted table is incomplete and ``*`` expands to more on the server than
        here. Without table-wide SELECT, a star over such a table is itself the violation."""
        if not self.c.d.catalog_hides_unreadable_columns or self.where(col)[0] is not None:
            return False  # an explicit column, or an engine whose catalog shows every column
        if ref.rights is not None and "select" in ref.rights.verbs:
            return False
        if ref.rights is None or not ref.rights.allows("select"):
            return False  # no column readable at all: the table-level finding covers it
        ok = [c for c, v in ref.rights.columns if "select" in v]
        self.add(
            Violation(
                "column_not_readable",
                f"SELECT * on {ref.info.name} needs SELECT on every column, but role "
                f"{self.policy.role!r} may read only: {', '.join(ok)}; list those columns.",
                table=ref.qualified,
                column="*",
                verb="select",
                snippet="*",
                position=self._locate("*")[0],
                why="no table-wide SELECT privilege",
            )
        )
        return True

    def _find_alias(  # type: ignore[misc]  # self is the checker run (module doc)
        self: _Run, scope: Scope, alias: str, outer: dict[str, _Ref]
    ) -> _Ref | object | None:
        s: Scope | None = scope
        while s is not None:
            if alias in s.sources:
                src = s.sources[alias]
                if isinstance(src, exp.Table):
                    return self._lookup(src)
                return _SCOPE
            s = s.parent
        return outer.get(alias)

    def _outer_owner(self: _Run, column: str, outer: dict[str, _Ref]) -> _Ref | None:  # type: ignore[misc]  # self is the checker run (module doc)
        owners = [r for r in outer.values() if r.info.column(column) is not None]
        return owners[0] if len(owners) == 1 else None

    def _unknown_alias(self: _Run, col: exp.Column) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        pos, snip = self.where(col)
        self.add(
            Violation(
                "unknown_table",
                f"{col.table}.{col.name} refers to {col.table}, which is not a table or alias "
                "in scope.",
                table=col.table,
                column=col.name,
                position=pos,
                snippet=snip,
                why="schema conformance",
            )
        )

    # -------------------------------------------------------------- DML
