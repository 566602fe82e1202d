"""``run_sql`` statements are sealed and verify; every execution's outcome is chained to its
record (ran or not, rows, error class, duration) — on a real Chinook copy, no model needed."""

from __future__ import annotations

import io
import shutil
import sqlite3
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.audit import AuditStore, Verifier, audit_main
from grid_sql.errors import ExecutionError, PolicyViolation

from .chainhelp import P, tamper
from .helpers import CHINOOK, CHINOOK_SQL, chinook_guide, chinook_role, seal_generation

DENY = {"verbs": ["select"], "tables": {"deny": ["Employee"]}}


@pytest.fixture()
def asker(tmp_path: Path) -> Asker:
    if not CHINOOK.is_file():
        pytest.skip("shared Chinook database not found")
    db = tmp_path / "chinook.sqlite"
    shutil.copy(CHINOOK, db)
    return Asker(db, policy=DENY, audit=tmp_path / "audit.sqlite", user="alice")


def _verify(store: AuditStore, audit_id: str) -> tuple[bool, str, list[tuple[bool, str | None]]]:
    rep = Verifier(store).verify(audit_id)
    return rep.ok, rep.describe(), [(o.ran, o.error) for o in rep.outcomes]


def test_run_sql_is_sealed_with_its_outcome_and_verifies(asker: Asker) -> None:
    res = asker.run_sql("SELECT Name FROM Artist ORDER BY ArtistId LIMIT 3")
    assert res.audit_id is not None and len(res.rows) == 3
    store = asker.audit
    assert store is not None
    rec = store.get(res.audit_id)
    assert rec.kind == "statement" and rec.steps == ()
    assert rec.seal["final_sql"] == res.sql and rec.seal["user"] == "alice"
    assert rec.seal["checker"] == {"passed": True, "violations": []}
    ok, text, outcomes = _verify(store, res.audit_id)
    assert ok, text
    assert "hand-written statement" in text and outcomes == [(True, None)]
    rep = Verifier(store).verify(res.audit_id)
    assert rep.outcomes[0].rowcount == 3 and rep.outcomes[0].duration_ns > 0
    assert Verifier(store).verify_store().ok


def test_refused_and_failing_statements_are_on_record(asker: Asker) -> None:
    with pytest.raises(PolicyViolation) as refused:
        asker.run_sql("SELECT FirstName, LastName FROM Employee")
    (rid,) = refused.value.audit_ids
    store = asker.audit
    assert store is not None
    rec = store.get(rid)
    assert rec.seal["checker"]["passed"] is False and rec.seal["checker"]["violations"]
    ok, text, outcomes = _verify(store, rid)
    assert ok, text
    assert outcomes == [(False, "PolicyViolation")]
    # the checker passes it, the database refuses it: sealed, then "did not run"
    with pytest.raises(ExecutionError):
        asker.run_sql("SELECT count(DISTINCT substr(Name)) FROM Artist")
    last = store.ids()[-1]
    ok, text, outcomes = _verify(store, last)
    assert ok, text
    assert len(outcomes) == 1 and outcomes[0][0] is False
    assert outcomes[0][1] is not None and "Error" in outcomes[0][1]
    code_out = io.StringIO()
    db = str(store.engine.url.database)
    assert audit_main(["verify", "--all", "--db", db], out=code_out) == 0, code_out.getvalue()
    assert "did not run (PolicyViolation)" in code_out.getvalue()
    out = io.StringIO()
    assert audit_main(["show", rid, "--db", db], out=out) == 0
    assert "hand-written statement" in out.getvalue() and "Employee" in out.getvalue()


def test_edited_statement_record_is_detected(asker: Asker) -> None:
    res = asker.run_sql("SELECT Name FROM Genre ORDER BY GenreId LIMIT 2")
    assert res.audit_id is not None
    store = asker.audit
    assert store is not None
    db = Path(str(store.engine.url.database))
    store.close()
    tamper(
        db,
        lambda conn: conn.execute(
            f"UPDATE {P}_seal SET seal = replace(seal, 'FROM Genre', 'FROM Employee')"
        ),
    )
    ro = AuditStore(db, readonly=True)
    rep = Verifier(ro).verify(res.audit_id)
    assert rep.tampered and rep.findings[0].field == "audit_id", rep.describe()
    ro.close()


def test_the_asker_chains_a_generation_s_execution_outcome(asker: Asker) -> None:
    """What ``ask`` does after generating: execute under the record's id (a greedy spelling
    stands in for the model's generation)."""
    store = asker.audit
    assert store is not None
    guide = chinook_guide()
    rec = seal_generation(guide, chinook_role(), CHINOOK_SQL[2])
    store.append(rec, grammar=chinook_role()[0], vocab=guide.vocab)
    res = asker._execute(rec.final_sql, False, 10, 5.0, audit_id=rec.audit_id)
    with pytest.raises(ExecutionError):
        asker._execute("SELECT nosuchcolumn FROM Track", False, 10, 5.0, audit_id=rec.audit_id)
    rep = Verifier(store).verify(rec.audit_id)
    assert rep.ok, rep.describe()
    assert [(o.ran, o.rowcount) for o in rep.outcomes][0] == (True, res.rowcount)
    assert rep.outcomes[1].ran is False and rep.outcomes[1].error is not None
    # the outcome is in the chain, after the record, and edits to it are caught
    db = Path(str(store.engine.url.database))
    store.close()
    tamper(
        db,
        lambda conn: conn.execute(
            f"UPDATE {P}_chain SET body = replace(body, '\"ran\":false', '\"ran\":true')"
        ),
    )
    ro = AuditStore(db, readonly=True)
    found = [str(f) for f in Verifier(ro).verify_store().findings]
    ro.close()
    assert len(found) == 1 and "the body hashes to" in found[0], found


def test_auditing_off_seals_nothing(tmp_path: Path) -> None:
    if not CHINOOK.is_file():
        pytest.skip("shared Chinook database not found")
    db = tmp_path / "chinook.sqlite"
    shutil.copy(CHINOOK, db)
    a = Asker(db, policy=DENY, audit=False)
    assert a.run_sql("SELECT 1 FROM Artist LIMIT 1").audit_id is None
    conn = sqlite3.connect(db)
    assert not [
        r for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'grid_sql_audit%'")
    ]
    conn.close()


def test_a_session_s_execution_chains_its_outcome(
    asker: Asker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``GridSession.ask`` runs the generated statement on the caller's connection
    (``front.sqlalchemy.ask_on``): its outcome is chained too (a greedy spelling stands in
    for the model's generation)."""
    import sqlalchemy as sa

    from grid_sql.ask.result import GeneratedSQL
    from grid_sql.front.sqlalchemy import ask_on

    store = asker.audit
    assert store is not None
    guide = chinook_guide()
    rec = seal_generation(guide, chinook_role(), CHINOOK_SQL[1])
    store.append(rec, grammar=chinook_role()[0], vocab=guide.vocab)

    def generated(question: str, **_: object) -> GeneratedSQL:
        return GeneratedSQL(
            question=question, sql=rec.final_sql, stop_reason="eos", audit_id=rec.audit_id
        )

    monkeypatch.setattr(asker, "generate_sql", generated)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'chinook.sqlite'}")
    with engine.connect() as conn:
        res = ask_on(asker, conn, "the first ten artists")
    engine.dispose()
    rep = Verifier(store).verify(rec.audit_id)
    assert rep.ok, rep.describe()
    assert [(o.ran, o.rowcount) for o in rep.outcomes] == [(True, res.rowcount)]
    assert res.rowcount == 10
