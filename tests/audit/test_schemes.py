"""Entry-id schemes: seals name theirs, and a record sealed under an older or unknown scheme
gets an honest verdict — replayed under its own scheme, or "not replayable by this version",
never "tampered"."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from grid_sql.audit import AuditRecord, AuditStore, Verifier, audit_main
from grid_sql.audit.schemes import ENTRY_SCHEME, entry_id_under
from grid_sql.mask.cache import MaskEntry, MaskKey

from .chainhelp import reseal, under_scheme
from .helpers import chinook_guide, chinook_role

Audited = tuple[AuditStore, list[AuditRecord]]

KEY = MaskKey("generic", 3, b"ab", 0b1011, "fp")
# (ids, scheme-1 id, scheme-2 id): a dense entry (bitmap shorter), a short sparse one whose
# bitmap is still shorter, and one whose id list is shorter (both schemes agree)
PINNED = [
    (
        np.arange(0, 20000, 3),
        "8465b591c4363090c5a9aa0655b32162",
        "b09142d0edaced7dd0027f9ad571281b",
    ),
    (np.array([1, 5, 9]), "2be862dd92871c3bb40234493a1e52f4", "3a7affb8820e317799a55cce0bc67d08"),
]


@pytest.mark.parametrize("ids,s1,s2", PINNED)
def test_entry_id_schemes_are_pinned(ids: np.ndarray, s1: str, s2: str) -> None:
    """If this fails, entry hashing changed: bump ENTRY_SCHEME and keep the old scheme
    replayable in ``entry_id_under`` (grid_sql/audit/schemes.py)."""
    e = MaskEntry.make(KEY, ids, ((5, 2, b"x"),))
    assert ENTRY_SCHEME == 2
    assert e.entry_id == s2 == entry_id_under(2, e)
    assert entry_id_under(1, e) == s1
    sparse = MaskEntry.make(KEY, np.array([100_000]), ())
    assert entry_id_under(1, sparse) == entry_id_under(2, sparse) == sparse.entry_id
    with pytest.raises(ValueError, match="not known"):
        entry_id_under(3, e)


def test_seals_name_their_engine_and_scheme(audited: Audited) -> None:
    seal = audited[1][0].seal
    assert seal["entry_scheme"] == ENTRY_SCHEME
    assert str(seal["engine"]).startswith("grid-sql ")


def _store_with(tmp_path: Path, recs: list[AuditRecord]) -> AuditStore:
    store = AuditStore(tmp_path / "schemes.sqlite")
    guide = chinook_guide()
    for r in recs:
        store.append(r, grammar=chinook_role()[0], vocab=guide.vocab)
    return store


def test_old_scheme_records_replay_under_their_scheme(audited: Audited, tmp_path: Path) -> None:
    rec = audited[1][0]  # SELECT Name FROM Artist ... (identifier positions: dense entries)
    old_steps = under_scheme(rec, 1)
    assert any(a.entry_ids != b.entry_ids for a, b in zip(old_steps, rec.steps, strict=True)), (
        "the record has no entry whose id differs between the schemes: the test proves nothing"
    )
    # sealed before 7c326f3 and before seals named a scheme: inferred, replayed, OK
    before = reseal(rec, old_steps, drop=("engine", "entry_scheme"))
    # sealed after 7c326f3 but before seals named a scheme
    between = reseal(rec, list(rec.steps), drop=("engine", "entry_scheme"), user="between")
    # a seal that names scheme 1
    named = reseal(rec, old_steps, entry_scheme=1, engine="grid-sql 0.0.9", user="named")
    # a scheme from the future
    future = reseal(rec, list(rec.steps), entry_scheme=9, engine="grid-sql 9.0", user="future")
    store = _store_with(tmp_path, [before, between, named, future])
    v = Verifier(store)
    rep = v.verify(before.audit_id)
    assert rep.ok and rep.scheme == 1, rep.describe()
    assert "replayed under entry-id scheme 1" in rep.scheme_note and "inferred" in rep.scheme_note
    assert any("sealed before seals named" in w for w in rep.warnings)
    rep = v.verify(between.audit_id)
    assert rep.ok and rep.scheme == 2 and "scheme 2" in rep.scheme_note, rep.describe()
    rep = v.verify(named.audit_id)
    assert rep.ok and rep.scheme == 1 and not rep.scheme_note, rep.describe()
    rep = v.verify(future.audit_id)
    assert not rep.ok and not rep.tampered and rep.replayed == 0
    assert (
        "NOT REPLAYABLE — sealed under scheme 9, not replayable by this version" in rep.describe()
    )
    assert "tamper" not in rep.describe().lower()
    # the CLI: nothing tampered, one not replayable -> exit 3
    db = str(store.engine.url.database)
    store.close()
    import io

    out = io.StringIO()
    assert audit_main(["verify", "--all", "--db", db], out=out) == 3, out.getvalue()
    assert "3/4 record(s) verified, 1 not replayable by this version" in out.getvalue()


def test_a_wrong_id_in_an_unversioned_record_is_still_tampering(
    audited: Audited, tmp_path: Path
) -> None:
    """Inferring the scheme must not excuse an id that neither scheme gives, nor a record that
    mixes the schemes (each half genuine under one of them)."""
    rec = audited[1][0]
    old_steps = under_scheme(rec, 1)
    k = next(
        i
        for i, (a, b) in enumerate(zip(old_steps, rec.steps, strict=True))
        if a.entry_ids != b.entry_ids
    )
    bad = list(old_steps)
    bad[k] = dataclasses.replace(bad[k], entry_ids=("ab" * 16,) + bad[k].entry_ids[1:])
    forged = reseal(rec, bad, drop=("engine", "entry_scheme"))
    mixed_steps = list(rec.steps[: k + 1]) + old_steps[k + 1 :]
    later = next(
        (
            i
            for i in range(k + 1, len(rec.steps))
            if old_steps[i].entry_ids != rec.steps[i].entry_ids
        ),
        None,
    )
    store = _store_with(tmp_path, [forged])
    v = Verifier(store)
    rep = v.verify(forged.audit_id)
    assert rep.tampered and [(d.step, d.field) for d in rep.findings] == [(k, "entry_ids")]
    assert "no entry-id scheme this version knows" in rep.describe()
    assert later is not None, "a second step whose ids differ between the schemes"
    mixed = reseal(rec, mixed_steps, drop=("engine", "entry_scheme"), user="mixed")
    rep = v.verify_record(mixed)
    assert rep.tampered and rep.findings[0].step == later, rep.describe()
    # a versioned seal gets no inference: scheme-1 ids under a scheme-2 seal are divergent
    wrong = reseal(rec, old_steps, user="wrong")
    rep = v.verify_record(wrong)
    assert rep.tampered and rep.findings[0].step == k and rep.findings[0].field == "entry_ids"
    store.close()
