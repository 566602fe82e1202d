"""Serving benchmark for a GPU host running vLLM (issue #7 §3; paper §8.5): same protocol as CPU.

No GPU is available where grid-sql is developed, so this script is kept ready for a host that
has one; run there, its output is committed as a new section of ``bench/RESULTS-serving.md``
with the host line it prints. It drives an already running vLLM OpenAI-compatible server with
grid-sql's batch-level logits processor installed; the protocol, guides, prompts and report
are those of ``bench/serving.py`` (imported from it), so the CPU and GPU records compare.

On the GPU host::

    pip install 'grid-sql[vllm]'          # vLLM pinned by the extra; the processor is an
                                          # entry point in the vllm.logits_processors group
    vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 64 \\
        --logits-processors grid_sql.serve.vllm:GridLogitsProcessor &
    python bench/serving_vllm.py --url http://127.0.0.1:8000/v1 \\
        --tokenizer Qwen/Qwen2.5-7B-Instruct --batches 1 8 32 --cold-batch 31 --legs 3 \\
        --max-tokens 64 --out bench/results/serving-gpu.json

(``--logits-processors`` is only needed when the entry point is not picked up; check the
class name against ``grid_sql/serve/vllm.py``.) ``--tokenizer`` is the served model's
tokenizer (a Hugging Face id or directory, or a GGUF file): the guide specs are compiled for
its vocabulary fingerprint, and the server refuses a spec for another tokenizer.

Arms per batch size (1/8/32): ``unconstrained`` (no grid arguments: the control) and ``grid``
(four distinct guides, request ``i`` on guide ``i % 4``), after a warm-up pass over the
largest batch (warm-through protocol). ``--fallback`` adds the declared fallback arm
(``server-grammar``: the same four role grammars exported to the server's structured-output
backend, ``--grammar-backend xgrammar|guidance``). Then the cold-guide injection: a warm batch
of ``--cold-batch`` co-tenants, a never-seen guide joins, the co-tenants' worst inter-chunk gap
and TPOT degradation over its cold window versus a baseline leg, its TTFT.

Expected output (stdout; the JSON document in ``--out`` holds the same numbers, per-arm
dictionaries under ``batches.<B>.<arm>`` and ``cold.baseline`` / ``cold.injected``)::

    host: <hostname> | GPU: <nvidia-smi name, driver> | vLLM <version> | model <id> | ...
    | batch | arm | TPOT p50 ms | TPOT p90 ms | TTFT p50 ms | tok/s | chunks/req |
      deferred | errors |                       (one table row per line)
    | 1 | unconstrained | <ms> | <ms> | <ms> | <tok/s> | <n> | 0 | <n> |
    | 1 | grid | <ms> | <ms> | <ms> | <tok/s> | <n> | 0 | <n> |
    | 1 | overhead | <pct> % | ...
    ... the same three rows for 8 and 32 (and a server-grammar row with --fallback)
    | cold-guide injection | baseline (no injection) | injected |
    | co-tenant worst gap in window, ms | <ms> | <ms> |
    | co-tenant TPOT p50, ms / degradation / cold window / fresh TTFT / fresh deferred |

``deferred`` is only
known on grid-sql's test server (vLLM does not report it: ``0``); ``errors`` counts failed
requests (their messages are in the JSON). The engine's own step times are not visible over
HTTP; the co-tenants' inter-chunk gaps are the client-side measure of the same thing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import serving  # noqa: E402  (bench/serving.py: the shared protocol)

from grid_sql.serve.client import ServerClient, grammar_request  # noqa: E402


def vocabulary_fingerprint(tokenizer: str, vocab_size: int | None) -> str:
    """The fingerprint of the served tokenizer (GGUF file, HF directory or HF id)."""
    from grid_sql.mask.vocab import Vocabulary

    if tokenizer.endswith(".gguf"):
        return Vocabulary.from_gguf(tokenizer).fingerprint
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    return Vocabulary.from_hf(tok, vocab_size=vocab_size).fingerprint


def fallback_guides(guides: Sequence[serving.Guide], backend: str) -> list[serving.Guide]:
    """The same roles as ``server-grammar`` requests (exported grammar, no vllm_xargs)."""
    from grid_sql.data import chinook_path
    from grid_sql.grammar import Grammar
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.policy.grammar import role_grammar
    from grid_sql.schema import introspect

    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    engine.dispose()
    out = []
    for g, p in zip(guides, serving.POLICIES, strict=True):
        pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(p, origin="bench"), snap)
        fields, _ = grammar_request(role_grammar(Grammar.dialect("sqlite"), snap, pol), backend)  # type: ignore[arg-type]
        out.append(serving.Guide("fallback:" + g.name, fields, g.tables))
    return out


def gpu_line() -> str:
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        return r.stdout.strip().replace("\n", "; ") or "no nvidia-smi output"
    except OSError:
        return "nvidia-smi not found"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="the vLLM server's base URL, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--tokenizer", help="the served model's tokenizer (HF id/dir or GGUF)")
    ap.add_argument("--vocab-size", type=int, default=None, help="logit rows if padded")
    ap.add_argument("--model", default=None, help="served model name (default: the first)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--legs", type=int, default=3)
    ap.add_argument("--cold-batch", type=int, default=31)
    ap.add_argument("--fallback", action="store_true", help="add the server-grammar arm")
    ap.add_argument("--grammar-backend", default="xgrammar", choices=["xgrammar", "guidance"])
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "serving-gpu.json")
    a = ap.parse_args(argv)
    if not a.url or not a.tokenizer:
        print(
            "bench/serving_vllm.py runs on a GPU host against a vLLM server with grid-sql's "
            "processor: pass --url and --tokenizer (see the module docstring). Nothing run."
        )
        return 0
    warnings.simplefilter("ignore")
    client = ServerClient(a.url, model=a.model, timeout_s=3600)
    vocab = vocabulary_fingerprint(a.tokenizer, a.vocab_size)
    guides = serving.chinook_guides(serving.POLICIES, vocab)
    (cold,) = serving.chinook_guides([serving.COLD_POLICY], vocab)
    cold.name = "cold:" + cold.name.split(":", 1)[1]
    host = serving.host_info()
    host["gpu"] = gpu_line()
    print(
        f"host: {host['host']} | GPU: {host['gpu']} | model {client.model} | load "
        f"{host['loadavg_start']}"
    )
    t0 = time.perf_counter()
    doc = serving.protocol(
        client,
        guides,
        cold,
        batches=a.batches,
        max_tokens=a.max_tokens,
        legs=a.legs,
        cold_batch=a.cold_batch,
    )
    if a.fallback:
        fb = fallback_guides(guides, a.grammar_backend)
        for b in a.batches:
            samples = []
            for _ in range(a.legs):
                samples += serving.run_batch(client, fb, b, a.max_tokens)
            doc["batches"][str(b)]["server-grammar"] = serving.summarize(samples)
            print(f"batch {b} server-grammar: {doc['batches'][str(b)]['server-grammar']}")
    host["loadavg_end"] = os.getloadavg()
    doc.update(
        host=host,
        model=client.model,
        command=" ".join(["python", *sys.argv]),
        max_tokens=a.max_tokens,
        legs=a.legs,
        seconds=time.perf_counter() - t0,
    )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2, default=str))
    print(serving.markdown(doc))
    print(f"\nwritten {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
