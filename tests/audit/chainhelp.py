"""Helpers of the store-chain tests: a chained store of real records, and an attacker who
edits the SQLite file past the triggers (dropping them, editing, putting them back, so that
only the chain can tell)."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from grid_sql.audit import AuditRecord, AuditStore, chain_link, seal_hash
from grid_sql.audit.chain import STORE_GENESIS, entry_link
from grid_sql.audit.log import GENESIS, canonical_json
from grid_sql.audit.schemes import entry_id_under
from grid_sql.decode.records import StepRecord

from .helpers import CHINOOK_SQL, chinook_guide, chinook_role, seal_generation

P = "grid_sql_audit"


def build_store(path: Path, n: int = 4) -> list[AuditRecord]:
    """A store with ``n`` Chinook generations, each followed by an outcome entry."""
    store = AuditStore(path)
    guide = chinook_guide()
    grammar = chinook_role()[0]
    recs = []
    for i, sql in enumerate(CHINOOK_SQL[1 : 1 + n]):
        rec = seal_generation(guide, chinook_role(), sql, user=f"user{i}")
        store.append(rec, grammar=grammar, vocab=guide.vocab)
        store.append_outcome(rec.audit_id, ran=True, rowcount=i, duration_ns=1000 + i)
        recs.append(rec)
    store.close()
    return recs


def copy_store(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    return dst


def tamper(path: Path, edit: Callable[[sqlite3.Connection], None]) -> None:
    """Edit the file as someone who may drop triggers would: drop every guard, edit, and
    re-create the guards exactly as they were (so the guard check sees nothing)."""
    conn = sqlite3.connect(path)
    try:
        triggers = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
        ).fetchall()
        assert triggers, "the store has no triggers to drop"
        for name, _ in triggers:
            conn.execute(f'DROP TRIGGER "{name}"')
        edit(conn)
        for _, sql in triggers:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def chain_rows(conn: sqlite3.Connection) -> list[tuple[int, str, str, str | None, str]]:
    return conn.execute(
        f"SELECT seq, link, kind, audit_id, body FROM {P}_chain ORDER BY seq"
    ).fetchall()


def rewrite_chain(
    conn: sqlite3.Connection, bodies: list[dict[str, object]], *, rechain: bool
) -> None:
    """Replace the chain table with ``bodies`` (in order). ``rechain``: renumber and re-link
    every entry consistently (a careful forger); else keep each body as it was."""
    import json

    conn.execute(f"DELETE FROM {P}_chain")
    prev = STORE_GENESIS
    for seq, body in enumerate(bodies):
        b = dict(body)
        if rechain:
            b["seq"], b["prev"] = seq, prev
        link = entry_link(b)
        prev = link
        conn.execute(
            f"INSERT INTO {P}_chain (seq, link, kind, audit_id, body) VALUES (?, ?, ?, ?, ?)",
            (
                seq if rechain else int(b["seq"]),  # type: ignore[call-overload]
                link,
                b["kind"],
                b.get("audit_id"),
                canonical_json(b).decode()
                if rechain
                else json.dumps(b, sort_keys=True, separators=(",", ":")),
            ),
        )


def bodies(conn: sqlite3.Connection) -> list[dict[str, object]]:
    import json

    return [json.loads(r[4]) for r in chain_rows(conn)]


def delete_record_rows(conn: sqlite3.Connection, audit_id: str) -> None:
    conn.execute(f"DELETE FROM {P}_seal WHERE audit_id = ?", (audit_id,))
    conn.execute(f"DELETE FROM {P}_step WHERE audit_id = ?", (audit_id,))


def insert_record_rows(conn: sqlite3.Connection, rec: AuditRecord) -> None:
    import json

    for s, link in zip(rec.steps, rec.links, strict=True):
        conn.execute(
            f"INSERT INTO {P}_step VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rec.audit_id,
                s.step,
                f"{s.config_hash:016x}",
                " ".join(s.entry_ids),
                s.mask_digest,
                s.token,
                s.allowed,
                s.blocked,
                str(s.kind),
                link,
            ),
        )
    conn.execute(
        f"INSERT INTO {P}_seal VALUES (?, ?, ?, ?, ?)",
        (
            rec.audit_id,
            1,
            int(rec.seal["sealed_at_ns"]),
            str(rec.seal.get("user", "")),
            json.dumps(rec.seal, sort_keys=True, separators=(",", ":")),
        ),
    )


def reseal(
    rec: AuditRecord, steps: list[StepRecord], *, drop: tuple[str, ...] = (), **changes: object
) -> AuditRecord:
    """A record with ``steps`` re-chained and the seal recomputed (keys in ``drop`` removed)."""
    links, prev = [], GENESIS
    for s in steps:
        prev = chain_link(prev, s)
        links.append(prev.hex())
    seal = {k: v for k, v in rec.seal.items() if k not in drop}
    seal.update({"chain_head": prev.hex(), "n_steps": len(steps), **changes})
    return AuditRecord(seal_hash(seal), seal, tuple(steps), tuple(links))


def under_scheme(rec: AuditRecord, scheme: int) -> list[StepRecord]:
    """``rec``'s steps with every entry id re-hashed under entry-id ``scheme`` (what an
    engine of that scheme recorded for the same generation)."""
    guide = chinook_guide()
    m = guide.matcher()
    out = []
    for s in rec.steps:
        entries, _ = guide.collect(m.config)
        table = {e.entry_id: entry_id_under(scheme, e) for e in entries}
        out.append(dataclasses.replace(s, entry_ids=tuple(table[x] for x in s.entry_ids)))
        m.accept_token(s.token)
    return out


def open_and_append(path: str, barrier: object, n: int, out: object) -> None:
    """A worker process of the concurrency test: wait for the others, open the (fresh)
    store, append a statement record and its outcome; report (id, guards restored, error)."""
    from grid_sql.audit.log import seal_statement

    try:
        barrier.wait(timeout=120)  # type: ignore[attr-defined]
        store = AuditStore(path)
        rec = seal_statement(f"SELECT {n}", policy="p" * 64, schema="s" * 64, user=f"proc{n}")
        store.append(rec)
        store.append_outcome(rec.audit_id, ran=True, rowcount=1, duration_ns=n)
        out.put((rec.audit_id, store.guards_restored, ""))  # type: ignore[attr-defined]
        store.close()
    except Exception as e:  # reported to the parent, which fails the test with it
        out.put(("", [], f"{type(e).__name__}: {e}"))  # type: ignore[attr-defined]
