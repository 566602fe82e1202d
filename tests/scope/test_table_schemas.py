"""Table names by schema (issue #25 §2, docs/scope.md "Table names by schema").

On a catalog of several schemas a bare table name reaches only the default schema's tables
(the checker resolves it there, as PostgreSQL's search_path does), and ``s.`` only the tables
of ``s``. The role grammar's one table lexicon admitted every readable table at both places,
so the defog big-catalog arm generated ``FROM restaurant`` for ``restaurants.restaurant`` and
the checker refused it. These tests bind the view to the spec, to the checker, to exact token
masks and (``tests/db``) to the server.
"""

from __future__ import annotations

import functools

import pytest

from grid_sql.ask.asker import role_grammar_for
from grid_sql.audit.artifacts import grammar_artifact, rebuild_grammar
from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, Checker, narrow, sqlite_baseline
from grid_sql.policy.scopes import role_scopes
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

from ..differential.harness import Differential
from .helpers import snapshot


def _t(name: str, *cols: str) -> TableInfo:
    return TableInfo(name, columns=tuple(ColumnInfo(c, "text") for c in cols))


@functools.cache
def catalog() -> SchemaSnapshot:
    """A PostgreSQL catalog of four schemas: ``orders`` in two of them, a schema named like
    a table of another (``author``), and a table only some role may read (``secret``)."""
    return SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo("public", (_t("distractor", "id"), _t("orders", "id", "total"))),
            SchemaInfo(
                "restaurants",
                (_t("restaurant", "id", "name", "rating"), _t("location", "id", "city")),
            ),
            SchemaInfo("sales", (_t("orders", "id", "amount"), _t("secret", "id"))),
            SchemaInfo("author", (_t("paper", "id", "title"),)),
            SchemaInfo("scholar", (_t("author", "authorid", "authorname"),)),
        ),
    )


@functools.cache
def role(bind: bool = True) -> Grammar:
    """What the Asker builds for a select-only role that may not read ``sales.secret``."""
    snap = catalog()
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["sales.secret"]}}, origin="test"
    )
    pol = narrow(sqlite_baseline(snap), app, snap)
    return role_grammar_for(snap, pol, scopes=True, bind_select_list=bind)


def _admits(g: Grammar, sql: str) -> bool:
    rt = ParserRuntime.for_grammar(g)
    cfg = rt.advance(rt.initial, sql.encode())
    return cfg is not None and rt.eos_allowed(cfg)


ADMITTED = [
    "SELECT id FROM distractor",
    "SELECT total FROM orders",
    "SELECT total FROM public.orders",
    "SELECT amount FROM sales.orders",
    "SELECT name FROM restaurants.restaurant",
    "SELECT r.name FROM restaurants.restaurant AS r JOIN restaurants.location AS l ON r.id = l.id",
    'SELECT name FROM "restaurants"."restaurant"',
    "SELECT title FROM author.paper",
    "SELECT authorname FROM scholar.author",
    "SELECT restaurant.name FROM restaurants.restaurant WHERE restaurant.rating > 4",
    "SELECT o.total FROM orders AS o WHERE o.id IN (SELECT id FROM sales.orders)",
    "WITH location AS (SELECT 1 AS id) SELECT * FROM location",
    # a FROM item's columns are its own schema's table's (orders: public has total, sales
    # has amount)
    "SELECT o.amount FROM sales.orders AS o WHERE o.amount > 1",
    "SELECT amount FROM sales.orders",
    "SELECT sales.orders.amount FROM sales.orders",
]
REFUSED = [
    # a bare name of another schema's table: the checker and the server refuse it
    "SELECT name FROM restaurant",
    "SELECT name FROM restaurant AS r",
    "SELECT * FROM distractor JOIN location ON 1 = 1",
    "SELECT authorname FROM author",
    # a table under the wrong schema
    "SELECT name FROM public.restaurant",
    "SELECT name FROM sales.restaurant",
    "SELECT id FROM restaurants.distractor",
    # a table the role may not read, under any spelling
    "SELECT id FROM sales.secret",
    "SELECT id FROM secret",
    # the column of a same-named table in another schema
    "SELECT amount FROM orders",
    "SELECT * FROM sales.orders AS o WHERE o.total > 1",
    "SELECT * FROM orders WHERE amount > 1",
    "SELECT sales.orders.total FROM sales.orders",
]


@pytest.mark.parametrize("sql", ADMITTED)
def test_reachable_table_names_admitted(sql: str) -> None:
    assert _admits(role(), sql), sql


@pytest.mark.parametrize("sql", REFUSED)
def test_unreachable_table_names_refused(sql: str) -> None:
    assert not _admits(role(), sql), sql


def test_language_agrees_with_the_checker() -> None:
    """Every statement above: admitted by the role language ⇔ no checker finding (the rule
    is the checker's own resolution of bare and qualified names, not a narrowing of it)."""
    snap = catalog()
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["sales.secret"]}}, origin="test"
    )
    checker = Checker(snap, narrow(sqlite_baseline(snap), app, snap))
    for sql in ADMITTED:
        assert checker.check(sql) == [], sql
    for sql in REFUSED:
        assert checker.check(sql) != [], sql


def test_without_scopes_the_flat_lexicon_admits_bare_names() -> None:
    """The rule lives in the scope views: the plain role grammar keeps the flat lexicon
    (the checker refuses what it lets through), so the test above would fail without it."""
    snap = catalog()
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    assert _admits(role_grammar_for(snap, pol), "SELECT name FROM restaurant")


@pytest.mark.parametrize("bind", [True, False], ids=["obligations", "no-obligations"])
def test_fast_equals_spec_on_schema_statements(bind: bool) -> None:
    d = Differential(role(bind))
    for sql in ADMITTED + REFUSED + ["SELECT * FROM author.", "SELECT * FROM nosuch.x"]:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


def test_masks_exact_at_table_names() -> None:
    """Token masks equal the brute force where a table name is written, bare and after a
    schema, including tokens that cross into it, and the reserve finishes a pending name."""
    from ..mask.helpers import assert_masks_exact

    prefixes = [
        b"SELECT * FROM ",
        b"SELECT * FROM rest",
        b"SELECT * FROM restaurants.",
        b"SELECT * FROM restaurants.rest",
        b"SELECT * FROM sales.",
        b"SELECT * FROM author",
        b"SELECT * FROM author.",
        b"SELECT * FROM orders AS o JOIN ",
        b"SELECT * FROM orders AS o JOIN sales.ord",
        b"SELECT restaurants.restaurant.",
        b"SELECT restaurants.restaurant.na",
    ]
    assert_masks_exact(role(), prefixes)


def test_single_schema_catalogs_unchanged() -> None:
    """The rule is off where every table is in the default schema (Spider, Chinook): same
    scope table, same fingerprint as before it existed."""
    from grid_sql.grammar.scope import ScopeTable

    scope = role_scopes(snapshot("concert_singer"))
    assert scope.table_schemas is None and scope.bare_tables() is None
    assert "table_schemas" not in repr(scope.fingerprint)
    # the fingerprint holds the rule only when it is on (so tables without it keep theirs)
    off = ScopeTable({"t": ["a"]}, ["main", "s"])
    assert (
        off.fingerprint == ScopeTable({"t": ["a"]}, ["main", "s"], table_schemas=None).fingerprint
    )
    on = ScopeTable(
        {"t": ["a"]}, ["main", "s"], table_schemas={"s": {"t": ["a"]}}, default_schema="main"
    )
    assert on.fingerprint != off.fingerprint


def test_audit_archive_rebuilds_the_rule() -> None:
    g = role()
    assert g.scopes is not None and g.scopes.table_schemas is not None
    back = rebuild_grammar(grammar_artifact(g))
    assert back.fingerprint == g.fingerprint
    assert back.scopes is not None and back.scopes.table_schemas == g.scopes.table_schemas
    assert not _admits(back, "SELECT name FROM restaurant")


def test_checker_names_the_schema_a_table_is_in() -> None:
    """A qualified name resolves in its schema only (it used to fall back to the default
    schema, approving ``restaurants.distractor`` for ``public.distractor``, which the server
    refuses), and the refusal names the table with the schema it is in, with the edit."""
    from grid_sql.policy.conformance import apply_edits

    snap = catalog()
    checker = Checker(snap, sqlite_baseline(snap))
    cases = {
        "SELECT id FROM restaurants.distractor": (
            "`distractor`: there is no table `distractor` in schema `restaurants`; "
            "it is `public.distractor` (write its schema)",
            "SELECT id FROM public.distractor",
        ),
        "SELECT name FROM sales.restaurant AS r": (
            "`restaurant`: there is no table `restaurant` in schema `sales`; "
            "it is `restaurants.restaurant` (write its schema)",
            "SELECT name FROM restaurants.restaurant AS r",
        ),
    }
    for sql, (message, fixed) in cases.items():
        (v,) = checker.check(sql)
        assert v.kind == "unknown_table" and v.message == message
        assert apply_edits(sql, v.edits) == fixed and checker.check(fixed) == []
    (v,) = checker.check("SELECT id FROM author.orders")
    assert "it is in several schemas: public.orders, sales.orders" in v.message and not v.edits


@functools.cache
def writer() -> Grammar:
    """A role that may also INSERT, UPDATE and DELETE (every table but ``sales.secret``)."""
    snap = catalog()
    app = AppPolicy.from_mapping(
        {"verbs": ["select", "insert", "update", "delete"], "tables": {"deny": ["sales.secret"]}},
        origin="test",
    )
    return role_grammar_for(
        snap, narrow(sqlite_baseline(snap), app, snap), scopes=True, bind_select_list=True
    )


DML_ADMITTED = [
    "INSERT INTO orders (id) VALUES (1)",
    "INSERT INTO sales.orders (id) VALUES (1)",
    "UPDATE restaurants.restaurant SET name = 'x' WHERE id = 1",
    "DELETE FROM public.distractor WHERE id = 1",
    "DELETE FROM author.paper WHERE id = 1",
]
DML_REFUSED = [
    "INSERT INTO restaurant (id) VALUES (1)",
    "UPDATE restaurant SET name = 'x'",
    "DELETE FROM sales.distractor",
    "DELETE FROM author",
    "DELETE FROM sales.secret",
]


def test_dml_targets_by_schema() -> None:
    """The DML targets (``INSERT_TABLE_NAME``, ...) follow the same rule, and the checker
    agrees; its refusal lists the tables as a statement names them (qualified outside the
    default schema) and never one the policy hides."""
    snap = catalog()
    app = AppPolicy.from_mapping(
        {"verbs": ["select", "insert", "update", "delete"], "tables": {"deny": ["sales.secret"]}},
        origin="test",
    )
    checker = Checker(snap, narrow(sqlite_baseline(snap), app, snap))
    for sql in DML_ADMITTED:
        assert _admits(writer(), sql) and checker.check(sql) == [], sql
    for sql in DML_REFUSED:
        assert not _admits(writer(), sql) and checker.check(sql) != [], sql
    (v,) = checker.check("DELETE FROM sales.distractor")
    assert v.kind == "unknown_table"
    assert "restaurants.restaurant" in v.message and "secret" not in v.message
    d = Differential(writer())
    for sql in DML_ADMITTED + DML_REFUSED:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


THREE_ADMITTED = [
    "SELECT restaurants.restaurant.name FROM restaurants.restaurant",
    "SELECT * FROM restaurants.restaurant WHERE restaurants.restaurant.rating > 4",
    "SELECT public.orders.total FROM orders",
]
THREE_REFUSED = [
    # `s.t.c` names a column of t, wherever it is written (a select list before its FROM too)
    "SELECT restaurants.restaurant.city FROM restaurants.restaurant",
    "SELECT restaurants.restaurant.title FROM restaurants.restaurant",
    "SELECT * FROM restaurants.restaurant WHERE restaurants.restaurant.amount > 4",
]


def test_three_part_names_admit_the_tables_columns() -> None:
    """After ``s.t.`` only the columns of ``t`` (the big-catalog arm had one refusal of a
    three-part name reading another table's column); the spec agrees on every prefix."""
    for sql in THREE_ADMITTED:
        assert _admits(role(), sql), sql
    for sql in THREE_REFUSED:
        assert not _admits(role(), sql), sql
    for g in (role(), role(False)):
        d = Differential(g)
        for sql in THREE_ADMITTED + THREE_REFUSED:
            w = sql.encode()
            for i in range(len(w) + 1):
                d.check(w[:i])


def test_sqlite_bare_names_reach_attached_databases() -> None:
    """SQLite looks a bare table name up in temp, main, then each attached database: there a
    bare name keeps every table and only ``s.`` is held to the tables of ``s`` (defog's
    SQLite ewallet gold writes ``FROM users`` for ``consumer_div.users``)."""
    snap = SchemaSnapshot(
        "sqlite",
        "main",
        (
            SchemaInfo("consumer_div", (_t("users", "uid", "email"),)),
            SchemaInfo("main", (_t("orders", "id"),)),
        ),
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
    assert g.scopes is not None and g.scopes.bare_reaches_all
    for sql in ("SELECT email FROM users", "SELECT email FROM consumer_div.users"):
        assert _admits(g, sql), sql
    for sql in ("SELECT email FROM main.users", "SELECT id FROM consumer_div.orders"):
        assert not _admits(g, sql), sql
    d = Differential(g)
    for sql in ("SELECT email FROM users", "SELECT id FROM consumer_div.orders"):
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])
    assert rebuild_grammar(grammar_artifact(g)).fingerprint == g.fingerprint


def test_sqlite_checker_finds_a_bare_name_in_an_attached_database() -> None:
    """The checker resolves a bare name as SQLite does: the default schema first, then the
    one attached database that has it (rights judged on that table); a name in several
    attached databases is refused (their attach order is not in the catalog)."""
    snap = SchemaSnapshot(
        "sqlite",
        "main",
        (
            SchemaInfo("consumer_div", (_t("users", "uid", "email"), _t("dup", "a"))),
            SchemaInfo("main", (_t("orders", "id"),)),
            SchemaInfo("other", (_t("dup", "a"),)),
        ),
    )
    app = AppPolicy.from_mapping({"columns": {"deny": {"consumer_div.users": ["email"]}}})
    checker = Checker(snap, narrow(sqlite_baseline(snap), app, snap))
    assert checker.check("SELECT uid FROM users") == []
    (v,) = checker.check("SELECT u.email FROM users AS u")
    assert v.kind == "column_not_readable"
    (v,) = checker.check("SELECT a FROM dup")
    assert v.kind == "unknown_table" and "several schemas" in v.message


def test_the_reserve_binds_with_schema_qualified_tables() -> None:
    """Select-list obligations make the termination reserve write FROM items that bind the
    select list's references; with bare names held to the default schema it must write
    ``restaurants.restaurant`` (``mask/bind_pieces.py``), or the completion is a dead end."""
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.reserve import reserve_table

    from ..mask.helpers import greedy_tokens, vocab

    g = role()
    v = vocab("gpt-2")
    guide = Guide(g, v, cache=MaskCache())
    table = reserve_table(g, v)
    for p in (
        b"SELECT r.rating FROM orders AS o",
        b"SELECT rating, city FROM orders",
        b"SELECT rating FROM restaurants.location JOIN ",
    ):
        m = guide.matcher()
        m.accept_tokens(greedy_tokens("gpt-2", p))
        comp = table.completion(m.config)  # raises MaskError when it cannot be verified
        for t in comp.tokens:
            m.accept_token(t)
        assert m.is_accepting(), (p, comp.data)


def test_a_default_schema_without_tables() -> None:
    """defog's ewallet and big catalog keep every table in an application schema and none
    in ``public``: a bare table name reaches nothing, so it admits no word at all (a schema
    name starts the item instead), and a schema name alone is no item unless a CTE of that
    name is bound. Spec and fast path agree, masks are exact, and the reserve finishes."""
    from ..mask.helpers import assert_masks_exact

    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo("restaurants", (_t("restaurant", "id", "name"), _t("location", "id"))),
            SchemaInfo("scholar", (_t("author", "authorid"),)),
        ),
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
    ok = [
        "SELECT name FROM restaurants.restaurant",
        "SELECT * FROM scholar.author",
        "WITH restaurants AS (SELECT 1 AS id) SELECT id FROM restaurants",
        "SELECT r.name FROM restaurants.restaurant AS r JOIN restaurants.location AS l "
        "ON l.id = r.id",
    ]
    refused = [
        "SELECT name FROM restaurant",
        "SELECT * FROM author",
        "SELECT 1 FROM location",
        "SELECT 1 FROM restaurants",
        "SELECT 1 FROM scholar AS s",
        "WITH x AS (SELECT 1 AS id) SELECT id FROM restaurants",
    ]
    for sql in ok:
        assert _admits(g, sql), sql
    for sql in refused:
        assert not _admits(g, sql), sql
    (v,) = Checker(snap, pol).check("SELECT name FROM restaurant")
    assert "it is `restaurants.restaurant`" in v.message
    d = Differential(g)
    for sql in ok + refused:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])
    assert_masks_exact(
        g,
        (
            b"SELECT * FROM ",
            b"SELECT * FROM rest",
            b"SELECT * FROM scholar.",
            b"SELECT r.name FROM ",
            b"SELECT name FROM restaurants.restaurant AS r JOIN ",
            b"SELECT id FROM restaurants.location WHERE id IN (SELECT id FROM ",
        ),
    )
