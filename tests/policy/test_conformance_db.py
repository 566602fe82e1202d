"""The PostgreSQL and MySQL/MariaDB deny-lists of borrowed functions hold on the real servers:
every listed function really is missing (calling it fails as an unknown function), and the
replacement each message suggests for a common case really runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.dialect import Dialect

pytestmark = pytest.mark.db

# One call per listed name with plausible arguments (the error must be "no such function",
# not an argument mismatch, so the argument types are the usual ones).
_CALLS = {
    "year": "year(DATE '2020-01-02')",
    "month": "month(DATE '2020-01-02')",
    "day": "day(DATE '2020-01-02')",
    "date_format": "date_format(DATE '2020-01-02', '%Y')",
    "strftime": "strftime('%Y', '2020-01-02')",
    "julianday": "julianday('2020-01-02')",
    "datediff": "datediff('2020-01-02', '2020-01-01')",
    "ifnull": "ifnull(NULL, 1)",
    "nvl": "nvl(NULL, 1)",
    "iif": "iif(1 = 1, 1, 0)",
    "if": "if(1 = 1, 1, 0)",
    "group_concat": "group_concat('a')",
    "instr": "instr('abc', 'b')",
    "locate": "locate('b', 'abc')",
    "charindex": "charindex('b', 'abc')",
    "len": "len('abc')",
    "getdate": "getdate()",
    "curdate": "curdate()",
    "date_trunc": "date_trunc('month', DATE '2020-01-02')",
    "date_part": "date_part('year', DATE '2020-01-02')",
    "string_agg": "string_agg('a', ',')",
    "generate_series": "generate_series(1, 2)",
    "age": "age(DATE '2020-01-02')",
}


def _missing(engine: sa.Engine, call: str) -> bool:
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql(f"SELECT {call}".replace("%", "%%"))
        except sa.exc.DBAPIError as exc:
            text = str(exc.orig).lower()
            return "does not exist" in text or "function" in text and "exist" in text
        finally:
            conn.rollback()
    return False


@pytest.mark.parametrize(
    ("var", "dialect"),
    [
        ("GRID_SQL_PG_URL", "postgresql"),
        ("GRID_SQL_MYSQL_URL", "mysql"),
    ],
)
def test_every_listed_function_is_missing_on_the_server(
    var: str, dialect: str, server_engine: Callable[[str], sa.Engine]
) -> None:
    engine = server_engine(var)
    present = [
        name
        for name in Dialect.get(dialect).function_replacements
        if not _missing(engine, _CALLS[name])
    ]
    assert present == []


def test_suggested_replacements_run(server_engine: Callable[[str], sa.Engine]) -> None:
    pg = server_engine("GRID_SQL_PG_URL")
    my = server_engine("GRID_SQL_MYSQL_URL")
    with pg.connect() as conn:
        conn.exec_driver_sql("SELECT EXTRACT(YEAR FROM DATE '2020-01-02'), COALESCE(NULL, 1)")
        conn.exec_driver_sql("SELECT to_char(DATE '2020-01-02', 'YYYY-MM-DD')")
        conn.exec_driver_sql("SELECT string_agg(x, ',') FROM (VALUES ('a')) AS t(x)")
    with my.connect() as conn:
        conn.exec_driver_sql("SELECT DATE_FORMAT('2020-01-02', '%%Y-%%m-%%d')")
        conn.exec_driver_sql("SELECT GROUP_CONCAT('a' SEPARATOR ','), TO_DAYS('2020-01-02')")


def test_listed_functions_are_not_in_pg_proc(server_engine: Callable[[str], sa.Engine]) -> None:
    """PostgreSQL: no function of that name at all, whatever its arguments (a failing call
    alone could be an argument-type mismatch)."""
    engine = server_engine("GRID_SQL_PG_URL")
    with engine.connect() as conn:
        present = [
            name
            for name in Dialect.get("postgresql").function_replacements
            if conn.execute(
                sa.text("SELECT count(*) FROM pg_proc WHERE proname = :n"), {"n": name}
            ).scalar()
        ]
    assert present == []
