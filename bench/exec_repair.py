"""The execution repair round on recorded runs (``Asker.ask``: a read-only statement the checker
passed but the database refused goes back to the model with the database's message, when the
repair round was not spent on the checker's violations).

Input: the ``bind+autofix+repair`` records of ``bench/autofix_offline.py`` (the default
pipeline, exact offline for greedy decoding) and the ``bind`` first-round records they came
from. A question gets the round when its final statement did not run, was not refused, and came
from the first round (it passed the checker there, or autofix completed it): then the model
runs once, through the same ``Asker`` the arm used (``generate_sql(refused=(sql, [message]))``
with the message ``execute()`` raises for that statement on the role's own connection), and the
new statement is scored by the harness's executor. Every other record is carried over, so the
new arm ``bind+autofix+repair+exec`` is what ``Asker.ask`` gives on every question.

    python bench/exec_repair.py AUTOFIX_OFFLINE.jsonl FIRST_ROUND.jsonl [...] \\
        --model qwen2.5-coder-0.5b --out bench/results/exec-repair-....jsonl
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

import spider_eval as se  # noqa: E402

ARM = "bind+autofix+repair"
NEW = "bind+autofix+repair+exec"


def candidates(finals: dict[int, dict[str, Any]], first: dict[int, dict[str, Any]]) -> list[int]:
    """Questions whose default-pipeline statement came from the first round, passed the
    checker (possibly through autofix) and did not run."""
    out = []
    for qid, r in sorted(finals.items()):
        if r.get("executes") or r.get("refused") or not r.get("sql"):
            continue
        f = first.get(qid)
        autofixed = bool(r.get("autofix") and r["autofix"].get("complete"))
        round0 = f is not None and (not f.get("refused") or autofixed)
        if round0 and not (r.get("autofix") or {}).get("round") == 1:
            out.append(qid)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("finals", type=Path, help="autofix_offline.py output (bind+autofix+repair)")
    ap.add_argument("first", type=Path, nargs="+", help="spider_eval.py bind records")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--spider-dir", type=Path, default=se.SPIDER_DIR)
    args = ap.parse_args(argv)

    from grid_sql.ask.asker import load_backend
    from grid_sql.ask.execute import execute
    from grid_sql.errors import ExecutionError, GridSQLError

    finals = {r["qid"]: r for r in se.read_jsonl(args.finals) if r["arm"] == ARM}
    first: dict[int, dict[str, Any]] = {}
    for p in args.first:
        for r in se.read_jsonl(p):
            if r["arm"] == "bind" and r.get("model") == args.model:
                first[r["qid"]] = r
    todo = candidates(finals, first)
    sys.stderr.write(f"{len(todo)} of {len(finals)} questions get the execution round\n")
    backend = load_backend(args.model) if todo else None
    askers: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for qid, r in sorted(finals.items()):
        rec = dict(r, arm=NEW)
        if qid in todo:
            db = se.record_db(r, args.spider_dir)
            asker = askers.get(str(db))
            if asker is None:
                assert backend is not None
                asker = askers[str(db)] = se.make_asker(
                    db, backend, args.max_tokens, scopes=True, autofix=True, bind=True
                )
            q = se.Question(qid, r["db_id"], r.get("question", ""), r["gold"])
            try:
                execute(asker.bind, r["sql"], policy=asker.policy)
                message = None  # it runs through the Asker's executor: nothing to repair
            except ExecutionError as exc:
                message = str(exc)
            rec["exec_repair"] = {"message": message, "refused_sql": r["sql"]}
            if message is not None:
                t0 = time.perf_counter()
                try:
                    gen = asker.generate_sql(q.question, refused=(r["sql"], [message]))
                    sql, refused, err = gen.sql, False, None
                except GridSQLError as exc:
                    sql, refused, err = None, True, f"{type(exc).__name__}: {exc}"[:300]
                rec.update(sql=sql, refused=refused, error=err)
                rec["seconds"] = float(r.get("seconds") or 0.0) + time.perf_counter() - t0
                rec.update(se._score(q, db, sql, se.run_sqlite(db, r["gold"])))
                rec["exec_repair"]["sql"] = sql
            sys.stderr.write(f"q{qid}: {message!r} -> executes={rec['executes']} ex={rec['ex']}\n")
        out.append(rec)
    args.out.write_text("".join(json.dumps(x) + "\n" for x in out), encoding="utf-8")
    n = len(out)
    run = sum(bool(x["executes"]) for x in out)
    ex = sum(bool(x["ex"]) for x in out)
    sys.stdout.write(
        f"{NEW}: executes {se._pct(run, n)}, EX {se._pct(ex, n)} over {n} questions "
        f"({len(todo)} got the round)\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
