"""End-to-end cost of the guard: tokens/s unconstrained vs constrained, per backend (issue #6 §6).

For each question of the Chinook business set (``bench/chinook_questions.json``) and each
backend (llama.cpp on the GGUF file; transformers on CPU on the same GGUF, dequantized to
float32 by transformers), the same prompt (the Asker's) is decoded twice, greedy:

* ``unconstrained`` — ``prefill`` then one ``step`` per argmax token, stopping at ``;``, an
  end-of-generation token or the budget (what :mod:`bench.spider_eval` runs);
* ``constrained`` — :func:`grid_sql.decode.loop.generate` under the role's guide (exact mask
  per step, forced spans, the reserve, one :class:`StepRecord` per token).

Reported per (backend, arm): tokens, decode seconds (the prompt's prefill excluded, since it
is the same for both arms), tokens/s, and for the constrained arm the *guard share* —
everything the loop spends outside the model's forward passes divided by the decode time —
with where that time goes. The loop's own :class:`~grid_sql.decode.loop.Timings` give
``prefill``/``model``/``mask``/``reserve``/``total``; the bench additionally wraps
``Guide.fill_bitmask`` and the matcher's ``accept_token(s)``/``rollback``/``forced_tokens``
with timers (instrumentation only, installed for the run) to split ``mask`` into the fill and
the logits application + pick, and the remainder into parser advance and record keeping.

Why the prefill is excluded from the share: the issue's target is the guard's share of
*decode* time; prefill of a ~1,000-token schema prompt is most of a short query's wall time
and would make any guard look cheap.

The guide (grammar x vocabulary compilation) and the first fills of a fresh process are a
one-time cost; ``--warm`` runs the whole question set once untimed first so the table shows
the steady state of a long-running process, and the cold pass is reported separately.

    python bench/e2e.py --backends llama.cpp transformers --n 20 \
        --out bench/results/e2e-qwen2.5-coder-0.5b.jsonl
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spider_eval import (  # noqa: E402  (bench/ is not a package)
    Question,
    append_jsonl,
    extract_sql,
    git_commit,
    load_chinook_questions,
    read_jsonl,
    record_files,
)

BACKENDS = ("llama.cpp", "transformers")


@dataclass
class Probe:
    """Seconds spent in the instrumented guard calls (reset per generation)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def add(self, name: str, dt: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + dt
        self.calls[name] = self.calls.get(name, 0) + 1


@contextmanager
def instrumented(probe: Probe) -> Iterator[None]:
    """Wrap the guard's hot calls with timers for the duration of the block."""
    from grid_sql.mask.guide import Guide, Matcher

    targets: list[tuple[type, str, str]] = [
        (Guide, "fill_bitmask", "fill"),
        (Guide, "fill_bitmask_digest", "fill"),  # the decode loop's fill (digest kept warm)
        (Matcher, "accept_token", "advance"),
        (Matcher, "accept_tokens", "advance"),
        (Matcher, "rollback", "rollback"),
        (Matcher, "forced_tokens", "forced"),
    ]
    saved: list[tuple[type, str, Any]] = []
    depth = [0]  # accept_tokens calls accept_token: time the outermost call only

    def wrap(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            if depth[0]:
                return fn(*a, **kw)
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                probe.add(name, time.perf_counter() - t0)
                depth[0] -= 1

        return timed

    for cls, attr, name in targets:
        orig = cls.__dict__[attr]
        saved.append((cls, attr, orig))
        setattr(cls, attr, wrap(orig, name))
    try:
        yield
    finally:
        for cls, attr, orig in saved:
            setattr(cls, attr, orig)


def run_unconstrained(backend: Any, prompt: list[int], max_tokens: int) -> dict[str, Any]:
    """Greedy decode without a mask; times prefill and decode separately."""
    import numpy as np

    vocab = backend.vocab
    stops = set(vocab.special_ids) | {vocab.eos_token_id}
    t0 = time.perf_counter()
    logits = backend.prefill(prompt)
    t_pre = time.perf_counter() - t0
    toks: list[int] = []
    model_s = 0.0
    t1 = time.perf_counter()
    while len(toks) < max_tokens:
        tok = int(np.argmax(logits))
        if tok in stops:
            break
        toks.append(tok)
        if ";" in extract_sql(vocab.spell(toks).decode("utf-8", errors="replace")):
            break
        t2 = time.perf_counter()
        logits = backend.step([tok])
        model_s += time.perf_counter() - t2
    decode = time.perf_counter() - t1
    return {
        "tokens": len(toks),
        "prefill_s": t_pre,
        "decode_s": decode,
        "model_s": model_s,
        "guard_s": 0.0,
        "sql": extract_sql(vocab.spell(toks).decode("utf-8", errors="replace")),
    }


def run_constrained(
    backend: Any,
    guide: Any,
    prompt: list[int],
    max_tokens: int,
    probe: Probe,
    check_first: bool = True,
) -> dict[str, Any]:
    """One :func:`generate` call; the loop's timings plus the probe's split of the guard."""
    from grid_sql.decode.loop import generate

    probe.reset()
    with instrumented(probe):
        gen = generate(backend, guide, prompt, max_tokens=max_tokens, check_first=check_first)
    t = gen.timings
    decode = t.total - t.prefill
    fill = probe.seconds.get("fill", 0.0)
    return {
        "tokens": gen.n_tokens,
        "forced": sum(1 for r in gen.records if r.kind.value == "forced"),
        "checked": sum(1 for r in gen.records if r.kind.value == "checked"),
        "prefill_s": t.prefill,
        "decode_s": decode,
        "model_s": t.model,
        "guard_s": t.guard,
        "fill_s": fill,
        "apply_pick_s": max(0.0, t.mask - fill),
        "reserve_s": t.reserve,
        "advance_s": probe.seconds.get("advance", 0.0) + probe.seconds.get("rollback", 0.0),
        "forced_s": probe.seconds.get("forced", 0.0),
        "fills": probe.calls.get("fill", 0),
        "sql": gen.sql,
        "stop_reason": gen.stop_reason.value,
    }


def load(backend_name: str, model: str) -> Any:
    from grid_sql.decode.backend import load_backend

    return load_backend(model, backend=backend_name)


def measure(
    questions: Sequence[Question],
    *,
    backend_name: str,
    model: str,
    max_tokens: int,
    warm: bool,
    out: Path | None,
    log: Any = None,
    check_first: bool = True,
) -> list[dict[str, Any]]:
    """Both arms on every question with one backend; returns (and appends) the records."""
    from grid_sql.ask.asker import Asker, guide_for

    t0 = time.perf_counter()
    backend = load(backend_name, model)
    load_s = time.perf_counter() - t0
    db = questions[0].db_path(Path("."))
    asker = Asker(db, model=backend, audit=False, max_tokens=max_tokens)
    t0 = time.perf_counter()
    guide = guide_for(asker.grammar, backend)
    guide_s = time.perf_counter() - t0
    # the termination reserve's table is per (grammar, vocabulary) like the guide: a one-time
    # cost reported beside it, not inside the first question's guard
    from grid_sql.mask.reserve import reserve_table

    t0 = time.perf_counter()
    reserve_table(guide.grammar, guide.vocab).cost(guide.runtime.initial)
    reserve_s = time.perf_counter() - t0
    probe = Probe()
    prompts = {q.qid: backend.chat_prompt(asker.messages(q.question)) for q in questions}
    meta = {
        "backend": backend_name,
        "model": model,
        "commit": git_commit(),
        "kernels": os.environ.get("GRID_SQL_KERNELS", "1") != "0",
        "load_s": load_s,
        "guide_s": guide_s,
        "reserve_table_s": reserve_s,
        "check_first": check_first,
    }
    recs: list[dict[str, Any]] = []
    passes = ("cold", "warm") if warm else ("cold",)
    for pas in passes:
        for q in questions:
            u = run_unconstrained(backend, prompts[q.qid], max_tokens)
            c = run_constrained(backend, guide, prompts[q.qid], max_tokens, probe, check_first)
            for arm, r in (("unconstrained", u), ("constrained", c)):
                recs.append(
                    {**meta, "pass": pas, "qid": q.qid, "arm": arm,
                     "prompt_tokens": len(prompts[q.qid]), **r}
                )  # fmt: skip
            if log is not None:
                print(
                    f"[{backend_name} {pas}] q{q.qid}: unc {u['tokens']} tok "
                    f"{u['decode_s']:.2f}s | con {c['tokens']} tok {c['decode_s']:.2f}s "
                    f"guard {c['guard_s'] * 1000:.0f} ms",
                    file=log,
                    flush=True,
                )
    if out is not None:
        append_jsonl(out, recs)
    return recs


def _host() -> str:
    from hostinfo import cpu_model

    cpu = cpu_model(platform.processor() or platform.machine())
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def report(records: Sequence[dict[str, Any]]) -> str:
    """Markdown: tokens/s per (backend, pass, arm) and the guard's share with its split."""
    lines = [
        "| backend | pass | arm | n | tokens | decode s | tok/s | model s | guard s "
        "| guard share of decode |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    split = [
        "| backend | pass | mask fill | logits mask + pick | reserve | parser advance "
        "| forced-span search | records + rest | fills/token | guard ms/token |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = sorted({(r["backend"], r["pass"]) for r in records}, key=lambda k: (k[0], k[1]))
    for be, pas in keys:
        for arm in ("unconstrained", "constrained"):
            rs = [r for r in records if (r["backend"], r["pass"], r["arm"]) == (be, pas, arm)]
            if not rs:
                continue
            tok = sum(r["tokens"] for r in rs)
            dec = sum(r["decode_s"] for r in rs)
            mod = sum(r["model_s"] for r in rs)
            grd = sum(r["guard_s"] for r in rs)
            share = f"{100 * grd / dec:.2f}%" if arm == "constrained" and dec else "–"
            lines.append(
                f"| {be} | {pas} | {arm} | {len(rs)} | {tok} | {dec:.2f} | "
                f"{tok / dec if dec else 0:.1f} | {mod:.2f} | {grd:.3f} | {share} |"
            )
            if arm == "constrained" and dec and grd:
                parts = {
                    k: sum(r[k] for r in rs)
                    for k in ("fill_s", "apply_pick_s", "reserve_s", "advance_s", "forced_s")
                }
                rest = max(0.0, grd - sum(parts.values()))
                fills = sum(r["fills"] for r in rs)

                def pc(x: float, grd: float = grd) -> str:
                    return f"{1000 * x:.0f} ms ({100 * x / grd:.0f}%)"

                split.append(
                    f"| {be} | {pas} | {pc(parts['fill_s'])} | {pc(parts['apply_pick_s'])} | "
                    f"{pc(parts['reserve_s'])} | {pc(parts['advance_s'])} | "
                    f"{pc(parts['forced_s'])} | {pc(rest)} | {fills / max(tok, 1):.2f} | "
                    f"{1000 * grd / max(tok, 1):.2f} |"
                )
    per_q = [
        r["guard_s"] / r["decode_s"]
        for r in records
        if r["arm"] == "constrained" and r["decode_s"] > 0 and r["pass"] == "warm"
    ]
    tail = []
    if per_q:
        tail = [
            "",
            f"Per-question guard share (warm, constrained): median "
            f"{100 * statistics.median(per_q):.2f}%, max {100 * max(per_q):.2f}% (n={len(per_q)}).",
        ]
    meta = sorted(
        {
            (r["backend"], round(r["load_s"], 1), round(r["guide_s"], 2),
             round(r.get("reserve_table_s", 0.0), 2))
            for r in records
        }
    )  # fmt: skip
    once = [
        "",
        "One-time costs (first record of each backend): model load s, guide compile s, "
        "reserve table s (0: built inside the first question, before it was timed apart): ",
    ]
    once[-1] += "; ".join(f"{b} {ls} s, {gs} s, {rs} s" for b, ls, gs, rs in meta)
    modes = sorted({bool(r.get("check_first", False)) for r in records})
    once.append("")
    once.append(
        "Decode loop: "
        + ", ".join("check-first (default)" if m else "every mask (--every-mask)" for m in modes)
    )
    return "\n".join(lines + ["", "Where the guard's time goes (constrained arm):", ""] + split
                     + tail + once) + "\n"  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--backends", nargs="+", default=["llama.cpp"], choices=BACKENDS)
    ap.add_argument("--n", type=int, default=0, help="first N Chinook questions (0: all)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--no-warm", dest="warm", action="store_false")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--every-mask",
        dest="check_first",
        action="store_false",
        help="fill every step's mask (generate(check_first=False)): the loop before check-first",
    )
    ap.add_argument("--report", action="store_true", help="render the tables from --out")
    args = ap.parse_args(argv)
    if args.report:
        if args.out is None or not record_files(args.out):
            raise SystemExit("--report needs an existing --out file (or its committed .gz)")
        done = read_jsonl(args.out)
        sys.stdout.write(report(done))
        return 0
    qs = load_chinook_questions()
    if args.n:
        qs = qs[: args.n]
    print(f"host: {_host()}; load at start: {os.getloadavg()}", file=sys.stderr)
    recs: list[dict[str, Any]] = []
    for be in args.backends:
        recs += measure(
            qs,
            backend_name=be,
            model=args.model,
            max_tokens=args.max_tokens,
            warm=args.warm,
            out=args.out,
            log=sys.stderr,
            check_first=args.check_first,
        )
    print(f"load at end: {os.getloadavg()}", file=sys.stderr)
    sys.stdout.write(report(recs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
