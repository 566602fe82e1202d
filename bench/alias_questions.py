"""Issue #29 §4: "top N / per group / highest first" questions on three real servers.

Runs the default Asker pipeline (scoped role grammar, bind on close, autofix, one repair round)
with a model over the 50 questions of ``bench/alias_questions.json`` (25 Chinook, 25 Sakila),
on SQLite (the shipped files), PostgreSQL and MariaDB (``scripts/services.sh``; the service
login, narrowed to SELECT by an app policy). Per question it records the SQL, whether it
executed, a dead end (a ``MaskError`` the user saw, or a ``dead_end`` repair entry: the
Asker's fallback to the unscoped grammar fired), and execution accuracy against the gold
statement run on the same server (rows compared as multisets, each row's values sorted,
numbers rounded to 2 decimals, so column order and float noise do not count).

    eval "$(bash scripts/services.sh env)"
    python bench/alias_questions.py --model qwen2.5-coder-1.5b              # resumable
    python bench/alias_questions.py --model qwen2.5-coder-1.5b --report     # RESULTS table
"""

from __future__ import annotations

import argparse
import datetime as _dt
import decimal
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
QUESTIONS = ROOT / "bench" / "alias_questions.json"
DIALECTS = ("sqlite", "postgresql", "mysql")
DBS = ("chinook", "sakila")
SERVER_DB = {
    ("postgresql", "chinook"): "chinook",
    ("postgresql", "sakila"): "sakila",
    ("mysql", "chinook"): "Chinook",
    ("mysql", "sakila"): "sakila",
}
ENV = {"postgresql": "GRID_SQL_PG_URL", "mysql": "GRID_SQL_MYSQL_URL"}
SQLITE_FILE = {
    "chinook": SHARED / "chinook" / "Chinook_Sqlite.sqlite",
    "sakila": SHARED / "sakila" / "sqlite" / "sakila.sqlite",
}


def url_of(dialect: str, db: str) -> str:
    """The database URL of (dialect, db): a shipped SQLite file, or the test server's."""
    if dialect == "sqlite":
        return f"sqlite:///{SQLITE_FILE[db]}"
    import sqlalchemy as sa

    base = os.environ.get(ENV[dialect])
    if not base:
        raise SystemExit(f'{ENV[dialect]} is not set: eval "$(bash scripts/services.sh env)"')
    return sa.make_url(base).set(database=SERVER_DB[dialect, db]).render_as_string(False)


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_CHINOOK_NAMES: set[str] = set()


def chinook_names() -> set[str]:
    """Table and column names of Chinook (PascalCase), to snake-case gold for PostgreSQL."""
    if not _CHINOOK_NAMES:
        import sqlite3

        con = sqlite3.connect(f"file:{SQLITE_FILE['chinook']}?mode=ro", uri=True)
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        _CHINOOK_NAMES.update(tables)
        for t in tables:
            _CHINOOK_NAMES.update(r[1] for r in con.execute(f'PRAGMA table_info("{t}")'))
        con.close()
    return _CHINOOK_NAMES


def gold_sql(item: dict[str, Any], dialect: str, db: str) -> str:
    over = item.get("gold_by_dialect", {}).get(dialect)
    if over:
        return str(over)
    sql = str(item["gold"])
    if dialect == "postgresql" and db == "chinook":
        names = chinook_names()
        sql = re.sub(r"\b[A-Za-z]+\b", lambda m: snake(m[0]) if m[0] in names else m[0], sql)
    return sql


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float, decimal.Decimal)):
        return round(float(v), 2)
    return str(v)


def result_key(rows: list[tuple[Any, ...]]) -> list[tuple[str, ...]]:
    return sorted(tuple(sorted(repr(_norm(v)) for v in r)) for r in rows)


def run_gold(url: str, sql: str) -> list[tuple[Any, ...]]:
    import sqlalchemy as sa

    eng = sa.create_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]
    finally:
        eng.dispose()


def out_path(model: str) -> Path:
    return ROOT / "bench" / "results" / f"alias-questions-{model}.jsonl"


def _commit() -> str:
    try:
        return subprocess.check_output(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], text=True
        ).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(model: str, dialects: list[str], limit: int) -> None:
    from grid_sql.ask.asker import Asker
    from grid_sql.decode.backend import load_backend
    from grid_sql.errors import GridSQLError, MaskError

    data = json.loads(QUESTIONS.read_text())
    path = out_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["dialect"], r["db"], r["i"]))
    backend = load_backend(model)
    commit = _commit()
    tmp = Path(tempfile.mkdtemp(prefix="alias-q-"))
    for dialect in dialects:
        for db in DBS:
            items = data[db][:limit] if limit else data[db]
            todo = [i for i in range(len(items)) if (dialect, db, i) not in done]
            if not todo:
                continue
            url = url_of(dialect, db)
            asker = Asker(
                url,
                model=backend,
                policy={"verbs": ["select"]},
                audit=tmp / f"audit-{dialect}-{db}.sqlite",
            )
            for i in todo:
                item = items[i]
                rec: dict[str, Any] = {
                    "dialect": dialect,
                    "db": db,
                    "i": i,
                    "question": item["q"],
                    "commit": commit,
                    "model": model,
                }
                t0 = time.perf_counter()
                rows: list[tuple[Any, ...]] | None = None
                try:
                    res = asker.ask(item["q"])
                    rows = [tuple(r) for r in res.rows]
                    rec.update(
                        sql=res.sql,
                        executes=True,
                        dead_end=any(r.kind == "dead_end" for r in res.repairs),
                        repairs=[r.kind for r in res.repairs],
                        error="",
                    )
                except GridSQLError as exc:
                    reps = getattr(exc, "repairs", []) or []
                    rec.update(
                        sql=getattr(exc, "sql", None),
                        executes=False,
                        dead_end=isinstance(exc, MaskError)
                        or any(r.kind == "dead_end" for r in reps),
                        repairs=[r.kind for r in reps],
                        error=f"{type(exc).__name__}: {str(exc)[:400]}",
                    )
                rec["mask_error"] = rec["error"].startswith("MaskError")
                rec["seconds"] = round(time.perf_counter() - t0, 2)
                gold = run_gold(url, gold_sql(item, dialect, db))
                rec["ex"] = rows is not None and result_key(rows) == result_key(gold)
                with path.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                print(
                    f"{dialect}/{db}/{i}: exec={rec['executes']} ex={rec['ex']} "
                    f"dead_end={rec['dead_end']} {rec['seconds']}s {rec.get('sql')!r:.160}",
                    file=sys.stderr,
                )


def report(model: str) -> str:
    recs = [json.loads(x) for x in out_path(model).read_text().splitlines()]
    commits = sorted({r["commit"] for r in recs})
    lines = [
        f"# Alias sort-key questions (issue #29 §4): {model}",
        "",
        f"- report written {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; records at "
        f"{', '.join(commits)} in `{out_path(model).relative_to(ROOT)}` (committed, one line "
        "a question; a re-run skips the questions already recorded: delete the file to redo)",
        f"- host: {platform.node() or 'unknown'}, {os.cpu_count()} cores, "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- command: `python bench/alias_questions.py --model {model}` (services from "
        "`scripts/services.sh`; the service login narrowed to SELECT; default Asker options)",
        "- 50 questions of our own (`bench/alias_questions.json`): 25 Chinook, 25 Sakila",
        "",
        "| dialect | questions | dead ends (MaskError seen) | fallbacks fired | executes | EX |",
        "|---|---|---|---|---|---|",
    ]
    for d in DIALECTS:
        rs = [r for r in recs if r["dialect"] == d]
        if not rs:
            continue
        n = len(rs)
        me = sum(r["mask_error"] for r in rs)
        fb = sum("dead_end" in r["repairs"] for r in rs)
        ex = sum(r["executes"] for r in rs)
        ok = sum(r["ex"] for r in rs)
        lines.append(
            f"| {d} | {n} | {me} | {fb} | {ex} ({100 * ex / n:.0f}%) | {ok} ({100 * ok / n:.0f}%) |"
        )
    fails = [r for r in recs if not r["executes"]]
    if fails:
        lines += ["", "Questions that did not execute:", ""]
        for r in fails:
            lines.append(f"- {r['dialect']}/{r['db']}/{r['i']}: {r['error'][:200]!r}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--dialects", nargs="+", default=list(DIALECTS), choices=DIALECTS)
    ap.add_argument("--limit", type=int, default=0, help="first N questions per database")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-alias-questions.md"))
    args = ap.parse_args(argv)
    if args.report:
        text = report(args.model)
        Path(args.out).write_text(text)
        print(text)
        return 0
    run(args.model, args.dialects, args.limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
