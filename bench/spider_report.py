"""The Markdown report of ``bench/spider_eval.py`` runs: paired tables, outcome classes,
where refused columns sit, and the ``--rescore`` pass that adds ``ex_any_order``.

Split out of ``spider_eval.py`` (issue #24: no module over 800 lines); ``spider_eval``
re-exports every name.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from spider_common import (
    ARMS,
    SPIDER_DIR,
    Question,
    gold_is_ordered,
    results_match,
    run_sqlite,
    wilson,
)


# --------------------------------------------------------------------------- report
def _pct(k: int, n: int) -> str:
    if n == 0:
        return "–"
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({k}/{n})"


def paired_difference(b: int, c: int, n: int) -> tuple[float, float, float, float]:
    """Paired EX difference (second - first) with a 95% Wald interval, and McNemar's exact p.

    ``b`` = questions only the first arm gets right, ``c`` = only the second, ``n`` = pairs.
    """
    if n == 0:
        return (0.0, 0.0, 0.0, 1.0)
    d = (c - b) / n
    se = math.sqrt(max(0.0, (b + c) - (c - b) ** 2 / n)) / n
    z = 1.959963984540054
    m = b + c
    k = min(b, c)
    p = min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2**m) if m else 1.0
    return (d, d - z * se, d + z * se, p)


def record_db(r: dict[str, Any], spider_dir: Path = SPIDER_DIR) -> Path:
    """The SQLite file a record's question was asked on (Chinook or a Spider database)."""
    if r["db_id"] == "chinook":
        from grid_sql.data import chinook_path

        return chinook_path()
    return Question(r["qid"], r["db_id"], "", "").db_path(spider_dir)


def rescore(records: Sequence[dict[str, Any]], spider_dir: Path = SPIDER_DIR) -> int:
    """Add ``ex_any_order`` to records without it (in place; returns how many changed).

    A record that is EX already, or does not execute, needs no execution; any other is run
    again with its gold query on the same read-only executor as ``_score``."""
    gold_rows: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    changed = 0
    for r in records:
        if "ex_any_order" in r:
            continue
        if r["ex"] or not r["executes"] or not r.get("sql"):
            r["ex_any_order"] = bool(r["ex"])
        else:
            db = record_db(r, spider_dir)
            key = (str(db), r["qid"])
            if key not in gold_rows:
                gold_rows[key] = run_sqlite(db, r["gold"])
            rows = run_sqlite(db, r["sql"])
            r["ex_any_order"] = results_match(
                gold_rows[key], rows, ordered=gold_is_ordered(r["gold"]), any_column_order=True
            )
        changed += 1
    return changed


def report(
    records: Sequence[dict[str, Any]],
    model: str | None = None,
    arms: Sequence[str] | None = None,
) -> str:
    """Markdown tables for the questions every arm (of ``arms``) has a record for (paired)."""
    recs = [r for r in records if model is None or r.get("model") == model]
    # the five arms in their usual order, then any other arm names asked for (e.g. the
    # ``arm@label`` arms of a ``--baseline`` file) in the order given
    wanted = [a for a in ARMS if arms is None or a in arms]
    wanted += [a for a in arms or () if a not in ARMS and a not in wanted]
    by: dict[str, dict[int, dict[str, Any]]] = {a: {} for a in wanted}
    for r in recs:
        if r["arm"] in by:
            by[r["arm"]][r["qid"]] = r  # the last record wins
    present = [a for a in wanted if by[a]]
    if not present:
        return "(no results)\n"
    common = sorted(set.intersection(*(set(by[a]) for a in present)))
    n = len(common)
    commits = sorted({str(by[a][q].get("commit", "?")) for a in present for q in common})
    lines = [
        f"Paired over {n} questions (every arm present); 95% Wilson intervals. "
        f"Records per arm: {', '.join(f'{a} {len(by[a])}' for a in present)}. "
        f"Commits: {', '.join(commits)}.",
        "",
        "| arm | executes | EX | EX, any column order | tokens/query | s/query | truncations "
        "| refusals | errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in present:
        rs = [by[a][q] for q in common]
        ex = sum(bool(r["ex"]) for r in rs)
        perm = (
            _pct(sum(bool(r["ex_any_order"]) for r in rs), n)
            if all("ex_any_order" in r for r in rs)
            else "n/a (`--rescore`)"
        )
        run = sum(bool(r["executes"]) for r in rs)
        tok = sum(r["tokens"] for r in rs) / n if n else 0.0
        sec = sum(r["seconds"] for r in rs) / n if n else 0.0
        tr = sum(bool(r["truncated"]) for r in rs)
        rf = sum(bool(r["refused"]) for r in rs)
        er = sum(bool(r.get("error")) and not r["refused"] for r in rs)
        lines.append(
            f"| {a} | {_pct(run, n)} | {_pct(ex, n)} | {perm} | {tok:.1f} | {sec:.1f} | {tr} "
            f"| {rf} | {er} |"
        )
    pairs = [(x, y) for i, x in enumerate(present) for y in present[i + 1 :]]
    if pairs:
        lines += ["", "Paired EX (row arm right / column arm right):", ""]
        lines += [
            "| pair | both | only first | only second | neither | EX second - first [95%] "
            "| McNemar p |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for x, y in pairs:
            c = Counter((bool(by[x][q]["ex"]), bool(by[y][q]["ex"])) for q in common)
            d, lo, hi, p = paired_difference(c[(True, False)], c[(False, True)], n)
            lines.append(
                f"| {x} vs {y} | {c[(True, True)]} | {c[(True, False)]} | "
                f"{c[(False, True)]} | {c[(False, False)]} | "
                f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | {p:.3f} |"
            )
    lines += ["", "Outcome classes per arm (each question in exactly one):", ""]
    classes = list(OUTCOMES)
    lines += ["| arm | " + " | ".join(classes) + " |", "| --- |" + " --- |" * len(classes)]
    for a in present:
        oc = Counter(outcome(by[a][q]) for q in common)
        lines.append(f"| {a} | " + " | ".join(str(oc[k]) for k in classes) + " |")
    return "\n".join(lines) + "\n"


OUTCOMES = (
    "EX",
    "wrong result",
    "exec: no such column",
    "exec: other error",
    "refused: unknown column",
    "refused: ambiguous column",
    "refused: unknown function",
    "refused: aggregate misuse",
    "refused: other",
    "engine error",
)

# violation kind -> outcome class (a record with several kinds takes the first listed here)
_REFUSAL_KINDS = (
    ("unknown_column", "refused: unknown column"),
    ("ambiguous_column", "refused: ambiguous column"),
    ("unknown_function", "refused: unknown function"),
    ("aggregate_misuse", "refused: aggregate misuse"),
)
# the same read from the messages, for records without kinds (final rounds, older runs)
_REFUSAL_TEXT = (
    (re.compile(r"has no column|does not exist in", re.I), "refused: unknown column"),
    (re.compile(r"is ambiguous", re.I), "refused: ambiguous column"),
    (re.compile(r"aggregate", re.I), "refused: aggregate misuse"),
    (re.compile(r"function", re.I), "refused: unknown function"),
)


def outcome(r: dict[str, Any]) -> str:
    """One failure class per record (for the reading of the results, not a metric)."""
    if r["ex"]:
        return "EX"
    if r["executes"]:
        return "wrong result"
    if r.get("exec_error"):
        return (
            "exec: no such column" if "no such column" in r["exec_error"] else "exec: other error"
        )
    if r["refused"]:
        kinds = set(r.get("violation_kinds") or [])
        for kind, cls in _REFUSAL_KINDS:
            if kind in kinds:
                return cls
        if not kinds:
            text = " ".join(r.get("violations") or []) + " " + str(r.get("error") or "")
            for pat, cls in _REFUSAL_TEXT:
                if pat.search(text):
                    return cls
        return "refused: other"
    return "engine error"


def _checker_for(q_db: Path) -> Any:
    """The post-parse checker of the role the harness uses (baseline, SELECT only)."""
    import sqlalchemy as sa

    from grid_sql.policy.checker import Checker
    from grid_sql.policy.grants import sqlite_baseline
    from grid_sql.schema.introspect import introspect

    eng = sa.create_engine(f"sqlite:///file:{q_db.resolve()}?mode=ro&uri=true")
    try:
        with eng.connect() as c:
            snap = introspect(c)
    finally:
        eng.dispose()
    return Checker(snap, sqlite_baseline(snap))


_SELECT_KW = re.compile(r"\bSELECT\b", re.IGNORECASE)
_FROM_KW = re.compile(r"\bFROM\b", re.IGNORECASE)


def column_place(sql: str, pos: int) -> str:
    """``select-list`` when offset ``pos`` lies between a SELECT and that query's first FROM
    (Proposition 11: no left-to-right mask can know the tables there), else ``after-from``.

    A textual heuristic: the nearest SELECT before ``pos`` decides.
    """
    for m in reversed([m for m in _SELECT_KW.finditer(sql) if m.start() < pos]):
        f = _FROM_KW.search(sql, m.start())
        return "select-list" if f is None or f.start() > pos else "after-from"
    return "after-from"


def refusal_places(
    records: Sequence[dict[str, Any]], arm: str, spider_dir: Path = SPIDER_DIR
) -> Counter[str]:
    """Per refused question of ``arm``: where its unknown/ambiguous columns sit.

    The refused SQL is re-checked (positions are not stored); classes: ``only select-list``,
    ``only after-from``, ``both``, ``other kinds only``.
    """
    from grid_sql.data import chinook_path

    checkers: dict[str, Any] = {}
    out: Counter[str] = Counter()
    for r in records:
        if r["arm"] != arm or not r.get("refused") or not r.get("generated_sql"):
            continue
        db = (
            chinook_path()
            if r["db_id"] == "chinook"
            else Question(r["qid"], r["db_id"], "", "").db_path(spider_dir)
        )
        if r["db_id"] not in checkers:
            checkers[r["db_id"]] = _checker_for(db)
        sql = r["generated_sql"]
        vs = [
            v
            for v in checkers[r["db_id"]].check(sql)
            if v.kind in ("unknown_column", "ambiguous_column") and v.position is not None
        ]
        places = {column_place(sql, v.position) for v in vs}
        if not places:
            out["other kinds only"] += 1
        elif places == {"select-list"}:
            out["only select-list"] += 1
        elif places == {"after-from"}:
            out["only after-from"] += 1
        else:
            out["both"] += 1
    return out


def with_arm_label(
    records: Iterable[dict[str, Any]], label: str, arms: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Copies of ``records`` (of ``arms``, default all) with ``arm`` renamed ``arm@label``:
    another file's records, paired in one :func:`report` with this file's by question id
    (e.g. the same arms before and after a fix)."""
    return [
        {**r, "arm": f"{r['arm']}@{label}"} for r in records if arms is None or r["arm"] in arms
    ]
