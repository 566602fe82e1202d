#!/usr/bin/env python
"""Where the scoped role grammar's slowest fills go (issue #26, ``bench/RESULTS-masks.md``).

Every fill of the 42 Chinook gold statements (shuffled with seed 0) in one fresh Guide of
the Asker's scoped role grammar, cold, in order: total, p99 and slowest fill, CD class
advances (``Guide._advance_class`` calls), the objects the cyclic garbage collector tracks
at the end and what one full collection of them takes. ``--no-gc`` runs the fills with the
collector off (what the collector's passes add); ``--no-age`` keeps the CD memos of every
earlier fill instead of the last one (``mask/residue.py``: what aging costs in advances and
saves in collections).

    PYTHONPATH=. python bench/scoped_gc.py [--no-gc] [--no-age]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from masks import TOKENIZERS  # noqa: E402
from role_masks import QUESTIONS, chinook_role, grammar_for  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--no-gc", action="store_true", help="fills with the collector off")
    ap.add_argument("--no-age", action="store_true", help="CD memos kept across all fills")
    args = ap.parse_args()

    import numpy as np

    import grid_sql as gs
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.vocab import greedy_token_ids

    v = gs.Vocabulary.from_gguf(str(TOKENIZERS / f"ggml-vocab-{args.vocab}.gguf"))
    snap, pol = chinook_role()
    stmts = [q["gold"] for q in json.loads(QUESTIONS.read_text())["questions"]]
    random.Random(0).shuffle(stmts)
    guide = Guide(grammar_for("role+scopes", snap, pol), v, cache=MaskCache())
    if args.no_age:
        guide._age_resolution_memo = lambda: None  # type: ignore[method-assign]
    advances = [0]
    real = guide._advance_class

    def counted(*a: object, **k: object) -> object:
        advances[0] += 1
        return real(*a, **k)  # type: ignore[arg-type]

    guide._advance_class = counted  # type: ignore[method-assign,assignment]
    if args.no_gc:
        gc.disable()
    ms: list[float] = []
    buf = np.zeros(guide.n_words, dtype=np.int32)
    for s in stmts:
        m = guide.matcher()
        for t in greedy_token_ids(v, s.encode(), max_len=32):
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(buf)
            ms.append((time.perf_counter() - t0) * 1e3)
            m.accept_token(t)
    gc.enable()
    tracked = len(gc.get_objects())
    t0 = time.perf_counter()
    gc.collect()
    full = (time.perf_counter() - t0) * 1e3
    ms.sort()
    print(
        f"gc {'off' if args.no_gc else 'on'}, memos {'kept' if args.no_age else 'aged'}: "
        f"{len(ms)} fills, total {sum(ms) / 1e3:.1f} s, p99 {ms[int(0.99 * len(ms))]:.1f} ms, "
        f"slowest {ms[-1]:.1f} ms, {advances[0]:,} class advances; "
        f"{tracked:,} tracked objects, one full collection {full:.0f} ms"
    )


if __name__ == "__main__":
    main()
