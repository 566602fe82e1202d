"""``grid-sql demo``: the product on the embedded default, offline.

Chinook (shipped in the package) under a select-only role with one table denied, the default
local model (``qwen2.5-coder-1.5b``, fetched on first use; ``--model`` takes any other), and
a few questions: for each, the SQL generated under the role's exact masks, the rows it
returned from a READ ONLY transaction, and the audit id of the sealed per-token record. Then
the forbidden continuations (other verbs, the denied table, an unknown table, a PRAGMA) are
shown to have no legal token in the model's own vocabulary.

``grid-sql demo --masks`` is the model-free walk: a reference statement token by token with
the exact mask size at each step (over a GGUF vocabulary file, no model needed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..ask.prompt import Example
from ..data import chinook_path
from ..errors import ExecutionError, GridSQLError, PolicyViolation, StatementError
from ..grammar import Grammar
from ..mask.guide import Guide
from ..mask.vocab import Vocabulary, greedy_token_ids
from ..policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from ..policy.grammar import role_grammar
from ..schema import introspect

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
DEFAULT_DB = chinook_path()
DEFAULT_VOCAB = SHARED / "data/tokenizers/ggml-vocab-qwen2.gguf"
REFERENCE = (
    b"SELECT c.FirstName, c.LastName, SUM(i.Total) AS revenue FROM Customer c "
    b"JOIN Invoice i ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId "
    b"ORDER BY SUM(i.Total) DESC LIMIT 5;"
)
DEMO_POLICY = {"verbs": ["select"], "tables": {"deny": ["Employee"]}}
# One worked example: joins, aggregates and ORDER BY on the repeated expression (the schema
# lexicon admits real column names only; a bare ORDER BY item may still name an alias).
DEMO_EXAMPLES = (
    Example(
        "Which 3 media types have the most tracks?",
        "SELECT m.Name, COUNT(*) FROM MediaType m JOIN Track t "
        "ON t.MediaTypeId = m.MediaTypeId GROUP BY m.MediaTypeId, m.Name "
        "ORDER BY COUNT(*) DESC LIMIT 3;",
    ),
)
DEMO_QUESTIONS = (
    "Who are the top 5 customers by total revenue?",
    "How many tracks are there in each genre? Show the 5 largest genres.",
    "Which artists have the most albums?",
)
PROBES = [
    b"DELETE FROM Customer",
    b"SELECT * FROM Employee",
    b"SELECT * FROM salaries",
    b"PRAGMA writable_schema",
]


def _tokenize(vocab: Vocabulary, text: bytes) -> list[int]:
    return greedy_token_ids(vocab, text, max_len=16)


def masks_run(db: Path = DEFAULT_DB, vocab_path: Path = DEFAULT_VOCAB) -> int:
    t0 = time.perf_counter()
    engine = open_sqlite(db)
    snap = introspect(engine)
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="demo policy"
    )
    policy = narrow(sqlite_baseline(snap), app, snap)
    print(f"database   {db.name}: {sum(1 for _ in snap.iter_tables())} tables")
    print(f"policy     select-only, table Employee denied (fingerprint {policy.fingerprint[:12]})")
    grammar = role_grammar(Grammar.dialect("sqlite"), snap, policy)
    print(f"grammar    {grammar!r}")
    vocab = Vocabulary.from_gguf(vocab_path)
    guide = Guide(grammar, vocab)
    print(
        f"vocabulary {vocab_path.name}: {vocab.size} tokens "
        f"(ready in {time.perf_counter() - t0:.1f}s)\n"
    )
    m = guide.matcher()
    buf = m.allocate_bitmask()
    for t in _tokenize(vocab, REFERENCE):
        t1 = time.perf_counter()
        n = m.fill_next_token_bitmask(buf)
        dt = (time.perf_counter() - t1) * 1000
        print(f"  {n:6d} allowed  {dt:7.1f} ms  next {vocab.token_bytes[t]!r}")
        m.accept_token(t)
    print(f"\ncomplete sentence: {m.is_accepting()}  config hash {m.config_hash:016x}")
    print(f"SQL: {m.text().decode()}")
    with engine.connect() as conn:
        import sqlalchemy as sa

        for row in conn.execute(sa.text(m.text().decode().rstrip(";"))):
            print("   ", tuple(row))
    print("\nforbidden continuations (the first byte string with no legal token):")
    for probe in PROBES:
        pm = guide.matcher()
        blocked: str | None = None
        for t in _tokenize(vocab, probe):
            if t not in set(pm.allowed_token_ids().tolist()):
                blocked = f"{pm.text()!r} + {vocab.token_bytes[t]!r}"
                break
            pm.accept_token(t)
        status = f"blocked at {blocked}" if blocked is not None else "ALLOWED (bug)"
        print(f"  {probe.decode():28s} {status}")
        if blocked is None:
            return 1
    print(f"\ncache: {guide.cache.stats}")
    return 0


def masks_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="grid-sql demo --masks", description=__doc__)
    ap.add_argument("--db", type=Path, default=DEFAULT_DB)
    ap.add_argument("--vocab", type=Path, default=DEFAULT_VOCAB)
    a = ap.parse_args(argv)
    return masks_run(a.db, a.vocab)


def blocked_prefix(guide: Guide, probe: bytes) -> str | None:
    """Where ``probe`` (tokenized greedily) first has no legal token, or None if it passes."""
    vocab = guide.vocab
    m = guide.matcher()
    for t in _tokenize(vocab, probe):
        if t not in set(m.allowed_token_ids().tolist()):
            return f"{m.text()!r} + {vocab.token_bytes[t]!r}"
        m.accept_token(t)
    return None


def run(
    *,
    model: str | Path | None = None,
    questions: Sequence[str] | None = None,
    db: str | Path | None = None,
    audit: str | Path | None = None,
    out: TextIO | None = None,
) -> int:
    """Ask the demo questions; 0 unless a guarantee broke (a probe was allowed) or setup failed.

    A refused statement is a correct outcome (the small default model does make mistakes the
    checker catches); it is reported as refused with its SQL and violations.
    """
    from ..ask.asker import Asker
    from .console import print_result, progress, token_progress

    out = out if out is not None else sys.stdout
    path = Path(db) if db is not None else chinook_path()
    try:
        asker = Asker(
            path,
            model=model,
            policy=DEMO_POLICY,
            audit=audit,
            examples=DEMO_EXAMPLES,
            max_tokens=128,
        )
        print(f"database  {path.name}: {len(asker.snapshot.schemas[0].tables)} tables", file=out)
        print(
            f"policy    select-only, table Employee denied "
            f"(fingerprint {asker.policy.fingerprint[:12]})",
            file=out,
        )
        with progress("loading model"):
            backend = asker.backend
        print(f"model     {backend.model_id}", file=out)
        store = asker.audit
        if store is not None:
            print(f"audit     {store!r}", file=out)
    except GridSQLError as exc:
        print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return 1
    failures = 0  # broken guarantees or setup errors: the exit status
    answered = refused = 0
    asked = list(questions or DEMO_QUESTIONS)
    for q in asked:
        print(f"\nQ: {q}", file=out)
        try:
            with token_progress(asker.max_tokens) as on_step:
                res = asker.ask(q, row_limit=10, on_step=on_step)
        except (PolicyViolation, StatementError, ExecutionError) as exc:
            # the pipeline worked: the statement was refused (or failed in a rolled-back
            # READ ONLY transaction); a weak model's mistake, never an unsafe execution
            refused += 1
            sql = getattr(exc, "sql", None)
            if sql:
                print(f"SQL (refused): {sql}", file=out)
            print(f"refused ({type(exc).__name__}): {exc}", file=out)
            continue
        except GridSQLError as exc:
            failures += 1
            print(f"error ({type(exc).__name__}): {exc}", file=out)
            continue
        answered += 1
        print_result(res, out)
    print(
        f"\n{answered}/{len(asked)} answered, {refused} refused (nothing executed for those)",
        file=out,
    )
    print(
        "\nforbidden continuations under this role (first byte string with no legal token):",
        file=out,
    )
    guide = asker.guide
    for probe in PROBES:
        where = blocked_prefix(guide, probe)
        status = f"blocked at {where}" if where is not None else "ALLOWED (bug)"
        print(f"  {probe.decode():28s} {status}", file=out)
        if where is None:
            failures += 1
    return 1 if failures else 0
