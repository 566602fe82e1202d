"""The repair round's dialect hint after a type error (issue #25 §3), on the real servers: the
hint is keyed by the driver's error code, and names only functions the dialect allows."""

from __future__ import annotations

import re
import sqlite3

import pytest

from grid_sql.ask.execute import execute
from grid_sql.ask.typehints import TYPE_HINTS, type_hint
from grid_sql.errors import ExecutionError
from grid_sql.policy.functions import MYSQL_FUNCTIONS, POSTGRESQL_FUNCTIONS

from ..servers import server_engine


def _refusal(engine: object, sql: str) -> ExecutionError:
    with pytest.raises(ExecutionError) as err:
        execute(engine, sql)  # type: ignore[arg-type]
    return err.value


def test_postgresql_type_errors_get_the_hint_other_errors_do_not():
    engine = server_engine("GRID_SQL_PG_URL")
    try:
        for sql in (
            "SELECT 1 WHERE CURRENT_DATE LIKE '2021%'",  # 42883: date ~~ unknown
            "SELECT CAST('next tuesday-ish' AS DATE)",  # 22007
            "SELECT 1 WHERE CURRENT_DATE > 'last year'",  # 22007 on the literal
        ):
            assert type_hint("postgresql", _refusal(engine, sql)) == TYPE_HINTS["postgresql"], sql
        exc = _refusal(engine, "SELECT no_such_column FROM (SELECT 1 AS a) AS t")  # 42703
        assert type_hint("postgresql", exc) is None
    finally:
        engine.dispose()


def test_other_mysql_errors_and_sqlite_get_no_hint(tmp_path):
    engine = server_engine("GRID_SQL_MYSQL_URL")
    try:
        exc = _refusal(engine, "SELECT no_such FROM (SELECT 1 AS a) AS t")  # 1054
        assert type_hint("mysql", exc) is None
    finally:
        engine.dispose()
    sqlite3.connect(tmp_path / "x.sqlite").close()
    exc = _refusal(f"sqlite:///{tmp_path / 'x.sqlite'}", "SELECT no_such FROM (SELECT 1 AS a)")
    assert type_hint("sqlite", exc) is None


@pytest.mark.parametrize(("dialect", "allowed"), [("postgresql", POSTGRESQL_FUNCTIONS),
                                                  ("mysql", MYSQL_FUNCTIONS)])  # fmt: skip
def test_every_function_a_hint_names_is_in_the_dialects_allow_list(dialect, allowed):
    named = {m.lower() for m in re.findall(r"\b([A-Z_]{3,})\(", TYPE_HINTS[dialect])}
    assert named and {n for n in named if n != "cast"} <= allowed, named - allowed
