"""MariaDB: grants (user, default role, PUBLIC, database wildcards, columns) → Policy exactly,
and Policy ⇔ what the server actually lets the user do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from grid_sql.errors import ConnectionConfigError, PolicyError
from grid_sql.policy import Checker, Policy, read_policy
from grid_sql.schema import SchemaSnapshot, introspect

from .probes import MY_STATEMENTS, Probe, probes_for, run_probe, statement_mismatches

pytestmark = pytest.mark.db

DB = "grid_sql_test"
DB2 = "grid_sql_test2"
EXPECTED_TABLE_VERBS: dict[str, dict[str, set[str]]] = {
    "gs_reader": {
        f"{DB}.customer": {"select"},
        f"{DB}.orders": {"select"},
        f"{DB}.customer_names": {"select"},
        f"{DB}.Order Items": {"select"},
        f"{DB}.public_notes": {"select"},
        f"{DB2}.other": {"select"},  # database-level grant on `grid\_sql\_test2`.*
    },
    "gs_colonly": {f"{DB}.public_notes": {"select"}},
    "gs_inserter": {f"{DB}.audit_log": {"insert"}, f"{DB}.public_notes": {"select"}},
    "gs_member": {  # through its default role gs_group
        f"{DB}.orders": {"select", "update", "delete"},
        f"{DB}.audit_log": {"truncate"},  # TRUNCATE needs DROP in MariaDB
        f"{DB}.public_notes": {"select"},
    },
    "gs_nondefault": {f"{DB}.public_notes": {"select"}},  # role granted but not enabled
    "gs_global": {  # GRANT SELECT ON *.*
        f"{DB}.{t}": {"select"}
        for t in (
            "customer",
            "orders",
            "audit_log",
            "select",
            "public_notes",
            "Order Items",
            "customer_names",
            "setup_marker",
        )
    }
    | {f"{DB2}.other": {"select"}},
}
EXPECTED_COLUMN_ONLY: dict[str, dict[str, dict[str, set[str]]]] = {
    "gs_colonly": {f"{DB}.customer": {"select": {"id", "name"}, "update": {"name"}}},
    "gs_member": {f"{DB}.select": {"select": {"id", "order"}}},
}
EXPECTED_VERBS = {
    "gs_reader": {"select"},
    "gs_colonly": {"select", "update"},
    "gs_inserter": {"select", "insert"},
    "gs_member": {"select", "update", "delete", "truncate", "drop"},
    "gs_nondefault": {"select"},
    "gs_global": {"select"},
}
USERS = sorted(EXPECTED_TABLE_VERBS)
# MariaDB: table, column and database access denied.
DENIED = {"1142", "1143", "1044"}


def _url(make: Callable[..., sa.URL], user: str) -> sa.URL:
    # PUBLIC grants do not let a user USE the database at connect time: connect without one.
    return make(user, None) if user == "gs_nondefault" else make(user)


@pytest.fixture(scope="module")
def full_snapshot(my_setup: Engine) -> SchemaSnapshot:
    return introspect(my_setup, schemas=[DB, DB2])


@pytest.mark.parametrize("user", USERS)
def test_policy_matches_grants(user: str, my_user_url: Callable[..., sa.URL]) -> None:
    policy = read_policy(_url(my_user_url, user))
    assert policy.role == f"{user}@%"
    assert policy.statement_verbs == EXPECTED_VERBS[user]
    ours = [t for t in policy.tables if t.schema in (DB, DB2)]  # gs_global sees every database
    table_verbs = {t.qualified: set(t.verbs) for t in ours if t.verbs}
    assert table_verbs == EXPECTED_TABLE_VERBS[user]
    for t in ours:
        for verb in ("select", "insert", "update", "references"):
            cols = {c for c, v in t.columns if verb in v}
            if verb in t.verbs:
                assert cols == {c for c, _ in t.columns}, (t.qualified, verb)
            else:
                expected = EXPECTED_COLUMN_ONLY.get(user, {}).get(t.qualified, {}).get(verb, set())
                assert cols == expected, (user, t.qualified, verb)


def test_least_privilege_snapshot(my_user_url: Callable[..., sa.URL]) -> None:
    snap = introspect(my_user_url("gs_colonly"))
    assert {f"{s}.{t.name}" for s, t in snap.iter_tables()} == {
        f"{DB}.customer",
        f"{DB}.public_notes",
    }
    # MariaDB shows a column-restricted user only the columns it has a privilege on.
    cust = snap.table("customer")
    assert cust is not None and set(cust.column_names) == {"id", "name"}
    snap = introspect(my_user_url("gs_reader"))
    assert {s.name for s in snap.schemas} == {DB, DB2}
    items = snap.table("Order Items")
    assert items is not None
    assert items.column_names == ("id", "Official_ratings_(millions)", "CamelCol")


def test_snapshot_of_admin(full_snapshot: SchemaSnapshot) -> None:
    orders = full_snapshot.table("orders", DB)
    assert orders is not None
    (fk,) = orders.foreign_keys
    assert (fk.referred_schema, fk.referred_table, fk.referred_columns) == (DB, "customer", ("id",))
    view = full_snapshot.table("customer_names", DB)
    assert view is not None and view.kind == "view"
    sel = full_snapshot.table("select", DB)
    assert sel is not None and sel.column_names == ("id", "order", "from")


@pytest.mark.parametrize("user", USERS)
def test_policy_agrees_with_server(
    user: str, my_user_url: Callable[..., sa.URL], full_snapshot: SchemaSnapshot
) -> None:
    """policy allows ⇔ server accepts the probe ⇔ checker accepts the probe (see probes.py)."""
    engine = sa.create_engine(_url(my_user_url, user))
    policy = read_policy(engine)
    checker = Checker(introspect(engine), policy)
    mismatches = []
    outcomes: list[bool] = []
    with engine.connect() as conn:
        for probe in probes_for(full_snapshot, engine.dialect, truncate=True):
            if probe.table == "setup_marker":
                continue
            server_ok = run_probe(conn, probe, denied_codes=DENIED)
            outcomes.append(server_ok)
            policy_ok = _policy_allows(policy, probe)
            found = checker.check(probe.sql)
            if not (server_ok == policy_ok == (not found)):
                mismatches.append((probe.sql, server_ok, policy_ok, [v.kind for v in found]))
    engine.dispose()
    assert len(outcomes) > 80 and any(outcomes) and not all(outcomes)
    assert mismatches == []


def _policy_allows(policy: Policy, probe: Probe) -> bool:
    t = policy.table(probe.table, probe.schema)
    if t is None:
        return False
    if probe.column is None:
        return t.allows(probe.verb)
    return t.column_allows(probe.column, probe.verb)


def test_policy_file_naming_missing_table(
    my_user_url: Callable[..., sa.URL], tmp_path: Path
) -> None:
    f = tmp_path / "policy.toml"
    f.write_text('[columns.deny]\nno_such_table = ["x"]\n')
    with pytest.raises(PolicyError, match="no_such_table.*does not exist"):
        read_policy(my_user_url("gs_reader"), app=f)


def test_bad_inputs(my_admin: Engine) -> None:
    with pytest.raises(ConnectionConfigError, match="cannot connect"):
        introspect(my_admin.url.set(port=1))
    with pytest.raises(ConnectionConfigError, match="Access denied"):
        introspect(my_admin.url.set(username="gs_reader", password="wrong"))
    with pytest.raises(ConnectionConfigError, match="cannot connect"):
        # A database the user has no privilege on: the server refuses the connection.
        introspect(my_admin.url.set(username="gs_inserter", password="gs-test-pw", database=DB2))


# gs_nondefault connects without a database, so unqualified names cannot resolve there.
@pytest.mark.parametrize("user", [u for u in USERS if u != "gs_nondefault"])
def test_checker_agrees_with_server_on_statements(
    user: str, my_user_url: Callable[..., sa.URL]
) -> None:
    """Joins, subqueries, CTEs, stars and DML: server accepts ⇔ checker reports nothing."""
    engine = sa.create_engine(_url(my_user_url, user))
    checker = Checker(introspect(engine), read_policy(engine))
    with engine.connect() as conn:
        mismatches, outcomes = statement_mismatches(conn, checker, MY_STATEMENTS, DENIED)
    engine.dispose()
    assert any(outcomes) and not all(outcomes)
    assert mismatches == []


def test_explain_names_the_sources(my_user_url: Callable[..., sa.URL]) -> None:
    text = read_policy(my_user_url("gs_member")).explain()
    assert "grid_sql_test.orders: DELETE [grant] role gs_group ON grid_sql_test.orders" in text
    assert "TRUNCATE (via DROP)" in text
    assert "PUBLIC ON grid_sql_test.public_notes" in text
    text = read_policy(my_user_url("gs_reader")).explain()
    assert "ON grid\\_sql\\_test2.*" in text  # the database-level (wildcard) grant
