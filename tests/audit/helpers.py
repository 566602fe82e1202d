"""Real record streams without a model: what the decode loop records, token by token.

A generation here is a real Chinook/Spider statement spelled greedily over the Qwen2
vocabulary, driven through a Matcher exactly as the loop drives it: at each step the exact
mask is filled, a singleton mask is a forced span (``forced_tokens``), otherwise the next
greedy token is "sampled", and the EOS tail closes the statement.
"""

from __future__ import annotations

import functools
from pathlib import Path

from grid_sql.audit import AuditLog, AuditRecord
from grid_sql.decode.records import StepKind, StepRecord, StopReason, mask_digest
from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, greedy_token_ids
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CHINOOK = SHARED / "data/chinook/Chinook_Sqlite.sqlite"
QWEN2 = SHARED / "data/tokenizers/ggml-vocab-qwen2.gguf"

# Real Chinook statements inside the demo role (select-only, Employee denied).
CHINOOK_SQL = [
    b"SELECT c.FirstName, c.LastName, SUM(i.Total) AS revenue FROM Customer c "
    b"JOIN Invoice i ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId "
    b"ORDER BY SUM(i.Total) DESC LIMIT 5;",
    b"SELECT Name FROM Artist ORDER BY Name LIMIT 10",
    b"SELECT COUNT(*) FROM Track WHERE Milliseconds > 300000",
    b"SELECT g.Name, COUNT(t.TrackId) FROM Genre g JOIN Track t ON t.GenreId = g.GenreId "
    b"GROUP BY g.Name ORDER BY 2 DESC",
    b"SELECT BillingCountry, AVG(Total) FROM Invoice GROUP BY BillingCountry HAVING COUNT(*) > 5",
    b'SELECT "Title" FROM "Album" WHERE "ArtistId" IN (SELECT ArtistId FROM Artist '
    b"WHERE Name LIKE 'A%')",
    b"select distinct Composer from track where Composer is not null limit 3;",
    b"SELECT MediaTypeId, MAX(UnitPrice), MIN(UnitPrice) FROM Track GROUP BY MediaTypeId",
    b"SELECT p.Name FROM Playlist p WHERE NOT EXISTS (SELECT 1 FROM PlaylistTrack pt "
    b"WHERE pt.PlaylistId = p.PlaylistId)",
    b"SELECT CustomerId, Email FROM Customer WHERE Country = 'Brazil' ORDER BY CustomerId",
    b"SELECT il.InvoiceId, SUM(il.UnitPrice * il.Quantity) FROM InvoiceLine il "
    b"GROUP BY il.InvoiceId LIMIT 7",
    b"SELECT a.Title, ar.Name FROM Album a LEFT JOIN Artist ar ON a.ArtistId = ar.ArtistId",
]


@functools.cache
def qwen2() -> Vocabulary:
    return Vocabulary.from_gguf(QWEN2)


@functools.cache
def chinook_role() -> tuple[Grammar, str, str]:
    """(role grammar, policy fingerprint, schema fingerprint) of the demo role."""
    snap = introspect(open_sqlite(CHINOOK))
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="audit tests"
    )
    policy = narrow(sqlite_baseline(snap), app, snap)
    grammar = role_grammar(Grammar.dialect("sqlite"), snap, policy)
    return grammar, policy.fingerprint, snap.fingerprint


@functools.cache
def chinook_guide() -> Guide:
    return Guide(chinook_role()[0], qwen2())


def record_generation(guide: Guide, sql: bytes) -> tuple[list[StepRecord], StopReason]:
    """The StepRecords the decode loop writes for a generation that spells ``sql``."""
    vocab = guide.vocab
    m = guide.matcher()
    buf = m.allocate_bitmask()
    out: list[StepRecord] = []

    def emit(token: int, kind: StepKind) -> None:
        cfg_hash = m.config_hash
        n, entries = guide.fill_bitmask(m.config, buf)
        out.append(
            StepRecord(
                step=len(out),
                config_hash=cfg_hash,
                entry_ids=tuple(entries),
                mask_digest=mask_digest(buf),
                token=token,
                allowed=n,
                blocked=vocab.size - n,
                kind=kind,
            )
        )
        m.accept_token(token)

    while True:
        rest = sql[len(m.text()) :]
        if not rest:
            break
        forced = m.forced_tokens()
        if forced:
            for t in forced:
                emit(t, StepKind.FORCED)
            continue
        emit(greedy_token_ids(vocab, rest, max_len=16)[0], StepKind.SAMPLED)
    assert m.text() == sql, (m.text(), sql)
    emit(vocab.eos_token_id, StepKind.EOS)
    return out, StopReason.EOS


SPIDER_DB = SHARED / "data/spider/database/concert_singer/concert_singer.sqlite"
SPIDER_DEV = SHARED / "data/spider/dev.json"


@functools.cache
def spider_sql(n: int = 4) -> tuple[bytes, ...]:
    """The first ``n`` Spider dev gold queries of concert_singer (every 4th, for variety)."""
    import json

    qs = [e["query"] for e in json.loads(SPIDER_DEV.read_text()) if e["db_id"] == "concert_singer"]
    return tuple(q.encode() for q in qs[::4][:n])


@functools.cache
def spider_role() -> tuple[Grammar, str, str]:
    """A select-only role on Spider's concert_singer (every table readable)."""
    snap = introspect(open_sqlite(SPIDER_DB))
    app = AppPolicy.from_mapping({"verbs": ["select"]}, origin="audit tests")
    policy = narrow(sqlite_baseline(snap), app, snap)
    grammar = role_grammar(Grammar.dialect("sqlite"), snap, policy)
    return grammar, policy.fingerprint, snap.fingerprint


@functools.cache
def spider_guide() -> Guide:
    return Guide(spider_role()[0], qwen2())


def seal_generation(
    guide: Guide,
    role: tuple[Grammar, str, str],
    sql: bytes,
    *,
    question: str = "",
    user: str = "analyst",
) -> AuditRecord:
    from grid_sql.audit.artifacts import refs_for

    grammar, policy_fp, schema_fp = role
    steps, stop = record_generation(guide, sql)
    log = AuditLog()
    log.extend(steps)
    return log.seal(
        stop_reason=stop,
        artifacts=refs_for(
            grammar, guide.vocab, policy=policy_fp, schema=schema_fp, model_id="greedy-spelling"
        ),
        final_sql=sql.decode(),
        question=question or f"spell {sql[:30]!r}",
        user=user,
        dialect="sqlite",
    )
