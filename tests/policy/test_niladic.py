"""Functions of no arguments are called with ``()`` only (``Dialect.niladic_functions``).

defog q84/q187 wrote ``statement_timestamp('2023-04-01')``: every token was admitted (the
function lexicon had no arity) and PostgreSQL answered "function statement_timestamp(unknown)
does not exist". The role grammar now calls such a function through its own category
(``NILADIC_NAME``, ``niladic_call: NILADIC_NAME LPAR RPAR``), so after ``statement_timestamp(``
only ``)`` has a token path; the checker says the same for grammars without a function
lexicon. The lists are the servers' word: each name has no overload with an argument.
"""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict

import pytest
import sqlalchemy as sa

from grid_sql.dialect import Dialect
from grid_sql.parser import ParserRuntime
from grid_sql.policy import Checker
from grid_sql.schema.model import SchemaSnapshot
from tests.policy.helpers import DIALECTS, pg_scoped_role, select_role


def _server(dialect: str) -> str | None:
    return os.environ.get({"postgresql": "GRID_SQL_PG_URL", "mysql": "GRID_SQL_MYSQL_URL"}[dialect])


def test_sqlite_niladic_functions_take_no_argument() -> None:
    """SQLite's ``function_list`` registers each of them with ``narg`` 0 only."""
    nargs: defaultdict[str, set[int]] = defaultdict(set)
    for name, narg in sqlite3.connect(":memory:").execute(
        "SELECT name, narg FROM pragma_function_list"
    ):
        nargs[name.lower()].add(narg)
    d = Dialect.get("sqlite")
    for name in d.niladic_functions & d.function_names():
        assert nargs[name] == {0}, (name, nargs[name])


def test_postgresql_niladic_functions_take_no_argument() -> None:
    url = _server("postgresql")
    if url is None:
        pytest.skip("run scripts/services.sh start and eval its env")
    engine = sa.create_engine(url)
    names = sorted(Dialect.get("postgresql").niladic_functions)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT proname, max(pronargs), bool_or(provariadic <> 0) FROM pg_proc"
                    " WHERE proname = ANY(:n) GROUP BY proname"
                ),
                {"n": names},
            ).all()
    finally:
        engine.dispose()
    assert {r[0] for r in rows} == set(names)  # every name exists
    assert [r for r in rows if r[1] != 0 or r[2]] == []  # and no overload takes an argument


def test_mariadb_niladic_functions_refuse_an_argument() -> None:
    """With ``()`` each runs; with one argument MariaDB refuses it (1582 wrong parameter
    count, 1064 syntax), so the grammar takes out only statements that fail."""
    url = _server("mysql")
    if url is None:
        pytest.skip("run scripts/services.sh start and eval its env")
    window = {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist"}
    engine = sa.create_engine(url)
    wrong = []
    try:
        with engine.connect() as conn:
            for name in sorted(Dialect.get("mysql").niladic_functions):
                over = " OVER (ORDER BY 1)" if name in window else ""
                conn.exec_driver_sql(f"SELECT {name}(){over}")
                try:
                    conn.exec_driver_sql(f"SELECT {name}(1){over}")
                    wrong.append(name)
                except sa.exc.DBAPIError as e:
                    conn.rollback()
                    if e.orig.args[0] not in (1582, 1064):
                        wrong.append((name, e.orig.args))
    finally:
        engine.dispose()
    assert wrong == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_role_language_calls_them_with_empty_parentheses(dialect: str) -> None:
    g = select_role(dialect)
    rt = ParserRuntime.for_grammar(g)

    def admits(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    assert g.lexicon is not None
    names = {w.decode().strip('"`[]').lower() for w in g.lexicon.categories["NILADIC_NAME"].words}
    called = {w.decode().strip('"`[]').lower() for w in g.lexicon.categories["FUNCTION_NAME"].words}
    assert "pi" in names and not names & called
    d = Dialect.get(dialect)
    assert names <= d.niladic_functions & d.function_names()
    # never an aggregate: the aggregate rule holds FUNCTION_NAME only
    assert not d.niladic_functions & d.mask_aggregates
    for name in sorted(names):
        over = " OVER (ORDER BY id)" if name in ("row_number", "rank", "dense_rank") else ""
        assert admits(f"SELECT {name}(){over} FROM t"), name
        assert admits(f"SELECT {name.upper()} ( ){over} FROM t"), name
        assert not admits(f"SELECT {name}(id){over} FROM t"), name
        assert not admits(f"SELECT {name}('2020-01-01'){over} FROM t"), name
    # other functions keep their arguments; an alias, a sort key spelled like one still lex
    assert admits("SELECT abs(id), pi() AS pi FROM t ORDER BY pi")
    assert admits("SELECT t.v FROM t WHERE length(v) > 2")


def test_masks_after_a_niladic_name_are_exact() -> None:
    """With scopes (as the Asker builds it): after ``statement_timestamp(`` the only token
    paths close the call; masks equal the brute force and the reserve ends the statement."""
    from tests.mask.helpers import assert_masks_exact

    g = pg_scoped_role()
    rt = ParserRuntime.for_grammar(g)
    cfg = rt.advance(rt.initial, b"SELECT v FROM t WHERE statement_timestamp(")
    assert cfg is not None
    assert rt.advance(cfg, b"'") is None and rt.advance(cfg, b"1") is None
    assert rt.advance(cfg, b" )") is not None
    assert_masks_exact(
        g,
        [
            b"SELECT v FROM t WHERE statement_timestamp(",
            b"SELECT v FROM t WHERE statement_timestamp",
            b"SELECT now",
            b"SELECT v FROM t WHERE now() > ",
            b"SELECT pi() AS pi FROM t ORDER BY ",
        ],
    )


def test_the_spec_agrees_on_every_prefix() -> None:
    from tests.differential.harness import Differential

    d = Differential(pg_scoped_role())
    for sql in (
        "SELECT v FROM t WHERE statement_timestamp() > now()",
        "SELECT v FROM t WHERE statement_timestamp('2023-04-01') > now()",
        "SELECT row_number() OVER (ORDER BY id) AS rn FROM t ORDER BY rn",
        "SELECT now.v FROM t AS now",
    ):
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgresql", "SELECT 1 WHERE statement_timestamp('2023-04-01') > now()"),
        ("sqlite", "SELECT random(3)"),
        ("mysql", "SELECT uuid(2)"),
    ],
)
def test_the_checker_refuses_arguments(dialect: str, sql: str) -> None:
    from grid_sql.policy.grants import no_grants_baseline

    snap = SchemaSnapshot(dialect, None, ())
    checker = Checker(snap, no_grants_baseline(snap, Dialect.get(dialect)))
    found = checker.check(sql)
    assert [v.kind for v in found] == ["unknown_function"], found
    assert "takes no arguments" in found[0].message
    ok = sql.replace("('2023-04-01')", "()").replace("(3)", "()").replace("(2)", "()")
    assert checker.check(ok) == []


def test_a_function_lexicon_alone_leaves_niladic_names_no_word() -> None:
    """A lexicon that names called functions but not NILADIC_NAME (built by hand, as
    ``tests/scope/helpers.py`` does) must not leave that category unrestricted: it ranks
    above the table names, so it would call any word with ``()`` (``version()``)."""
    from grid_sql.grammar import Grammar
    from grid_sql.grammar.lexicon import SchemaLexicon

    g = Grammar.dialect("postgresql").with_lexicon(
        SchemaLexicon(
            {"FUNCTION_NAME": [b"now", b"abs"], "COLUMN_NAME": [b"id"], "TABLE_NAME": [b"t"]},
            fold_bare_case=True,
        )
    )
    assert g.lexicon is not None and not g.lexicon["NILADIC_NAME"].words
    rt = ParserRuntime.for_grammar(g)

    def admits(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    assert admits("SELECT now(), abs(id) FROM t")
    assert not admits("SELECT version()")
    assert not admits("SELECT pg_backend_pid()")
