"""Big catalogs: a real database plus thousands of plausible distractor tables (issue #25 §2).

What it measures, on SQLite copies of Chinook (and Sakila) with ``--tables`` distractors added:

* ``reflect``: introspection, grants and policy (``Asker`` construction up to the policy),
  role-grammar projection + LALR compile, guide compile and the first mask (the token mask at
  the start of a statement) for the 0.5B model's vocabulary;
* ``recall``: schema-linking recall@k of the tables the gold SQL of
  ``bench/alias_questions.json`` uses (Chinook and Sakila questions; sqlglot finds the gold's
  tables), for the linker the prompt uses and for the lexical ranker before it;
* ``answer``: one simple question end to end with ``qwen2.5-coder-0.5b`` on the catalog
  (Asker construction, model load, prompt, generation, execution), wall time and the prompt's
  token count against the context window.

Why distractors that share words with the real tables (``invoice_archive_2019``,
``customer_notes``, ``film_rental_staging``): a warehouse is full of near-namesakes of the
tables a question needs, and a ranker that only counts shared words is fooled by exactly those.

    python bench/big_catalog.py reflect --tables 2000 10000
    python bench/big_catalog.py recall --tables 2000
    python bench/big_catalog.py recall --tables 2000 --spider
    python bench/big_catalog.py answer --tables 2000

The distractor generator (:func:`add_distractors`) is also the fixture of
tests/ask/test_big_catalog.py.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/data")
QUESTIONS = ROOT / "bench" / "alias_questions.json"

DOMAINS = (
    "hr", "fin", "ops", "mkt", "crm", "erp", "wh", "log", "sales", "pay", "audit", "bi",
    "etl", "dim", "fact", "stg", "ref", "legal", "sec", "it", "proc", "qa", "cs", "supply",
)  # fmt: skip
NOUNS = (
    "ledger", "shipment", "order", "product", "vendor", "campaign", "ticket", "asset",
    "contract", "warehouse", "region", "budget", "session", "event", "payment", "refund",
    "supplier", "branch", "account", "transaction", "forecast", "quota", "lead", "opportunity",
    "device", "license", "incident", "approval", "timesheet", "payroll", "benefit", "claim",
    "policy", "coupon", "promotion", "cart", "review", "rating", "subscription", "plan",
    "currency", "exchange_rate", "tax", "department", "project", "task", "milestone", "stock",
    "bin", "carrier", "route", "delivery", "return", "complaint", "survey", "visit", "click",
)  # fmt: skip
SUFFIXES = (
    "", "", "", "_history", "_archive_2019", "_archive_2020", "_staging", "_v2", "_daily",
    "_snapshot", "_log", "_notes", "_map", "_summary", "_backup", "_tmp", "_monthly", "_old",
)  # fmt: skip
# words of the real catalogs' tables: some distractors are their near-namesakes
SHARED_WORDS = {
    "chinook": (
        "invoice", "customer", "track", "album", "artist", "employee", "genre", "playlist",
        "media_type", "invoice_line",
    ),
    "sakila": (
        "film", "actor", "rental", "payment", "customer", "inventory", "store", "staff",
        "category", "language", "address", "city", "country",
    ),
}  # fmt: skip
COLUMNS = (
    ("name", "TEXT"), ("description", "TEXT"), ("status", "TEXT"), ("created_at", "TEXT"),
    ("updated_at", "TEXT"), ("amount", "NUMERIC"), ("quantity", "INTEGER"), ("price", "NUMERIC"),
    ("total", "NUMERIC"), ("code", "TEXT"), ("region_code", "TEXT"), ("country", "TEXT"),
    ("city", "TEXT"), ("email", "TEXT"), ("phone", "TEXT"), ("title", "TEXT"),
    ("start_date", "TEXT"), ("end_date", "TEXT"), ("owner_id", "INTEGER"), ("score", "REAL"),
    ("is_active", "INTEGER"), ("notes", "TEXT"), ("category", "TEXT"), ("currency", "TEXT"),
    ("first_name", "TEXT"), ("last_name", "TEXT"), ("unit_price", "NUMERIC"),
    ("billing_country", "TEXT"), ("duration_ms", "INTEGER"), ("rating", "TEXT"),
    ("last_update", "TEXT"), ("batch_id", "INTEGER"), ("source_system", "TEXT"),
)  # fmt: skip


def distractor_names(n: int, shared: Sequence[str], seed: int = 25) -> list[str]:
    """``n`` distinct plausible table names; about one in eight a near-namesake of ``shared``."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        if shared and rng.random() < 0.125:
            name = rng.choice(shared) + rng.choice(SUFFIXES[3:])
            if rng.random() < 0.3:
                name = f"{rng.choice(DOMAINS)}_{name}"
        else:
            name = f"{rng.choice(DOMAINS)}_{rng.choice(NOUNS)}{rng.choice(SUFFIXES)}"
            if rng.random() < 0.25:
                name = f"{name}_{rng.randint(1, 99)}"
        if name.lower() not in seen and not name.lower().startswith("sqlite_"):
            seen.add(name.lower())
            out.append(name)
    return out


def distractor_ddl(
    names: Sequence[str], qualify: Callable[[str], str] = str, seed: int = 25
) -> list[str]:
    """``CREATE TABLE`` statements of the distractors ``names`` (3 to 12 columns each, an
    integer primary key, some foreign keys to earlier distractors), in SQL that SQLite and
    PostgreSQL both read; ``qualify`` gives a table's name as written (a schema prefix)."""
    rng = random.Random(seed + 1)
    stmts = []
    for i, name in enumerate(names):
        cols = [f"{name}_id INTEGER PRIMARY KEY"]
        picked = rng.sample(COLUMNS, rng.randint(2, 11))
        cols += [f"{c} {t}" for c, t in picked]
        if i > 10 and rng.random() < 0.3:
            other = names[rng.randrange(i)]
            cols.append(f"{other}_id INTEGER REFERENCES {qualify(other)}({other}_id)")
        stmts.append(f"CREATE TABLE {qualify(name)} ({', '.join(cols)});")
    return stmts


def add_distractors(db: Path, n: int, *, shared: Sequence[str] = (), seed: int = 25) -> list[str]:
    """Add ``n`` empty distractor tables (:func:`distractor_ddl`) to the SQLite file ``db``;
    their names."""
    names = distractor_names(n, shared, seed)
    existing = {
        r[0].lower()
        for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    names = [x for x in names if x.lower() not in existing]
    stmts = distractor_ddl(names, seed=seed)
    con = sqlite3.connect(db)
    try:
        con.executescript("BEGIN;\n" + "\n".join(stmts) + "\nCOMMIT;")
    finally:
        con.close()
    return names


def source_db(name: str) -> Path:
    if name == "chinook":
        from grid_sql.data import chinook_path

        return Path(chinook_path())
    return SHARED / "sakila" / "sqlite" / "sakila.sqlite"


def big_copy(name: str, n: int, dst_dir: Path) -> Path:
    """A copy of database ``name`` with ``n`` distractor tables, in ``dst_dir``."""
    dst = dst_dir / f"{name}-{n}.sqlite"
    shutil.copyfile(source_db(name), dst)
    add_distractors(dst, n, shared=SHARED_WORDS[name])
    return dst


def gold_tables(sql: str) -> set[str]:
    """Lower-cased names of the tables a gold statement reads (CTE names excluded)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def host() -> str:
    import os

    cpus = os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.node()} ({platform.machine()}, {cpus} CPUs, load average {load}), "
        f"Python {platform.python_version()}"
    )


# ----------------------------------------------------------------------------- reflect


def reflect(sizes: Iterable[int], vocab_model: str, defog_big: bool = False) -> None:
    """Introspection + policy, role grammar, guide compile and first mask per catalog size.

    The same steps, in the same order, as an ``Asker`` on the database followed by its first
    question (the guide is compiled for the 0.5B model's vocabulary, read from its GGUF
    file without loading weights): on SQLite copies of Chinook with ``sizes`` distractors,
    or (``defog_big``) on PostgreSQL's ``defog_big`` as its read-only LOGIN role, where the
    policy is the role's grants read from the server (``bench/defog_big.py``)."""
    import sqlalchemy as sa

    from grid_sql.decode.models import cached_path
    from grid_sql.mask.vocab import Vocabulary

    vocab = Vocabulary.from_gguf(str(cached_path(vocab_model)))
    print(f"# reflect: commit {_commit()}, host {host()}, vocab {vocab_model}")
    from llama_cpp import Llama

    tok_model = Llama(model_path=str(cached_path(vocab_model)), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return list(tok_model.tokenize(text.encode(), add_bos=False, special=False))

    print(
        "| catalog | tables | columns | introspect s | policy s | grammar s | guide s "
        "| first mask s | masks to `FROM ` s | table-name mask s | first prompt s "
        "| next prompt s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    if defog_big:
        from defog import reader_url

        engine = sa.create_engine(reader_url("big"))
        _reflect_row("PostgreSQL defog_big", engine, vocab, tokenize, "How many flights are there?")
        engine.dispose()
        return
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            db = big_copy("chinook", n, Path(tmp))
            engine = sa.create_engine(f"sqlite:///file:{db}?mode=ro&uri=true")
            q = "How many invoices does each customer have?"
            _reflect_row(f"SQLite Chinook + {n:,}", engine, vocab, tokenize, q)
            engine.dispose()


def _reflect_row(
    label: str, engine: object, vocab: object, tokenize: Callable[[str], list[int]], q: str
) -> None:
    from grid_sql.ask.asker import _SELECT_ONLY, role_grammar_for
    from grid_sql.ask.budget import by_bytes
    from grid_sql.ask.prompt import build_messages
    from grid_sql.mask.guide import Guide
    from grid_sql.policy.config import narrow
    from grid_sql.policy.grants import read_grants
    from grid_sql.schema.introspect import introspect

    with engine.connect() as conn:  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        snap = introspect(conn)
        t1 = time.perf_counter()
        policy = narrow(read_grants(conn, snap), _SELECT_ONLY, snap)
        t2 = time.perf_counter()
    grammar = role_grammar_for(snap, policy, scopes=True, bind_select_list=True)
    t3 = time.perf_counter()
    guide = Guide(grammar, vocab)  # type: ignore[arg-type]
    t4 = time.perf_counter()
    m = guide.matcher()
    buf = m.allocate_bitmask()
    m.fill_next_token_bitmask(buf)
    t5 = time.perf_counter()
    for tok in tokenize("SELECT * FROM "):
        m.fill_next_token_bitmask(buf)
        m.accept_token(tok)
    t6 = time.perf_counter()
    m.fill_next_token_bitmask(buf)  # the table-name mask: the lexicon's whole trie
    t7 = time.perf_counter()
    build_messages(q, snap, policy, budget=by_bytes(4096, 256, True))  # + link index
    t8 = time.perf_counter()
    build_messages(q, snap, policy, budget=by_bytes(4096, 256, True))
    t9 = time.perf_counter()
    tables = sum(1 for _ in snap.iter_tables())
    cols = sum(len(t.columns) for _, t in snap.iter_tables())
    print(
        f"| {label} | {tables:,} | {cols:,} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} "
        f"| {t4 - t3:.2f} | {t5 - t4:.2f} | {t6 - t5:.2f} | {t7 - t6:.2f} "
        f"| {t8 - t7:.2f} | {t9 - t8:.3f} |",
        flush=True,
    )


# ----------------------------------------------------------------------------- recall


def recall(n: int, ks: Sequence[int]) -> None:
    """Recall@k of the gold tables, per database, for the linker and the old ranker."""
    from grid_sql.ask.asker import Asker
    from grid_sql.ask.budget import linker_for
    from grid_sql.ask.prompt import rank_tables, visible_tables

    data = json.loads(QUESTIONS.read_text())
    print(f"# recall@k: commit {_commit()}, host {host()}, {n:,} distractors")
    print("| database | questions | ranker | " + " | ".join(f"recall@{k}" for k in ks) + " |")
    print("| --- | ---: | --- | " + " | ".join("---:" for _ in ks) + " |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("chinook", "sakila"):
            db = big_copy(name, n, Path(tmp))
            asker = Asker(db, audit=False)
            policy = asker._mode(False).policy
            tables = visible_tables(asker.snapshot, policy)
            linker = linker_for(asker.snapshot, policy)
            items = data[name]
            for label in ("linker", "lexical (before)"):
                hits = dict.fromkeys(ks, 0)
                total = 0
                for item in items:
                    gold = gold_tables(item["gold"])
                    if label == "linker":
                        ranked = [t.name.lower() for t in linker.rank(item["q"])]
                    else:
                        ranked = [t.name.lower() for t in rank_tables(item["q"], tables)]
                    total += len(gold)
                    for k in ks:
                        hits[k] += len(gold & set(ranked[:k]))
                cells = " | ".join(f"{100 * hits[k] / total:.1f} %" for k in ks)
                print(f"| {name} | {len(items)} | {label} | {cells} |", flush=True)


def recall_spider(n: int, ks: Sequence[int]) -> None:
    """The same on Spider dev (every question of its 20 databases, held out: the linker
    was not tuned on them), each database with ``n`` distractors that share its words."""
    from grid_sql.ask.asker import Asker
    from grid_sql.ask.budget import linker_for
    from grid_sql.ask.prompt import rank_tables, visible_tables
    from grid_sql.schema.linking import link_words

    spider = SHARED / "spider"
    items = json.loads((spider / "dev.json").read_text())
    by_db: dict[str, list[dict[str, str]]] = {}
    for it in items:
        by_db.setdefault(it["db_id"], []).append(it)
    print(f"# recall@k on Spider dev: commit {_commit()}, host {host()}, {n:,} distractors/db")
    print("| ranker | questions | gold tables | " + " | ".join(f"recall@{k}" for k in ks) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in ks) + " |")
    hits = {lab: dict.fromkeys(ks, 0) for lab in ("linker", "lexical (before)")}
    total = questions = 0
    with tempfile.TemporaryDirectory() as tmp:
        for db_id, qs in sorted(by_db.items()):
            src = spider / "database" / db_id / f"{db_id}.sqlite"
            if not src.is_file():  # (wta_1 ships without its SQLite file here)
                continue
            dst = Path(tmp) / f"{db_id}.sqlite"
            shutil.copyfile(src, dst)
            con = sqlite3.connect(dst)
            names = [
                r[0]
                for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                if not r[0].startswith("sqlite_")
            ]
            con.close()
            shared = sorted({w for x in names for w in link_words(x) if len(w) > 2})
            add_distractors(dst, n, shared=shared)
            asker = Asker(dst, audit=False)
            policy = asker._mode(False).policy
            tables = visible_tables(asker.snapshot, policy)
            linker = linker_for(asker.snapshot, policy)
            for it in qs:
                try:
                    gold = gold_tables(it["query"])
                except Exception:  # noqa: BLE001 - a gold sqlglot cannot parse: skipped
                    continue
                questions += 1
                total += len(gold)
                ranked = {
                    "linker": [t.name.lower() for t in linker.rank(it["question"])],
                    "lexical (before)": [
                        t.name.lower() for t in rank_tables(it["question"], tables)
                    ],
                }
                for lab, r in ranked.items():
                    for k in ks:
                        hits[lab][k] += len(gold & set(r[:k]))
    for lab, h in hits.items():
        cells = " | ".join(f"{100 * h[k] / total:.1f} %" for k in ks)
        print(f"| {lab} | {questions} | {total} | {cells} |", flush=True)


# ----------------------------------------------------------------------------- answer


def answer(n: int, model: str, question: str, n_ctx: int) -> None:
    """One question end to end on Chinook + ``n`` distractors: wall time and prompt size.

    Runs against whichever ``grid_sql`` is on the path (printed), so the same command on a
    checkout from before the prompt budget (PYTHONPATH=that checkout) shows the overflow."""
    import grid_sql
    from grid_sql.ask.asker import Asker
    from grid_sql.errors import GridSQLError

    print(f"# answer: commit {_commit()}, host {host()}, model {model}, n_ctx {n_ctx}")
    print(f"grid_sql from {Path(grid_sql.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        db = big_copy("chinook", n, Path(tmp))
        kw = {"n_ctx": n_ctx} if n_ctx != 4096 else {}  # (no such option before #28 §4)
        t0 = time.perf_counter()
        try:
            asker = Asker(db, model=model, audit=False, **kw)
            t1 = time.perf_counter()
            _ = asker.backend
            t2 = time.perf_counter()
            res = asker.ask(question)
            t3 = time.perf_counter()
        except GridSQLError as exc:
            print(f"FAILED after {time.perf_counter() - t0:.1f} s: {type(exc).__name__}: {exc}")
            return
        prompt = len(asker.backend.chat_prompt(asker.messages(question)))
        tables = sum(1 for _ in asker.snapshot.iter_tables())
        timings = {k: round(v, 2) for k, v in res.timings.items()}
        print(f"tables {tables:,}; prompt {prompt} tokens of n_ctx {asker.backend.n_ctx}")
        print(f"SQL: {res.sql}")
        print(f"rows: {res.rows[:3]}{' ...' if len(res.rows) > 3 else ''}")
        print(
            f"wall {t3 - t0:.1f} s = Asker() {t1 - t0:.1f} s + model load {t2 - t1:.1f} s "
            f"+ ask {t3 - t2:.1f} s (timings {json.dumps(timings)})"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reflect")
    r.add_argument("--tables", type=int, nargs="+", default=[2000, 10000])
    r.add_argument("--vocab", default="qwen2.5-coder-0.5b")
    r.add_argument("--defog-big", action="store_true", help="PostgreSQL defog_big instead")
    c = sub.add_parser("recall")
    c.add_argument("--tables", type=int, default=2000)
    c.add_argument("--k", type=int, nargs="+", default=[5, 10, 16, 32])
    c.add_argument("--spider", action="store_true", help="Spider dev instead (held out)")
    a = sub.add_parser("answer")
    a.add_argument("--tables", type=int, default=2000)
    a.add_argument("--model", default="qwen2.5-coder-0.5b")
    a.add_argument("--n-ctx", type=int, default=4096)
    a.add_argument("--question", default="How many customers are there?")
    args = ap.parse_args(argv)
    if args.cmd == "reflect":
        reflect(args.tables, args.vocab, args.defog_big)
    elif args.cmd == "recall" and args.spider:
        recall_spider(args.tables, args.k)
    elif args.cmd == "recall":
        recall(args.tables, args.k)
    else:
        answer(args.tables, args.model, args.question, args.n_ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
