"""Crafted bypass attempts on the real servers (issue 23 §4): none executes.

A scratch database ``grid_sql_bypass`` on each server (PostgreSQL 15, MariaDB 10.11) holds the
schema of ``tests/policy/bypass_attempts.py`` with canary values; the service role
``gs_bypass`` may SELECT every table, the application policy denies ``employee`` and the
columns ``customer.email`` / ``customer.card``: the usual deployment, one wide service account
narrowed by the app. Every attempt goes through ``Asker.run_sql`` (the checker, then safe
execution): none may pass the checker, so none executes and no canary comes back. Each
attempt is also run directly under the service role (read-only, rolled back, 2 s timeout) to
count the real attacks among them: those that return a denied value when nothing is in the way.

PostgreSQL also: an allow-listed function whose EXECUTE is revoked leaves the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from grid_sql.ask.asker import Asker
from grid_sql.policy import read_grants
from grid_sql.policy.grants import _pg_no_execute
from grid_sql.schema import introspect
from tests.policy.bypass_attempts import APP_POLICY, MY_DB, run_suite, schema_sql

pytestmark = pytest.mark.db

ROLE = "gs_bypass"
PASSWORD = "gs-bypass-pw"
PG_DB = MY_DB


def _pg_setup(admin: Engine) -> sa.URL:
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(7317002)"))
        try:
            conn.exec_driver_sql(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') "
                f"THEN CREATE ROLE {ROLE}; END IF; END $$"
            )
            conn.exec_driver_sql(f"ALTER ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
            conn.exec_driver_sql(f"CREATE DATABASE {PG_DB}")
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(7317002)"))
    db = sa.create_engine(admin.url.set(database=PG_DB), poolclass=NullPool)
    with db.begin() as conn:
        for stmt in schema_sql("postgresql"):
            conn.exec_driver_sql(stmt)
        conn.exec_driver_sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}")
    db.dispose()
    return admin.url.set(database=PG_DB, username=ROLE, password=PASSWORD)


def _my_setup(admin: Engine) -> sa.URL:
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {MY_DB}")
        conn.exec_driver_sql(f"CREATE DATABASE {MY_DB}")
        conn.exec_driver_sql(f"CREATE USER IF NOT EXISTS '{ROLE}'@'%%' IDENTIFIED BY '{PASSWORD}'")
        conn.exec_driver_sql(f"GRANT SELECT ON {MY_DB}.* TO '{ROLE}'@'%%'")
        conn.exec_driver_sql(f"USE {MY_DB}")
        for stmt in schema_sql("mysql"):
            conn.exec_driver_sql(stmt)
    return admin.url.set(database=MY_DB, username=ROLE, password=PASSWORD)


def _direct(url: sa.URL, dialect: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
    """``run(sql)``: the statement under the service role, read-only, 2 s, rolled back, on a
    fresh connection each time (advisory locks and handlers die with it); [] on any error."""
    engine = sa.create_engine(url, poolclass=NullPool)

    def run(sql: str) -> list[tuple[Any, ...]]:
        try:
            with engine.connect() as conn:
                if dialect == "postgresql":
                    conn.exec_driver_sql("SET statement_timeout = 2000")
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                else:
                    conn.exec_driver_sql("SET SESSION max_statement_time = 2")
                    conn.exec_driver_sql("START TRANSACTION READ ONLY")
                try:
                    res = conn.exec_driver_sql(sql.replace("%", "%%"))
                    return [tuple(r) for r in res.fetchall()] if res.returns_rows else []
                finally:
                    conn.rollback()
        except sa.exc.SQLAlchemyError:
            return []

    yield run
    engine.dispose()


@pytest.fixture(scope="module")
def pg_service(pg_admin: Engine) -> sa.URL:
    return _pg_setup(pg_admin)


@pytest.fixture(scope="module")
def my_service(my_admin: Engine) -> sa.URL:
    return _my_setup(my_admin)


def _suite(url: sa.URL, dialect: str, min_live: dict[str, int]) -> None:
    engine = sa.create_engine(url, pool_pre_ping=True)
    try:
        asker = Asker(engine, policy=APP_POLICY, audit=False)
        assert asker.policy.role.split("@")[0] == ROLE
        for direct in _direct(url, dialect):
            out = run_suite(asker, dialect, direct)
        print(out.summary(dialect))
        assert out.total >= 300
        assert out.executed == []
        assert out.leaks == []
        for family, least in min_live.items():  # the attempts are real attacks
            assert out.live_in(family) >= least, out.summary(dialect)
    finally:
        engine.dispose()


def test_postgresql_no_attempt_executes(pg_service: sa.URL) -> None:
    _suite(pg_service, "postgresql", {"reads": 60, "functions": 20, "rows": 40})


def test_mariadb_no_attempt_executes(my_service: sa.URL) -> None:
    _suite(my_service, "mysql", {"reads": 60, "comments": 10})


def test_postgresql_revoked_execute_leaves_the_allow_list(
    pg_service: sa.URL, pg_admin: Engine
) -> None:
    """REVOKE EXECUTE on every overload of an allow-listed function: read_grants bans it, so
    neither the grammar nor the checker offers it (the revoke is rolled back)."""
    engine = sa.create_engine(pg_admin.url.set(database=PG_DB), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("REVOKE EXECUTE ON FUNCTION md5(text), md5(bytea) FROM PUBLIC")
            conn.exec_driver_sql(f"SET LOCAL ROLE {ROLE}")
            assert _pg_no_execute(conn) == {"md5"}
            policy = read_grants(conn, introspect(conn))
            assert "md5" in policy.banned_functions and "md5" not in policy.allowed_functions
            assert "upper" in policy.allowed_functions
            conn.rollback()
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SET ROLE {ROLE}")
            assert _pg_no_execute(conn) == frozenset()
    finally:
        engine.dispose()


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_generated_sentences_leak_nothing(dialect: str, request: pytest.FixtureRequest) -> None:
    """Random sentences of the dialect grammar with the bypass schema's names, denied ones
    included, in every identifier and argument position (``tests/policy/sentences.py``):
    whatever the checker passes and the server runs returns no denied value."""
    from tests.policy.sentences import generated, run_generated

    url: sa.URL = request.getfixturevalue("pg_service" if dialect == "postgresql" else "my_service")
    schema = "public" if dialect == "postgresql" else MY_DB
    engine = sa.create_engine(url, pool_pre_ping=True)
    try:
        asker = Asker(engine, policy=APP_POLICY, audit=False)
        passed, ran, leaks = run_generated(asker, generated(dialect, schema, 1000))
        print(f"{dialect} generated: 1000, passed the checker {passed}, ran {ran}")
        assert leaks == []
        assert ran >= 5  # the property is exercised on statements that really run
    finally:
        engine.dispose()
