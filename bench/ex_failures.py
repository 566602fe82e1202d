"""Why statements that run still answer wrong: result and structure classes (issue #8 §3).

Issue #8 asks, where a target is missed, which failure classes remain and why. After the
masks, the conformance checker, autofix and the repair round, almost every statement runs
(RESULTS-spider §13), so what separates EX from "executes" is statements that run and return
another result. This script sorts them without reading them by hand, from the pooled records
(``bench/pool_report.py``'s rule: the last record per question and arm wins):

result classes (the generated result against the gold result, on the question's database):

- ``column order``: the same result with the columns in another order (Spider's official
  evaluation counts these right; the strict EX here does not);
- ``extra columns`` / ``missing columns``: the gold result is a projection of the generated
  one (an extra select item), or the other way round;
- ``other columns``: another number of columns, neither a projection of the other;
- ``row order``: the same rows in another order where the gold query sorts;
- ``duplicates``: the same distinct rows, other multiplicities (a DISTINCT missing or extra);
- ``empty``: no rows where the gold has some;
- ``too few rows`` / ``too many rows``: a strict sub- or super-multiset of the gold rows (a
  filter or LIMIT too strict, a filter or join condition missing);
- ``same row count, other values`` / ``other rows``: everything else.

structure (sqlglot, gold against generated): whether the statement reads the same set of
tables as the gold query, fewer (a join missing), more, or another set. A statement that reads
the gold's tables and still answers wrong chose the wrong column, filter, aggregate or
grouping; one that reads other tables chose the wrong join path. Neither is a schema
violation, which is why no mask and no conformance check can refuse it.

``--labels FILE`` adds a hand reading: a TSV of ``qid, label, why`` per wrong statement
(``#`` lines are comments), tabulated by label; it fails when a wrong statement has no label
or a label names a statement that is not wrong, so the reading cannot drift from the records.

    python bench/ex_failures.py FILE.jsonl [...] --model qwen2.5-coder-1.5b \\
        --arm bind+autofix+repair [--ids 1-150] [--labels FILE.tsv]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pool_report as pr  # noqa: E402
import spider_eval as se  # noqa: E402

RESULT_CLASSES = (
    "column order",
    "extra columns",
    "missing columns",
    "other columns",
    "row order",
    "duplicates",
    "empty",
    "too few rows",
    "too many rows",
    "same row count, other values",
    "other rows",
)


def _projects(wide: list[tuple[Any, ...]], narrow: list[tuple[Any, ...]]) -> bool:
    """Some choice of ``len(narrow[0])`` columns of ``wide`` equals ``narrow`` as a multiset."""
    import itertools

    if len(wide) != len(narrow) or not wide or not narrow:
        return False
    w, n = len(wide[0]), len(narrow[0])
    target = Counter(narrow)
    for cols in itertools.permutations(range(w), n):
        if Counter(tuple(r[c] for c in cols) for r in wide) == target:
            return True
    return False


def result_class(gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]], ordered: bool) -> str:
    """The class of a wrong result (see the module docstring); inputs are raw rows."""
    g, p = se._norm_rows(gold), se._norm_rows(pred)
    if se.results_match(gold, pred, ordered=ordered, any_column_order=True):
        return "column order"
    gw = {len(r) for r in g}
    pw = {len(r) for r in p}
    if g and p and gw != pw:
        if _projects(p, g):
            return "extra columns"
        if _projects(g, p):
            return "missing columns"
        return "other columns"
    cg, cp = Counter(g), Counter(p)
    if cg == cp:
        return "row order"
    if set(cg) == set(cp):
        return "duplicates"
    if g and not p:
        return "empty"
    if not cp - cg:
        return "too few rows"
    if not cg - cp:
        return "too many rows"
    if len(g) == len(p):
        return "same row count, other values"
    return "other rows"


def tables_read(sql: str) -> frozenset[str] | None:
    """The real tables ``sql`` reads (names lower-cased, CTE names left out); None when
    sqlglot cannot parse it."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (sqlglot.errors.ParseError, RecursionError, ValueError):
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return frozenset(t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes)


def structure_class(gold_sql: str, sql: str) -> str:
    g, p = tables_read(gold_sql), tables_read(sql)
    if g is None or p is None:
        return "unparsed"
    if g == p:
        return "same tables"
    if p < g:
        return "fewer tables (a join missing)"
    if p > g:
        return "more tables"
    return "other tables"


def classify(
    recs: Sequence[dict[str, Any]], arm: str, ids: set[int] | None
) -> list[dict[str, Any]]:
    """One row per record of ``arm`` that executes with a wrong result."""
    out = []
    gold_rows: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for r in sorted(recs, key=lambda r: r["qid"]):
        if r["arm"] != arm or not r.get("executes") or r.get("ex"):
            continue
        if ids is not None and r["qid"] not in ids:
            continue
        sql = r.get("sql") or r.get("generated_sql")
        db = se.record_db(r)
        key = (str(db), r["qid"])
        if key not in gold_rows:
            gold_rows[key] = se.run_sqlite(db, r["gold"])
        pred = se.run_sqlite(db, sql)
        out.append(
            {
                "qid": r["qid"],
                "result": result_class(gold_rows[key], pred, se.gold_is_ordered(r["gold"])),
                "structure": structure_class(r["gold"], sql),
            }
        )
    return out


def table(rows: Sequence[dict[str, Any]], n_arm: int) -> str:
    structs = sorted({r["structure"] for r in rows})
    by = Counter((r["result"], r["structure"]) for r in rows)
    head = "| result class | n | " + " | ".join(structs) + " | questions |"
    lines = [head, "|" + " --- |" * (len(structs) + 3)]
    for c in RESULT_CLASSES:
        rs = [r for r in rows if r["result"] == c]
        if not rs:
            continue
        cells = " | ".join(str(by[(c, s)]) for s in structs)
        qs = " ".join(f"q{r['qid']}" for r in rs)
        lines.append(f"| {c} | {len(rs)} | {cells} | {qs} |")
    tot = " | ".join(str(sum(by[(c, s)] for c in RESULT_CLASSES)) for s in structs)
    lines.append(f"| all | {len(rows)} | {tot} | |")
    pct = 100 * len(rows) / n_arm if n_arm else 0.0
    return (
        f"{len(rows)} of {n_arm} statements run with a wrong result ({pct:.1f} %)\n\n"
        + "\n".join(lines)
        + "\n"
    )


def read_labels(path: Path) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        qid, label, why = line.split("\t")
        out[int(qid)] = (label, why)
    return out


def label_table(rows: Sequence[dict[str, Any]], labels: dict[int, tuple[str, str]]) -> str:
    wrong = {r["qid"] for r in rows}
    missing = sorted(wrong - set(labels))
    extra = sorted(set(labels) - wrong)
    if missing or extra:
        raise SystemExit(
            f"labels out of step with the records: unlabelled {missing}, not wrong {extra}"
        )
    by: dict[str, list[int]] = {}
    for q, (label, _) in labels.items():
        by.setdefault(label, []).append(q)
    lines = ["| hand label | n | questions |", "| --- | --- | --- |"]
    for label, qs in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"| {label} | {len(qs)} | {' '.join(f'q{q}' for q in sorted(qs))} |")
    return "\n" + "\n".join(lines) + "\n"


def _ids(spec: str | None) -> set[int] | None:
    """``1-150``: sample positions 1..150 of the ``Random(2026)`` order, as question ids."""
    if spec is None:
        return None
    lo, _, hi = spec.partition("-")
    order = se.select_questions(se.load_questions(), n=None, seed=2026, ids=None)
    return {q.qid for q in order[int(lo) - 1 : int(hi or lo)]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--model", required=True, help="the model label in the records")
    ap.add_argument("--arm", default="bind+autofix+repair")
    ap.add_argument("--ids", help="sample positions lo-hi (Random(2026) order), e.g. 1-150")
    ap.add_argument("--labels", type=Path, help="hand labels (TSV: qid, label, why)")
    args = ap.parse_args(argv)
    ids = _ids(args.ids)
    recs = pr.pooled(args.files, args.model)
    n_arm = sum(r["arm"] == args.arm and (ids is None or r["qid"] in ids) for r in recs)
    rows = classify(recs, args.arm, ids)
    sys.stdout.write(table(rows, n_arm))
    if args.labels:
        sys.stdout.write(label_table(rows, read_labels(args.labels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
