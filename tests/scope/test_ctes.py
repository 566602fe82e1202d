"""CTE names as scoped relations in role grammars (issue #25 §1, docs/scope.md "CTE names").

A role grammar built with ``ctes=True`` keeps ``cte_ref`` and the scope rule holds it to the
CTE names the statement binds where the reference is written, spelled byte for byte. These
tests bind the fast path to the spec on prefixes of CTE statements, and check that a CTE name
never becomes a way to name a table the role may not read.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import role_grammar_for
from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, Checker, narrow, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.policy.scopes import role_scopes

from ..differential.harness import Differential
from .helpers import snapshot

DB = "concert_singer"  # tables: concert, singer, singer_in_concert, stadium


@functools.cache
def cte_role(deny: tuple[str, ...] = ("stadium",), bind: bool = True) -> Grammar:
    """A select-only role of concert_singer that may not read ``deny``, with CTE references
    and scopes (what the Asker builds)."""
    snap = snapshot(DB)
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": list(deny)}}, origin="test"
    )
    pol = narrow(sqlite_baseline(snap), app, snap)
    g = role_grammar(Grammar.dialect("sqlite"), snap, pol, ctes=True)
    return g.with_scopes(role_scopes(snap, bind_select_list=bind))


def _admits(g: Grammar, sql: str) -> bool:
    rt = ParserRuntime.for_grammar(g)
    cfg = rt.advance(rt.initial, sql.encode())
    return cfg is not None and rt.eos_allowed(cfg)


ADMITTED = [
    "WITH s AS (SELECT Name FROM singer) SELECT * FROM s",
    "WITH s AS (SELECT Name FROM singer) SELECT s.Name FROM s",
    "WITH s(n) AS (SELECT Name FROM singer) SELECT * FROM s AS x JOIN concert ON 1",
    "WITH a AS (SELECT 1 AS Age), b AS (SELECT * FROM a) SELECT * FROM b JOIN a ON 1",
    # (columns a CTE defines are not in the role's column lexicon yet: these use catalog names)
    "WITH RECURSIVE r(Age) AS (SELECT 1 UNION ALL SELECT Age + 1 FROM r WHERE Age < 5) "
    "SELECT Age FROM r",
    "WITH RECURSIVE a AS (SELECT 1 AS Age), r(Age) AS (SELECT Age FROM a UNION SELECT Age "
    "FROM r) SELECT * FROM r",
    "SELECT * FROM singer WHERE Singer_ID IN (WITH t AS (SELECT 1 AS k) SELECT * FROM t)",
    "WITH o AS (SELECT 1 AS k) SELECT * FROM (WITH i AS (SELECT 2 AS k) SELECT * FROM i, o)",
    # a CTE named like a denied table reads the CTE, never the table (the database and the
    # checker resolve the name to the CTE first)
    "WITH stadium AS (SELECT Name FROM singer) SELECT * FROM stadium",
]

REFUSED = [
    # no CTE of that name is bound: the word would read a relation by name
    "WITH s AS (SELECT 1) SELECT * FROM stadium",
    "WITH s AS (SELECT 1) SELECT * FROM t",
    "SELECT * FROM s",
    # a CTE's own body does not bind it without RECURSIVE (the body would read the table)
    "WITH stadium AS (SELECT * FROM stadium) SELECT * FROM stadium",
    # no forward references, and a CTE is bound only inside its own statement level
    "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a",
    "SELECT * FROM (WITH i AS (SELECT 1 AS k) SELECT * FROM i) AS d JOIN i ON 1",
    "SELECT * FROM singer WHERE Singer_ID IN (WITH t AS (SELECT 1) SELECT 1) AND 1 IN "
    "(SELECT * FROM t)",
    # byte for byte: another spelling may be another relation (PostgreSQL: "S" is not s)
    'WITH s AS (SELECT 1) SELECT * FROM "s"',
    "WITH s AS (SELECT 1) SELECT * FROM S",
]


@pytest.mark.parametrize("sql", ADMITTED)
def test_cte_references_admitted(sql: str) -> None:
    assert _admits(cte_role(), sql), sql


@pytest.mark.parametrize("sql", REFUSED)
def test_unbound_names_refused(sql: str) -> None:
    assert not _admits(cte_role(), sql), sql


def test_denied_table_stays_denied() -> None:
    """The role may not read ``stadium``: no statement of its language reads it by name."""
    g = cte_role()
    assert not _admits(g, "SELECT * FROM stadium")
    assert not _admits(g, "WITH x AS (SELECT * FROM stadium) SELECT * FROM x")
    assert not _admits(g, "WITH RECURSIVE x AS (SELECT 1) SELECT * FROM stadium")
    # without scopes a role grammar keeps dropping cte_ref, whatever ctes= says to the Asker
    snap = snapshot(DB)
    pol = narrow(
        sqlite_baseline(snap),
        AppPolicy.from_mapping({"verbs": ["select"], "tables": {"deny": ["stadium"]}}),
        snap,
    )
    plain = role_grammar(Grammar.dialect("sqlite"), snap, pol)
    assert "cte_ref" not in plain.tables.nonterminal_ids
    assert not _admits(plain, "WITH s AS (SELECT 1) SELECT * FROM s")


def test_asker_role_grammar_has_cte_names() -> None:
    snap = snapshot(DB)
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    scoped = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
    assert _admits(scoped, "WITH s AS (SELECT Name FROM singer) SELECT * FROM s")
    unscoped = role_grammar_for(snap, pol)
    assert not _admits(unscoped, "WITH s AS (SELECT Name FROM singer) SELECT * FROM s")


@pytest.mark.parametrize("bind", [True, False], ids=["obligations", "no-obligations"])
def test_fast_equals_spec_on_cte_statements(bind: bool) -> None:
    d = Differential(cte_role(bind=bind))
    for sql in ADMITTED + REFUSED:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


def test_masks_exact_at_cte_references() -> None:
    """Token masks (Rust walk over the view) equal the brute force where a CTE reference is
    written, including tokens that cross into it (`` s WHERE``), and the reserve finishes a
    pending CTE name."""
    from ..mask.helpers import assert_masks_exact

    prefixes = [
        b"WITH s AS (SELECT Name FROM singer) SELECT * FROM ",
        b"WITH s AS (SELECT Name FROM singer) SELECT * FROM s",
        b"WITH sx AS (SELECT Name FROM singer) SELECT * FROM s",
        b"WITH stadium AS (SELECT Name FROM singer) SELECT * FROM st",
        b"WITH a AS (SELECT 1), b AS (SELECT * FROM ",
        b"WITH RECURSIVE r AS (SELECT 1 UNION SELECT * FROM r",
        b"SELECT * FROM ",
        b"SELECT * FROM s",
        # columns CTEs and derived tables define; output aliases (SQLite: every clause)
        b"WITH st AS (SELECT COUNT(*) AS num_tx FROM singer) SELECT * FROM st WHERE num",
        b"WITH st AS (SELECT COUNT(*) AS num_tx FROM singer) SELECT * FROM st AS q WHERE q.",
        b"SELECT * FROM (SELECT Name AS n FROM singer) AS d WHERE d.",
        b"SELECT 2 AS yy FROM singer GROUP BY y",
        b"SELECT 2 AS yy FROM singer GROUP BY yy HAVING ",
        b"SELECT 2 AS yy FROM singer WHERE 1 IN (SELECT y",
        # column lists, a recursive CTE's inside its own body
        b"WITH st(nm, k) AS (SELECT Name, 1 FROM singer) SELECT * FROM st WHERE ",
        b"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE ",
        b"WITH RECURSIVE r(nn) AS (SELECT 1 UNION ALL SELECT n",
        b"WITH RECURSIVE r AS (SELECT 1 AS nn UNION ALL SELECT n",
        b"WITH RECURSIVE r AS (SELECT 1 AS nn UNION ALL SELECT nn + 1 FROM r WHERE r.",
    ]
    assert_masks_exact(cte_role(), prefixes)


DEFINED_ADMITTED = [
    # columns a CTE or derived table defines, after the FROM that binds them (or with the
    # CTE already written before the select list)
    "WITH st AS (SELECT Name, COUNT(*) AS num_tx FROM singer GROUP BY Name) "
    "SELECT st.num_tx, st.Name FROM st WHERE num_tx > 1 ORDER BY st.num_tx",
    "SELECT * FROM (SELECT Name AS n FROM singer) AS d WHERE d.n = 'x' AND n > 1",
    "SELECT Name FROM singer WHERE Age IN (SELECT * FROM (SELECT Age AS x FROM singer) AS d "
    "WHERE d.x > 1 ORDER BY x)",
    # a column list names the columns (issue #25 §1: "from their select lists or column lists")
    "WITH st(nm, k) AS (SELECT Name, COUNT(*) FROM singer GROUP BY Name) "
    "SELECT * FROM st WHERE st.k > 1 ORDER BY nm",
    "WITH a(x) AS (SELECT Age FROM singer), b(y) AS (SELECT x FROM a WHERE a.x > 1) "
    "SELECT * FROM b ORDER BY y",
    # a recursive CTE's list columns inside its own body (a SQLite/MySQL date series)
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE r.n < 5) "
    "SELECT * FROM r WHERE n > 2",
    "WITH RECURSIVE a AS (SELECT 1 AS k), d(dy) AS (SELECT '2020-01-01' UNION ALL "
    "SELECT date(dy, '+1 day') FROM d WHERE dy < '2020-01-31') SELECT * FROM d, a",
    # without a column list: the members after the anchor read the anchor's aliases
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r",
    "WITH RECURSIVE d AS (SELECT '2020-01-01' AS dy UNION ALL SELECT date(dy, '+1 day') "
    "FROM d WHERE d.dy < '2020-01-31') SELECT dy FROM d",
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3 "
    "UNION ALL SELECT n * 2 FROM r WHERE n < 2), s AS (SELECT n FROM r) SELECT * FROM s",
    "SELECT * FROM singer WHERE Age IN (WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL "
    "SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r)",
    "WITH RECURSIVE r AS (SELECT 1 AS n FROM (SELECT 2 AS q UNION SELECT Age FROM singer) "
    "AS t UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "WITH RECURSIVE r AS MATERIALIZED (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r "
    "WHERE n < 3) SELECT * FROM r",
]
DEFINED_REFUSED = [
    # a name no CTE or derived table defines
    "WITH st AS (SELECT COUNT(*) AS num_tx FROM singer) SELECT st.nosuch FROM st",
    # a CTE column named like a column of the catalog that the role may not read (stadium's
    # Capacity) is never admitted: the word could resolve to the hidden column
    "WITH c AS (SELECT 1 AS Capacity) SELECT * FROM c WHERE Capacity > 1",
    "SELECT * FROM (SELECT 1 AS Capacity) AS d WHERE d.Capacity > 1",
    "WITH c(Capacity) AS (SELECT 1) SELECT * FROM c WHERE Capacity > 1",
    # a column list renames: the query's own aliases are no columns of the CTE
    "WITH st(nm) AS (SELECT Name AS q FROM singer) SELECT * FROM st WHERE q = 'x'",
    # a list read inside its own body only under RECURSIVE
    "WITH r(n) AS (SELECT 1 FROM singer WHERE n < 5) SELECT * FROM r",
    # a derived table's aliases are unknown to the select list written before its FROM
    "SELECT d.n FROM (SELECT Name AS n FROM singer) AS d",
    # an anchor's aliases: not in the anchor itself, not without RECURSIVE, not when a
    # column list renames them, not from a set operation nested inside the anchor
    "WITH RECURSIVE r AS (SELECT 1 AS n FROM singer WHERE Age IN (SELECT n FROM concert) "
    "UNION SELECT 2) SELECT * FROM r",
    "WITH r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM singer) SELECT * FROM r",
    "WITH RECURSIVE r(m) AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
    "WITH RECURSIVE r AS (SELECT 1 AS n FROM (SELECT 2 AS q UNION SELECT q FROM singer) "
    "AS t UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
]


@pytest.mark.parametrize("sql", DEFINED_ADMITTED)
def test_defined_columns_admitted(sql: str) -> None:
    assert _admits(cte_role(), sql), sql


@pytest.mark.parametrize("sql", DEFINED_REFUSED)
def test_defined_columns_refused(sql: str) -> None:
    assert not _admits(cte_role(), sql), sql


def test_fast_equals_spec_on_defined_columns() -> None:
    d = Differential(cte_role())
    for sql in DEFINED_ADMITTED + DEFINED_REFUSED:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


@functools.cache
def dialect_role(dialect: str) -> Grammar:
    """concert_singer's catalog in another dialect, a select-only role of it, with scopes."""
    import dataclasses

    snap = dataclasses.replace(
        snapshot(DB), dialect=dialect, default_schema="public" if dialect == "postgresql" else DB
    )
    snap = dataclasses.replace(
        snap,
        schemas=tuple(dataclasses.replace(s, name=snap.default_schema) for s in snap.schemas),
    )
    base = dataclasses.replace(sqlite_baseline(snap), dialect=dialect)
    pol = narrow(base, AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar(Grammar.dialect(dialect), snap, pol, ctes=True)
    return g.with_scopes(role_scopes(snap, bind_select_list=True))


ALIAS_CASES = [
    # (statement, admitted on sqlite, mysql, postgresql): the dialects' own rules
    ("SELECT 2 AS yy FROM singer GROUP BY yy", True, True, True),
    ("SELECT 2 AS yy FROM singer GROUP BY yy HAVING yy > 1", True, True, False),
    ("SELECT 2 AS yy FROM singer ORDER BY yy + 1", True, True, False),
    ("SELECT 2 AS yy FROM singer ORDER BY yy", True, True, True),  # output_alias
    ("SELECT 2 AS yy FROM singer WHERE yy > 1", True, False, False),
    # never in a nested query's select list or FROM, nor a name the select list lacks
    ("SELECT 2 AS yy FROM singer WHERE 1 IN (SELECT yy FROM concert)", False, False, False),
    ("SELECT 2 AS yy FROM singer GROUP BY zz", False, False, False),
    # an alias named like a catalog column is the lexicon's business only: hidden on the
    # SQLite role (stadium denied), readable on the MySQL one, not a bare lexicon word on
    # PostgreSQL (the catalog spells it `Capacity`, so only `"Capacity"` names it)
    ("SELECT 1 AS capacity FROM singer GROUP BY capacity", False, True, False),
]


@pytest.mark.parametrize(("sql", "lite", "my", "pg"), ALIAS_CASES)
def test_output_aliases_per_dialect(sql: str, lite: bool, my: bool, pg: bool) -> None:
    assert _admits(cte_role(), sql) is lite, ("sqlite", sql)
    assert _admits(dialect_role("mysql"), sql) is my, ("mysql", sql)
    assert _admits(dialect_role("postgresql"), sql) is pg, ("postgresql", sql)


@pytest.mark.parametrize("dialect", ["sqlite", "mysql", "postgresql"])
def test_fast_equals_spec_on_output_aliases(dialect: str) -> None:
    d = Differential(cte_role() if dialect == "sqlite" else dialect_role(dialect))
    for sql, *_ in ALIAS_CASES:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


# a recursive CTE's anchor aliases in its later members, on every dialect that has WITH
# RECURSIVE (the series SQLite and MySQL write for lack of generate_series), and what each
# server answers: statements that read no table, so they run on any database
SERIES = [
    (
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 4) "
        "SELECT n FROM r ORDER BY n",
        [(1,), (2,), (3,), (4,)],
    ),
    (
        "WITH RECURSIVE r AS (SELECT 1 AS n, 1 AS f UNION ALL SELECT r.n + 1, f * (n + 1) "
        "FROM r WHERE r.n < 4) SELECT f FROM r ORDER BY f",
        [(1,), (2,), (6,), (24,)],
    ),
]


@pytest.mark.parametrize("dialect", ["sqlite", "mysql", "postgresql"])
def test_recursive_anchor_aliases_per_dialect(
    dialect: str, server_engine: Callable[[str], sa.Engine]
) -> None:
    g = cte_role() if dialect == "sqlite" else dialect_role(dialect)
    d = Differential(g)
    for sql, rows in SERIES:
        assert _admits(g, sql), (dialect, sql)
        if dialect == "sqlite":  # the checker reads it as the scope rule does
            snap = snapshot(DB)
            pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
            assert Checker(snap, pol).check(sql) == [], sql
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])
        if dialect == "sqlite":
            got = sqlite3.connect(":memory:").execute(sql).fetchall()
        else:
            var = "GRID_SQL_PG_URL" if dialect == "postgresql" else "GRID_SQL_MYSQL_URL"
            with server_engine(var).connect() as conn:
                got = [tuple(int(x) for x in r) for r in conn.exec_driver_sql(sql).all()]
        assert got == rows, (dialect, sql)
    # a column list renames: the anchor's own aliases are then no columns of the CTE
    assert not _admits(
        g, "WITH RECURSIVE r(m) AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT m FROM r"
    )
