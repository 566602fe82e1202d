#!/usr/bin/env python
"""What a warm decode step spends on the guard, call by call (issue #26, ``bench/RESULTS-e2e.md``).

The first 5 Chinook questions of ``bench/e2e.py`` with its model and the Asker's guide: one
cold pass, then three warm passes with a wall-clock timer around each guard call of the
decode loop (``grid_sql/decode/loop.py``). Prints the guard per record (``Timings.guard``,
timers included) and each call's share per record. Timers cost ~1 µs per call.

    PYTHONPATH=. python bench/e2e_steps.py [--model qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from e2e import load, load_chinook_questions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--n", type=int, default=5)
    args = ap.parse_args()

    import grid_sql.decode.loop as loop
    from grid_sql.ask.asker import Asker, guide_for
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.matcher import Matcher
    from grid_sql.mask.reserve import ReserveTable

    qs = load_chinook_questions()[: args.n]
    backend = load("llama.cpp", args.model)
    asker = Asker(qs[0].db_path(Path(".")), model=backend, audit=False, max_tokens=128)
    guide = guide_for(asker.grammar, backend)
    prompts = [backend.chat_prompt(asker.messages(q.question)) for q in qs]
    for p in prompts:  # cold pass: every mask computed once
        loop.generate(backend, guide, p, max_tokens=128)

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def timed(owner: Any, name: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:  # a call this checkout does not have
            return

        def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter_ns() - t0
                calls[name] += 1

        setattr(owner, name, run)

    for owner, names in (
        (loop, ("blocked_intent", "pick_token", "mask_digest", "_ends_statement")),
        (loop._Recorder, ("fill", "emit")),
        (Matcher, ("forced_tokens", "accept_token", "rollback", "cost_after")),
        (ReserveTable, ("cost",)),
        (Guide, ("_fill_warm",)),
    ):
        for name in names:
            timed(owner, name)
    guard = 0.0
    records = 0
    for _ in range(3):
        for p in prompts:
            g = loop.generate(backend, guide, p, max_tokens=128)
            guard += g.timings.guard
            records += len(g.records)
    print(f"guard per record {guard / records * 1e6:.1f} µs over {records} records (warm)")
    for name, ns in spent.most_common():
        per = ns / records / 1e3
        print(f"  {name:16s} {per:7.1f} µs/record  {calls[name] / records:.2f} calls")


if __name__ == "__main__":
    main()
