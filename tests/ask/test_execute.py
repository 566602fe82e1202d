"""Safe execution on real engines: one statement, READ ONLY for reads, opt-in writes, timeout,
row cap. SQLite on a copy of the packaged Chinook; PostgreSQL and MariaDB via scripts/services.sh.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from grid_sql.ask.execute import execute, statement_verb
from grid_sql.errors import (
    ExecutionError,
    PolicyViolation,
    StatementError,
    StatementTimeout,
    WriteRefused,
)
from grid_sql.policy import AppPolicy, narrow, open_sqlite, read_policy, sqlite_baseline
from grid_sql.schema import introspect

SELECT_ONLY = AppPolicy.from_mapping({"verbs": ["select"]})


def _sqlite(path, app=None):
    engine = open_sqlite(path)
    snap = introspect(engine)
    return engine, narrow(sqlite_baseline(snap), app, snap)


def _count(engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(sql).scalar_one())


# ------------------------------------------------------------------ parsing
def test_statement_verb_kinds():
    assert statement_verb("SELECT 1;", "sqlite") == "select"
    assert statement_verb("WITH t AS (SELECT 1) SELECT * FROM t", "postgresql") == "select"
    assert statement_verb("insert into t values (1)", "mysql") == "insert"
    assert statement_verb("DELETE FROM t", "sqlite") == "delete"
    assert statement_verb("PRAGMA writable_schema = 1", "sqlite") != "select"
    assert (
        statement_verb("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "postgresql")
        != "select"
    )


@pytest.mark.parametrize("sql", ["", "   ", "SELECT 1; SELECT 2", "SELECT 1; DELETE FROM Album"])
def test_not_exactly_one_statement_runs_nothing(chinook_copy, sql):
    engine, policy = _sqlite(chinook_copy)
    before = _count(engine, "SELECT count(*) FROM Album")
    with pytest.raises(StatementError):
        execute(engine, sql, policy=policy, allow_writes=True)
    assert _count(engine, "SELECT count(*) FROM Album") == before


# ------------------------------------------------------------------ SQLite
def test_sqlite_select_cap_and_columns(chinook_copy):
    engine, policy = _sqlite(chinook_copy, SELECT_ONLY)
    res = execute(
        engine, "SELECT AlbumId, Title FROM Album ORDER BY AlbumId;", policy=policy, row_limit=10
    )
    assert res.columns == ["AlbumId", "Title"]
    assert len(res.rows) == 10 and res.truncated and res.rowcount == 10
    assert res.rows[0] == (1, "For Those About To Rock We Salute You")
    exact = execute(
        engine, "SELECT AlbumId FROM Album WHERE AlbumId <= 10", policy=policy, row_limit=10
    )
    assert len(exact.rows) == 10 and not exact.truncated


def test_sqlite_write_refused_for_select_only_role(chinook_copy):
    engine, policy = _sqlite(chinook_copy, SELECT_ONLY)
    with pytest.raises(WriteRefused) as info:
        execute(engine, "DELETE FROM InvoiceLine", policy=policy, allow_writes=True)
    assert isinstance(info.value, PolicyViolation)
    assert info.value.sql == "DELETE FROM InvoiceLine"
    assert _count(engine, "SELECT count(*) FROM InvoiceLine") == 2240


def test_sqlite_write_needs_opt_in_then_commits(chinook_copy):
    engine, policy = _sqlite(chinook_copy)
    sql = "UPDATE Genre SET Name = 'Rock!' WHERE GenreId = 1"
    with pytest.raises(WriteRefused, match="allow_writes"):
        execute(engine, sql, policy=policy)
    assert _count(engine, "SELECT count(*) FROM Genre WHERE Name = 'Rock!'") == 0
    res = execute(engine, sql, policy=policy, allow_writes=True)
    assert res.wrote and res.rowcount == 1
    assert _count(engine, "SELECT count(*) FROM Genre WHERE Name = 'Rock!'") == 1


def test_sqlite_failed_write_rolls_back(chinook_copy):
    engine, policy = _sqlite(chinook_copy)
    # the second row violates the primary key: the first must not survive
    sql = "INSERT INTO Genre (GenreId, Name) VALUES (100, 'a'), (1, 'dup')"
    with pytest.raises(ExecutionError):
        execute(engine, sql, policy=policy, allow_writes=True)
    assert _count(engine, "SELECT count(*) FROM Genre WHERE GenreId = 100") == 0


def test_sqlite_reads_are_query_only_even_when_policy_allows_writes(chinook_copy):
    """A SELECT that sneaks a write past the verb check still meets query_only."""
    engine, policy = _sqlite(chinook_copy)
    with engine.connect() as conn:
        res = execute(conn, "SELECT count(*) FROM Album", policy=policy)
        assert res.rows == [(347,)]
        # query_only is restored afterwards on the caller's connection
        assert conn.exec_driver_sql("PRAGMA query_only").scalar() == 0


def test_sqlite_timeout_interrupts(chinook_copy):
    engine, policy = _sqlite(chinook_copy, SELECT_ONLY)
    slow = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
        "SELECT count(*) FROM c"
    )
    with pytest.raises(StatementTimeout):
        execute(engine, slow, policy=policy, timeout_s=0.2)
    # the connection is usable afterwards
    assert execute(engine, "SELECT 1", policy=policy).rows == [(1,)]


def test_sqlite_percent_and_colon_in_literals(chinook_copy):
    engine, policy = _sqlite(chinook_copy, SELECT_ONLY)
    res = execute(
        engine, "SELECT count(*) FROM Artist WHERE Name LIKE 'A%' AND ':x' = ':x'", policy=policy
    )
    assert res.rows[0][0] > 0


# ------------------------------------------------------------------ PostgreSQL
@pytest.mark.db
def test_pg_select_only_role(pg_front):
    url = pg_front("gs_front_ro")
    policy = read_policy(url)
    assert policy.read_only
    res = execute(url, "SELECT id, name FROM item ORDER BY id", policy=policy, row_limit=5)
    assert res.columns == ["id", "name"] and len(res.rows) == 5 and res.truncated
    with pytest.raises(WriteRefused):
        execute(url, "UPDATE item SET price = 0", policy=policy, allow_writes=True)
    # a data-modifying CTE looks like a query to a careless verb check; refused here, and the
    # READ ONLY transaction would refuse it at the server as well
    with pytest.raises(WriteRefused):
        execute(
            url,
            "WITH d AS (DELETE FROM item RETURNING id) SELECT * FROM d",
            policy=policy,
            allow_writes=True,
        )


@pytest.mark.db
def test_pg_read_only_transaction_is_enforced_by_the_server(pg_front):
    """A SELECT that locks rows passes the verb check; the READ ONLY transaction refuses it."""
    url = pg_front("gs_front_rw")
    policy = read_policy(url)
    with pytest.raises(ExecutionError, match="read-only transaction"):
        execute(url, "SELECT * FROM item FOR UPDATE", policy=policy)
    # on a caller's connection with an open transaction: a READ ONLY savepoint, after which
    # the caller's transaction can still write
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TEMP TABLE t (x int)")
        with pytest.raises(ExecutionError, match="read-only transaction"):
            execute(conn, "SELECT * FROM item FOR UPDATE", policy=policy)
        assert execute(conn, "SELECT count(*) FROM item", policy=policy).rows == [(25,)]
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
        conn.rollback()
    engine.dispose()


@pytest.mark.db
def test_pg_write_opt_in_commits(pg_front):
    url = pg_front("gs_front_rw")
    policy = read_policy(url)
    assert "update" in policy.statement_verbs
    with pytest.raises(WriteRefused, match="allow_writes"):
        execute(url, "UPDATE note SET body = 'x' WHERE id = -1", policy=policy)
    res = execute(
        url,
        "INSERT INTO note (id, body) VALUES (-7, 'hello') "
        "ON CONFLICT (id) DO UPDATE SET body = 'hello'",
        policy=policy,
        allow_writes=True,
    )
    assert res.wrote and res.rowcount == 1
    back = execute(url, "SELECT body FROM note WHERE id = -7", policy=policy)
    assert back.rows == [("hello",)]


@pytest.mark.db
def test_pg_timeout(pg_front):
    url = pg_front("gs_front_ro")
    policy = read_policy(url)
    with pytest.raises(StatementTimeout):
        execute(url, "SELECT pg_sleep(3)", policy=policy, timeout_s=0.2)


# ------------------------------------------------------------------ MariaDB
@pytest.mark.db
def test_mariadb_select_only_role(my_front):
    url = my_front("gs_front_ro")
    policy = read_policy(url)
    assert policy.read_only
    res = execute(url, "SELECT id, name FROM item ORDER BY id", policy=policy, row_limit=3)
    assert res.columns == ["id", "name"] and len(res.rows) == 3 and res.truncated
    with pytest.raises(WriteRefused):
        execute(url, "DELETE FROM item", policy=policy, allow_writes=True)


@pytest.mark.db
def test_mariadb_read_only_transaction_is_enforced_by_the_server(my_front):
    url = my_front("gs_front_rw")
    policy = read_policy(url)
    with pytest.raises(ExecutionError, match="(?i)read.only"):
        execute(url, "SELECT id FROM item WHERE id = 1 FOR UPDATE", policy=policy)


@pytest.mark.db
def test_mariadb_write_opt_in_commits(my_front):
    url = my_front("gs_front_rw")
    policy = read_policy(url)
    res = execute(
        url,
        "INSERT INTO note (id, body) VALUES (-7, 'hello') ON DUPLICATE KEY UPDATE body = 'hello'",
        policy=policy,
        allow_writes=True,
    )
    assert res.wrote
    back = execute(url, "SELECT body FROM note WHERE id = -7", policy=policy)
    assert back.rows == [("hello",)]


@pytest.mark.db
def test_mariadb_timeout(my_front):
    url = my_front("gs_front_ro")
    policy = read_policy(url)
    with pytest.raises(StatementTimeout):
        # 25^6 rows: minutes of work (BENCHMARK() and SLEEP() return early instead of failing)
        slow = "SELECT count(*) FROM item a, item b, item c, item d, item e, item f"
        execute(url, slow + " WHERE a.price + f.price > 0", policy=policy, timeout_s=0.3)
    # the session timeout is restored: a later statement is not capped at 0.3 s
    assert execute(url, "SELECT 1", policy=policy).rows == [(1,)]
