"""The one name resolver of a query: what every table and column node of it binds to.

Both the schema-conformance pass (:mod:`grid_sql.policy.conformance`, which words the
unknown/ambiguous-name findings) and the policy checker's rights walk
(:mod:`grid_sql.policy.scope_walk`, which asks whether the role may read what a name binds to)
read the bindings made here, on the statement as written (before any rewriting), so that a
name is resolved once and by one set of rules: a qualifier looks through the FROM items of its
own query and then the enclosing ones; a bare name binds at the innermost level where some
FROM item has it; SQLite's GROUP BY/ORDER BY see their own SELECT only
(``Dialect.group_order_see_own_select_only``); USING and NATURAL joins make a shared name
bind to every joined table; an output alias is a name of the SELECT list.

Why not sqlglot's ``qualify`` (the checker's resolver before issue #24): qualify stops at the
first unknown qualified name with a message that names neither table nor alias, quietly picks
one table for an ambiguous bare name, and its resolution differed from conformance's in those
cases, so the checker had to drop its own unknown-name findings by message prefix. Here the
names that do not resolve are :class:`Binding` kinds (``unknown_alias``, ``missing``,
``ambiguous``) that conformance words, and the checker skips them knowing they were reported.

A :class:`Resolver` is built once per query and shared: the checker hands the same instance to
conformance (``check_query(..., resolver=)``) and then walks its scopes, so both see the same
tree (PostgreSQL names folded once, SQLite's double-quoted strings already read as strings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, traverse_scope

from .sources import (
    SchemaView,
    _alias_text,
    _in_group_or_order,
    _item_end,
    _shared_by_join,
    _Source,
    _span,
)

BindingKind = Literal[
    "source",  # one FROM item: a base table, a CTE, a derived table or an opaque item
    "shared",  # a USING/NATURAL join column: every joined item that has it
    "alias",  # an output alias of the SELECT (ORDER BY, GROUP BY, HAVING; SQLite also WHERE)
    "unknown_alias",  # the qualifier names no FROM item visible here
    "missing",  # no visible FROM item has the column
    "ambiguous",  # several FROM items of one level have it, no USING/NATURAL join shares it
    "unjudged",  # a FROM item whose columns are unknown might have it
]


@dataclass(frozen=True)
class Binding:
    """What one column reference (``c``, ``q.c``, ``q.*``) names.

    ``sources``: the item(s) it binds to (``source``, ``shared``), the item that lacks it
    (``missing`` of a qualified name), the candidates (``ambiguous``), or every item of the
    level whose unknown columns left it open (``unjudged``). ``level`` is the query whose FROM
    items those are; ``first`` is False when that is an enclosing query (a correlation).
    """

    kind: BindingKind
    sources: tuple[_Source, ...] = ()
    level: Scope | None = None
    first: bool = True


class Resolver:
    """Scopes, FROM items and column bindings of one parsed query (see the module doc)."""

    def __init__(
        self,
        query: exp.Expr,
        sql: str,
        view: SchemaView,
        unknown_table: Callable[[exp.Table], None] | None = None,
    ) -> None:
        if view.fold_bare:  # PostgreSQL: fold unquoted names once, then compare exactly
            query = normalize_identifiers(query.copy(), dialect=view.d.sqlglot)
        self.query = query
        self.sql = sql
        self.view = view
        # Called once per unknown base table, when its scope's FROM items are first built.
        self.unknown_table = unknown_table
        self.dml_ctes = {
            view.key(cte.alias_or_name)
            for cte in query.find_all(exp.CTE)
            if isinstance(cte.this, exp.Insert | exp.Update | exp.Delete | exp.Merge)
        }
        self._sources: dict[int, dict[str, _Source]] = {}
        self._aliases: dict[int, set[str]] = {}
        self._scopes: list[tuple[Scope, str | None]] | None = None

    # ------------------------------------------------------------------ scopes
    def scopes(self) -> list[tuple[Scope, str | None]]:
        """Every scope of the query, innermost first, with the name two of its FROM items
        share (sqlglot refuses to build such a scope's sources; its names cannot bind)."""
        if self._scopes is None:
            out: list[tuple[Scope, str | None]] = []
            for scope in traverse_scope(self.query):
                try:
                    scope.selected_sources  # noqa: B018 - sqlglot raises here on a reused name
                except OptimizeError as exc:
                    out.append((scope, str(exc).split(": ", 1)[-1]))
                    continue
                out.append((scope, None))
            self._scopes = out
        return self._scopes

    def sources(self, scope: Scope) -> dict[str, _Source]:
        """The FROM items of ``scope`` by lookup key (alias, else table name)."""
        cached = self._sources.get(id(scope))
        if cached is not None:
            return cached
        out: dict[str, _Source] = {}
        view = self.view
        for alias, (node, src) in scope.selected_sources.items():
            key = view.key(alias)
            if isinstance(src, Scope):
                out[key] = _Source(
                    alias,
                    key,
                    outputs=self._outputs(src),
                    written=_alias_text(node, self.sql),
                    inner=src,
                )
            elif isinstance(src, exp.Table):
                if isinstance(src.this, exp.Func) or not isinstance(src.this, exp.Identifier):
                    out[key] = _Source(alias, key, opaque=True, node=src)
                    continue
                found = view.table(view.ident(src.this), src.db if src.args.get("db") else None)
                if found is None:
                    if view.d.dual_table and src.name.lower() == "dual":
                        continue
                    # A CTE whose body is DML has no scope: its name looks like a table.
                    unknown = bool(src.args.get("db")) or view.ident(src.this) not in self.dml_ctes
                    out[key] = _Source(alias, key, opaque=True, node=src, unknown=unknown)
                    if unknown and self.unknown_table is not None:
                        self.unknown_table(src)
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
                    node=src,
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

    def output_type(self, src: _Source, key: str) -> str | None:
        """The declared type of output ``key`` of the derived table or CTE ``src`` when it
        passes one column of a base table of its own FROM through unchanged (``SELECT
        d.datasetid``, ``SELECT datasetid AS datasetid``): the value is that column's, so is
        its type (the equal-join fix, ``conformance.py``). None otherwise: a set operation,
        a column list, an expression, a bare name that not exactly one FROM item has or an
        item whose columns are unknown."""
        if not isinstance(src.inner, Scope):
            return None
        return self._output_types(src.inner).get(key)

    def _output_types(self, scope: Scope) -> dict[str, str]:
        expr = scope.expression
        holder = expr.parent
        alias = holder.args.get("alias") if isinstance(holder, exp.CTE | exp.Subquery) else None
        if not isinstance(expr, exp.Select) or (
            isinstance(alias, exp.TableAlias) and alias.columns
        ):
            return {}
        try:
            inner = self.sources(scope)
        except OptimizeError:  # two FROM items share a name: nothing binds there
            return {}
        out: dict[str, str] = {}
        for p in expr.expressions:
            col = p.this if isinstance(p, exp.Alias) else p
            if not isinstance(col, exp.Column) or col.is_star:
                continue
            if not isinstance(col.this, exp.Identifier):
                continue
            name = self.view.ident(col.this)
            if col.args.get("table") is not None:
                found = inner.get(self.view.ident(col.args["table"]))
                if found is None or found.info is None:
                    continue
            else:
                has = [x.provides(self.view, name) for x in inner.values()]
                if None in has or has.count(True) != 1:
                    continue
                found = next(x for x, h in zip(inner.values(), has, strict=True) if h)
                if found.info is None:
                    continue
            info = found.info
            c = next((c for c in info.columns if self.view.key(c.name) == name), None)
            if c is None:
                continue
            out_name = self.view.ident(p.args["alias"]) if isinstance(p, exp.Alias) else name
            out[out_name] = c.type.strip().lower()
        return out

    def output_aliases(self, scope: Scope) -> set[str]:
        """Lookup keys of the output aliases of ``scope``'s SELECT list."""
        cached = self._aliases.get(id(scope))
        if cached is None:
            expr = scope.expression
            cached = set()
            if isinstance(expr, exp.Select):
                cached = {
                    self.view.ident(e.args.get("alias"))
                    for e in expr.expressions
                    if isinstance(e, exp.Alias)
                }
            self._aliases[id(scope)] = cached
        return cached

    def chain(
        self, scope: Scope, node: exp.Expr | None = None
    ) -> Iterable[tuple[Scope, dict[str, _Source]]]:
        """The scopes a name written at ``node`` (in ``scope``) may resolve in, innermost
        first. SQLite resolves the GROUP BY and ORDER BY of a SELECT against that SELECT
        alone (resolve.c: "The ORDER BY and GROUP BY clauses may not refer to terms in
        outer queries"), which also hides the outer levels from subqueries nested there."""
        s: Scope | None = scope
        at: exp.Expr | None = node
        cut = node is not None and self.view.d.group_order_see_own_select_only
        while s is not None:
            yield s, self.sources(s)
            if cut and at is not None and _in_group_or_order(at, s):
                return
            at = s.expression
            s = s.parent

    # ------------------------------------------------------------------ columns
    def columns(self, scope: Scope) -> Iterator[exp.Column]:
        """The column references written in ``scope`` itself (not in nested queries)."""
        for col in scope.find_all(exp.Column):
            if isinstance(col.this, exp.Identifier | exp.Star):
                yield col

    def stars(self, scope: Scope) -> list[exp.Star]:
        """The bare ``*`` items of ``scope``'s SELECT list (``COUNT(*)`` is no star)."""
        expr = scope.expression
        if not isinstance(expr, exp.Select):
            return []
        return [e for e in expr.expressions if isinstance(e, exp.Star)]

    def qualifier(self, col: exp.Column) -> str:
        """The lookup key of the FROM item ``q.c`` (or ``schema.q.c``) names."""
        return self.view.ident(col.args["table"])

    def bind(self, scope: Scope, col: exp.Column) -> Binding:
        """The binding of ``col``, a reference written in ``scope`` (see :class:`Binding`)."""
        if col.args.get("table") is not None:
            qual = self.qualifier(col)
            first = True
            for s, srcs in self.chain(scope, col):
                if qual in srcs:
                    src = srcs[qual]
                    if not isinstance(col.this, exp.Star):
                        key = self.view.ident(col.this)
                        if src.provides(self.view, key) is False:
                            return Binding("missing", (src,), s, first)
                    return Binding("source", (src,), s, first)
                first = False
            return Binding("unknown_alias")
        key = self.view.ident(col.this)
        first = True
        for s, srcs in self.chain(scope, col):
            verdicts = [(src, src.provides(self.view, key)) for src in srcs.values()]
            if any(v is None for _, v in verdicts):
                return Binding("unjudged", tuple(srcs.values()), s, first)
            hits = tuple(src for src, v in verdicts if v)
            if len(hits) == 1:
                return Binding("source", hits, s, first)
            if len(hits) > 1:
                if first and _shared_by_join(s.expression, key, self.view):
                    return Binding("shared", hits, s, first)
                return Binding("ambiguous", hits, s, first)
            if first and key in self.output_aliases(scope):
                return Binding("alias", (), s, first)
            first = False
        return Binding("missing")
