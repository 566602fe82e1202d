"""A conversion's type is an allow-list (docs/policy.md; ``policy/edges.py`` "Types").

The role grammar's ``TYPE_NAME`` lexicon (``Dialect.cast_types``) and the checker's
``VALUE_TYPES`` must say the same thing: every word the mask admits is a type the checker
passes, and every such word is a type the server knows. Casts to ``regclass`` and friends
(a catalog lookup by name) are outside both.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
import sqlglot
from sqlglot import exp

from grid_sql.dialect import Dialect
from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, Checker, narrow, sqlite_baseline
from grid_sql.policy.edges import VALUE_TYPES
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

DIALECTS = ("postgresql", "mysql", "sqlite")
# the words of a type the grammar spells as two (the second is a keyword there)
SPELLED = {("postgresql", "double"): "double precision", ("mysql", "signed"): "signed integer"}


def _cast(dialect: str, word: str) -> str:
    return f"CAST(NULL AS {SPELLED.get((dialect, word), word)})"  # NULL converts to any type


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_cast_type_is_a_value_type(dialect: str) -> None:
    read = Dialect.get(dialect).sqlglot_read
    for word in sorted(Dialect.get(dialect).cast_types):
        tree = sqlglot.parse_one(f"SELECT {_cast(dialect, word)}", read=read)
        (cast,) = tree.find_all(exp.Cast)
        assert cast.to.this in VALUE_TYPES, (dialect, word, cast.to)


def _role(dialect: str) -> Grammar:
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


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_language_admits_the_cast_types_and_nothing_else(dialect: str) -> None:
    rt = ParserRuntime.for_grammar(_role(dialect))

    def admits(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    for word in Dialect.get(dialect).cast_types:
        assert admits(f"SELECT {_cast(dialect, word)} FROM t"), word
    for word in ("regclass", "regrole", "oid", "t", "id", "xml", "employee"):
        assert not admits(f"SELECT CAST(v AS {word}) FROM t"), word
    if dialect == "postgresql":
        assert admits("SELECT v::text, DATE '2020-01-01', id::int4 FROM t")
        assert not admits("SELECT v::regclass FROM t")
        assert not admits("SELECT regclass 'pg_authid' FROM t")


def _server(dialect: str) -> str | None:
    return os.environ.get({"postgresql": "GRID_SQL_PG_URL", "mysql": "GRID_SQL_MYSQL_URL"}[dialect])


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_every_cast_type_runs_on_the_server(dialect: str) -> None:
    """Each admitted word is a type the server knows (PostgreSQL 15, MariaDB 10.11): the mask
    never offers a conversion the database would refuse as unknown."""
    url = _server(dialect)
    if url is None:
        pytest.skip("run scripts/services.sh start and eval its env")
    engine = sa.create_engine(url)
    unknown = []
    try:
        with engine.connect() as conn:
            for word in sorted(Dialect.get(dialect).cast_types):
                try:
                    conn.exec_driver_sql(f"SELECT {_cast(dialect, word)}")
                except sa.exc.DBAPIError as e:
                    unknown.append((word, str(e.orig)[:80]))
                    conn.rollback()
    finally:
        engine.dispose()
    assert unknown == []


def test_the_checker_passes_the_cast_types() -> None:
    for dialect in DIALECTS:
        snap = SchemaSnapshot(dialect, None, ())
        checker = Checker(snap, sqlite_baseline(snap))
        for word in Dialect.get(dialect).cast_types:
            sql = f"SELECT {_cast(dialect, word)}"
            assert not [v for v in checker.check(sql) if v.kind == "banned_type"], (dialect, sql)
