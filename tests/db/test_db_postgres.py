"""PostgreSQL: grants → Policy exactly, and Policy ⇔ what the server actually lets a role do."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from grid_sql.errors import ConnectionConfigError, PolicyError, SchemaError
from grid_sql.policy import Checker, Policy, read_policy
from grid_sql.schema import SchemaSnapshot, introspect

from .probes import PG_STATEMENTS, Probe, probes_for, run_probe, statement_mismatches

pytestmark = pytest.mark.db

# role → {table: table-level verbs}; tables not listed must have no rights at all.
EXPECTED_TABLE_VERBS: dict[str, dict[str, set[str]]] = {
    "gs_reader": {
        "public.customer": {"select"},
        "public.orders": {"select"},
        "public.customer_names": {"select"},
        "public.public_notes": {"select"},
        "Sales.Order Items": {"select"},
    },
    "gs_colonly": {"public.public_notes": {"select"}},
    "gs_inserter": {"public.audit_log": {"insert"}, "public.public_notes": {"select"}},
    "gs_member": {
        "public.orders": {"select", "update", "delete"},
        "public.audit_log": {"truncate"},
        "public.public_notes": {"select"},
    },
    "gs_noinherit": {"public.public_notes": {"select"}},
    "gs_owner": {
        "public.audit_log": {
            "select",
            "insert",
            "update",
            "delete",
            "truncate",
            "references",
            "trigger",
        },
        "public.public_notes": {"select"},
    },
}
# role → {table: {verb: columns}} for column-only grants.
EXPECTED_COLUMN_ONLY: dict[str, dict[str, dict[str, set[str]]]] = {
    "gs_colonly": {"public.customer": {"select": {"id", "name"}, "update": {"name"}}},
    "gs_member": {"public.select": {"select": {"id", "order"}}},
}
EXPECTED_VERBS = {
    "gs_reader": {"select"},
    "gs_colonly": {"select", "update", "merge"},
    "gs_inserter": {"select", "insert", "merge"},
    "gs_member": {"select", "update", "delete", "truncate", "merge"},
    "gs_noinherit": {"select"},
    "gs_owner": {
        "select",
        "insert",
        "update",
        "delete",
        "truncate",
        "merge",
        "create",
        "drop",
        "alter",
        "grant",
        "revoke",
    },
}
EXPECTED_VISIBLE = {
    "gs_reader": {
        "public.customer",
        "public.orders",
        "public.customer_names",
        "public.public_notes",
        "Sales.Order Items",
    },
    "gs_colonly": {"public.customer", "public.public_notes"},
    "gs_inserter": {"public.audit_log", "public.public_notes"},
    "gs_member": {"public.orders", "public.audit_log", "public.select", "public.public_notes"},
    "gs_noinherit": {"public.public_notes"},
    "gs_owner": {"public.audit_log", "public.public_notes"},
}
ROLES = sorted(EXPECTED_TABLE_VERBS)


@pytest.fixture(scope="module")
def full_snapshot(pg_setup: Engine) -> SchemaSnapshot:
    return introspect(pg_setup)


@pytest.mark.parametrize("role", ROLES)
def test_policy_matches_grants(role: str, pg_role_url: Callable[..., sa.URL]) -> None:
    policy = read_policy(pg_role_url(role))
    assert policy.role == role
    assert policy.statement_verbs == EXPECTED_VERBS[role]
    table_verbs = {t.qualified: set(t.verbs) for t in policy.tables if t.verbs}
    assert table_verbs == EXPECTED_TABLE_VERBS[role]
    for t in policy.tables:
        for verb in ("select", "insert", "update", "references"):
            cols = {c for c, v in t.columns if verb in v}
            if verb in t.verbs:
                assert cols == {c for c, _ in t.columns}, (t.qualified, verb)
            else:
                expected = EXPECTED_COLUMN_ONLY.get(role, {}).get(t.qualified, {}).get(verb, set())
                assert cols == expected, (role, t.qualified, verb)


@pytest.mark.parametrize("role", ROLES)
def test_least_privilege_snapshot(role: str, pg_role_url: Callable[..., sa.URL]) -> None:
    snap = introspect(pg_role_url(role))
    assert {f"{s}.{t.name}" for s, t in snap.iter_tables()} == EXPECTED_VISIBLE[role]
    assert snap.default_schema == "public"


def test_snapshot_names_and_keys(full_snapshot: SchemaSnapshot) -> None:
    items = full_snapshot.table("Order Items", "Sales")
    assert items is not None
    assert items.column_names == ("id", "Official_ratings_(millions)", "CamelCol", "order_id")
    assert items.primary_key == ("id",)
    (fk,) = items.foreign_keys
    assert (fk.referred_schema, fk.referred_table, fk.columns) == (
        "public",
        "orders",
        ("order_id",),
    )
    sel = full_snapshot.table("select")
    assert sel is not None and sel.column_names == ("id", "order", "from")
    view = full_snapshot.table("customer_names")
    assert view is not None and view.kind == "view"
    cust = full_snapshot.table("customer")
    assert cust is not None
    assert [(c.name, c.nullable) for c in cust.columns[:2]] == [("id", False), ("name", False)]
    assert cust.columns[0].default is not None and "nextval" in cust.columns[0].default
    assert full_snapshot.table("t", "hidden") is not None


def test_fingerprint_tracks_catalog(pg_setup: Engine) -> None:
    first = introspect(pg_setup)
    assert introspect(pg_setup).fingerprint == first.fingerprint
    with pg_setup.begin() as conn:
        conn.execute(sa.text("CREATE TABLE hidden.fp_probe (x int)"))
    try:
        assert introspect(pg_setup).fingerprint != first.fingerprint
    finally:
        with pg_setup.begin() as conn:
            conn.execute(sa.text("DROP TABLE hidden.fp_probe"))
    assert introspect(pg_setup).fingerprint == first.fingerprint


@pytest.mark.parametrize("role", ROLES)
def test_policy_agrees_with_server(
    role: str, pg_role_url: Callable[..., sa.URL], full_snapshot: SchemaSnapshot
) -> None:
    """For every table × verb and every column × column verb: policy allows ⇔ server runs it.

    The checker's verdict on the probe statement must agree too: it is the same question asked
    of the post-parse path. Probes run in a transaction that is rolled back.
    """
    engine = sa.create_engine(pg_role_url(role))
    policy = read_policy(engine)
    checker = Checker(introspect(engine), policy)
    mismatches = []
    outcomes: list[bool] = []
    with engine.connect() as conn:
        for probe in probes_for(full_snapshot, engine.dialect, truncate=True):
            server_ok = run_probe(conn, probe, denied_codes={"42501"})
            outcomes.append(server_ok)
            policy_ok = _policy_allows(policy, probe)
            checker_ok = not checker.check(probe.sql)
            if not (server_ok == policy_ok == checker_ok):
                mismatches.append((probe.sql, server_ok, policy_ok, checker.check(probe.sql)))
    engine.dispose()
    # Non-vacuous: many probes, and both verdicts occur for every role.
    assert len(outcomes) > 80 and any(outcomes) and not all(outcomes)
    assert mismatches == []


def _policy_allows(policy: Policy, probe: Probe) -> bool:
    t = policy.table(probe.table, probe.schema)
    if t is None:
        return False
    if probe.column is None:
        return t.allows(probe.verb)
    return t.column_allows(probe.column, probe.verb)


def test_app_policy_narrows_pg(pg_role_url: Callable[..., sa.URL]) -> None:
    app = {
        "tables": {"deny": ["orders"]},
        "columns": {"deny": {"customer": ["email"]}},
        "roles": {"gs_reader": {"verbs": ["select"]}, "someone_else": {"verbs": []}},
    }
    policy = read_policy(pg_role_url("gs_reader"), app=app)
    assert not policy.allows("select", "orders")
    assert policy.column_allows("select", "customer", "name")
    assert not policy.column_allows("select", "customer", "email")
    assert policy.statement_verbs == {"select"}
    text = policy.explain()
    assert "[grant]" in text and "[app]" in text and "tables.deny" in text


def test_policy_file_naming_missing_table(
    pg_role_url: Callable[..., sa.URL], tmp_path: object
) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    f = tmp_path / "policy.yaml"
    f.write_text("tables:\n  deny: [no_such_table]\n")
    with pytest.raises(PolicyError, match="no_such_table.*does not exist"):
        read_policy(pg_role_url("gs_reader"), app=f)


def test_bad_inputs(pg_admin: Engine, pg_role_url: Callable[..., sa.URL]) -> None:
    with pytest.raises(ConnectionConfigError, match="unreachable|cannot connect"):
        introspect(pg_admin.url.set(port=1))
    with pytest.raises(ConnectionConfigError, match="invalid database URL"):
        introspect("not a url")
    with pytest.raises(ConnectionConfigError, match="cannot use database URL"):
        introspect("nosuchdriver://x@localhost/db")
    with pytest.raises(ConnectionConfigError, match="password authentication failed"):
        introspect(pg_admin.url.set(username="gs_reader", password="wrong"))
    # A hardened database where the role may not read pg_catalog.
    with pytest.raises(SchemaError, match="permission denied"):
        introspect(pg_role_url("gs_reader", "grid_sql_test_nocatalog"))


@pytest.mark.parametrize("role", ROLES)
def test_checker_agrees_with_server_on_statements(
    role: str, pg_role_url: Callable[..., sa.URL]
) -> None:
    """Joins, subqueries, CTEs, stars and DML: server accepts ⇔ checker reports nothing."""
    engine = sa.create_engine(pg_role_url(role))
    checker = Checker(introspect(engine), read_policy(engine))
    with engine.connect() as conn:
        mismatches, outcomes = statement_mismatches(conn, checker, PG_STATEMENTS, {"42501"})
    engine.dispose()
    assert any(outcomes) and not all(outcomes)
    assert mismatches == []
