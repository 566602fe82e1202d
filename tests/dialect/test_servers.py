"""The server dialects' mechanics on the real PostgreSQL and MariaDB test servers: statement
timeouts and read-only transactions actually set, name folding as the server does it, what
the catalog lets a service role see, and grants read through the dialect's reader."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from grid_sql.dialect import Dialect
from grid_sql.policy.grants import read_grants
from grid_sql.schema.introspect import connected_schemas, introspect

pytestmark = pytest.mark.db

SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
    "SELECT count(*) FROM c"
)


def _timed_out(engine: Engine, d: Dialect, sql: str) -> BaseException | None:
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            with d.guard(conn, writes=False, timeout_s=0.3):
                conn.exec_driver_sql(sql).all()
        except sa.exc.DBAPIError as exc:
            return exc.orig
        finally:
            if trans.is_active:
                trans.rollback()
    return None


# ------------------------------------------------------------------ PostgreSQL
def test_pg_timeout_is_set_and_recognised(pg_setup: Engine) -> None:
    d = Dialect.of(pg_setup)
    assert d.name == "postgresql"
    orig = _timed_out(pg_setup, d, "SELECT pg_sleep(3)")
    assert orig is not None and d.is_timeout(orig)
    # SET LOCAL: the rollback dropped it, the next statement on a fresh transaction is free
    with pg_setup.connect() as conn:
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "0"


def test_pg_read_only_refuses_a_write(pg_setup: Engine) -> None:
    d = Dialect.get("postgresql")
    with pg_setup.connect() as conn:
        conn.begin()
        with d.guard(conn, writes=False, timeout_s=5), pytest.raises(sa.exc.DBAPIError) as err:
            conn.exec_driver_sql("INSERT INTO public.audit_log (msg) VALUES ('x')")
        conn.rollback()
    assert getattr(err.value.orig, "sqlstate", None) == "25006"  # read_only_sql_transaction
    assert not d.is_timeout(err.value.orig)


def test_pg_folds_bare_names_as_the_dialect_says(pg_setup: Engine) -> None:
    d = Dialect.get("postgresql")
    with pg_setup.connect() as conn:
        keys = list(conn.exec_driver_sql('SELECT 1 AS Mixed, 2 AS "Mixed"').keys())
    assert keys == [d.fold("Mixed"), d.fold("Mixed", quoted=True)] == ["mixed", "Mixed"]


def test_pg_service_role_sees_only_what_it_may_touch(
    pg_role_url: Callable[..., sa.URL],
) -> None:
    d = Dialect.get("postgresql")
    engine = sa.create_engine(pg_role_url("gs_reader"))
    try:
        with engine.connect() as conn:
            visible = d.visible_relations(conn)
            assert ("public", "customer") in visible
            assert ("Sales", "secret") not in visible  # USAGE on Sales, nothing on secret
            assert ("hidden", "t") not in visible  # SELECT granted, no USAGE on hidden
            assert d.selected_schemas(conn) is None
            snap = introspect(conn)
            policy = read_grants(conn, snap)
        assert "hidden" not in {s.name for s in snap.schemas}
        customer = policy.table("customer", "public")
        assert customer is not None and customer.allows("select")
        assert not customer.allows("insert")
    finally:
        engine.dispose()


def test_pg_fingerprint_sees_a_grant(pg_setup: Engine) -> None:
    d = Dialect.get("postgresql")

    def read() -> list[tuple[object, ...]]:
        with pg_setup.connect() as conn:
            opts = {"no_parameters": True}
            q = d.fingerprint_queries(conn)
            return [tuple(r) for s in q for r in conn.exec_driver_sql(s, execution_options=opts)]

    before = read()
    with pg_setup.begin() as conn:
        conn.exec_driver_sql("GRANT SELECT ON public.audit_log TO gs_reader")
    try:
        assert read() != before
    finally:
        with pg_setup.begin() as conn:
            conn.exec_driver_sql("REVOKE SELECT ON public.audit_log FROM gs_reader")
    assert read() == before


# ------------------------------------------------------------------ MariaDB
def test_mariadb_timeout_is_set_recognised_and_restored(my_setup: Engine) -> None:
    d = Dialect.of(my_setup)
    assert d.name == "mysql"
    with my_setup.connect() as conn:
        var = "max_statement_time" if conn.dialect.is_mariadb else "max_execution_time"
    # ~10^9 rows of work (SLEEP() and BENCHMARK() return early instead of failing, and
    # MariaDB caps recursive CTEs at max_recursive_iterations)
    slow = "SELECT count(*) FROM " + ", ".join(
        f"information_schema.COLLATIONS {a}" for a in "abcdef"
    )
    orig = _timed_out(my_setup, d, slow)
    assert orig is not None and d.is_timeout(orig)
    with my_setup.connect() as conn:
        assert float(conn.exec_driver_sql(f"SELECT @@SESSION.{var}").scalar() or 0) == 0


def test_mariadb_read_only_refuses_a_write(my_setup: Engine) -> None:
    d = Dialect.get("mariadb")
    with my_setup.connect() as conn:
        conn.begin()
        with d.guard(conn, writes=False, timeout_s=5), pytest.raises(sa.exc.DBAPIError) as err:
            conn.exec_driver_sql("INSERT INTO audit_log (msg) VALUES ('x')")
        conn.rollback()
    assert err.value.orig is not None and err.value.orig.args[0] == 1792  # read-only trx
    assert not d.is_timeout(err.value.orig)


def test_mariadb_grants_through_show_grants(my_user_url: Callable[..., sa.URL]) -> None:
    d = Dialect.get("mysql")
    assert d.grant_source == "show_grants"
    engine = sa.create_engine(my_user_url("gs_reader"))
    try:
        with engine.connect() as conn:
            assert d.selected_schemas(conn) == ["grid_sql_test"]
            assert connected_schemas(conn) == ["grid_sql_test"]
            snap = introspect(conn, schemas=["grid_sql_test"])
            policy = read_grants(conn, snap)
            # the catalog hides what the user has no privilege on; names compare as stored
            assert {t.name for _, t in snap.iter_tables()} >= {"customer", "Order Items"}
            assert "audit_log" not in {t.name for _, t in snap.iter_tables()}
            assert snap.exact_names == d.exact_names(conn)
        customer = policy.table("customer", "grid_sql_test")
        assert customer is not None and customer.allows("select")
        assert not customer.allows("update")
    finally:
        engine.dispose()


def test_mariadb_fingerprint_and_system_schemas(my_setup: Engine) -> None:
    d = Dialect.get("mysql")
    with my_setup.connect() as conn:
        names = set(sa.inspect(conn).get_schema_names()) | set(d.extra_schema_names(conn))
        rows = [r for q in d.fingerprint_queries(conn) for r in conn.exec_driver_sql(q)]
    assert {"information_schema", "mysql"} <= {s for s in names if d.is_system_schema(s)}
    assert "grid_sql_test" in names and not d.is_system_schema("grid_sql_test")
    assert any("GRANT" in str(r[0]) for r in rows)
