"""Fixtures: one SQLite audit store holding real record streams (Chinook role, Qwen2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.audit import AuditRecord, AuditStore, Verifier

from .helpers import CHINOOK, CHINOOK_SQL, QWEN2, chinook_guide, chinook_role, seal_generation


@pytest.fixture(scope="session")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[AuditStore, list[AuditRecord]]:
    """A store with two short sealed Chinook generations (artifacts archived)."""
    if not (CHINOOK.is_file() and QWEN2.is_file()):
        pytest.skip("shared Chinook database / Qwen2 vocabulary not found")
    store = AuditStore(Path(tmp_path_factory.mktemp("audit")) / "audit.sqlite")
    guide = chinook_guide()
    grammar = chinook_role()[0]
    recs = []
    for sql in CHINOOK_SQL[1:3]:
        rec = seal_generation(guide, chinook_role(), sql)
        store.append(rec, grammar=grammar, vocab=guide.vocab)
        recs.append(rec)
    return store, recs


@pytest.fixture(scope="session")
def verifier(audited: tuple[AuditStore, list[AuditRecord]]) -> Verifier:
    """One verifier per session: its own mask cache, warm after the first replay."""
    return Verifier(audited[0])
