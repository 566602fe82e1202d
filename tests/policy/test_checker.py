"""The post-parse checker: every violation class is flagged; gold SQL is never flagged."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_sql.errors import PolicyViolation
from grid_sql.policy import AppPolicy, Checker, Policy, ViolationKind, narrow, sqlite_baseline
from grid_sql.policy.model import COLUMN_PRIVILEGES, TablePolicy
from grid_sql.schema import (
    ColumnInfo,
    SchemaInfo,
    SchemaSnapshot,
    TableInfo,
    introspect,
    load_spider_tables,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SPIDER = DATA / "spider"


def _table(name: str, *cols: str) -> TableInfo:
    return TableInfo(name, "table", tuple(ColumnInfo(c, "TEXT") for c in cols), (cols[0],))


def _snapshot(dialect: str, schema: str) -> SchemaSnapshot:
    tables = (
        _table("customer", "id", "name", "email", "Phone"),
        _table("orders", "id", "customer_id", "total"),
        _table("audit_log", "id", "msg"),
        _table("employee", "id", "salary"),
        _table("Order Items", "id", "Official_ratings_(millions)"),
    )
    return SchemaSnapshot(dialect, schema, (SchemaInfo(schema, tables),))


def _policy(snap: SchemaSnapshot) -> Policy:
    """customer: SELECT on id/name only, UPDATE(name); orders: SELECT, UPDATE, DELETE;
    audit_log: INSERT only; employee: nothing; "Order Items": SELECT."""
    schema = snap.default_schema or ""
    col = frozenset

    def tp(name: str, verbs: set[str], cols: dict[str, set[str]] | None = None) -> TablePolicy:
        info = snap.table(name)
        assert info is not None
        table_cols = {v for v in verbs if v in COLUMN_PRIVILEGES}
        columns = tuple(
            (c.name, col(table_cols | (cols or {}).get(c.name, set()))) for c in info.columns
        )
        return TablePolicy(schema, name, "table", col(verbs), columns)

    return Policy(
        dialect=snap.dialect,
        role="analyst",
        default_schema=schema,
        tables=(
            tp("customer", set(), {"id": {"select"}, "name": {"select", "update"}}),
            tp("orders", {"select", "update", "delete"}),
            tp("audit_log", {"insert"}),
            tp("employee", set()),
            tp("Order Items", {"select"}),
        ),
        statement_verbs=frozenset({"select", "insert", "update", "delete"}),
    )


DIALECTS = {"postgresql": "public", "mysql": "shop", "sqlite": "main"}

# (dialects or None for all, sql, expected kinds)
FIXTURES: list[tuple[tuple[str, ...] | None, str, set[str]]] = [
    (None, "SELECT email FROM customer", {"column_not_readable"}),
    (None, "SELECT c.name, c.email FROM customer AS c", {"column_not_readable"}),
    (None, "SELECT * FROM customer", {"column_not_readable"}),
    (
        None,
        "SELECT c.* FROM customer c JOIN orders o ON o.customer_id = c.id",
        {"column_not_readable"},
    ),
    (None, "SELECT name FROM customer WHERE email LIKE '%x%'", {"column_not_readable"}),
    (None, "SELECT name FROM customer ORDER BY email", {"column_not_readable"}),
    (None, "WITH x AS (SELECT email AS e FROM customer) SELECT e FROM x", {"column_not_readable"}),
    (None, "SELECT t.e FROM (SELECT email AS e FROM customer) t", {"column_not_readable"}),
    (
        None,
        "SELECT o.id, (SELECT c.email FROM customer c WHERE c.id = o.customer_id) FROM orders o",
        {"column_not_readable"},
    ),
    (
        None,
        "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM employee)",
        {"table_not_allowed"},
    ),
    (None, "SELECT count(*) FROM employee", {"table_not_allowed"}),
    (None, "SELECT msg FROM audit_log", {"table_not_allowed"}),
    (None, "DELETE FROM customer WHERE id = 1", {"table_not_allowed"}),
    (None, "INSERT INTO orders (id) VALUES (1)", {"table_not_allowed"}),
    (None, "UPDATE customer SET email = 'x' WHERE id = 1", {"column_not_writable"}),
    (None, "UPDATE customer SET name = 'x' WHERE email = 'y'", {"column_not_readable"}),
    (None, "UPDATE customer SET name = email", {"column_not_readable"}),
    # UPDATE ... FROM: the FROM tables need SELECT and their columns read rights
    (
        ("postgresql", "sqlite"),
        "UPDATE orders SET total = 1 FROM employee WHERE orders.id = employee.id",
        {"table_not_allowed"},
    ),
    (
        ("postgresql", "sqlite"),
        "UPDATE orders SET total = c.id FROM customer AS c WHERE c.email = 'x'",
        {"column_not_readable"},
    ),
    (
        ("postgresql", "sqlite"),
        "UPDATE orders SET total = 2 FROM customer AS c WHERE c.id = orders.customer_id",
        set(),
    ),
    (None, "INSERT INTO audit_log (id, msg) VALUES (1, 'x')", set()),
    (None, "INSERT INTO customer (id) VALUES (1)", {"table_not_allowed"}),
    (None, "DROP TABLE orders", {"statement_not_allowed"}),
    (None, "CREATE TABLE z (a INT)", {"statement_not_allowed"}),
    (None, "SELECT 1; SELECT 2", {"multiple_statements"}),
    (None, "SELECT id FROM orders; DELETE FROM orders", {"multiple_statements"}),
    (None, "SELECT nope FROM orders", {"unknown_column"}),
    (None, "SELECT o.nope FROM orders o", {"unknown_column"}),
    (None, "SELECT id FROM ghosts", {"unknown_table"}),
    (None, "SELECT x.id FROM orders o", {"unknown_table"}),
    (None, "SELECT id FROM orders o JOIN customer c ON c.id = o.customer_id", {"ambiguous_column"}),
    (None, "SELECT o.total FROM orders o JOIN customer o ON 1 = 1", {"duplicate_alias"}),
    (("sqlite",), "SELECT YEAR(total) FROM orders", {"unknown_function"}),
    (("postgresql",), "SELECT ifnull(total, 0) FROM orders", {"unknown_function"}),
    (("mysql",), "SELECT strftime('%Y', total) FROM orders", {"unknown_function"}),
    (None, "SELECT id FROM orders WHERE count(*) > 1", {"aggregate_misuse"}),
    (None, "SELECT count(max(total)) FROM orders", {"aggregate_misuse"}),
    (("sqlite",), "SELECT id FROM orders ORDER BY count(*) DESC", {"aggregate_misuse"}),
    (("postgresql", "mysql"), "SELECT 1 FROM orders ORDER BY count(*) DESC", set()),
    (None, "SELECT customer_id FROM orders GROUP BY customer_id ORDER BY count(*) DESC", set()),
    (None, "SELECT FROM WHERE", {"parse_error"}),
    (("postgresql",), "SELECT pg_read_file('/etc/passwd')", {"banned_function"}),
    (("postgresql",), "SELECT pg_catalog.pg_sleep(10)", {"banned_function"}),
    (("postgresql",), "SELECT lo_import('/etc/passwd')", {"banned_function"}),
    (("postgresql",), "SELECT * FROM pg_ls_dir('.')", {"banned_function"}),
    (("postgresql",), "SELECT g FROM generate_series(1, 3) AS g", set()),
    (("postgresql",), "SELECT x FROM unnest(ARRAY[1, 2]) AS t(x)", set()),
    # System catalogs are outside the snapshot: deny by default.
    (("postgresql",), "SELECT relname FROM pg_catalog.pg_class", {"unknown_table"}),
    (("postgresql",), "COPY orders TO '/tmp/x'", {"banned_clause", "statement_not_allowed"}),
    (("postgresql",), "SELECT id INTO newt FROM orders", {"banned_clause"}),
    (("postgresql",), "SELECT 'customer'::regclass", {"banned_type"}),
    (("postgresql",), "SELECT id FROM orders WHERE regrole 'x' IS NULL", {"banned_type"}),
    (("postgresql", "sqlite"), "SELECT CAST(id AS customer) FROM orders", {"banned_type"}),
    (
        ("postgresql",),
        "WITH d AS (DELETE FROM orders RETURNING id) INSERT INTO audit_log (id) SELECT id FROM d",
        set(),
    ),
    (
        ("postgresql",),
        "WITH d AS (DELETE FROM customer RETURNING id) SELECT id FROM d",
        {"table_not_allowed"},
    ),
    (
        ("postgresql",),
        "WITH d AS (UPDATE customer SET email = NULL RETURNING id) SELECT id FROM d",
        {"column_not_writable"},
    ),
    (("postgresql",), "TRUNCATE orders", {"statement_not_allowed", "table_not_allowed"}),
    (("postgresql",), 'SELECT "Official_ratings_(millions)" FROM "Order Items"', set()),
    (("postgresql",), 'SELECT "Phone" FROM customer', {"column_not_readable"}),
    (("postgresql",), "SELECT Phone FROM customer", {"unknown_column"}),  # folds to phone
    (
        ("postgresql",),
        "INSERT INTO audit_log (id, msg) VALUES (1, 'x') "
        "ON CONFLICT (id) DO UPDATE SET msg = excluded.msg",
        {"table_not_allowed"},  # no UPDATE and no SELECT on any column of audit_log
    ),
    (
        ("mysql",),
        "INSERT INTO audit_log (id, msg) VALUES (1, 'x') ON DUPLICATE KEY UPDATE msg = VALUES(msg)",
        {"table_not_allowed"},
    ),
    (
        ("postgresql",),
        "INSERT INTO customer (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET email = 'x'",
        {"table_not_allowed", "column_not_writable"},
    ),
    (("mysql",), "SELECT sleep(5)", {"banned_function"}),
    (("mysql",), "SELECT benchmark(1000000, md5('x'))", {"banned_function"}),
    (("mysql",), "SELECT load_file('/etc/passwd')", {"banned_function"}),
    (("mysql",), "SELECT id FROM orders INTO OUTFILE '/tmp/x'", {"banned_clause", "parse_error"}),
    (("mysql",), "SELECT id INTO DUMPFILE '/tmp/x' FROM orders", {"banned_clause", "parse_error"}),
    (("mysql",), "LOAD DATA INFILE '/tmp/x' INTO TABLE orders", {"banned_clause", "parse_error"}),
    (("mysql",), "SELECT `Official_ratings_(millions)` FROM `Order Items`", set()),
    (("mysql",), "SELECT PHONE FROM customer", {"column_not_readable"}),
    (("sqlite",), "SELECT load_extension('/tmp/evil')", {"banned_function"}),
    (("sqlite",), "ATTACH DATABASE '/tmp/x.db' AS x", {"banned_clause", "statement_not_allowed"}),
    (("sqlite",), "PRAGMA journal_mode = WAL", {"banned_clause", "statement_not_allowed"}),
    (("sqlite",), "PRAGMA writable_schema(1)", {"banned_clause", "statement_not_allowed"}),
    (("sqlite",), "PRAGMA table_info(orders)", {"statement_not_allowed"}),
    (("sqlite",), 'SELECT name FROM customer WHERE name = "Ann"', set()),  # SQLite string rule
    (("sqlite",), 'SELECT "Official_ratings_(millions)" FROM "Order Items"', set()),
    # Allowed statements (negative controls): no violation at all.
    (None, "SELECT id, name FROM customer WHERE name LIKE 'A%' ORDER BY name", set()),
    (None, "SELECT count(*) FROM customer", set()),
    (None, "SELECT o.total, c.name FROM orders o JOIN customer c ON c.id = o.customer_id", set()),
    (None, "UPDATE customer SET name = 'x' WHERE id = 3", set()),
    (None, "DELETE FROM orders WHERE total < 0", set()),
    (None, "SELECT id FROM orders UNION SELECT id FROM customer ORDER BY id", set()),
    (
        None,
        "SELECT customer_id, sum(total) AS s FROM orders GROUP BY customer_id ORDER BY s",
        set(),
    ),
]


def _cases() -> list[tuple[str, str, set[str]]]:
    out = []
    for dialects, sql, kinds in FIXTURES:
        for d in dialects or tuple(DIALECTS):
            out.append((d, sql, kinds))
    return out


@pytest.mark.parametrize(("dialect", "sql", "kinds"), _cases())
def test_fixture(dialect: str, sql: str, kinds: set[str]) -> None:
    snap = _snapshot(dialect, DIALECTS[dialect])
    found = Checker(snap, _policy(snap)).check(sql)
    assert {v.kind for v in found} == kinds, [v.message for v in found]
    for v in found:
        assert v.message and v.kind in typing.get_args(ViolationKind)
        if v.position is not None and v.snippet is not None:
            assert sql[v.position : v.position + len(v.snippet)] == v.snippet


def test_every_violation_kind_has_a_fixture() -> None:
    covered = {k for _, _, kinds in FIXTURES for k in kinds}
    assert covered == set(typing.get_args(ViolationKind))


def test_structured_report_and_enforce() -> None:
    snap = _snapshot("postgresql", "public")
    checker = Checker(snap, _policy(snap))
    sql = "SELECT c.name, c.email FROM customer AS c"
    (v,) = checker.check(sql)
    assert (v.kind, v.table, v.column, v.verb) == (
        "column_not_readable",
        "public.customer",
        "email",
        "select",
    )
    assert v.position == sql.index("c.email") and v.snippet == "c.email"
    assert "readable columns of customer: id, name" in v.message
    assert v.to_dict()["kind"] == "column_not_readable"
    with pytest.raises(PolicyViolation) as info:
        checker.enforce(sql)
    assert info.value.violations == [v] and "1. Column customer.email" in str(info.value)
    checker.enforce("SELECT name FROM customer")  # no exception
    star = checker.check("SELECT * FROM customer")
    assert {x.column for x in star} == {"email", "Phone"}
    assert all("reached through *" in x.message for x in star)


def test_banned_list_comes_from_policy() -> None:
    snap = _snapshot("postgresql", "public")
    policy = narrow(_policy(snap), AppPolicy.from_mapping({"banned_functions": ["upper"]}), snap)
    (v,) = Checker(snap, policy).check("SELECT upper(name) FROM customer")
    assert v.kind == "banned_function"


def _spider_gold() -> list[tuple[str, str]]:
    dev = json.loads((SPIDER / "dev.json").read_text())
    present = {p.name for p in (SPIDER / "database").iterdir()}
    return [(e["db_id"], e["query"]) for e in dev if e["db_id"] in present]


@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
@pytest.mark.parametrize("source", ["sqlite", "tables.json"])
def test_spider_gold_has_no_false_positives(source: str) -> None:
    """All 972 dev gold queries with a database (wta_1 is absent), permissive policy: 0 flags."""
    gold = _spider_gold()
    assert len(gold) == 972
    from_json = load_spider_tables(SPIDER / "tables.json")
    checkers: dict[str, Checker] = {}
    flagged = []
    for db, sql in gold:
        if db not in checkers:
            if source == "sqlite":
                snap = introspect(f"sqlite:///{SPIDER / 'database' / db / f'{db}.sqlite'}")
            else:
                snap = from_json[db]
            checkers[db] = Checker(snap, sqlite_baseline(snap))
        found = checkers[db].check(sql)
        if found:
            flagged.append((db, sql, [v.message for v in found]))
    assert flagged == []


_TOKENS = sorted({t for _, sql, _ in FIXTURES for t in sql.split()} | {"'", '"', "`", ";", "--"})


@settings(max_examples=200, deadline=None)
@given(
    base=st.sampled_from([sql for _, sql, _ in FIXTURES]),
    edits=st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from(_TOKENS), st.booleans()), max_size=3
    ),
    dialect=st.sampled_from(sorted(DIALECTS)),
)
def test_checker_never_raises(base: str, edits: list[tuple[int, str, bool]], dialect: str) -> None:
    """Fail closed, never crash: mutated statements get a verdict (possibly parse_error)."""
    words = base.split()
    for pos, tok, replace in edits:
        i = pos % len(words)
        if replace:
            words[i] = tok
        else:
            words.insert(i, tok)
    snap = _snapshot(dialect, DIALECTS[dialect])
    found = Checker(snap, _policy(snap)).check(" ".join(words))
    assert all(v.message for v in found)


def test_deeply_nested_type_named_calls_are_refused_without_parsing() -> None:
    """sqlglot's parse time doubles per nested `date(` (it tries a sized type first): a
    degenerate generation `ORDER BY date(offsets(date(date(...` hung a Spider run. Beyond
    MAX_TYPE_CALL_DEPTH the checker refuses at once; below it, such calls are judged."""
    from grid_sql.policy.sqlparse import MAX_TYPE_CALL_DEPTH, type_call_depth

    snap = _snapshot("sqlite", DIALECTS["sqlite"])
    checker = Checker(snap, _policy(snap))
    deep = "SELECT email FROM customer ORDER BY " + "date(" * 40 + "email" + ")" * 40
    assert type_call_depth(deep, "sqlite") == 40
    (v,) = checker.check(deep)  # (unguarded, sqlglot would take hours here)
    assert v.kind == "parse_error" and "nests 40 calls" in v.message
    # the executor's one-statement check and the repair hints use the same guard
    from grid_sql.ask.execute import bind_parameters, statement_verb
    from grid_sql.ask.prompt import alias_hints
    from grid_sql.errors import StatementError

    with pytest.raises(StatementError, match="nests 40 calls"):
        statement_verb(deep, "sqlite")
    assert bind_parameters(deep, "sqlite") == []
    assert alias_hints(deep, snap) == []
    assert checker.parse_query(deep) is None
    ok = "SELECT email FROM customer ORDER BY " + "date(abs(" * 6 + "email" + "))" * 6
    assert type_call_depth(ok, "sqlite") == 6 <= MAX_TYPE_CALL_DEPTH
    assert all(v.kind != "parse_error" for v in checker.check(ok))
    assert type_call_depth("SELECT 'date(' FROM t", "sqlite") == 0  # strings are not calls


def test_deeply_nested_calls_are_a_parse_error_everywhere() -> None:
    """A truncated 0.5B generation `WHERE degrees(degreeS(degreeS(...` hundreds deep (Spider
    q535): sqlglot's recursive descent raises RecursionError. The checker already refused it;
    the bind-parameter scan that follows crashed `generate_sql` with the untyped error. The
    guarded parse now turns it into a parse error for every caller."""
    from grid_sql.ask.execute import bind_parameters, statement_verb
    from grid_sql.ask.prompt import alias_hints
    from grid_sql.errors import StatementError
    from grid_sql.policy.sqlparse import parse, parse_one

    snap = _snapshot("sqlite", DIALECTS["sqlite"])
    checker = Checker(snap, _policy(snap))
    deep = "SELECT email FROM customer WHERE " + "degrees(" * 1500 + "1" + ")" * 1500
    with pytest.raises(sqlglot.errors.ParseError, match="nested too deeply"):
        parse(deep, "sqlite")
    with pytest.raises(sqlglot.errors.ParseError, match="nested too deeply"):
        parse_one(deep, "sqlite")
    assert bind_parameters(deep, "sqlite") == []
    with pytest.raises(StatementError, match="nested too deeply"):
        statement_verb(deep, "sqlite")
    assert alias_hints(deep, snap) == []
    assert checker.parse_query(deep) is None
    assert [v.kind for v in checker.check(deep)] == ["parse_error"]


def test_set_operation_over_a_literal_is_refused_not_crashed() -> None:
    """Found by test_checker_never_raises: MySQL reads `"Ann"` as a string (now refused on
    its own: an identifier under ANSI_QUOTES), and sqlglot cannot build the scopes of a UNION
    whose operand is a bare literal (OptimizeError)."""
    snap = _snapshot("mysql", DIALECTS["mysql"])
    found = Checker(snap, _policy(snap)).check("'Ann' UNION SELECT email FROM customer")
    assert [v.kind for v in found] == ["parse_error"]
    assert "scopes could not be built" in found[0].message


def test_deeply_nested_statement_is_refused_not_crashed() -> None:
    """A degenerate generation (`WHERE x IN (SELECT (SELECT ...`, Spider q244/q658, Chinook
    q17 in bench/RESULTS-spider.md) drives sqlglot past Python's recursion limit: the checker
    refuses it with a quotable parse_error instead of raising RecursionError."""
    from grid_sql.data import chinook_path
    from grid_sql.policy import open_sqlite
    from grid_sql.schema import introspect

    snap = introspect(open_sqlite(chinook_path()))
    checker = Checker(snap, sqlite_baseline(snap))
    deep = "SELECT Name FROM Artist WHERE ArtistId IN " + "(SELECT " * 400 + "1" + ")" * 400
    (v,) = checker.check(deep)
    assert v.kind == "parse_error" and "nested too deeply" in v.message
    with pytest.raises(PolicyViolation, match="nested too deeply"):
        checker.enforce(deep)
    assert checker.check("SELECT Name FROM Artist WHERE ArtistId IN (SELECT 1)") == []
