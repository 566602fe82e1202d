"""pandas front: ``grid_sql.read_sql_nl(question, con)`` → DataFrame.

Named after ``pandas.read_sql``, and accepting what it accepts as ``con`` (an SQLAlchemy
engine or connection, a DB-API connection, a URL string) plus grid-sql's own handles (an
:class:`~grid_sql.ask.asker.Asker`, a ``grid_sql.connect`` connection, an SQLAlchemy
``Session``). The frame carries its provenance in ``df.attrs``: ``sql`` (the statement that ran),
``audit_id`` (the audit record of how it was generated), ``question`` and ``truncated``.

Why the Asker is cached per connection target: building one loads the model and compiles the
role's grammar, which must not happen again on every call in a notebook loop. The cache is the
SQLAlchemy front's (keyed on the engine and the Asker options); a plain DB-API connection gets
its ``grid_sql.connect`` wrapper cached (the last few connections; use ``grid_sql.connect``
yourself to control the lifetime).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..errors import ConnectionConfigError
from . import dbapi
from .sqlalchemy import ask as sa_ask
from .sqlalchemy import engine_for_url, split_options

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas

    from ..ask.result import AskResult

__all__ = ["read_sql_nl"]

# id(driver connection) -> its wrapper. sqlite3 connections cannot be weakly referenced, so the
# cache holds the wrapper (hence the connection) strongly, bounded: the least recently used
# entry is dropped (not closed: the connection is the caller's) past _MAX_WRAPPED.
_WRAPPED: OrderedDict[int, dbapi.Connection] = OrderedDict()
_MAX_WRAPPED = 8
_LOCK = threading.Lock()


def _wrapped(raw: Any, asker_opts: dict[str, Any]) -> dbapi.Connection:
    """One ``grid_sql.connect`` wrapper (hence one Asker) per DB-API connection object."""
    with _LOCK:
        con = _WRAPPED.get(id(raw))
        if (
            con is None
            or con.closed
            or con.driver_connection is not raw
            or con._asker_opts != asker_opts
        ):
            con = dbapi.connect(raw, **asker_opts)
            _WRAPPED[id(raw)] = con
        _WRAPPED.move_to_end(id(raw))
        while len(_WRAPPED) > _MAX_WRAPPED:
            _WRAPPED.popitem(last=False)
        return con


def ask_any(con: Any, question: str, **options: Any) -> AskResult:
    """Answer ``question`` on any supported connection target (see the module docstring)."""
    from ..ask.asker import Asker

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
