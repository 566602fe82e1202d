"""grid-sql masks on a GPU decode loop: TPOT overhead, per-step fill, a cold guide (issue #28 §5).

Made for a lent GPU machine with no network, PyTorch and transformers but no vLLM, and at most
64 MiB of files sent along: the model is a Qwen2-architecture network with **random weights**
at the Qwen2.5-Coder-1.5B configuration (built on the device, nothing downloaded), so the
forward pass costs what the real model's does; the text it writes is meaningless, which does not
matter for what is measured. The vocabulary is the real Qwen2.5 one (the masks are those of the
served tokenizer), shipped as a small file made here once::

    python bench/serving_gpu.py --export-vocab bench/results/qwen2.5-vocab.json.gz
    # on the GPU machine (one command):
    python bench/serving_gpu.py --vocab bench/results/qwen2.5-vocab.json.gz --device cuda \\
        --out bench/results/serving-gpu.json
    # CPU smoke test of the same code (tiny random model, 2 layers):
    python bench/serving_gpu.py --vocab bench/results/qwen2.5-vocab.json.gz --tiny \\
        --batches 1 4 --new-tokens 8 --legs 1

Protocol (greedy, a 64-token prompt per request, ``--new-tokens`` 128 decode steps):

* per batch size (1/8/32), after an untimed warm-through leg, two arms: ``unconstrained``
  (argmax of the logits) and ``grid`` (four Chinook role guides across the batch, request
  ``i`` on guide ``i % 4``, compiled and warmed before timing; each step one
  ``BatchMasker.fill(..., block=True)`` for every row (as vLLM's processor must), one
  ``apply_token_bitmask_inplace`` on the device, argmax, tokens accepted). Both arms copy the
  step's tokens to the host (an engine does; the masks need them). TPOT = median decode-step
  wall time (CUDA synchronised), over ``--legs`` legs, the arms alternating; ``overhead`` =
  grid / unconstrained - 1. ``fill`` = median and p90 of the host fill + mask upload per step.
* cold guide into a warm batch (``--cold-batch``, default 32): the batch decodes on the four
  warm guides; at step 16 the last request is re-assigned a never-seen guide (a fifth role),
  its build submitted to the registry's worker. Until its guide is ready that row is *deferred*
  (``fill(..., block=False)`` reports it pending; its token is not taken and its output is
  discarded: the skip-a-round of paper §6.3; never an approximate mask). Reported: the
  co-tenants' worst and median step over the cold window (steps until the guide is ready,
  and 16 after) against the warm leg's, and the steps the cold row waited.

Output: a Markdown table on stdout (committed as a section of ``bench/RESULTS-serving.md`` with
the host line it prints) and the same numbers as JSON in ``--out``.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from grid_sql.data import chinook_path
from grid_sql.mask.logits import apply_token_bitmask_inplace
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect
from grid_sql.serve import BatchMasker, GuideRegistry, GuideSpec

#: Qwen2.5-Coder-1.5B's architecture (its config.json), vocabulary from ``--vocab``
QWEN15B = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    hidden_act="silu",
)
TINY = dict(
    QWEN15B,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
ROLES = [
    {"verbs": ["select"]},
    {"verbs": ["select"], "tables": {"deny": ["Employee"]}},
    {"verbs": ["select"], "tables": {"allow": ["Artist", "Album"]}},
    {"verbs": ["select"], "tables": {"allow": ["Track", "Genre", "MediaType"]}},
]
COLD_ROLE = {"verbs": ["select"], "tables": {"allow": ["Invoice", "InvoiceLine", "Customer"]}}
PROMPT_LEN = 64
COLD_AT = 16


def export_vocab(path: Path, model: str) -> None:
    """Write the vocabulary of a local GGUF test model (``--model``) as gzipped JSON."""
    from grid_sql.decode.models import fetch_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        v = Vocabulary.from_gguf(fetch_model(model))
    doc = {
        "tokens": [base64.b64encode(t).decode() for t in v.token_bytes],
        "eos": v.eos_token_id,
        "special": sorted(v.special_ids),
        "fingerprint": v.fingerprint,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    print(f"{path}: {v.size} tokens, {path.stat().st_size / 2**20:.1f} MiB, {v.fingerprint[:16]}")


def load_vocab(path: Path) -> Vocabulary:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        v = Vocabulary.from_token_bytes(
            [base64.b64decode(t) for t in doc["tokens"]],
            eos_token_id=doc["eos"],
            special_ids=doc["special"],
        )
    if v.fingerprint != doc["fingerprint"]:
        raise SystemExit(f"{path}: vocabulary fingerprint mismatch (corrupt file?)")
    return v


def build_model(vocab: Vocabulary, tiny: bool, device: str) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab.size, **(TINY if tiny else QWEN15B))
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(dtype)
    return model.eval()


def specs(vocab: Vocabulary) -> tuple[list[GuideSpec], GuideSpec]:
    snap = introspect(open_sqlite(chinook_path()))
    base = sqlite_baseline(snap)

    def spec(role: dict[str, Any]) -> GuideSpec:
        p = narrow(base, AppPolicy.from_mapping(role, origin="bench/serving_gpu"), snap)
        return GuideSpec.from_parts(p, snap, vocab)

    return [spec(r) for r in ROLES], spec(COLD_ROLE)


def run_leg(
    model: Any,
    vocab: Vocabulary,
    reg: GuideRegistry,
    guides: list[GuideSpec] | None,
    batch: int,
    steps: int,
    device: str,
    cold: GuideSpec | None = None,
) -> dict[str, Any]:
    """One greedy decode of ``batch`` requests; per-step wall times, fill times, cold info."""
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    gen = torch.Generator().manual_seed(batch)
    prompt = torch.randint(0, vocab.size, (batch, PROMPT_LEN), generator=gen).to(device)
    masker = BatchMasker(vocab, reg) if guides is not None else None
    if masker is not None:
        for i in range(batch):
            masker.add(i, guides[i % len(guides)])
    step_s: list[float] = []
    fill_s: list[float] = []
    cold_wait = 0
    cold_ready_at: int | None = None
    with torch.inference_mode():
        out = model(input_ids=prompt, use_cache=True)
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
        last = torch.argmax(logits, dim=-1)
        sync()
        for step in range(steps):
            t0 = time.perf_counter()
            out = model(input_ids=last[:, None], past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            pending = np.zeros(batch, dtype=bool)
            if masker is not None:
                if cold is not None and step == COLD_AT:
                    masker.add(batch - 1, cold)  # a never-seen guide: built on the worker
                f0 = time.perf_counter()
                # every mask in the step (as vLLM's processor must), except in the cold arm,
                # where a row whose guide is not ready is deferred
                fill = masker.fill(list(range(batch)), block=cold is None)
                bits = torch.from_numpy(fill.bitmask).to(device, non_blocking=True)
                apply_token_bitmask_inplace(logits, bits, vocab_size=vocab.size)
                fill_s.append(time.perf_counter() - f0)
                pending = fill.pending
                if cold is not None and step >= COLD_AT:
                    if pending[batch - 1]:
                        cold_wait += 1
                    elif cold_ready_at is None:
                        cold_ready_at = step
            nxt = torch.argmax(logits, dim=-1)
            toks = nxt.cpu().numpy()  # the host copy every engine makes
            if masker is not None:
                for i in range(batch):
                    if not pending[i]:
                        masker.accept(i, int(toks[i]))
            last = torch.where(torch.from_numpy(pending).to(device), last, nxt)
            sync()
            step_s.append(time.perf_counter() - t0)
    if masker is not None:
        masker.close()
    return {
        "step_s": step_s,
        "fill_s": fill_s,
        "cold_wait_steps": cold_wait,
        "cold_ready_step": cold_ready_at,
    }


def ms(xs: list[float], q: float = 0.5) -> float:
    return float(np.quantile(np.asarray(xs), q) * 1e3) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=Path, help="vocabulary file from --export-vocab")
    ap.add_argument("--export-vocab", type=Path, help="write the vocabulary file and exit")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="GGUF for --export-vocab")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="2-layer model (CPU smoke test)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--legs", type=int, default=3)
    ap.add_argument("--cold-batch", type=int, default=32)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.export_vocab:
        export_vocab(a.export_vocab, a.model)
        return
    if a.vocab is None:
        ap.error("--vocab is required (make it with --export-vocab)")
    import torch

    vocab = load_vocab(a.vocab)
    model = build_model(vocab, a.tiny, a.device)
    gpu = torch.cuda.get_device_name() if a.device.startswith("cuda") else "none"
    host = (
        f"host: {platform.node()} | GPU: {gpu} | torch {torch.__version__} | "
        f"model Qwen2 random weights, {'tiny' if a.tiny else 'Qwen2.5-Coder-1.5B'} config | "
        f"vocab {vocab.size} ({vocab.fingerprint[:12]}) | {a.new_tokens} new tokens, "
        f"{a.legs} legs"
    )
    print(host)
    guides, cold = specs(vocab)
    res: dict[str, Any] = {"host": host, "batches": {}}
    with GuideRegistry() as reg:
        t0 = time.perf_counter()
        for g in guides:
            reg.get(g, vocab)
        print(f"4 guides compiled in {time.perf_counter() - t0:.2f} s")
        run_leg(model, vocab, reg, None, max(a.batches), 4, a.device)  # CUDA warm-up
        print("| batch | arm | TPOT p50 ms | TPOT p90 ms | fill p50 ms | fill p90 ms |")
        print("| --- | --- | --- | --- | --- | --- |")
        for b in a.batches:
            # warm-through: the same prompts fill every mask once, untimed (steady state)
            run_leg(model, vocab, reg, guides, b, a.new_tokens, a.device)
            legs: dict[str, list[dict[str, Any]]] = {"unconstrained": [], "grid": []}
            for _ in range(a.legs):
                legs["unconstrained"].append(
                    run_leg(model, vocab, reg, None, b, a.new_tokens, a.device)
                )
                legs["grid"].append(run_leg(model, vocab, reg, guides, b, a.new_tokens, a.device))
            row: dict[str, Any] = {}
            for arm, ls in legs.items():
                steps = [s for leg in ls for s in leg["step_s"]]
                fills = [s for leg in ls for s in leg["fill_s"]]
                row[arm] = {
                    "tpot_p50_ms": ms(steps),
                    "tpot_p90_ms": ms(steps, 0.9),
                    "fill_p50_ms": ms(fills),
                    "fill_p90_ms": ms(fills, 0.9),
                }
                r = row[arm]
                print(
                    f"| {b} | {arm} | {r['tpot_p50_ms']:.3f} | {r['tpot_p90_ms']:.3f} | "
                    f"{r['fill_p50_ms']:.3f} | {r['fill_p90_ms']:.3f} |"
                )
            over = row["grid"]["tpot_p50_ms"] / row["unconstrained"]["tpot_p50_ms"] - 1
            row["overhead_pct"] = 100 * over
            print(f"| {b} | overhead | {100 * over:+.2f} % | | | |")
            res["batches"][str(b)] = row
        cb = a.cold_batch
        run_leg(model, vocab, reg, guides, cb, a.new_tokens, a.device)  # warm-through
        warm = run_leg(model, vocab, reg, guides, cb, a.new_tokens, a.device)
        hot = run_leg(model, vocab, reg, guides, cb, a.new_tokens, a.device, cold=cold)
        end = (hot["cold_ready_step"] or a.new_tokens) + 16
        win = slice(COLD_AT, min(end, a.new_tokens))
        res["cold"] = {
            "batch": cb,
            "window_steps": [win.start, win.stop],
            "warm_max_ms": ms(warm["step_s"][win], 1.0),
            "warm_p50_ms": ms(warm["step_s"][win]),
            "cold_max_ms": ms(hot["step_s"][win], 1.0),
            "cold_p50_ms": ms(hot["step_s"][win]),
            "cold_wait_steps": hot["cold_wait_steps"],
            "cold_ready_step": hot["cold_ready_step"],
        }
        c = res["cold"]
        print(
            f"cold guide into a warm batch of {cb} at step {COLD_AT}: first token taken at step "
            f"{c['cold_ready_step']} ({c['cold_wait_steps']} steps deferred: build, cold walks); "
            f"co-tenants' step "
            f"over steps {win.start}-{win.stop}: max {c['cold_max_ms']:.2f} ms, p50 "
            f"{c['cold_p50_ms']:.2f} ms (warm leg: max {c['warm_max_ms']:.2f}, p50 "
            f"{c['warm_p50_ms']:.2f})"
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(main())
