"""The FUNCTION_NAME lexicons (``grid_sql/policy/functions.py``): they hold every function
the gold corpora call, none of the deny-listed foreign functions, and (on the test servers)
only names the engines have."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.errors import LexiconError
from grid_sql.policy.conformance import _FOREIGN, sqlite_functions
from grid_sql.policy.functions import (
    _PG_SYNTAX,
    MYSQL_FUNCTIONS,
    POSTGRESQL_FUNCTIONS,
    dialect_function_names,
)

# Every function name called by the Spider dev gold (sqlglot-transpiled for PostgreSQL and
# MySQL) and the defog sql-eval gold of each dialect: the `func_name` subtrees of lark's
# parses of scripts/grammar_coverage.py's corpora and tests/fixtures (1,579 / 1,471 / 1,555
# statements parsed; the SQLite fixtures' `left`/`right` are not SQLite functions, not gold).
GOLD_CALLS = {
    "sqlite": "avg coalesce count date datetime dense_rank group_concat json_extract julianday "
    "lag length lower max min rank replace round row_number strftime sum total",
    "postgresql": "abs age avg coalesce count date date_part date_trunc dense_rank "
    "generate_series lag lead length lower max min nextval now percentile_cont rank rollup "
    "round row_number substring sum to_char to_date to_timestamp",
    "mysql": "avg ceil coalesce concat convert count curdate date date_add date_format date_sub "
    "datediff dayofweek dense_rank floor from_unixtime group_concat if ifnull lag last_day left "
    "length lower max min mod month now rank regexp_like replace right round row_number "
    "str_to_date sum timestampdiff unix_timestamp values weekday year",
}
# MySQL 8.0 built-ins MariaDB 10.11 (the test server) does not have.
MYSQL_8_ONLY = frozenset(
    "any_value bin_to_uuid format_bytes format_pico_time grouping is_uuid json_schema_valid "
    "json_schema_validation_report json_storage_free json_storage_size json_table regexp_like "
    "roles_graphml st_point statement_digest statement_digest_text uuid_to_bin "
    "validate_password_strength wait_for_executed_gtid_set".split()
)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_gold_calls_and_no_foreign_function(dialect: str) -> None:
    names = dialect_function_names(dialect)
    assert set(GOLD_CALLS[dialect].split()) <= names
    assert not set(_FOREIGN.get(dialect, {})) & names
    assert all(n == n.lower() for n in names)


def test_sqlite_list_is_the_library() -> None:
    assert dialect_function_names("sqlite") == sqlite_functions()
    with pytest.raises(LexiconError):
        dialect_function_names("oracle")


@pytest.mark.db
def test_postgresql_names_are_in_pg_proc_or_syntax(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    engine = server_engine("GRID_SQL_PG_URL")
    with engine.connect() as conn:
        have = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT proname FROM pg_proc"))}
        syntax = set(_PG_SYNTAX.split())
        assert POSTGRESQL_FUNCTIONS - have == syntax
        conn.execute(sa.text("SELECT coalesce(NULL, 1), greatest(1, 2), trim(' a ')"))


@pytest.mark.db
def test_mysql_names_exist_on_mariadb_except_mysql_8_only(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    """Each name is called with no arguments: MariaDB answers 1305 (FUNCTION ... does not
    exist) only for a function it lacks; a known one fails on its arguments or syntax."""
    engine = server_engine("GRID_SQL_MYSQL_URL")
    absent = set()
    with engine.connect() as conn:
        for name in sorted(MYSQL_FUNCTIONS):
            try:
                conn.exec_driver_sql(f"SELECT {name}()").fetchall()
            except sa.exc.DBAPIError as exc:
                if exc.orig is not None and exc.orig.args and exc.orig.args[0] == 1305:
                    absent.add(name)
    assert absent == MYSQL_8_ONLY
