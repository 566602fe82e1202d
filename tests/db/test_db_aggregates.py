"""Aggregates where they run, against the real servers (docs/scope.md; grammar/scope_aggregates.py).

The role grammars hold aggregate names out of WHERE, join ON, GROUP BY and LIMIT/OFFSET
(``tests/scope/test_aggregates.py``). Here each dialect's list of names
(``Dialect.mask_aggregates``) is checked to be aggregates on the server, every statement the
rule takes out is refused by the server, and every one it keeps runs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.dialect import Dialect
from tests.scope.test_aggregates import ADMITTED, NESTED, OUTER_AGGREGATE, REFUSED

pytestmark = pytest.mark.db

TABLES = (
    "CREATE TABLE IF NOT EXISTS orders (id integer, cid integer, total integer)",
    "CREATE TABLE IF NOT EXISTS customer (id integer, name text, tally integer)",
)


def _runs(conn: sa.Connection, sql: str) -> bool:
    tx = conn.begin_nested()
    try:
        conn.exec_driver_sql(sql).fetchall()
        return True
    except sa.exc.DBAPIError:
        return False
    finally:
        tx.rollback()


def test_postgresql_names_are_aggregates(server_engine: Callable[[str], sa.Engine]) -> None:
    """Each listed name is an aggregate in pg_proc and has no plain-function overload."""
    names = sorted(Dialect.get("postgresql").mask_aggregates)
    with server_engine("GRID_SQL_PG_URL").connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT proname, bool_and(prokind = 'a') FROM pg_proc "
            "WHERE proname = ANY(%(n)s) GROUP BY proname",
            {"n": names},
        ).fetchall()
    assert dict(rows) == dict.fromkeys(names, True)


# each MariaDB name with arguments it takes
MY_CALLS = {"group_concat": "group_concat(id)", "std": "std(id)"}


def test_mariadb_names_are_aggregates(server_engine: Callable[[str], sa.Engine]) -> None:
    """Each listed name is refused in a WHERE as a group function (1111)."""
    engine = server_engine("GRID_SQL_MYSQL_URL")
    with engine.connect() as conn:
        for name in sorted(Dialect.get("mysql").mask_aggregates):
            call = MY_CALLS.get(name, f"{name}(id)")
            with pytest.raises(sa.exc.DBAPIError) as err:
                conn.exec_driver_sql(
                    f"SELECT 1 FROM (SELECT 1 AS id) AS t WHERE {call} IS NULL"
                ).fetchall()
            assert err.value.orig.args[0] == 1111, (name, err.value.orig)


@pytest.mark.parametrize("var", ["GRID_SQL_PG_URL", "GRID_SQL_MYSQL_URL"])
def test_the_server_refuses_what_the_rule_takes_out(
    server_engine: Callable[[str], sa.Engine], var: str
) -> None:
    engine = server_engine(var)
    if var == "GRID_SQL_MYSQL_URL":
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE IF NOT EXISTS gs_aggregates")
        engine = sa.create_engine(engine.url.set(database="gs_aggregates"))
    try:
        with engine.connect() as conn:
            if var == "GRID_SQL_PG_URL":
                conn.exec_driver_sql("SET search_path TO pg_temp")
            for ddl in TABLES:
                conn.exec_driver_sql(
                    ddl.replace("CREATE TABLE", "CREATE TEMPORARY TABLE")
                    if var == "GRID_SQL_PG_URL"
                    else ddl
                )
            for sql in ADMITTED + NESTED[2:]:
                if sql == OUTER_AGGREGATE and var == "GRID_SQL_MYSQL_URL":
                    continue  # MariaDB, like SQLite, refuses an outer aggregate there
                assert _runs(conn, sql), (var, sql)
            for sql in REFUSED + NESTED[:2]:
                assert not _runs(conn, sql), (var, sql)
            if var == "GRID_SQL_PG_URL":
                assert _runs(conn, "SELECT COUNT(*) FILTER (WHERE total > 1) FROM orders")
                assert not _runs(conn, "SELECT COUNT(*) FILTER (WHERE SUM(total) > 1) FROM orders")
                assert not _runs(conn, "SELECT id FROM orders OFFSET COUNT(*)")
    finally:
        if var == "GRID_SQL_MYSQL_URL":
            engine.dispose()
