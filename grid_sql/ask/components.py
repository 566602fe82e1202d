"""What an :class:`~grid_sql.ask.asker.Asker` is built from: the question check, the model
backend, the role grammar for a snapshot and policy, and the guide over a grammar (each cached
process-wide), and the types the Asker's signatures share.

Split out of :mod:`grid_sql.ask.asker` (which re-exports every name here) so that the
Asker's generation steps (``ask.steps``) use them without importing the Asker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..decode.options import BackendOptions
from ..decode.records import StepRecord
from ..errors import (
    ConnectionConfigError,
    GridSQLError,
    ModelError,
    QuestionError,
)
from ..grammar import Grammar
from ..mask.guide import Guide
from ..policy.config import AppPolicy
from ..policy.grammar import role_grammar
from ..policy.model import Policy
from ..policy.scopes import role_scopes
from ..schema.faults import redact
from ..schema.model import SchemaSnapshot

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..decode.backend import Backend

OnStep = Callable[[StepRecord], None]

MAX_QUESTION_CHARS = 4000
_GUIDES: dict[tuple[str, str], Guide] = {}
_GUIDES_LOCK = threading.Lock()
_ROLE_GRAMMARS: dict[tuple[str, str, str, bool, bool, bool], Grammar] = {}

if TYPE_CHECKING:  # pragma: no cover - an async bind opens its synchronous twin (.aio)
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

    DB = str | Path | sa.URL | Engine | Connection | AsyncEngine | AsyncConnection | AsyncSession
else:
    DB = str | Path | sa.URL | Engine | Connection

# the policy narrowing of an Asker without allow_writes
_SELECT_ONLY = AppPolicy.from_mapping({"verbs": ["select"]}, origin="no allow_writes")


def check_question(question: object) -> str:
    """The question stripped, or :class:`QuestionError` when empty or unreasonably long."""
    if not isinstance(question, str):
        raise QuestionError(f"a question must be a string, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise QuestionError("the question is empty")
    if not q.isascii() and any("\ud800" <= c <= "\udfff" for c in q):
        raise QuestionError("the question contains a lone surrogate (not valid Unicode text)")
    if len(q) > MAX_QUESTION_CHARS:
        raise QuestionError(
            f"the question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}"
        )
    return q


def _sqlite_file(db: str | Path) -> Path | None:
    """``db`` as an existing SQLite file path, when it is one rather than a URL."""
    text = str(db)
    if "://" in text:
        return None
    p = Path(text).expanduser()
    if p.is_file():
        return p
    if isinstance(db, Path) or text.endswith((".sqlite", ".sqlite3", ".db")):
        raise ConnectionConfigError(redact(f"SQLite database file not found: {p}", text))
    return None


def guide_for(grammar: Grammar, backend: Backend) -> Guide:
    """The compiled guide for (grammar, tokenizer), built once per process and shared."""
    vocab = backend.vocab
    key = (grammar.fingerprint, vocab.fingerprint)
    with _GUIDES_LOCK:
        guide = _GUIDES.get(key)
        if guide is None:
            guide = Guide(grammar, vocab)
            _GUIDES[key] = guide
        return guide


def role_grammar_for(
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    scopes: bool = False,
    bind_select_list: bool = False,
    nested_aggregates: bool = True,
) -> Grammar:
    """The role grammar of (schema, policy), compiled once per process and shared.

    Why: projection and LALR table construction take seconds, and every Asker (one per
    DB-API connection, notebook, request...) on the same role and schema needs the same one.
    ``scopes``: with scope-aware column lexicons (``docs/scope.md``) when the role has a
    column lexicon; ``bind_select_list``: with them, the select-list obligations too;
    ``nested_aggregates=False``: with them, no aggregate inside an aggregate's arguments (the
    repair round's narrowing, ``grammar/scope_aggregates.py``).
    """
    key = (
        snapshot.dialect,
        snapshot.fingerprint,
        policy.fingerprint,
        scopes,
        bind_select_list,
        nested_aggregates,
    )
    with _GUIDES_LOCK:
        hit = _ROLE_GRAMMARS.get(key)
    if hit is not None:
        return hit
    # CTE references are kept only where the scope rule holds them to bound CTE names
    grammar = role_grammar(Grammar.dialect(snapshot.dialect), snapshot, policy, ctes=scopes)
    if scopes and grammar.lexicon is not None and "COLUMN_NAME" in grammar.lexicon:
        scope = role_scopes(
            snapshot,
            bind_select_list=bind_select_list,
            policy=policy,
            nested_aggregates=nested_aggregates,
        )
        grammar = grammar.with_scopes(scope)
    elif scopes:  # no scope rule to hold CTE references to bound names: drop them
        grammar = role_grammar(Grammar.dialect(snapshot.dialect), snapshot, policy)
    with _GUIDES_LOCK:
        return _ROLE_GRAMMARS.setdefault(key, grammar)


def load_backend(model: str | Path | None, options: BackendOptions | None = None) -> Backend:
    """Resolve ``model`` (registry name, GGUF path, HF directory or hub id) and load it
    (``options``: context size, threads, GPU placement, ``grid_sql.decode.options``)."""
    from ..decode.backend import load_backend as _load

    try:
        return _load(model, options=options)
    except GridSQLError:
        raise
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"cannot load model {model!r}: {exc}") from exc
