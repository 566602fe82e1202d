"""Replay is bit-identical, every injected mutation is detected, explanations name the cause."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.audit import (
    AuditRecord,
    AuditStore,
    Explainer,
    Verifier,
    chain_link,
    seal_hash,
    verify,
)
from grid_sql.audit.log import GENESIS
from grid_sql.decode.records import StepKind, StepRecord
from grid_sql.mask.vocab import greedy_token_ids

from .helpers import qwen2

Audited = tuple[AuditStore, list[AuditRecord]]


def _in_place(rec: AuditRecord, steps: list[StepRecord]) -> AuditRecord:
    """An edit made directly in the store: stored links and seal stay as they were."""
    return dataclasses.replace(rec, steps=tuple(steps))


def _forged(rec: AuditRecord, steps: list[StepRecord], **seal_changes: object) -> AuditRecord:
    """A consistent forgery: links, head and seal recomputed, so a new audit_id."""
    links, prev = [], GENESIS
    for s in steps:
        prev = chain_link(prev, s)
        links.append(prev.hex())
    seal = {**rec.seal, "chain_head": prev.hex(), "n_steps": len(steps), **seal_changes}
    return AuditRecord(seal_hash(seal), seal, tuple(steps), tuple(links))


def _sampled_step(rec: AuditRecord) -> int:
    return next(
        s.step for s in rec.steps if s.kind == StepKind.SAMPLED and s.allowed > 1 and s.step > 2
    )


def test_replay_is_bit_identical(audited: Audited, verifier: Verifier) -> None:
    store, recs = audited
    for rec in recs:
        rep = verifier.verify(rec.audit_id)
        assert rep.ok, rep.describe()
        assert rep.replayed == rep.steps == len(rec.steps) > 0
        assert "replay bit-identically" in rep.describe()
        assert not rep.warnings
    assert verifier.verify(recs[0].audit_id[:10]).ok  # a unique prefix names the record


FIELD_EDITS = {
    "config_hash": lambda s: dataclasses.replace(s, config_hash=s.config_hash ^ 1),
    "entry_ids": lambda s: dataclasses.replace(s, entry_ids=s.entry_ids[:1] + ("ab" * 16,)),
    "mask_digest": lambda s: dataclasses.replace(s, mask_digest="00" * 16),
    "allowed": lambda s: dataclasses.replace(s, allowed=s.allowed + 1),
    "blocked": lambda s: dataclasses.replace(s, blocked=s.blocked - 1),
    "kind": lambda s: dataclasses.replace(s, kind=StepKind.FORCED),
}


@pytest.mark.parametrize("field", sorted(FIELD_EDITS))
def test_every_field_edit_is_detected(audited: Audited, verifier: Verifier, field: str) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    k = _sampled_step(rec)
    steps = list(rec.steps)
    steps[k] = FIELD_EDITS[field](steps[k])
    in_place = verifier.verify_record(_in_place(rec, steps))
    assert not in_place.ok
    assert in_place.first is not None
    assert (in_place.first.step, in_place.first.field) == (k, "chain link"), in_place.describe()
    # A forger who re-chains and re-seals still loses: the replay recomputes the field.
    forged = verifier.verify_record(_forged(rec, steps))
    assert [(d.step, d.field) for d in forged.findings] == [(k, field)], forged.describe()
    assert f"step {k}: {field} recorded" in forged.describe()


def test_token_edits_are_detected(audited: Audited, verifier: Verifier) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    steps = list(rec.steps)
    delete = greedy_token_ids(qwen2(), b"DELETE")[0]
    steps[0] = dataclasses.replace(steps[0], token=delete)
    assert verifier.verify_record(_in_place(rec, steps)).first.field == "chain link"  # type: ignore[union-attr]
    forged = verifier.verify_record(_forged(rec, steps))
    assert forged.first is not None and (forged.first.step, forged.first.field) == (0, "token")
    assert "not allowed at this step" in str(forged.first)
    # an allowed but different token: the trajectory (and the SQL) no longer match
    steps = list(rec.steps)
    k = _sampled_step(rec)
    alt = next(t for t in greedy_token_ids(qwen2(), b" ") if t != steps[k].token)
    steps[k] = dataclasses.replace(steps[k], token=alt)
    forged = verifier.verify_record(_forged(rec, steps))
    assert not forged.ok
    assert forged.first is not None and forged.first.step is not None and forged.first.step > k


@pytest.mark.parametrize("edit", ["delete", "insert", "swap"])
def test_structural_edits_are_detected(audited: Audited, verifier: Verifier, edit: str) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    k = _sampled_step(rec)
    steps = list(rec.steps)
    if edit == "delete":
        del steps[k]
    elif edit == "insert":
        steps.insert(k, steps[k])
    else:
        steps[k], steps[k + 1] = steps[k + 1], steps[k]
    in_place = verifier.verify_record(_in_place(rec, steps))
    assert in_place.first is not None and in_place.first.field == "step number"
    assert "deleted, inserted or reordered" in str(in_place.first)
    renumbered = [dataclasses.replace(s, step=i) for i, s in enumerate(steps)]
    forged = verifier.verify_record(_forged(rec, renumbered))
    assert not forged.ok, forged.describe()
    assert forged.first is not None and forged.first.step in (k, k + 1)


def test_truncated_chain_is_detected(audited: Audited, verifier: Verifier) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    steps = list(rec.steps[:-1])
    rep = verifier.verify_record(_in_place(rec, steps))
    assert {d.field for d in rep.findings} >= {"chain_head", "n_steps"}
    forged = verifier.verify_record(_forged(rec, steps))
    assert [d.field for d in forged.findings] == ["stop_reason"]  # eos, but no EOS record


@pytest.mark.parametrize(
    "key,value",
    [
        ("final_sql", "SELECT * FROM Employee"),
        ("user", "mallory"),
        ("question", "something else"),
        ("stop_reason", "reserve"),
        ("started_at_ns", 1),
        ("artifacts", {"grammar": "00", "tokenizer": "00"}),
    ],
)
def test_seal_edits_are_detected(
    audited: Audited, verifier: Verifier, key: str, value: object
) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    edited = dataclasses.replace(rec, seal={**rec.seal, key: value})
    rep = verifier.verify_record(edited)
    assert rep.first is not None and (rep.first.step, rep.first.field) == (None, "audit_id")
    assert "seal was edited" in str(rep.first)


def test_resealed_sql_is_detected(audited: Audited, verifier: Verifier) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    forged = verifier.verify_record(_forged(rec, list(rec.steps), final_sql="DELETE FROM Invoice"))
    assert [d.field for d in forged.findings] == ["final_sql"]
    assert "not what the tokens spell" in forged.describe()


def _copy(store: AuditStore, tmp_path: Path) -> AuditStore:
    src = Path(store.engine.url.database or "")
    dst = tmp_path / "copy.sqlite"
    shutil.copy(src, dst)
    return AuditStore(dst)


def test_store_edits_past_the_triggers_are_detected(
    audited: Audited, verifier: Verifier, tmp_path: Path
) -> None:
    store, recs = audited
    copy = _copy(store, tmp_path)
    rec = recs[1]
    with copy.engine.begin() as conn:
        with pytest.raises(sa.exc.DatabaseError, match="append-only"):
            conn.exec_driver_sql("UPDATE grid_sql_audit_step SET token = 0")
    with copy.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER grid_sql_audit_step_no_update")
        conn.execute(
            sa.text(
                "UPDATE grid_sql_audit_step SET allowed = allowed + 1 "
                "WHERE audit_id = :a AND step = 2"
            ),
            {"a": rec.audit_id},
        )
    v = Verifier(copy, cache=verifier.cache)
    rep = v.verify(rec.audit_id)
    assert rep.first is not None and (rep.first.step, rep.first.field) == (2, "chain link")
    assert any("not append-only" in w for w in rep.warnings)
    assert v.verify(recs[0].audit_id).ok  # other records are untouched
    # ... but the store is not append-only: its chain verdict is a failure (issue #23 §5)
    chain = v.verify_store()
    assert not chain.ok and "grid_sql_audit_step_no_update" in str(chain.findings[0])
    assert copy.missing_guards() == ["grid_sql_audit_step_no_update"]  # verify re-installed nothing


def test_artifact_edits_are_detected(audited: Audited, tmp_path: Path) -> None:
    import json
    import zlib

    store, recs = audited
    copy = _copy(store, tmp_path)
    fp = recs[0].artifacts.grammar
    art = copy.artifact(fp)
    body = json.loads(zlib.decompress(art.payload))
    body["lexicon"]["TABLE_NAME"]["words"].append(b"Employee".hex())  # widen the role
    payload = zlib.compress(json.dumps(body).encode())
    with copy.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER grid_sql_audit_artifact_no_update")
        conn.execute(
            sa.text("UPDATE grid_sql_audit_artifact SET payload = :p WHERE fingerprint = :f"),
            {"p": payload, "f": fp},
        )
    rep = verify(copy, recs[0].audit_id)
    assert rep.first is not None and rep.first.field == "artifacts"
    assert "does not match its hash" in str(rep.first)
    # ... and with the content hash forged too, the rebuild no longer has the sealed fingerprint
    from grid_sql.audit.artifacts import Artifact

    with copy.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE grid_sql_audit_artifact SET content_hash = :h WHERE fingerprint = :f"),
            {"h": Artifact(fp, "grammar", payload).content_hash, "f": fp},
        )
    rep = verify(copy, recs[0].audit_id)
    assert rep.first is not None and "the archived grammar was altered" in str(rep.first)


def _step_of(rec: AuditRecord, spelling: bytes) -> int:
    tb = qwen2().token_bytes
    return next(s.step for s in rec.steps if tb[s.token] == spelling)


def test_explain_names_the_cause(audited: Audited, verifier: Verifier) -> None:
    store, recs = audited
    rec = recs[0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10
    ex = Explainer(store, verifier)
    verbs = ex.step(rec.audit_id, 0, "DELETE FROM Customer")
    assert "allowed terminals: SELECT, WITH" in verbs
    assert "`DELETE` is not in the role's verbs" in verbs and "SELECT statements" in verbs
    at_table = _step_of(rec, b" Artist")
    text = ex.step(rec.audit_id, at_table, " Employee")
    ends = "allowed terminals once it ends: LPAR, SCHEMA_NAME, TABLE_FUNCTION_NAME, TABLE_NAME"
    assert ends in text
    assert "`Employee` is not in the role's lexicon" in text
    assert "TABLE_NAME is restricted to the role's lexicon" in text
    assert "`ReportsTo` is not in the role's lexicon" in ex.step(rec.audit_id, 1, " ReportsTo FROM")
    assert "not valid sqlite syntax" in ex.step(rec.audit_id, 1, "))")
    eos = str(qwen2().eos_token_id)
    assert "legal only at a complete statement" in ex.step(rec.audit_id, at_table, eos)
    assert "allowed here" in ex.step(rec.audit_id, len(rec.steps) - 1, eos)
    chosen = str(rec.steps[at_table].token)
    assert "it was allowed at this step" in ex.step(rec.audit_id, at_table, chosen)
    assert "legal continuation" in ex.step(rec.audit_id, at_table + 1, " ORDER BY")


def test_tokenizer_artifact_and_malformed_rows_are_detected(
    audited: Audited, tmp_path: Path
) -> None:
    import zlib

    from grid_sql.audit.artifacts import Artifact

    store, recs = audited
    copy = _copy(store, tmp_path)
    fp = recs[0].artifacts.tokenizer
    raw = zlib.decompress(copy.artifact(fp).payload)
    at = raw.index(b"SELECT")  # respell one token
    payload = zlib.compress(raw[:at] + b"DELETE" + raw[at + 6 :])
    with copy.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER grid_sql_audit_artifact_no_update")
        conn.execute(
            sa.text(
                "UPDATE grid_sql_audit_artifact SET payload = :p, content_hash = :h "
                "WHERE fingerprint = :f"
            ),
            {"p": payload, "h": Artifact(fp, "tokenizer", payload).content_hash, "f": fp},
        )
        conn.exec_driver_sql("DROP TRIGGER grid_sql_audit_step_no_update")
        conn.execute(
            sa.text(
                "UPDATE grid_sql_audit_step SET kind = 'bogus' WHERE audit_id = :a AND step = 1"
            ),
            {"a": recs[1].audit_id},
        )
    v = Verifier(copy)
    rep = v.verify(recs[0].audit_id)
    assert rep.first is not None and "the archived vocabulary was altered" in str(rep.first)
    rep = v.verify(recs[1].audit_id)
    assert rep.first is not None and rep.first.field == "record"
    assert "malformed" in str(rep.first)


def test_stop_reasons_are_checked_against_the_replay(audited: Audited, verifier: Verifier) -> None:
    from grid_sql.audit import AuditLog

    rec = audited[1][0]
    cut = rec.steps[:5]  # 'SELECT Name FROM Artist ORDER': not a complete statement
    text = b"".join(qwen2().token_bytes[s.token] for s in cut).decode()

    def sealed(**kw: object) -> AuditRecord:
        log = AuditLog()
        log.extend(cut)
        return log.seal(artifacts=rec.artifacts, final_sql=text, **kw)  # type: ignore[arg-type]

    # processor mode may truncate (paper §5, mode 2): a faithful record of that verifies
    ok = verifier.verify_record(
        sealed(stop_reason="truncated", mode="processor", flags=["truncation-possible"])
    )
    assert ok.ok, ok.describe()
    # a loop-mode stop that leaves an incomplete statement is not a faithful record
    bad = verifier.verify_record(sealed(stop_reason="stop_at_accept"))
    assert [d.field for d in bad.findings] == ["stop_reason"]
    assert "complete statement" in bad.describe()


def test_a_bind_step_without_an_obligation_is_detected(
    audited: Audited, verifier: Verifier
) -> None:
    # bind steps (decode/bind.py) are legal only while a select-list obligation is pending;
    # this grammar has none, so relabelling a sampled step as one is a forgery
    rec = audited[1][0]
    k = _sampled_step(rec)
    steps = list(rec.steps)
    steps[k] = dataclasses.replace(steps[k], kind=StepKind.BIND)
    forged = verifier.verify_record(_forged(rec, steps))
    assert forged.first is not None and (forged.first.step, forged.first.field) == (k, "kind")
    assert "no select-list obligation pending" in str(forged.first)


def _as_checked(s: StepRecord) -> StepRecord:
    """``s`` as the decode loop records a model favourite it checked instead of masking."""
    return dataclasses.replace(
        s, entry_ids=(), mask_digest="", allowed=0, blocked=0, kind=StepKind.CHECKED
    )


def test_checked_steps_replay_and_edits_are_detected(audited: Audited, verifier: Verifier) -> None:
    """A ``CHECKED`` step (decode/loop.py's check-first) names no mask: the replay checks its
    token against the language. A record of checked steps verifies; a checked step whose token
    leaves the language, or that claims a mask it did not fill, is a finding."""
    rec = audited[1][0]  # SELECT Name FROM Artist ORDER BY Name LIMIT 10 (12 steps)
    k = _sampled_step(rec)
    steps = [_as_checked(s) if s.kind == StepKind.SAMPLED else s for s in rec.steps]
    assert sum(s.kind == StepKind.CHECKED for s in steps) >= 2
    rep = verifier.verify_record(_forged(rec, steps))
    assert rep.ok, rep.describe()
    assert rep.replayed == len(steps)
    # its token swapped for one the role may not write: caught at that step
    bad = list(steps)
    bad[0] = _as_checked(dataclasses.replace(bad[0], token=greedy_token_ids(qwen2(), b"DELETE")[0]))
    forged = verifier.verify_record(_forged(rec, bad))
    assert forged.first is not None and (forged.first.step, forged.first.field) == (0, "token")
    assert "not allowed at this step" in str(forged.first)
    # a checked step that names a digest or counts: it claims a mask it did not fill
    for edit in (
        {"mask_digest": "00" * 16},
        {"allowed": 5},
        {"entry_ids": ("ab" * 16,)},
    ):
        bad = list(steps)
        bad[k] = dataclasses.replace(bad[k], **edit)  # type: ignore[arg-type]
        forged = verifier.verify_record(_forged(rec, bad))
        assert [(d.step, d.field) for d in forged.findings] == [(k, "kind")], edit
    # EOS is never a checked step; the EOS tail may name no mask (checked at ACCEPT)
    bad = list(steps)
    bad[-1] = _as_checked(bad[-1])
    forged = verifier.verify_record(_forged(rec, bad))
    assert forged.first is not None and forged.first.field == "token"
    tail = list(steps)
    tail[-1] = dataclasses.replace(_as_checked(tail[-1]), kind=StepKind.EOS)
    assert verifier.verify_record(_forged(rec, tail)).ok
    # ... but not before ACCEPT
    early = [steps[0], tail[-1]]  # "SELECT" then EOS
    early = [dataclasses.replace(s, step=i) for i, s in enumerate(early)]
    forged = verifier.verify_record(_forged(rec, early))
    assert (1, "token") in [(d.step, d.field) for d in forged.findings], forged.describe()
