"""bench/serving.py end to end on a tiny protocol (SmolLM2, batches 1 and 2, 4 tokens): every arm
runs without a failed request, the engine-side split is recorded, the cold guide is injected
and served, and the report renders. Numbers are not asserted (timing belongs to the bench)."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_serving", REPO / "bench" / "serving.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_serving"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_serving_protocol_small() -> None:
    serving = _load()
    from grid_sql.serve.client import ServerClient
    from grid_sql.serve.server import GridServer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srv = GridServer("smollm2-135m", max_batch=3, n_ctx=2048, n_batch=512)
    vocab = srv.backend.vocab.fingerprint
    guides = serving.chinook_guides(serving.POLICIES, vocab)
    (cold,) = serving.chinook_guides([serving.COLD_POLICY], vocab)
    assert len({g.name for g in guides + [cold]}) == 5  # five distinct fingerprints
    with srv:
        doc = serving.protocol(
            ServerClient(srv.url),
            guides,
            cold,
            batches=[1, 2],
            max_tokens=4,
            legs=1,
            cold_batch=2,
            log=lambda _msg: None,
        )
    for b in ("1", "2"):
        for arm in ("unconstrained", "grid"):
            a = doc["batches"][b][arm]
            assert a["errors"] == 0, a["error_examples"]
            assert a["requests"] == int(b) and a["chunks_mean"] > 0
    inj = doc["cold"]["injected"]
    assert inj["fresh_error"] == "" and inj["fresh_ttft_ms"] is not None
    assert inj["errors"] == 0 and doc["cold"]["baseline"]["errors"] == 0
    table = serving.markdown(doc)
    assert "| 2 | grid |" in table and "cold-guide injection" in table
