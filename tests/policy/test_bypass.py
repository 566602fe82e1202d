"""Crafted bypass attempts against the policy checker (issue 23 §4), no server needed.

Each dialect's attempts (``bypass_attempts.py``: templates × denied names × functions ×
comment tricks) are checked under an application policy narrower than a wide service role:
the checker must refuse every one. On SQLite the attempts also run end to end through
``Asker.run_sql`` on a real file, and directly on the file to show they are real attacks.
The PostgreSQL and MariaDB end-to-end runs are ``tests/db/test_db_bypass.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.policy import AppPolicy, Checker, Policy, narrow
from grid_sql.policy.model import TablePolicy
from grid_sql.schema import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo
from tests.policy.bypass_attempts import APP_POLICY, MY_DB, attempts, run_suite, schema_sql

SCHEMAS = {"postgresql": "public", "mysql": MY_DB, "sqlite": "main"}


def _snapshot(dialect: str) -> SchemaSnapshot:
    def table(name: str, *cols: str) -> TableInfo:
        return TableInfo(name, "table", tuple(ColumnInfo(c, "TEXT") for c in cols), (cols[0],))

    tables = (
        table("customer", "id", "name", "email", "card"),
        table("orders", "id", "customer_id", "total"),
        table("employee", "id", "name", "salary"),
    )
    return SchemaSnapshot(dialect, SCHEMAS[dialect], (SchemaInfo(SCHEMAS[dialect], tables),))


def _service_policy(snap: SchemaSnapshot) -> Policy:
    """The service role: SELECT on every table (wider than the application policy)."""
    schema = snap.default_schema or ""
    return Policy(
        dialect=snap.dialect,
        role="gs_service",
        default_schema=schema,
        tables=tuple(
            TablePolicy(
                schema,
                t.name,
                "table",
                frozenset({"select"}),
                tuple((c.name, frozenset({"select"})) for c in t.columns),
            )
            for _, t in snap.iter_tables()
        ),
        statement_verbs=frozenset({"select"}),
    )


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_checker_refuses_every_attempt(dialect: str) -> None:
    snap = _snapshot(dialect)
    policy = narrow(_service_policy(snap), AppPolicy.from_mapping(APP_POLICY), snap)
    checker = Checker(snap, policy)
    tried = attempts(dialect)
    passed = [(family, sql) for family, sql in tried if not checker.check(sql)]
    assert len(tried) >= 300
    assert passed == []


def test_sqlite_end_to_end_nothing_executes(tmp_path: Path) -> None:
    path = tmp_path / "bypass.sqlite"
    con = sqlite3.connect(path)
    for stmt in schema_sql("sqlite"):
        con.execute(stmt)
    con.commit()
    con.close()

    def direct(sql: str) -> list[tuple[object, ...]]:
        c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return list(c.execute(sql).fetchall())
        except (sqlite3.Error, sqlite3.Warning, ValueError):
            return []
        finally:
            c.close()

    asker = Asker(str(path), policy=APP_POLICY, audit=False)
    out = run_suite(asker, "sqlite", direct)
    print(out.summary("sqlite"))
    assert out.executed == [] and out.leaks == []
    assert len(out.live) >= 100  # real attacks: run directly, these return denied values


@pytest.mark.parametrize(
    ("sql", "sentence"),
    [
        ("SELECT a /* plain */ FROM t", True),
        ("SELECT a /**/ FROM t", True),
        ("SELECT a /*M*/ FROM t", True),
        ("SELECT a # line\n FROM t", True),
        ("SELECT a -- line\n FROM t", True),
        ("SELECT a /*! , b */ FROM t", False),
        ("SELECT a /*!50000 , b */ FROM t", False),
        ("SELECT a /*M! , b */ FROM t", False),
        ("SELECT a /*m! , b */ FROM t", False),
        ("SELECT /*+ BKA(t) */ a FROM t", False),
    ],
)
def test_mysql_grammar_does_not_read_executable_comments_as_comments(
    sql: str, sentence: bool
) -> None:
    """The MySQL dialect grammar (L1) lexes only plain comments as comments: what the server
    runs as code (``/*! */``, ``/*M! */``) or as a hint (``/*+ */``) is no comment to it."""
    from grid_sql.grammar import Grammar
    from grid_sql.parser import ParserRuntime

    rt = ParserRuntime.for_grammar(Grammar.dialect("mysql"))
    cfg = rt.advance(rt.initial, sql.encode())
    assert (cfg is not None and rt.eos_allowed(cfg)) is sentence


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_role_grammar_admits_no_function_row_or_comment_attempt(dialect: str) -> None:
    """The mask's language (the role grammar) already excludes every function, whole-row,
    comment and catalog-type attempt, and INTO OUTFILE / DUMPFILE; what it admits (a denied
    column after ORDER BY, read as an output alias; stars) is the checker's, which refuses it
    (above)."""
    from grid_sql.grammar import Grammar
    from grid_sql.parser import ParserRuntime
    from grid_sql.policy.grammar import role_grammar

    snap = _snapshot(dialect)
    policy = narrow(_service_policy(snap), AppPolicy.from_mapping(APP_POLICY), snap)
    rt = ParserRuntime.for_grammar(role_grammar(Grammar.dialect(dialect), snap, policy))
    admitted = []
    for family, sql in attempts(dialect):
        cfg = rt.advance(rt.initial, sql.encode())
        if cfg is not None and rt.eos_allowed(cfg):
            admitted.append((family, sql))
    # no conversion to a catalog type either: TYPE_NAME admits the dialect's value types only
    assert {f for f, _ in admitted} <= {"reads", "statements"}, admitted
    assert not [s for _, s in admitted if "FILE" in s.upper()], admitted
    assert len(admitted) <= 10


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_generated_sentences_always_get_a_verdict(dialect: str) -> None:
    """Random sentences of the dialect grammar with the bypass schema's names (denied ones
    included) in every identifier and argument position: the checker answers every one
    without raising (found: a GROUP BY position over ``*`` crashed sqlglot's qualify)."""
    from tests.policy.sentences import generated

    snap = _snapshot(dialect)
    policy = narrow(_service_policy(snap), AppPolicy.from_mapping(APP_POLICY), snap)
    checker = Checker(snap, policy)
    for sql in generated(dialect, SCHEMAS[dialect], 300):
        checker.check(sql)
    found = checker.check("select distinct * , * group by 1")
    assert found and found[0].kind in ("parse_error", "unknown_column")


def test_sqlite_generated_sentences_leak_nothing(tmp_path: Path) -> None:
    from tests.policy.sentences import generated, run_generated

    path = tmp_path / "gen.sqlite"
    con = sqlite3.connect(path)
    for stmt in schema_sql("sqlite"):
        con.execute(stmt)
    con.commit()
    con.close()
    asker = Asker(str(path), policy=APP_POLICY, audit=False)
    passed, ran, leaks = run_generated(asker, generated("sqlite", "main", 400))
    print(f"sqlite generated: 400, passed the checker {passed}, ran {ran}, leaks {len(leaks)}")
    assert leaks == []
