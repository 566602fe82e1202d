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
