"""BatchMasker, the engine-agnostic core of the processor: slots, moves, history sync, the
block/defer contract for a compiling guide, error rows. Real guides (Chinook, SmolLM2)."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.errors import GuideUnavailable, TokenRejected
from grid_sql.serve import BatchMasker, GuideRegistry

from . import guides as G


@pytest.fixture(scope="module")
def reg():
    with GuideRegistry() as r:
        yield r


@pytest.fixture(scope="module")
def refs(reg):
    return {role: reg.get(G.spec(role), G.vocab()) for role in ("demo", "artists")}


def rows_equal(fill, expect) -> None:
    for i, e in enumerate(expect):
        if e is None:
            assert not fill.masked[i] and not fill.bitmask[i].any()
        else:
            assert fill.masked[i] and np.array_equal(fill.bitmask[i], e), f"row {i}"


def test_move_swap_and_unidirectional(reg, refs) -> None:
    bm = BatchMasker(G.vocab(), reg)
    ta = G.tokens(G.SQL["demo"][0])
    tb = G.tokens(G.SQL["artists"][1])
    ra = G.reference_masks(refs["demo"], ta)
    rb = G.reference_masks(refs["artists"], tb)
    bm.add(0, G.spec("demo"))
    bm.add(1, G.spec("artists").fingerprint, tokens=tb[:2])  # resumed with 2 tokens
    bm.add(2, None)
    for t in ta[:3]:
        bm.accept(0, t)
    bm.accept(2, 123)  # pass-through: ignored
    rows_equal(bm.fill([0, 1, 2]), [ra[3], rb[2], None])
    bm.move(0, 1, swap=True)
    rows_equal(bm.fill([1, 0]), [ra[3], rb[2]])
    bm.move(1, 5)  # unidirectional: 1 empties, 5 takes it
    assert not bm.is_masked(1) and bm.n_tokens(5) == 3
    rows_equal(bm.fill([5, 1, 0, 5]), [ra[3], None, rb[2], ra[3]])
    bm.remove(5)
    assert not bm.is_masked(5)


def test_accept_rejects_and_sync_rolls_back(reg, refs) -> None:
    bm = BatchMasker(G.vocab(), reg)
    toks = G.tokens(G.SQL["demo"][1])
    ref = G.reference_masks(refs["demo"], toks)
    bm.add(3, G.spec("demo"))
    bm.fill([3])
    for t in toks[:6]:
        bm.accept(3, t)
    bad = int(
        np.flatnonzero(
            ~np.unpackbits(ref[6].view(np.uint8), bitorder="little").astype(bool)[: G.vocab().size]
        )[0]
    )
    with pytest.raises(TokenRejected):
        bm.accept(3, bad)
    bm.sync(3, toks[:4])  # the engine's committed history is shorter: roll back
    rows_equal(bm.fill([3]), [ref[4]])
    bm.sync(3, toks[:2] + toks[2:9])  # same prefix, longer: accept the rest
    rows_equal(bm.fill([3]), [ref[9]])
    other = G.tokens(b"SELECT Name FROM Genre")
    bm.sync(3, other)  # divergent: roll back to the common prefix, replay
    rows_equal(bm.fill([3]), [G.reference_masks(refs["demo"], other)[-1]])


def test_terminated_and_broken_slots_allow_eos_only(reg, refs) -> None:
    v = G.vocab()
    bm = BatchMasker(v, reg)
    toks = G.tokens(G.SQL["artists"][1])
    bm.add(0, G.spec("artists"), tokens=[*toks, v.eos_token_id])
    bm.add(1, G.spec("artists"), tokens=G.tokens(b"DELETE FROM Artist"))  # outside the role
    bm.add(2, "cd" * 32, defer_errors=True)  # never registered
    with pytest.raises(GuideUnavailable):
        bm.add(4, "cd" * 32)
    eos_only = np.zeros(bm.n_words, dtype=np.int32)
    eos_only.view(np.uint32)[v.eos_token_id >> 5] = np.uint32(1 << (v.eos_token_id & 31))
    f = bm.fill([0, 1, 2])
    rows_equal(f, [eos_only, eos_only, eos_only])
    assert set(f.errors) == {1, 2}
    assert isinstance(f.errors[1], TokenRejected) and isinstance(f.errors[2], GuideUnavailable)


def test_compiling_guide_is_deferred_or_waited_never_approximated(refs) -> None:
    """block=False: a slot whose build is running is reported pending with its row left
    alone (the engine defers it); block=True waits. Either way a filled row is exact."""
    v = G.vocab()
    toks = G.tokens(G.SQL["artists"][0])
    ref = G.reference_masks(refs["artists"], toks)
    with GuideRegistry(max_workers=1) as cold:  # nothing built yet in this registry
        bm = BatchMasker(v, cold)
        bm.add(0, G.spec("demo"))  # occupies the only worker
        bm.add(1, G.spec("artists"))
        bm.accept(1, toks[0])  # sampled before the guide is ready: queued, replayed later
        f = bm.fill([1], block=False)
        if f.pending[0]:
            assert not f.masked[0] and not f.bitmask[0].any()
        else:
            rows_equal(f, [ref[1]])
        rows_equal(bm.fill([1], block=True), [ref[1]])
        assert bm.fill([0], block=False).masked[0]


def test_bitmask_argument_checked(reg) -> None:
    bm = BatchMasker(G.vocab(), reg)
    with pytest.raises(ValueError, match="int32"):
        bm.fill([0, 1], np.zeros((1, bm.n_words), dtype=np.int32))
    with pytest.raises(ValueError, match="draft"):
        bm.fill([0], drafts=[[1], [2]])


def test_guides_shared_across_threads_state_per_masker(reg, refs) -> None:
    """Two engine threads, one registry: each masker's slots advance independently while the
    compiled guides (and their caches) are shared; every mask stays exact."""
    import threading

    work = {
        "demo": G.tokens(G.SQL["demo"][1]),
        "artists": G.tokens(G.SQL["artists"][0]),
    }
    expect = {r: G.reference_masks(refs[r], t) for r, t in work.items()}
    failures: list[str] = []

    def engine(first: str) -> None:
        bm = BatchMasker(G.vocab(), reg)
        order = [first, "artists" if first == "demo" else "demo"]
        for slot, role in enumerate(order):
            bm.add(slot, G.spec(role).fingerprint)
        n = max(len(t) for t in work.values())
        for k in range(n + 1):
            live = [s for s, r in enumerate(order) if k <= len(work[r])]
            f = bm.fill(live)
            for i, s in enumerate(live):
                if not np.array_equal(f.bitmask[i], expect[order[s]][k]):
                    failures.append(f"{first}: slot {s} step {k}")
                if k < len(work[order[s]]):
                    bm.accept(s, work[order[s]][k])

    ts = [threading.Thread(target=engine, args=(r,)) for r in ("demo", "artists")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not failures
