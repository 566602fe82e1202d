"""Model-free RBAC speller: forbidden verbs, tables and columns cannot be spelled.

For a select-only Chinook role with one table denied, every reachable identifier position of
a set of statement contexts is probed: each forbidden table/column/verb, followed by a
separator, must leave the viable prefixes, and each allowed name (positive control) must
not. Masks are exact with respect to the parser (tests/mask), so a byte string the parser
rejects has no token path at all, whatever its tokenization. One position is also checked
at mask level over a real vocabulary, multi-token spellings included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary
from grid_sql.parser import is_viable_prefix
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TABLE_CONTEXTS = [b"SELECT * FROM ", b"SELECT a.Name FROM Artist a JOIN ", b"SELECT 1 FROM main."]
COLUMN_CONTEXTS = [b"SELECT ", b"SELECT Name FROM Artist WHERE ", b"SELECT a.", b"SELECT 1, "]
FORBIDDEN_TABLES = [b"Employee", b"employee", b'"Employee"', b"[Employee]", b"sqlite_master"]
FORBIDDEN_COLUMNS = [b"ReportsTo", b"HireDate", b'"BirthDate"']
FORBIDDEN_VERBS = [b"DELETE", b"DROP", b"INSERT", b"UPDATE", b"PRAGMA", b"ATTACH", b"CREATE"]
ALLOWED_TABLES = [b"Customer", b"invoice", b'"Track"']
ALLOWED_COLUMNS = [b"CustomerId", b"Total", b'"Name"']
SEPARATORS = [b" ", b",", b")", b";", b"\n"]


@pytest.fixture(scope="module")
def role() -> Grammar:
    engine = open_sqlite(DATA / "chinook/Chinook_Sqlite.sqlite")
    snap = introspect(engine)
    app = AppPolicy.from_mapping({"verbs": ["select"], "tables": {"deny": ["Employee"]}})
    return role_grammar(Grammar.dialect("sqlite"), snap, narrow(sqlite_baseline(snap), app, snap))


def _viable_with_some_separator(g: Grammar, prefix: bytes) -> bool:
    return any(is_viable_prefix(g, prefix + s) for s in SEPARATORS)


def test_speller_zero_bypasses_with_positive_controls(role: Grammar) -> None:
    probes = bypasses = controls = 0
    for ctx in TABLE_CONTEXTS:
        for name in FORBIDDEN_TABLES:
            probes += 1
            bypasses += _viable_with_some_separator(role, ctx + name)
        for name in ALLOWED_TABLES:
            controls += _viable_with_some_separator(role, ctx + name)
    for ctx in COLUMN_CONTEXTS:
        for name in FORBIDDEN_COLUMNS:
            probes += 1
            # a forbidden column may not be followed by what a column can be followed by
            bypasses += any(
                is_viable_prefix(role, ctx + name + s) for s in (b" FROM", b",", b" =", b")")
            )
        for name in ALLOWED_COLUMNS:
            controls += any(
                is_viable_prefix(role, ctx + name + s) for s in (b" FROM", b",", b" =", b")")
            )
    for verb in FORBIDDEN_VERBS:
        probes += 1
        bypasses += _viable_with_some_separator(role, verb)
    assert bypasses == 0
    assert probes == 3 * 5 + 4 * 3 + 7
    assert controls == 3 * 3 + 4 * 3  # every positive control is reachable: not vacuous


def test_mask_level_no_token_path_to_denied_table(role: Grammar) -> None:
    vocab = Vocabulary.from_gguf(DATA / "tokenizers/ggml-vocab-gpt-2.gguf")
    guide = Guide(role, vocab)
    m = guide.matcher()
    for t in (
        vocab.token_bytes.index(b"SELECT"),
        vocab.token_bytes.index(b" *"),
        vocab.token_bytes.index(b" FROM"),
    ):
        m.accept_token(t)
    assert not _token_path_spells(guide, m.config, b" Employee ")
    assert _token_path_spells(guide, m.config, b" Customer ")  # positive control


def _token_path_spells(guide: Guide, start: object, target: bytes) -> bool:
    """Whether some token sequence allowed by the masks spells ``target`` from ``start``."""
    vocab = guide.vocab
    frontier = [(start, b"")]
    while frontier:
        cfg, spelled = frontier.pop()
        ids, _, _ = guide.allowed_ids(cfg)  # type: ignore[arg-type]
        for t in ids.tolist():
            tb = vocab.token_bytes[t]
            nxt = spelled + tb
            if nxt.startswith(target):
                return True
            if target.startswith(nxt):
                c2 = guide.runtime.advance(cfg, tb)  # type: ignore[arg-type]
                assert c2 is not None
                frontier.append((c2, nxt))
    return False
