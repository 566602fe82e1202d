"""Aggregate misuse is flagged exactly where the engine refuses it (SQLite in-process, the
PostgreSQL and MariaDB test servers): each statement below is run on the engine, and the
checker's ``aggregate_misuse`` verdict must equal "the engine fails with an aggregate error"."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
import sqlalchemy as sa
import sqlglot

from grid_sql.policy.aggregates import aggregate_misuse
from grid_sql.policy.conformance import apply_edits

_SQLGLOT = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql"}

# (statement over t(a, b) and u(a, b), dialects where the engine refuses it)
CASES: list[tuple[str, set[str]]] = [
    ("SELECT a FROM t WHERE count(*) > 1", {"sqlite", "postgresql", "mysql"}),
    ("SELECT a FROM t GROUP BY count(*)", {"sqlite", "postgresql", "mysql"}),
    ("SELECT count(max(a)) FROM t", {"sqlite", "postgresql", "mysql"}),
    ("SELECT sum(abs(count(*))) FROM t", {"sqlite", "postgresql", "mysql"}),
    ("SELECT t.a FROM t JOIN u ON count(*) > 1", {"sqlite", "postgresql", "mysql"}),
    ("SELECT a FROM t ORDER BY count(*)", {"sqlite", "postgresql"}),  # PG: ungrouped `a`
    ("SELECT 1 FROM t ORDER BY count(*)", {"sqlite"}),
    ("SELECT DISTINCT a FROM t ORDER BY max(b) DESC", {"sqlite", "postgresql"}),
    ("SELECT a FROM t HAVING count(*) > 1", {"sqlite", "postgresql"}),
    ("SELECT a FROM t WHERE a = (SELECT 1 FROM u ORDER BY count(*) LIMIT 1)", {"sqlite"}),
    ("SELECT count(DISTINCT a, b) FROM t", {"sqlite", "postgresql"}),  # MySQL's form
    ("SELECT a FROM t GROUP BY a HAVING count(DISTINCT a, b) > 1", {"sqlite", "postgresql"}),
    # not refused anywhere
    ("SELECT a FROM t GROUP BY a ORDER BY count(*) DESC", set()),
    ("SELECT count(*) FROM t ORDER BY count(*)", set()),
    ("SELECT count(*) FROM t HAVING count(*) > 1", set()),
    ("SELECT a FROM t ORDER BY count(*) OVER () DESC", set()),
    ("SELECT sum(count(*)) OVER () FROM t GROUP BY a", set()),
    ("SELECT a FROM t ORDER BY (SELECT count(*) FROM u)", set()),
    ("SELECT a FROM t WHERE a > (SELECT avg(a) FROM u)", set()),
    ("SELECT a, (SELECT max(u.b) FROM u WHERE u.a = t.a) FROM t", set()),
    ("SELECT a FROM t GROUP BY a HAVING max(b) > 1 ORDER BY min(b)", set()),
    ("SELECT count(DISTINCT a), count(DISTINCT (a)) FROM t", set()),
]
# SQLite-only forms
SQLITE_CASES: list[tuple[str, bool]] = [
    ("SELECT a FROM t ORDER BY total(b)", True),
    ("SELECT a FROM t ORDER BY max(a, b)", False),  # two arguments: the scalar max
    ("SELECT a FROM t ORDER BY count(*) FILTER (WHERE a > 1)", True),
    # in a subquery: judged when every column it reads is qualified by one of its own items
    ("SELECT a FROM t WHERE a = (SELECT 1 FROM u AS x ORDER BY max(x.b) LIMIT 1)", True),
    (
        "SELECT a FROM t WHERE a = (SELECT 1 FROM u AS x JOIN (SELECT b FROM t) AS d ON 1 = 1 "
        "ORDER BY max(d.b) LIMIT 1)",
        True,
    ),
    ("SELECT a FROM t LIMIT 1 OFFSET count(*)", True),
]

# WHERE aggregates with a mechanical move to HAVING: (statement, the moved statement)
MOVES: list[tuple[str, str]] = [
    (
        "SELECT a FROM t WHERE b > 0 AND count(*) > 1 GROUP BY a",
        "SELECT a FROM t WHERE b > 0 GROUP BY a HAVING count(*) > 1",
    ),
    (
        "SELECT a FROM t WHERE max(b) > 1 GROUP BY a HAVING count(*) > 0 ORDER BY a",
        "SELECT a FROM t GROUP BY a HAVING count(*) > 0 AND max(b) > 1 ORDER BY a",
    ),
    (
        "SELECT a FROM t WHERE a IN (SELECT u.a FROM u WHERE sum(u.b) > 1 GROUP BY u.a)",
        "SELECT a FROM t WHERE a IN (SELECT u.a FROM u GROUP BY u.a HAVING sum(u.b) > 1)",
    ),
]


def _moved(sql: str, dialect: str) -> str | None:
    stmt = sqlglot.parse_one(sql, read=_SQLGLOT[dialect])
    edits = [e for f in aggregate_misuse(stmt, sql, dialect) for e in f.edits]
    return apply_edits(sql, edits) if edits else None


def _flags(sql: str, dialect: str) -> bool:
    stmt = sqlglot.parse_one(sql, read=_SQLGLOT[dialect])
    found = aggregate_misuse(stmt, sql, dialect)
    for f in found:
        assert f.message and f.fix
        if f.position is not None and f.snippet is not None:
            assert sql[f.position : f.position + len(f.snippet)] == f.snippet
    return bool(found)


def _sqlite_refuses(sql: str) -> bool:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a, b)")
    con.execute("CREATE TABLE u (a, b)")
    try:
        con.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        assert any(w in str(exc) for w in ("aggregate", "HAVING", "number of arguments")), exc
        return True
    finally:
        con.close()
    return False


@pytest.mark.parametrize(("sql", "refused"), [(s, "sqlite" in d) for s, d in CASES] + SQLITE_CASES)
def test_sqlite(sql: str, refused: bool) -> None:
    assert _sqlite_refuses(sql) == refused
    assert _flags(sql, "sqlite") == refused


@pytest.mark.parametrize(("sql", "fixed"), MOVES)
def test_sqlite_moves(sql: str, fixed: str) -> None:
    assert _sqlite_refuses(sql) and not _sqlite_refuses(fixed)
    assert _moved(sql, "sqlite") == fixed
    assert not _flags(fixed, "sqlite")
    # nothing is moved where the statement is not refused or has no GROUP BY
    assert _moved(fixed, "sqlite") is None
    ungrouped = sql.replace(" GROUP BY a", "").replace(" GROUP BY u.a", "")
    assert _sqlite_refuses(ungrouped) and _moved(ungrouped, "sqlite") is None


@pytest.mark.db
@pytest.mark.parametrize(
    ("var", "dialect"), [("GRID_SQL_PG_URL", "postgresql"), ("GRID_SQL_MYSQL_URL", "mysql")]
)
def test_servers(server_engine: Callable[[str], sa.Engine], var: str, dialect: str) -> None:
    """The engine's verdict per statement; the checker flags a subset of the refusals (the
    PostgreSQL ungrouped-column rule is not modelled) and never a statement that runs."""
    engine = server_engine(var)
    with engine.connect() as conn:
        if dialect == "mysql":  # temporary tables need a current database; it stays empty
            conn.exec_driver_sql("CREATE DATABASE IF NOT EXISTS grid_sql_scratch")
            conn.exec_driver_sql("USE grid_sql_scratch")
        conn.exec_driver_sql("CREATE TEMPORARY TABLE t (a INT, b INT)")
        conn.exec_driver_sql("CREATE TEMPORARY TABLE u (a INT, b INT)")
        for sql, dialects in CASES:
            nested = conn.begin_nested()
            try:
                conn.exec_driver_sql(sql).fetchall()
                refused = False
                nested.commit()
            except sa.exc.DBAPIError:
                refused = True
                nested.rollback()
            assert refused == (dialect in dialects), sql
            if _flags(sql, dialect):
                assert refused, sql
            # the forms refused in every dialect are flagged in every dialect
            if dialects == {"sqlite", "postgresql", "mysql"}:
                assert _flags(sql, dialect), sql
        for sql, fixed in MOVES:  # refused as written, runs once moved
            assert _moved(sql, dialect) == fixed
            for text, fails in ((sql, True), (fixed, False)):
                nested = conn.begin_nested()
                try:
                    conn.exec_driver_sql(text).fetchall()
                    nested.commit()
                    assert not fails, text
                except sa.exc.DBAPIError:
                    nested.rollback()
                    assert fails, text
        conn.rollback()
