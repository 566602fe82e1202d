"""The batched fill (issue #28 §3): one native call (``_kernels.copy_rows``, GIL released)
writes every warm row of a step; rows must equal per-row fills bit for bit, for
heterogeneous guides, padded widths, and a row order unrelated to the guides'."""

from __future__ import annotations

import random

import numpy as np
import pytest

from grid_sql import _kernels
from grid_sql.mask import guide as guide_mod
from grid_sql.mask.guide import fill_rows
from grid_sql.serve import GuideRegistry

from . import guides as G


@pytest.fixture(scope="module")
def configs():
    """(guide, configuration) at every position of the four test statements."""
    with GuideRegistry() as reg:
        out = []
        for role, sqls in G.SQL.items():
            g = reg.get(G.spec(role), G.vocab())
            for sql in sqls:
                m = g.matcher()
                for t in G.tokens(sql):
                    out.append((g, m.config))
                    m.accept_token(t)
                out.append((g, m.config))
        yield out


def per_row(pairs, width: int) -> np.ndarray:
    ref = np.full((len(pairs), width), -7, dtype=np.int32)
    for i, (g, cfg) in enumerate(pairs):
        g.fill_bitmask(cfg, ref[i])
    return ref


def test_batched_fill_equals_per_row_fills(configs) -> None:
    assert guide_mod._copy_rows is _kernels.copy_rows  # the native path is the one tested
    g0 = configs[0][0]
    pairs = list(configs)
    random.Random(3).shuffle(pairs)
    for width in (g0.n_words, g0.n_words + 5):
        ref = per_row(pairs, width)  # also warms every record: the batch is all warm hits
        buf = np.full((len(pairs) + 3, width), -1, dtype=np.int32)
        rows = random.Random(width).sample(range(len(pairs) + 3), len(pairs))
        got = fill_rows(pairs, buf, rows)
        assert all(r is not None for r in got)
        assert np.array_equal(buf[rows], ref)
        untouched = sorted(set(range(len(pairs) + 3)) - set(rows))
        assert (buf[untouched] == -1).all()


def test_native_and_python_copies_agree(configs, monkeypatch) -> None:
    pairs = configs[:40]
    w = pairs[0][0].n_words
    per_row(pairs, w)
    a = np.zeros((len(pairs), w), dtype=np.int32)
    fill_rows(pairs, a)
    monkeypatch.setattr(guide_mod, "_copy_rows", None)
    b = np.ones((len(pairs), w), dtype=np.int32)
    fill_rows(pairs, b)
    assert np.array_equal(a, b)
    # repeated rows take the per-row path (order-sensitive): the last pair's mask wins
    monkeypatch.undo()
    c = np.zeros((2, w), dtype=np.int32)
    fill_rows([pairs[0], pairs[5]], c, [1, 1])
    assert np.array_equal(c[1], per_row([pairs[5]], w)[0]) and not c[0].any()


def test_copy_rows_refuses_bad_input_untouched() -> None:
    out = np.full((2, 4), 3, dtype=np.int32)
    src = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="out of range"):
        _kernels.copy_rows([src, src], out, [0, 2])
    with pytest.raises(ValueError, match="words"):
        _kernels.copy_rows([np.arange(5, dtype=np.int32)], out, [0])
    with pytest.raises(ValueError, match="destination rows"):
        _kernels.copy_rows([src], out, [0, 1])
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.copy_rows([out[1]], out, [0])
    with pytest.raises(ValueError, match="2-d"):
        _kernels.copy_rows([src], out[0], [0])
    with pytest.raises(ValueError, match="writable"):
        ro = out.copy()
        ro.setflags(write=False)
        _kernels.copy_rows([src], ro, [0])
    assert (out == 3).all()
    _kernels.copy_rows([src[:2]], out, [1])
    assert out[1].tolist() == [0, 1, 0, 0] and out[0].tolist() == [3, 3, 3, 3]


def test_records_given_by_matchers_give_the_same_rows(configs) -> None:
    """``records=`` (a matcher's warm record) skips the lookup; a record of another
    configuration is not trusted (looked up again), so rows stay exact either way."""
    pairs = configs[:30]
    w = pairs[0][0].n_words
    ref = per_row(pairs, w)
    recs = [g._warm_for(cfg) for g, cfg in pairs]
    got = np.zeros_like(ref)
    fill_rows(pairs, got, records=recs)
    assert np.array_equal(got, ref)
    shifted = recs[1:] + recs[:1]  # every record belongs to another configuration
    got2 = np.zeros_like(ref)
    fill_rows(pairs, got2, records=shifted)
    assert np.array_equal(got2, ref)
    with pytest.raises(ValueError, match="records"):
        fill_rows(pairs, got2, records=recs[:3])
