"""What a warm grid-sql fill costs and why (issue #4): the figures behind RESULTS-masks'
"Why the Qwen2 warm figures were over" and "cheaper entry ids".

Same protocol as ``bench/masks.py`` for grid-sql: ``--n`` sampled Spider gold statements, the
first half fed to warm the caches, then every configuration of the second half filled once
(the replay). Reported:

* replay steps and distinct row buffers among their warm records (rows shared by content);
* µs for the numpy copy of those rows into a caller's buffer, and for the whole
  ``Matcher.fill_next_token_bitmask``, with the rows hot (just filled) and with 8 MB of
  other memory written before each step (rows and records pushed out of L2);
* µs for BLAKE2b (``hashlib``, as ``MaskEntry.make``) over the largest entry payload of the
  replay's fills, as an int32 id list and as the bitmap ``ids_payload`` uses.

    python bench/warm_rows.py --vocab qwen2 --n 4
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import masks as M  # noqa: E402


def _p50_p99(xs: list[float]) -> str:
    a = np.sort(np.array(xs))
    return f"p50 {a[len(a) // 2]:.2f} µs, p99 {a[int(len(a) * 0.99)]:.2f} µs"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from grid_sql.mask.cache import ids_payload
    from grid_sql.mask.vocab import greedy_token_ids

    eng = M.GridEngine(M.TOKENIZERS / f"ggml-vocab-{args.vocab}.gguf")
    v, g = eng.v, eng.guide
    stmts = M.sample_statements(args.n)
    seqs = [greedy_token_ids(v, s.encode(), max_len=32) for s in stmts]
    st = {"steps": 0, "rejected": 0}
    for ids in seqs:  # every configuration seen once: all later fills are warm
        M.run_statement(eng, ids, v.eos_token_id, None, st)
    rows, cfgs = [], []
    for ids in seqs[args.n // 2 :]:
        m = g.matcher()
        for t in [*ids, None]:
            cfgs.append(m.config)
            rec = g._warm_for(m.config).fill
            assert rec is not None, "a replayed configuration has no warm record"
            rows.append(rec[0])
            if t is None:
                break
            m.accept_token(t)
    distinct = len({r.__array_interface__["data"][0] for r in rows})
    print(
        f"{args.vocab}: {len(rows)} replay steps, {distinct} distinct row buffers, "
        f"{rows[0].nbytes} bytes per row"
    )

    buf = np.zeros(g.n_words, dtype=np.int32)
    junk = np.ones(2 << 20, dtype=np.int32)  # 8 MB

    def timed(step: Callable[[int], None], evict: bool) -> list[float]:
        out = []
        for k in range(len(rows)):
            if evict:
                np.add(junk, 1, out=junk)
            t0 = time.perf_counter_ns()
            step(k)
            out.append((time.perf_counter_ns() - t0) / 1000.0)
        return out

    def copy(k: int) -> None:
        buf[...] = rows[k]

    matchers = []
    for c in cfgs:
        m = g.matcher()
        m.config = c
        matchers.append(m)

    def fill(k: int) -> None:
        matchers[k].fill_next_token_bitmask(buf)

    for name, step in (("row copy", copy), ("warm fill", fill)):
        for evict in (False, True):
            best = min(
                (timed(step, evict) for _ in range(args.repeats)),
                key=lambda xs: float(np.median(xs)),
            )
            where = "after 8 MB written" if evict else "hot"
            print(f"  {name}, {where}: {_p50_p99(best)}")

    # the largest CI payload among the replay's entries (the filler's or the MaskCache's)
    n_max, big = 0, np.zeros(0, dtype=np.int32)
    for c in cfgs:
        ids, _, _ = g.allowed_ids(c)
        if ids.size > n_max:
            n_max, big = int(ids.size), ids.astype(np.int32)
    listed = b"ids-i32le/v1" + struct.pack("<I", big.size) + big.astype("<i4").tobytes()
    for name, data in (("id list", listed), ("ids_payload", ids_payload(big))):
        reps = 50
        t0 = time.perf_counter()
        for _ in range(reps):
            hashlib.blake2b(data, digest_size=16, person=b"grid-sql-entry").digest()
        us = (time.perf_counter() - t0) / reps * 1e6
        print(
            f"  BLAKE2b over the largest mask ({n_max} ids) as {name}: {len(data)} bytes, "
            f"{us:.0f} µs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
