"""SQLite's mechanics on a real database file: read-only and time bounds, prefetched
reflection, audit-store guards."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.dialect import Dialect
from grid_sql.schema.introspect import introspect

SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
    "SELECT count(*) FROM c"
)


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'd.sqlite'}")
    with eng.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT)")
        conn.exec_driver_sql("CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INT REFERENCES a(id))")
        conn.exec_driver_sql("INSERT INTO a VALUES (1, 'x')")
    return eng


def test_guard_makes_a_read_read_only_and_restores_the_connection(engine: sa.Engine) -> None:
    d = Dialect.get("sqlite")
    with engine.connect() as conn:
        conn.begin()
        with d.guard(conn, writes=False, timeout_s=5), pytest.raises(sa.exc.OperationalError):
            conn.exec_driver_sql("INSERT INTO a VALUES (2, 'y')")
        conn.rollback()
        assert conn.exec_driver_sql("PRAGMA query_only").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM a").scalar() == 1


def test_guard_interrupts_past_the_deadline_and_the_error_reads_as_a_timeout(
    engine: sa.Engine,
) -> None:
    d = Dialect.get("sqlite")
    with engine.connect() as conn:
        conn.begin()
        with pytest.raises(sa.exc.OperationalError) as err:
            with d.guard(conn, writes=False, timeout_s=0.2):
                conn.exec_driver_sql(SLOW).scalar()
        conn.rollback()
    assert d.is_timeout(err.value.orig)
    assert not d.is_timeout(sa.exc.OperationalError("x", {}, Exception("no such table")).orig)


def test_guarded_write_runs_ddl_inside_the_transaction(engine: sa.Engine) -> None:
    """pysqlite would autocommit DDL: the guard opens the transaction itself."""
    d = Dialect.get("sqlite")
    with engine.connect() as conn:
        conn.begin()
        with d.guard(conn, writes=True, timeout_s=5):
            conn.exec_driver_sql("CREATE TABLE gone (x INT)")
        conn.rollback()
    assert "gone" not in sa.inspect(engine).get_table_names()


def test_prefetched_reflection_reads_what_sqlalchemy_reads(engine: sa.Engine) -> None:
    snap = introspect(engine)  # several tables: the reflection context prefetches
    (schema,) = snap.schemas
    b = next(t for t in schema.tables if t.name == "b")
    assert b.primary_key == ("id",)
    assert [(fk.columns, fk.referred_table) for fk in b.foreign_keys] == [(("a_id",), "a")]
    assert snap.dialect == "sqlite" and not snap.exact_names


def test_audit_guards_refuse_update_and_are_listed(engine: sa.Engine) -> None:
    d = Dialect.get("sqlite")
    rows = [("a_no_update", "a", "UPDATE"), ("a_no_delete", "a", "DELETE")]
    with engine.begin() as conn:
        d.audit_lock(conn, "p")  # BEGIN IMMEDIATE on the connection's transaction
        d.install_audit_guards(conn, "p", rows, ["a"], "append-only")
        assert d.audit_extra_guards(["a"]) == []
    with engine.connect() as conn:
        assert d.existing_triggers(conn, ["a"]) == {"a_no_update", "a_no_delete"}
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            conn.exec_driver_sql("DELETE FROM a")


def test_fingerprint_changes_with_the_schema(engine: sa.Engine) -> None:
    d = Dialect.get("sqlite")

    def read() -> list[object]:
        with engine.connect() as conn:
            return [tuple(r) for q in d.fingerprint_queries(conn) for r in conn.exec_driver_sql(q)]

    before = read()
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE c (x INT)")
    assert read() != before
