"""A conversion's type is an allow-list (docs/policy.md; ``policy/edges.py`` "Types").

The role grammar's ``TYPE_NAME`` lexicon (``Dialect.cast_types``) and the checker's
``VALUE_TYPES`` must say the same thing: every word the mask admits is a type the checker
passes, and every such word is a type the server knows. Casts to ``regclass`` and friends
(a catalog lookup by name) are outside both.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
import sqlglot
from sqlglot import exp

from grid_sql.dialect import Dialect
from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import AppPolicy, Checker, narrow, sqlite_baseline
from grid_sql.policy.edges import VALUE_TYPES
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo
from tests.policy.helpers import DIALECTS, pg_scoped_role, select_role

# the words of a type the grammar spells as two (the second is a keyword there)
SPELLED = {("postgresql", "double"): "double precision", ("mysql", "signed"): "signed integer"}


def _cast(dialect: str, word: str) -> str:
    return f"CAST(NULL AS {SPELLED.get((dialect, word), word)})"  # NULL converts to any type


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_cast_type_is_a_value_type(dialect: str) -> None:
    read = Dialect.get(dialect).sqlglot_read
    for word in sorted(Dialect.get(dialect).cast_types):
        tree = sqlglot.parse_one(f"SELECT {_cast(dialect, word)}", read=read)
        (cast,) = tree.find_all(exp.Cast)
        assert cast.to.this in VALUE_TYPES, (dialect, word, cast.to)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_language_admits_the_cast_types_and_nothing_else(dialect: str) -> None:
    rt = ParserRuntime.for_grammar(select_role(dialect))

    def admits(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    for word in Dialect.get(dialect).cast_types:
        assert admits(f"SELECT {_cast(dialect, word)} FROM t"), word
    for word in ("regclass", "regrole", "oid", "t", "id", "xml", "employee"):
        assert not admits(f"SELECT CAST(v AS {word}) FROM t"), word
    if dialect == "postgresql":
        assert admits("SELECT v::text, DATE '2020-01-01', id::int4 FROM t")
        assert not admits("SELECT v::regclass FROM t")
        assert not admits("SELECT regclass 'pg_authid' FROM t")


def _server(dialect: str) -> str | None:
    return os.environ.get({"postgresql": "GRID_SQL_PG_URL", "mysql": "GRID_SQL_MYSQL_URL"}[dialect])


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_every_cast_type_runs_on_the_server(dialect: str) -> None:
    """Each admitted word is a type the server knows (PostgreSQL 15, MariaDB 10.11): the mask
    never offers a conversion the database would refuse as unknown."""
    url = _server(dialect)
    if url is None:
        pytest.skip("run scripts/services.sh start and eval its env")
    engine = sa.create_engine(url)
    unknown = []
    try:
        with engine.connect() as conn:
            for word in sorted(Dialect.get(dialect).cast_types):
                try:
                    conn.exec_driver_sql(f"SELECT {_cast(dialect, word)}")
                except sa.exc.DBAPIError as e:
                    unknown.append((word, str(e.orig)[:80]))
                    conn.rollback()
    finally:
        engine.dispose()
    assert unknown == []


def test_the_checker_passes_the_cast_types() -> None:
    for dialect in DIALECTS:
        snap = SchemaSnapshot(dialect, None, ())
        checker = Checker(snap, sqlite_baseline(snap))
        for word in Dialect.get(dialect).cast_types:
            sql = f"SELECT {_cast(dialect, word)}"
            assert not [v for v in checker.check(sql) if v.kind == "banned_type"], (dialect, sql)


def test_a_typed_literal_is_headed_by_a_type_word() -> None:
    """PostgreSQL's ``t 'x'``: the head may lex as a function, column, table or schema name
    (they outrank TYPE_NAME), but with scopes it must be one of the role's type words:
    ``statement_timestamp '2023-04-01'`` (defog q84/q183: admitted by the mask, unreadable to
    sqlglot, refused by the checker) cannot be written; ``date '2023-04-01'`` can. The spec
    agrees on every prefix."""
    from tests.differential.harness import Differential

    g = pg_scoped_role()
    rt = ParserRuntime.for_grammar(g)

    def admits(sql: str) -> bool:
        cfg = rt.advance(rt.initial, sql.encode())
        return cfg is not None and rt.eos_allowed(cfg)

    ok = [
        "SELECT date '2023-04-01'",
        "SELECT v FROM t WHERE now() > timestamp '2020-01-01 00:00'",
        "SELECT statement_timestamp() FROM t",
    ]
    refused = [
        "SELECT statement_timestamp '2023-04-01'",
        "SELECT v FROM t WHERE now() > now '2023-04-01'",
        "SELECT v FROM t WHERE v = v 'x'",
    ]
    for sql in ok:
        assert admits(sql), sql
    for sql in refused:
        assert not admits(sql), sql
    d = Differential(g)
    for sql in ok + refused:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


def test_masks_exact_at_typed_literal_heads() -> None:
    """Token masks equal the brute force after a name that could head a typed literal,
    including tokens that carry the name's end and a quote (the CD pass reads the name's
    value when a quote follows it: ``Guide._value_read``)."""
    import numpy as np

    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from tests.mask.helpers import brute_force_ids, greedy_tokens, vocab

    g = pg_scoped_role()
    guide = Guide(g, vocab("gpt-2"), cache=MaskCache())
    for p in [
        b"SELECT v FROM t LIMIT ",
        b"SELECT v FROM t LIMIT abs",
        b"SELECT statement_timestamp",
        b"SELECT date",
        b"SELECT v FROM t WHERE now() > date",
        b"SELECT v FROM t WHERE v = v",
    ]:
        m = guide.matcher()
        m.accept_tokens(greedy_tokens("gpt-2", p))
        ids = m.allowed_token_ids()
        ids = ids[ids != guide.eos_id]
        np.testing.assert_array_equal(ids, brute_force_ids(guide, m.config), err_msg=repr(p))


def test_a_name_bound_nowhere_cannot_start_an_expression() -> None:
    """At an expression start a table name can only qualify (``t.v``) or, PostgreSQL, head a
    typed literal (a type word): a table the FROM does not bind is neither, so it is not
    admitted at all. It used to be (``typed_name`` among its reductions kept the word
    unrestricted), and the model then had only ``.`` to go on with: defog q84/q192 wrote
    ``WHERE sbticker`` and then spaces up to the token budget."""
    from grid_sql.policy.grants import no_grants_baseline
    from grid_sql.policy.scopes import role_scopes
    from tests.differential.harness import Differential

    def table(name: str) -> TableInfo:
        return TableInfo(name, columns=(ColumnInfo("id", "integer"), ColumnInfo("v", "text")))

    snap = SchemaSnapshot("postgresql", "public", (SchemaInfo("public", (table("t"), table("u"))),))
    pol = narrow(
        no_grants_baseline(snap, Dialect.get("postgresql")),
        AppPolicy.from_mapping({"verbs": ["select"]}),
        snap,
    )
    g = role_grammar(Grammar.dialect("postgresql"), snap, pol).with_scopes(
        role_scopes(snap, policy=pol, bind_select_list=True)
    )
    rt = ParserRuntime.for_grammar(g)
    ok = [
        "SELECT v FROM t WHERE t.v = 'x'",
        "SELECT v FROM u AS w WHERE w.v = 'x'",
        "SELECT v FROM t WHERE now() > date '2020-01-01'",
        "SELECT v FROM t WHERE id IN (SELECT u.id FROM u)",
    ]
    refused = ["SELECT v FROM t WHERE u.v = 'x'", "SELECT v FROM t WHERE id > u.id"]
    for sql in ok + refused:
        cfg = rt.advance(rt.initial, sql.encode())
        assert (cfg is not None and rt.eos_allowed(cfg)) == (sql in ok), sql
    assert rt.advance(rt.initial, b"SELECT v FROM t WHERE u ") is None
    d = Differential(g)
    for sql in ok + refused:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])


def test_declared_column_types_are_judged() -> None:
    """A declared column converts every value stored in it: PostgreSQL's ``regclass`` column
    would look a stored name up in the catalog (``INSERT ... ('sales.secret')`` probes a
    denied table), so DDL types are held to value types, serials and enumerations; SQLite's
    declared types are affinities only and stay free."""
    refused = {
        "postgresql": [
            "CREATE TABLE t (x regclass)",
            "CREATE TABLE t (id int, r regrole)",
            "ALTER TABLE t ADD COLUMN y regnamespace",
            "CREATE TABLE t (x mytype)",
        ],
        "mysql": ["CREATE TABLE t (g geometry)"],
        "sqlite": [],
    }
    kept = {
        "postgresql": [
            "CREATE TABLE t (id serial PRIMARY KEY, name text, total numeric(8,2), "
            "tags text[], at timestamp with time zone, ok boolean, doc jsonb)",
            "ALTER TABLE t ADD COLUMN n bigint",
        ],
        "mysql": [
            "CREATE TABLE t (id int AUTO_INCREMENT PRIMARY KEY, kind ENUM('a', 'b'), "
            "v double, s varchar(20), d datetime)"
        ],
        "sqlite": ["CREATE TABLE t (a INTEGER PRIMARY KEY, b foo, c, d BLOB, e DATETIME)"],
    }
    for dialect in DIALECTS:
        snap = SchemaSnapshot(dialect, None, ())
        checker = Checker(snap, sqlite_baseline(snap))
        for sql in refused[dialect]:
            assert "banned_type" in {v.kind for v in checker.check(sql)}, (dialect, sql)
        for sql in kept[dialect]:
            assert "banned_type" not in {v.kind for v in checker.check(sql)}, (dialect, sql)
