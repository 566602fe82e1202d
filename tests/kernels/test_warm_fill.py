"""The warm fill (pre-packed CI words) equals the id-based mask, and packing is exact."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.errors import MaskError
from grid_sql.mask.cache import KIND_GENERIC, MaskEntry, MaskKey, PackedWords
from grid_sql.mask.guide import ids_to_bitmask

from ..mask.helpers import greedy_tokens
from .helpers import guide_pair, statements


@pytest.mark.parametrize("n_ids", [0, 1, 5, 30, 300, 3000])
def test_packed_words_equal_id_packing(n_ids: int) -> None:
    rng = np.random.default_rng(n_ids)
    n_words = 200
    ids = np.sort(rng.choice(n_words * 32, size=n_ids, replace=False)).astype(np.int32)
    p = PackedWords.pack(ids, n_words)
    nnz = np.count_nonzero(ids_to_bitmask(ids, n_words))
    assert (p.index is None) == (nnz * 4 > n_words)  # sparse unless > 1/4 of words are set
    out = np.zeros(n_words + 3, dtype=np.uint32)
    p.or_into(out)
    np.testing.assert_array_equal(out[:n_words].view(np.int32), ids_to_bitmask(ids, n_words))
    assert not out[n_words:].any()
    entry = MaskEntry.make(MaskKey(KIND_GENERIC, 0, b"", 1, None), ids, ())
    before = entry.nbytes
    assert entry.packed(n_words) is entry.packed(n_words)  # computed once
    assert entry.nbytes == before >= entry.packed(n_words).nbytes  # accounting is stable
    with pytest.raises(MaskError):
        PackedWords.pack(np.array([n_words * 32], dtype=np.int32), n_words)


def test_fill_equals_allowed_ids_along_statements() -> None:
    gk, _ = guide_pair("sqlite", "gpt-2")
    buf = np.zeros(gk.n_words + 1, dtype=np.int32)
    for sql in statements("sqlite", 2):
        m = gk.matcher()
        for t in [*greedy_tokens("gpt-2", sql), None]:
            for _ in range(2):  # cold, then warm (hit)
                n, entries = gk.fill_bitmask(m.config, buf)
                ids, eos, entries2 = gk.allowed_ids(m.config)
                want = ids_to_bitmask(ids, buf.size).view(np.uint32)
                if eos:
                    want[gk.eos_id >> 5] |= np.uint32(1 << (gk.eos_id & 31))
                np.testing.assert_array_equal(buf.view(np.uint32), want)
                assert n == ids.size + eos and entries == tuple(entries2)
            if t is not None:
                m.accept_token(t)


def test_fill_memo_replays_by_structure_and_keeps_cache_checks() -> None:
    """The Python fill's memo over the MaskCache (the kernel fill keeps its own store and
    is checked against this path in tests/kernels/test_mask_filler.py)."""
    gk, _ = guide_pair("chinook", "llama-spm")
    gk.kernel_fill = False
    toks = greedy_tokens("llama-spm", b"select Name from Artist where ArtistId < 3")
    buf = np.zeros(gk.n_words, dtype=np.int32)

    def session() -> list[tuple[bytes, int, list[str]]]:
        m, out = gk.matcher(), []
        for t in toks:
            n, e = gk.fill_bitmask(m.config, buf)
            out.append((buf.tobytes(), n, e))
            m.accept_token(t)
        return out

    first = session()
    size, publishes = len(gk._memo), gk.cache.stats.publishes
    assert size > 0
    assert session() == first  # fresh stack objects, same structure: memo hits
    assert len(gk._memo) == size and gk.cache.stats.publishes == publishes
    gk.cache.roll_over(set())  # entries gone: the memo must not answer alone
    assert session() == first
    assert gk.cache.stats.publishes > publishes
    # identifier rule still enforced on a memo hit: a generic entry under an ident key
    m = gk.matcher()
    while (key := gk.key_for(m.config, 0)).kind != "ident":
        m.accept_token(toks[len(m.tokens)])
    gk.fill_bitmask(m.config, buf)  # memoized, then the cache is tampered with
    bogus = MaskEntry.make(
        MaskKey(KIND_GENERIC, 0, key.remainder, key.allowed, None), np.zeros(0, np.int32), ()
    )
    gk.cache._inject(gk.namespace, key, bogus)
    with pytest.raises(MaskError):
        gk.fill_bitmask(m.config, buf)


@pytest.mark.parametrize("kernel_fill", [True, False], ids=["kernel-fill", "py-fill"])
def test_equal_rows_are_one_array(kernel_fill: bool) -> None:
    """Warm records of configurations with the same mask hold one shared row (the rows a
    decode replays stay few and cache-hot), and each record's row is its own mask."""
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide

    gk, _ = guide_pair("sqlite", "gpt-2")
    g = Guide(gk.grammar, gk.vocab, cache=MaskCache(), trie=gk.trie, kernel_fill=kernel_fill)
    buf = np.zeros(g.n_words, dtype=np.int32)
    rows = []
    for sql in statements("sqlite", 6):
        m = g.matcher()
        for t in [*greedy_tokens("gpt-2", sql), None]:
            g.fill_bitmask(m.config, buf)
            rec = g._warm_for(m.config).fill
            assert rec is not None
            np.testing.assert_array_equal(rec[0], buf)
            rows.append(rec[0])
            if t is None:
                break
            m.accept_token(t)
    by_content: dict[bytes, set[int]] = {}
    for r in rows:
        by_content.setdefault(r.tobytes(), set()).add(r.__array_interface__["data"][0])
    assert len(by_content) < len(rows)  # some masks recur along the statements
    assert all(len(addrs) == 1 for addrs in by_content.values())


@pytest.mark.parametrize("ids", [[], [5], [0, 1, 2, 40], list(range(0, 3000, 2)), [70000]])
def test_entry_id_payload_is_canonical(ids: list[int]) -> None:
    """An entry's ids enter its id as an int32 list or, when shorter, as a bitmap up to the
    largest id's word; both decode back to the same ids, and the Rust filler hashes the
    same bytes (its entry ids equal the Python path's: test_mask_filler.py)."""
    from grid_sql.mask.cache import ids_payload

    arr = np.array(ids, dtype=np.int32)
    p = ids_payload(arr)
    if p.startswith(b"ids-bitmap/v1"):
        n, nw = np.frombuffer(p[13:21], dtype="<u4")
        assert n == len(ids) and nw < n
        bits = np.unpackbits(np.frombuffer(p[21:], dtype=np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == ids and len(p) == 21 + 4 * int(nw)
    else:
        assert p.startswith(b"ids-i32le/v1")
        assert int(np.frombuffer(p[12:16], dtype="<u4")[0]) == len(ids)
        assert np.frombuffer(p[16:], dtype="<i4").tolist() == ids
        assert not ids or (max(ids) >> 5) + 1 >= len(ids)
