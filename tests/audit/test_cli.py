"""``grid-sql audit verify|show|list`` through audit_main, on a real store."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import sqlalchemy as sa

from grid_sql.audit import AuditRecord, AuditStore, audit_main

Audited = tuple[AuditStore, list[AuditRecord]]


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = audit_main(list(argv), out=out)
    return code, out.getvalue()


def _db(store: AuditStore) -> str:
    return str(store.engine.url.database)


def test_list_show_and_explain(audited: Audited) -> None:
    store, recs = audited
    code, text = _run("list", "--db", _db(store))
    assert code == 0
    assert [line[:16] for line in text.splitlines()] == [r.audit_id[:16] for r in recs]
    assert "SELECT Name FROM Artist" in text
    code, text = _run("show", recs[0].audit_id[:12], "--db", _db(store))
    assert code == 0
    assert f"audit id    {recs[0].audit_id}" in text
    assert "stop        eos (mode loop" in text and "b' Artist'" in text
    assert len([ln for ln in text.splitlines() if ln.strip().startswith(("0 ", "1 "))]) >= 2
    rid = recs[0].audit_id
    code, text = _run("show", rid, "--step", "0", "--why", "DELETE", "--db", _db(store))
    assert code == 0 and "`DELETE` is not in the role's verbs" in text
    code, _ = _run("show", recs[0].audit_id, "--why", "x", "--db", _db(store))
    assert code == 2
    code, _ = _run("show", "ffffffffff", "--db", _db(store))
    assert code == 2


def test_verify_exit_codes(audited: Audited, tmp_path: Path) -> None:
    store, recs = audited
    code, text = _run("verify", "--all", "--db", _db(store))
    assert code == 0, text
    assert "2/2 record(s) verified" in text and text.count("replay bit-identically") == 2
    assert _run("verify", "--db", _db(store))[0] == 2  # neither ids nor --all
    copy = tmp_path / "tampered.sqlite"
    shutil.copy(_db(store), copy)
    engine = sa.create_engine(f"sqlite:///{copy}")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER grid_sql_audit_seal_no_update")
        conn.exec_driver_sql(
            "UPDATE grid_sql_audit_seal SET seal = replace(seal, 'analyst', 'mallory')"
        )
    engine.dispose()
    code, text = _run("verify", recs[0].audit_id[:10], "--db", str(copy))
    assert code == 1
    assert "TAMPERED" in text and "the seal was edited" in text
    assert "not append-only" in text


def test_show_and_verify_a_record_of_checked_steps(tmp_path: Path) -> None:
    """Steps decided without a mask (the decode loop's check-first) show no counts, and the
    record verifies through the CLI."""
    import dataclasses

    from grid_sql.audit import AuditLog
    from grid_sql.audit.artifacts import refs_for
    from grid_sql.decode.records import StepKind

    from .helpers import CHINOOK_SQL, chinook_guide, chinook_role, record_generation

    guide = chinook_guide()
    grammar, policy_fp, schema_fp = chinook_role()
    steps, stop = record_generation(guide, CHINOOK_SQL[1])
    checked = [
        dataclasses.replace(
            s, entry_ids=(), mask_digest="", allowed=0, blocked=0, kind=StepKind.CHECKED
        )
        if s.kind == StepKind.SAMPLED
        else s
        for s in steps
    ]
    log = AuditLog()
    log.extend(checked)
    rec = log.seal(
        stop_reason=stop,
        artifacts=refs_for(grammar, guide.vocab, policy=policy_fp, schema=schema_fp),
        final_sql=CHINOOK_SQL[1].decode(),
        question="checked",
        user="analyst",
        dialect="sqlite",
    )
    store = AuditStore(tmp_path / "audit.sqlite")
    store.append(rec, grammar=grammar, vocab=guide.vocab)
    code, text = _run("show", rec.audit_id, "--db", _db(store))
    assert code == 0
    rows = [ln.split() for ln in text.splitlines() if ln.strip()[:1].isdigit()]
    assert any(r[1] == "checked" and r[2:4] == ["-", "-"] for r in rows), text
    code, text = _run("verify", rec.audit_id, "--db", _db(store))
    assert code == 0 and "replay bit-identically" in text, text
