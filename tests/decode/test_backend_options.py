"""Backend options (issue #28 §4): ``n_ctx``, ``n_threads``, ``n_gpu_layers``, ``device`` from
arguments, the CLI and ``GRID_SQL_*`` variables, each checked with a typed error, and reaching
llama.cpp (context, threads) and the prompt budget."""

from __future__ import annotations

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.cli import _parser
from grid_sql.data import chinook_path
from grid_sql.decode.options import BackendOptions, default_threads
from grid_sql.errors import OptionError


def test_arguments_win_over_the_environment():
    env = {"GRID_SQL_N_CTX": "8192", "GRID_SQL_N_THREADS": "3", "GRID_SQL_N_GPU_LAYERS": "-1"}
    o = BackendOptions.resolve(n_ctx=2048, env=env)
    assert (o.n_ctx, o.n_threads, o.n_gpu_layers, o.device) == (2048, 3, -1, None)
    assert o.explicit == {"n_ctx"}
    assert o.llama_kwargs() == {"n_ctx": 2048, "n_threads": 3, "n_gpu_layers": -1}
    # an environment variable for the other backend is ignored, an explicit argument is not
    assert "n_gpu_layers" not in o.transformers_kwargs()
    with pytest.raises(OptionError, match="applies to llama.cpp"):
        BackendOptions.resolve(n_gpu_layers=10, env={}).transformers_kwargs()
    with pytest.raises(OptionError, match="transformers"):
        BackendOptions.resolve(device="cuda", env={}).llama_kwargs()
    assert BackendOptions.resolve(env={"GRID_SQL_DEVICE": "cuda:1"}).device == "cuda:1"
    assert 1 <= default_threads() <= 8


@pytest.mark.parametrize(
    ("kw", "env", "match"),
    [
        ({"n_ctx": 100}, {}, r"n_ctx must be in \[256"),
        ({"n_ctx": "big"}, {}, "n_ctx must be an integer"),
        ({"n_threads": 0}, {}, "n_threads must be in"),
        ({"n_gpu_layers": -2}, {}, "n_gpu_layers must be in"),
        ({"n_ctx": True}, {}, "integer"),
        ({"device": "gpu0"}, {}, "torch device"),
        ({}, {"GRID_SQL_N_CTX": "4k"}, r"GRID_SQL_N_CTX \(environment\)"),
        ({}, {"GRID_SQL_N_THREADS": "-1"}, "GRID_SQL_N_THREADS"),
    ],
)
def test_bad_values_are_option_errors(kw, env, match):
    with pytest.raises(OptionError, match=match):
        BackendOptions.resolve(**kw, env=env)


def test_asker_and_cli_take_the_options(monkeypatch):
    with pytest.raises(OptionError):
        Asker(chinook_path(), audit=False, n_threads=0)
    monkeypatch.setenv("GRID_SQL_N_CTX", "2048")
    a = Asker(chinook_path(), audit=False)
    assert a.backend_options.n_ctx == 2048
    # no model loaded: the prompt budget is the byte bound under the option's context
    # (2048 - 256 answer - 16 margin - 256 + 256 for a repair round = 1264)
    msgs = a.messages("How many customers are there?")
    assert sum(len(m["content"].encode()) for m in msgs) <= 1264
    assert "CREATE TABLE Customer (" in msgs[0]["content"]
    args = _parser().parse_args(
        ["ask", "q", "--db", "x.sqlite", "--n-ctx", "8192", "--threads", "4",
         "--n-gpu-layers", "-1", "--device", "cuda"]
    )  # fmt: skip
    assert (args.n_ctx, args.threads, args.n_gpu_layers, args.device) == (8192, 4, -1, "cuda")


def test_llama_cpp_gets_context_and_threads(smollm2_gguf):
    from grid_sql.decode.backend import load_backend

    b = load_backend(
        str(smollm2_gguf), options=BackendOptions.resolve(n_ctx=512, n_threads=1, env={})
    )
    assert (b.n_ctx, b.llm.n_ctx(), b.n_threads) == (512, 512, 1)
    assert b.count_tokens("SELECT 1") == len(b.llm.tokenize(b"SELECT 1", add_bos=False))


def test_offload_on_a_cpu_build_is_refused(smollm2_gguf):
    import llama_cpp

    from grid_sql.decode.backend import LlamaCppBackend

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python build can offload")
    with pytest.raises(OptionError, match="cannot offload"):
        LlamaCppBackend(str(smollm2_gguf), n_gpu_layers=-1)


def test_transformers_context_bounds_and_counts(smollm2_gguf, smollm2_vocab):
    """transformers has no fixed context: ``n_ctx`` bounds prompt + generation (default
    4096 within the model's ``max_position_embeddings``), and more than the model's is
    refused."""
    from grid_sql.decode.backend import TransformersBackend
    from grid_sql.errors import ModelError

    with pytest.raises(OptionError, match="max_position_embeddings"):
        TransformersBackend(str(smollm2_gguf), vocab=smollm2_vocab, n_ctx=1_000_000)
    b = TransformersBackend(str(smollm2_gguf), vocab=smollm2_vocab, n_ctx=300, n_threads=1)
    assert b.n_ctx == 300
    assert b.count_tokens("SELECT 1") == len(b.tokenizer.encode("SELECT 1"))
    with pytest.raises(ModelError, match="context window of 300 tokens exceeded"):
        b.prefill(list(range(1, 302)))
