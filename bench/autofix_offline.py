"""Deterministic autofix measured offline on recorded first-round SQL (issue #8 §1).

Autofix (``grid_sql/policy/autofix.py``) is a function of the generated statement, the schema
and the role, so its effect on a recorded run needs no model: for every record of a
first-round arm (``constrained``, ``scope``) of ``bench/spider_eval.py`` whose statement the
checker refused, run autofix with the same role, checker and role grammar the Asker had (the
scope arm with the scope-aware grammar); when it fixes the statement completely, execute the
fixed SQL and score it with the harness's own rules (``spider_eval._score``). Every other
record is carried over unchanged. The new arms are ``constrained+autofix`` and
``scope+autofix``; they are compared, paired per question, with their first-round arm and with
the LLM repair arm (``repair``, ``scope+repair``): executes %, EX %, paired EX difference with a
95% interval and McNemar's exact p (``spider_eval.paired_difference``).

Partial fixes (some but not all violations certain) are counted, not scored: they only matter
for what the repair round is then given (``bench/spider_eval.py --arms
partial-autofix+repair``). The combined arms (``autofix+repair``, ``scope+autofix+repair``)
take the recorded repair round where autofix leaves a refusal, and apply autofix to its
refused statement too, as the Asker does in every round.

    python bench/autofix_offline.py bench/results/spider-qwen2.5-coder-0.5b.jsonl \
        --model qwen2.5-coder-0.5b \
        --out bench/results/autofix-offline-spider-qwen2.5-coder-0.5b.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spider_eval as se  # noqa: E402

FIRST_ROUND = {
    "constrained": ("constrained+autofix", "repair", False),
    "scope": ("scope+autofix", "scope+repair", True),
    # the Asker's default since bind on close: scope masks + select-list obligations + bind
    "bind": ("bind+autofix", "bind+repair", True),
}
# autofix first, the recorded repair round only where autofix leaves a refusal: exact offline,
# because decoding is greedy and the repair round gets the same input (complete fixes only)
COMBINED = {
    "constrained": "autofix+repair",
    "scope": "scope+autofix+repair",
    "bind": "bind+autofix+repair",
}


def _asker(db: Path, arm: str) -> Any:
    """The Asker the arm's first round ran under (its grammar is what autofix must stay in)."""
    from grid_sql.ask.asker import Asker

    scoped = FIRST_ROUND[arm][2]
    return Asker(db, audit=False, scopes=scoped, bind_select_list=arm == "bind")


def fix_records(
    records: Sequence[dict[str, Any]], model: str, spider_dir: Path = se.SPIDER_DIR
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The autofix arms' records (one per first-round record) and outcome counts."""
    from grid_sql.policy.autofix import autofix

    askers: dict[tuple[str, str], Any] = {}
    gold_rows: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    out: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    last: dict[tuple[int, str], dict[str, Any]] = {}
    for r in records:
        if r.get("model") == model and r["arm"] in FIRST_ROUND:
            last[(r["qid"], r["arm"])] = r  # the last record wins, as in spider_eval.report
    finals = {
        (r["qid"], r["arm"]): r
        for r in records
        if r.get("model") == model and r["arm"] in {v[1] for v in FIRST_ROUND.values()}
    }
    for (qid, arm), r in sorted(last.items()):
        new_arm = FIRST_ROUND[arm][0]
        rec = dict(r, arm=new_arm, autofix=None)
        if r.get("refused") and r.get("generated_sql"):
            db = se.record_db(r, spider_dir)
            key = (str(db), arm)
            if key not in askers:
                askers[key] = _asker(db, arm)
            asker = askers[key]
            sql = r["generated_sql"]
            found = asker.checker.check(sql)
            if not found:
                counts[f"{arm}: refused then, passes the checker now (kept refused)"] += 1
            else:
                af = autofix(sql, asker.checker, asker.grammar, found)
                rec["autofix"] = {
                    "complete": af.complete,
                    "edits": [e.to_dict() for e in af.edits],
                    "dropped": af.dropped,
                    "proposed": len(af.proposed),
                    "kinds": sorted({v.kind for v in found}),
                }
                if af.complete and af.fixed is not None:
                    gk = (str(db), qid)
                    if gk not in gold_rows:
                        gold_rows[gk] = se.run_sqlite(db, r["gold"])
                    q = se.Question(qid, r["db_id"], r.get("question", ""), r["gold"])
                    rec.update(sql=af.fixed, refused=False, violation_kinds=[])
                    rec.update(se._score(q, db, af.fixed, gold_rows[gk]))
                    counts[f"{arm}: fixed completely"] += 1
                    counts[f"{arm}: fixed completely, EX"] += bool(rec["ex"])
                    counts[f"{arm}: fixed completely, executes"] += bool(rec["executes"])
                    rep = finals.get((qid, FIRST_ROUND[arm][1]))
                    if rep is not None:
                        counts[f"{arm}: fixed completely, repair round gave the same SQL"] += (
                            rep.get("sql") == af.fixed
                        )
                        counts[f"{arm}: fixed completely, repair round EX"] += bool(rep["ex"])
                elif af.applied:
                    counts[f"{arm}: partly fixed (other violations remain)"] += 1
                elif af.proposed:
                    counts[f"{arm}: fix proposed but dropped ({af.dropped})"] += 1
                else:
                    counts[f"{arm}: no certain fix"] += 1
            counts[f"{arm}: refused"] += 1
        out.append(rec)
        rep = finals.get((qid, FIRST_ROUND[arm][1]))
        if rep is not None:
            done = bool(rec.get("autofix") and rec["autofix"]["complete"])
            # an autofixed question costs the first round only; else the repair arm's record,
            # whose refused statement gets autofix too (the Asker applies it in every round)
            both = dict(rec if done else rep, arm=COMBINED[arm], autofix=rec.get("autofix"))
            if not done and rep.get("refused") and rep.get("generated_sql"):
                db = se.record_db(rep, spider_dir)
                asker = askers.get((str(db), arm)) or _asker(db, arm)
                askers[(str(db), arm)] = asker
                found = asker.checker.check(rep["generated_sql"])
                af = autofix(rep["generated_sql"], asker.checker, asker.grammar, found)
                if found and af.complete and af.fixed is not None:
                    gk = (str(db), qid)
                    if gk not in gold_rows:
                        gold_rows[gk] = se.run_sqlite(db, r["gold"])
                    q = se.Question(qid, r["db_id"], r.get("question", ""), r["gold"])
                    both.update(sql=af.fixed, refused=False, violation_kinds=[])
                    both.update(se._score(q, db, af.fixed, gold_rows[gk]))
                    both["autofix"] = {
                        "round": 1,
                        "complete": True,
                        "edits": [e.to_dict() for e in af.edits],
                    }
                    counts[f"{arm}: repair round's refusal fixed completely"] += 1
                    counts[f"{arm}: repair round's refusal fixed completely, EX"] += bool(
                        both["ex"]
                    )
            out.append(both)
    return out, counts


def table(records: Sequence[dict[str, Any]], arms: Sequence[str]) -> str:
    """Executes/EX per arm and paired EX differences, over questions every arm has."""
    by: dict[str, dict[int, dict[str, Any]]] = {a: {} for a in arms}
    for r in records:
        if r["arm"] in by:
            by[r["arm"]][r["qid"]] = r
    present = [a for a in arms if by[a]]
    common = sorted(set.intersection(*(set(by[a]) for a in present)))
    n = len(common)
    lines = [
        f"Paired over {n} questions.",
        "",
        "| arm | executes | EX | EX, any column order | refusals | s/query (generation) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for a in present:
        rs = [by[a][q] for q in common]
        run = sum(bool(r["executes"]) for r in rs)
        ex = sum(bool(r["ex"]) for r in rs)
        perm = (
            se._pct(sum(bool(r["ex_any_order"]) for r in rs), n)
            if all("ex_any_order" in r for r in rs)
            else "n/a"
        )
        rf = sum(bool(r["refused"]) for r in rs)
        sec = sum(float(r.get("seconds") or 0.0) for r in rs) / n
        lines.append(f"| {a} | {se._pct(run, n)} | {se._pct(ex, n)} | {perm} | {rf} | {sec:.1f} |")
    lines += [
        "",
        "| pair | both | only first | only second | neither | EX second - first [95%] "
        "| McNemar p |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, x in enumerate(present):
        for y in present[i + 1 :]:
            c = Counter((bool(by[x][q]["ex"]), bool(by[y][q]["ex"])) for q in common)
            d, lo, hi, p = se.paired_difference(c[(True, False)], c[(False, True)], n)
            lines.append(
                f"| {x} vs {y} | {c[(True, True)]} | {c[(True, False)]} | {c[(False, True)]} "
                f"| {c[(False, False)]} | {100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] "
                f"| {p:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, nargs="+", help="spider_eval.py JSONL files")
    ap.add_argument("--model", required=True, help="the model label in the records")
    ap.add_argument("--out", type=Path, default=None, help="write the autofix arms' records")
    ap.add_argument("--spider-dir", type=Path, default=se.SPIDER_DIR)
    ap.add_argument(
        "--table",
        nargs="+",
        default=None,
        help="only print the paired table of these arms over every record loaded (e.g. a "
        "spider_eval.py autofix+repair run next to the recorded arms and the offline ones)",
    )
    args = ap.parse_args(argv)
    if args.table:
        recs = [r for p in args.records for r in se.read_jsonl(p) if r.get("model") == args.model]
        sys.stdout.write(table(recs, args.table))
        return 0
    recs = [r for p in args.records for r in se.read_jsonl(p)]
    fixed, counts = fix_records(recs, args.model, args.spider_dir)
    commit = se.git_commit()
    for r in fixed:
        r["autofix_commit"] = commit
    if args.out is not None:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in fixed), encoding="utf-8")
    allr = [r for r in recs if r.get("model") == args.model] + fixed
    for first, (new, rep, _) in FIRST_ROUND.items():
        cand = ("unconstrained", first, rep, new, COMBINED[first])
        arms = [a for a in cand if any(r["arm"] == a for r in allr)]
        if first in arms:
            sys.stdout.write(f"\n### {first} / {rep} / {new}\n\n" + table(allr, arms))
    sys.stdout.write("\nAutofix outcomes on refused first-round records:\n\n")
    for k in sorted(counts):
        sys.stdout.write(f"- {k}: {counts[k]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
