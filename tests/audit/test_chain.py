"""The store chain: the tamper suite (delete, insert, reorder, truncate, guard removal), each
done to a real SQLite store past its triggers, each with the verdict it must give."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from grid_sql.audit import AuditRecord, AuditStore, Verifier, audit_main
from grid_sql.audit.chain import ChainHead
from grid_sql.errors import AuditError

from .chainhelp import (
    P,
    bodies,
    build_store,
    copy_store,
    delete_record_rows,
    insert_record_rows,
    reseal,
    rewrite_chain,
    tamper,
)
from .helpers import CHINOOK, QWEN2

Chained = tuple[Path, list[AuditRecord], str]


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> Chained:
    """A store of 4 records, each followed by its outcome (8 entries), and its head."""
    if not (CHINOOK.is_file() and QWEN2.is_file()):
        pytest.skip("shared Chinook database / Qwen2 vocabulary not found")
    path = tmp_path_factory.mktemp("chain") / "audit.sqlite"
    recs = build_store(path)
    store = AuditStore(path, readonly=True)
    head = store.head()
    store.close()
    assert head is not None and head.seq == 7
    return path, recs, str(head)


def _store_verdict(path: Path, head: str | None = None) -> list[str]:
    store = AuditStore(path, readonly=True)
    try:
        rep = Verifier(store).verify_store(head)
        return [str(f) for f in rep.findings]
    finally:
        store.close()


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return audit_main(list(argv), out=out), out.getvalue()


def test_untouched_store_verifies_with_its_head(chained: Chained) -> None:
    path, recs, head = chained
    assert _store_verdict(path, head) == []
    store = AuditStore(path, readonly=True)
    v = Verifier(store)
    rep = v.verify(recs[2].audit_id)
    assert rep.ok, rep.describe()
    assert rep.chain_entry == 4  # record entries at 0, 2, 4, 6; outcomes after each
    assert [(o.ran, o.rowcount, o.duration_ns) for o in rep.outcomes] == [(True, 2, 1002)]
    assert "outcome: ran (2 row(s))" in rep.describe()
    assert ChainHead.parse(head) == store.head()
    store.close()
    code, text = _cli("head", "--db", str(path))
    assert code == 0 and text.strip() == head
    code, text = _cli("verify", "--all", "--head", head, "--db", str(path))
    assert code == 0, text
    assert "4/4 record(s) verified" in text and "store chain: OK — 8 entries" in text


def test_verify_opens_read_only_and_never_writes(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "ro.sqlite")
    before = path.read_bytes()
    assert _cli("verify", "--all", "--db", str(path))[0] == 0
    assert path.read_bytes() == before
    with pytest.raises(AuditError, match="read-only"):
        AuditStore(path, readonly=True).append_outcome(chained[1][0].audit_id, ran=True)
    assert _cli("verify", "--all", "--db", str(tmp_path / "nothing.sqlite"))[0] == 2
    assert not (tmp_path / "nothing.sqlite").exists()


def test_deleted_record_with_its_entry_is_detected(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "del.sqlite")
    victim = chained[1][1].audit_id

    def edit(conn: sqlite3.Connection) -> None:
        delete_record_rows(conn, victim)
        conn.execute(f"DELETE FROM {P}_chain WHERE audit_id = ?", (victim,))

    tamper(path, edit)
    found = _store_verdict(path)
    assert found and found[0].startswith("chain entry 2:"), found
    assert "deleted, inserted or reordered" in found[0]
    # a careful forger re-links the rest: consistent, but the kept head is gone
    path2 = copy_store(chained[0], tmp_path / "del2.sqlite")

    def edit2(conn: sqlite3.Connection) -> None:
        delete_record_rows(conn, victim)
        rewrite_chain(conn, [b for b in bodies(conn) if b.get("audit_id") != victim], rechain=True)

    tamper(path2, edit2)
    assert _store_verdict(path2) == []  # no self-contained log can see this ...
    found = _store_verdict(path2, chained[2])
    assert len(found) == 1 and "truncated" in found[0], found  # ... the kept head does
    code, text = _cli("verify", "--all", "--head", chained[2], "--db", str(path2))
    assert code == 1 and "store chain: FAILED" in text


def test_deleted_record_rows_are_detected(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "rows.sqlite")
    victim = chained[1][2].audit_id
    tamper(path, lambda conn: delete_record_rows(conn, victim))
    found = _store_verdict(path)
    assert found == [
        f"chain entry 4: record {victim[:16]} was chained here but is not in the store: deleted"
    ]


def test_inserted_record_is_detected(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "ins.sqlite")
    src = chained[1][0]
    forged = reseal(src, list(src.steps), user="mallory")  # a genuine-looking record
    tamper(path, lambda conn: insert_record_rows(conn, forged))
    found = _store_verdict(path)
    assert len(found) == 1 and f"record {forged.audit_id[:16]}" in found[0]
    assert "in no chain entry: inserted beside the chain" in found[0]
    store = AuditStore(path, readonly=True)
    rep = Verifier(store).verify(forged.audit_id)  # its masks replay: only the chain tells
    assert rep.tampered and [d.field for d in rep.findings] == ["store chain"], rep.describe()
    store.close()
    # inserted into the chain too, in the middle, with a correct prev: the next entry breaks
    path2 = copy_store(chained[0], tmp_path / "ins2.sqlite")

    def edit(conn: sqlite3.Connection) -> None:
        insert_record_rows(conn, forged)
        bs = bodies(conn)
        bs.insert(3, {"kind": "record", "audit_id": forged.audit_id, "seq": 3, "prev": ""})
        rewrite_chain(conn, bs[:4], rechain=True)  # 0..3 consistent (the new one at 3)
        for b in bs[4:]:  # the rest as they were, renumbered by one
            b = {**b, "seq": int(b["seq"]) + 1}  # type: ignore[call-overload]
            conn.execute(
                f"INSERT INTO {P}_chain VALUES (?, ?, ?, ?, ?)",
                (b["seq"], f"{b['seq']:064x}", b["kind"], b.get("audit_id"), _json(b)),
            )

    tamper(path2, edit)
    found = _store_verdict(path2)
    assert found and found[0].startswith("chain entry 4:"), found


def _json(b: dict[str, object]) -> str:
    import json

    return json.dumps(b, sort_keys=True, separators=(",", ":"))


def test_reordered_records_are_detected(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "swap.sqlite")

    def edit(conn: sqlite3.Connection) -> None:  # swap records 1 and 2 (entries 2 and 4)
        conn.execute(f"UPDATE {P}_chain SET seq = -1 WHERE seq = 2")
        conn.execute(f"UPDATE {P}_chain SET seq = 2 WHERE seq = 4")
        conn.execute(f"UPDATE {P}_chain SET seq = 4 WHERE seq = -1")

    tamper(path, edit)
    found = _store_verdict(path)
    assert found and found[0].startswith("chain entry 2:") and "reordered" in found[0], found
    # re-linked after the swap: consistent, but the chain no longer reaches the kept head
    path2 = copy_store(chained[0], tmp_path / "swap2.sqlite")

    def edit2(conn: sqlite3.Connection) -> None:
        bs = bodies(conn)
        bs[2:4], bs[4:6] = bs[4:6], bs[2:4]  # each record with its outcome
        rewrite_chain(conn, bs, rechain=True)

    tamper(path2, edit2)
    assert _store_verdict(path2) == []  # consistent in itself ...
    found = _store_verdict(path2, chained[2])
    assert len(found) == 1 and "the chain was rewritten" in found[0], found  # ... not to the head
    # swapping a record and leaving its outcome behind: an outcome before its record
    path3 = copy_store(chained[0], tmp_path / "swap3.sqlite")

    def edit3(conn: sqlite3.Connection) -> None:
        bs = bodies(conn)
        bs[2], bs[4] = bs[4], bs[2]
        rewrite_chain(conn, bs, rechain=True)

    tamper(path3, edit3)
    found = _store_verdict(path3)
    assert len(found) == 1 and "an outcome of record" in found[0], found


def test_truncation_needs_and_uses_the_kept_head(chained: Chained, tmp_path: Path) -> None:
    path = copy_store(chained[0], tmp_path / "trunc.sqlite")
    last = chained[1][-1].audit_id

    def edit(conn: sqlite3.Connection) -> None:
        delete_record_rows(conn, last)
        conn.execute(f"DELETE FROM {P}_chain WHERE seq >= 6")

    tamper(path, edit)
    assert _store_verdict(path) == []  # the shorter chain is consistent in itself
    found = _store_verdict(path, chained[2])
    assert found == [
        "store: the kept head is entry 7 but the chain has 6 entries: it was truncated"
    ]
    code, text = _cli("verify", "--all", "--head", chained[2], "--db", str(path))
    assert code == 1 and "truncated" in text
    # an outcome entry edited in place (it "ran" with other rows) breaks its link
    path2 = copy_store(chained[0], tmp_path / "outcome.sqlite")
    tamper(
        path2,
        lambda conn: conn.execute(
            f"UPDATE {P}_chain SET body = replace(body, '\"rowcount\":3', '\"rowcount\":0') "
            "WHERE seq = 7"
        ),
    )
    found = _store_verdict(path2)
    assert len(found) == 1 and found[0].startswith("chain entry 7: the body hashes to"), found


def test_guard_removal_is_a_failure_and_its_evidence_stays(
    chained: Chained, tmp_path: Path
) -> None:
    path = copy_store(chained[0], tmp_path / "guards.sqlite")
    conn = sqlite3.connect(path)
    conn.execute(f'DROP TRIGGER "{P}_chain_no_delete"')
    conn.commit()
    conn.close()
    found = _store_verdict(path)
    assert len(found) == 1 and "not append-only" in found[0] and f"{P}_chain_no_delete" in found[0]
    code, text = _cli("verify", "--all", "--db", str(path))
    assert code == 1 and "store chain: FAILED" in text and "4/4 record(s) verified" in text
    # verifying re-installed nothing
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    conn.close()
    assert f"{P}_chain_no_delete" not in names
    # a writer opening the store repairs the guard and chains the evidence: still a failure
    writer = AuditStore(path)
    assert writer.guards_restored == [f"{P}_chain_no_delete"]
    assert writer.missing_guards() == []
    writer.close()
    found = _store_verdict(path)
    assert len(found) == 1 and found[0].startswith("chain entry 8: the store was not append-only")
    # and the evidence cannot be removed without breaking the chain
    tamper(path, lambda conn: conn.execute(f"DELETE FROM {P}_chain WHERE seq = 8"))
    assert _store_verdict(path) == []  # (an end entry: only the kept head tells)
    store = AuditStore(path, readonly=True)
    assert Verifier(store).verify_store(ChainHead(8, "0" * 64)).findings
    store.close()


def test_records_of_an_unchained_store_are_adopted(chained: Chained, tmp_path: Path) -> None:
    """A store written before store chaining: the first writer that opens it commits to its
    records as a set ("adopt"), so deleting one later is detected; records that name an
    entry-id scheme were written with chaining, so adopting them means the chain was
    dropped and restarted."""
    legacy = [reseal(r, list(r.steps), drop=("engine", "entry_scheme")) for r in chained[1][:2]]
    path = tmp_path / "legacy.sqlite"
    store = AuditStore(path)
    for r in legacy:
        store.append(r)
    store.close()

    def drop_chain(conn: sqlite3.Connection) -> None:
        conn.execute(f"DROP TABLE {P}_chain")

    conn = sqlite3.connect(path)
    for (name,) in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = '{P}_chain'"
    ).fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    drop_chain(conn)
    conn.commit()
    conn.close()
    ro = AuditStore(path, readonly=True)
    assert not ro.has_chain
    rep = Verifier(ro).verify_store()
    assert rep.ok and any("no chain" in w for w in rep.warnings)
    ro.close()
    AuditStore(path).close()  # a writer opens it: adopts the two records
    assert _store_verdict(path) == []
    ro = AuditStore(path, readonly=True)
    entries = ro.chain()
    assert [e.kind for e in entries] == ["adopt"]
    assert entries[0].body()["audit_ids"] == [r.audit_id for r in legacy]
    ro.close()
    tamper(path, lambda conn: delete_record_rows(conn, legacy[1].audit_id))
    found = _store_verdict(path)
    assert len(found) == 1 and "was adopted here but is not in the store: deleted" in found[0]
    # a chaining-era store whose chain was dropped: adopting its records is a finding
    path2 = copy_store(chained[0], tmp_path / "dropped.sqlite")
    conn = sqlite3.connect(path2)
    for (name,) in conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = '{P}_chain'"
    ).fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    drop_chain(conn)
    conn.commit()
    conn.close()
    AuditStore(path2).close()
    found = _store_verdict(path2)
    assert len(found) == 4 and all("the chain was dropped and restarted" in f for f in found)


def test_outcomes_need_a_stored_record(tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "o.sqlite")
    with pytest.raises(AuditError, match="no audit record"):
        store.append_outcome("ab" * 32, ran=True)
    with pytest.raises(AuditError, match="too short"):
        store.append_outcome("ab", ran=True)
    assert store.head() is None and store.chain() == []
    store.close()


@pytest.mark.parametrize("text", ["", "7", "x:" + "0" * 64, "3:" + "0" * 63, "3:" + "g" * 64])
def test_malformed_heads_are_typed_errors(text: str) -> None:
    with pytest.raises(AuditError, match="chain head"):
        ChainHead.parse(text)
