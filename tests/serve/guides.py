"""Real guides for the serving tests: the packaged Chinook database, two select-only roles
(different policies, so different guide fingerprints) and the SmolLM2-135M vocabulary."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from grid_sql.data import chinook_path
from grid_sql.decode.models import fetch_model
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning, greedy_token_ids
from grid_sql.policy import AppPolicy, Policy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import SchemaSnapshot, introspect
from grid_sql.serve import GuideSpec

TEST_MODEL = "smollm2-135m"

# role -> app policy; the statements each role can say
ROLES = {
    "demo": {"verbs": ["select"], "tables": {"deny": ["Employee"]}},
    "artists": {"verbs": ["select"], "tables": {"allow": ["Artist", "Album"]}},
    "nothing": {"verbs": ["select"], "tables": {"allow": []}},
}
SQL = {
    "demo": [
        b"SELECT COUNT(*) FROM Track WHERE Milliseconds > 300000",
        b"SELECT c.FirstName, SUM(i.Total) FROM Customer c JOIN Invoice i "
        b"ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId",
    ],
    "artists": [
        b"SELECT a.Title, ar.Name FROM Album a JOIN Artist ar ON a.ArtistId = ar.ArtistId",
        b"SELECT Name FROM Artist ORDER BY Name LIMIT 10",
    ],
}


def gguf_path() -> str:
    return str(fetch_model(TEST_MODEL))


@functools.cache
def vocab() -> Vocabulary:
    # SmolLM2 lacks a few control/non-UTF-8 single-byte tokens; SQL never needs them.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        return Vocabulary.from_gguf(gguf_path())


@functools.cache
def snapshot() -> SchemaSnapshot:
    return introspect(open_sqlite(chinook_path()))


@functools.cache
def policy(role: str) -> Policy:
    snap = snapshot()
    app = AppPolicy.from_mapping(ROLES[role], origin=f"serve tests ({role})")
    return narrow(sqlite_baseline(snap), app, snap)


@functools.cache
def spec(role: str) -> GuideSpec:
    return GuideSpec.from_parts(policy(role), snapshot(), vocab())


def tokens(sql: bytes) -> list[int]:
    return greedy_token_ids(vocab(), sql)


def reference_masks(guide: Guide, toks: list[int]) -> list[np.ndarray]:
    """The single-request Matcher's mask before each token and after the last one."""
    m = guide.matcher()
    out = []
    for t in toks:
        buf = m.allocate_bitmask()
        m.fill_next_token_bitmask(buf)
        out.append(buf)
        m.accept_token(t)
    buf = m.allocate_bitmask()
    m.fill_next_token_bitmask(buf)
    out.append(buf)
    return out
