"""Table functions in role grammars (issue #25 §1): ``FROM generate_series(1, 12) AS m``.

A FROM item may call a function only through ``TABLE_FUNCTION_NAME``, whose role lexicon is
the dialect's list of functions that read no relation by name (``Dialect.table_functions``),
narrowed by the role's function allow-list and bans; the any-word form (``free_func_name``)
is dropped, so ``pg_ls_dir``, ``dblink``, SQLite's ``pragma_table_info`` and ``dbstat`` have
no token path. The columns such an item exposes count among the columns the statement
defines (``docs/scope.md``, "Table functions"). The lists are the servers' word: every
PostgreSQL name is a set-returning function of ``pg_catalog`` and its FROM item exposes the
listed columns; SQLite's are modules of the linked library with those columns.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.ask.components import role_grammar_for
from grid_sql.dialect import Dialect
from grid_sql.grammar import Grammar
from grid_sql.policy import AppPolicy, Checker, narrow
from grid_sql.policy.grammar import role_grammar
from grid_sql.policy.grants import no_grants_baseline
from grid_sql.policy.model import Policy
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo
from tests.policy.helpers import admits as _admits

# one call of each PostgreSQL table function with arguments of its own types
PG_CALLS = {
    "generate_series": "generate_series(1, 2)",
    "generate_subscripts": "generate_subscripts(ARRAY[1, 2], 1)",
    "unnest": "unnest(ARRAY[1, 2])",
    "regexp_split_to_table": "regexp_split_to_table('a b', ' ')",
    "json_array_elements": "json_array_elements('[1]'::json)",
    "json_array_elements_text": "json_array_elements_text('[1]'::json)",
    "jsonb_array_elements": "jsonb_array_elements('[1]'::jsonb)",
    "jsonb_array_elements_text": "jsonb_array_elements_text('[1]'::jsonb)",
    "json_each": """json_each('{"a": 1}'::json)""",
    "json_each_text": """json_each_text('{"a": 1}'::json)""",
    "jsonb_each": """jsonb_each('{"a": 1}'::jsonb)""",
    "jsonb_each_text": """jsonb_each_text('{"a": 1}'::jsonb)""",
    "json_object_keys": """json_object_keys('{"a": 1}'::json)""",
    "jsonb_object_keys": """jsonb_object_keys('{"a": 1}'::jsonb)""",
}


def _role(dialect: str) -> tuple[SchemaSnapshot, Policy]:
    """A role that may SELECT ``t(id, v)`` and not ``secret(pw)``."""
    sch = "main" if dialect == "sqlite" else "public" if dialect == "postgresql" else "db"
    snap = SchemaSnapshot(
        dialect,
        sch,
        (
            SchemaInfo(
                sch,
                (
                    TableInfo("t", columns=(ColumnInfo("id", "integer"), ColumnInfo("v", "text"))),
                    TableInfo("secret", columns=(ColumnInfo("pw", "text"),)),
                ),
            ),
        ),
    )
    mapping = {"verbs": ["select"], "tables": {"deny": ["secret"]}}
    base = no_grants_baseline(snap, Dialect.get(dialect))
    return snap, narrow(base, AppPolicy.from_mapping(mapping), snap)


def _asker_grammar(dialect: str) -> Grammar:
    """The role grammar as the Asker builds it (scopes, CTE names, obligations)."""
    snap, pol = _role(dialect)
    return role_grammar_for(snap, pol, scopes=True, bind_select_list=True)


def _words(g: Grammar) -> set[str]:
    assert g.lexicon is not None
    return {w.decode().strip('"`[]').lower() for w in g.lexicon["TABLE_FUNCTION_NAME"].words}


# ------------------------------------------------------------------------- the servers' word


def test_postgresql_table_functions_are_set_returning_with_the_listed_columns(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    engine = server_engine("GRID_SQL_PG_URL")
    listed = Dialect.get("postgresql").table_functions
    assert set(PG_CALLS) == set(listed)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT p.proname, bool_and(p.proretset) FROM pg_proc p"
                " JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'pg_catalog' AND p.proname = ANY(:n) GROUP BY p.proname"
            ),
            {"n": sorted(listed)},
        ).all()
        assert dict(rows) == {name: True for name in listed}  # each exists, every overload
        for name, call in PG_CALLS.items():
            named = conn.exec_driver_sql(f"SELECT * FROM {call} AS x LIMIT 0").keys()
            bare = conn.exec_driver_sql(f"SELECT * FROM {call} LIMIT 0").keys()
            assert list(named) == (list(listed[name]) or ["x"]), name
            assert list(bare) == (list(listed[name]) or [name]), name


def test_sqlite_table_functions_are_modules_with_the_listed_columns() -> None:
    con = sqlite3.connect(":memory:")
    modules = {r[0] for r in con.execute("SELECT name FROM pragma_module_list")}
    d = Dialect.get("sqlite")
    assert set(d.table_functions) <= modules
    assert d.table_function_names(frozenset(), frozenset()) == frozenset(d.table_functions)
    for name, cols in d.table_functions.items():
        cur = con.execute(f"SELECT {', '.join(cols)} FROM {name}('[1]') AS j")
        assert [c[0] for c in cur.description] == list(cols)
    # what must never be one: the catalog readers the library also has as modules
    assert not {"dbstat", "pragma_module_list"} & set(d.table_functions)


def test_mysql_from_dual(server_engine: Callable[[str], sa.Engine]) -> None:
    """MySQL's ``FROM DUAL`` (defog's geography ratio): a FROM item of no columns and no
    name, so nothing can be read or qualified through it; it runs on the server."""
    admits = _admits(_asker_grammar("mysql"))
    sql = "SELECT (SELECT COUNT(*) FROM t) / 2 AS half FROM dual WHERE 1 = 1"
    assert admits(sql) and admits("SELECT 1 FROM DUAL")
    assert not admits("SELECT 1 FROM dual WHERE dual.id > 1")
    assert not admits("SELECT 1 FROM dual AS d")
    snap, pol = _role("mysql")
    assert Checker(snap, pol).check(sql) == []
    engine = server_engine("GRID_SQL_MYSQL_URL")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 6 / 2 AS half FROM dual WHERE 1 = 1").all() == [(3,)]


def test_mysql_has_none() -> None:
    assert Dialect.get("mysql").table_functions == {}
    assert _words(_asker_grammar("mysql")) == set()
    assert not _admits(_asker_grammar("mysql"))("SELECT * FROM json_table('[]')")


# ------------------------------------------------------------------------- the role language


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgresql", "SELECT * FROM generate_series(1, 3) AS g WHERE g > 1"),
        ("postgresql", "SELECT * FROM generate_series(1, 3) WHERE generate_series > 1"),
        ("postgresql", "SELECT t.v FROM t CROSS JOIN generate_series(1, 3) AS g ORDER BY g"),
        ("postgresql", "SELECT t.v FROM t, LATERAL unnest(ARRAY[t.id]) AS x WHERE x > 0"),
        ("postgresql", "SELECT t.v FROM t, json_each(t.v::json) AS j WHERE j.value IS NULL"),
        ("postgresql", "SELECT count(*) FROM jsonb_object_keys('{}') AS k WHERE k > 'a'"),
        # a column list names the columns (of a table function, a derived table)
        ("postgresql", "SELECT t.v FROM t CROSS JOIN generate_series(1, 3) AS g(n) ORDER BY n"),
        ("postgresql", "SELECT * FROM json_each('{}') AS j(k2, v2) WHERE j.k2 = 'a'"),
        ("postgresql", "SELECT * FROM (SELECT id, v FROM t) AS d(a, b) WHERE d.a > 1 AND b = ''"),
        ("sqlite", "SELECT * FROM json_each('[1,2]') WHERE value > 1"),
        ("sqlite", "SELECT t.v FROM t, json_each(t.v) AS j WHERE j.value > 1"),
        ("sqlite", "SELECT t.v FROM t, json_tree(t.v) WHERE fullkey = '$'"),
    ],
)
def test_the_role_language_calls_table_functions(dialect: str, sql: str) -> None:
    assert _admits(_asker_grammar(dialect))(sql)


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite", "mysql"])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT * FROM dblink('host=x', 'SELECT 1')",
        "SELECT * FROM pg_stat_activity",
        "SELECT * FROM pragma_table_info('secret')",
        "SELECT * FROM dbstat",
        "SELECT * FROM secret",
        "SELECT * FROM json_each((SELECT pw FROM secret))",
        "SELECT * FROM upper('x')",  # a scalar function is no FROM item here
        "SELECT * FROM generate_series(1, 3) AS g WHERE pw > 1",
        # renamed: the function's own column names are gone
        "SELECT * FROM json_each('{}') AS j(k2, v2) WHERE j.value > 1",
    ],
)
def test_the_role_language_refuses_the_rest(dialect: str, sql: str) -> None:
    assert not _admits(_asker_grammar(dialect))(sql)


def test_the_lexicon_is_the_dialects_list_narrowed_by_the_role() -> None:
    assert _words(_asker_grammar("postgresql")) == set(Dialect.get("postgresql").table_functions)
    assert _words(_asker_grammar("sqlite")) == {"json_each", "json_tree"}
    # a function the role may not execute (no EXECUTE privilege: Policy.banned_functions)
    for dialect, name in (("postgresql", "unnest"), ("sqlite", "json_tree")):
        snap, pol = _role(dialect)
        pol = dataclasses.replace(pol, banned_functions=pol.banned_functions | {name})
        g = role_grammar(Grammar.dialect(dialect), snap, pol)
        assert name not in _words(g) and _words(g), dialect
    # a grammar that leaves called names unrestricted calls no table function (as before)
    snap, pol = _role("postgresql")
    assert _words(role_grammar(Grammar.dialect("postgresql"), snap, pol, functions=False)) == set()


def test_a_function_lexicon_alone_leaves_table_functions_no_word() -> None:
    """A hand-built lexicon naming called functions but not TABLE_FUNCTION_NAME must not
    leave that category unrestricted (it would call any word in FROM)."""
    from grid_sql.grammar.lexicon import SchemaLexicon

    g = Grammar.dialect("postgresql").with_lexicon(
        SchemaLexicon(
            {"FUNCTION_NAME": [b"abs"], "COLUMN_NAME": [b"id"], "TABLE_NAME": [b"t"]},
            fold_bare_case=True,
        )
    )
    assert g.lexicon is not None and not g.lexicon["TABLE_FUNCTION_NAME"].words


def test_without_a_lexicon_the_dialect_language_is_unchanged() -> None:
    """TABLE_NAME outranks TABLE_FUNCTION_NAME: the dialect grammar reads any called FROM
    item, as before the category existed."""
    admits = _admits(Grammar.dialect("postgresql"))
    assert admits("SELECT * FROM anything(1) AS a, t, s.u, LATERAL other(t.x)")
    assert admits("SELECT * FROM t AS a JOIN generate_series(1, 2) g ON a.x = g")


# ------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_masks_are_exact_around_table_functions(dialect: str) -> None:
    from tests.mask.helpers import assert_masks_exact

    call = "generate_series(1, 3) AS g" if dialect == "postgresql" else "json_each('[1]') AS g"
    col = "g" if dialect == "postgresql" else "g.value"
    assert_masks_exact(
        _asker_grammar(dialect),
        [
            b"SELECT * FROM ",
            b"SELECT * FROM t, ",
            f"SELECT * FROM {call} WHERE ".encode(),
            f"SELECT * FROM {call} WHERE {col} > 1 ORDER BY ".encode(),
            b"SELECT t.v FROM t, json_each(t.",
        ],
    )


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite", "mysql"])
def test_the_spec_agrees_on_every_prefix(dialect: str) -> None:
    from tests.differential.harness import Differential

    d = Differential(_asker_grammar(dialect))
    statements = {
        "postgresql": (
            "SELECT * FROM generate_series(1, 3) AS g WHERE g > 1",
            "SELECT t.v FROM t, json_each(t.v::json) j WHERE j.key = 'a' ORDER BY value",
            "SELECT * FROM unnest(ARRAY[1]) AS u(n) WHERE n > 0",
        ),
        "sqlite": (
            "SELECT * FROM json_each('[1,2]') WHERE value > 1",
            "SELECT t.v FROM t, json_tree(t.v) AS j WHERE j.fullkey = '$'",
        ),
        "mysql": (
            "SELECT (SELECT COUNT(*) FROM t) AS n FROM dual WHERE id > 1",
            "SELECT 1 FROM t, dual WHERE t.id = 1",
        ),
    }[dialect]
    for sql in statements:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


# ------------------------------------------------------------------------- checker and servers


@pytest.mark.parametrize(
    ("dialect", "sql", "kinds"),
    [
        ("sqlite", "SELECT t.v FROM t, json_each(t.v) AS j WHERE j.value > 1", []),
        ("sqlite", "SELECT * FROM pragma_table_info('t')", ["unknown_function"]),
        ("sqlite", "SELECT * FROM json_each((SELECT pw FROM secret))", ["table_not_allowed"]),
        ("postgresql", "SELECT * FROM generate_series(1, 3) AS g WHERE g > 1", []),
        ("postgresql", "SELECT * FROM pg_ls_dir('.')", ["banned_function"]),
        ("postgresql", "SELECT * FROM json_each((SELECT pw FROM secret))", ["table_not_allowed"]),
    ],
)
def test_the_checker_agrees(dialect: str, sql: str, kinds: list[str]) -> None:
    snap, pol = _role(dialect)
    assert [v.kind for v in Checker(snap, pol).check(sql)] == kinds


def test_the_admitted_statements_run_on_sqlite() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (id INTEGER, v TEXT)")
    con.execute("""INSERT INTO t VALUES (1, '[1, 2]'), (2, '{"a": 3}')""")
    admits = _admits(_asker_grammar("sqlite"))
    sql = "SELECT t.id FROM t, json_each(t.v) AS j WHERE j.value > 1 ORDER BY t.id"
    assert admits(sql)
    assert con.execute(sql).fetchall() == [(1,), (2,)]
    # a column the item defines is not admitted in the select list before its FROM (the
    # same limit as a derived table's columns: docs/scope.md, "Table functions")
    assert not admits("SELECT j.value FROM t, json_each(t.v) AS j")


def test_the_admitted_statements_run_on_postgresql(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    engine = server_engine("GRID_SQL_PG_URL")
    admits = _admits(_asker_grammar("postgresql"))
    sql = (
        "SELECT * FROM generate_series(1, 3) AS g, json_each_text('{\"a\": 1}'::json) AS k"
        " WHERE g > 1 AND k.key = 'a' ORDER BY g"
    )
    assert admits(sql)
    with engine.connect() as conn:
        assert conn.exec_driver_sql(sql).all() == [(2, "a", "1"), (3, "a", "1")]
