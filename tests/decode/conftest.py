"""Fixtures for the decode tests: the real SmolLM2-135M (fetched through the registry, cached
by ``make setup``), the packaged Chinook database and a select-only role grammar on it."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.data import chinook_path
from grid_sql.decode.models import fetch_model
from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, VocabularyIncompleteWarning
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

TEST_MODEL = "smollm2-135m"
SYSTEM = (
    "You translate questions into one SQLite SELECT statement and output only the SQL. "
    "Tables: Customer(CustomerId, FirstName, LastName, Country), "
    "Invoice(InvoiceId, CustomerId, InvoiceDate, Total), Artist(ArtistId, Name), "
    "Album(AlbumId, Title, ArtistId)."
)
QUESTIONS = ["How many customers are there?", "List the names of all artists."]


def messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return fetch_model(TEST_MODEL)


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_gguf: Path) -> Vocabulary:
    # SmolLM2 lacks a few control/non-UTF-8 single-byte tokens; SQL over UTF-8 never needs them.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        return Vocabulary.from_gguf(smollm2_gguf)


@pytest.fixture(scope="session")
def chinook_engine() -> Iterator[sa.Engine]:
    engine = open_sqlite(chinook_path())
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def chinook_grammar(chinook_engine: sa.Engine) -> Grammar:
    """Select-only role on Chinook with one table denied (the demo's policy)."""
    snap = introspect(chinook_engine)
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="decode tests"
    )
    return role_grammar(Grammar.dialect("sqlite"), snap, narrow(sqlite_baseline(snap), app, snap))


@pytest.fixture(scope="session")
def chinook_guide(chinook_grammar: Grammar, smollm2_vocab: Vocabulary) -> Guide:
    return Guide(chinook_grammar, smollm2_vocab)
