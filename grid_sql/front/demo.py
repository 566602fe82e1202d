"""``grid-sql demo``: the pipeline on the embedded default (Chinook SQLite).

What it shows today, end to end on real parts: introspect Chinook, derive a select-only
role policy (one table denied), compile it into the role's grammar (projection + schema
lexicon), compile that against a real tokenizer vocabulary, and walk a reference statement
token by token printing the exact mask size at each step; then show that forbidden
continuations (other verbs, the denied table, an unknown table) have no legal token.
The model-driven ``ask`` is not wired yet; this prints what a model would decode under.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..grammar import Grammar
from ..mask.guide import Guide
from ..mask.vocab import Vocabulary, greedy_token_ids
from ..policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from ..policy.grammar import role_grammar
from ..schema import introspect

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
DEFAULT_DB = SHARED / "data/chinook/Chinook_Sqlite.sqlite"
DEFAULT_VOCAB = SHARED / "data/tokenizers/ggml-vocab-qwen2.gguf"
REFERENCE = (
    b"SELECT c.FirstName, c.LastName, SUM(i.Total) AS revenue FROM Customer c "
    b"JOIN Invoice i ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId "
    b"ORDER BY SUM(i.Total) DESC LIMIT 5;"
)
PROBES = [
    b"DELETE FROM Customer",
    b"SELECT * FROM Employee",
    b"SELECT * FROM salaries",
    b"PRAGMA writable_schema",
]


def _tokenize(vocab: Vocabulary, text: bytes) -> list[int]:
    return greedy_token_ids(vocab, text, max_len=16)


def run(db: Path = DEFAULT_DB, vocab_path: Path = DEFAULT_VOCAB) -> int:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="grid-sql demo", description=__doc__)
    ap.add_argument("--db", type=Path, default=DEFAULT_DB)
    ap.add_argument("--vocab", type=Path, default=DEFAULT_VOCAB)
    a = ap.parse_args(argv)
    return run(a.db, a.vocab)
