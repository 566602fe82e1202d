"""Batched vs per-row mask fill for one serving step (issue #28 §3).

A step of ``B`` constrained requests (four Chinook role guides, request ``i`` on guide
``i % 4``, each at a position of its own statement) fills a ``[B, n_words]`` bitmask. With
every row warm (the steady state) three ways are timed, median µs per step over ``--steps``
steps (each step moves every request one position along its statement):

* ``per-row``: ``Matcher.fill_next_token_bitmask`` on each row (what an engine without the
  batched call does);
* ``fill_rows (python copies)``: the batched ``grid_sql.mask.guide.fill_rows`` with the native
  copy disabled (one slice assignment per row, the previous implementation);
* ``fill_rows (native)``: the same call, warm rows written by one ``_kernels.copy_rows``
  (GIL released).

Rows are checked equal across the three before timing. Vocabulary: a GGUF test model
(``--model``, default qwen2.5-coder-0.5b: 151k tokens, 4,748 words a row).

    python bench/batch_fill.py --model qwen2.5-coder-0.5b --batches 1 8 32 --steps 200
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np

from grid_sql.data import chinook_path
from grid_sql.decode.models import fetch_model
from grid_sql.mask import guide as guide_mod
from grid_sql.mask.matcher import Matcher
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning, greedy_token_ids
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect
from grid_sql.serve import GuideRegistry, GuideSpec

ROLES = [
    ({"verbs": ["select"]}, b"SELECT COUNT(*) FROM Track WHERE Milliseconds > 300000"),
    (
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}},
        b"SELECT c.FirstName, SUM(i.Total) FROM Customer c JOIN Invoice i "
        b"ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId",
    ),
    (
        {"verbs": ["select"], "tables": {"allow": ["Artist", "Album"]}},
        b"SELECT a.Title, ar.Name FROM Album a JOIN Artist ar ON a.ArtistId = ar.ArtistId",
    ),
    (
        {"verbs": ["select"], "tables": {"allow": ["Track", "Genre", "MediaType"]}},
        b"SELECT t.Name, g.Name FROM Track t JOIN Genre g ON g.GenreId = t.GenreId LIMIT 5",
    ),
]


def median_us(fn: Callable[[], None], steps: int) -> float:
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        vocab = Vocabulary.from_gguf(fetch_model(a.model))
    snap = introspect(open_sqlite(chinook_path()))
    base = sqlite_baseline(snap)
    with GuideRegistry() as reg:
        plans = []
        for pol, sql in ROLES:
            p = narrow(base, AppPolicy.from_mapping(pol, origin="bench"), snap)
            g = reg.get(GuideSpec.from_parts(p, snap, vocab), vocab)
            toks = greedy_token_ids(vocab, sql)
            ms: list[Matcher] = []
            m = g.matcher()
            for t in toks:  # one matcher per position (warms every row once)
                m.fill_next_token_bitmask(m.allocate_bitmask())
                ms.append(g.matcher())
                ms[-1].accept_tokens(m.tokens)
                m.accept_token(t)
            plans.append(ms)
        nw = plans[0][0].guide.n_words
        print(f"vocab {a.model}: {vocab.size} tokens, {nw} words a row; median µs per step")
        print("| batch | per-row | fill_rows (python copies) | fill_rows (native) |")
        print("| --- | --- | --- | --- |")
        for b in a.batches:
            t_row, t_py, t_nat = run_batch(plans, b, a.steps, nw)
            print(f"| {b} | {t_row:.1f} | {t_py:.1f} | {t_nat:.1f} |")


def run_batch(plans: list[list[Matcher]], b: int, steps: int, nw: int) -> tuple[float, ...]:
    """Median µs per step: per-row, batched with python copies, batched native."""
    pos = [0] * b
    buf = np.zeros((b, nw), dtype=np.int32)

    def step_matchers() -> list[Matcher]:
        out = []
        for i in range(b):
            ms = plans[i % len(plans)]
            out.append(ms[(pos[i] + i) % len(ms)])
            pos[i] += 1
        return out

    def per_row() -> None:
        for i, m in enumerate(step_matchers()):
            m.fill_next_token_bitmask(buf[i])

    def batched() -> None:  # as BatchMasker.fill calls it
        ms = step_matchers()
        guide_mod.fill_rows(
            [(m.guide, m.config) for m in ms], buf, records=[m.warm_record() for m in ms]
        )

    ref = np.zeros_like(buf)
    ms0 = step_matchers()
    for i, m in enumerate(ms0):
        m.fill_next_token_bitmask(ref[i])
    guide_mod.fill_rows([(m.guide, m.config) for m in ms0], buf)
    assert np.array_equal(buf, ref), "batched rows differ from per-row rows"
    native = guide_mod._copy_rows
    t_row = median_us(per_row, steps)
    guide_mod._copy_rows = None
    try:
        t_py = median_us(batched, steps)
    finally:
        guide_mod._copy_rows = native
    t_nat = median_us(batched, steps)
    return t_row, t_py, t_nat


if __name__ == "__main__":
    main()
