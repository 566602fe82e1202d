"""Role grammars the policy tests share (one table ``t(id, v)``, SELECT only), a language check."""

from __future__ import annotations

from collections.abc import Callable

from grid_sql.dialect import Dialect
from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

DIALECTS = ("postgresql", "mysql", "sqlite")


def select_role(dialect: str) -> Grammar:
    """The role grammar (no scopes) of a role that may SELECT ``t(id, v)``."""
    snap = SchemaSnapshot(
        dialect,
        "main" if dialect == "sqlite" else "public" if dialect == "postgresql" else "db",
        (
            SchemaInfo(
                "main" if dialect == "sqlite" else "public" if dialect == "postgresql" else "db",
                (TableInfo("t", columns=(ColumnInfo("id", "integer"), ColumnInfo("v", "text"))),),
            ),
        ),
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    return role_grammar(Grammar.dialect(dialect), snap, pol)


def pg_scoped_role() -> Grammar:
    """A scoped PostgreSQL role over ``t(id, v)`` with the dialect's whole function list
    (``statement_timestamp``, ``now``, ``date``), as the Asker builds it."""
    from grid_sql.policy.grants import no_grants_baseline
    from grid_sql.policy.scopes import role_scopes

    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo(
                "public",
                (TableInfo("t", columns=(ColumnInfo("id", "integer"), ColumnInfo("v", "text"))),),
            ),
        ),
    )
    pol = narrow(
        no_grants_baseline(snap, Dialect.get("postgresql")),
        AppPolicy.from_mapping({"verbs": ["select"]}),
        snap,
    )
    assert {"statement_timestamp", "now", "date"} <= pol.allowed_functions
    return role_grammar(Grammar.dialect("postgresql"), snap, pol).with_scopes(
        role_scopes(snap, policy=pol)
    )


def admits(g: Grammar) -> Callable[[str], bool]:
    """Whether ``g``'s language holds a statement: every byte read, and it may end there."""
    rt = ParserRuntime.for_grammar(g)

    def check(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    return check
