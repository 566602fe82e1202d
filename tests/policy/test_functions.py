"""The function allow-lists (``grid_sql/policy/functions.py``): they hold every function the
gold corpora call, none of the deny-listed foreign functions and none of the functions that
read relations, run SQL, touch files, locks or session state; (on the test servers) only
names the engines have; and the role grammar's FUNCTION_NAME lexicon is a subset of them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.dialect import Dialect
from grid_sql.errors import LexiconError, PolicyError
from grid_sql.grammar import Grammar
from grid_sql.policy import AppPolicy, narrow
from grid_sql.policy.conformance import sqlite_functions
from grid_sql.policy.functions import (
    _PG_SYNTAX,
    MYSQL_FUNCTIONS,
    NEVER_ALLOWED,
    POSTGRESQL_FUNCTIONS,
    SQLITE_ALLOWED,
    dialect_function_names,
)
from grid_sql.policy.grammar import role_grammar, spellings
from tests.policy.test_checker import DIALECTS, _policy, _snapshot

# Every function name called by the Spider dev gold (sqlglot-transpiled for PostgreSQL and
# MySQL) and the defog sql-eval gold of each dialect: the `func_name` subtrees of lark's
# parses of scripts/grammar_coverage.py's corpora (1,579 / 1,471 / 1,555 statements parsed).
# The grammar fixtures' `nextval('t_id_seq'::regclass)` (a column DEFAULT in DDL) is not gold
# and not allowed: it reads and advances a sequence by name.
GOLD_CALLS = {
    "sqlite": "avg coalesce count date datetime dense_rank group_concat json_extract julianday "
    "lag length lower max min rank replace round row_number strftime sum total",
    "postgresql": "abs age avg coalesce count date date_part date_trunc dense_rank "
    "generate_series lag lead length lower max min now percentile_cont rank rollup "
    "round row_number substring sum to_char to_date to_timestamp",
    "mysql": "avg ceil coalesce concat convert count curdate date date_add date_format date_sub "
    "datediff dayofweek dense_rank floor from_unixtime group_concat if ifnull lag last_day left "
    "length lower max min mod month now rank regexp_like replace right round row_number "
    "str_to_date sum timestampdiff unix_timestamp values weekday year",
}
# MySQL 8.0 built-ins MariaDB 10.11 (the test server) does not have.
MYSQL_8_ONLY = frozenset("any_value grouping regexp_like".split())


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_gold_calls_and_no_foreign_function(dialect: str) -> None:
    names = dialect_function_names(dialect)
    assert set(GOLD_CALLS[dialect].split()) <= names
    d = Dialect.get(dialect)
    assert not {n for n in d.function_replacements if d.lacks_function(n)} & names
    assert all(n == n.lower() for n in names)


def test_sqlite_list_is_curated_and_in_the_library() -> None:
    names = dialect_function_names("sqlite")
    assert names == SQLITE_ALLOWED & sqlite_functions()
    assert {"load_extension", "sqlite_version", "fts3_tokenizer", "changes"} & names == set()
    with pytest.raises(LexiconError):
        dialect_function_names("oracle")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_lists_avoid_unsafe_families(dialect: str) -> None:
    """No name that reads relations by name, runs SQL text, touches files, the network,
    locks or session state, nor any ``pg_*`` / ``lo_*`` / ``sqlite_*`` / ``*_to_xml*`` name."""
    names = dialect_function_names(dialect)
    assert not names & NEVER_ALLOWED
    prefixed = ("pg_", "lo_", "sqlite_", "txid", "dblink", "has_", "xml", "ts_stat", "set_")
    assert not [n for n in names if n.startswith(prefixed) or "to_xml" in n or "_lock" in n]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_role_grammar_function_lexicon_is_within_the_allow_list(dialect: str) -> None:
    """The FUNCTION_NAME lexicon of a role grammar spells only allowed functions: exactly the
    spellings of ``Policy.allowed_functions``, which is the dialect's list minus bans."""
    snap = _snapshot(dialect, DIALECTS[dialect])
    policy = _policy(snap)
    g = role_grammar(Grammar.dialect(dialect), snap, policy)
    words = set(g.lexicon["FUNCTION_NAME"].words) if g.lexicon is not None else set()
    allowed = dialect_function_names(dialect)
    assert words
    assert words <= set(spellings(g, "FUNCTION_NAME", allowed, dialect))
    bare = {w.decode().lower() for w in words if w[:1] not in (b'"', b"`", b"[")}
    assert bare <= allowed and not bare & NEVER_ALLOWED
    # an application ban removes a function from the lexicon; functions.allow adds one
    app = AppPolicy.from_mapping(
        {"banned_functions": ["upper"], "functions": {"allow": ["my_udf"]}}
    )
    narrowed = narrow(policy, app, snap)
    g2 = role_grammar(Grammar.dialect(dialect), snap, narrowed)
    assert g2.lexicon is not None
    w2 = {w.decode().lower() for w in g2.lexicon["FUNCTION_NAME"].words}
    assert "upper" not in w2 and "my_udf" in w2
    assert "my_udf" in narrowed.allowed_functions and "upper" not in narrowed.allowed_functions


def test_functions_allow_is_explicit_and_refuses_unsafe_names() -> None:
    with pytest.raises(PolicyError, match="cannot be allowed"):
        AppPolicy.from_mapping({"functions": {"allow": ["table_to_xml"]}})
    with pytest.raises(PolicyError, match="not plain function names"):
        AppPolicy.from_mapping({"functions": {"allow": ["pg_catalog.upper"]}})
    with pytest.raises(PolicyError):
        AppPolicy.from_mapping({"functions": {"deny": ["upper"]}})
    snap = _snapshot("postgresql", "public")
    base = _policy(snap)
    same = narrow(base, AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    assert same.functions_allow == frozenset()
    added = narrow(base, AppPolicy.from_mapping({"functions": {"allow": ["My_UDF"]}}), snap)
    assert added.functions_allow == {"my_udf"}
    assert added.fingerprint != base.fingerprint
    assert type(base).from_dict(added.to_dict()) == added
    assert "functions_allow" not in base.to_dict()  # fingerprints of plain policies unchanged


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


@pytest.mark.db
def test_every_other_pg_proc_function_is_refused_by_the_checker(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    """Every function name of a live ``pg_proc`` (all schemas) that is not on the allow-list
    is refused when called, in plain, quoted and ``pg_catalog.``-qualified form; every name on
    the list passes: the allow-list, not sqlglot's knowledge of functions, decides."""
    from grid_sql.policy import Checker

    engine = server_engine("GRID_SQL_PG_URL")
    with engine.connect() as conn:
        names = {str(r[0]) for r in conn.execute(sa.text("SELECT DISTINCT proname FROM pg_proc"))}
    snap = _snapshot("postgresql", "public")
    checker = Checker(snap, _policy(snap))
    plain = [n for n in sorted(names) if n == n.lower() and n.isidentifier()]
    passed = [
        call
        for n in plain
        if n not in POSTGRESQL_FUNCTIONS
        for call in (f"{n}(1)", f'"{n}"(1)', f"pg_catalog.{n}(1)")
        if not checker.check(f"SELECT {call}")  # refused: a finding (most: banned_function)
    ]
    assert len(plain) > 2000 and passed == []
    allowed = [n for n in POSTGRESQL_FUNCTIONS if n in names]
    refused = [
        n
        for n in allowed
        if [v for v in checker.check(f"SELECT {n}(1)") if v.kind == "banned_function"]
    ]
    assert refused == []


@pytest.mark.parametrize("dialect", ["sqlite", "mysql"])
def test_every_other_known_function_is_refused_by_the_checker(dialect: str) -> None:
    """SQLite: every function of the linked library off the list; MySQL/MariaDB: every
    built-in of the previous (every-callable-function) lexicon off the list, and the
    ``NEVER_ALLOWED`` names: each call is refused."""
    from grid_sql.policy import Checker

    snap = _snapshot(dialect, DIALECTS[dialect])
    checker = Checker(snap, _policy(snap))
    if dialect == "sqlite":
        others = {n for n in sqlite_functions() if n.isidentifier()} - SQLITE_ALLOWED
    else:
        others = set(_MYSQL_BUILTINS.split()) - MYSQL_FUNCTIONS
    others |= {n for n in NEVER_ALLOWED if n not in dialect_function_names(dialect)}
    passed = [n for n in sorted(others) if not checker.check(f"SELECT {n}(1)")]
    assert passed == []


# MySQL 8.0 / MariaDB 10.11 built-ins that are not on the allow-list (the lexicon before
# issue 23 admitted them all).
_MYSQL_BUILTINS = """
    aes_decrypt aes_encrypt benchmark bin_to_uuid charset coercibility collation compress
    connection_id current_role current_user database decode default encode extractvalue
    format_bytes format_pico_time found_rows from_base64 get_lock inet6_aton inet6_ntoa
    inet_aton inet_ntoa is_free_lock is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6
    is_used_lock is_uuid json_schema_valid json_schema_validation_report json_storage_free
    json_storage_size json_table last_insert_id load_file master_pos_wait name_const
    random_bytes release_all_locks release_lock roles_graphml row_count rownum schema
    session_user sleep st_area st_astext st_buffer st_contains st_distance
    st_distance_sphere st_geomfromtext st_intersects st_length st_point st_within st_x st_y
    statement_digest statement_digest_text sys_guid system_user uncompress
    uncompressed_length updatexml user uuid_short uuid_to_bin validate_password_strength
    version wait_for_executed_gtid_set weight_string
"""
