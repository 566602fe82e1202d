#!/usr/bin/env python
"""Where the termination reserve's cost goes on configurations a process has not seen
(issue #26: the largest part of the cold guard once decoding checks the model's choice first,
``bench/RESULTS-e2e.md``).

The Asker's scoped role grammar on the packaged Chinook, Qwen2 vocabulary, a fresh process
and ``ReserveTable`` (warmed on the initial configuration only): the first N gold statements
of ``bench/chinook_questions.json`` token by token, as the check-first decode loop goes: the
reserve check of each token (``Matcher.cost_after``: the parser step to the configuration
it leads to and that configuration's reserve cost) timed, then the token accepted. Nothing
is prepared ahead, so the stack nodes, allowed sets and lexicon views a step needs are new
to the process as they are in ``bench/e2e.py``'s cold pass. ``--profile``: the same under
cProfile (top functions by ``--sort``).

    PYTHONPATH=. python bench/reserve_profile.py [--statements 25] [--records FILE]
        [--profile [--top 25] [--sort tottime]]

``--records`` takes the statements from an ``bench/e2e.py`` record file instead (the
constrained answers of its first pass, in order): what the default model wrote.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import pstats
import time
from pathlib import Path

# bench/ is the script's directory, so first on sys.path; grid_sql comes from PYTHONPATH=.
from masks import TOKENIZERS
from role_masks import QUESTIONS, chinook_role, grammar_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--statements", type=int, default=25)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--profile", action="store_true", help="under cProfile (slower)")
    ap.add_argument(
        "--evict-mb",
        type=int,
        default=0,
        help="read this many MB between steps, as a model's weights stream through the caches",
    )
    ap.add_argument("--sort", default="cumulative", help="pstats sort key")
    ap.add_argument("--records", type=Path, help="an e2e record file (.jsonl or .jsonl.gz)")
    args = ap.parse_args()

    import grid_sql as gs
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.reserve import ReserveTable
    from grid_sql.mask.vocab import greedy_token_ids

    v = gs.Vocabulary.from_gguf(str(TOKENIZERS / "ggml-vocab-qwen2.gguf"))
    snap, pol = chinook_role()
    g = grammar_for("role+scopes", snap, pol)
    guide = Guide(g, v)
    if args.records is not None:
        opener = gzip.open if args.records.suffix == ".gz" else open
        with opener(args.records, "rt") as f:
            recs = [json.loads(line) for line in f]
        first = recs[0]["pass"]
        stmts = [
            r["sql"] for r in recs if r["arm"] == "constrained" and r["pass"] == first and r["sql"]
        ]
    else:
        stmts = [q["gold"] for q in json.loads(QUESTIONS.read_text())["questions"]]
    res = ReserveTable(g, v)
    res.cost(guide.runtime.initial)
    toks = [greedy_token_ids(v, s.encode(), max_len=32) for s in stmts[: args.statements]]
    pr = cProfile.Profile() if args.profile else None
    spent = cpu = 0.0
    n = 0
    import numpy as np

    big = np.ones(args.evict_mb << 17) if args.evict_mb else None  # float64: 8 bytes each
    for ids in toks:
        m = guide.matcher()
        for t in ids:
            # what the check-first decode loop times as "reserve" for the model's token
            t0, c0 = time.perf_counter(), time.thread_time()
            if pr is not None:
                pr.enable()
            m.cost_after(t, res)
            if pr is not None:
                pr.disable()
            spent += time.perf_counter() - t0
            cpu += time.thread_time() - c0
            n += 1
            m.accept_token(t)
            if big is not None:
                big.sum()
    label = "under cProfile" if pr is not None else "plain"
    print(
        f"{n} steps, {spent / n * 1e3:.3f} ms per reserve check, "
        f"{cpu / n * 1e3:.3f} ms thread CPU ({label})"
    )
    if pr is not None:
        pstats.Stats(pr).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
