"""Cold and warm mask cost per step with and without scope-aware lexicons (docs/scope.md).

    .venv/bin/python scripts/scope_cost.py [--vocab qwen2] [--db concert_singer] [--n 12]

Fills the mask at every step of the first ``n`` Spider dev gold queries of a database
(greedy tokenization), twice (cold caches, then warm), for the select-only role grammar and
the same grammar with scopes, without and with select-list obligations; prints CPU time per
step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grid_sql.mask.cache import MaskCache  # noqa: E402
from grid_sql.mask.guide import Guide  # noqa: E402
from grid_sql.policy.scopes import role_scopes  # noqa: E402
from tests.mask.helpers import greedy_tokens, vocab  # noqa: E402
from tests.scope.helpers import role, scoped, snapshot, spider_dev  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--db", default="concert_singer")
    ap.add_argument("--n", type=int, default=12)
    a = ap.parse_args()
    qs = [q for d, q in spider_dev() if d == a.db][: a.n]
    toks = [greedy_tokens(a.vocab, q.encode()) for q in qs]
    unbound = role(a.db).with_scopes(role_scopes(snapshot(a.db), bind_select_list=False))
    arms = (("unscoped", role(a.db)), ("scoped", unbound), ("scoped+obligations", scoped(a.db)))
    for name, g in arms:
        guide = Guide(g, vocab(a.vocab), cache=MaskCache())
        buf = np.zeros(guide.n_words, dtype=np.int32)
        for rnd in ("cold", "warm"):
            t0 = time.process_time()
            steps = 0
            for ts in toks:
                m = guide.matcher()
                for t in ts:
                    guide.fill_bitmask(m.config, buf)
                    m.accept_token(t)
                    steps += 1
            dt = time.process_time() - t0
            print(f"{name:9s} {rnd}: {steps} steps, {1000 * dt / steps:.2f} ms CPU/step")


if __name__ == "__main__":
    main()
