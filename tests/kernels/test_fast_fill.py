"""The warm-path entry points: ``try_fill_bitmask`` (fill only without a trie walk) and
the fast paths of ``fill_bitmask`` equal the reference fill bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide

from ..mask.helpers import greedy_tokens, vocab
from .helpers import grammar, statements


def _sessions(gname: str, vname: str, n: int) -> list[list[int]]:
    return [greedy_tokens(vname, sql) for sql in statements(gname, n)]


@pytest.mark.parametrize(("gname", "vname"), [("sqlite", "gpt-2"), ("chinook", "llama-spm")])
def test_try_fill_is_none_exactly_when_a_walk_is_needed(gname: str, vname: str) -> None:
    g = Guide(grammar(gname), vocab(vname), cache=MaskCache())
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
                p0 = g.cache.stats.publishes
                want = g.fill_bitmask(m.config, ref)
                walked = g.cache.stats.publishes > p0
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
    # entries rolled over: the fill memo alone must not answer
    g.cache.roll_over(set())
    m = g.matcher()
    assert g.try_fill_bitmask(m.config, tried) is None
    g.fill_bitmask(m.config, ref)
    assert g.try_fill_bitmask(m.config, tried) == g.fill_bitmask(m.config, ref)
    # cache disabled: every fill walks
    g.cache.enabled = False
    assert g.try_fill_bitmask(m.config, tried) is None
