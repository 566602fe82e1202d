"""The processor inside a real vLLM engine (needs a GPU: vLLM's model runner V2, which loads
custom logits processors, does not run on CPU). Skipped here and on CI, which have none.

On a GPU host with ``pip install 'grid-sql[vllm]'``: SmolLM2-135M (the cached GGUF, or
``GRID_SQL_VLLM_MODEL``) generates for two guided requests with different guides and one
unguided request in one batch; every token of a guided output must be accepted by a local
matcher of the same guide, and the output must end at EOS only where the statement is complete.
"""

from __future__ import annotations

import os

import pytest

from grid_sql.serve import grid_args

from . import guides as G

pytestmark = pytest.mark.gpu


def _engine_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("needs torch and a GPU")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU: vLLM's model runner V2 (custom logits processors) is GPU-only")
    try:
        from vllm import LLM
    except ImportError as e:  # the CI venv has vLLM's interface modules only
        pytest.skip(f"needs a full vLLM install ([vllm] extra): {e}")
    return LLM


def test_real_engine_masks_are_exact(monkeypatch) -> None:
    LLM = _engine_or_skip()
    from vllm import SamplingParams

    from grid_sql.serve import vllm as grid_vllm

    model = os.environ.get("GRID_SQL_VLLM_MODEL", G.gguf_path())
    monkeypatch.setenv(grid_vllm.ENV_TOKENIZER, os.environ.get(grid_vllm.ENV_TOKENIZER, model))
    llm = LLM(
        model=model,
        logits_processors=[grid_vllm.GridLogitsProcessor],
        enforce_eager=True,
        gpu_memory_utilization=0.3,
        max_model_len=1024,
    )
    prompt = "Write one SQLite query over the Chinook database: "
    params = [
        SamplingParams(max_tokens=64, temperature=0.8, seed=1, extra_args=grid_args(G.spec(r)))
        for r in ("demo", "artists")
    ] + [SamplingParams(max_tokens=16, temperature=0.8, seed=1)]
    outs = llm.generate([prompt] * 3, params)
    reg = grid_vllm.shared_registry()
    for role, out in zip(("demo", "artists"), outs[:2], strict=True):
        m = reg.get(G.spec(role), G.vocab()).matcher()
        for t in out.outputs[0].token_ids:
            m.accept_token(t)  # raises TokenRejected if the engine sampled outside the mask
        if out.outputs[0].finish_reason == "stop":  # EOS: only where the statement is complete
            assert m.is_terminated() or m.is_accepting()
