"""Aggregates where they run (docs/scope.md; grammar/scope_aggregates.py).

No engine runs an aggregate in a WHERE, a join's ON, GROUP BY, LIMIT/OFFSET or a FILTER of
the level it belongs to; the role grammars under scopes no longer offer one there (the
checker refused it after the fact: ``aggregate_misuse``). The repair round after the checker
refused a nesting (``SUM(CASE WHEN COUNT(x) > 1 ...)``, defog's ratio questions) generates
under a narrowing with no aggregate inside an aggregate's arguments either. These tests bind
the rule to the checker (it takes out only statements the checker refuses), to the spec, to
exact token masks and the reserve; ``tests/db/test_db_aggregates.py`` binds each dialect's
list of aggregate names to its server.
"""

from __future__ import annotations

import functools

import pytest

from grid_sql.ask.asker import role_grammar_for
from grid_sql.audit.artifacts import grammar_artifact, rebuild_grammar
from grid_sql.grammar import Grammar
from grid_sql.grammar.scope import ScopeTable
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, Checker, narrow, sqlite_baseline
from grid_sql.policy.scopes import role_scopes
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

from ..differential.harness import Differential
from .helpers import role, snapshot


def _t(name: str, *cols: str) -> TableInfo:
    return TableInfo(name, columns=tuple(ColumnInfo(c, "integer") for c in cols))


@functools.cache
def catalog(dialect: str) -> SchemaSnapshot:
    default = {"sqlite": "main", "postgresql": "public", "mysql": "shop"}[dialect]
    return SchemaSnapshot(
        dialect,
        default,
        (
            SchemaInfo(
                default,
                (_t("orders", "id", "cid", "total"), _t("customer", "id", "name", "tally")),
            ),
        ),
    )


@functools.cache
def grammar(dialect: str, nested: bool = True) -> Grammar:
    """The Asker's SELECT role grammar with scopes; ``nested=False``: the repair narrowing."""
    snap = catalog(dialect)
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
    if nested:
        return g
    assert g.scopes is not None
    scope = role_scopes(snap, bind_select_list=True, policy=pol, nested_aggregates=False)
    return g.with_scopes(scope)


def _admits(g: Grammar, sql: str) -> bool:
    rt = ParserRuntime.for_grammar(g)
    cfg = rt.advance(rt.initial, sql.encode())
    return cfg is not None and rt.eos_allowed(cfg)


DIALECTS = ["sqlite", "postgresql", "mysql"]
ADMITTED = [
    "SELECT cid, COUNT(*) FROM orders GROUP BY cid HAVING COUNT(*) > 1",
    "SELECT cid FROM orders GROUP BY cid ORDER BY SUM(total) DESC LIMIT 3",
    "SELECT id FROM orders WHERE total > (SELECT AVG(total) FROM orders)",
    "SELECT o.id FROM orders AS o JOIN customer AS c ON c.id = o.cid WHERE ABS(o.total) > 1",
    "SELECT cid FROM orders GROUP BY cid HAVING SUM(total) > (SELECT MAX(total) FROM orders)",
    "SELECT id FROM orders WHERE cid IN (SELECT cid FROM orders GROUP BY cid HAVING COUNT(*) > 2)",
    "SELECT SUM(total) FROM orders WHERE total > 0",
    "SELECT SUM(COUNT(*)) OVER () FROM orders GROUP BY cid",  # nested, as a window's argument
    "SELECT COUNT(*), RANK() OVER (ORDER BY COUNT(*) DESC) FROM orders GROUP BY cid",
    "SELECT id FROM orders LIMIT 10",
    # an aggregate over the outer query's columns is the outer query's (valid in HAVING)
    "SELECT cid FROM orders AS o GROUP BY cid "
    "HAVING EXISTS (SELECT 1 FROM customer AS c WHERE c.id < SUM(o.total))",
]
REFUSED = [
    "SELECT id FROM orders WHERE COUNT(*) > 1",
    "SELECT id FROM orders WHERE total > AVG(total)",
    "SELECT cid FROM orders GROUP BY COUNT(*)",
    "SELECT o.id FROM orders AS o JOIN customer AS c ON SUM(o.total) > 1",
    "SELECT id FROM orders WHERE id IN (SELECT cid FROM orders WHERE SUM(total) > 1)",
    "SELECT cid FROM orders GROUP BY cid, COUNT(id)",
]
NESTED = [  # refused in the repair round's narrowing only
    "SELECT SUM(CASE WHEN COUNT(id) > 1 THEN 1 ELSE 0 END) FROM orders",
    "SELECT AVG(COUNT(*)) FROM orders GROUP BY cid",
    "SELECT SUM(COUNT(*)) OVER () FROM orders GROUP BY cid",
]
NARROWED_ADMITTED = [
    "SELECT SUM(ABS(total)) FROM orders",
    "SELECT COUNT(*), SUM(total) OVER (ORDER BY COUNT(*)) FROM orders GROUP BY cid",
    "SELECT SUM((SELECT COUNT(*) FROM customer)) FROM orders",
    "SELECT AVG(total) FROM orders WHERE cid IN (SELECT cid FROM orders GROUP BY cid "
    "HAVING COUNT(*) > 1)",
]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_aggregates_only_where_they_run(dialect: str) -> None:
    g = grammar(dialect)
    for sql in ADMITTED + NESTED:
        assert _admits(g, sql), (dialect, sql)
    for sql in REFUSED:
        assert not _admits(g, sql), (dialect, sql)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_repair_narrowing_refuses_nested_aggregates(dialect: str) -> None:
    g = grammar(dialect, nested=False)
    for sql in [a for a in ADMITTED if a not in NESTED] + NARROWED_ADMITTED:
        assert _admits(g, sql), (dialect, sql)
    for sql in REFUSED + NESTED:
        assert not _admits(g, sql), (dialect, sql)


OUTER_AGGREGATE = ADMITTED[-1]  # PostgreSQL runs it; SQLite and MariaDB refuse it


def test_the_rule_takes_out_only_what_sqlite_refuses() -> None:
    """On a real SQLite database of the catalog: every statement the first round's rule
    takes out is one SQLite refuses, and the admitted ones run (PostgreSQL and MariaDB:
    ``tests/db/test_db_aggregates.py``). The checker refuses the top-level ones too."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.executescript(
        "CREATE TABLE orders (id integer, cid integer, total integer);"
        "CREATE TABLE customer (id integer, name text, tally integer);"
    )
    for sql in ADMITTED + NESTED[2:]:
        if sql != OUTER_AGGREGATE:
            conn.execute(sql).fetchall()
    for sql in REFUSED + NESTED[:2]:
        with pytest.raises(sqlite3.OperationalError, match="aggregate"):
            conn.execute(sql).fetchall()
    snap = catalog("sqlite")
    checker = Checker(snap, sqlite_baseline(snap))
    for sql in REFUSED + NESTED[:2]:
        if "(SELECT" not in sql:  # the checker is conservative inside subqueries
            assert "aggregate_misuse" in {v.kind for v in checker.check(sql)}, sql


def test_a_column_named_like_an_aggregate_stays_a_column() -> None:
    """``count`` is a column here: at an expression start the column outranks the function
    name, so ``WHERE count > 2`` stays (and so would ``count(`` spelled as that column: the
    rule holds called *function* names; the checker still refuses such a call)."""
    snap = SchemaSnapshot(
        "postgresql", "public", (SchemaInfo("public", (_t("checkin", "id", "count"),)),)
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
    assert _admits(g, "SELECT id FROM checkin WHERE count > 2")
    assert _admits(g, "SELECT SUM(count) FROM checkin WHERE id > 1")


def test_filter_clause_and_distinct_on_postgresql() -> None:
    g = grammar("postgresql")
    assert _admits(g, "SELECT COUNT(*) FILTER (WHERE total > 1) FROM orders")
    assert not _admits(g, "SELECT COUNT(*) FILTER (WHERE SUM(total) > 1) FROM orders")
    # DISTINCT ON is not a join's ON: an aggregate of a grouped query may stand there
    assert _admits(
        g, "SELECT DISTINCT ON (COUNT(*)) cid FROM orders GROUP BY cid ORDER BY COUNT(*)"
    )
    assert not _admits(g, "SELECT id FROM orders OFFSET COUNT(*)")


def test_off_without_a_function_lexicon_and_in_the_fingerprint_only_when_on() -> None:
    off = ScopeTable({"t": ["a"]}, ["main"])
    assert off.fingerprint == ScopeTable({"t": ["a"]}, ["main"], aggregates=()).fingerprint
    on = ScopeTable({"t": ["a"]}, ["main"], aggregates=["count"])
    narrowed = ScopeTable({"t": ["a"]}, ["main"], aggregates=["count"], nested_aggregates=False)
    assert len({off.fingerprint, on.fingerprint, narrowed.fingerprint}) == 3
    # the Spider role grammars of the scope tests have the rule on (SQLite's list)
    chinook = role("chinook").with_scopes(role_scopes(snapshot("chinook")))
    assert not _admits(chinook, "SELECT Name FROM Track WHERE count(TrackId) > 1")
    assert _admits(chinook, "SELECT Name FROM Track WHERE max(Milliseconds, 1) > 1")  # scalar


@pytest.mark.parametrize("nested", [True, False], ids=["first-round", "narrowed"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_fast_equals_spec(dialect: str, nested: bool) -> None:
    d = Differential(grammar(dialect, nested))
    extra = [
        "SELECT SUM(x(COUNT(",
        "SELECT COUNT(*) FROM orders AS o JOIN customer AS c ON MAX(",
        "SELECT SUM(total) OVER (PARTITION BY COUNT(",
    ]
    statements = ADMITTED + REFUSED + NESTED + NARROWED_ADMITTED + extra
    if dialect == "postgresql":
        statements += [
            "SELECT COUNT(*) FILTER (WHERE SUM(total) > 1) FROM orders",
            "SELECT DISTINCT ON (COUNT(*)) cid FROM orders GROUP BY cid ORDER BY COUNT(*)",
        ]
    for sql in statements:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


@pytest.mark.parametrize("nested", [True, False], ids=["first-round", "narrowed"])
def test_masks_exact_where_aggregates_are_held_out(nested: bool) -> None:
    """Token masks equal the brute force at the held-out positions (tokens that cross into
    a called name included), and the reserve finishes from each."""
    from ..mask.helpers import assert_masks_exact

    assert_masks_exact(
        grammar("postgresql", nested),
        [
            b"SELECT id FROM orders WHERE ",
            b"SELECT id FROM orders WHERE su",  # substr( yes, sum( no
            b"SELECT id FROM orders WHERE total > (SELECT ",
            b"SELECT cid FROM orders GROUP BY ",
            b"SELECT o.id FROM orders AS o JOIN customer AS c ON ",
            b"SELECT SUM(CASE WHEN ",
            b"SELECT SUM(total) FILTER (WHERE ",
        ]
        + ([b"SELECT SUM(CASE WHEN COUNT(id) > 1 THEN 1 ELSE 0 END"] if nested else []),
    )


def test_audit_archive_rebuilds_the_narrowing() -> None:
    g = grammar("postgresql", nested=False)
    back = rebuild_grammar(grammar_artifact(g))
    assert back.fingerprint == g.fingerprint
    assert back.scopes is not None and not back.scopes.nested_aggregates
    assert not _admits(back, NESTED[0]) and not _admits(back, REFUSED[0])
