"""The CD-resolution memos (hash-consed stacks, verdict classes, memoized sub-walks) give
the same entries, alias classes and masks as resolving every residue entry afresh."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.mask import residue as residue_mod
from grid_sql.mask.cache import MaskEntry
from grid_sql.mask.guide import Guide
from grid_sql.parser import Configuration, incremental
from grid_sql.parser.incremental import EMPTY_SCAN
from grid_sql.parser.stack import StackNode

from ..mask.helpers import greedy_tokens
from .helpers import grammar, guide_pair, statements


def naive_collect(g: Guide, cfg: Configuration) -> tuple[list[str], list[int]]:
    """Definition 4 resolved entry by entry with no memo: (entry ids, CD alias ids)."""
    rt = g.runtime
    ids: list[str] = []
    extra: list[int] = []

    def rec(c: Configuration, node: int) -> None:
        e = g.entry_for(c, node)
        ids.append(e.entry_id)
        for sub, term, requeue in e.residue:
            raw = rt._advance(rt.shift(c.stack, term), EMPTY_SCAN, requeue)
            if raw is None:
                continue
            c2 = Configuration(*raw)
            if rt.remainder_live(*raw):
                extra.extend(g.trie.ids_at(sub).tolist())
            rec(c2, sub)

    rec(cfg, 0)
    return ids, extra


@pytest.mark.parametrize(("gname", "vname"), [("sqlite", "gpt-2"), ("chinook", "llama-spm")])
def test_memoized_resolution_equals_naive(gname: str, vname: str) -> None:
    gk, _ = guide_pair(gname, vname)
    stmts = statements(gname, 2)
    for _ in range(2):  # second pass: every sub-walk and verdict class comes from the memos
        for sql in stmts:
            m = gk.matcher()
            for t in greedy_tokens(vname, sql):
                entries, extra = gk.collect(m.config)
                want_ids, want_extra = naive_collect(gk, m.config)
                assert [e.entry_id for e in entries] == want_ids
                got_extra = np.concatenate(extra).tolist() if extra else []
                assert got_extra == want_extra
                m.accept_token(t)
    assert gk._n_subs and gk._advanced


def test_cache_off_bypasses_sub_memo_and_agrees() -> None:
    gk, gp = guide_pair("chinook", "llama-spm")
    gp.cache.enabled = False  # reference: every entry walked, no sub-walk memo
    bk = np.zeros(gk.n_words, dtype=np.int32)
    bp = np.zeros(gp.n_words, dtype=np.int32)
    m = gk.matcher()
    for t in greedy_tokens("llama-spm", statements("chinook", 1)[0]):
        assert gk.fill_bitmask(m.config, bk) == gp.fill_bitmask(m.config, bp)
        np.testing.assert_array_equal(bk, bp)
        m.accept_token(t)
    assert gp._n_subs == 0


def test_roll_over_clears_sub_memo() -> None:
    gk, _ = guide_pair("chinook", "llama-spm")
    m = gk.matcher()
    m.accept_tokens(greedy_tokens("llama-spm", b"select Name from Artist where "))
    first = gk.collect(m.config)
    assert gk._n_subs
    gen = gk.cache.generation
    assert gk.cache.roll_over(set()) > 0
    assert gk.cache.generation == gen + 1
    publishes = gk.cache.stats.publishes
    again = gk.collect(m.config)
    # the sub-walks were re-resolved through the (emptied) cache, not replayed
    assert gk.cache.stats.publishes - publishes == len({e.entry_id for e in first[0]})
    assert [e.entry_id for e in again[0]] == [e.entry_id for e in first[0]]
    assert all(isinstance(e, MaskEntry) for e in again[0])


def test_pushes_are_hash_consed_and_clearing_is_harmless(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = grammar("sqlite")
    rt = incremental.ParserRuntime(g)  # private intern table
    text = b"SELECT a, b FROM t WHERE a = 1 ORDER BY b"
    c1 = rt.advance(rt.initial, text)
    c2 = rt.advance(rt.initial, text)
    assert c1 is not None and c2 is not None
    assert c1.stack is c2.stack  # equal stacks built from the root are one object

    def chain(node: StackNode) -> list[tuple[int, int]]:
        out = []
        n: StackNode | None = node
        while n is not None:
            out.append((n.state, n.hash))
            n = n.parent
        return out

    monkeypatch.setattr(incremental, "INTERN_LIMIT", 3)  # clear on almost every push
    rt2 = incremental.ParserRuntime(g)
    c3 = rt2.advance(rt2.initial, text)
    assert c3 is not None and c3.stack is not c1.stack
    assert chain(c3.stack) == chain(c1.stack)  # same states, same rolling hashes
    assert len(rt2._interned) <= 3
    assert rt2.allowed_mask(c3.stack) == rt.allowed_mask(c1.stack)


def test_memo_limits_clear_without_changing_masks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(residue_mod, "SUB_MEMO_LIMIT", 2)
    monkeypatch.setattr(residue_mod, "RESOLVE_MEMO_LIMIT", 2)
    gk, gp = guide_pair("chinook", "llama-spm")
    m = gk.matcher()
    for t in greedy_tokens("llama-spm", statements("chinook", 2)[1]):
        ids, extra = naive_collect(gk, m.config)
        entries, got = gk.collect(m.config)
        assert [e.entry_id for e in entries] == ids
        assert (np.concatenate(got).tolist() if got else []) == extra
        assert gk._n_subs <= 2 and len(gk._advanced) <= 2 and len(gk._shifted) <= 2
        m.accept_token(t)
