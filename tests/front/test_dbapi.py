"""DB-API front without a model: every standard cursor call reaches the real driver.

The wrapper must be invisible to PEP 249 code (sqlite3, psycopg, PyMySQL), refuse states it
cannot handle safely (an open transaction, a closed connection) with typed errors, and map bad
targets to ConnectionConfigError.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pymysql
import pytest
import sqlalchemy as sa

import grid_sql
from grid_sql.errors import ConnectionConfigError, ConnectionStateError
from grid_sql.front.dbapi import Connection, Cursor

from .conftest import Q_1959, Q_MEDIA, few_shot


def _raw(kind: str, pg_url: sa.URL | None = None, my_url: sa.URL | None = None) -> Any:
    if kind == "pg":
        assert pg_url is not None
        return psycopg.connect(
            host=pg_url.host,
            port=pg_url.port,
            user=pg_url.username,
            password=pg_url.password,
            dbname=pg_url.database,
        )
    assert my_url is not None
    admin = sa.make_url(os.environ["GRID_SQL_MYSQL_URL"])
    return pymysql.connect(
        host=admin.host,
        port=admin.port,
        user=admin.username,
        password=admin.password,
        database=my_url.database,
    )


TEMP = {
    "sqlite": "CREATE TEMP TABLE t (a int, b text)",
    "pg": "CREATE TEMP TABLE t (a int, b text)",
    "my": "CREATE TEMPORARY TABLE t (a int, b text)",
}
PARAM = {"sqlite": "?", "pg": "%s", "my": "%s"}


@pytest.fixture(params=["sqlite", "pg", "my"])
def wrapped(
    request: pytest.FixtureRequest, chinook_copy: Any
) -> Iterator[tuple[str, Any, Connection]]:
    kind = request.param
    if kind == "sqlite":
        raw = sqlite3.connect(chinook_copy)
    elif kind == "pg":
        raw = _raw("pg", pg_url=request.getfixturevalue("pg_url"))
    else:
        raw = _raw("my", my_url=request.getfixturevalue("my_url"))
    con = grid_sql.connect(raw)
    yield kind, raw, con
    con.close()


def test_cursor_delegates_standard_api(wrapped: tuple[str, Any, Connection]) -> None:
    kind, raw, con = wrapped
    assert con.driver_connection is raw
    cur = con.cursor()
    assert isinstance(cur, Cursor)
    cur.execute(TEMP[kind])
    p = PARAM[kind]
    cur.executemany(f"INSERT INTO t (a, b) VALUES ({p}, {p})", [(i, f"r{i}") for i in range(7)])
    assert cur.rowcount in (7, -1, 1)  # drivers differ for executemany (PEP 249 allows -1)
    cur.execute(f"SELECT a, b FROM t WHERE a >= {p} ORDER BY a", (2,))
    assert [d[0] for d in cur.description] == ["a", "b"]
    assert cur.result is None and cur.last_sql is None
    assert cur.fetchone() == (2, "r2")
    assert cur.fetchmany(2) == [(3, "r3"), (4, "r4")]
    assert list(cur) == [(5, "r5"), (6, "r6")]
    assert cur.fetchone() is None
    cur.arraysize = 3
    cur.execute("SELECT a FROM t ORDER BY a")
    assert cur.arraysize == 3 and len(cur.fetchmany()) == 3
    assert len(cur.fetchall()) == 4
    cur.execute(f"UPDATE t SET b = {p} WHERE a < {p}", ("x", 3))
    assert cur.rowcount == 3
    con.commit()
    with con.cursor() as c2:
        c2.execute("SELECT count(*) FROM t WHERE b = 'x'")
        assert c2.fetchone() == (3,)
    cur.close()


def test_rollback_reaches_the_driver(wrapped: tuple[str, Any, Connection]) -> None:
    kind, _raw_con, con = wrapped
    cur = con.cursor()
    cur.execute(TEMP[kind])
    con.commit()
    cur.execute("INSERT INTO t (a, b) VALUES (1, 'gone')")
    con.rollback()
    cur.execute("SELECT count(*) FROM t")
    assert cur.fetchone() == (0,)


def test_ask_refuses_uncommitted_work(wrapped: tuple[str, Any, Connection]) -> None:
    kind, _raw_con, con = wrapped
    cur = con.cursor()
    cur.execute(TEMP[kind])
    con.commit()
    cur.execute("INSERT INTO t (a, b) VALUES (1, 'pending')")
    with pytest.raises(ConnectionStateError, match="uncommitted"):
        cur.nl_execute("how many rows are in t?")
    con.rollback()


def test_wrapping_an_open_transaction_is_refused(chinook_copy: Any) -> None:
    raw = sqlite3.connect(chinook_copy)
    raw.execute("CREATE TABLE scratch (a int)")
    raw.execute("INSERT INTO scratch VALUES (1)")
    assert raw.in_transaction
    with pytest.raises(ConnectionStateError, match="open transaction"):
        grid_sql.connect(raw)
    raw.commit()
    con = grid_sql.connect(raw)
    assert con.cursor().execute("SELECT a FROM scratch").fetchall() == [(1,)]
    con.close()


def test_url_and_path_targets(chinook_copy: Any, pg_url: sa.URL) -> None:
    for target in (chinook_copy, str(chinook_copy), f"sqlite:///{chinook_copy}"):
        with grid_sql.connect(target) as con:
            cur = con.cursor()
            cur.execute("SELECT count(*) FROM Artist")
            assert cur.fetchone() == (275,)
    con = grid_sql.connect(pg_url.render_as_string(hide_password=False))
    cur = con.cursor()
    cur.execute("SELECT title FROM album WHERE year = %s ORDER BY id", (1959,))
    assert cur.fetchall() == [("Kind of Blue",), ("Mingus Ah Um",)]
    assert isinstance(con.driver_connection, psycopg.Connection)
    con.close()
    assert con.closed and con.driver_connection.closed
    with pytest.raises(ConnectionStateError, match="closed"):
        con.cursor()


def test_context_manager_commits(chinook_copy: Any) -> None:
    with grid_sql.connect(chinook_copy) as con:
        con.cursor().execute("UPDATE Artist SET Name = 'AC-DC' WHERE ArtistId = 1")
    check = sqlite3.connect(chinook_copy)
    assert check.execute("SELECT Name FROM Artist WHERE ArtistId = 1").fetchone() == ("AC-DC",)
    check.close()


def test_bad_targets_are_config_errors(tmp_path: Any) -> None:
    with pytest.raises(ConnectionConfigError, match="neither a database URL"):
        grid_sql.connect(tmp_path / "missing.sqlite")
    with pytest.raises(ConnectionConfigError):
        grid_sql.connect("nosuchdialect://x/y")
    with pytest.raises(ConnectionConfigError, match="cannot wrap"):
        grid_sql.connect(object())
    with pytest.raises(ConnectionConfigError, match="cannot connect"):
        grid_sql.connect("postgresql+psycopg://nobody:pw@127.0.0.1:1/none")


def test_driver_attributes_pass_through(chinook_copy: Any) -> None:
    raw = sqlite3.connect(chinook_copy)
    con = grid_sql.connect(raw)
    cur = con.cursor()
    cur.execute("INSERT INTO Genre (Name) VALUES ('Free Jazz')")
    assert cur.lastrowid == 26  # the driver cursor's attribute, through the wrapper
    assert con.total_changes == raw.total_changes == 1
    con.rollback()
    con.close()


# ------------------------------------------------------------------ with the real model
def _check_cursor_answer(cur: Cursor) -> None:
    result = cur.result
    assert result is not None
    assert cur.last_sql == result.sql and cur.audit_id == result.audit_id and cur.audit_id
    if result.columns:
        assert [d[0] for d in cur.description] == result.columns
        assert all(len(d) == 7 for d in cur.description)
    assert cur.rowcount == result.rowcount
    rows = result.rows
    assert cur.fetchone() == (tuple(rows[0]) if rows else None)
    assert cur.fetchmany(2) == [tuple(r) for r in rows[1:3]]
    assert list(cur) == [tuple(r) for r in rows[3:]]
    assert cur.fetchall() == [] and cur.fetchone() is None


def test_nl_execute_on_sqlite3(chinook_copy: Any, opts: dict[str, Any]) -> None:
    raw = sqlite3.connect(chinook_copy)
    con = grid_sql.connect(raw, row_limit=20, **opts)
    cur = con.cursor()
    assert cur.nl_execute(Q_MEDIA) is cur
    _check_cursor_answer(cur)
    # a plain execute hands the cursor back to the driver
    cur.execute("SELECT count(*) FROM MediaType")
    assert cur.result is None and cur.fetchone() == (5,)
    # the question ran read-only (query_only) and restored the connection: still writable
    cur.execute("INSERT INTO MediaType (Name) VALUES ('Wax cylinder')")
    assert cur.rowcount == 1
    con.rollback()
    con.close()


@pytest.mark.db
def test_nl_execute_on_psycopg_autocommit(pg_url: sa.URL, backend: Any, audit_db: Any) -> None:
    raw = _raw("pg", pg_url=pg_url)
    raw.autocommit = True
    con = grid_sql.connect(raw, model=backend, audit=audit_db, examples=few_shot(), max_tokens=32)
    cur = con.cursor()
    cur.nl_execute(Q_1959)
    _check_cursor_answer(cur)
    assert raw.autocommit is True  # the caller's mode is back
    cur.execute("SHOW transaction_read_only")
    assert cur.fetchone() == ("off",)
    con.close()


@pytest.mark.db
def test_nl_execute_on_pymysql(my_url: sa.URL, backend: Any, audit_db: Any) -> None:
    raw = pymysql.connect(
        host=my_url.host,
        port=my_url.port,
        user=my_url.username,
        password=my_url.password,
        database=my_url.database,
    )
    con = grid_sql.connect(raw, model=backend, audit=audit_db, examples=few_shot(), max_tokens=32)
    cur = con.cursor()
    cur.nl_execute(Q_1959)
    _check_cursor_answer(cur)
    assert not raw.server_status & 1  # the READ ONLY transaction has ended
    cur.execute("SELECT @@session.tx_read_only")
    assert cur.fetchone() == (0,)
    con.close()
