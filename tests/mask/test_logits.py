"""apply_token_bitmask_inplace: numpy and torch agree with the id-level definition."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.mask.guide import bitmask_words, ids_to_bitmask
from grid_sql.mask.logits import apply_token_bitmask_inplace


def _case(rng: np.random.Generator, vocab: int, width: int):
    allowed = [
        np.sort(rng.choice(vocab, size=rng.integers(0, vocab), replace=False)) for _ in range(3)
    ]
    masks = np.stack([ids_to_bitmask(a, bitmask_words(vocab)) for a in allowed])
    logits = rng.standard_normal((3, width)).astype(np.float32)
    expect = np.full_like(logits, -np.inf)
    for r, a in enumerate(allowed):
        expect[r, a] = logits[r, a]
    return logits, masks, expect


@pytest.mark.parametrize("vocab,width", [(1, 1), (31, 31), (32, 32), (100, 100), (77, 96)])
def test_numpy_rows_and_batches(vocab: int, width: int) -> None:
    rng = np.random.default_rng(vocab)
    logits, masks, expect = _case(rng, vocab, width)
    one = logits[0].copy()
    apply_token_bitmask_inplace(one, masks[0])
    np.testing.assert_array_equal(one, expect[0])
    apply_token_bitmask_inplace(logits, masks, vocab_size=vocab)
    np.testing.assert_array_equal(logits, expect)


@pytest.mark.parametrize("vocab,width", [(1, 1), (33, 33), (100, 100), (77, 96)])
def test_torch_matches_numpy(vocab: int, width: int) -> None:
    import torch  # in the [dev] extra: CI has it, so no skip

    rng = np.random.default_rng(1000 + vocab)
    logits, masks, expect = _case(rng, vocab, width)
    t = torch.from_numpy(logits.copy())
    apply_token_bitmask_inplace(t, torch.from_numpy(masks), vocab_size=vocab)
    np.testing.assert_array_equal(t.numpy(), expect)
    row = torch.from_numpy(logits[1].copy())
    apply_token_bitmask_inplace(row, masks[1])  # a numpy bitmask for a tensor is fine
    np.testing.assert_array_equal(row.numpy(), expect[1])


def test_padding_past_the_vocabulary_is_blocked() -> None:
    mask = ids_to_bitmask(np.arange(40, dtype=np.int32), bitmask_words(40))  # all 40 allowed
    logits = np.zeros(70, dtype=np.float32)  # output layer padded past the mask's 64 bits
    apply_token_bitmask_inplace(logits, mask, vocab_size=40)
    assert np.isfinite(logits[:40]).all() and np.isneginf(logits[40:]).all()


def test_bad_shapes_and_types() -> None:
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(np.zeros(8, np.float32), np.zeros((1, 1), np.int32))
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(np.zeros((2, 8), np.float32), np.zeros((3, 1), np.int32))
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(np.zeros(8, np.float32), np.zeros(1, np.int64))
    with pytest.raises(TypeError):
        apply_token_bitmask_inplace([0.0] * 8, np.zeros(1, np.int32))
