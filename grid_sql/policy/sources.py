"""The schema as conformance sees it (:class:`SchemaView`), a scope's FROM items, and the
name helpers the conformance messages are written with.

Split out of :mod:`grid_sql.policy.conformance` (which re-exports these names) so that its
message rules (``conformance_messages``) use them without importing the pass itself.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from grid_sql.dialect import Dialect
from grid_sql.policy.model import Policy
from grid_sql.schema.model import SchemaSnapshot, TableInfo

from .findings import _MAX_LISTED


# --------------------------------------------------------------------------- names and tables
class SchemaView:
    """Name resolution the way the engine does it, plus the role's visible columns.

    PostgreSQL folds unquoted names to lower case and compares exactly; SQLite and MySQL
    compare names case-insensitively (the dialect's ``quoted_names_exact`` and
    ``bare_names_fold_lower``).
    """

    def __init__(self, snapshot: SchemaSnapshot, policy: Policy, dialect: str) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.dialect = dialect
        self.d = Dialect.lookup(dialect)
        self.exact = self.d.quoted_names_exact
        self.fold_bare = self.d.bare_names_fold_lower
        self.default_schema = policy.default_schema or snapshot.default_schema

    def key(self, name: str) -> str:
        return name if self.exact else name.lower()

    def ident(self, node: exp.Expr | None) -> str:
        """The lookup key of an identifier node as written in the query."""
        if not isinstance(node, exp.Identifier):
            return self.key(node.name) if isinstance(node, exp.Expr) else ""
        if self.fold_bare and not node.quoted:
            return node.name.lower()
        return self.key(node.name)

    def table(self, name: str, schema: str | None) -> tuple[str, TableInfo] | None:
        """(schema name, table) for a key made by :meth:`ident`: a qualified name in its
        schema only, a bare one in the default schema (as the server resolves them:
        ``restaurants.distractor`` is no name of ``public.distractor``), or where the dialect
        searches every schema for a bare name, in the one other schema that has it."""
        s = self.snapshot.schema(schema if schema else self.default_schema)
        if s is not None:
            for t in s.tables:
                if self.key(t.name) == name:
                    return s.name, t
        if schema or not self.d.bare_names_search_every_schema:
            return None
        # SQLite: a bare name also reaches the attached databases, in attach order, which
        # the catalog does not record: one match is the table, several are refused
        found = [(sc.name, t) for sc in self.snapshot.schemas for t in sc.tables]
        found = [(n, t) for n, t in found if self.key(t.name) == name]
        return found[0] if len(found) == 1 else None

    def has(self, info: TableInfo, column: str) -> bool:
        return any(self.key(c.name) == column for c in info.columns)

    def visible_columns(self, schema: str, info: TableInfo) -> list[str]:
        tp = self.policy.table(info.name, schema)
        if tp is None:
            return []
        return [c.name for c in info.columns if tp.readable(c.name)]

    def visible_tables(self) -> list[tuple[str, TableInfo]]:
        out = []
        for schema, info in self.snapshot.iter_tables():
            tp = self.policy.table(info.name, schema)
            if tp is not None and tp.any_right:
                out.append((schema, info))
        return out


@dataclass
class _Source:
    """One FROM item of a scope: a real table, a derived table/CTE, or something opaque."""

    alias: str  # as written (for messages)
    key: str
    schema: str | None = None
    info: TableInfo | None = None
    outputs: set[str] | None = None  # derived table/CTE column keys (None: unknown)
    inner: Scope | None = None  # a derived table's or CTE's own scope (Resolver.output_type)
    opaque: bool = False  # unknown table, table function: columns cannot be judged
    end: int | None = None  # offset just after the FROM item's text (name or alias)
    span: tuple[int, int] | None = None  # the table name as written
    written: str | None = None  # the alias (or bare table name) exactly as the query spells it
    node: exp.Table | None = None  # the FROM item's table node (base tables, opaque items)
    unknown: bool = False  # a table name the snapshot does not have (reported once)

    def provides(self, view: SchemaView, column: str) -> bool | None:
        """True/False, or None when this source's columns are unknown."""
        if self.info is not None:
            return view.has(self.info, column)
        if self.outputs is not None:
            return column in self.outputs
        return None

    def label(self) -> str:
        if self.info is None:
            return f"`{self.alias}`"
        if self.alias.lower() == self.info.name.lower():
            return f"table `{self.info.name}`"
        return f"table `{self.info.name}` (alias {self.alias})"


def _compared_with(col: exp.Column, qual: str, key: str, view: SchemaView) -> bool:
    """Is ``col`` one side of a comparison whose other side is ``qual.key`` already?"""
    parent = col.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if not isinstance(parent, exp.Binary) or isinstance(parent, exp.Connector):
        return False
    for side in (parent.this, parent.expression):
        side = side.unnest() if isinstance(side, exp.Paren) else side
        if side is col or not isinstance(side, exp.Column):
            continue
        t = side.args.get("table")
        if t is not None and view.ident(t) == qual and view.ident(side.this) == key:
            return True
    return False


def _conjuncts(node: exp.Expr) -> Iterable[exp.Expr]:
    """The top-level AND chain of a condition (parentheses looked through)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    else:
        yield node


def _alias_text(node: exp.Expr | None, sql: str) -> str | None:
    """A FROM item's alias (else its table name) exactly as written, quotes included."""
    if node is None:
        return None
    alias = node.args.get("alias")
    ident = alias.this if isinstance(alias, exp.TableAlias) else None
    if ident is None and isinstance(node, exp.Table):
        ident = node.this
    if not isinstance(ident, exp.Identifier):
        return None
    _, text = _span(ident, sql)
    return text


def _in_group_or_order(node: exp.Expr, scope: Scope) -> bool:
    """Is ``node`` inside the GROUP BY or ORDER BY of ``scope``'s own SELECT (not of a
    window, whose ORDER BY sees outer columns)?"""
    sel = scope.expression
    if not isinstance(sel, exp.Select):
        return False
    targets = [sel.args.get("group"), sel.args.get("order")]
    n: exp.Expr | None = node
    while n is not None and n is not sel:
        if isinstance(n, exp.Window):
            return False
        if any(n is t for t in targets if t is not None):
            return True
        n = n.parent
    return False


def _col_name(src: _Source, key: str, written: str) -> str:
    if src.info is not None:
        for c in src.info.columns:
            if c.name == key or c.name.lower() == key.lower():
                return c.name
    return written


def owner_info(elsewhere: list[tuple[str, TableInfo]], name: str) -> TableInfo | None:
    return next((t for _, t in elsewhere if t.name.lower() == name.lower()), None)


def _col_name_of(info: TableInfo | None, key: str, written: str) -> str:
    if info is not None:
        for c in info.columns:
            if c.name.lower() == key.lower():
                return c.name
    return written


def _fk_condition(src: _Source, owner: TableInfo, q: Callable[[str], str]) -> str | None:
    assert src.info is not None
    o = q(owner.name)
    for fk in src.info.foreign_keys:
        if fk.referred_table.lower() == owner.name.lower():
            return " AND ".join(
                f"{o}.{q(r)} = {src.alias}.{q(c)}"
                for c, r in zip(fk.columns, fk.referred_columns, strict=False)
            )
    for fk in owner.foreign_keys:
        if fk.referred_table.lower() == src.info.name.lower():
            return " AND ".join(
                f"{o}.{q(c)} = {src.alias}.{q(r)}"
                for c, r in zip(fk.columns, fk.referred_columns, strict=False)
            )
    return None


def _shared_by_join(select: exp.Expr, key: str, view: SchemaView) -> bool:
    """``JOIN ... USING (c)`` and NATURAL joins make a shared column name unambiguous."""
    for join in select.args.get("joins") or []:
        if join.args.get("method") and str(join.args["method"]).upper() == "NATURAL":
            return True
        if "natural" in (join.text("kind").lower(), join.text("side").lower()):
            return True
        using = join.args.get("using")
        if using and any(
            view.ident(u if isinstance(u, exp.Identifier) else u.this) == key for u in using
        ):
            return True
    return False


def _item_end(table: exp.Table, sql: str) -> int | None:
    """Offset just after a FROM item as written (``t``, ``t AS x``, ``t x``), or after its
    whole JOIN clause (``JOIN t AS x ON ...``): a join inserted there may refer to it."""
    root: exp.Expr = table.parent if isinstance(table.parent, exp.Join) else table
    starts: list[int] = []
    ends: list[int] = []
    for node in root.walk():
        meta = node.meta if isinstance(node, exp.Expr) else {}
        if "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]) + 1)  # meta spans the quotes of a quoted name
    if not ends:
        return None
    end = max(ends)
    depth = sql[min(starts) : end].count("(") - sql[min(starts) : end].count(")")
    while depth > 0:  # `ON (a = b)`: step over the closing parentheses
        rest = sql[end:]
        stripped = rest.lstrip()
        if not stripped.startswith(")"):
            break
        end += len(rest) - len(stripped) + 1
        depth -= 1
    return end


def _span(node: exp.Expr | None, sql: str) -> tuple[int | None, str | None]:
    meta = getattr(node, "meta", None) or {}
    if "start" in meta and "end" in meta:
        start, end = int(meta["start"]), int(meta["end"])
        return start, sql[start : end + 1]
    return None, None


def _written(col: exp.Column, sql: str) -> tuple[str, int | None]:
    """The reference as written (``T2.name``) and its offset, or a rebuilt text."""
    start, snip = _span(col.this, sql)
    tpos, _ = _span(col.args.get("table"), sql)
    if start is not None and snip is not None:
        end = start + len(snip)
        if tpos is not None and tpos < start:
            start = tpos
        return sql[start:end], start
    table = col.table
    return (f"{table}.{col.name}" if table else col.name), None


def _close(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` ignoring case and underscores, if it is close."""
    norm = {re.sub(r"[_\s]", "", c.lower()): c for c in candidates}
    target = re.sub(r"[_\s]", "", name.lower())
    if target in norm:
        return norm[target]
    hit = difflib.get_close_matches(target, list(norm), n=1, cutoff=0.8)
    return norm[hit[0]] if hit else None


def quote_name(name: str, dialect: str) -> str:
    """``name`` as it must be written in ``dialect`` (PostgreSQL: quoted unless lower case)."""
    return Dialect.lookup(dialect).quote(name)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (", …" if len(names) > _MAX_LISTED else "")
