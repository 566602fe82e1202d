"""What a change of the masks does to recorded runs, without re-running everything.

Decoding is greedy: at every step the model's token is the argmax over the allowed set. A
mask change that only *removes* tokens leaves a recorded generation unchanged as long as the
recorded text is still admitted token by token (its argmax is still allowed, so it is still
the argmax), and the repair round's input is then unchanged too. So only the questions whose
recorded SQL the current masks refuse need re-running (``ids``); ``validate`` checks that
claim on a full re-run (every question not listed must give byte-identical SQL); ``paired``
compares one arm across two record files (last record per question wins), paired per
question, with the harness's interval and McNemar test. ``ids`` and ``validate`` judge with
the masks of the checkout they run from (run them at the commit of the new code / new run).

    python bench/mask_change.py ids --suite spider bench/results/spider-...-at-OLD.jsonl
    python bench/mask_change.py validate bench/results/spider-...-at-NEW.jsonl OLD.jsonl ...
    python bench/mask_change.py paired bind+autofix+repair OLD.jsonl[,MORE] NEW.jsonl[,MORE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spider_eval as se  # noqa: E402

ARMS = ("bind", "bind+repair")


def _records(paths: list[str], arms: tuple[str, ...] = ARMS) -> dict[tuple[int, str], Any]:
    out: dict[tuple[int, str], Any] = {}
    for p in paths:
        for r in se.read_jsonl(Path(p)):
            if r["arm"] in arms:
                out[(r["qid"], r["arm"])] = r
    return out


class _Runtimes:
    """The role grammar's parser runtime per database, as the Asker builds it (defaults)."""

    def __init__(self, suite: str) -> None:
        qs = se.load_chinook_questions() if suite == "chinook" else se.load_questions()
        self.questions = {q.qid: q for q in qs}
        self._rt: dict[Path, Any] = {}

    def admits(self, qid: int, sql: str) -> bool:
        from grid_sql.ask.asker import Asker
        from grid_sql.parser import ParserRuntime

        db = self.questions[qid].db_path(se.SPIDER_DIR)
        rt = self._rt.get(db)
        if rt is None:
            grammar = Asker(str(db), model=None, audit=False)._mode(False).grammar
            rt = self._rt[db] = ParserRuntime.for_grammar(grammar)
        return rt.advance(rt.initial, sql.encode()) is not None


def affected(records: dict[tuple[int, str], Any], rts: _Runtimes) -> set[int]:
    """Questions with a recorded round (first or final SQL) the current masks refuse."""
    out = set()
    for (qid, _), r in records.items():
        for key in ("generated_sql", "sql"):
            sql = r.get(key)
            if sql and not rts.admits(qid, sql):
                out.add(qid)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ids", help="questions whose recorded SQL the current masks refuse")
    a.add_argument("--suite", choices=("spider", "chinook"), default="spider")
    a.add_argument("records", nargs="+")
    v = sub.add_parser("validate", help="a full re-run changed only the affected questions")
    v.add_argument("--suite", choices=("spider", "chinook"), default="spider")
    v.add_argument("new")
    v.add_argument("old", nargs="+")
    p = sub.add_parser("paired", help="one arm across two record sets, paired per question")
    p.add_argument("arm")
    p.add_argument("old", help="comma-separated record files")
    p.add_argument("new", help="comma-separated record files")
    args = ap.parse_args(argv)
    if args.cmd == "ids":
        print(" ".join(map(str, sorted(affected(_records(args.records), _Runtimes(args.suite))))))
    elif args.cmd == "validate":
        old = _records(args.old)
        hit = affected(old, _Runtimes(args.suite))
        same = differ = 0
        for k, n in sorted(_records([args.new]).items()):
            o = old.get(k)
            if o is None or k[0] in hit:
                continue
            if (n.get("generated_sql"), n.get("sql")) == (o.get("generated_sql"), o.get("sql")):
                same += 1
            else:
                differ += 1
                print("changed although not affected:", k, repr(o.get("sql")), repr(n.get("sql")))
        print(f"affected questions {sorted(hit)}; others: {same} records identical, {differ} not")
        if differ:
            raise SystemExit(1)
    else:
        o = _records(args.old.split(","), (args.arm,))
        n = _records(args.new.split(","), (args.arm,))
        ids = sorted({q for q, _ in o} & {q for q, _ in n})
        for key in ("executes", "ex"):
            b = [q for q in ids if o[(q, args.arm)].get(key) and not n[(q, args.arm)].get(key)]
            c = [q for q in ids if n[(q, args.arm)].get(key) and not o[(q, args.arm)].get(key)]
            d, lo, hi, pv = se.paired_difference(len(b), len(c), len(ids))
            ko = sum(1 for q in ids if o[(q, args.arm)].get(key))
            kn = sum(1 for q in ids if n[(q, args.arm)].get(key))
            print(
                f"{args.arm} {key}: {ko}/{len(ids)} -> {kn}/{len(ids)}; lost {b}, gained {c}; "
                f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] points, McNemar p={pv:.3f}"
            )


if __name__ == "__main__":
    main()
