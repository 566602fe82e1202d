#!/usr/bin/env python
"""defog sql-eval on PostgreSQL through the real Asker, as a read-only LOGIN role (issue #25 §5).

Questions: ``questions_gen_postgres.csv`` of defog sql-eval (210 questions over 11 databases,
6 categories; ``/work/shared/data/defog_sql_eval``), on the ``defog_<db>`` databases that
``scripts/services.sh start`` loads into the local PostgreSQL. Every statement, generated or
gold, runs as ``grid_defog_reader``: a LOGIN role the harness creates (idempotently, with the
service superuser) with CONNECT on those databases, USAGE on their schemas (reading a table
needs it) and SELECT on their tables, nothing else (TEMPORARY is revoked from PUBLIC there,
so the role cannot create temp tables either).

Arms (same model, same prompt: ``Asker.messages``):

* ``constrained`` — ``Asker.ask`` with every default (scoped role grammar, bind on close,
  autofix, one repair round, a database refusal repaired with its message and a type hint)
  and ``date_help=True`` (the default while this ran; off since, by this run's §4
  figures). The Asker's role policy is read from the server (the reader's grants), audit
  off.
* ``unconstrained`` — greedy decoding from the same backend with no mask (``bench/
  spider_eval.py``'s ``run_unconstrained``: stop at ``;``, an end token or the budget), its
  statement executed once; no checker, no repair.
* ``nodate`` — ``constrained`` with ``Asker(date_help=False)`` (now the default), on the
  ``date_functions`` questions only (§4's paired measurement). Where the date line would
  not be shown the prompt is identical and decoding greedy, so nothing is generated: the record says
  ``same_prompt`` and the report takes the ``constrained`` outcome.

* ``big`` — ``constrained`` on the big catalog (``bench/defog_big.py``): the 11 databases in
  one PostgreSQL database, a schema each, plus 2,000 distractor tables; one Asker over all of
  it (schema linking and the prompt budget choose what the model sees). Its answers run there,
  the gold on the question's own database (the same rows). Asked for by name
  (``--arms big``); it builds ``defog_big`` first.

Correctness is sql-eval's rule (``bench/sqleval_rule.py``: any accepted gold alternative,
``{a, b}`` column subsets, extra columns allowed, row order only for ordering questions);
each gold alternative runs with sql-eval's 10 s timeout (one that fails is skipped and
counted in the record). A dead end is a ``MaskError`` the user saw or a ``dead_end`` repair
entry (the Asker's unscoped-grammar fallback fired).

Order: question k of every category before question k+1 of any (so any prefix of the run
is a stratified sample); ``--per-category N`` stops after N per category. Records append to
``bench/results/defog-<model>.jsonl`` (git-ignored), one line per question x arm, so a run
resumes where it stopped.

    bash scripts/services.sh start; eval "$(bash scripts/services.sh env)"
    nice python bench/defog.py --per-category 4          # stratified subset first
    nice python bench/defog.py                           # then the rest (resumes)
    python bench/defog.py --report                       # bench/RESULTS-defog.md
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import sqleval_rule as rule  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "defog_sql_eval"
QUESTIONS = DATA / "questions" / "questions_gen_postgres.csv"
ROLE = "grid_defog_reader"
ROLE_PASSWORD = "grid-defog-reader"
CATEGORIES = ("date_functions", "group_by", "order_by", "ratio", "table_join", "instruct")
ARMS = ("constrained", "unconstrained", "nodate", "big")
DEFAULT_ARMS = ARMS[:3]  # "big" builds its database first: asked for by name
DISTRACTORS = 2000
TIMEOUT_S = 10.0  # sql-eval's query timeout
RESULTS = BENCH / "results"


@dataclass(frozen=True)
class Question:
    qid: int  # row index in the CSV (0-based)
    db: str
    category: str
    question: str
    gold: str
    instructions: str = ""

    @property
    def text(self) -> str:
        """What the model is asked: the question, then sql-eval's instructions if any (the
        ``instruct`` category; sql-eval's prompt puts them right after the question)."""
        if not self.instructions.strip():
            return self.question
        return f"{self.question}\n{self.instructions.strip()}"


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [
            Question(
                i,
                r["db_name"],
                r["query_category"],
                r["question"],
                r["query"],
                r.get("instructions") or "",
            )
            for i, r in enumerate(csv.DictReader(fh))
        ]


def stratified(questions: Sequence[Question], per_category: int | None) -> list[Question]:
    """Question k of every category, then k+1, ...; within a category the databases take
    turns (its first question on each database, then its second, ...), so a prefix of the
    run spreads over databases too (the CSV lists one database's questions together)."""
    by_cat: dict[str, list[Question]] = defaultdict(list)
    rank: dict[int, int] = {}
    seen: dict[tuple[str, str], int] = defaultdict(int)
    dbs = list(dict.fromkeys(q.db for q in questions))
    for q in questions:
        rank[q.qid] = seen[q.category, q.db]
        seen[q.category, q.db] += 1
        by_cat[q.category].append(q)
    for qs in by_cat.values():
        qs.sort(key=lambda q: (rank[q.qid], dbs.index(q.db)))
    cats = [c for c in CATEGORIES if c in by_cat] + sorted(set(by_cat) - set(CATEGORIES))
    depth = max(len(v) for v in by_cat.values())
    if per_category is not None:
        depth = min(depth, per_category)
    return [by_cat[c][k] for k in range(depth) for c in cats if k < len(by_cat[c])]


# --------------------------------------------------------------------------- the server
def admin_url() -> str:
    url = os.environ.get("GRID_SQL_PG_URL")
    if not url:
        raise SystemExit('GRID_SQL_PG_URL is not set: eval "$(bash scripts/services.sh env)"')
    return url


def _conninfo(url: str, db: str, user: str | None = None, password: str | None = None) -> str:
    import sqlalchemy as sa

    u = sa.make_url(url)
    user = user or u.username or "postgres"
    password = password if password is not None else (u.password or "")
    return (
        f"host={u.host or '127.0.0.1'} port={u.port or 5432} dbname={db} "
        f"user={user} password={password}"
    )


def reader_url(db: str) -> str:
    import sqlalchemy as sa

    return (
        sa.make_url(admin_url())
        .set(username=ROLE, password=ROLE_PASSWORD, database=f"defog_{db}")
        .render_as_string(hide_password=False)
    )


def ensure_role(dbs: Sequence[str]) -> None:
    """Create (or reset) the reader: LOGIN, CONNECT and SELECT on the defog databases only."""
    import psycopg
    from psycopg import sql as psql

    role = psql.Identifier(ROLE)
    with psycopg.connect(_conninfo(admin_url(), "postgres"), autocommit=True) as con:
        exists = con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        con.execute(
            psql.SQL(
                verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                "PASSWORD {}"
            ).format(role, psql.Literal(ROLE_PASSWORD))
        )
    for db in dbs:
        name = psql.Identifier(f"defog_{db}")
        with psycopg.connect(_conninfo(admin_url(), f"defog_{db}"), autocommit=True) as con:
            con.execute(psql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(name))
            con.execute(psql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(name, role))
            con.execute(psql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(name, role))
            schemas = [
                r[0]
                for r in con.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                    "AND nspname <> 'information_schema'"
                )
            ]
            for schema in schemas:  # USAGE: reading a table needs it (ewallet: consumer_div)
                sch = psql.Identifier(schema)
                con.execute(psql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sch, role))
                con.execute(
                    psql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(sch, role)
                )


class ExecError(Exception):
    """A statement the server refused (or timed out on); the message starts with SQLSTATE."""


_CONNS: dict[str, Any] = {}


def run_sql(db: str, sql: str, timeout_s: float = TIMEOUT_S) -> rule.Result:
    """All rows of ``sql`` as the reader (read-only transaction, ``timeout_s``)."""
    import psycopg

    con = _CONNS.get(db)
    if con is None or con.closed:
        con = _CONNS[db] = psycopg.connect(
            _conninfo(admin_url(), f"defog_{db}", ROLE, ROLE_PASSWORD), autocommit=True
        )
        con.execute("SET default_transaction_read_only = on")
    con.execute(f"SET statement_timeout = {int(timeout_s * 1000)}")
    try:
        cur = con.execute(sql.encode())  # bytes: no %-placeholders are read in the text
        if cur.description is None:
            raise ExecError("no result set")
        cols = [d.name for d in cur.description]
        return rule.Result.of(cols, cur.fetchall())
    except psycopg.Error as exc:
        raise ExecError(f"{exc.sqlstate or type(exc).__name__}: {str(exc)[:300]}") from exc


_GOLD: dict[int, tuple[list[rule.Result], int]] = {}


def gold_results(q: Question) -> tuple[list[rule.Result], int]:
    """(results of the gold alternatives that ran, how many failed to run)."""
    if q.qid not in _GOLD:
        out, failed = [], 0
        for g in rule.minimal_queries(q.gold):
            try:
                out.append(run_sql(q.db, g))
            except ExecError:
                failed += 1
        _GOLD[q.qid] = (out, failed)
    return _GOLD[q.qid]


def score(q: Question, sql: str | None, where: str | None = None) -> dict[str, Any]:
    """sql-eval's verdict on ``sql``, run in database ``where`` (default: the question's own;
    the big arm's answers run in the big catalog), against the gold on the question's own."""
    if not sql:
        return {"executes": False, "correct": False}
    try:
        res = run_sql(where or q.db, sql)
    except ExecError as exc:
        return {"executes": False, "correct": False, "exec_error": str(exc)}
    golds, failed = gold_results(q)
    ok = rule.correct(golds, res, q.category, q.question)
    return {"executes": True, "correct": ok, "n_rows": len(res.rows), "gold_failed": failed}


# --------------------------------------------------------------------------- the arms
def run_asker(asker: Any, q: Question, where: str | None = None) -> dict[str, Any]:
    from grid_sql.errors import GridSQLError, MaskError

    t0 = time.perf_counter()
    rec: dict[str, Any]
    try:
        res = asker.ask(q.text)
        rec = {
            "sql": res.sql,
            "dead_end": any(r.kind == "dead_end" for r in res.repairs),
            "repairs": [r.kind for r in res.repairs],
            "error_type": None,
            "error": None,
        }
    except GridSQLError as exc:
        reps = list(getattr(exc, "repairs", []) or [])
        rec = {
            "sql": getattr(exc, "sql", None),
            "dead_end": isinstance(exc, MaskError) or any(r.kind == "dead_end" for r in reps),
            "repairs": [r.kind for r in reps],
            "error_type": type(exc).__name__,
            "error": str(exc)[:600],
        }
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    if rec["error_type"] is None:
        rec.update(score(q, rec["sql"], where))
    else:
        rec.update(executes=False, correct=False)
    return rec


def run_free(backend: Any, asker: Any, q: Question, max_tokens: int) -> dict[str, Any]:
    from spider_eval import run_unconstrained

    ask = type("Q", (), {"question": q.text})()  # run_unconstrained reads .question only
    out = run_unconstrained(backend, asker, ask, max_tokens)
    rec = {
        "sql": out["sql"],
        "dead_end": False,
        "stop_reason": out["stop_reason"],
        "seconds": round(out["seconds"], 2),
        "error_type": None,
        "error": None,
    }
    rec.update(score(q, out["sql"]))
    if not rec["executes"]:
        rec["error_type"] = "ExecError"
        rec["error"] = rec.pop("exec_error", None)
    return rec


def _commit() -> str:
    import subprocess

    try:
        return subprocess.check_output(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], text=True
        ).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def out_path(model: str) -> Path:
    return RESULTS / f"defog-{model}.jsonl"


def read_records(path: Path) -> list[dict[str, Any]]:
    """The run's records: ``X.jsonl``, else the committed ``X.jsonl.gz`` (bench/README.md)."""
    import gzip

    if path.exists():
        text = path.read_text()
    elif path.with_suffix(".jsonl.gz").exists():
        text = gzip.decompress(path.with_suffix(".jsonl.gz").read_bytes()).decode()
    else:
        return []
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def open_records(path: Path) -> None:
    """Before a run appends: a fresh clone has only the committed ``.jsonl.gz``, and appending
    to a new ``.jsonl`` would hide it (``read_records`` prefers the ``.jsonl``), so the
    committed records are unpacked first and the run goes on from them."""
    import gzip

    packed = path.with_suffix(".jsonl.gz")
    if not path.exists() and packed.exists():
        path.write_bytes(gzip.decompress(packed.read_bytes()))


def write_record(
    path: Path, q: Question, arm: str, model: str, commit: str, answer: dict[str, Any]
) -> dict[str, Any]:
    """Append one answer of ``arm`` to the records (the fields every runner writes first,
    then the answer's) and print its line; returns the record."""
    rec = {
        "qid": q.qid,
        "db": q.db,
        "category": q.category,
        "arm": arm,
        "model": model,
        "commit": commit,
        **answer,
    }
    with path.open("a") as fh:
        fh.write(json.dumps(rec, default=str) + "\n")
    print(
        f"{q.qid:3d} {q.category:14s} {arm:18s} exec={rec.get('executes')} "
        f"ok={rec.get('correct')} dead={rec.get('dead_end')} "
        f"{rec.get('seconds', 0)}s {str(rec.get('sql'))[:120]!r}",
        file=sys.stderr,
        flush=True,
    )
    return rec


def evaluate(
    model: str, per_category: int | None, arms: Sequence[str], max_tokens: int, until: float
) -> None:
    from grid_sql.ask.asker import Asker, load_backend
    from grid_sql.ask.datehelp import date_line

    questions = stratified(load_questions(), per_category)
    ensure_role(sorted({q.db for q in questions}))
    if "big" in arms:
        from defog_big import BIG, ensure_big

        dbs = sorted({q.db for q in load_questions()})
        ensure_big(lambda d: _conninfo(admin_url(), d), DATA, dbs, DISTRACTORS, ROLE)
    path = out_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    open_records(path)
    done = {(r["qid"], r["arm"]) for r in read_records(path)}
    backend = load_backend(model)
    commit = _commit()
    askers: dict[tuple[str, bool], Any] = {}

    def asker_for(db: str, date_help: bool) -> Any:
        if (db, date_help) not in askers:
            askers[db, date_help] = Asker(
                reader_url(db),
                model=backend,
                audit=False,
                max_tokens=max_tokens,
                date_help=date_help,
            )
        return askers[db, date_help]

    for q in questions:
        for arm in arms:
            if (q.qid, arm) in done or (arm == "nodate" and q.category != "date_functions"):
                continue
            if time.time() > until:
                print("time is up: stopping (the run resumes from here)", file=sys.stderr)
                return
            asker = asker_for(q.db, True)
            line = date_line(q.text, asker.snapshot, asker.policy)
            if arm == "constrained":
                rec = run_asker(asker, q)
            elif arm == "big":  # one Asker over the whole catalog, same options
                rec = run_asker(asker_for(BIG, True), q, where=BIG)
            elif arm == "unconstrained":
                rec = run_free(backend, asker, q, max_tokens)
            elif line is None:  # nodate, and the prompt is the same: greedy = same answer
                rec = {"same_prompt": True}
            else:
                rec = run_asker(asker_for(q.db, False), q)
            write_record(path, q, arm, model, commit, {"date_line": line is not None, **rec})


def _again_lines(by: dict[str, dict[int, dict[str, Any]]], tag: str = "") -> list[str]:
    """The pairs asked again (``--again [--tag T]``): both answers at one commit, or (a
    big-only pass) the big answers against the untagged own-database ones."""
    big = "big_again" + tag
    own = "constrained_again" + tag if by["constrained_again" + tag] else "constrained_again"
    ids = sorted(set(by[big]) & set(by[own]))
    if not ids:
        return []
    commits = {a: sorted({by[a][i]["commit"] for i in ids}) for a in (big, own)}
    one = commits[big] == commits[own]
    out = [
        "",
        f"### Asked again at {', '.join(commits[big])} (`--again{' --tag ' + tag if tag else ''}`"
        + (": each pair at one commit)" if one else ", big catalog only)"),
        "",
        f"{len(ids)} of the pairs above"
        + (
            ", both answers from the checkout's code."
            if one
            else f"; the own-database answers are those asked at {', '.join(commits[own])}."
        ),
        "",
        "| catalog | executes | EX | dead ends |",
        "|---|---|---|---|",
    ]
    for name, arm in (("own database", own), ("big catalog", big)):
        rs = [by[arm][i] for i in ids]
        ex = sum(bool(r["executes"]) for r in rs)
        ok = sum(bool(r["correct"]) for r in rs)
        dead = sum(bool(r.get("dead_end")) for r in rs)
        out.append(f"| {name} | {_pct(ex, len(rs))} | {_pct(ok, len(rs))} | {dead} |")
    a = [bool(by[big][i]["correct"]) for i in ids]
    b = [bool(by[own][i]["correct"]) for i in ids]
    lo, hi = paired_bootstrap(a, b)
    diff = 100 * (sum(a) - sum(b)) / len(ids)
    out += ["", f"EX big − own: {diff:+.1f} points (95% paired bootstrap [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}]).", ""]  # fmt: skip
    refused = Counter(str(by[big][i].get("error_type")) for i in ids if not by[big][i]["executes"])
    if refused:
        out.append(
            "Big catalog, not executed: "
            + ", ".join(f"{k} {v}" for k, v in sorted(refused.items()))
            + "."
        )
    again = sorted(q for q in by["big_rerun"] if q in ids) if not tag else []
    if again:
        rc = sorted({by["big_rerun"][q]["commit"] for q in again})
        ex = [q for q in again if by["big_rerun"][q]["executes"]]
        ok = [q for q in again if by["big_rerun"][q]["correct"]]
        out += [
            "",
            f"Those {len(again)} asked once more at {', '.join(rc)} (`--rerun-big`, after "
            f"the changes that followed): {len(ex)} execute ({', '.join(map(str, ex)) or '-'}), "
            f"{len(ok)} right ({', '.join(map(str, ok)) or '-'}). Not in the table above.",
        ]
    return out


def _big_section(by: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    ids = sorted(set(by["big"]) & set(by["constrained"]))
    if not ids:
        return ["", "## Big catalog", "", "(not run: `--arms big`)"]
    out = [
        "",
        "## Big catalog: the 11 databases in one, a schema each, + 2,000 distractors (paired)",
        "",
        f"{len(ids)} questions asked on `defog_big` (about 2,110 tables; `bench/defog_big.py`) "
        "and on their own database, same options.",
        "",
        "| catalog | executes | EX | dead ends |",
        "|---|---|---|---|",
    ]
    for name, arm in (("own database", "constrained"), ("big catalog", "big")):
        rs = [by[arm][i] for i in ids]
        ex = sum(bool(r["executes"]) for r in rs)
        ok = sum(bool(r["correct"]) for r in rs)
        dead = sum(bool(r.get("dead_end")) for r in rs)
        out.append(f"| {name} | {_pct(ex, len(rs))} | {_pct(ok, len(rs))} | {dead} |")
    a = [bool(by["big"][i]["correct"]) for i in ids]
    b = [bool(by["constrained"][i]["correct"]) for i in ids]
    lo, hi = paired_bootstrap(a, b)
    diff = 100 * (sum(a) - sum(b)) / len(ids)
    out += ["", f"EX big − own: {diff:+.1f} points (95% paired bootstrap [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}]).", ""]  # fmt: skip
    # The arms may have run at different commits (records resume across sessions): the
    # pairs whose two answers come from one commit are the clean comparison.
    same = [i for i in ids if by["big"][i]["commit"] == by["constrained"][i]["commit"]]
    commits = {arm: sorted({by[arm][i]["commit"] for i in ids}) for arm in ("constrained", "big")}
    out.append(
        f"Commits: own database {', '.join(commits['constrained'])}; big catalog "
        f"{', '.join(commits['big'])}. Pairs answered at one commit: {len(same)}"
        + (
            f" (EX own {sum(bool(by['constrained'][i]['correct']) for i in same)}, "
            f"big {sum(bool(by['big'][i]['correct']) for i in same)})."
            if same
            else "."
        )
    )
    tags = sorted({a[len("big_again") :] for a in by if a.startswith("big_again") and by[a]})
    return out + [x for t in tags for x in _again_lines(by, t)]


def _rerun_section(by: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    ids = sorted(by["rerun"])
    if not ids:
        return []
    commits = sorted({by["rerun"][i]["commit"] for i in ids})
    out = [
        "",
        "## The database's refusals, asked again (`--rerun-refused`)",
        "",
        f"The {len(ids)} constrained answers the database refused, asked again at "
        f"{', '.join(commits)} (deterministic fixes of type errors and divisions by zero, "
        "`grid_sql/ask/typefix.py`). Not in the headline, which keeps the first answers.",
        "",
        "| q | category | first answer | asked again | repairs |",
        "|---|---|---|---|---|",
    ]
    for i in ids:
        r, f = by["rerun"][i], by["constrained"].get(i, {})
        then = (f.get("error") or "")[:70].replace("|", "/")
        now = "EX" if r["correct"] else "executes" if r["executes"] else r.get("error_type")
        out.append(f"| {i} | {r['category']} | {then} | {now} | {', '.join(r['repairs'])} |")
    return out


# --------------------------------------------------------------------------- report
def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    from spider_eval import wilson as w

    return w(k, n, z)


def paired_bootstrap(
    a: Sequence[bool], b: Sequence[bool], reps: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile interval of mean(a) - mean(b) over questions resampled in pairs."""
    n = len(a)
    if n == 0:
        return (0.0, 0.0)
    rng = random.Random(seed)
    d = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(reps))
    return (means[int(0.025 * reps)], means[int(0.975 * reps) - 1])


def _pct(k: int, n: int) -> str:
    if not n:
        return "–"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def report(model: str, command: str, notes: str = "") -> str:
    import platform

    recs = read_records(out_path(model))
    by: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in recs:
        by[r["arm"]][r["qid"]] = r
    for qid, r in by["nodate"].items():  # same prompt: the constrained outcome
        if r.get("same_prompt") and qid in by["constrained"]:
            by["nodate"][qid] = {**by["constrained"][qid], "arm": "nodate", "same_prompt": True}
        elif r.get("same_prompt"):
            del by["nodate"][qid]
    both = sorted(set(by["constrained"]) & set(by["unconstrained"]))
    cats = {r["qid"]: r["category"] for r in recs}
    total = len(load_questions())
    commits = sorted({r["commit"] for r in recs})
    c = [by["constrained"][i] for i in both]
    u = [by["unconstrained"][i] for i in both]
    lines = [
        f"# defog sql-eval on PostgreSQL, read-only LOGIN role ({model})",
        "",
        f"{len(both)} of {total} questions run in both arms (paired; question k of every "
        "category before question k+1, so the sample is stratified by category).",
        "",
        "| arm | executes [95% Wilson] | EX (sql-eval rule) [95% Wilson] | dead ends |",
        "|---|---|---|---|",
    ]
    for name, rs in (("constrained (Asker, date_help=True)", c), ("unconstrained", u)):
        ex = sum(bool(r["executes"]) for r in rs)
        ok = sum(bool(r["correct"]) for r in rs)
        dead = sum(bool(r.get("dead_end")) for r in rs)
        lines.append(f"| {name} | {_pct(ex, len(rs))} | {_pct(ok, len(rs))} | {dead} |")
    if both:
        ca, ua = [bool(r["correct"]) for r in c], [bool(r["correct"]) for r in u]
        lo, hi = paired_bootstrap(ca, ua)
        diff = (sum(ca) - sum(ua)) / len(both)
        wins = sum(x and not y for x, y in zip(ca, ua, strict=True))
        losses = sum(y and not x for x, y in zip(ca, ua, strict=True))
        ce = [bool(r["executes"]) for r in c]
        ue = [bool(r["executes"]) for r in u]
        elo, ehi = paired_bootstrap(ce, ue)
        ediff = (sum(ce) - sum(ue)) / len(both)
        lines += [
            "",
            f"Paired EX difference constrained − unconstrained: **{100 * diff:+.1f} points** "
            f"(95% paired bootstrap [{100 * lo:+.1f}, {100 * hi:+.1f}], 10,000 resamples; "
            f"{wins} questions right only constrained, {losses} only unconstrained). "
            f"Executes: {100 * ediff:+.1f} points [{100 * elo:+.1f}, {100 * ehi:+.1f}].",
        ]
    from defog_again import big_whole_section, carry_over, whole_section

    carry_over(by)
    lines += (
        whole_section(by)
        + big_whole_section(by)
        + [
            "",
            "## Per category",
            "",
            "| category | n | executes constrained | executes unconstrained "
            "| EX constrained | EX unconstrained |",
            "|---|---|---|---|---|---|",
        ]
    )
    for cat in CATEGORIES:
        ids = [i for i in both if cats[i] == cat]
        if not ids:
            continue
        row = [cat, str(len(ids))]
        for key in ("executes", "correct"):
            for arm in ("constrained", "unconstrained"):
                k = sum(bool(by[arm][i][key]) for i in ids)
                row.append(f"{k} ({100 * k / len(ids):.0f}%)")
        lines.append("| " + " | ".join(row) + " |")
    lines += _date_section(by)
    lines += _failures(by, both)
    lines += [
        "",
        "## How",
        "",
        f"- command: `{command}` (resumable; `--report` writes this file)",
        f"- commit(s) of the records: {', '.join(commits) or '–'}; report at {_commit()}",
        f"- host: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, shared), "
        f"Python {platform.python_version()}",
        f"- model {model} (GGUF, llama.cpp, greedy), max_tokens 256; records "
        f"`{out_path(model).relative_to(ROOT)}` (git-ignored; committed gzip-compressed as "
        "`.jsonl.gz`, which `--report` reads when the `.jsonl` is absent)",
        "- role: `grid_defog_reader`, LOGIN with CONNECT, schema USAGE and SELECT on the "
        "`defog_*` databases (TEMPORARY revoked from PUBLIC there); gold and generated SQL "
        "both run as it, 10 s timeout",
        "- EX: sql-eval's rule (`bench/sqleval_rule.py`, from defog-ai/sql-eval "
        "`eval/eval.py` at 079e59c2): any accepted gold alternative, `{a, b}` subsets, extra "
        "columns allowed, row order only for the order_by category or ordering words",
        "- the constrained arm repairs (one round, database message + type hint); the "
        "unconstrained arm does not: the difference is the pipeline a user gets, not the "
        "mask alone",
    ]
    lines += _big_section(by) + _rerun_section(by)
    if notes.strip():
        lines += ["", "## Notes", "", notes.strip()]
    return "\n".join(lines) + "\n"


def _date_section(by: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    ids = sorted(set(by["nodate"]) & set(by["constrained"]))
    if not ids:
        return []
    on = [by["constrained"][i] for i in ids]
    off = [by["nodate"][i] for i in ids]
    fired = sum(bool(r.get("date_line")) for r in on)
    out = [
        "",
        "## Date help (§4): date_functions, with and without the date line (paired)",
        "",
        f"{len(ids)} date_functions questions; the date line was shown on {fired} of them "
        "(the rest have identical prompts, so identical greedy answers).",
        "",
        "| prompt | executes | EX |",
        "|---|---|---|",
    ]
    for name, rs in (("with date line", on), ("without (date_help=False, the default)", off)):
        ex = sum(bool(r["executes"]) for r in rs)
        ok = sum(bool(r["correct"]) for r in rs)
        out.append(f"| {name} | {_pct(ex, len(rs))} | {_pct(ok, len(rs))} |")
    a, b = [bool(r["correct"]) for r in on], [bool(r["correct"]) for r in off]
    wins = sum(x and not y for x, y in zip(a, b, strict=True))
    losses = sum(y and not x for x, y in zip(a, b, strict=True))
    out.append("")
    out.append(f"EX wins/losses of the date line: {wins}/{losses}.")
    return out


def _failures(by: dict[str, dict[int, dict[str, Any]]], both: Sequence[int]) -> list[str]:
    rs = [by["constrained"][i] for i in both if not by["constrained"][i]["executes"]]
    dead = [r for a in by.values() for r in a.values() if r.get("dead_end")]
    out = ["", "## Constrained answers that did not execute", ""]
    if not rs:
        out.append("(none)")
    counts: dict[str, int] = defaultdict(int)
    for r in rs:
        counts[r.get("error_type") or "ExecError"] += 1
    out += [f"- {k}: {v}" for k, v in sorted(counts.items())]
    for r in rs:
        err = (r.get("error") or r.get("exec_error") or "")[:160].replace("\n", " ")
        out.append(f"  - q{r['qid']} ({r['category']}): {r.get('error_type')}: {err}")
    out += ["", f"Dead ends (MaskError or fallback), all arms: {len(dead)}"]
    for r in dead:
        out.append(f"- q{r['qid']} {r['arm']}: {(r.get('error') or '')[:200]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--per-category", type=int, default=None)
    ap.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS), choices=ARMS)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--until", default=None, help="stop starting questions after HH:MM UTC")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--rerun-refused", action="store_true", help="see rerun_refused()")
    ap.add_argument("--again", action="store_true", help="see ask_again()")
    ap.add_argument("--tag", default="", help="--again: a later pass (arms big_again<TAG>)")
    ap.add_argument("--big-only", action="store_true", help="--again: the big catalog only")
    ap.add_argument("--rerun-big", action="store_true", help="see rerun_big()")
    ap.add_argument("--whole", action="store_true", help="see ask_whole()")
    ap.add_argument("--free", action="store_true", help="--whole: the unconstrained arm")
    ap.add_argument("--big", action="store_true", help="--whole: on the big catalog")
    ap.add_argument("--over", default="", help="--whole: partial pass over tag B (ask_whole)")
    ap.add_argument("--reach", default="led_alias", choices=("led_alias", "bind"), help="--over")
    ap.add_argument("--also", default="", help="--over: Q,Q,... asked too (prompts changed)")
    ap.add_argument("--shard", default="0/1", help="--whole, --again: K/N, every N-th from K")
    ap.add_argument("--notes", default=None, help="--report: a Markdown file to append")
    ap.add_argument("--out", default=str(BENCH / "RESULTS-defog.md"))
    args = ap.parse_args(argv)
    if args.report:
        notes = Path(args.notes).read_text() if args.notes else ""
        text = report(args.model, "nice python bench/defog.py --until HH:MM", notes)
        Path(args.out).write_text(text)
        print(text)
        return 0
    until = float("inf")
    if args.until:
        import datetime as dt

        hh, mm = map(int, args.until.split(":"))
        now = dt.datetime.now(dt.UTC)
        stop = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if stop < now:  # past midnight UTC: the next day's HH:MM
            stop += dt.timedelta(days=1)
        until = stop.timestamp()
    from defog_again import ask_again, ask_whole, rerun_big, rerun_refused

    if args.whole:
        ask_whole(until, args)
        return 0

    if args.rerun_refused:
        rerun_refused(args.model, args.max_tokens, until)
        return 0
    if args.again:
        ask_again(
            args.model, args.max_tokens, until, args.tag, own=not args.big_only, shard=args.shard
        )
        return 0
    if args.rerun_big:
        rerun_big(args.model, args.max_tokens, until)
        return 0
    evaluate(args.model, args.per_category, args.arms, args.max_tokens, until)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
