"""What the big catalog's prompt shows (issue #25 §2): for each question of a big-catalog
pass, are the tables its gold statement reads described in full, and how many of the tables
described belong to the question's own database?

Why: the big arm answers right less often than the per-database arm on the same questions
(`bench/RESULTS-defog.md`); this splits that gap into questions whose prompt lacked a gold
table (schema linking) and questions whose prompt had them all among distractors (the model
chose or joined wrongly). No model runs: the prompts are rebuilt with the checkout's code
(``Asker.messages``, the same budget as the pass) and the verdicts read from the records.

    PYTHONPATH=. python bench/defog_big_recall.py --big big_again3 --own whole3
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

import sqlglot
from sqlglot import exp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from defog import load_questions, reader_url  # noqa: E402

RECORDS = HERE / "results" / "defog-qwen2.5-coder-1.5b.jsonl.gz"
_FULL = re.compile(r"CREATE TABLE ([A-Za-z_0-9]+)\.([A-Za-z_0-9]+)")


def gold_tables(sql: str) -> set[str]:
    """The tables a gold statement reads (lower case, CTE names left out)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table)} - ctes


def big_schema(db: str) -> str:
    """The schema database ``db``'s tables have on the big catalog (``bench/defog_big.py``)."""
    return "consumer_div" if db == "ewallet" else db


def real_tables(dbs: list[str]) -> set[tuple[str, str]]:
    """(schema on the big catalog, table) of every table of the per-database copies: what
    the big catalog holds besides its distractors."""
    import sqlalchemy as sa

    out: set[tuple[str, str]] = set()
    for db in dbs:
        home = big_schema(db)  # ewallet's tables live in consumer_div in both copies
        schema = home if home != db else "public"
        engine = sa.create_engine(reader_url(db))
        with engine.connect() as con:
            rows = con.execute(
                sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                {"s": schema},
            )
            out |= {(home, r[0].lower()) for r in rows}
        engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big", default="big_again3", help="arm of the big-catalog pass")
    ap.add_argument("--own", default="whole3", help="arm of the per-database pass to pair")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = ap.parse_args()

    from grid_sql.ask.asker import Asker, load_backend

    records = [json.loads(line) for line in gzip.open(RECORDS)]
    big = {r["qid"]: r for r in records if r["arm"] == args.big}
    own = {r["qid"]: r for r in records if r["arm"] == args.own}
    questions = {q.qid: q for q in load_questions()}
    asker = Asker(reader_url("big"), model=load_backend(args.model), audit=False, date_help=True)
    real = real_tables(sorted({q.db for q in questions.values()}))
    kinds = {"own": 0, "own-schema distractor": 0, "other schema": 0, "other-schema distractor": 0}
    shown_all: list[int] = []
    n_gold = n_shown = n_home = n_full = 0
    for qid in sorted(big):
        q = questions[qid]
        gold = gold_tables(q.gold)
        text = asker.messages(q.text)[0]["content"]
        full = [(s, t.lower()) for s, t in _FULL.findall(text)]
        home = big_schema(q.db)
        got = gold & {t for s, t in full if s == home}
        n_gold, n_shown = n_gold + len(gold), n_shown + len(got)
        if got == gold:
            shown_all.append(qid)
        mine = sum(s == home for s, _ in full)
        for s, t in full:
            own_schema, is_real = s == home, (s, t) in real
            kinds[
                ("own" if is_real else "own-schema distractor")
                if own_schema
                else ("other schema" if is_real else "other-schema distractor")
            ] += 1
        n_home, n_full = n_home + mine, n_full + len(full)
        seen = "all gold shown" if got == gold else "missing " + ",".join(sorted(gold - got))
        print(
            f"q{qid:<4}{q.db:15s}{seen:40s}own-db tables {mine}/{len(full)}"
            f"  big {'right' if big[qid]['correct'] else '-':5s}"
            f" own {'right' if own.get(qid, {}).get('correct') else '-'}"
        )
    missing = [q for q in big if q not in shown_all]
    print(f"\ngold tables described in full: {n_shown}/{n_gold}")
    print(f"tables described from the question's own database: {n_home}/{n_full}")
    print("tables described, by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    for label, ids in (("every gold table shown", shown_all), ("a gold table missing", missing)):
        b = sum(bool(big[q]["correct"]) for q in ids)
        o = sum(bool(own.get(q, {}).get("correct")) for q in ids)
        print(f"{label}: {len(ids)} questions, EX big {b}, own {o}")


if __name__ == "__main__":
    main()
