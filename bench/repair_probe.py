"""Repair probe: re-run the checker-guided repair on the Spider questions a run refused.

Why a probe and not the whole harness: the question is narrow — of the questions whose
constrained statement the checker refused for an unknown column, how many does the repair
round now turn into a statement that executes (and matches gold)? Decoding is greedy and the
first prompt is unchanged, so round 0 reproduces the recorded constrained statement (checked
and reported: ``round0_same``); only the repair round differs.

By default only the repair round runs, fed the recorded round-0 statement
(``--full`` regenerates round 0 with ``generate_sql``).

Usage::

    nice -n 10 .venv/bin/python bench/repair_probe.py \\
        --from bench/results/spider-qwen2.5-coder-0.5b-at-98d7f56.jsonl \\
        --out bench/results/repair-probe-qwen2.5-coder-0.5b.jsonl
    .venv/bin/python bench/repair_probe.py --out ... --report

The ``--from`` records are no longer in the tree (only the probe's own records are, as
``.jsonl.gz``); restore them with ``git show
97aec29:bench/results/spider-qwen2.5-coder-0.5b-at-98d7f56.jsonl > bench/results/...``.

Records (one per question): qid, db_id, question, round0_sql, round0_violations (with the
``fix`` of each), final_sql, repaired (the repair round produced a statement the checker
accepted), executes, ex, seconds, tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spider_eval import (  # noqa: E402  (bench/ is not a package)
    SPIDER_DIR,
    ExecError,
    git_commit,
    gold_is_ordered,
    load_questions,
    read_jsonl,
    results_match,
    run_sqlite,
)

_SCHEMA_MARKERS = ("does not exist", "has no column", "unknown column", "no such column")


def refused_unknown_column(
    records: Sequence[dict[str, Any]], arm: str = "constrained"
) -> list[int]:
    """qids whose ``arm`` record was refused with at least one unknown-column violation."""
    out = []
    for r in records:
        if r.get("arm") != arm or not r.get("refused"):
            continue
        texts = [v if isinstance(v, str) else v.get("message", "") for v in r["violations"]]
        if any(m in t.lower() for t in texts for m in _SCHEMA_MARKERS):
            out.append(int(r["qid"]))
    return sorted(set(out))


def probe(
    qids: Sequence[int],
    recorded: dict[int, str],
    model: str,
    out: Path,
    *,
    max_tokens: int = 256,
    spider_dir: Path = SPIDER_DIR,
) -> list[dict[str, Any]]:
    from grid_sql.ask.asker import Asker, load_backend
    from grid_sql.errors import GridSQLError, PolicyViolation

    questions = {q.qid: q for q in load_questions(spider_dir)}
    backend = load_backend(model)
    askers: dict[str, Asker] = {}
    rows: list[dict[str, Any]] = []
    for qid in qids:
        q = questions[qid]
        db = q.db_path(spider_dir)
        asker = askers.get(q.db_id)
        if asker is None:
            asker = askers[q.db_id] = Asker(db, model=backend, audit=False, max_tokens=max_tokens)
        t0 = time.perf_counter()
        sql: str | None
        viol0: list[dict[str, Any]] = []
        round0 = None
        try:
            gen = asker.generate_sql(q.question, repair=True)
            sql, reps, tokens = gen.sql, gen.repairs, gen.tokens
        except (GridSQLError, RecursionError) as exc:
            sql, reps, tokens = None, list(getattr(exc, "repairs", [])), 0
            if not isinstance(exc, PolicyViolation):
                print(f"  {qid}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if reps:
            round0 = reps[0].sql
            viol0 = [{"message": v.message, "fix": v.fix} for v in asker.checker.check(round0)]
        seconds = time.perf_counter() - t0
        executes = ex = False
        err = None
        if sql is not None:
            try:
                rows_ = run_sqlite(db, sql)
                executes = True
                ex = results_match(run_sqlite(db, q.gold), rows_, ordered=gold_is_ordered(q.gold))
            except ExecError as e:
                err = str(e)[:200]
        rec = {
            "qid": qid,
            "db_id": q.db_id,
            "model": model,
            "question": q.question,
            "recorded_sql": recorded.get(qid),
            "round0_sql": round0,
            "round0_same": round0 == recorded.get(qid),
            "round0_violations": viol0,
            "repair_sql": reps[1].sql if len(reps) > 1 else sql,
            "final_sql": sql,
            "repaired": sql is not None and bool(reps),
            "executes": executes,
            "ex": ex,
            "exec_error": err,
            "tokens": tokens,
            "seconds": round(seconds, 2),
            "gold": q.gold,
            "commit": git_commit(),
        }
        rows.append(rec)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
        mark = "EX" if ex else ("exec" if executes else ("refused" if sql is None else "error"))
        print(f"[{len(rows)}/{len(qids)}] {qid} {mark}: {rec['repair_sql']}", flush=True)
    return rows


def probe_repair_only(
    qids: Sequence[int],
    recorded: dict[int, str],
    model: str,
    out: Path,
    *,
    max_tokens: int = 256,
    spider_dir: Path = SPIDER_DIR,
) -> list[dict[str, Any]]:
    """The repair round alone, fed the *recorded* round-0 statement.

    Why: the grammar and prompt have moved since the recorded run, so a fresh round 0 may not
    be the statement that was refused; this isolates what the repair round does with it
    (``Asker.repair_messages`` is exactly what ``generate_sql`` sends).
    """
    from grid_sql.ask.asker import Asker, load_backend
    from grid_sql.decode.loop import generate
    from grid_sql.errors import GridSQLError

    questions = {q.qid: q for q in load_questions(spider_dir)}
    backend = load_backend(model)
    askers: dict[str, Asker] = {}
    rows: list[dict[str, Any]] = []
    for qid in qids:
        q = questions[qid]
        sql0 = recorded[qid]
        db = q.db_path(spider_dir)
        asker = askers.get(q.db_id)
        if asker is None:
            asker = askers[q.db_id] = Asker(db, model=backend, audit=False, max_tokens=max_tokens)
        viol0 = [{"message": v.message, "fix": v.fix} for v in asker.checker.check(sql0)]
        msgs = asker.repair_messages(q.question, sql0)
        t0 = time.perf_counter()
        engine_error = None
        try:
            gen = generate(backend, asker.guide, backend.chat_prompt(msgs), max_tokens=max_tokens)
            repair_sql, n_tokens = gen.sql, gen.n_tokens
        except (GridSQLError, RecursionError) as exc:  # the engine failed, not the repair
            engine_error = f"{type(exc).__name__}: {exc}"[:300]
            repair_sql, n_tokens = None, 0
        seconds = time.perf_counter() - t0
        accepted = repair_sql is not None and not asker.checker.check(repair_sql)
        sql = repair_sql if accepted else None
        executes = ex = False
        err = None
        if sql is not None:
            try:
                got = run_sqlite(db, sql)
                executes = True
                ex = results_match(run_sqlite(db, q.gold), got, ordered=gold_is_ordered(q.gold))
            except ExecError as e:
                err = str(e)[:200]
        rec = {
            "qid": qid,
            "db_id": q.db_id,
            "model": model,
            "mode": "repair-only",
            "question": q.question,
            "recorded_sql": sql0,
            "round0_sql": sql0,
            "round0_same": True,
            "round0_violations": viol0,
            "offered_fixed_statement": "With those fixes the statement reads"
            in msgs[-1]["content"],
            "repair_sql": repair_sql,
            "final_sql": sql,
            "repaired": accepted,
            "executes": executes,
            "ex": ex,
            "exec_error": err,
            "engine_error": engine_error,
            "tokens": n_tokens,
            "seconds": round(seconds, 2),
            "gold": q.gold,
            "commit": git_commit(),
        }
        rows.append(rec)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
        mark = "EX" if ex else ("exec" if executes else ("refused" if sql is None else "error"))
        if engine_error:
            mark = "engine error"
        print(f"[{len(rows)}/{len(qids)}] {qid} {mark}: {repair_sql or engine_error}", flush=True)
    return rows


def report(rows: Sequence[dict[str, Any]]) -> str:
    n = len(rows)
    fixed = sum(r["repaired"] for r in rows)
    execs = sum(r["executes"] for r in rows)
    exs = sum(r["ex"] for r in rows)
    same = sum(r["round0_same"] for r in rows)
    offered = sum(bool(r.get("offered_fixed_statement")) for r in rows)
    engine = sum(bool(r.get("engine_error")) for r in rows)
    lines = [
        f"questions refused for an unknown column in round 0: {n}",
        (
            f"round 0 reproduced the recorded statement: {same}/{n}"
            if any(r.get("mode") != "repair-only" for r in rows)
            else "round 0: the recorded statement (repair-only mode)"
        ),
        f"repair prompt offered the checker-fixed statement: {offered}/{n}",
        f"repair round accepted by the checker: {fixed}/{n}",
        f"repair round stopped by an engine error (not a refusal): {engine}/{n}",
        f"repaired statement executes: {execs}/{n}",
        f"repaired statement matches gold (EX): {exs}/{n}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=Path("bench/results/spider-qwen2.5-coder-0.5b-at-98d7f56.jsonl"),
    )
    ap.add_argument(
        "--out", type=Path, default=Path("bench/results/repair-probe-qwen2.5-coder-0.5b.jsonl")
    )
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--ids", type=int, nargs="*", help="only these qids")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--report", action="store_true", help="summarise --out and exit")
    ap.add_argument(
        "--arm", default="constrained", help="whose refusals (and round-0 statements) to repair"
    )
    ap.add_argument(
        "--full",
        action="store_true",
        help="generate round 0 too (generate_sql end to end) instead of repairing the recorded "
        "round-0 statement",
    )
    args = ap.parse_args(argv)
    if args.report:
        print(report(read_jsonl(args.out)))
        return 0
    records = read_jsonl(args.source)
    qids = args.ids or refused_unknown_column(records, arm=args.arm)
    recorded = {int(r["qid"]): r.get("generated_sql") for r in records if r.get("arm") == args.arm}
    done = set()
    if args.out.exists():
        done = {json.loads(x)["qid"] for x in args.out.read_text().splitlines() if x}
    todo = [q for q in qids if q not in done]
    print(f"{len(qids)} questions, {len(todo)} to run", flush=True)
    run = probe if args.full else probe_repair_only
    run(todo, recorded, args.model, args.out, max_tokens=args.max_tokens)
    rows = [json.loads(x) for x in args.out.read_text(encoding="utf-8").splitlines() if x]
    print(report([r for r in rows if r["qid"] in set(qids)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
