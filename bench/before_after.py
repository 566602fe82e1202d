#!/usr/bin/env python
"""Behaviour and speed of two commits, measured in one run (a refactor's "nothing changed").

A move between files, a layer contract or a dialect object must not change what grid-sql
generates nor how fast: this script checks out two commits side by side, builds the Rust
kernels for each (once if ``kernels/`` is the same), and runs, alternating the two builds so
that load drifts hit both alike:

* ``bench/masks.py --vocab qwen2 --n-statements 60 --slope-tokens 0 --engines grid``
  ``--runs`` times each: unseen / warm / cold-miss mask latency and rejected statements;
* ``bench/compile.py --vocab qwen2 --repeats 3 --breakdown 3`` ``--compile-runs`` times each:
  tokenizer + grammar to the first mask, role re-specialization;
* ``bench/spider_eval.py --suite chinook --n N --arms unconstrained bind+repair`` once each
  with the 0.5B model: every generated statement compared text for text (greedy decoding, so
  identical behaviour means identical SQL), executes and EX.

It writes a short Markdown report (headline first: medians and ranges per build, the SQL
identity count), with the command, the commits and the host. Worktrees go under ``--work``
(default ``/tmp/grid-before-after``) and are reused by a later run.

    python bench/before_after.py --before e81a54f --after b78d74c --out bench/RESULTS-house.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MASK_KEYS = ("p50", "p99", "mean", "cold_p50", "cold_p99", "warm_p50", "warm_p99")
COMPILE_ROWS = (
    "L1 total: tokenizer + grammar to first mask (warm store)",
    "L1 total, cold store",
    "re-specialization, new role: role_grammar + Guide + first mask",
    "re-specialization, repeated role",
)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def checkout(commit: str, work: Path) -> Path:
    """A detached worktree of ``commit`` under ``work`` (reused when it is already there)."""
    sha = git("rev-parse", "--short", commit)
    wt = work / sha
    if not (wt / ".git").exists():
        work.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", str(wt), sha)
    shared = work / "shared"  # the benchmarks read ../shared/data beside the checkout
    if not shared.exists():
        shared.symlink_to(ROOT.parent / "shared")
    return wt


def build_kernels(wt: Path, target: Path) -> None:
    """Build the extension of ``wt`` into ``target`` and copy it beside its Python sources."""
    env = dict(os.environ, PYO3_PYTHON=sys.executable, CARGO_TARGET_DIR=str(target))
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "grid-sql-py"],
        cwd=wt / "kernels",
        env=env,
        check=True,
    )
    shutil.copy2(target / "release" / "lib_kernels.so", wt / "grid_sql" / "_kernels.abi3.so")


def run_py(wt: Path, args: Sequence[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(wt))
    out = subprocess.run(
        [sys.executable, *args], cwd=wt, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout + out.stderr


def masks_once(wt: Path) -> dict[str, Any]:
    text = run_py(
        wt,
        [
            "bench/masks.py",
            "--vocab",
            "qwen2",
            "--n-statements",
            "60",
            "--slope-tokens",
            "0",
            "--engines",
            "grid",
            "--out",
            os.devnull,
        ],
    )
    for line in text.splitlines():
        if line.startswith("[qwen2] grid-sql: "):
            return dict(json.loads(line.split(": ", 1)[1]))
    raise SystemExit(f"bench/masks.py printed no grid-sql line in {wt}:\n{text[-2000:]}")


def compile_once(wt: Path, out: Path) -> dict[str, float]:
    run_py(
        wt,
        [
            "bench/compile.py",
            "--vocab",
            "qwen2",
            "--repeats",
            "3",
            "--breakdown",
            "3",
            "--out",
            str(out),
        ],
    )
    found: dict[str, float] = {}
    for line in out.read_text().splitlines():
        cells = [c.strip().strip("*") for c in line.split("|")]
        for row in COMPILE_ROWS:
            if len(cells) > 2 and cells[1].startswith(row) and row not in found:
                found[row] = float(cells[2])
    return found


def chinook(wt: Path, n: int, model: str, out: Path) -> dict[tuple[str, int], dict[str, Any]]:
    out.unlink(missing_ok=True)
    run_py(
        wt,
        [
            "bench/spider_eval.py",
            "--suite",
            "chinook",
            "--n",
            str(n),
            "--arms",
            "unconstrained",
            "bind+repair",
            "--model",
            model,
            "--out",
            str(out),
        ],
    )
    recs = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    return {(r["arm"], r["qid"]): r for r in recs}


def med(vals: Sequence[float]) -> str:
    v = sorted(vals)
    return f"{statistics.median(v):,.1f} ({v[0]:,.1f}-{v[-1]:,.1f})"


def host() -> str:
    from hostinfo import cpu_model

    cpu = cpu_model("?")
    return f"{platform.node()}, {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--runs", type=int, default=6, help="mask runs per build (alternating)")
    ap.add_argument("--compile-runs", type=int, default=3)
    ap.add_argument("--chinook", type=int, default=20, help="Chinook questions (0: skip)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--work", type=Path, default=Path("/tmp/grid-before-after"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--notes", type=Path, help="Markdown put under the title (what the commits are)"
    )
    a = ap.parse_args(argv)

    builds = {"before": a.before, "after": a.after}
    wts = {k: checkout(c, a.work) for k, c in builds.items()}
    shas = {k: git("rev-parse", "--short", "HEAD", cwd=wt) for k, wt in wts.items()}
    same_kernels = not git("diff", "--stat", shas["before"], shas["after"], "--", "kernels")
    for k, wt in wts.items():
        if k == "after" and same_kernels:
            so = Path("grid_sql") / "_kernels.abi3.so"
            shutil.copy2(wts["before"] / so, wt / so)
        else:
            build_kernels(wt, a.work / f"target-{shas[k]}")
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    masks: dict[str, list[dict[str, Any]]] = {k: [] for k in builds}
    for _ in range(a.runs):
        for k in builds:
            masks[k].append(masks_once(wts[k]))
    comp: dict[str, list[dict[str, float]]] = {k: [] for k in builds}
    for i in range(a.compile_runs):
        for k in builds:
            comp[k].append(compile_once(wts[k], a.work / f"compile-{k}-{i}.md"))
    answers = {
        k: chinook(wts[k], a.chinook, a.model, a.work / f"chinook-{k}.jsonl")
        for k in builds
        if a.chinook
    }
    load_after = os.getloadavg()

    lines = [f"# Before/after: {shas['before']} vs {shas['after']}", ""]
    if a.notes:
        lines += [a.notes.read_text().strip(), ""]
    lines += [
        f"{a.runs} alternating runs of the mask benchmark and {a.compile_runs} of the compile "
        "benchmark per build; median (min-max). Qwen2 (151,936 tokens), grid-sql's SQLite "
        "grammar, 30 warm + 30 unseen Spider statements.",
        "",
        "| build | unseen p50 µs | unseen p99 µs | unseen mean µs | cold-miss p50 µs "
        "| cold-miss p99 µs | warm p50 µs | warm p99 µs | rejected |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in builds:
        rs = masks[k]
        cells = [med([r[m] for r in rs]) for m in MASK_KEYS]
        rej = sum(r["rejected"] for r in rs)
        lines.append(f"| {k} ({shas[k]}) | " + " | ".join(cells) + f" | {rej} |")
    lines += ["", "| build | " + " | ".join(f"{r} ms" for r in COMPILE_ROWS) + " |"]
    lines.append("|---" * (len(COMPILE_ROWS) + 1) + "|")
    for k in builds:
        cells = [med([c[r] for c in comp[k] if r in c]) for r in COMPILE_ROWS]
        lines.append(f"| {k} ({shas[k]}) | " + " | ".join(cells) + " |")
    if answers:
        b, f = answers["before"], answers["after"]
        keys = sorted(set(b) & set(f))
        same = sum(b[x]["sql"] == f[x]["sql"] for x in keys)
        lines += [
            "",
            f"Chinook, {a.chinook} questions x 2 arms (unconstrained, bind+repair), {a.model}, "
            f"greedy: **{same} of {len(keys)} generated statements identical**.",
            "",
            "| build | arm | executes | EX |",
            "|---|---|---|---|",
        ]
        for k, recs in answers.items():
            for arm in ("unconstrained", "bind+repair"):
                rs = [r for (ar, _), r in recs.items() if ar == arm]
                ex = sum(bool(r.get("executes")) for r in rs)
                ok = sum(bool(r.get("ex")) for r in rs)
                lines.append(f"| {k} | {arm} | {ex}/{len(rs)} | {ok}/{len(rs)} |")
        for x in keys:
            if b[x]["sql"] != f[x]["sql"]:
                lines.append(f"- differs: {x}: `{b[x]['sql']}` vs `{f[x]['sql']}`")
    cmd = " ".join(["python bench/before_after.py", *(argv or sys.argv[1:])])
    lines += [
        "",
        "## Command, commit, host",
        "",
        f"- command: `{cmd}` (from {git('rev-parse', '--short', 'HEAD')})",
        f"- date: {started}; kernels "
        + ("identical, built once" if same_kernels else "built per commit"),
        f"- host: {host()}",
        f"- load average before {tuple(round(x, 2) for x in load_before)}, "
        f"after {tuple(round(x, 2) for x in load_after)}",
    ]
    text = "\n".join(lines) + "\n"
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
