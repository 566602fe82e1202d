"""Where a cold mask fill's time goes (issue #4): cProfile over the unseen half of a sample.

Same protocol as bench/masks.py's "unseen" pass for grid-sql (kernels on): warm the caches on
the first half of ``--n`` sampled Spider gold statements, then fill the mask at every step of
the second half under cProfile. Prints the steps, the cache misses among them, the miss and
hit latencies (with the profiler's own overhead in them), and the top functions by
cumulative time. This is the profile behind issue #4's note that the Python CD residue
resolution, not the Rust trie walk, dominates a cold miss.

cProfile charges its per-call overhead to exactly the many small Python calls it is meant to
weigh, so ``--timers`` measures without it instead: the pieces of a fill listed in
``TIMED`` are wrapped with wall-clock counters (one ``perf_counter`` pair per call,
counted on the measured half only) and reported as total ms, calls and µs per call; nested
pieces are included in their callers' totals.

The guide fills in Rust for this grammar (``Guide.filler``: ``_kernels.MaskFiller``,
``kernels/core/src/fill.rs``); ``--engine py-fill`` builds it with ``kernel_fill=False``, the
Python orchestration over the MaskCache that the Rust fill transcribes (same masks, rows and
entry ids: ``tests/kernels/test_mask_filler.py``), which is what cProfile and ``--timers``
can see into. A miss is a step whose fill ran a trie walk (``Guide.n_walks``).

    python bench/cold_profile.py --vocab qwen2 --n 40 --no-profile
    python bench/cold_profile.py --vocab qwen2 --n 40 --engine py-fill --timers
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import masks as M  # noqa: E402

# (module, class, method) wrapped by --timers, outermost first
TIMED = [
    ("grid_sql.mask.guide", "Guide", "_fill"),
    ("grid_sql.mask.guide", "Guide", "collect"),
    ("grid_sql.mask.guide", "Guide", "entry_for"),
    ("grid_sql.mask.walk", "Walker", "walk_payload"),
    ("grid_sql.mask.cache", "MaskEntry", "make"),
    ("grid_sql.mask.guide", "Guide", "key_for"),
    ("grid_sql.mask.cache", "MaskCache", "get"),
    ("grid_sql.mask.guide", "Guide", "_advance_class"),
    ("grid_sql.parser.incremental", "ParserRuntime", "shift"),
    ("grid_sql.parser.incremental", "ParserRuntime", "remainder_live"),
    ("grid_sql.parser.incremental", "ParserRuntime", "_lalr_mask"),
    ("grid_sql.mask.cache", "PackedWords", "or_into"),
    ("grid_sql.parser.incremental", "ParserRuntime", "eos_allowed"),
]


def install_timers(on: list[bool]) -> dict[str, list[float]]:
    """Wrap every ``TIMED`` method with a counter that runs while ``on[0]``; returns
    ``{"Class.method": [seconds, calls]}``."""
    import importlib

    acc: dict[str, list[float]] = {}
    for mod, cls_name, meth in TIMED:
        cls = getattr(importlib.import_module(mod), cls_name)
        orig = getattr(cls, meth)
        label = f"{cls_name}.{meth}"
        slot = acc[label] = [0.0, 0.0]

        def timed(*a: Any, _orig: Any = orig, _slot: list[float] = slot, **k: Any) -> Any:
            if not on[0]:
                return _orig(*a, **k)
            t0 = time.perf_counter()
            try:
                return _orig(*a, **k)
            finally:
                _slot[0] += time.perf_counter() - t0
                _slot[1] += 1

        setattr(cls, meth, timed)
    return acc


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="cumulative", help="pstats sort key (e.g. tottime)")
    ap.add_argument(
        "--no-profile", action="store_true", help="time the unseen half without cProfile"
    )
    ap.add_argument(
        "--timers",
        action="store_true",
        help="no cProfile: wall-clock counters around the pieces of a fill (TIMED)",
    )
    ap.add_argument(
        "--engine",
        choices=["guide", "py-fill"],
        default="guide",
        help="guide: as shipped (the Rust fill); py-fill: kernel_fill=False (Python orchestration)",
    )
    args = ap.parse_args(argv)
    if args.timers and args.engine == "guide":
        ap.error("--timers weighs the Python fill's pieces: use it with --engine py-fill")
    timing = [False]
    acc = install_timers(timing) if args.timers else {}
    if args.timers:
        args.no_profile = True
    from grid_sql.mask.vocab import greedy_token_ids

    eng = M.GridEngine(
        M.TOKENIZERS / f"ggml-vocab-{args.vocab}.gguf", kernel_fill=args.engine == "guide"
    )
    stmts = M.sample_statements(args.n)
    half = args.n // 2

    def run(batch: list[str]) -> list[tuple[bool, float]]:
        out = []
        for s in batch:
            eng.start()
            for tid in [*greedy_token_ids(eng.v, s.encode(), max_len=32), None]:
                eng.pre_fill()
                t0 = time.perf_counter()
                eng.fill()
                dt = time.perf_counter() - t0
                eng.post_fill()
                out.append((eng.missed, dt))
                if tid is None or not eng.accept(tid):
                    break
        return out

    run(stmts[:half])
    prof = cProfile.Profile()
    if not args.no_profile:
        prof.enable()
    timing[0] = True
    res = run(stmts[half:])
    timing[0] = False
    prof.disable()
    miss = sorted(d for m, d in res if m)
    hit = sorted(d for m, d in res if not m)

    def p(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")

    print(
        f"{args.vocab}: {len(res)} steps, {len(miss)} misses; miss p50 {1e3 * p(miss, 0.5):.2f} ms"
        f" p90 {1e3 * p(miss, 0.9):.2f} ms, total {1e3 * sum(miss):.0f} ms;"
        f" hit p50 {1e6 * p(hit, 0.5):.1f} µs"
        + (" [Rust fill]" if args.engine == "guide" else " [Python fill]")
        + (
            " (timers on)"
            if args.timers
            else " (no profiler)"
            if args.no_profile
            else " (under cProfile)"
        )
    )
    if args.timers:
        fills = acc["Guide._fill"][0] or float("nan")
        print(f"{'piece':28s} {'ms':>8s} {'calls':>8s} {'µs/call':>8s} {'of _fill':>8s}")
        for label, (sec, calls) in acc.items():
            per = 1e6 * sec / calls if calls else 0.0
            print(
                f"{label:28s} {1e3 * sec:8.0f} {int(calls):8d} {per:8.1f} {100 * sec / fills:7.0f}%"
            )
    if not args.no_profile:
        pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
