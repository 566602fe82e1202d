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


def test_check_first_sampling_draws_the_masked_softmax() -> None:
    """Two stages, as the decode loop samples with ``check_first``: a draw from the whole
    softmax is kept when allowed, else a draw from the masked softmax follows. Over many
    draws each allowed token's frequency is its masked-softmax probability (and a blocked
    token never comes), including a blocked favourite holding most of the mass."""
    from grid_sql.decode.loop import draw_unmasked

    n = 12
    logits = np.array([2.0, 0.5, 3.5, -1.0, 0.0, 1.0, 2.5, -2.0, 0.7, 1.5, 4.0, 0.1])
    allowed = np.array([0, 1, 3, 5, 8, 9])  # 2, 6 and 10 (the favourite) are blocked
    buf = np.zeros(1, dtype=np.int32)
    buf.view(np.uint32)[0] = np.uint32(sum(1 << int(i) for i in allowed))
    temperature = 0.8
    z = np.exp((logits[allowed] - logits[allowed].max()) / temperature)
    want = np.zeros(n)
    want[allowed] = z / z.sum()
    rng = np.random.default_rng(2026)
    draws = 60_000
    counts = np.zeros(n)
    second = 0
    for _ in range(draws):
        t = draw_unmasked(logits, temperature, rng)
        if t is None or not (int(buf[0]) >> t) & 1:
            second += 1
            t = pick_token(logits, buf, temperature, rng)
        counts[t] += 1
    got = counts / draws
    assert counts[[2, 6, 10]].sum() == 0
    sigma = np.sqrt(want * (1 - want) / draws)
    assert np.all(np.abs(got - want) <= 5 * sigma + 1e-12), (got, want)
    assert 0.5 < second / draws < 0.95  # the blocked favourite made the second stage common
    # a row with no finite maximum has no first-stage draw
    assert draw_unmasked(np.full(4, -np.inf), 1.0, rng) is None
