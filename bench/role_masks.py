#!/usr/bin/env python
"""Mask latency on the grammar the Asker actually generates under (issue #26 §5, done-when:
"the Asker's scoped role grammar on Chinook: p99 ≤ 100 µs").

``bench/masks.py`` times grid-sql's SQLite *dialect* grammar beside llguidance, XGrammar and
GLRMask. A user's question is generated under the *role* grammar instead: the dialect
projected on the role's verbs, schema lexicons for table and column names, scope-aware column
lexicons and select-list obligations (``role_grammar_for(snapshot, policy, scopes=True,
bind_select_list=True)``, the Asker's default). This script times that grammar with the same
protocol, on the packaged Chinook with the role the Asker gives a SQLite file (its baseline
narrowed to SELECT), over the gold SQL of ``bench/chinook_questions.json``: the statements
shuffled with ``random.Random(seed)``, the first half warms the caches, every fill of the
second half is timed ("unseen": misses and hits mixed; a "cold miss" is a fill that walked the
trie), then the second half is replayed ("warm"). The other engines cannot express the
scoped lexicons, so the comparison is with grid-sql itself on the same statements: the role
grammar without scopes, and the dialect grammar.

Every engine gets the same token ids (greedy longest match over the GGUF spellings, as in
``bench/masks.py``); a statement the grammar rejects is reported, not skipped silently.

    PYTHONPATH=. python bench/role_masks.py --vocab qwen2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from mask_engines import GuideEngine  # noqa: E402
from masks import TOKENIZERS, run_statement, summarize  # noqa: E402

QUESTIONS = HERE / "chinook_questions.json"
GRAMMARS = ("role+scopes", "role", "dialect")


def chinook_role() -> tuple[Any, Any]:
    """The role an ``Asker`` on the packaged Chinook file generates under: the SQLite
    baseline (every table) narrowed to SELECT."""
    from grid_sql.data import chinook_path
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.schema import introspect

    snap = introspect(open_sqlite(chinook_path()))
    app = AppPolicy.from_mapping({"verbs": ["select"]}, origin="bench/role_masks.py")
    return snap, narrow(sqlite_baseline(snap), app, snap)


def grammar_for(kind: str, snap: Any, pol: Any) -> Any:
    from grid_sql.ask.components import role_grammar_for
    from grid_sql.grammar import Grammar

    if kind == "dialect":
        return Grammar.dialect("sqlite")
    return role_grammar_for(
        snap, pol, scopes=kind == "role+scopes", bind_select_list=kind == "role+scopes"
    )


def one_run(vname: str, kind: str, seed: int, log: Any) -> dict[str, Any]:
    """A fresh Guide (empty caches) for ``kind``: warm on half the statements, time the rest."""
    import grid_sql as gs
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.trie import get_token_trie
    from grid_sql.mask.vocab import greedy_token_ids

    v = gs.Vocabulary.from_gguf(str(TOKENIZERS / f"ggml-vocab-{vname}.gguf"))
    snap, pol = chinook_role()
    stmts = [q["gold"] for q in json.loads(QUESTIONS.read_text())["questions"]]
    random.Random(seed).shuffle(stmts)
    half = len(stmts) // 2
    warm, test = stmts[:half], stmts[half:]
    t0 = time.perf_counter()
    g = grammar_for(kind, snap, pol)
    guide = Guide(g, v, cache=MaskCache(), trie=get_token_trie(v))
    compile_s = time.perf_counter() - t0
    eng = GuideEngine(kind, guide)

    def ids(s: str) -> list[int]:
        return greedy_token_ids(v, s.encode(), max_len=32)

    eos = v.eos_token_id
    st = {"steps": 0, "rejected": 0}
    for s in warm:
        if not run_statement(eng, ids(s), eos, None, st):
            log(f"[{vname}] {kind} REJECTED (warm half): {s}")
    lat: list[float] = []
    missed: list[bool] = []
    ts = {"steps": 0, "rejected": 0}
    for s in test:
        if not run_statement(eng, ids(s), eos, lat, ts, missed=missed):
            log(f"[{vname}] {kind} REJECTED: {s}")
    hot: list[float] = []
    for s in test:
        run_statement(eng, ids(s), eos, hot, {"steps": 0, "rejected": 0})
    out = summarize(lat)
    cold = summarize([x for x, m in zip(lat, missed, strict=True) if m])
    w = summarize(hot)
    out.update(
        cold_n=cold["n"],
        cold_p50=cold["p50"],
        cold_p99=cold["p99"],
        warm_p50=w["p50"],
        warm_p99=w["p99"],
        rejected=ts["rejected"] + st["rejected"],
        compile_s=compile_s,
        kernel_fill=guide.filler() is not None,  # None: the Python orchestration fills
        statements=(len(warm), len(test)),
    )
    return out


def _med(runs: list[dict[str, Any]], k: str) -> str:
    vals = sorted(float(r[k]) for r in runs)
    if len(vals) == 1:
        return f"{vals[0]:,.1f}"
    return f"{statistics.median(vals):,.1f} ({vals[0]:,.1f}-{vals[-1]:,.1f})"


def render(vname: str, results: dict[str, list[dict[str, Any]]], cmd: str) -> str:
    from hostinfo import cpu_model

    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    n = len(next(iter(results.values())))
    first = next(iter(results.values()))[0]
    lines = [
        f"{vname}, Chinook gold SQL ({first['statements'][0]} warm + {first['statements'][1]} "
        f"unseen statements, {first['n']} timed fills); {n} run(s) per grammar, each in a fresh "
        "Guide, median (min-max) over runs; µs per full-vocabulary fill.",
        "",
        "| grammar | unseen p50 | unseen p99 | unseen mean | cold-miss p50 (n) | cold-miss p99 "
        "| warm p50 | warm p99 | rejected | native fill |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, runs in results.items():
        lines.append(
            f"| {kind} | {_med(runs, 'p50')} | {_med(runs, 'p99')} | {_med(runs, 'mean')} | "
            f"{_med(runs, 'cold_p50')} ({runs[0]['cold_n']}) | {_med(runs, 'cold_p99')} | "
            f"{_med(runs, 'warm_p50')} | {_med(runs, 'warm_p99')} | "
            f"{max(r['rejected'] for r in runs)} | {runs[0]['kernel_fill']} |"
        )
    lines += [
        "",
        f"- command: `{cmd}`",
        f"- commit {commit}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- host: {platform.node()}, {cpu_model()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; load average {os.getloadavg()}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="qwen2")
    ap.add_argument("--grammars", nargs="+", default=list(GRAMMARS), choices=GRAMMARS)
    ap.add_argument("--repeats", type=int, default=3, help="fresh-Guide runs per grammar")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: dict[str, list[dict[str, Any]]] = {k: [] for k in args.grammars}
    for rep in range(args.repeats):  # grammars alternate, so host drift hits each alike
        for kind in args.grammars:
            r = one_run(args.vocab, kind, args.seed, log)
            results[kind].append(r)
            log(f"[{args.vocab}] {kind} run {rep + 1}: {json.dumps(r)}")
    cmd = "PYTHONPATH=. python bench/role_masks.py " + " ".join(argv or sys.argv[1:])
    text = render(args.vocab, results, cmd.strip())
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
