"""pandas front: ``grid_sql.read_sql_nl(question, con)`` → DataFrame.

Named after ``pandas.read_sql``, and accepting what it accepts as ``con`` (an SQLAlchemy
engine or connection, a DB-API connection, a URL string) plus grid-sql's own handles (an
:class:`~grid_sql.front.ask.Asker`, a ``grid_sql.connect`` connection, an SQLAlchemy
``Session``). The frame carries its provenance in ``df.attrs``: ``sql`` (the statement that ran),
``audit_id`` (the audit record of how it was generated), ``question`` and ``truncated``.

Why the Asker is cached per connection target: building one loads the model and compiles the
role's grammar, which must not happen again on every call in a notebook loop. The cache is the
SQLAlchemy front's (keyed on the engine and the Asker options); a plain DB-API connection gets
its ``grid_sql.connect`` wrapper cached for as long as the connection object lives.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..errors import ConnectionConfigError
from . import dbapi
from .sqlalchemy import ask as sa_ask
from .sqlalchemy import engine_for_url, split_options

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas

    from .result import AskResult

__all__ = ["read_sql_nl"]

_WRAPPED: weakref.WeakKeyDictionary[Any, dbapi.Connection] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _wrapped(raw: Any, asker_opts: dict[str, Any]) -> dbapi.Connection:
    """One ``grid_sql.connect`` wrapper (hence one Asker) per live DB-API connection."""
    with _LOCK:
        try:
            con = _WRAPPED.get(raw)
        except TypeError as exc:  # not weak-referenceable
            raise ConnectionConfigError(
                f"read_sql_nl cannot use a {type(raw).__name__} as con: pass an SQLAlchemy "
                "engine/connection/session, a URL, or grid_sql.connect(...)"
            ) from exc
        if con is None or con.closed or con._asker_opts != asker_opts:
            con = dbapi.connect(raw, **asker_opts)
            _WRAPPED[raw] = con
        return con


def ask_any(con: Any, question: str, **options: Any) -> AskResult:
    """Answer ``question`` on any supported connection target (see the module docstring)."""
    from .ask import Asker

    if isinstance(con, Asker):
        return con.ask(question, **options)
    if isinstance(con, dbapi.Connection):
        return con.ask(question, **options)
    if isinstance(con, Session | sa.Engine | sa.Connection):
        return sa_ask(con, question, **options)
    if isinstance(con, str | sa.URL | os.PathLike):
        return sa_ask(engine_for_url(con), question, **options)
    if hasattr(con, "cursor") and hasattr(con, "commit"):
        asker_opts, ask_opts = split_options(options)
        return _wrapped(con, asker_opts).ask(question, **ask_opts)
    raise ConnectionConfigError(
        f"read_sql_nl cannot use a {type(con).__module__}.{type(con).__qualname__} as con: pass "
        "an SQLAlchemy engine/connection/session, a DB-API connection, a URL or an Asker"
    )


def read_sql_nl(question: str, con: Any, **options: Any) -> pandas.DataFrame:
    """Answer ``question`` on ``con`` and return the rows as a DataFrame.

    ``options``: ``model``, ``policy``, ``audit`` and ``user`` choose the Asker (built once per
    connection target and reused); the rest (``row_limit``, ``timeout_s``, ``allow_writes``,
    ``max_tokens``, ``repair``, ``examples``) apply to this question.
    ``df.attrs`` holds ``sql``, ``audit_id``, ``question`` and ``truncated``. Failures raise the
    Asker's typed errors; nothing is executed then.
    """
    return ask_any(con, question, **options).to_dataframe()
