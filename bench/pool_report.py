"""One paired table over several record files (e.g. Spider dev run in slices at several commits).

Reads ``bench/spider_eval.py`` / ``bench/autofix_offline.py`` / ``bench/exec_repair.py`` record
files in order (for each question and arm the last record wins, as in ``spider_eval.report``),
keeps the records of ``--model``, and prints ``autofix_offline.table`` for ``--arms``: executes,
EX and EX in any column order with 95% Wilson intervals, refusals, s/query, and the paired EX
differences, over the questions every listed arm has. ``--truncations`` adds the tokens/query
and truncation counts per arm.

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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--model", required=True, help="the model label in the records")
    ap.add_argument("--arms", nargs="+", required=True)
    ap.add_argument("--truncations", action="store_true")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
