"""Picking a token reads only the allowed ids' logits: the same pick as on a row masked in
place (greedy, ties, a blocked favourite, sampling with one seed), on a real vocabulary's
mask size."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.decode.backend import MaskApplier
from grid_sql.decode.loop import pick_token

V = 151_936  # Qwen2's output width


def _mask(allowed: np.ndarray) -> np.ndarray:
    buf = np.zeros((V + 31) // 32, dtype=np.int32)
    words = buf.view(np.uint32)
    np.bitwise_or.at(words, allowed >> 5, np.uint32(1) << (allowed & 31).astype(np.uint32))
    return buf


@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("seed", range(6))
def test_pick_on_raw_logits_equals_pick_on_masked_logits(temperature: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=V).astype(np.float32)
    n_allowed = [1, 3, 200, 40_000, V // 2, V][seed]
    allowed = np.sort(rng.choice(V, size=n_allowed, replace=False))
    if seed % 2:  # the model's favourite is blocked
        logits[rng.integers(V)] = 50.0
        logits[allowed[0]] = 10.0
        logits[allowed[-1]] = 10.0  # a tie among the allowed: the lowest id wins
    buf = _mask(allowed)
    masked = logits.copy()
    MaskApplier(V)(masked, buf)
    raw = logits.copy()
    a = pick_token(raw, buf, temperature, np.random.default_rng(99))
    b = pick_token(masked, buf, temperature, np.random.default_rng(99))
    assert a == b and a in set(allowed.tolist())
    np.testing.assert_array_equal(raw, logits)  # the row was not written
    # the caller's unmasked argmax (the bind-on-close policy computes it) changes nothing
    assert a == pick_token(raw, buf, temperature, np.random.default_rng(99), int(np.argmax(raw)))
    if temperature == 0.0:
        assert a == int(np.argmax(masked))
