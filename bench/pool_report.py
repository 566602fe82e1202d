"""One paired table over several record files (e.g. Spider dev run in slices at several commits).

Reads ``bench/spider_eval.py`` / ``bench/autofix_offline.py`` / ``bench/exec_repair.py`` record
files in order (for each question and arm the last record wins, as in ``spider_eval.report``),
keeps the records of ``--model``, and prints ``autofix_offline.table`` for ``--arms``: executes,
EX and EX in any column order with 95% Wilson intervals, refusals, s/query, and the paired EX
differences, over the questions every listed arm has. ``--truncations`` adds the tokens/query
and truncation counts per arm; ``--failures ARM`` lists why that arm's statements did not run
(cut at the token budget, refused with the checker's violation kinds, or the database's error),
with the question ids of each reason.

    python bench/pool_report.py FILE.jsonl [...] --model qwen2.5-coder-0.5b \\
        --arms unconstrained bind bind+repair bind+autofix+repair
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import autofix_offline as ao  # noqa: E402
import spider_eval as se  # noqa: E402


def pooled(paths: Sequence[Path], model: str) -> list[dict[str, Any]]:
    last: dict[tuple[int, str], dict[str, Any]] = {}
    for p in paths:
        for r in se.read_jsonl(p):
            if r.get("model") == model:
                last[(r["qid"], r["arm"])] = r
    return list(last.values())


def failure_reason(r: dict[str, Any]) -> str:
    """Why a record that did not execute did not: truncation first (a cut statement is refused or
    fails for that reason), then the checker's refusal kinds, then the database's error class."""
    if r.get("truncated"):
        return "truncated at the token budget"
    if r.get("refused"):
        kinds = r.get("violation_kinds") or ["unspecified"]
        return "refused: " + ", ".join(sorted(set(kinds)))
    err = r.get("exec_error") or r.get("error") or "no record of the error"
    return "database error: " + str(err).split(":", 1)[0].strip()


def failures(recs: Sequence[dict[str, Any]], arm: str) -> str:
    by: dict[str, list[int]] = {}
    for r in recs:
        if r["arm"] == arm and not r.get("executes"):
            by.setdefault(failure_reason(r), []).append(int(r["qid"]))
    total = sum(len(v) for v in by.values())
    out = [
        f"\n{arm}: {total} statements did not run\n",
        "| reason | n | questions |",
        "| --- | --- | --- |",
    ]
    for reason, qids in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"| {reason} | {len(qids)} | {' '.join(f'q{q}' for q in sorted(qids))} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--model", required=True, help="the model label in the records")
    ap.add_argument("--arms", nargs="+", required=True)
    ap.add_argument("--truncations", action="store_true")
    ap.add_argument("--failures", metavar="ARM", help="why ARM's statements did not run")
    args = ap.parse_args(argv)
    recs = pooled(args.files, args.model)
    sys.stdout.write(ao.table(recs, args.arms))
    if args.truncations:
        sys.stdout.write(
            "\n| arm | questions | tokens/query | truncations |\n| --- | --- | --- | --- |\n"
        )
        for arm in args.arms:
            rs = [r for r in recs if r["arm"] == arm]
            if not rs:
                continue
            tok = sum(int(r.get("tokens") or 0) for r in rs) / len(rs)
            tr = sum(bool(r.get("truncated")) for r in rs)
            sys.stdout.write(f"| {arm} | {len(rs)} | {tok:.1f} | {tr} |\n")
    if args.failures:
        sys.stdout.write(failures(recs, args.failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
