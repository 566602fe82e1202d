"""Walk arm (issue #3 §4): random walks through the exact masks never dead-end, never overrun
the token budget, and always end in a sentence that lark parses.

One walk: a fresh matcher; at each step the full-vocabulary mask is filled (kernels on) and a
token is drawn uniformly among the allowed ids (EOS included when legal). The termination
reserve runs as in the decode loop (``grid_sql.decode.loop.generate``): a drawn token is kept
only if the reserve completion of the configuration it leads to still fits the remaining
budget, otherwise the reserve completion is written and the walk ends. Recorded per walk:

- ``dead_end``: an empty mask (or a ``MaskError``) at a viable, unterminated configuration;
- ``overrun``: more tokens than the budget, or a reserve that does not fit;
- ``lark``: the final text parses with lark (LALR, the dialect's ``.lark`` file, contextual
  lexer) — an independent parser; a failure is re-checked with grid-sql's executable
  specification so lexer differences between lark and grid-sql are told apart (``spec``).
  lark's contextual lexer takes a case-insensitive keyword off the front of an identifier
  (``inhab…`` → ``IN`` + ``hab…``) where the language lexes by maximal munch, so the report
  also parses every text with lark's LALR parser fed by a lexer that follows the language's
  written lexing rule (docs/design/foundation.md §2: the longest match over all of lark's
  terminal patterns, then the first candidate in resolution order that lark's interactive
  parser accepts or that is ignored): lark's grammar, tables and parser and Python's ``re``,
  none of grid-sql's code (``lark munch``).

Arms: ``sqlite``, ``postgresql``, ``mysql``, each without a lexicon (L1) and with one
(``+lex``: the Chinook schema's tables and columns, bare-case folding, dialect quoting).
Vocabulary: GPT-2. Walk ``k`` of an arm uses ``random.Random(f"{arm}:{k}")``, so a walk is
reproducible alone. Results are JSONL lines, one per walk, in
``bench/results/walk_arm/<arm>.jsonl``; a run skips the walks already there (resumable), and
appends under an exclusive ``flock`` (several processes may run different ``--shard``s of one
arm at once). ``--report`` writes ``bench/RESULTS-walk-arm.md`` from all the files (an arm's
committed ``<arm>.summary.jsonl.gz`` where its raw file is absent; ``--summarize`` writes those).

    python bench/walk_arm.py --arms sqlite sqlite+lex --walks 10000 --shard 0/2
    python bench/walk_arm.py --report
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fcntl
import json
import os
import random
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
OUT_DIR = ROOT / "bench" / "results" / "walk_arm"
# The .lark files the lark checks read: this checkout's, or (``--summarize --dialects DIR``) the
# grammars the recorded walks were made under, when the language has changed since.
DIALECT_DIR = ROOT / "dialects"
DIALECTS = ("sqlite", "postgresql", "mysql")
ARMS = tuple(a for d in DIALECTS for a in (d, f"{d}+lex", f"{d}+scope"))
# The `+scope` arms (issue #29) walk the role grammar the Asker generates under: Chinook's
# catalog as the dialect's server (or the SQLite file) lists it, an app policy that denies
# tables and columns (hidden columns, denied tables), scope-aware column lexicons with
# select-list obligations (fresh aliases on SQLite), output-alias sort keys, the dialect's
# function lexicon. PostgreSQL and MariaDB come from scripts/services.sh (GRID_SQL_PG_URL,
# GRID_SQL_MYSQL_URL), so the catalog and grants are the real ones.
SCOPE_POLICY = {
    "sqlite": {
        "verbs": ["select"],
        "tables": {"deny": ["Employee", "Playlist", "PlaylistTrack"]},
        "columns": {"deny": {"Customer": ["Email", "Phone"]}},
    },
    "postgresql": {
        "verbs": ["select"],
        "tables": {"deny": ["employee", "playlist", "playlist_track"]},
        "columns": {"deny": {"customer": ["email", "phone"]}},
    },
}
SCOPE_POLICY["mysql"] = SCOPE_POLICY["sqlite"]
# Identifier words of the `+scope` walk policy: output aliases of the "top N by total"
# shape (issue #29), denied tables and hidden columns (both spellings), reserved words of
# other dialects, short table aliases.
IDENT_POOL = (
    "TotalSpending", "total_spending", "AverageTotal", "average", "TotalRevenue", "Revenue",
    "NumTracks", "TrackCount", "Year", "YEAR", "cnt", "total", "Total", "Employee", "employee",
    "Playlist", "playlist", "BirthDate", "birth_date", "Email", "email", "Phone", "TOP",
    "ISNULL", "ORDER", "T1", "T2", "c", "i", "x", "a", "Customer", "Invoice",
)  # fmt: skip
# Terminals a terminal step picks a third of the time when allowed: they lead to the clauses
# the scope rule restricts (FROM items and their aliases, qualified columns, sort keys).
STEER = frozenset({"FROM", "JOIN", "AS", "ON", "WHERE", "GROUP", "ORDER", "BY", "HAVING", "DOT"})
SCOPE_DB = {
    "postgresql": ("GRID_SQL_PG_URL", "chinook"),
    "mysql": ("GRID_SQL_MYSQL_URL", "Chinook"),
}
QUOTE = {"sqlite": '"{}"', "postgresql": '"{}"', "mysql": "`{}`"}
SCHEMA = {"sqlite": "main", "postgresql": "public", "mysql": "chinook"}
TABLE_CATEGORIES = (
    "TABLE_NAME",
    "INSERT_TABLE_NAME",
    "UPDATE_TABLE_NAME",
    "DELETE_TABLE_NAME",
    "TRUNCATE_TABLE_NAME",
)


# ----------------------------------------------------------------------------- set-up
@cache
def chinook_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(tables, columns) of the Chinook SQLite database."""
    import sqlite3

    con = sqlite3.connect(f"file:{SHARED / 'chinook' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        cols = sorted({r[1] for t in tables for r in con.execute(f'PRAGMA table_info("{t}")')})
    finally:
        con.close()
    return tuple(tables), tuple(cols)


@cache
def scoped_role_grammar(dialect: str) -> Any:
    """The Asker's scoped role grammar of Chinook under :data:`SCOPE_POLICY`."""
    from grid_sql.ask.asker import role_grammar_for
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.policy.grants import read_grants
    from grid_sql.schema import introspect

    app = AppPolicy.from_mapping(SCOPE_POLICY[dialect], origin="walk arm")
    if dialect == "sqlite":
        snap = introspect(open_sqlite(SHARED / "chinook" / "Chinook_Sqlite.sqlite"))
        pol = narrow(sqlite_baseline(snap), app, snap)
    else:
        import sqlalchemy as sa

        var, db = SCOPE_DB[dialect]
        url = os.environ.get(var)
        if not url:
            raise SystemExit(f"{var} is not set: start scripts/services.sh and eval its env")
        engine = sa.create_engine(sa.make_url(url).set(database=db))
        try:
            with engine.connect() as conn:
                # the service login sees every database of the server: Chinook's only
                snap = introspect(conn, schemas=[db] if dialect == "mysql" else None)
                pol = narrow(read_grants(conn, snap), app, snap)
        finally:
            engine.dispose()
    return role_grammar_for(snap, pol, scopes=True, bind_select_list=True)


def arm_grammar(arm: str) -> Any:
    from grid_sql.grammar import Grammar, SchemaLexicon

    dialect, _, lex = arm.partition("+")
    if lex == "scope":
        return scoped_role_grammar(dialect)
    g = Grammar.dialect(dialect)
    if not lex:
        return g
    tables, cols = chinook_names()
    q = QUOTE[dialect]

    def words(names: tuple[str, ...]) -> list[str]:
        return [*names, *(q.format(n) for n in names)]

    cats = {c: words(tables) for c in TABLE_CATEGORIES if c in g.terminal_ids}
    cats["COLUMN_NAME"] = words(cols)
    cats["SCHEMA_NAME"] = [SCHEMA[dialect]]
    return g.with_lexicon(SchemaLexicon(cats, fold_bare_case=True))


@cache
def vocab() -> Any:
    from grid_sql.mask.vocab import Vocabulary

    return Vocabulary.from_gguf(SHARED / "tokenizers" / "ggml-vocab-gpt-2.gguf")


@cache
def lark_parser(dialect: str) -> Any:
    import lark

    return lark.Lark.open(str(DIALECT_DIR / f"{dialect}.lark"), parser="lalr")


@cache
def spec_oracle(arm: str) -> Any:
    from grid_sql.spec.bridge import to_spec
    from grid_sql.spec.oracle import SpecOracle

    return SpecOracle(to_spec(arm_grammar(arm)))


class Arm:
    """A compiled arm: guide (kernels on), reserve table, lark parser."""

    def __init__(self, arm: str) -> None:
        from grid_sql.mask.cache import MaskCache
        from grid_sql.mask.guide import Guide
        from grid_sql.mask.reserve import reserve_table
        from grid_sql.mask.walk import kernels_enabled

        if not kernels_enabled():
            raise SystemExit("grid_sql._kernels is not built (make ext): the arm runs kernels on")
        self.arm = arm
        self.dialect = arm.partition("+")[0]
        self.grammar = arm_grammar(arm)
        self.guide = Guide(self.grammar, vocab(), cache=MaskCache())
        self.reserve = reserve_table(self.grammar, vocab())
        self.lark = lark_parser(self.dialect)
        from grid_sql.parser import ParserRuntime

        self.rt = ParserRuntime.for_grammar(self.grammar)
        self.matcher_cfg: Any = None
        tb = vocab().token_bytes
        self.space_start = np.array([b[:1] in (b" ", b"\n") for b in tb] + [False] * 8)

    def planned(self, rng: random.Random) -> list[int]:
        """A terminal step of the ``+scope`` arms' walk policy: a terminal the configuration
        allows (the scope rule's refinements included), spelled by a word the view in force
        admits (a category terminal), a word of :data:`IDENT_POOL` (output aliases, denied
        and hidden names, reserved words of other dialects, short aliases) or its shortest
        lexeme, as GPT-2 tokens of `` word``. Uniform tokens alone almost never leave a
        run-on identifier, so they would not reach the positions the scope rule restricts
        (sort keys, qualified columns, aliases); each planned token is still checked against
        the exact mask and the reserve like a uniform one. [] at no lexeme boundary."""
        from grid_sql.mask.vocab import greedy_token_ids

        cfg = self.matcher_cfg
        if cfg.scan.rem:
            return []
        rt = self.rt
        node = cfg.stack
        bits = rt.allowed_mask(node) & rt.term_bits
        terms = [t for t in range(rt.n_terminals) if (bits >> t) & 1 and t in self.reserve.lexeme]
        if not terms:
            return []
        names = self.grammar.terminals
        steer = [t for t in terms if names[t].name in STEER]
        t = rng.choice(steer if steer and rng.random() < 0.35 else terms)
        view = rt.lex_at(node)
        words = view.words.get(t)
        name = self.grammar.terminals[t].name
        if words is not None and not words.exclude and words.words:
            word = rng.choice(sorted(words.words))
        elif words is not None or name in ("IDENT", "QUOTED_IDENT") or t in rt.lexicon:
            word = rng.choice(IDENT_POOL).encode()
        else:
            word = self.reserve.lexeme[t]
        return greedy_token_ids(vocab(), b" " + word)

    def walk(self, k: int, budget: int) -> dict[str, Any]:
        from grid_sql.errors import GridSQLError

        rng = random.Random(f"{self.arm}:{k}")
        structured = self.arm.endswith("+scope")
        plan: list[int] = []
        g = self.guide
        eos = g.eos_id
        m = g.matcher()
        rec: dict[str, Any] = {"arm": self.arm, "walk": k, "budget": budget}
        t0 = time.perf_counter()
        stop = "eos"
        dead = overrun = False
        error = ""
        fills = 0
        try:
            if self.reserve.cost(m.config) > budget:
                raise RuntimeError("budget below the shortest sentence")
            while True:
                ids = m.allowed_token_ids()
                fills += 1
                if ids.size == 0:
                    dead = True
                    stop = "dead_end"
                    break
                tok = -1
                if structured:
                    self.matcher_cfg = m.config
                    if not plan and rng.random() < 0.85:
                        plan = self.planned(rng)
                    if plan:
                        want = plan.pop(0)
                        j = int(np.searchsorted(ids, want))
                        if j < ids.size and int(ids[j]) == want:
                            tok = want
                        else:
                            plan = []  # the view refused the word: back to a uniform token
                    if tok < 0 and rng.random() < 0.05 and eos in ids:
                        tok = eos  # uniform over 50k tokens would almost never stop
                    if tok < 0 and m.config.scan.rem and rng.random() < 0.8:
                        if rng.random() < 0.5:  # finish it the reserve's way (closes a string)
                            comp = self.reserve.completion(m.config).tokens
                            tok = comp[0] if comp else -1
                        else:  # end the pending lexeme (an identifier)
                            ends = ids[self.space_start[ids]]
                            if ends.size:
                                tok = int(ends[rng.randrange(ends.size)])
                if tok < 0:
                    tok = int(ids[rng.randrange(ids.size)])
                if tok == eos:
                    m.accept_token(eos)
                    break
                remaining = budget - len(m.tokens)
                cfg0 = m.config
                m.accept_token(tok)
                fits = remaining >= 1 and self.reserve.cost(m.config) <= remaining - 1
                if not fits:
                    m.rollback(1)
                    assert m.config is cfg0
                    comp = self.reserve.completion(m.config)
                    if comp.cost > budget - len(m.tokens):
                        overrun = True
                    m.accept_tokens(list(comp.tokens))
                    m.accept_token(eos)
                    stop = "reserve"
                    break
        except GridSQLError as exc:  # MaskError (empty mask), TokenRejected: both are bugs
            dead = True
            stop = "error"
            error = f"{type(exc).__name__}: {exc}"
        n = len([t for t in m.tokens if t != eos])
        overrun = overrun or n > budget
        text = m.text()
        rec.update(
            stop=stop,
            tokens=n,
            fills=fills,
            dead_end=dead,
            overrun=overrun,
            error=error,
            seconds=round(time.perf_counter() - t0, 4),
            text=text.decode("utf-8", "backslashreplace"),
            utf8=_is_utf8(text),
        )
        if not rec["utf8"]:  # byte-level tokens can split a UTF-8 sequence inside a comment
            rec["text_hex"] = text.hex()
        rec["lark"], rec["spec"] = self.check(text) if stop != "error" else (False, False)
        return rec

    def check(self, text: bytes) -> tuple[bool, bool | None]:
        """(lark parses it, grid-sql's spec accepts it — only asked when lark refuses)."""
        if lark_parses(self.dialect, text):
            return True, None
        return False, bool(spec_oracle(self.arm).accepts(text))


def lark_parses(dialect: str, text: bytes) -> bool:
    import lark

    try:
        # grid-sql's languages are over bytes; lark reads str, so bytes that are not UTF-8
        # (a split multi-byte character inside a comment or string) are carried as lone
        # surrogates, which [^\n]-style classes match like any other character
        lark_parser(dialect).parse(text.decode("utf-8", "surrogateescape"))
        return True
    except lark.exceptions.LarkError:
        return False


@cache
def _lark_terminals(dialect: str) -> tuple[list[tuple[str, Any, int, bool]], frozenset[str]]:
    """(name, compiled pattern, priority, is a string terminal) per lark terminal, and the
    ignored terminal names."""
    import re

    from lark.lexer import PatternStr

    lk = lark_parser(dialect)
    terms = [
        (t.name, re.compile(t.pattern.to_regexp()), t.priority, isinstance(t.pattern, PatternStr))
        for t in lk.terminals
    ]
    return terms, frozenset(lk.ignore_tokens)


def lark_munch_parses(dialect: str, text: bytes) -> bool:
    """lark's LALR parser over the tokens of the language's lexing rule (maximal munch over all
    terminals, contextual resolution: higher priority, then string before regex, then name;
    the first candidate the parser can shift, or an ignored one). Python's ``re`` gives a
    terminal's first match, not always its longest; a refusal is therefore re-checked by hand
    (``--recheck``) before it is read as a mask error."""
    import lark
    from lark.lexer import Token

    terms, ignore = _lark_terminals(dialect)
    s = text.decode("utf-8", "surrogateescape")
    ip = lark_parser(dialect).parse_interactive("")
    pos = 0
    while pos < len(s):
        best, cands = 0, []
        for name, rx, prio, is_str in terms:
            m = rx.match(s, pos)
            n = m.end() - pos if m is not None else 0
            if n > best:
                best, cands = n, [(name, prio, is_str)]
            elif n == best and n:
                cands.append((name, prio, is_str))
        if not cands:
            return False
        cands.sort(key=lambda c: (-c[1], not c[2], c[0]))
        # The first candidate that is ignored or that the parser can shift (what lark's
        # ``accepts()`` decides, by feeding a copy); only the candidates are tried, in order,
        # not every terminal of the state.
        for name, _prio, _is_str in cands:
            if name in ignore:
                break
            trial = ip.copy(deepcopy_values=False)
            try:
                trial.feed_token(Token(name, s[pos : pos + best]))
            except lark.exceptions.UnexpectedInput:
                continue
            ip = trial
            break
        else:
            return False
        pos += best
    try:
        ip.feed_eof()
    except lark.exceptions.LarkError:
        return False
    return True


def _text(r: dict[str, Any]) -> bytes:
    return bytes.fromhex(r["text_hex"]) if "text_hex" in r else r["text"].encode()


def recheck(arm: str, k: int) -> tuple[bytes, bool, bool, bool]:
    """(text, lark parses, lark munch parses, spec accepts) of recorded walk ``k``."""
    dialect = arm.partition("+")[0]
    if not out_path(arm).exists():
        raise SystemExit(
            f"{out_path(arm)} is absent: re-checking needs the raw records (a run's, or "
            f"`git show {RAW_RECORDS_COMMIT}:bench/results/walk_arm/{arm}.jsonl`)"
        )
    for line in out_path(arm).read_text().splitlines():
        r = json.loads(line)
        if r["walk"] == k:
            text = _text(r)
            return (
                text,
                lark_parses(dialect, text),
                lark_munch_parses(dialect, text),
                bool(spec_oracle(arm).accepts(text)),
            )
    raise SystemExit(f"walk {k} of {arm} is not recorded")


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# ----------------------------------------------------------------------------- running
def out_path(arm: str) -> Path:
    return OUT_DIR / f"{arm}.jsonl"


def done_walks(arm: str) -> set[int]:
    p = out_path(arm)
    if not p.exists():
        return set()
    done = set()
    for line in p.read_text().splitlines():
        try:
            done.add(int(json.loads(line)["walk"]))
        except (ValueError, KeyError):
            continue  # a torn last line from a killed run: that walk is redone
    return done


def code_commit() -> str:
    """The commit whose code makes this run's walks (``-dirty`` when grid_sql/, dialects/ or
    this script differ from it): records of one arm may come from several runs at different
    commits (a run resumes an arm's file), and the report counts walks per commit."""
    import subprocess

    def git(*a: str) -> str:
        return subprocess.run(
            ["git", *a], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short=7", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "grid_sql", "dialects", "bench/walk_arm.py")
    return head + ("-dirty" if dirty else "")


def append(arm: str, rec: dict[str, Any]) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with open(out_path(arm), "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def run(arms: list[str], walks: int, budget: int, shard: tuple[int, int], deadline: float) -> int:
    """Walks interleaved across the arms (walk k of every arm, then k+1), so a run cut short
    by ``deadline`` has covered every arm about equally."""
    i, n = shard
    commit = code_commit()
    done = {arm: done_walks(arm) for arm in arms}
    compiled: dict[str, Arm] = {}
    total = 0
    for k in range(i, walks, n):
        for arm in arms:
            if k in done[arm]:
                continue
            if time.time() > deadline:
                print("deadline reached", flush=True)
                return total
            if arm not in compiled:
                t0 = time.perf_counter()
                compiled[arm] = Arm(arm)
                print(f"[{arm}] set-up {time.perf_counter() - t0:.1f}s", flush=True)
            rec = compiled[arm].walk(k, budget)
            rec["commit"] = commit
            append(arm, rec)
            total += 1
            bad = rec["dead_end"] or rec["overrun"] or not (rec["lark"] or rec["spec"])
            if bad or k % 25 == 0:
                print(json.dumps({x: rec[x] for x in rec if x != "text"}), flush=True)
    return total


def replay(n: int, budget: int, seed: int = 0) -> tuple[int, list[tuple[str, int]]]:
    """Re-walk ``n`` recorded walks per arm (drawn with ``Random(seed)``) in this process and
    compare text, token count and stop reason with the record: (walks replayed, differing).
    Only arms with raw records (a run's, or restored from git: see ``RAW_RECORDS_COMMIT``)
    take part; the committed summaries hold no texts to compare."""
    rng = random.Random(seed)
    done, differ = 0, []
    for arm in ARMS:
        p = out_path(arm)
        if not p.exists():
            continue
        recs = {r["walk"]: r for r in map(json.loads, p.read_text().splitlines())}
        a = Arm(arm)
        for k in sorted(rng.sample(sorted(recs), min(n, len(recs)))):
            r, o = a.walk(k, budget), recs[k]
            done += 1
            if (r["text"], r["tokens"], r["stop"]) != (o["text"], o["tokens"], o["stop"]):
                differ.append((arm, k))
    return done, differ


# ----------------------------------------------------------------------------- summaries
# The raw per-walk records (~5.5 MB an arm, mostly the walk's text) are not kept in git: the
# report needs only a few fields per walk, kept as ``<arm>.summary.jsonl.gz`` (the text only of
# the walks the report quotes). ``--summarize`` writes them from the raw files; the report reads
# an arm's raw file where there is one (a fresh run) and its summary otherwise.
SUMMARY_FIELDS = (
    "walk",
    "tokens",
    "seconds",
    "stop",
    "dead_end",
    "overrun",
    "lark",
    "spec",
    "utf8",
    "commit",
)
# The commit whose tree holds the raw records the committed summaries were made from.
RAW_RECORDS_COMMIT = "97aec29"


def summary_path(arm: str) -> Path:
    return OUT_DIR / f"{arm}.summary.jsonl.gz"


def summarize(recs: list[dict[str, Any]], dialect: str) -> list[dict[str, Any]]:
    """The report's fields of each walk, with the lark munch verdict computed once here (it
    needs the text); the text is kept only where the report may quote it."""
    out = []
    for r in recs:
        s = {k: r[k] for k in SUMMARY_FIELDS if k in r}
        s["munch"] = lark_munch_parses(dialect, _text(r))
        if (not r["lark"] and r["spec"]) or r["dead_end"] or r["overrun"]:
            s["text"] = r["text"]
        out.append(s)
    return out


def write_summary(arm: str) -> int:
    import gzip

    recs = [json.loads(x) for x in out_path(arm).read_text().splitlines() if x.strip()]
    rows = summarize(recs, arm.partition("+")[0])
    # mtime=0: the same records give byte-identical files (no spurious diffs in git)
    with gzip.GzipFile(summary_path(arm), "wb", compresslevel=9, mtime=0) as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    return len(rows)


def read_arm(arm: str) -> list[dict[str, Any]]:
    """An arm's records for the report: the raw file if present, else the committed summary."""
    import gzip

    p = out_path(arm)
    if p.exists():
        return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    s = summary_path(arm)
    if s.exists():
        with gzip.open(s, "rt", encoding="utf-8") as f:
            return [json.loads(x) for x in f if x.strip()]
    return []


# ----------------------------------------------------------------------------- report
def report(out: Path, cmds: list[str]) -> str:
    import numpy as np

    rows = []
    examples: list[str] = []
    for arm in ARMS:
        recs = read_arm(arm)
        if not recs:
            continue
        secs = np.array([r["seconds"] for r in recs])
        toks = np.array([r["tokens"] for r in recs])
        lark_ok = sum(r["lark"] for r in recs)
        dialect = arm.partition("+")[0]
        munch_ok = sum(
            r["munch"] if "munch" in r else lark_munch_parses(dialect, _text(r)) for r in recs
        )
        lexdiff = [r for r in recs if not r["lark"] and r["spec"]]
        not_utf8 = sum(not r.get("utf8", True) for r in recs)
        by_commit: dict[str, int] = {}
        for r in recs:
            c = r.get("commit", "not recorded")
            by_commit[c] = by_commit.get(c, 0) + 1
        rows.append(
            f"| {arm} | {len(recs)} | {sum(r['dead_end'] for r in recs)} "
            f"| {sum(r['overrun'] for r in recs)} | {lark_ok} ({100 * lark_ok / len(recs):.1f}%) "
            f"| {len(lexdiff)} | {munch_ok} ({100 * munch_ok / len(recs):.1f}%) "
            f"| {sum(not r['lark'] and not r['spec'] for r in recs)} "
            f"| {sum(r['stop'] == 'eos' for r in recs)} "
            f"/ {sum(r['stop'] == 'reserve' for r in recs)} "
            f"| {not_utf8} | {np.mean(toks):.1f} | {np.median(secs):.2f} "
            f"| {secs.sum() / 60:.1f} "
            f"| {', '.join(f'{c}: {m}' for c, m in by_commit.items())} |"
        )
        for r in (lexdiff + [x for x in recs if x["dead_end"] or x["overrun"]])[:3]:
            examples.append(f"- {arm} walk {r['walk']} ({r['stop']}): `{r['text'][:200]!r}`")
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "# Walk arm: random walks through the exact masks (issue #3 §4)",
        "",
        f"- report written {now}; per-walk records in "
        f"`{os.path.relpath(OUT_DIR, ROOT)}/<arm>.jsonl` "
        "(a run's raw records, git-ignored) or `<arm>.summary.jsonl.gz` (the committed summary "
        "the report reads where no raw file is present; `--summarize` writes it); the raw "
        "records of the committed summaries: `git show "
        f"{RAW_RECORDS_COMMIT}:bench/results/walk_arm/<arm>.jsonl`",
        "- commands: " + "; ".join(f"`{c}`" for c in cmds),
        "- vocabulary GPT-2 (50,257 tokens); kernels on; uniform choice among allowed ids "
        "(EOS included); termination reserve on",
        "",
        "| arm | walks | dead ends | budget overruns | lark parses | lark refuses, spec "
        "accepts | lark munch parses | both refuse | stop eos / reserve "
        "| not UTF-8 | mean tokens | median s/walk | wall min | walks per code commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if examples:
        head += [
            "Examples (lark/grid-sql lexing differences, dead ends, overruns):",
            "",
            *examples,
            "",
        ]
    return "\n".join(head) + "\n"


def main(argv: list[str] | None = None) -> int:
    global OUT_DIR, DIALECT_DIR  # --records / --dialects: read by out_path, lark_parser
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    ap.add_argument("--walks", type=int, default=10_000, help="walks per arm (ids 0..N-1)")
    ap.add_argument("--budget", type=int, default=48, help="token budget per walk")
    ap.add_argument("--shard", default="0/1", help="i/n: this process runs walks k with k%%n == i")
    ap.add_argument("--minutes", type=float, default=1e9, help="stop starting walks after this")
    ap.add_argument("--report", action="store_true", help="write the report from the JSONL files")
    ap.add_argument(
        "--summarize",
        action="store_true",
        help="write <arm>.summary.jsonl.gz (the report's fields) from each raw <arm>.jsonl",
    )
    ap.add_argument("--cmd", action="append", default=[], help="command line(s) for the report")
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-walk-arm.md"))
    ap.add_argument(
        "--dialects",
        default=str(DIALECT_DIR),
        help="the dialects/ directory whose .lark files the lark checks read (for --summarize "
        "of records made under an earlier grammar: `git archive <commit> dialects`)",
    )
    ap.add_argument(
        "--records",
        default=str(OUT_DIR),
        help="directory of the per-walk records and summaries (e.g. a scratch directory for "
        "a short run that must not mix with the committed summaries)",
    )
    ap.add_argument("--notes", default="", help="markdown file appended to the report")
    ap.add_argument(
        "--recheck", nargs=2, metavar=("ARM", "WALK"), help="lark and spec verdicts of a walk"
    )
    ap.add_argument(
        "--replay", type=int, metavar="N", help="re-walk N recorded walks per arm and compare"
    )
    args = ap.parse_args(argv)
    OUT_DIR = Path(args.records)
    DIALECT_DIR = Path(args.dialects)
    if args.recheck:
        text, ok, munch, spec = recheck(args.recheck[0], int(args.recheck[1]))
        print(f"{text!r}\nlark parses: {ok}; lark munch parses: {munch}; spec accepts: {spec}")
        return 0
    if args.replay:
        n, differ = replay(args.replay, args.budget)
        print(f"{n} walks replayed, {len(differ)} differ from their records: {differ}")
        return 1 if differ else 0
    if args.summarize:
        for arm in args.arms:
            if out_path(arm).exists():
                print(f"{summary_path(arm)}: {write_summary(arm)} walks")
        return 0
    if args.report:
        text = report(Path(args.out), args.cmd)
        if args.notes:
            text += "\n" + Path(args.notes).read_text()
        Path(args.out).write_text(text)
        print(text)
        return 0
    i, n = (int(x) for x in args.shard.split("/"))
    deadline = time.time() + 60 * args.minutes
    total = run(args.arms, args.walks, args.budget, (i, n), deadline)
    print(f"{total} walks written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GRID_SQL_KERNELS", "1")
    raise SystemExit(main())
