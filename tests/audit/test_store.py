"""The append-only store: SQLite by default, a table in PostgreSQL / MariaDB as an option."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.audit import AuditRecord, AuditStore, Verifier, default_path
from grid_sql.errors import AuditError

Audited = tuple[AuditStore, list[AuditRecord]]
TABLES = ("seal", "step", "artifact", "chain")


def _expect_append_only(store: AuditStore, rec: AuditRecord) -> None:
    """UPDATE and DELETE on every table are rejected by the database itself."""
    p = store.prefix
    key = {"seal": "audit_id", "step": "audit_id", "artifact": "fingerprint", "chain": "audit_id"}
    val = {
        "seal": rec.audit_id,
        "step": rec.audit_id,
        "artifact": rec.artifacts.grammar,
        "chain": rec.audit_id,
    }
    for t in TABLES:
        for stmt in (
            f"UPDATE {p}_{t} SET {key[t]} = {key[t]} WHERE {key[t]} = :v",
            f"DELETE FROM {p}_{t} WHERE {key[t]} = :v",
        ):
            with pytest.raises(sa.exc.DBAPIError, match="append-only"):
                with store.engine.begin() as conn:
                    conn.execute(sa.text(stmt), {"v": val[t]})
    assert store.missing_guards() == []
    assert store.get(rec.audit_id).steps == rec.steps


def test_sqlite_store_is_append_only(audited: Audited) -> None:
    store, recs = audited
    _expect_append_only(store, recs[0])
    with pytest.raises(AuditError, match="already stored"):
        store.append(recs[0])
    assert store.ids() == [r.audit_id for r in recs]  # sealing order
    loaded = store.get(recs[1].audit_id[:12])
    assert loaded.seal == recs[1].seal and loaded.links == recs[1].links
    with pytest.raises(AuditError, match="no audit record"):
        store.get("0123456789")
    with pytest.raises(AuditError, match="too short"):
        store.get("ab")


def test_default_path_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GRID_SQL_AUDIT_DB", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_path() == tmp_path / "state" / "grid-sql" / "audit.sqlite"
    monkeypatch.setenv("GRID_SQL_AUDIT_DB", str(tmp_path / "x" / "a.sqlite"))
    store = AuditStore()
    assert Path(store.engine.url.database or "") == tmp_path / "x" / "a.sqlite"
    assert store.ids() == [] and store.missing_guards() == []


def test_unsupported_target_is_a_typed_error() -> None:
    with pytest.raises(AuditError):
        AuditStore("nosuchdialect://x")


@pytest.fixture(params=["postgresql", "mariadb"])
def server_store(
    request: pytest.FixtureRequest, server_engine: Callable[[str], sa.Engine]
) -> Iterator[AuditStore]:
    """A store in a scratch database on the real server, under a unique table prefix."""
    db = "grid_sql_audit_test"
    if request.param == "postgresql":
        admin = server_engine("GRID_SQL_PG_URL")
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            found = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": db}
            ).first()
            if not found:
                conn.exec_driver_sql(f"CREATE DATABASE {db}")
    else:
        admin = server_engine("GRID_SQL_MYSQL_URL")
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    url = admin.url.set(database=db)
    prefix = f"gsa_{uuid.uuid4().hex[:10]}"
    store = AuditStore(url.render_as_string(hide_password=False), prefix=prefix)
    try:
        yield store
    finally:
        with store.engine.begin() as conn:  # DROP is the operator's prerogative, not UPDATE
            for t in TABLES:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {prefix}_{t}")
            if store.dialect == "postgresql":
                conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {prefix}_append_only()")
        store.close()


@pytest.mark.db
def test_server_store_round_trip_and_append_only(
    audited: Audited, verifier: Verifier, server_store: AuditStore
) -> None:
    src, recs = audited
    rec = recs[0]
    refs = rec.artifacts
    for fp in (refs.grammar, refs.tokenizer, refs.l1_grammar):
        assert fp is not None
        server_store.archive(src.artifact(fp))
    server_store.append(rec)
    assert server_store.get(rec.audit_id[:10]).steps == rec.steps
    assert server_store.artifact(refs.tokenizer).payload == src.artifact(refs.tokenizer).payload
    _expect_append_only(server_store, rec)
    if server_store.dialect == "postgresql":
        for t in TABLES:
            with pytest.raises(sa.exc.DBAPIError, match="append-only"):
                with server_store.engine.begin() as conn:
                    conn.exec_driver_sql(f"TRUNCATE {server_store.prefix}_{t}")
    # replay straight from the server's archive (shared mask cache, independent of the producer)
    rep = Verifier(server_store, cache=verifier.cache).verify(rec.audit_id)
    assert rep.ok, rep.describe()
    # a second store object on the same tables finds its guards installed (idempotent)
    again = AuditStore(server_store.engine, prefix=server_store.prefix)
    assert again.missing_guards() == [] and again.ids() == [rec.audit_id]


def test_racing_archivers_keep_the_first_write(audited: Audited, tmp_path: Path) -> None:
    store, recs = audited
    art = store.artifact(recs[0].artifacts.grammar)
    a = AuditStore(tmp_path / "race.sqlite")
    b = AuditStore(tmp_path / "race.sqlite")  # a second process on the same file
    a.archive(art)
    real = b.has_artifact
    calls: list[str] = []

    def stale_first_check(fp: str) -> bool:  # b checked before a wrote: it lost the race
        calls.append(fp)
        return False if len(calls) == 1 else real(fp)

    b.has_artifact = stale_first_check  # type: ignore[method-assign]
    b.archive(art)  # the insert collides; the first write stands, no error
    assert len(calls) == 2
    assert a.artifact(art.fingerprint).payload == art.payload
