"""Class tables (issue #26 §1): what they do to cold walks and fully cold fills, and that the
masks do not change.

Three probes on the SQLite dialect grammar, Spider dev statements (``bench/masks.py``'s
sample), one vocabulary:

- ``walks``: along ``--n-walk`` statements, every root walk by the trie walk vs a freshly built
  class table (``TrieWalker.walk_table``: build + walk): µs and nodes stepped;
- ``cold``: every configuration of ``--n-cold`` statements filled by the Rust filler with its
  entry store dropped before each fill (tables kept, warmed by two passes): every entry walked;
- ``digest``: BLAKE2b over the rows and entry ids of every step of ``--n-digest`` statements
  (compare the digest across builds: the masks must not change).

Run it once per build (swap ``grid_sql/_kernels.abi3.so``) and alternate; it prints one line
per probe. ``PYTHONPATH=. python bench/class_tables.py --vocab qwen2``
"""

from __future__ import annotations

import argparse
import hashlib
import statistics as st
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from masks import TOKENIZERS, sample_statements  # noqa: E402

import grid_sql as gs  # noqa: E402
from grid_sql.mask.cache import MaskCache  # noqa: E402
from grid_sql.mask.guide import Guide  # noqa: E402
from grid_sql.mask.vocab import greedy_token_ids  # noqa: E402
from grid_sql.mask.walk import stack_pairs  # noqa: E402


def configs(g: Guide, v: gs.Vocabulary, qs: list[str]) -> list:
    out = []
    for q in qs:
        m = g.matcher()
        for t in [*greedy_token_ids(v, q.encode(), max_len=16), None]:
            out.append(m.config)
            if t is not None:
                m.accept_token(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--n-walk", type=int, default=4)
    ap.add_argument("--n-cold", type=int, default=12)
    ap.add_argument("--n-digest", type=int, default=60)
    ap.add_argument("--tag", default="", help="label of this build in the output")
    a = ap.parse_args()
    v = gs.Vocabulary.from_gguf(str(TOKENIZERS / f"ggml-vocab-{a.vocab}.gguf"))
    grammar = gs.Grammar.dialect("sqlite")
    qs = sample_statements(60)
    tag = a.tag or "build"

    g = Guide(grammar, v, cache=MaskCache())
    k, w = g.walker.kernel(), g.walker
    has_tables = hasattr(k, "walk_table")
    if has_tables:
        rows = []
        for c in configs(g, v, qs[: a.n_walk]):
            s = c.scan
            args = (
                0,
                s.dfa,
                s.rem,
                s.la_len,
                s.la_state,
                w._allowed_bytes(g.key_for(c, 0).allowed),
            )
            t0 = time.perf_counter()
            _, _, visited = k.walk(*args)
            t1 = time.perf_counter()
            got = k.walk_table(*args, g.n_words)
            t2 = time.perf_counter()
            rows.append((visited, (t1 - t0) * 1e6, (t2 - t1) * 1e6, got[2] if got else -1))
        print(
            f"{tag} walks: {len(rows)} root walks; trie walk p50 "
            f"{st.median(r[1] for r in rows):.0f} µs, "
            f"{st.median(r[0] for r in rows):.0f} nodes; table build+walk p50 "
            f"{st.median(r[2] for r in rows):.0f} µs (max {max(r[2] for r in rows):.0f}), "
            f"{st.median(r[3] for r in rows):.0f} steps (max {max(r[3] for r in rows)})"
        )

    g = Guide(grammar, v, cache=MaskCache())
    f = g.filler()
    buf = np.zeros(g.n_words, dtype=np.int32)
    cfgs = configs(g, v, qs[: max(a.n_cold, 1)])

    def cold() -> list[float]:
        ts = []
        for c in cfgs:
            f.reset()
            s = c.scan
            t0 = time.perf_counter()
            f.fill(stack_pairs(c.stack), (s.dfa, s.rem, s.la_len, s.la_state), buf, True)
            ts.append((time.perf_counter() - t0) * 1e6)
        return ts

    cold()
    cold()
    ts = cold()
    print(
        f"{tag} cold: {len(ts)} fully cold fills: p50 {st.median(ts):.0f} µs, mean "
        f"{st.mean(ts):.0f}, p90 {np.percentile(ts, 90):.0f}, max {max(ts):.0f}; tables "
        f"{f.table_stats if has_tables else '-'}"
    )

    g = Guide(grammar, v, cache=MaskCache())
    h = hashlib.blake2b(digest_size=16)
    steps = 0
    for q in qs[: a.n_digest]:
        m = g.matcher()
        for t in [*greedy_token_ids(v, q.encode(), max_len=16), None]:
            n, ents = g.fill_bitmask(m.config, buf)
            h.update(buf.tobytes())
            h.update(repr((n, ents)).encode())
            steps += 1
            if t is not None:
                m.accept_token(t)
    f = g.filler()
    print(
        f"{tag} digest: {steps} steps, rows + entry ids {h.hexdigest()}; walks {f.walks}, "
        f"tables (built, answered, bytes) {f.table_stats if has_tables else '-'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
