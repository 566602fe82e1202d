"""Policy model and application narrowing (no server needed: SQLite baseline + synthetic)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_sql.errors import ConnectionConfigError, PolicyError
from grid_sql.policy import (
    STATEMENT_VERBS,
    TABLE_PRIVILEGES,
    AppPolicy,
    Policy,
    narrow,
    open_sqlite,
    parse_mysql_grant,
    read_policy,
    sqlite_baseline,
)
from grid_sql.schema import SchemaSnapshot, introspect

CHINOOK = Path(__file__).resolve().parents[2].parent / "shared/data/chinook/Chinook_Sqlite.sqlite"


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> SchemaSnapshot:
    if CHINOOK.exists():
        return introspect(f"sqlite:///{CHINOOK}")
    path = tmp_path_factory.mktemp("db") / "c.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE Customer (CustomerId INTEGER PRIMARY KEY, FirstName TEXT, Email TEXT);"
        "CREATE TABLE Employee (EmployeeId INTEGER PRIMARY KEY, BirthDate TEXT);"
        "CREATE TABLE Genre (GenreId INTEGER PRIMARY KEY, Name TEXT);"
    )
    con.close()
    return introspect(f"sqlite:///{path}")


def _rights(p: Policy) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for t in p.tables:
        out |= {(t.qualified, v) for v in t.verbs}
        out |= {(t.qualified, c, v) for c, vs in t.columns for v in vs}
    out |= {("verb", v) for v in p.statement_verbs}
    return out


def test_baseline_and_explain(snap: SchemaSnapshot) -> None:
    base = sqlite_baseline(snap)
    assert base.allows("delete", "Customer") and base.column_allows("select", "Customer", "Email")
    assert not base.read_only
    text = base.explain()
    assert "main.Customer (table)" in text and "[default]" in text


def test_narrowing_rules(snap: SchemaSnapshot) -> None:
    app = AppPolicy.from_mapping(
        {
            "verbs": ["select", "insert"],
            "tables": {"deny": ["Employee"]},
            "table_verbs": {"Genre": ["select"]},
            "columns": {"deny": {"Customer": ["Email"]}},
            "banned_functions": ["md5"],
            "roles": {"(sqlite file)": {"verbs": ["select"]}, "other": {"verbs": []}},
        }
    )
    base = sqlite_baseline(snap)
    p = narrow(base, app, snap)
    assert p.statement_verbs == {"select"} and p.read_only
    assert not p.allows("select", "Employee")
    assert p.allows("select", "Genre") and not p.allows("insert", "Genre")
    assert not p.column_allows("select", "Customer", "Email")
    assert p.column_allows("select", "Customer", "FirstName")
    customer = p.table("Customer")
    assert customer is not None and "delete" in customer.verbs  # a column deny keeps DELETE
    assert customer.readable("FirstName") and not customer.readable("Email")
    assert customer.updatable("FirstName") and not customer.insertable("Email")
    assert "select" not in customer.verbs  # ...but SELECT is no longer table-wide
    assert "md5" in p.banned_functions and "pg_read_file" in p.banned_functions
    text = p.explain()
    assert "tables.deny" in text and "columns.deny" in text and "[app]" in text
    assert _rights(p) <= _rights(base)
    assert p.fingerprint != base.fingerprint
    assert narrow(base, app, snap).fingerprint == p.fingerprint


def test_columns_allow(snap: SchemaSnapshot) -> None:
    p = narrow(
        sqlite_baseline(snap),
        AppPolicy.from_mapping({"columns": {"allow": {"Customer": ["CustomerId"]}}}),
        snap,
    )
    customer = p.table("Customer")
    assert customer is not None
    assert {c for c, v in customer.columns if "select" in v} == {"CustomerId"}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"tables": {"deny": ["NoSuchTable"]}}, "NoSuchTable.*does not exist"),
        ({"tables": {"allow": ["main.Nope"]}}, "Nope.*does not exist"),
        ({"columns": {"deny": {"Customer": ["NoCol"]}}}, "NoCol.*does not exist"),
        ({"columns": {"deny": {"Ghost": ["x"]}}}, "Ghost.*does not exist"),
        ({"table_verbs": {"Ghost": ["select"]}}, "Ghost.*does not exist"),
    ],
)
def test_unknown_names_are_errors(snap: SchemaSnapshot, data: dict[str, Any], match: str) -> None:
    with pytest.raises(PolicyError, match=match):
        narrow(sqlite_baseline(snap), AppPolicy.from_mapping(data), snap)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"verbz": []}, "unknown key"),
        ({"verbs": ["select", "explode"]}, "unknown verb"),
        ({"table_verbs": {"Genre": ["fly"]}}, "unknown verb"),
        ({"banned_clauses": ["nope"]}, "unknown clause"),
        ({"tables": ["Genre"]}, "allow"),
        ({"roles": {"r": {"colums": {}}}}, "unknown key"),
        ({"verbs": "select"}, "list of names"),
    ],
)
def test_malformed_policies(data: dict[str, Any], match: str) -> None:
    with pytest.raises(PolicyError, match=match):
        AppPolicy.from_mapping(data)


def test_policy_files(snap: SchemaSnapshot, tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("verbs: [select]\ntables:\n  deny: [Employee]\n")
    (tmp_path / "p.toml").write_text('verbs = ["select"]\n[tables]\ndeny = ["Employee"]\n')
    (tmp_path / "p.json").write_text('{"verbs": ["select"], "tables": {"deny": ["Employee"]}}')
    prints = {
        narrow(sqlite_baseline(snap), AppPolicy.load(tmp_path / f"p.{ext}"), snap).fingerprint
        for ext in ("yaml", "toml", "json")
    }
    assert len(prints) == 1
    (tmp_path / "bad.yaml").write_text("verbs: [select\n")
    with pytest.raises(PolicyError, match="not valid yaml"):
        AppPolicy.load(tmp_path / "bad.yaml")
    with pytest.raises(PolicyError, match="cannot read policy file"):
        AppPolicy.load(tmp_path / "missing.toml")
    with pytest.raises(PolicyError, match="unknown format"):
        (tmp_path / "p.ini").write_text("")
        AppPolicy.load(tmp_path / "p.ini")


names = st.sampled_from(["Customer", "Employee", "Genre"])
app_policies = st.fixed_dictionaries(
    {},
    optional={
        "verbs": st.lists(st.sampled_from(STATEMENT_VERBS), unique=True),
        "tables": st.fixed_dictionaries(
            {}, optional={"allow": st.lists(names, unique=True), "deny": st.lists(names)}
        ),
        "table_verbs": st.dictionaries(
            names, st.lists(st.sampled_from(TABLE_PRIVILEGES), unique=True)
        ),
        "columns": st.fixed_dictionaries(
            {},
            optional={
                "deny": st.dictionaries(st.just("Customer"), st.lists(st.just("CustomerId"))),
                "allow": st.dictionaries(st.just("Genre"), st.lists(st.just("Name"))),
            },
        ),
    },
)


@settings(max_examples=150, deadline=None)
@given(first=app_policies, second=app_policies)
def test_narrowing_never_widens(snap: SchemaSnapshot, first: Any, second: Any) -> None:
    """Property: any app policy yields a subset of the rights it started from, and applying
    a second one on top never brings a right back."""
    base = sqlite_baseline(snap)
    once = narrow(base, AppPolicy.from_mapping(first), snap)
    twice = narrow(once, AppPolicy.from_mapping(second), snap)
    assert _rights(once) <= _rights(base)
    assert _rights(twice) <= _rights(once)
    assert once.banned_functions >= base.banned_functions


def test_sqlite_read_only_connection(snap: SchemaSnapshot, tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    sqlite3.connect(path).executescript("CREATE TABLE t (x INTEGER);")
    tsnap = introspect(f"sqlite:///{path}")
    ro = narrow(sqlite_baseline(tsnap), AppPolicy.from_mapping({"verbs": ["select"]}), tsnap)
    assert ro.read_only
    engine = open_sqlite(path, ro)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 0
        with pytest.raises(sa.exc.OperationalError, match="readonly|read-only|query_only"):
            conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        with pytest.raises(sa.exc.OperationalError):
            conn.execute(sa.text("CREATE TEMP TABLE tt (y INTEGER)"))
    engine.dispose()
    rw = open_sqlite(path, sqlite_baseline(tsnap))
    with rw.begin() as conn:
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
    rw.dispose()
    assert read_policy(f"sqlite:///{path}", app={"verbs": ["select"]}).read_only
    with pytest.raises(ConnectionConfigError, match="not found"):
        open_sqlite(tmp_path / "missing.sqlite", ro)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "GRANT SELECT (`id`, `name`), UPDATE (`name`) ON `db`.`customer` TO `u`@`%`",
            ([("SELECT", ["id", "name"]), ("UPDATE", ["name"])], "db", "customer", False),
        ),
        (
            "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION",
            ([("ALL PRIVILEGES", None)], "*", "*", True),
        ),
        (
            "GRANT SELECT ON `grid\\_sql`.* TO PUBLIC",
            ([("SELECT", None)], "grid\\_sql", "*", False),
        ),
        (
            "GRANT SELECT (`a,b`, `x``y`) ON `d`.`Order Items` TO `r`",
            ([("SELECT", ["a,b", "x`y"])], "d", "Order Items", False),
        ),
        ("GRANT `gs_group` TO `u`@`%`", None),
        ("GRANT EXECUTE ON FUNCTION `d`.`f` TO `u`@`%`", None),
        ("SET DEFAULT ROLE `r` FOR `u`@`%`", None),
    ],
)
def test_parse_mysql_grant(line: str, expected: object) -> None:
    assert parse_mysql_grant(line) == expected


def test_the_no_grants_baseline_is_the_dialects_not_sqlites() -> None:
    from grid_sql.dialect import Dialect
    from grid_sql.policy import no_grants_baseline, sqlite_baseline
    from tests.policy.test_checker import _snapshot

    snap = _snapshot("sqlite", "main")
    assert no_grants_baseline(snap, Dialect.get("sqlite")) == sqlite_baseline(snap)
    assert sqlite_baseline(snap).role == "(sqlite file)"
    pg = no_grants_baseline(_snapshot("postgresql", "public"), Dialect.get("postgresql"))
    assert pg.dialect == "postgresql" and pg.role == "(postgresql)"
    assert pg.provenance[0].detail == "PostgreSQL has no privilege system"
