"""Conversation threads in the audit trail (#27 §1): a seal's ``previous`` names the previous
turn; verify checks that it is in the store and was sealed first."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.audit import AuditStore
from grid_sql.audit.artifacts import refs_for
from grid_sql.audit.log import AuditLog
from grid_sql.audit.verify import verify
from grid_sql.errors import AuditError
from tests.audit.helpers import chinook_guide, chinook_role, record_generation


def _seal(sql: bytes, previous: str | None) -> object:
    guide = chinook_guide()
    grammar, policy_fp, schema_fp = chinook_role()
    steps, stop = record_generation(guide, sql)
    log = AuditLog()
    log.extend(steps)
    return log.seal(
        stop_reason=stop,
        artifacts=refs_for(grammar, guide.vocab, policy=policy_fp, schema=schema_fp),
        final_sql=sql.decode(),
        question="a follow-up",
        dialect="sqlite",
        previous=previous,
    ), (grammar, guide.vocab)


def test_previous_is_sealed_and_checked(tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    first, (g, v) = _seal(b"SELECT Name FROM Artist", None)
    store.append(first, grammar=g, vocab=v)  # type: ignore[arg-type]
    second, _ = _seal(b"SELECT Name FROM Genre", first.audit_id)  # type: ignore[attr-defined]
    aid = store.append(second, grammar=g, vocab=v)  # type: ignore[arg-type]
    assert store.get(aid).previous == first.audit_id  # type: ignore[attr-defined]
    assert store.get(first.audit_id).previous is None  # type: ignore[attr-defined]
    assert verify(store, aid).ok
    orphan, _ = _seal(b"SELECT Title FROM Album", "ab" * 32)  # names a record not in the store
    bad = store.append(orphan, grammar=g, vocab=v)  # type: ignore[arg-type]
    rep = verify(store, bad)
    assert not rep.ok and rep.first is not None and rep.first.field == "previous"
    with pytest.raises(AuditError):
        _seal(b"SELECT 1", "")
