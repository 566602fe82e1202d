"""Where a cold mask fill's time goes (issue #4): cProfile over the unseen half of a sample.

Same protocol as bench/masks.py's "unseen" pass for grid-sql (kernels on): warm the caches on
the first half of ``--n`` sampled Spider gold statements, then fill the mask at every step of
the second half under cProfile. Prints the steps, the cache misses among them, the miss and
hit latencies (with the profiler's own overhead in them), and the top functions by
cumulative time. This is the profile behind issue #4's note that the Python CD residue
resolution, not the Rust trie walk, dominates a cold miss.

    python bench/cold_profile.py --vocab qwen2 --n 40
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import masks as M  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="cumulative", help="pstats sort key (e.g. tottime)")
    ap.add_argument(
        "--no-profile", action="store_true", help="time the unseen half without cProfile"
    )
    args = ap.parse_args(argv)
    from grid_sql.mask.vocab import greedy_token_ids

    eng = M.GridEngine(M.TOKENIZERS / f"ggml-vocab-{args.vocab}.gguf")
    stmts = M.sample_statements(args.n)
    half = args.n // 2

    def run(batch: list[str]) -> list[tuple[bool, float]]:
        out = []
        for s in batch:
            eng.start()
            for tid in [*greedy_token_ids(eng.v, s.encode(), max_len=32), None]:
                t0 = time.perf_counter()
                eng.fill()
                out.append((eng.missed, time.perf_counter() - t0))
                if tid is None or not eng.accept(tid):
                    break
        return out

    run(stmts[:half])
    prof = cProfile.Profile()
    if not args.no_profile:
        prof.enable()
    res = run(stmts[half:])
    prof.disable()
    miss = sorted(d for m, d in res if m)
    hit = sorted(d for m, d in res if not m)

    def p(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")

    print(
        f"{args.vocab}: {len(res)} steps, {len(miss)} misses; miss p50 {1e3 * p(miss, 0.5):.2f} ms"
        f" p90 {1e3 * p(miss, 0.9):.2f} ms, total {1e3 * sum(miss):.0f} ms;"
        f" hit p50 {1e6 * p(hit, 0.5):.1f} µs"
        + (" (no profiler)" if args.no_profile else " (under cProfile)")
    )
    if not args.no_profile:
        pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
