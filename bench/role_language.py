#!/usr/bin/env python
"""How much of the gold SQL of public benchmarks is inside a role's language (issue #25 §1).

A role that may read every table of its database gets the ``Asker``'s default role grammar:
``role_grammar`` (select only, schema lexicons, the dialect's allowed function names) with
scope-aware column lexicons and select-list obligations (``role_scopes(...,
bind_select_list=True)``), exactly ``grid_sql.ask.asker.role_grammar_for(snapshot, policy,
scopes=True, bind_select_list=True)``. A gold statement is *inside* when the grammar's runtime
reads all of its bytes and may end there (``ParserRuntime.advance`` + ``eos_allowed``: the
statement can be generated); the post-parse checker's verdict on it is reported beside.

Corpora (``<repo>/../shared/data`` unless ``--data`` says otherwise):

* defog sql-eval ``questions_gen_<dialect>.csv`` (210 questions; PostgreSQL is the headline,
  ``--dialects`` adds MySQL and SQLite): a question counts as inside when its first accepted
  query (``{a, b}`` templates filled with all their columns) is; the catalog is the
  database's ``table_metadata`` (column names and types) in the dialect's default schema.
* ``defog-instruct``: sql-eval's ``instruct_advanced_postgres.csv`` (CTEs, date series),
  read like the PostgreSQL questions.
* Spider dev gold (SQLite, 972 of 1,034 questions: ``wta_1`` is not shipped), on the
  database's own SQLite file.

Each statement outside is classified at the byte where the runtime stops reading it
(``blocked_at``: the longest viable prefix), by what is written there; ``--list`` prints
every one of them.

Usage:
  python bench/role_language.py [--data PATH] [--corpora defog,defog-instruct,spider]
      [--dialects postgresql] [--list] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grid_sql.ask.asker import role_grammar_for  # noqa: E402
from grid_sql.parser import ParserRuntime  # noqa: E402
from grid_sql.policy import AppPolicy, Checker, narrow, open_sqlite, sqlite_baseline  # noqa: E402
from grid_sql.schema import SchemaSnapshot, introspect  # noqa: E402
from grid_sql.schema.model import ColumnInfo, SchemaInfo, TableInfo  # noqa: E402

DEFOG_SUFFIX = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql"}
DEFAULT_SCHEMA = {"sqlite": "main", "postgresql": "public"}
MISSING_SPIDER = frozenset({"wta_1"})


def _coverage_module():  # scripts/grammar_coverage.py: the corpus tests' template rules
    spec = importlib.util.spec_from_file_location(
        "grammar_coverage", ROOT / "scripts" / "grammar_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


COV = _coverage_module()


def select_only(snapshot: SchemaSnapshot):
    """A role that may SELECT every table and column of ``snapshot`` (nothing else)."""
    base = sqlite_baseline(snapshot)
    base = type(base)(
        dialect=snapshot.dialect,
        role="(bench reader)",
        default_schema=base.default_schema,
        tables=base.tables,
        statement_verbs=base.statement_verbs,
    )
    app = AppPolicy.from_mapping({"verbs": ["select"]}, origin="bench/role_language.py")
    return narrow(base, app, snapshot)


def defog_snapshot(data: Path, db: str, dialect: str) -> SchemaSnapshot:
    """The catalog of a defog database from its ``table_metadata`` (names and types), as the
    database would list it: ``schema.table`` keys in their schema (``ewallet``'s
    ``consumer_div``), the rest in the dialect's default one; on PostgreSQL names folded to
    lower case, as the bare names of the defog DDL are. On MySQL a schema is a database and
    sql-eval loads each defog database as one: its gold names ``ewallet``'s tables bare
    (``FROM users``, never ``consumer_div.``), so they are the connected database's."""
    meta = json.loads((data / "defog_sql_eval" / "databases" / db / f"{db}.json").read_text())
    default = db if dialect == "mysql" else DEFAULT_SCHEMA[dialect]  # MySQL: the database

    def fold(name: str) -> str:
        return name.lower() if dialect == "postgresql" else name

    by_schema: dict[str, list[TableInfo]] = {}
    for key, cols in meta["table_metadata"].items():
        schema, _, name = key.rpartition(".")
        schema = "" if dialect == "mysql" else schema
        columns = tuple(ColumnInfo(fold(c["column_name"]), c.get("data_type", "")) for c in cols)
        by_schema.setdefault(fold(schema) or default, []).append(
            TableInfo(fold(name), columns=columns)
        )
    schemas = tuple(SchemaInfo(s, tuple(ts)) for s, ts in by_schema.items())
    return SchemaSnapshot(dialect, default, schemas)


@dataclass
class Outcome:
    corpus: str
    db: str
    sql: str
    inside: bool
    checker_ok: bool
    blocked_at: int | None = None
    category: str = ""
    rewritten: bool = False  # single_quoted changed the text
    same_rows: bool | None = None  # the rewritten text returns the original's rows (SQLite)


def blocked_at(rt: ParserRuntime, data: bytes) -> int:
    """Length of the longest prefix of ``data`` the runtime reads (viability is monotone)."""
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if rt.advance(rt.initial, data[:mid]) is not None:
            lo = mid
        else:
            hi = mid - 1
    return lo


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*|\"[^\"]*\"|`[^`]*`")


def _depth_of_alias(sql: str, alias: str) -> int:
    """Parenthesis depth where ``AS alias`` is first written (0: the outermost select list)."""
    m = re.search(rf"\bas\s+\"?{re.escape(alias)}\"?\b", sql, re.I)
    if m is None:
        return -1
    head = re.sub(r"'[^']*'", "", sql[: m.start()])
    return head.count("(") - head.count(")")


def classify(sql: str, at: int) -> str:
    """What is written where the runtime stops: a category of the unsupported SELECT
    language (issue #25 §1), judged from the text around the stop."""
    text = sql.encode()[:at].decode(errors="replace")
    rest = sql[len(text) :]
    # the word being written when reading stopped (stop may fall inside it)
    if rest[:1] and not re.match(r"[A-Za-z0-9_$\"`]", rest[:1]):
        text = text.rstrip()  # stopped after a word: the word is what cannot go on
    head = re.search(r"[A-Za-z0-9_$\"`]*$", text)
    start = head.start() if head else len(text)
    m = _WORD.match(sql, start)
    word = m.group(0).strip('"`') if m else rest[:1]
    lw = word.lower()
    before = sql[:start].rstrip()
    ctes = {
        c.lower()
        for c in re.findall(
            r"(?:\bwith(?:\s+recursive)?|,)\s+(\w+)\s*(?:\([^)]*\))?\s+as\s*\(", sql, re.I
        )
    }
    aliases = {a.lower() for a in re.findall(r"\bas\s+\"?(\w+)\"?", sql, re.I)}
    if lw == "lateral":
        return "LATERAL"
    if re.search(r"\b(from|join)$", before, re.I) or before.endswith(","):
        if lw in ctes:
            return "CTE name in FROM"
        if rest[len(word) :].lstrip().startswith("(") or sql[
            m.end() if m else start :
        ].lstrip().startswith("("):
            return "table function in FROM"
    if (
        m
        and m.group(0).startswith('"')
        and re.search(r"(=|!=|<>|\bin\s*\(|,|\blike)$", before, re.I)
    ):
        return "double-quoted string literal (SQLite fallback)"
    clause = re.findall(
        r"\b(select|from|where|group\s+by|having|order\s+by|on)\b", sql[:start], re.I
    )
    last = re.sub(r"\s+", " ", clause[-1].lower()) if clause else ""
    if lw in aliases:
        depth = _depth_of_alias(sql, lw)
        if depth == 0 and last in ("group by", "having", "order by", "where"):
            return f"output alias in {last.upper()}"
        return "column of a CTE or derived table"
    if lw in ctes and before.endswith("."):
        return "column of a CTE or derived table"
    if lw in ctes:
        return "CTE name as qualifier"
    return f"other: {word!r} after {before[-30:]!r}"


def measure(corpus: str, db: str, sql: str, rt: ParserRuntime, checker: Checker) -> Outcome:
    data = sql.encode()
    cfg = rt.advance(rt.initial, data)
    inside = cfg is not None and rt.eos_allowed(cfg)
    ok = not checker.check(sql)
    out = Outcome(corpus, db, sql, inside, ok)
    if not inside:
        out.blocked_at = blocked_at(rt, data)
        out.category = (
            "not a sentence at its end"
            if out.blocked_at == len(data)
            else classify(sql, out.blocked_at)
        )
    return out


def defog(data: Path, dialect: str, file: str | None = None) -> list[Outcome]:
    """``file``: another question file of the set (``instruct_advanced_postgres.csv``)."""
    name = file or f"questions_gen_{DEFOG_SUFFIX[dialect]}.csv"
    path = data / "defog_sql_eval" / "questions" / name
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    cache: dict[str, tuple[ParserRuntime, Checker]] = {}
    out = []
    for row in rows:
        db = row["db_name"]
        if db not in cache:
            snap = defog_snapshot(data, db, dialect)
            pol = select_only(snap)
            g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
            cache[db] = (ParserRuntime.for_grammar(g), Checker(snap, pol))
        rt, chk = cache[db]
        sql = COV.fill_braces(COV.split_statements(row["query"])[0])
        out.append(measure(f"defog-{dialect}", db, sql, rt, chk))
    return out


def single_quoted(sql: str, snap: SchemaSnapshot) -> str:
    """``sql`` with every double-quoted word SQLite reads as a string written as a string.

    SQLite reads ``"Asia"`` as a string literal when it names no column (its documented
    misfeature; the checker mirrors it in ``_quoted_string_fallback``). The role grammars
    never write it: a ``"…"`` word is an identifier there (docs/scope.md), so the same
    statement with ``'Asia'`` is what the product can generate. The rule is the checker's:
    an unqualified, double-quoted column reference naming no column of any table and no
    select alias; only those tokens are rewritten, the rest of the text is left byte for byte.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import TokenType

    columns = {c.name.lower() for _, t in snap.iter_tables() for c in t.columns}
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except Exception:
        return sql
    aliases = {a.alias.lower() for a in tree.find_all(exp.Alias)}
    strings = {
        c.this.name
        for c in tree.find_all(exp.Column)
        if not c.table
        and isinstance(c.this, exp.Identifier)
        and c.this.quoted
        and c.this.name.lower() not in columns | aliases
    }
    if not strings:
        return sql
    out, last = [], 0
    for tok in sqlglot.Dialect.get_or_raise("sqlite").tokenize(sql):
        raw = sql[tok.start : tok.end + 1]
        if tok.token_type == TokenType.IDENTIFIER and raw.startswith('"') and tok.text in strings:
            out.append(sql[last : tok.start])
            out.append("'" + tok.text.replace("'", "''") + "'")
            last = tok.end + 1
    out.append(sql[last:])
    return "".join(out)


def _rows(data: Path, db: str, sql: str) -> list[tuple[object, ...]]:
    """The statement's rows on the Spider database, read-only, in order."""
    import sqlite3

    path = data / "spider" / "database" / db / f"{db}.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute(sql).fetchall()


def spider(data: Path, quoting: bool = False) -> list[Outcome]:
    """Spider dev gold; with ``quoting``, SQLite's double-quoted strings single-quoted first
    (``single_quoted``: the same query, in the form the role grammars write)."""
    rows = json.loads((data / "spider" / "dev.json").read_text())
    snaps: dict[str, SchemaSnapshot] = {}
    cache: dict[str, tuple[ParserRuntime, Checker]] = {}
    out = []
    for row in rows:
        db = row["db_id"]
        if db in MISSING_SPIDER:
            continue
        if db not in cache:
            snap = introspect(open_sqlite(data / "spider" / "database" / db / f"{db}.sqlite"))
            snaps[db] = snap
            pol = select_only(snap)
            g = role_grammar_for(snap, pol, scopes=True, bind_select_list=True)
            cache[db] = (ParserRuntime.for_grammar(g), Checker(snap, pol))
        rt, chk = cache[db]
        sql = single_quoted(row["query"], snaps[db]) if quoting else row["query"]
        corpus = "spider-sqlite-single-quoted" if quoting else "spider-sqlite"
        o = measure(corpus, db, sql, rt, chk)
        if sql != row["query"]:
            o.rewritten = True
            o.same_rows = _rows(data, db, sql) == _rows(data, db, row["query"])
        out.append(o)
    return out


def report(results: dict[str, list[Outcome]], list_all: bool) -> str:
    lines = ["| corpus | statements | inside the role language | outside | checker passes |"]
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for corpus, outs in results.items():
        n = len(outs)
        inside = sum(o.inside for o in outs)
        ok = sum(o.checker_ok for o in outs)
        lines.append(f"| {corpus} | {n} | {inside} | {n - inside} | {ok} |")
    for corpus, outs in results.items():
        rw = [o for o in outs if o.rewritten]
        if rw:
            same = sum(bool(o.same_rows) for o in rw)
            lines.append("")
            lines.append(
                f"{corpus}: {len(rw)} statements rewritten, {same} return the original's rows "
                "(SQLite, same order)"
            )
    for corpus, outs in results.items():
        cats = Counter(o.category.split(":")[0] for o in outs if not o.inside)
        if not cats:
            continue
        lines.append("")
        lines.append(f"{corpus}, outside by category:")
        lines.append("")
        lines.append("| category | statements |")
        lines.append("| --- | ---: |")
        for c, k in cats.most_common():
            lines.append(f"| {c} | {k} |")
        if list_all:
            lines.append("")
            for o in outs:
                if not o.inside:
                    at = o.blocked_at or 0
                    s = o.sql.encode()
                    shown = (
                        s[:at].decode(errors="replace") + " ⟂ " + s[at:].decode(errors="replace")
                    )
                    lines.append(f"- [{o.db}] {o.category} — `{' '.join(shown.split())}`")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--corpora", default="defog,spider")
    ap.add_argument("--dialects", default="postgresql", help="defog dialects, comma-separated")
    ap.add_argument("--list", action="store_true", help="list every statement outside")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    args = ap.parse_args()
    t0 = time.time()
    results: dict[str, list[Outcome]] = {}
    corpora = args.corpora.split(",")
    if "defog" in corpora:
        for d in args.dialects.split(","):
            results[f"defog-{d}"] = defog(args.data, d)
    if "defog-instruct" in corpora:  # sql-eval's advanced instructions set (PostgreSQL)
        results["defog-instruct-postgresql"] = defog(
            args.data, "postgresql", "instruct_advanced_postgres.csv"
        )
    if "spider" in corpora:
        results["spider-sqlite"] = spider(args.data)
        results["spider-sqlite-single-quoted"] = spider(args.data, quoting=True)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"commit {commit}, host {platform.node()} ({platform.machine()}), "
        f"python {platform.python_version()}, {time.time() - t0:.0f} s"
    )
    print()
    print(report(results, args.list))
    if args.json:
        args.json.write_text(
            json.dumps({k: [o.__dict__ for o in v] for k, v in results.items()}, indent=1)
        )


if __name__ == "__main__":
    main()
