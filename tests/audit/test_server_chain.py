"""The store chain on the real PostgreSQL and MariaDB servers: outcomes, the kept head, a
dropped guard (a failure, left as found by verify, chained as evidence by a writer), and
concurrent first opens of a fresh store from several connections at once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from grid_sql.audit import AuditStore, Verifier
from grid_sql.audit.log import seal_statement

pytestmark = pytest.mark.db

TABLES = ("seal", "step", "artifact", "chain")


@pytest.fixture(params=["postgresql", "mariadb"])
def server_url(
    request: pytest.FixtureRequest, server_engine: Callable[[str], sa.Engine]
) -> Iterator[tuple[str, str]]:
    """(URL of a scratch database on the real server, a fresh table prefix); dropped after."""
    db = "grid_sql_audit_test"
    if request.param == "postgresql":
        admin = server_engine("GRID_SQL_PG_URL")
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if not conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": db}
            ).first():
                conn.exec_driver_sql(f"CREATE DATABASE {db}")
    else:
        admin = server_engine("GRID_SQL_MYSQL_URL")
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    url = admin.url.set(database=db).render_as_string(hide_password=False)
    prefix = f"gsc_{uuid.uuid4().hex[:10]}"
    yield url, prefix
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for t in TABLES:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {prefix}_{t}")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {prefix}_append_only()")
    engine.dispose()


def _record(n: int) -> object:
    return seal_statement(f"SELECT {n}", policy="p" * 64, schema="s" * 64, user=f"u{n}")


def test_server_chain_outcome_head_and_guards(server_url: tuple[str, str]) -> None:
    url, prefix = server_url
    store = AuditStore(url, prefix=prefix)
    recs = [_record(i) for i in range(2)]
    for r in recs:
        store.append(r)  # type: ignore[arg-type]
        store.append_outcome(r.audit_id, ran=True, rowcount=1, duration_ns=5)  # type: ignore[attr-defined]
    head = store.head()
    assert head is not None and head.seq == 3
    ro = AuditStore(url, prefix=prefix, readonly=True)
    rep = Verifier(ro).verify_store(str(head))
    assert rep.ok and rep.entries == 4, rep.describe()
    # UPDATE / DELETE on the chain are refused by the server itself
    with pytest.raises(sa.exc.DBAPIError, match="append-only"):
        with store.engine.begin() as conn:
            conn.exec_driver_sql(f"DELETE FROM {prefix}_chain")
    # a dropped guard: a failure, and verify leaves it missing
    name = f"{prefix}_chain_no_delete"
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql(f'DROP TRIGGER "{name}" ON "{prefix}_chain"')
        else:
            conn.exec_driver_sql(f"DROP TRIGGER `{name}`")
    found = [str(f) for f in Verifier(ro).verify_store(str(head)).findings]
    assert len(found) == 1 and "not append-only" in found[0] and name in found[0], found
    assert ro.missing_guards() == [name]
    # a writer re-installs it and chains the evidence
    again = AuditStore(url, prefix=prefix)
    assert again.guards_restored == [name] and again.missing_guards() == []
    found = [str(f) for f in Verifier(ro).verify_store(str(head)).findings]
    assert len(found) == 1 and found[0].startswith("chain entry 4: the store was not append-only")
    for s in (store, ro, again):
        s.close()


def test_server_concurrent_first_opens(server_url: tuple[str, str]) -> None:
    url, prefix = server_url
    n = 6
    barrier = threading.Barrier(n)
    errors: list[str] = []
    ids: list[str] = []
    restored: list[list[str]] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            store = AuditStore(url, prefix=prefix)  # its own engine: its own connections
            rec = _record(i)
            store.append(rec)  # type: ignore[arg-type]
            store.append_outcome(rec.audit_id, ran=False, error="StatementTimeout")  # type: ignore[attr-defined]
            ids.append(rec.audit_id)  # type: ignore[attr-defined]
            restored.append(store.guards_restored)
            store.close()
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(ids) == n and restored == [[]] * n
    ro = AuditStore(url, prefix=prefix, readonly=True)
    rep = Verifier(ro).verify_store()
    assert rep.ok and rep.entries == 2 * n, rep.describe()
    assert sorted(ro.ids()) == sorted(ids) and ro.missing_guards() == []
    ro.close()
