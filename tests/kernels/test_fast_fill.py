"""The warm-path entry points: ``try_fill_bitmask`` (fill only without a trie walk) and
the fast paths of ``fill_bitmask`` equal the reference fill bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.grammar import Grammar
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide, fill_rows
from grid_sql.parser import Configuration
from grid_sql.parser.stack import StackNode
from grid_sql.policy.scopes import role_scopes

from ..mask.helpers import greedy_tokens, vocab
from ..scope.helpers import snapshot
from .helpers import grammar, statements


def _sessions(gname: str, vname: str, n: int) -> list[list[int]]:
    return [greedy_tokens(vname, sql) for sql in statements(gname, n)]


@pytest.mark.parametrize("kernel_fill", [True, False], ids=["kernel-fill", "py-fill"])
@pytest.mark.parametrize(
    ("gname", "vname", "cache_bytes"),
    [
        ("sqlite", "gpt-2", 256 << 20),
        ("chinook", "llama-spm", 256 << 20),
        ("sqlite", "gpt-2", 1 << 20),
    ],
)
def test_try_fill_is_none_exactly_when_a_walk_is_needed(
    gname: str, vname: str, cache_bytes: int, kernel_fill: bool
) -> None:
    """Also on a cache small enough to evict while the statements run (1 MB): warm records
    are then revalidated by their root entry, and a walk is needed exactly when that or a
    sub-walk entry is gone (the kernel fill's store drops everything past the bound)."""
    if kernel_fill and cache_bytes < 256 << 20:
        # the Rust store keeps packed words only (no id lists): ~8x smaller entries than the
        # MaskCache's, so a bound that makes it evict on two statements is 8x smaller
        cache_bytes //= 8
    g = Guide(
        grammar(gname),
        vocab(vname),
        cache=MaskCache(max_bytes=cache_bytes),
        kernel_fill=kernel_fill,
    )
    assert (g.filler() is not None) == kernel_fill
    sentinel = np.int32(0x5A5A5A5A)
    tried = np.full(g.n_words + 2, sentinel, dtype=np.int32)
    ref = np.zeros(g.n_words + 2, dtype=np.int32)
    seen_none = seen_hit = 0
    for _ in range(2):  # cold cache, then everything resident
        for toks in _sessions(gname, vname, 2):
            m = g.matcher()
            for t in [*toks, None]:
                tried[:] = sentinel
                got = g.try_fill_bitmask(m.config, tried)
                p0 = g.n_walks
                want = g.fill_bitmask(m.config, ref)
                walked = g.n_walks > p0
                assert (got is None) == walked
                if got is None:
                    assert (tried == sentinel).all()  # untouched
                    seen_none += 1
                else:
                    assert got == want
                    np.testing.assert_array_equal(tried, ref)
                    seen_hit += 1
                if t is not None:
                    m.accept_token(t)
    assert seen_none and seen_hit
    if cache_bytes < 256 << 20:
        assert (g.filler().resets if kernel_fill else g.cache.stats.evictions) > 0
    m = g.matcher()
    if kernel_fill:
        # the filler's entries are its own: a MaskCache roll-over leaves them, and its rows
        # stay exact without them (the memo answers after a store reset: no walk needed)
        g.cache.roll_over(set())
        assert g.try_fill_bitmask(m.config, tried) is not None
        g.filler().reset()
        assert g.try_fill_bitmask(m.config, tried) is not None
        g._memo.clear()
        g._warm.clear()
    else:
        # entries rolled over: the fill memo alone must not answer
        g.cache.roll_over(set())
    assert g.try_fill_bitmask(m.config, tried) is None
    g.fill_bitmask(m.config, ref)
    assert g.try_fill_bitmask(m.config, tried) == g.fill_bitmask(m.config, ref)
    # cache disabled: every fill walks
    g.cache.enabled = False
    assert g.try_fill_bitmask(m.config, tried) is None


def _grammar(gname: str) -> Grammar:
    if gname == "scoped":  # scope-aware lexicons: semantic values are part of the structure
        snap = snapshot("chinook")
        return grammar("chinook").with_scopes(role_scopes(snap))
    return grammar(gname)


def _structure(cfg: Configuration) -> tuple[object, ...]:
    node: StackNode | None = cfg.stack
    out = []
    while node is not None:
        out.append((node.state, node.symbol, node.value, node.hash))
        node = node.parent
    return (tuple(out), cfg.scan)


@pytest.mark.parametrize(
    ("gname", "vname", "n"),
    [("sqlite", "gpt-2", 2), ("sqlite", "qwen2", 1), ("scoped", "gpt-2", 2)],
)
@pytest.mark.parametrize("kernel_fill", [True, False], ids=["kernel-fill", "py-fill"])
def test_warm_path_equals_reference_through_clears(
    gname: str, vname: str, n: int, kernel_fill: bool
) -> None:
    """Matcher steps (accept memo + warm records) and Guide.fill_bitmask vs a second guide
    with its own cache filled through the reference path (structural memo + collect, no
    kernel fill) and advanced by the parser: same configurations, rows, counts and entry
    ids, on a cold pass, a warm pass, after an intern-table clear, a fill-memo and
    warm-record clear, a cache roll-over, and on a cache small enough to evict every few
    publishes (the kernel fill: drop its store)."""
    g = _grammar(gname)
    v = vocab(vname)
    fast = Guide(g, v, cache=MaskCache(), kernel_fill=kernel_fill)
    ref = Guide(g, v, cache=MaskCache(), trie=fast.trie, kernel_fill=False)
    tiny = Guide(g, v, cache=MaskCache(max_bytes=64 << 10), trie=fast.trie, kernel_fill=kernel_fill)
    kf = kernel_fill and fast.filler() is not None  # scoped grammars: always the Python fill
    rt = fast.runtime
    sqls = [b"SELECT a.Title FROM Album AS a WHERE a.AlbumId < 3"] if gname != "sqlite" else []
    seqs = [greedy_tokens(vname, s) for s in (sqls or list(statements(gname, n)))]
    nw = fast.n_words
    b1, b2, b3 = (np.zeros(nw + 1, dtype=np.int32) for _ in range(3))

    def one_pass() -> int:
        steps = 0
        for toks in seqs:
            m, mt = fast.matcher(), tiny.matcher()
            cfg = rt.initial
            for t in [*toks, None]:
                b1[:] = -1
                n1 = m.fill_next_token_bitmask(b1)
                n2, ids2 = fast.fill_bitmask(m.config, b2)
                n3, ids3, _ = ref._fill(cfg, b3, True)
                np.testing.assert_array_equal(b1, b3)
                np.testing.assert_array_equal(b2, b3)
                assert n1 == n2 == n3 and ids2 == ids3
                assert fast.try_fill_bitmask(m.config, b1) == (n3, ids3)
                assert mt.fill_next_token_bitmask(b1) == n3
                np.testing.assert_array_equal(b1, b3)
                assert _structure(m.config) == _structure(cfg)
                steps += 1
                if t is None:
                    break
                m.accept_token(t)
                mt.accept_token(t)
                nxt = rt.advance(cfg, v.token_bytes[t])
                assert nxt is not None
                cfg = nxt
            m.accept_token(fast.eos_id)
        return steps

    steps = one_pass()  # cold
    hits, walks = fast.cache.stats.hits, fast.n_walks
    assert one_pass() == steps  # warm: warm records answer, no cache lookup at all
    assert fast.cache.stats.hits == hits and fast.n_walks == walks > 0
    rt._interned.clear()  # structurally equal stacks become new objects
    one_pass()
    fast._memo.clear()
    fast._warm.clear()
    one_pass()
    if kf:
        # the filler's store is its own: rows are exact without any MaskCache entry, and
        # dropping the store (as past its bound) only costs walks
        assert fast.cache.stats.publishes == 0
        fast._memo.clear()
        fast._warm.clear()
        fast.filler().reset()
        walks = fast.n_walks
        one_pass()
        assert fast.n_walks > walks
        assert tiny.filler().resets > 0
        return
    fast.cache.roll_over(set())  # every entry gone: warm records must not answer alone
    publishes = fast.cache.stats.publishes
    one_pass()
    assert fast.cache.stats.publishes > publishes
    assert tiny.cache.stats.evictions > 0


def test_fill_rows_equals_per_row_fill() -> None:
    v = vocab("gpt-2")
    ga = Guide(grammar("sqlite"), v, cache=MaskCache())
    gb = Guide(_grammar("scoped"), v, cache=MaskCache(), trie=ga.trie)
    pairs: list[tuple[Guide, Configuration]] = []
    for g, sql in ((ga, statements("sqlite", 1)[0]), (gb, b"SELECT a.Title FROM Album AS a")):
        m = g.matcher()
        for t in greedy_tokens("gpt-2", sql)[:8]:
            pairs.append((g, m.config))
            m.accept_token(t)
    k = len(pairs)
    rows = list(range(k))[::-1]  # row k-1-i gets pair i
    buf = np.full((k, ga.n_words + 3), 7, dtype=np.int32)
    cold = fill_rows(pairs, buf, rows, walk=False)
    assert cold[0] is None and (buf[rows[0]] == 7).all()  # fresh caches: walks needed
    got = fill_rows(pairs, buf, rows)
    want = np.zeros_like(buf)
    for (g, cfg), r, res in zip(pairs, rows, got, strict=True):
        assert res == g.fill_bitmask(cfg, want[r])
    np.testing.assert_array_equal(buf, want)
    buf[:] = 7
    assert fill_rows(pairs, buf, rows, walk=False) == got  # all warm now
    np.testing.assert_array_equal(buf, want)
    b2 = np.zeros((k, ga.n_words), dtype=np.int32)
    assert ga.fill_rows([c for g, c in pairs if g is ga], b2[: sum(g is ga for g, _ in pairs)]) == [
        r for (g, _), r in zip(pairs, got, strict=True) if g is ga
    ]
    with pytest.raises(ValueError):
        fill_rows(pairs, buf[0])
    with pytest.raises(ValueError):
        fill_rows(pairs, buf[:, : ga.n_words - 1])
