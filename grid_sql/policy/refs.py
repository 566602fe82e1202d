"""What the checker's rules share: a resolved table reference and the statement-tree helpers.

Apart from :mod:`grid_sql.policy.checker` so that its scope walk (``scope_walk``) and its DML
rules (``dml``) use them without importing the checker.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from grid_sql.policy.conformance import Finding
from grid_sql.policy.model import TablePolicy
from grid_sql.schema.model import TableInfo

from .violation import Violation


@dataclass(frozen=True)
class _Ref:
    """A resolved real table behind an alias."""

    schema: str
    info: TableInfo
    rights: TablePolicy | None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.info.name}"


_SCOPE = object()


def _violation(f: Finding) -> Violation:
    return Violation(
        f.kind,
        f.message,
        table=f.table,
        column=f.column,
        position=f.position,
        snippet=f.snippet,
        why="schema conformance",
        fix=f.fix,
        edits=f.edits,
    )


def _tables_in(node: Any) -> Iterator[exp.Table]:
    """Tables directly named in a USING/FROM/JOIN clause (not inside subqueries)."""
    nodes = node if isinstance(node, list) else [node]
    for n in nodes:
        if not isinstance(n, exp.Expr):
            continue
        for t in n.find_all(exp.Table):
            if not _inside_query(t, n):
                yield t


def _inside_query(node: exp.Expr, root: exp.Expr) -> bool:
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, exp.Query):
            return True
        p = p.parent
    return False


def _top_queries(stmt: exp.Expr) -> list[exp.Expr]:
    """Outermost query nodes inside a DML statement (each is scoped on its own)."""
    out: list[exp.Expr] = []
    for node in stmt.find_all(exp.Query):
        if node is stmt:
            continue
        p = node.parent
        nested = False
        while p is not None and p is not stmt:
            if isinstance(p, exp.Query):
                nested = True
                break
            p = p.parent
        if not nested:
            out.append(node)
    return out


def _columns_outside_queries(node: exp.Expr | None) -> list[exp.Column]:
    """Column references in ``node`` that are not inside a nested query (scoped separately)."""
    if node is None:
        return []
    return [c for c in node.find_all(exp.Column) if not _inside_query(c, node)]
