"""Schema conformance: does every name in a finished statement mean something here?

The grammar's schema lexicon admits any column of any allowed table at any identifier
position, and the SELECT list precedes FROM (paper Proposition 11), so a small model can write
``T2.name`` where ``name`` lives on ``T1``, a column of a table it never joined, or a function
another dialect has. The engine then fails with "no such column", and its message tells
neither the model nor the user what to write instead.

This module resolves every column reference of a query against the tables in *its* scope
(FROM/JOIN items with their aliases, CTEs, derived tables, correlated outer scopes) using the
:class:`SchemaSnapshot`, and checks every function call against what the dialect provides.
Each :class:`Finding` carries a self-contained ``message`` that names the table, the alias
and the columns the table does have, and a ``fix`` that is one short concrete instruction
("replace `T2.name` with `T1.name`"), because small models follow those best in the repair
round.

The names are resolved by :class:`grid_sql.policy.resolve.Resolver`, the one resolver the
policy checker's rights walk also reads (the checker hands the same instance in): this pass
words the bindings that name nothing (``unknown_alias``, ``missing``, ``ambiguous``). Nothing
is guessed: a name that cannot be judged (a source whose columns are unknown, e.g.
``SELECT *`` in a derived table) is left alone, so gold SQL is never flagged.

Suggestions (other tables' columns, close names) only ever mention what the role may read,
so a repair message never discloses a hidden column.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from grid_sql.schema.model import TableInfo

from .conformance_messages import ConformanceMessages
from .dialect_calls import (  # noqa: F401 - re-exported: conformance's public names
    dialect_functions,
    function_instead,
    sqlite_functions,
    top_clause,
)
from .findings import (  # noqa: F401 - re-exported
    _MAX_LISTED,
    CertainEdit,
    Finding,
    FindingKind,
    apply_edits,
)
from .resolve import Binding, Resolver  # noqa: F401 - re-exported: the shared resolver
from .sources import (  # noqa: F401 - SchemaView, owner_info, quote_name re-exported
    SchemaView,
    _alias_text,
    _close,
    _compared_with,
    _conjuncts,
    _in_group_or_order,
    _item_end,
    _listed,
    _shared_by_join,
    _Source,
    _span,
    _written,
    owner_info,
    quote_name,
)


class _Conformance(ConformanceMessages):
    def __init__(self, resolver: Resolver) -> None:
        self.r = resolver
        self.view = resolver.view
        self.sql = resolver.sql
        self.out: list[Finding] = []
        self._seen: set[tuple[object, ...]] = set()
        self._swap: dict[int, tuple[_Source, TableInfo]] = {}
        self.certain: list[CertainEdit] = []  # fixes the schema alone decides (autofix)

    def q(self, name: str) -> str:
        return quote_name(name, self.view.dialect)

    def add(self, f: Finding) -> None:
        key = (f.kind, f.table, f.column, f.position, f.snippet)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(f)

    # ---------------------------------------------------------------- sources
    def sources(self, scope: Scope) -> dict[str, _Source]:
        """The FROM items of ``scope``, as the shared resolver built them."""
        return self.r.sources(scope)

    def _unknown_table(self, table: exp.Table) -> None:
        name = table.name
        pos, snip = _span(table.this, self.sql)
        visible = self.view.visible_tables()
        tables = [t.name for _, t in visible]
        close = _close(name, tables)
        msg = f"`{name}`: there is no table `{name}` in this database"
        fix = None
        edits: tuple[tuple[int, int, str], ...] = ()
        # A bare name resolves in the default schema only; the same table in another schema
        # must be written with its schema (a catalog of many schemas: `restaurants.restaurant`).
        # Suggesting the bare word again would repeat the refused statement.
        # A qualified name resolves in its schema only: the table in another schema is
        # named with that one (`sales.restaurant` for `restaurants.restaurant`).
        key = self.view.ident(table.this)
        written = self.view.key(table.db) if table.db else None
        homes = [
            f"{self.q(sch)}.{self.q(t.name)}"
            for sch, t in visible
            if self.view.key(t.name) == key
            and self.view.key(sch) != (written or self.view.key(self.view.default_schema or ""))
        ]
        if table.db:
            dpos, _ = _span(table.args.get("db"), self.sql)
            if pos is not None and snip is not None and dpos is not None and dpos < pos:
                snip = self.sql[dpos : pos + len(snip)]
                pos = dpos
        if homes:
            where = (
                f"schema `{table.db}`"
                if table.db
                else f"the default schema `{self.view.default_schema}`"
            )
            msg = f"`{name}`: there is no table `{name}` in {where}"
            if len(homes) > 1:
                msg += f"; it is in several schemas: {_listed(homes)} (write one of them)"
            else:
                msg += f"; it is `{homes[0]}` (write its schema)"
                fix = f"replace `{name}` with `{homes[0]}`"
                if pos is not None and snip is not None:
                    edits = ((pos, pos + len(snip), homes[0]),)
        elif close:
            msg += f"; did you mean `{self.q(close)}`?"
            fix = f"replace `{name}` with `{self.q(close)}`"
            if pos is not None and snip is not None:
                edits = ((pos, pos + len(snip), self.q(close)),)
        else:
            msg += f"; tables: {_listed(tables)}."
        self.add(
            Finding("unknown_table", msg, fix, table=name, position=pos, snippet=snip, edits=edits)
        )

    # ---------------------------------------------------------------- scope walk
    def scope(self, scope: Scope) -> None:
        own = self.sources(scope)
        expr = scope.expression
        self._wrong_table(scope, own, self.r.output_aliases(scope))
        self._positions(scope)
        for col in self.r.columns(scope):
            if col.args.get("catalog"):
                continue  # catalog.schema.table.column: left to the policy checker
            if col.args.get("db"):
                self._three_part(scope, col)
                continue
            if col.args.get("table") is not None:
                self._qualified(scope, col)
            elif isinstance(col.this, exp.Identifier):
                if isinstance(expr, exp.SetOperation):
                    continue  # ORDER BY of a UNION names output columns
                self._bare(scope, col)

    def _positions(self, scope: Scope) -> None:
        """``GROUP BY n`` / ``ORDER BY n`` / ``DISTINCT ON (n)`` past the end of the SELECT
        list name no output column (every engine refuses them). A list with ``*`` is left
        alone: its width is the FROM items' columns, known only when all of them are."""
        expr = scope.expression
        if not isinstance(expr, exp.Select | exp.SetOperation):
            return
        selects = expr.selects
        if any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in selects
        ):
            return
        lists: list[exp.Expr] = []
        group = expr.args.get("group")
        if isinstance(group, exp.Group):
            lists.extend(group.expressions)
        order = expr.args.get("order")
        if isinstance(order, exp.Order):
            lists.extend(o.this if isinstance(o, exp.Ordered) else o for o in order.expressions)
        distinct = expr.args.get("distinct")
        on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
        if isinstance(on, exp.Expr):
            lists.extend(on.expressions)
        for node in lists:
            if not (isinstance(node, exp.Literal) and node.is_int) or int(node.this) <= len(
                selects
            ):
                continue
            pos, snip = _span(node, self.sql)
            self.add(
                Finding(
                    "unknown_column",
                    f"`{node.this}` refers to output column {node.this}, but the SELECT list has "
                    f"{len(selects)} column{'s' if len(selects) != 1 else ''}.",
                    f"refer to a column of the SELECT list (1 to {len(selects)}) or name it",
                    column=node.this,
                    position=pos,
                    snippet=snip,
                )
            )

    def _wrong_table(self, scope: Scope, own: dict[str, _Source], aliases: set[str]) -> None:
        """A one-table query none of whose columns the table has, all of which one other
        table has: the model picked the wrong table (``SELECT Country FROM singer_in_concert``
        for ``singer``). Swapping the table is the fix; a join would change the row count."""
        if len(own) != 1:
            return
        (src,) = own.values()
        if src.info is None or src.span is None:
            return
        keys: set[str] = set()
        for col in scope.find_all(exp.Column):
            if not isinstance(col.this, exp.Identifier):
                continue
            qual = col.args.get("table")
            if qual is not None and self.view.ident(qual) != src.key:
                continue
            key = self.view.ident(col.this)
            if qual is None and key in aliases:
                continue
            if self.view.has(src.info, key):
                return  # the table is used for something: not a wrong table
            keys.add(key)
        if not keys:
            return
        owners = [
            info
            for schema, info in self.view.visible_tables()
            if info is not src.info
            and keys <= {self.view.key(c) for c in self.view.visible_columns(schema, info)}
        ]
        if len(owners) == 1:
            self._swap[id(scope)] = (src, owners[0])

    def _chain(
        self, scope: Scope, node: exp.Expr | None = None
    ) -> Iterable[tuple[Scope, dict[str, _Source]]]:
        """The scopes a name at ``node`` may resolve in (:meth:`Resolver.chain`)."""
        return self.r.chain(scope, node)

    def _qualified(self, scope: Scope, col: exp.Column) -> None:
        b = self.r.bind(scope, col)
        written, pos = _written(col, self.sql)
        if b.kind == "unknown_alias":
            if isinstance(col.this, exp.Star):
                return  # `x.*` of an unknown alias: the policy checker's rights walk reports it
            self._unknown_alias(scope, col, written, pos)
            return
        if b.kind != "missing":
            return
        (src,) = b.sources
        key = self.view.ident(col.this)
        self._requalify(scope, col, src, key, pos)
        self._missing(scope, col, src, key, written, pos)

    def _bare(self, scope: Scope, col: exp.Column) -> None:
        b = self.r.bind(scope, col)
        if b.kind == "missing":
            key = self.view.ident(col.this)
            written, pos = _written(col, self.sql)
            self._missing(scope, col, None, key, written, pos)
        elif b.kind == "ambiguous" and b.first:
            assert b.level is not None
            key = self.view.ident(col.this)
            written, pos = _written(col, self.sql)
            self._ambiguous(col, list(b.sources), written, pos)
            self._equal_qualify(b.level, list(b.sources), key, written, pos)

    # ---------------------------------------------------------------- certain fixes
    def _requalify(
        self, scope: Scope, col: exp.Column, src: _Source, key: str, pos: int | None
    ) -> None:
        """``q.c`` where ``q`` lacks ``c``: requalify when exactly one other FROM item visible
        here (this level or an enclosing one, by the same resolution rules as the finding)
        has ``c``, that item and ``q``'s are both FROM items of this level (moving a reference
        between levels would change what the subquery correlates to), every item's columns
        are known, and the new qualifier binds to that item at this point."""
        if pos is None:
            return
        swap = self._swap.get(id(scope))
        if swap is not None and swap[0] is src:
            return  # the table itself is the wrong one: a different fix, not certain
        verdicts = [
            (s, s.provides(self.view, key)) for s in self._in_scope(scope, col) if s is not src
        ]
        if any(v is None for _, v in verdicts):
            return  # a FROM item with unknown columns might have it too
        owners = [s for s, v in verdicts if v]
        if len(owners) != 1:
            return
        o = owners[0]
        own = self.sources(scope)
        if own.get(o.key) is not o or own.get(src.key) is not src:
            return  # across query levels the edit would add or drop a correlation: a guess
        if o.written is None or (o.info is not None and not self._readable(o, key)):
            return  # never point a reference at a column the role may not read
        bound = next((srcs[o.key] for _, srcs in self._chain(scope, col) if o.key in srcs), None)
        if bound is not o:
            return
        if _compared_with(col, o.key, key, self.view):
            return  # `T1.c = T2.c` -> `T2.c = T2.c` would turn a join condition into TRUE
        cpos, ctext = _span(col.this, self.sql)
        if cpos is None or ctext is None:
            return
        end = cpos + len(ctext)
        self.certain.append(
            CertainEdit(
                pos,
                end,
                self.sql[pos:end],
                f"{o.written}.{ctext}",
                f"{src.label()} has no column `{col.name}`; {o.label()} is the only table "
                "in scope that has it",
                "requalify",
            )
        )

    def _equal_qualify(
        self, scope: Scope, hits: list[_Source], key: str, written: str, pos: int | None
    ) -> None:
        """An ambiguous bare ``c``: qualify it when every candidate is provably equal — all
        candidates are real tables, or derived tables passing a real table's ``c`` through
        (``Resolver.output_type``), whose ``c`` has one declared type, joined by ``=`` on
        ``c`` (top-level AND chains of inner-join ON clauses and WHERE), with no outer join
        in the query (a NULL-extended side would break the equality). The qualifier chosen is
        a real table's the role may read."""
        sel = scope.expression
        if pos is None or not isinstance(sel, exp.Select):
            return
        types = set()
        for s in hits:
            if s.info is None:
                derived = self.r.output_type(s, key)
                if derived is None:
                    return
                types.add(derived)
                continue
            c = next((c for c in s.info.columns if self.view.key(c.name) == key), None)
            if c is None:
                return
            types.add(c.type.strip().lower())
        if len(types) != 1:
            return  # affinity could make `=` true between values that differ
        joins = sel.args.get("joins") or []
        conds: list[exp.Expr] = []
        for j in joins:
            kind = j.text("kind").upper()
            if j.text("side") or j.args.get("method") or kind not in ("", "INNER", "CROSS"):
                return
            if j.args.get("on") is not None:
                conds.append(j.args["on"])
        where = sel.args.get("where")
        if where is not None:
            conds.append(where.this)
        own = self.sources(scope)
        parent: dict[int, int] = {id(s): id(s) for s in hits}

        def find(x: int) -> int:
            while parent[x] != x:
                x = parent[x]
            return x

        for cond in conds:
            for eq in _conjuncts(cond):
                if not isinstance(eq, exp.EQ):
                    continue
                ends = []
                for side in (eq.this, eq.expression):
                    side = side.unnest() if isinstance(side, exp.Paren) else side
                    if not isinstance(side, exp.Column) or side.args.get("table") is None:
                        break
                    if not isinstance(side.this, exp.Identifier):
                        break
                    if self.view.ident(side.this) != key:
                        break
                    bound = own.get(self.view.ident(side.args["table"]))
                    if bound is None or id(bound) not in parent:
                        break
                    ends.append(id(bound))
                if len(ends) == 2:
                    parent[find(ends[0])] = find(ends[1])
        if len({find(id(s)) for s in hits}) != 1:
            return
        choice = next(
            (s for s in hits if s.info is not None and s.written and self._readable(s, key)),
            None,
        )
        if choice is None or own.get(choice.key) is not choice:
            return
        labels = " and ".join(s.label() for s in hits)
        self.certain.append(
            CertainEdit(
                pos,
                pos + len(written),
                written,
                f"{choice.written}.{written}",
                f"`{written}` is ambiguous, but {labels} are joined by `=` on it, so every "
                "candidate holds the same value",
                "equal_join",
            )
        )


# --------------------------------------------------------------------------- entry point
def check_query(
    query: exp.Expr, sql: str, view: SchemaView, resolver: Resolver | None = None
) -> list[Finding]:
    """Schema findings for one parsed query (a SELECT, set operation or WITH query).

    ``resolver``: a fresh :class:`Resolver` of ``query`` to share with the caller (the
    policy checker then reads the same bindings); built here when not given."""
    return _check(query, sql, view, resolver).out


def certain_fixes(query: exp.Expr, sql: str, view: SchemaView) -> list[CertainEdit]:
    """The fixes of :func:`check_query`'s column findings that the schema alone decides
    (see :class:`CertainEdit`); everything else (close spellings, several candidates,
    unknown tables) has none here."""
    return _check(query, sql, view).certain


def _check(
    query: exp.Expr, sql: str, view: SchemaView, resolver: Resolver | None = None
) -> _Conformance:
    if resolver is None:
        resolver = Resolver(query, sql, view)
    run = _Conformance(resolver)
    resolver.unknown_table = run._unknown_table
    for scope, duplicate in resolver.scopes():
        if duplicate is not None:
            run.add(
                Finding(
                    "duplicate_alias",
                    f"`{duplicate}` names two FROM items of one query; no column can be read "
                    "through it unambiguously.",
                    f"give each FROM item its own alias (e.g. `{duplicate}2` for the second).",
                    table=duplicate,
                )
            )
            continue  # its columns cannot be resolved
        run.scope(scope)
    return run
