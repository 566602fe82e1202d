"""Policy-checker verdicts of two checkouts over the same corpora, to show a refactor of the
checker (issue #24 §4: one name resolver) changes no verdict it does not mean to.

Why a dump per checkout: the two versions of ``grid_sql`` cannot live in one process, so each
checkout dumps its findings (run from that checkout's root, ``PYTHONPATH=.``) and ``compare``
reads the two dumps.

Corpora (no server needed): the crafted bypass attempts (``tests/policy/bypass_attempts.py``)
and the checker fixtures in the three dialects; 1,500 grammar-generated sentences per dialect
(``tests/policy/sentences.py``, seed 7); Spider dev gold SQL and every Spider generation
recorded under ``bench/results`` (SQLite files from the shared data), each under the
unrestricted role and under a narrowed one (deterministic column and table denials); every
sentence and bypass query wrapped in six DML/CREATE shapes under a role allowed to write.

    PYTHONPATH=. python bench/verdict_diff.py dump OLD.json      # in the old checkout
    PYTHONPATH=. python bench/verdict_diff.py dump NEW.json      # in the new one
    python bench/verdict_diff.py compare OLD.json NEW.json
    PYTHONPATH=. python bench/verdict_diff.py time               # checker time, Spider gold
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import sys
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPIDER = ROOT.parent / "shared" / "data" / "spider"
DML_SHAPES = [
    "DELETE FROM orders WHERE id IN ({q})",
    "UPDATE orders SET total = 1 WHERE EXISTS ({q})",
    "DELETE FROM orders AS o WHERE EXISTS ({q})",
    "CREATE TABLE zz AS {q}",
    "INSERT INTO orders (id) {q}",
    "UPDATE orders SET total = ({q})",
]


def dump(out_path: str) -> None:
    from grid_sql.policy import AppPolicy, Checker, Policy, narrow, sqlite_baseline
    from grid_sql.policy.model import TablePolicy
    from grid_sql.schema import SchemaSnapshot, introspect
    from tests.policy import test_bypass as tb
    from tests.policy import test_checker as tc
    from tests.policy.bypass_attempts import APP_POLICY, attempts
    from tests.policy.sentences import generated

    out: dict[str, list[Any]] = {}

    def rec(key: str, checker: Checker, sql: str) -> None:
        found = checker.check(sql)
        out[key] = sorted(
            ([v.kind, v.table, v.column, v.verb, v.position, v.message] for v in found), key=str
        )

    def writer(snap: SchemaSnapshot) -> Policy:
        schema = snap.default_schema or ""
        verbs = frozenset({"select", "insert", "update", "delete", "create"})
        wide = Policy(
            dialect=snap.dialect,
            role="writer",
            default_schema=schema,
            tables=tuple(
                TablePolicy(
                    schema, t.name, "table", verbs, tuple((c.name, verbs) for c in t.columns)
                )
                for _, t in snap.iter_tables()
            ),
            statement_verbs=verbs,
        )
        app = dict(APP_POLICY, verbs=sorted(verbs))
        return narrow(wide, AppPolicy.from_mapping(app), snap)

    for d in ["postgresql", "mysql", "sqlite"]:
        snap = tb._snapshot(d)
        reader = Checker(
            snap, narrow(tb._service_policy(snap), AppPolicy.from_mapping(APP_POLICY), snap)
        )
        queries: list[str] = []
        for i, (_, sql) in enumerate(attempts(d)):
            rec(f"bypass/{d}/{i}", reader, sql)
            if sql.lstrip().lower().startswith("select"):
                queries.append(sql.rstrip(";"))
        for i, sql in enumerate(generated(d, tb.SCHEMAS[d], 1500, seed=7)):
            rec(f"sentences/{d}/{i}", reader, sql)
            queries.append(sql)
        dml = Checker(snap, writer(snap))
        for i, q in enumerate(queries):
            for j, shape in enumerate(DML_SHAPES):
                rec(f"dml/{d}/{i}/{j}", dml, shape.format(q=q))
        fsnap = tc._snapshot(d, tc.DIALECTS[d])
        fixtures = Checker(fsnap, tc._policy(fsnap))
        for i, (_, sql, _) in enumerate(tc.FIXTURES):
            rec(f"fixtures/{d}/{i}", fixtures, sql)

    sqls: dict[str, set[str]] = collections.defaultdict(set)
    for db, sql in tc._spider_gold():
        sqls[db].add(sql)
    for f in sorted(glob.glob(str(ROOT / "bench" / "results" / "*spider*.jsonl*"))):
        opener: Any = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt") as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                for k in ("sql", "generated_sql"):
                    if r.get(k) and r.get("db_id"):
                        sqls[r["db_id"]].add(r[k])
    for db in sorted(sqls):
        path = SPIDER / "database" / db / f"{db}.sqlite"
        if not path.exists():
            continue
        snap = introspect(f"sqlite:///{path}")
        base = sqlite_baseline(snap)
        tables = [t for _, t in snap.iter_tables()]
        tdeny = [t.name for t in tables if zlib.crc32(t.name.encode()) % 5 == 0]
        cdeny = {
            t.name: [
                c.name for c in t.columns if zlib.crc32(f"{t.name}.{c.name}".encode()) % 3 == 0
            ]
            for t in tables
            if t.name not in tdeny
        }
        app = {
            "tables": {"deny": tdeny},
            "columns": {"deny": {k: v for k, v in cdeny.items() if v}},
        }
        wide, narrowed = (
            Checker(snap, base),
            Checker(snap, narrow(base, AppPolicy.from_mapping(app), snap)),
        )
        for sql in sorted(sqls[db]):
            rec(f"spider/{db}/base/{sql}", wide, sql)
            rec(f"spider/{db}/narrow/{sql}", narrowed, sql)
    Path(out_path).write_text(json.dumps(out))
    print(f"{len(out)} checks -> {out_path}", file=sys.stderr)


def timing(repeats: int) -> None:
    """Wall time of checking the 972 Spider dev gold statements (unrestricted role; best of
    ``repeats``), the checker's cost on a request path."""
    import time

    import grid_sql
    from grid_sql.policy import Checker, sqlite_baseline
    from grid_sql.schema import introspect
    from tests.policy import test_checker as tc

    gold = tc._spider_gold()
    checkers: dict[str, Checker] = {}
    for db, _ in gold:
        if db not in checkers:
            snap = introspect(f"sqlite:///{SPIDER / 'database' / db / f'{db}.sqlite'}")
            checkers[db] = Checker(snap, sqlite_baseline(snap))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for db, sql in gold:
            checkers[db].check(sql)
        best = min(best, time.perf_counter() - start)
    print(
        f"{grid_sql.__file__}: {len(gold)} checks, best of {repeats}: {best:.2f} s "
        f"({best / len(gold) * 1000:.2f} ms per statement)"
    )


def compare(old_path: str, new_path: str, show: int) -> None:
    old = json.loads(Path(old_path).read_text())
    new = json.loads(Path(new_path).read_text())
    rows: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    examples: list[str] = []
    for key, before in old.items():
        after = new.get(key, [])
        corpus = key.split("/")[0]
        row = rows[corpus]
        row["checks"] += 1
        if bool(before) != bool(after):
            row["now refused" if after else "now allowed"] += 1
            if len(examples) < show:
                examples.append(f"{key[:120]}\n   old: {before}\n   new: {after}")
        if {f[0] for f in before} != {f[0] for f in after}:
            row["kinds differ"] += 1
        if before != after:
            row["findings differ"] += 1
    cols = ["checks", "now refused", "now allowed", "kinds differ", "findings differ"]
    print("| corpus | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for corpus, row in sorted(rows.items()):
        print(f"| {corpus} | " + " | ".join(str(row[c]) for c in cols) + " |")
    for e in examples:
        print(e)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="check every corpus statement, write the findings")
    d.add_argument("out")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--show", type=int, default=0, help="print this many verdict changes")
    t = sub.add_parser("time", help="checker wall time over the Spider dev gold SQL")
    t.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.out)
    elif args.cmd == "time":
        timing(args.repeats)
    else:
        compare(args.old, args.new, args.show)


if __name__ == "__main__":
    main()
