"""Rust mask fill ≡ Python mask fill, along real statements.

``_kernels.MaskFiller`` (``kernels/core/src/fill.rs``: root entry, CD residue resolution,
sub-walks, row in one call) against ``Guide._fill`` (the reference orchestration over the
same Rust trie walk) at every configuration reached while feeding Spider statements
(SQLite dialect grammar), the dialects' fixture queries (PostgreSQL, MySQL) and Chinook
statements (a select-only role grammar with a schema lexicon) token by token: the row,
the allowed count and the entry ids in order (which audit trails replay) must be
identical, over GPT-2, Llama-2 (SPM), Qwen2 and Llama-3 vocabularies. Both sides start
from empty stores, so the first statements are all misses and later ones mix hits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grid_sql.grammar import Grammar
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.mask.walk import kernels_enabled, mask_filler, stack_pairs

from ..mask.helpers import greedy_tokens, vocab
from .helpers import grammar, statements

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

pytestmark = pytest.mark.skipif(
    not kernels_enabled(), reason="grid_sql._kernels not built (run `make ext`)"
)


def _setup(gname: str, vname: str) -> tuple[Guide, object, list[bytes]]:
    if gname in ("postgresql", "mysql"):
        g = Grammar.dialect(gname)
        lines = (FIXTURES / gname / "queries.sql").read_text().splitlines()
        sqls = [s.encode() for s in lines if s.strip() and not s.startswith("--")][::6]
    else:
        g = grammar(gname)
        sqls = list(statements(gname, 3 if gname == "sqlite" else 2))
    v = vocab(vname)
    guide = Guide(g, v, cache=MaskCache())
    return guide, mask_filler(guide.walker, v.size, v.eos_token_id), sqls


def _run(guide: Guide, filler: object, sqls: list[bytes], vname: str) -> tuple[int, int]:
    nw = guide.n_words
    a = np.zeros(nw + 3, dtype=np.int32)
    b = np.full(nw + 3, -1, dtype=np.int32)
    steps = walked = 0
    for sql in sqls:
        m = guide.matcher()
        for t in [*greedy_tokens(vname, sql), None]:
            cfg = m.config
            s = cfg.scan
            n, ids, _ = guide._fill(cfg, a, True)
            before = filler.walks  # type: ignore[attr-defined]
            got = filler.fill(  # type: ignore[attr-defined]
                stack_pairs(cfg.stack), (s.dfa, s.rem, s.la_len, s.la_state), b, True
            )
            walked += filler.walks > before  # type: ignore[attr-defined]
            assert got is not None
            assert (got[0], tuple(got[1])) == (n, ids), (sql, t)
            assert np.array_equal(a, b), (sql, t)
            steps += 1
            if t is None:
                break
            m.accept_token(t)
    return steps, walked


CASES = [
    ("gpt-2", "sqlite"),
    ("gpt-2", "chinook"),
    ("gpt-2", "postgresql"),
    ("gpt-2", "mysql"),
    ("llama-spm", "sqlite"),
    ("llama-spm", "chinook"),
    pytest.param("qwen2", "sqlite", marks=pytest.mark.slow),
    pytest.param("qwen2", "chinook", marks=pytest.mark.slow),
    pytest.param("llama-bpe", "sqlite", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("vname", "gname"), CASES)
def test_filler_equals_guide_fill(vname: str, gname: str) -> None:
    guide, filler, sqls = _setup(gname, vname)
    guide.cache.enabled = True
    # the structural fill memo would answer repeated configurations without the
    # orchestration under test: compare against a fresh reference fill every time
    guide._memo.clear()
    steps, walked = _run(guide, filler, sqls, vname)
    assert steps > 20 and walked > 3, (steps, walked)
    # the same statements again: every entry is stored, nothing is walked
    before = filler.walks  # type: ignore[attr-defined]
    _run(guide, filler, sqls[:1], vname)
    assert filler.walks == before  # type: ignore[attr-defined]


def test_memo_limit_drops_the_resolution_memos_only() -> None:
    """With a tiny memo limit the class records and sub-walk memos are dropped between most
    fills: rows and entry ids stay equal to the reference, and no entry is walked twice."""
    guide, filler, sqls = _setup("sqlite", "gpt-2")
    filler.set_memo_limit(16)  # type: ignore[attr-defined]
    guide._memo.clear()
    steps, walked = _run(guide, filler, sqls, "gpt-2")
    assert steps > 20 and walked > 3
    assert filler.walks == filler.n_entries  # type: ignore[attr-defined]


def test_walk_false_needs_every_entry_stored() -> None:
    guide, filler, sqls = _setup("sqlite", "gpt-2")
    cfg = guide.matcher().config
    s = cfg.scan
    scan = (s.dfa, s.rem, s.la_len, s.la_state)
    out = np.full(guide.n_words, 7, dtype=np.int32)
    assert filler.fill(stack_pairs(cfg.stack), scan, out, False) is None  # type: ignore[attr-defined]
    assert (out == 7).all()  # untouched
    got = filler.fill(stack_pairs(cfg.stack), scan, out, True)  # type: ignore[attr-defined]
    again = filler.fill(stack_pairs(cfg.stack), scan, out, False)  # type: ignore[attr-defined]
    assert got is not None and again == got
    with pytest.raises(BufferError, match="i32"):
        filler.fill(stack_pairs(cfg.stack), scan, np.zeros(guide.n_words, np.int64), True)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=">= "):
        filler.fill(stack_pairs(cfg.stack), scan, np.zeros(3, np.int32), True)  # type: ignore[attr-defined]


def test_filler_stores_share_the_cache_bound() -> None:
    """Every guide's filler store counts against its cache's ``max_bytes``: past it, the least
    recently grown other stores are dropped, and masks after a drop are unchanged."""
    g = grammar("sqlite")
    v = vocab("gpt-2")
    sqls = list(statements("sqlite", 3))

    def rows(guide: Guide) -> list[np.ndarray]:
        out = []
        buf = np.zeros(guide.n_words, dtype=np.int32)
        for sql in sqls:
            m = guide.matcher()
            for t in [*greedy_tokens("gpt-2", sql), None]:
                guide.fill_bitmask(m.config, buf)
                out.append(buf.copy())
                if t is None:
                    break
                m.accept_token(t)
        return out

    want = rows(Guide(g, v, cache=MaskCache()))
    probe = Guide(g, v, cache=MaskCache())
    rows(probe)
    one = probe.store_nbytes()
    assert one > 0
    cache = MaskCache(max_bytes=one + one // 2)  # room for one guide's store, not two
    a = Guide(g, v, cache=cache)
    b = Guide(g, v, cache=cache)
    assert [r.tobytes() for r in rows(a)] == [r.tobytes() for r in want]
    assert cache.store_drops == 0 and cache.store_bytes == a.store_nbytes() == one
    assert [r.tobytes() for r in rows(b)] == [r.tobytes() for r in want]
    assert cache.store_drops >= 1
    assert a.store_nbytes() < one  # a's store was dropped while b's grew
    assert cache.store_bytes <= cache.max_bytes
    a._memo.clear()  # through the filler again: a dropped store refills to the same masks
    a._warm.clear()
    assert [r.tobytes() for r in rows(a)] == [r.tobytes() for r in want]
