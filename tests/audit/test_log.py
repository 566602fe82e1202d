"""The chain and the seal: canonical encodings, ordering rules, what the audit_id covers."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from grid_sql.audit import GENESIS, ArtifactRefs, AuditLog, chain_link, encode_step, seal_hash
from grid_sql.decode.records import StepKind, StepRecord, StopReason
from grid_sql.errors import AuditError

REFS = ArtifactRefs(grammar="ab" * 32, tokenizer="cd" * 32, policy="ef" * 32, model_id="m")


def _rec(step: int, token: int = 7, kind: StepKind = StepKind.SAMPLED) -> StepRecord:
    return StepRecord(
        step=step,
        config_hash=0xFEDCBA9876543210,
        entry_ids=("00" * 16, "11" * 16),
        mask_digest="22" * 16,
        token=token,
        allowed=3,
        blocked=97,
        kind=kind,
    )


def _log(n: int = 3) -> AuditLog:
    log = AuditLog(started_at_ns=1_700_000_000_000_000_000)
    for i in range(n - 1):
        log.append(_rec(i))
    log.append(_rec(n - 1, token=0, kind=StepKind.EOS))
    return log


def test_genesis_and_link_are_blake2b_of_prev_and_encoding() -> None:
    assert (
        GENESIS
        == hashlib.blake2b(
            b"grid-sql audit chain genesis", digest_size=32, person=b"grid-sql-audit"
        ).digest()
    )
    r = _rec(0)
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-audit")
    h.update(GENESIS + encode_step(r))
    assert chain_link(GENESIS, r) == h.digest()


def test_step_encoding_is_pinned() -> None:
    # Format v1 is a contract with every stored trail: changing it must bump FORMAT_VERSION.
    assert encode_step(_rec(5)).hex() == (
        "475341737465700105000000"
        "1032547698badcfe"
        "02000000"
        "10"
        + "00" * 16
        + "10"
        + "11" * 16
        + "10"
        + "22" * 16
        + "070000000300000061000000"
        + "07"
        + b"sampled".hex()
    )


def test_every_field_changes_the_link() -> None:
    base = _rec(3)
    link = chain_link(GENESIS, base)
    changes = {
        "step": 4,
        "config_hash": 1,
        "entry_ids": ("00" * 16,),
        "mask_digest": "23" * 16,
        "token": 8,
        "allowed": 4,
        "blocked": 96,
        "kind": StepKind.FORCED,
    }
    for name, value in changes.items():
        assert chain_link(GENESIS, dataclasses.replace(base, **{name: value})) != link, name
    assert chain_link(b"\1" * 32, base) != link


def test_append_rejects_out_of_order_and_records_after_eos() -> None:
    log = AuditLog()
    log.append(_rec(0))
    with pytest.raises(AuditError, match="out of order"):
        log.append(_rec(2))
    log.append(_rec(1, token=0, kind=StepKind.EOS))
    with pytest.raises(AuditError, match="follow the EOS"):
        log.append(_rec(2))


def test_seal_binds_head_and_every_field() -> None:
    log = _log()
    rec = log.seal(
        stop_reason=StopReason.EOS,
        artifacts=REFS,
        final_sql="SELECT 1",
        question="q",
        user="ann",
        sealed_at_ns=1_700_000_000_500_000_000,
    )
    assert rec.seal["chain_head"] == log.head
    assert rec.audit_id == seal_hash(rec.seal)
    assert [bytes.fromhex(x) for x in rec.links][-1].hex() == log.head
    for key, value in [
        ("final_sql", "SELECT 2"),
        ("question", "q2"),
        ("user", "bob"),
        ("stop_reason", "reserve"),
        ("mode", "processor"),
        ("flags", ["x"]),
        ("sealed_at_ns", 1),
        ("n_steps", 2),
        ("chain_head", "00" * 32),
        ("artifacts", {**REFS.as_dict(), "policy": "00"}),
    ]:
        assert seal_hash({**rec.seal, key: value}) != rec.audit_id, key
    with pytest.raises(AuditError, match="sealed"):
        log.append(_rec(3))
    with pytest.raises(AuditError, match="already sealed"):
        log.seal(stop_reason="eos", artifacts=REFS, final_sql="")


def test_seal_rejects_floats_and_inconsistent_stops() -> None:
    with pytest.raises(AuditError, match="floats"):
        seal_hash({"format": 1, "t": 1.5})
    with pytest.raises(AuditError, match="processor mode"):
        _log().seal(stop_reason="truncated", artifacts=REFS, final_sql="")
    no_eos = AuditLog()
    no_eos.append(_rec(0))
    with pytest.raises(AuditError, match="not the EOS record"):
        no_eos.seal(stop_reason="eos", artifacts=REFS, final_sql="")
    with pytest.raises(AuditError, match="unknown stop reason"):
        _log().seal(stop_reason="tired", artifacts=REFS, final_sql="")
    with pytest.raises(AuditError, match="unknown mode"):
        _log().seal(stop_reason="eos", artifacts=REFS, final_sql="", mode="batch")
    rec = no_eos.seal(
        stop_reason="truncated",
        artifacts=REFS,
        final_sql="",
        mode="processor",
        flags=["truncation-possible", "truncation-possible"],
    )
    assert rec.seal["flags"] == ["truncation-possible"]


def test_bad_record_values_are_typed_errors() -> None:
    with pytest.raises(AuditError, match="u64"):
        encode_step(dataclasses.replace(_rec(0), config_hash=-1))
    with pytest.raises(AuditError, match="hex"):
        encode_step(dataclasses.replace(_rec(0), mask_digest="zz"))
    with pytest.raises(AuditError, match="u32"):
        encode_step(dataclasses.replace(_rec(0), token=1 << 32))
