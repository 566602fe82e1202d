"""Autofixed generations in the audit trail: the seal carries the generated SQL and the edits,
``verify`` re-derives the fix from the archived schema and policy, and a tampered final SQL or
edit list is detected (real Chinook role grammar, real Qwen2 vocabulary, no model)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from grid_sql.audit import AuditLog, AuditRecord, AuditStore, Verifier, audit_main, refs_for
from grid_sql.audit.log import GENESIS, chain_link, seal_hash
from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.policy import AppPolicy, Checker, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.autofix import autofix
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

from .helpers import CHINOOK, qwen2, record_generation

WRONG = "SELECT T1.Title, T1.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId"
FIXED = WRONG.replace("T1.Name", "T2.Name")


@pytest.fixture(scope="module")
def role():
    snap = introspect(open_sqlite(CHINOOK))
    app = AppPolicy.from_mapping({"verbs": ["select"], "tables": {"deny": ["Employee"]}})
    policy = narrow(sqlite_baseline(snap), app, snap)
    grammar = role_grammar(Grammar.dialect("sqlite"), snap, policy)
    return snap, policy, Guide(grammar, qwen2())


def _seal(
    role, store: AuditStore, *, archive: bool = True, wrong: str = WRONG, fixed: str = FIXED
) -> AuditRecord:
    snap, policy, guide = role
    steps, stop = record_generation(guide, wrong.encode())
    fix = autofix(wrong, Checker(snap, policy), guide.grammar)
    assert fix.complete and fix.fixed == fixed
    log = AuditLog()
    log.extend(steps)
    rec = log.seal(
        stop_reason=stop,
        artifacts=refs_for(
            guide.grammar, guide.vocab, policy=policy.fingerprint, schema=snap.fingerprint
        ),
        final_sql=fix.fixed,
        question="Which artist made each album?",
        dialect="sqlite",
        autofix={"generated_sql": wrong, "edits": [e.as_list() for e in fix.edits]},
    )
    extra = {"schema": snap, "policy": policy} if archive else {}
    store.append(rec, grammar=guide.grammar, vocab=guide.vocab, **extra)
    return rec


def _forged(rec: AuditRecord, **seal_changes: object) -> AuditRecord:
    """A consistent forgery: chain and seal recomputed (a new audit_id)."""
    links, prev = [], GENESIS
    for s in rec.steps:
        prev = chain_link(prev, s)
        links.append(prev.hex())
    seal = {**rec.seal, **seal_changes}
    return AuditRecord(seal_hash(seal), seal, rec.steps, tuple(links))


def test_autofixed_record_verifies_and_rederives(role, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    rec = _seal(role, store)
    assert rec.final_sql == FIXED and rec.seal["autofix"]["generated_sql"] == WRONG
    assert rec.seal["autofix"]["edits"] == [[17, 24, "T1.Name", "T2.Name", "requalify"]]
    rep = Verifier(store).verify(rec.audit_id)
    assert rep.ok and not rep.warnings, rep.describe()
    # the stored record round-trips the seal exactly
    assert store.get(rec.audit_id).seal == rec.seal
    # and `grid-sql audit verify ID --db FILE` says so (exit 0)
    out = io.StringIO()
    assert (
        audit_main(["verify", rec.audit_id, "--db", str(tmp_path / "audit.sqlite")], out=out) == 0
    )
    assert "1/1 record(s) verified" in out.getvalue()


def test_tampered_final_sql_is_detected(role, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    rec = _seal(role, store)
    v = Verifier(store)
    edited = dataclasses.replace(rec, seal={**rec.seal, "final_sql": "SELECT * FROM Customer"})
    assert v.verify_record(edited).first.field == "audit_id"
    forged = v.verify_record(_forged(rec, final_sql="SELECT T2.Name FROM Artist AS T2"))
    assert [d.field for d in forged.findings] == ["final_sql"]
    assert "not the generated SQL with the sealed autofix edits" in forged.describe()


def test_forged_edits_are_not_rederived(role, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    rec = _seal(role, store)
    # a requalification-shaped edit that autofix would never make (Artist has no Title)
    edits = [[7, 15, "T1.Title", "T2.Title", "requalify"], *rec.seal["autofix"]["edits"]]
    final = WRONG.replace("T1.Title", "T2.Title").replace("T1.Name", "T2.Name")
    fake = {"generated_sql": WRONG, "edits": edits}
    rep = Verifier(store).verify_record(_forged(rec, final_sql=final, autofix=fake))
    assert [d.field for d in rep.findings] == ["autofix"], rep.describe()
    # the tokens must spell the generated SQL, not something else
    other = {"generated_sql": FIXED, "edits": []}
    rep = Verifier(store).verify_record(_forged(rec, autofix=other))
    assert rep.findings and rep.first.field == "final_sql"


def test_without_archived_schema_the_edits_are_replayed_with_a_warning(
    role, tmp_path: Path
) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    rec = _seal(role, store, archive=False)
    rep = Verifier(store).verify(rec.audit_id)
    assert rep.ok and any("not re-derived" in w for w in rep.warnings), rep.describe()


GROUPED = (
    "SELECT T2.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId "
    "WHERE COUNT(*) > 3 GROUP BY T2.Name"
)
MOVED = GROUPED.replace(" WHERE COUNT(*) > 3", "") + " HAVING COUNT(*) > 3"


def test_where_to_having_move_verifies_and_a_different_move_does_not(role, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    rec = _seal(role, store, wrong=GROUPED, fixed=MOVED)
    assert {e[4] for e in rec.seal["autofix"]["edits"]} == {"to_having"}
    rep = Verifier(store).verify(rec.audit_id)
    assert rep.ok and not rep.warnings, rep.describe()
    # shape-valid (only words of the statement, moved from WHERE to HAVING) but not the
    # move autofix derives: caught by the re-derivation
    where, _ = rec.seal["autofix"]["edits"]
    n = len(GROUPED)
    edits = [where, [n, n, "", " HAVING 3 > COUNT(*)", "to_having"]]
    final = GROUPED.replace(" WHERE COUNT(*) > 3", "") + " HAVING 3 > COUNT(*)"
    fake = {"generated_sql": GROUPED, "edits": edits}
    rep = Verifier(store).verify_record(_forged(rec, final_sql=final, autofix=fake))
    assert [d.field for d in rep.findings] == ["autofix"], rep.describe()
    # a HAVING that adds a word the statement never had does not even replay
    edits = [where, [n, n, "", " HAVING COUNT(*) > 30", "to_having"]]
    final = GROUPED.replace(" WHERE COUNT(*) > 3", "") + " HAVING COUNT(*) > 30"
    fake = {"generated_sql": GROUPED, "edits": edits}
    rep = Verifier(store).verify_record(_forged(rec, final_sql=final, autofix=fake))
    assert [d.field for d in rep.findings] == ["final_sql"], rep.describe()
