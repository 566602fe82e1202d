"""Issue #30 §4: honest answers under restricted roles, measured.

Runs the default Asker pipeline (scoped role grammar, bind on close, autofix, one repair round,
``on_denied="refuse"``) and, paired at the same commit, ``on_denied="answer_allowed_part"``
(the behaviour before the refusal), with a model over the 52 questions of
``bench/honest_questions.json`` on the shipped SQLite files of Chinook and Sakila, each under
a restricted role (:data:`POLICY`). Per question and mode it records the outcome (answered,
refused with ``needs``, or another typed error), whether a refusal names an object the
question needs (the right reason), whether the foreign-idiom repair round ran, and execution
accuracy against the gold statement (rows compared as multisets, each row's values sorted,
numbers rounded to 2 decimals; bench/alias_questions.py's rule).

A *substitution* is a question that needs a denied object answered with an executed query.

    python bench/honest_answers.py --model qwen2.5-coder-0.5b           # resumable
    python bench/honest_answers.py --model qwen2.5-coder-1.5b
    python bench/honest_answers.py --report --models qwen2.5-coder-0.5b qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alias_questions import ROOT, SQLITE_FILE, _commit, result_key, run_gold  # noqa: E402

QUESTIONS = ROOT / "bench" / "honest_questions.json"
DBS = ("chinook", "sakila")
MODES = ("refuse", "answer_allowed_part")
# The restricted roles: SELECT only, some tables and columns denied (bench/walk_arm.py's
# SCOPE_POLICY on Chinook; on Sakila the staff, the revenue views and what identifies a
# customer or an amount paid).
POLICY: dict[str, dict[str, Any]] = {
    "chinook": {
        "verbs": ["select"],
        "tables": {"deny": ["Employee", "Playlist", "PlaylistTrack"]},
        "columns": {"deny": {"Customer": ["Email", "Phone"]}},
    },
    "sakila": {
        "verbs": ["select"],
        "tables": {"deny": ["staff", "staff_list", "sales_by_store", "sales_by_film_category"]},
        "columns": {
            "deny": {
                "payment": ["amount"],
                "customer": ["email"],
                "address": ["phone"],
                "customer_list": ["phone"],
            }
        },
    },
}


def out_path(model: str) -> Path:
    return ROOT / "bench" / "results" / f"honest-answers-{model}.jsonl"


def right_reason(needs: list[str], wanted: list[str]) -> bool:
    """A refusal's ``needs`` name an object the question needs: the object itself, or a
    column of a table the question needs (``Employee.BirthDate`` for ``Employee``)."""
    want = {w.lower() for w in wanted}
    for n in needs:
        low = n.lower()
        if low in want or low.split(".")[0] in want:
            return True
    return False


def run(model: str, limit: int) -> None:
    from grid_sql.ask.asker import Asker
    from grid_sql.decode.backend import load_backend
    from grid_sql.errors import GridSQLError, PolicyRefusal

    data = json.loads(QUESTIONS.read_text())
    path = out_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["mode"], r["db"], r["i"]))
    backend = load_backend(model)
    commit = _commit()
    askers: dict[tuple[str, str], Asker] = {}
    for mode, db, i in schedule(data, limit):
        if (mode, db, i) in done:
            continue
        item = data[db][i]
        url = f"sqlite:///{SQLITE_FILE[db]}"
        asker = askers.get((mode, db))
        if asker is None:
            asker = askers[mode, db] = Asker(
                url, model=backend, policy=POLICY[db], audit=False, on_denied=mode
            )
        rec: dict[str, Any] = {
            "mode": mode,
            "db": db,
            "i": i,
            "kind": item["kind"],
            "question": item["q"],
            "commit": commit,
            "model": model,
        }
        t0 = time.perf_counter()
        rows: list[tuple[Any, ...]] | None = None
        try:
            res = asker.ask(item["q"])
            rows = [tuple(r) for r in res.rows]
            reps = res.repairs
            rec.update(sql=res.sql, outcome="answered", needs=[], error="")
        except PolicyRefusal as exc:
            reps = getattr(exc, "repairs", []) or []
            rec.update(sql=exc.sql, outcome="refused", needs=exc.needs, error=str(exc))
        except GridSQLError as exc:
            reps = getattr(exc, "repairs", []) or []
            rec.update(
                sql=getattr(exc, "sql", None),
                outcome=type(exc).__name__,
                needs=[],
                error=str(exc)[:400],
            )
        rec["repairs"] = [r.kind for r in reps]
        rec["idiom_hints"] = [v for r in reps if r.kind == "idiom" for v in r.violations]
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        if item["kind"] == "denied":
            rec["right_reason"] = rec["outcome"] == "refused" and right_reason(
                rec["needs"], item["needs"]
            )
        else:
            gold = run_gold(url, item["gold"])
            rec["ex"] = rows is not None and result_key(rows) == result_key(gold)
        with path.open("a") as f:
            f.write(json.dumps(rec, default=str) + "\n")
        print(
            f"{model} {mode}/{db}/{i} {item['kind']}: {rec['outcome']} "
            f"needs={rec['needs']} ex={rec.get('ex')} {rec['seconds']}s "
            f"{rec.get('sql')!r:.140}",
            file=sys.stderr,
        )


def schedule(data: dict[str, Any], limit: int) -> list[tuple[str, str, int]]:
    """The order of the runs, most telling first, so an interrupted run is still a paired
    measurement: denied-object questions under the default; ordinary questions in both
    modes, one after the other; idiom questions under the default; then the denied-object
    questions under ``answer_allowed_part`` (the old behaviour, for the substitution baseline).
    Idiom questions are not run under ``answer_allowed_part``: ``on_denied`` only acts on a
    refusal, and one is reported if it happens on an idiom question."""

    def items(kind: str) -> list[tuple[str, int]]:
        out = []
        for db in DBS:
            rows = data[db][:limit] if limit else data[db]
            out += [(db, i) for i, it in enumerate(rows) if it["kind"] == kind]
        return out

    order = [("refuse", db, i) for db, i in items("denied")]
    for db, i in items("ordinary"):
        order += [("refuse", db, i), ("answer_allowed_part", db, i)]
    order += [("refuse", db, i) for db, i in items("idiom")]
    order += [("answer_allowed_part", db, i) for db, i in items("denied")]
    return order


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-"


def report(models: list[str]) -> str:
    head = [
        "# Honest answers under restricted roles (issue #30 §4)",
        "",
        "| model | denied-object questions refused with the right reason | substitutions "
        "(denied-object question answered) | ordinary EX, refuse | ordinary EX, "
        "answer_allowed_part | EX change | ordinary questions refused | idiom questions: "
        "EX (hint round ran) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    body: list[str] = []
    commits: set[str] = set()
    for model in models:
        p = out_path(model)
        if not p.exists():
            continue
        recs = [json.loads(x) for x in p.read_text().splitlines()]
        commits |= {r["commit"] for r in recs}

        def sel(mode: str, kind: str, recs: list[dict[str, Any]] = recs) -> list[dict[str, Any]]:
            return [r for r in recs if r["mode"] == mode and r["kind"] == kind]

        den, den_old = sel("refuse", "denied"), sel("answer_allowed_part", "denied")
        idi = sel("refuse", "idiom")
        # paired: ordinary questions run in both modes at the same commit
        old_by = {(r["db"], r["i"], r["commit"]): r for r in sel("answer_allowed_part", "ordinary")}
        pairs = [
            (r, old_by[r["db"], r["i"], r["commit"]])
            for r in sel("refuse", "ordinary")
            if (r["db"], r["i"], r["commit"]) in old_by
        ]
        ordi = [a for a, _ in pairs]
        ok = sum(r["right_reason"] for r in den)
        subs = sum(r["outcome"] == "answered" for r in den)
        ex, ex_old = sum(a["ex"] for a, _ in pairs), sum(b["ex"] for _, b in pairs)
        n_o = len(pairs)
        delta = 100 * (ex - ex_old) / n_o if n_o else float("nan")
        false_ref = sum(r["outcome"] == "refused" for r in ordi)
        hinted = sum(bool(r["idiom_hints"]) for r in idi)
        head.append(
            f"| {model} | {_pct(ok, len(den))} | {subs} / {len(den)} | {_pct(ex, n_o)} | "
            f"{_pct(ex_old, n_o)} | {delta:+.1f} pt | {false_ref} | "
            f"{_pct(sum(r['ex'] for r in idi), len(idi))} ({hinted} hinted) |"
        )
        subs_old = sum(r["outcome"] == "answered" for r in den_old)
        body += [
            "",
            f"## {model}",
            "",
            f"- denied-object questions, `answer_allowed_part` (the old behaviour): "
            f"{subs_old} / {len(den_old)} answered with a substitute query, "
            f"{sum(r['outcome'] == 'refused' for r in den_old)} refused",
            "- outcomes of denied-object questions under the default (`refuse`):",
            "",
            "| db | i | question | outcome | needs | right reason |",
            "|---|---|---|---|---|---|",
        ]
        for r in den:
            body.append(
                f"| {r['db']} | {r['i']} | {r['question']} | {r['outcome']} | "
                f"{', '.join(r['needs'])} | {r['right_reason']} |"
            )
        body += ["", "Idiom questions (`refuse`; the hint round's hints):", ""]
        for r in idi:
            hints = "; ".join(r["idiom_hints"]) or "(none)"
            body.append(f"- {r['db']}/{r['i']} ex={r['ex']} {r['outcome']}: {hints}")
        changed = [(a, b) for a, b in pairs if (a["ex"], a["outcome"]) != (b["ex"], b["outcome"])]
        body += ["", f"Ordinary questions whose outcome differs between the modes: {len(changed)}"]
        for a, b in changed:
            body.append(
                f"- {a['db']}/{a['i']} {a['question']!r}: refuse -> {a['outcome']} ex={a['ex']}; "
                f"answer_allowed_part -> {b['outcome']} ex={b['ex']}"
            )
    before = []
    for model in models:
        for f in sorted(
            out_path(model).parent.glob(f"honest-answers-{model}.blocked-only-*.jsonl")
        ):
            rs = [json.loads(x) for x in f.read_text().splitlines()]
            den = [r for r in rs if r["mode"] == "refuse" and r["kind"] == "denied"]
            before.append(
                f"- {model}, blocked favourites only (`{f.name}`, commit "
                f"{', '.join(sorted({r['commit'] for r in rs}))}, interrupted after the first "
                f"{len(den)} denied-object questions, all Chinook): "
                f"{sum(r['right_reason'] for r in den)}/{len(den)} refused with the right reason, "
                f"{sum(r['outcome'] == 'answered' for r in den)} substitutions ("
                + "; ".join(
                    f"{r['question']!r} -> `{r['sql']}`" for r in den if r["outcome"] == "answered"
                )
                + ")"
            )
    meta = [
        "",
        "What the numbers mean:",
        "",
        "- All refusals above come from the question's own words (`question_intents`, checked "
        "before generating): the refusal from blocked favourites alone fell short on the first "
        "runs (below), because the prompt shows only the role's schema and the model, never "
        "having seen `Customer.Phone`, does not try to write it (the 1.5B answered phone "
        "numbers with `SELECT Fax, SupportRepId`). The question-side check was written after "
        "those runs, on a set written before it: the set is not held out for it, and its "
        "words-match is a heuristic (see docs/guarantees.md §5b for its limits).",
        "- The paired EX compares `refuse` with `answer_allowed_part` at the same commit; both "
        "run the same generation (the foreign-idiom round included), so a difference can only "
        "come from a refusal of an ordinary question: there were none.",
        "- Idiom questions: the hint round ran where the model's blocked favourite was a foreign "
        "construct; most idiom questions were answered in SQLite's own idiom at once (the "
        "model wrote LIMIT / IFNULL / length directly), so the round is rare.",
        *before,
        "",
        f"- commit(s) of the records: {', '.join(sorted(commits))}; records in "
        "`bench/results/honest-answers-<model>.jsonl`",
        f"- host: {platform.node()} ({platform.machine()}, {platform.processor() or 'cpu'}), "
        "llama.cpp on CPU, greedy",
        f"- report written {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC",
        "- command: `python bench/honest_answers.py --model M` for each model, then "
        "`python bench/honest_answers.py --report --models qwen2.5-coder-0.5b "
        "qwen2.5-coder-1.5b`",
        "- set: `bench/honest_questions.json`, 52 questions of our own: per database 8 that "
        "need a denied object, 6 in other dialects' idioms, 12 ordinary; SQLite files of "
        "Chinook and Sakila, roles of `POLICY` in the script; denied-object and ordinary "
        "questions run in both "
        "modes, idiom questions under `refuse` only",
        "- right reason: the refusal's `needs` name an object the question needs (or a column "
        "of a table it needs); EX as in bench/alias_questions.py",
    ]
    return "\n".join(head + meta + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=0, help="first N questions per database")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--models", nargs="+", default=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-honest-answers.md"))
    args = ap.parse_args(argv)
    if args.report:
        text = report(args.models)
        Path(args.out).write_text(text)
        print(text)
        return 0
    run(args.model, args.limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
