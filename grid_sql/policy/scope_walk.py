"""The checker's scope walk: what the role must be allowed to read in every scope of a query.

Split out of :mod:`grid_sql.policy.checker`. A query (SELECT, set operation, WITH) is judged
on the bindings of the one resolver (:class:`grid_sql.policy.resolve.Resolver`) that
conformance already used to word its findings: each table a FROM item names needs SELECT,
each column a reference binds to (and each column a ``*`` or ``t.*`` reaches) needs SELECT on
that column. Names that bind to nothing (an unknown alias, a missing or ambiguous column) were
reported by conformance from the same binding, so the walk skips them instead of reporting
them a second time in other words; the few that conformance leaves to the checker
(``x.*`` of an unknown alias, ``schema.table.column`` of a real schema, an ambiguity in an
enclosing query) are reported here, so the checker still fails closed on them.

Other statements (DML, CREATE ... AS, TRUNCATE, and the DML bodies of PostgreSQL CTEs) still go
through sqlglot's ``qualify`` (``_resolve``), which conformance does not run on.

These run as methods of the checker's per-statement run (``self`` is a ``checker._Run``).
Each method annotates ``self: _Run`` so that every attribute it uses is type-checked; mypy
refuses a self type narrower than the class (``[misc]``), hence the ignore on each ``def``.
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
from .resolve import Resolver
from .sources import _Source
from .violation import Violation

if TYPE_CHECKING:
    from .checker import _Run


class ScopeRules:
    """Scope resolution of ``checker._Run`` (a mixin: no state of its own)."""

    def _resolve(self: _Run, stmt: exp.Expr, resolver: Resolver | None = None) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        if isinstance(stmt, exp.Query):
            if resolver is not None:
                self._query_rights(resolver)
            if not any(stmt.find_all(exp.Insert, exp.Update, exp.Delete)):
                return
            # PostgreSQL data-modifying CTEs under a SELECT: each DML body checked as DML.
        q = self._qualified(stmt)
        if q is None:
            return
        for cte in q.find_all(exp.CTE):
            if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete):
                # sqlglot builds no scope for a DML body, so references to the CTE look like
                # tables; remember the name (the body itself is checked as DML).
                self._ctes.add(cte.alias_or_name.lower())
        if isinstance(q, exp.Query):
            for node in q.find_all(exp.Insert, exp.Update, exp.Delete):
                self._dml(node)
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

    # -------------------------------------------------------------- queries (bindings)
    def _query_rights(self: _Run, r: Resolver) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        """Table and column rights of every scope of a query, from the resolver's bindings."""
        for scope, duplicate in r.scopes():
            if duplicate is not None:
                # Conformance reported the reused name and no column of the scope can bind;
                # the tables it names still need SELECT.
                for t in scope.tables:
                    found = r.view.table(r.view.ident(t.this), t.db or None)
                    if found is not None:
                        ref = _Ref(found[0], found[1], self.policy.table(found[1].name, found[0]))
                        self._need_table(ref, "select", t)
                continue
            own = r.sources(scope)
            for src in own.values():
                if src.info is not None:
                    self._need_table(self._source_ref(src), "select", src.node)
                elif src.node is not None and not isinstance(src.node.this, exp.Func):
                    if not isinstance(src.node.this, exp.Identifier):
                        self._unknown_table(src.node)  # `ROWS FROM (...)`: fail closed
            for star in r.stars(scope):
                if not own:
                    self._star_without_from(star)
                for src in own.values():
                    self._star(src)
            for col in r.columns(scope):
                self._bound_column(r, scope, col)

    def _star_without_from(self: _Run, star: exp.Star) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        """``SELECT *`` with no FROM item names no column at all: every engine refuses it, and
        so does the checker (fail closed) rather than judging nothing."""
        pos, snip = self.where(star)
        self.add(
            Violation(
                "unknown_column",
                "`*` selects the columns of no table: this query has no FROM clause; name the "
                "table to read from.",
                column="*",
                position=pos,
                snippet=snip or "*",
                why="schema conformance",
            )
        )

    def _source_ref(self: _Run, src: _Source) -> _Ref:  # type: ignore[misc]  # self is the checker run (module doc)
        assert src.info is not None and src.schema is not None
        return _Ref(src.schema, src.info, self.policy.table(src.info.name, src.schema))

    def _star(self: _Run, src: _Source) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        """``*`` or ``t.*`` over one FROM item: every column of a base table is read (a
        derived table's or CTE's star is judged inside it; an opaque item has no rights)."""
        if src.info is None:
            return
        ref = self._source_ref(src)
        if self._partial_star(ref):
            return
        for c in src.info.columns:
            self._need_column(ref, c.name, "select", None)

    def _bound_column(self: _Run, r: Resolver, scope: Scope, col: exp.Column) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        view = r.view
        star = isinstance(col.this, exp.Star)
        # `schema.table.column` (and catalog-qualified names) of a real schema: conformance
        # leaves them to the checker; of no schema: conformance reported the name.
        judged = not col.args.get("catalog") and not col.args.get("db")
        if col.args.get("db") and not col.args.get("catalog"):
            schemas = {view.key(sc.name) for sc in view.snapshot.schemas}
            if view.ident(col.args["db"]) not in schemas | view.d.implicit_schemas and not star:
                return
        if col.args.get("table") is None and isinstance(scope.expression, exp.SetOperation):
            return  # ORDER BY of a UNION names output columns
        b = r.bind(scope, col)
        key = "" if star else view.ident(col.this)
        if b.kind == "source":
            (src,) = b.sources
            if star:
                self._star(src)
            elif src.info is not None:
                self._column(src, key, col)
        elif b.kind == "shared":
            for src in b.sources:  # USING/NATURAL: the engine reads every joined copy
                if src.info is not None:
                    self._column(src, key, col)
        elif b.kind == "unknown_alias":
            if star or not judged:
                self._unknown_alias(col)
        elif b.kind == "missing":
            if not judged:
                (src,) = b.sources
                if src.info is not None:
                    self._need_column(self._source_ref(src), col.name, "select", col)
        elif b.kind == "ambiguous":
            if not b.first:  # conformance words an ambiguity at the column's own level only
                self._ambiguous_outer(col, b.sources)
        elif b.kind == "unjudged":
            # A FROM item with unknown columns might have the name; when exactly one item
            # whose columns are known has it, that is the one the engine binds it to.
            known = [s for s in b.sources if s.provides(view, key)]
            if len(known) == 1 and known[0].info is not None:
                self._column(known[0], key, col)

    def _column(self: _Run, src: _Source, key: str, col: exp.Column) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        """SELECT on the column ``key`` of the base table ``src`` (catalog spelling)."""
        assert src.info is not None
        name = next((c.name for c in src.info.columns if self.c._view.key(c.name) == key), col.name)
        self._need_column(self._source_ref(src), name, "select", col)

    def _ambiguous_outer(self: _Run, col: exp.Column, hits: tuple[_Source, ...]) -> None:  # type: ignore[misc]  # self is the checker run (module doc)
        pos, snip = self.where(col)
        labels = " and ".join(s.label() for s in hits)
        self.add(
            Violation(
                "ambiguous_column",
                f"{col.name} is ambiguous: it is not a column of this subquery's tables, and "
                f"{labels} of the enclosing query both have it; qualify it.",
                column=col.name,
                position=pos,
                snippet=snip,
                why="schema conformance",
            )
        )

    # -------------------------------------------------------------- queries (qualify)
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
                if self.where(col)[0] is None and self._partial_star(found):
                    continue  # a column qualify expanded from a star
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

    def _partial_star(self: _Run, ref: _Ref) -> bool:  # type: ignore[misc]  # self is the checker run (module doc)
        """MySQL/MariaDB hide the columns a user has no privilege on, so the snapshot of a
        column-restricted table is incomplete and ``*`` expands to more on the server than
        here. Without table-wide SELECT, a star over such a table is itself the violation."""
        if not self.c.d.catalog_hides_unreadable_columns:
            return False  # an engine whose catalog shows every column
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
