"""SQLAlchemy 2.x front: ``ask(session_or_engine_or_connection, question)`` and ``GridSession``.

::

    from sqlalchemy.orm import sessionmaker
    from grid_sql.front.sqlalchemy import GridSession

    Session = sessionmaker(engine, class_=GridSession, grid_options={"model": "smollm2-135m"})
    with Session() as session:
        result = session.ask("top customers by revenue")   # an AskResult

Why the Asker is cached per engine: the role's grammar, its compiled guide and the model depend
on the database (catalog and grants read once) and the Asker options, not on the session, so
every session of one engine reuses one Asker. The *statement* runs on the session's own
connection, inside its transaction (a SAVEPOINT on PostgreSQL/SQLite; see
``grid_sql.ask.execute``), so a question sees the session's flushed but uncommitted changes
and an opted-in write commits or rolls back with the session. MySQL/MariaDB are the exception:
there ``START TRANSACTION READ ONLY`` would implicitly commit the session's open transaction,
so the question runs on its own pooled connection and does not see uncommitted changes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..ask.aio import async_engine_of, run_off_loop, sync_target
from ..ask.result import AskResult
from ..dialect import Dialect
from ..errors import ConnectionConfigError
from ..schema.faults import redact
from ..schema.introspect import make_engine

if TYPE_CHECKING:  # pragma: no cover - typing only
    from sqlalchemy.engine import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ..ask.asker import Asker

__all__ = [
    "GridSession",
    "ask",
    "ask_async",
    "asker_for",
    "engine_for_url",
    "forget",
    "split_options",
]

# Asker(...) arguments that select a different Asker (model, policy, audit store, user); the
# rest (row_limit, timeout_s, allow_writes, max_tokens, repair, examples) are per question.
ASKER_OPTIONS = frozenset({"model", "policy", "audit", "user"})
_EXECUTION_OPTIONS = ("row_limit", "timeout_s", "allow_writes")

# An Asker holds its engine, so the cache keeps engines alive; forget(engine) drops them.
_ASKERS: dict[sa.Engine, dict[tuple[Any, ...], Asker]] = {}
_ENGINES: dict[str, sa.Engine] = {}
_LOCK = threading.RLock()


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Asker constructor options, per-question options)."""
    asker = {k: v for k, v in options.items() if k in ASKER_OPTIONS}
    per_question = {k: v for k, v in options.items() if k not in ASKER_OPTIONS}
    return asker, per_question


def _key(asker_opts: dict[str, Any]) -> tuple[Any, ...]:
    """Cache key of Asker options; mappings by content, other unhashable values by identity."""
    items = []
    for k in sorted(asker_opts):
        v = asker_opts[k]
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, dict | list):  # a policy mapping: by content, so a literal reuses
            v = ("json", json.dumps(v, sort_keys=True, default=str))
        try:
            hash(v)
        except TypeError:
            v = ("id", id(v))
        items.append((k, v))
    return tuple(items)


def asker_for(engine: sa.Engine, **asker_opts: Any) -> Asker:
    """The Asker for ``engine`` and these options, built once and reused for the process
    (until :func:`forget`)."""
    from ..ask.asker import Asker

    key = _key(asker_opts)
    with _LOCK:
        per_engine = _ASKERS.setdefault(engine, {})
        asker = per_engine.get(key)
        if asker is None:
            asker = Asker(engine, **asker_opts)
            per_engine[key] = asker
        return asker


def forget(engine: sa.Engine) -> None:
    """Drop the cached Askers of ``engine`` (e.g. after a GRANT/REVOKE or a schema change: the
    next question builds a new Asker, which reads the grants and the catalog again)."""
    with _LOCK:
        _ASKERS.pop(engine, None)


def engine_for_url(url: str | sa.URL | os.PathLike[str]) -> sa.Engine:
    """One engine per URL (or SQLite file path) for the process, so its Asker is reused."""
    text = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
    if isinstance(url, sa.URL):
        text = url.render_as_string(hide_password=False)
    if "://" not in text:
        path = Path(text)
        if not path.is_file():
            raise ConnectionConfigError(
                f"{redact(text, text)!r} is neither a database URL nor an existing SQLite file"
            )
        text = f"sqlite:///{path.resolve()}"
    with _LOCK:
        engine = _ENGINES.get(text)
        if engine is None:
            engine = make_engine(text)
            _ENGINES[text] = engine
        return engine


def _session_connection(session: Session) -> sa.Connection:
    try:
        return session.connection()
    except sa.exc.UnboundExecutionError as exc:
        raise ConnectionConfigError(
            "the session has no bind: create it with sessionmaker(engine, class_=GridSession) "
            "or Session(bind=engine)"
        ) from exc


def ask_on(asker: Asker, conn: sa.Connection, question: str, **options: Any) -> AskResult:
    """Generate with ``asker`` and execute on ``conn`` (in its current transaction).

    The generation (grammar, checker, repair, audit) is the Asker's; only the connection the
    checked statement runs on is the caller's.
    """
    from ..ask.execute import execute
    from ..audit.statement import execution_outcome

    t0 = time.perf_counter()
    gen_options = {k: v for k, v in options.items() if k not in _EXECUTION_OPTIONS}
    generated = asker.generate_sql(question, **gen_options)
    audit_id = generated.audit_id
    # the outcome (ran or not, rows, error class, duration) is chained to the record
    with execution_outcome(asker.audit if audit_id else None, audit_id) as outcome:
        ran = execute(
            conn,
            generated.sql,
            policy=asker.policy,
            allow_writes=bool(options.get("allow_writes", asker.allow_writes)),
            row_limit=int(options.get("row_limit", asker.row_limit)),
            timeout_s=float(options.get("timeout_s", asker.timeout_s)),
        )
        outcome.rowcount = ran.rowcount
    return AskResult.answered(generated, ran, t0)


def ask(target: Session | sa.Engine | sa.Connection, question: str, **options: Any) -> AskResult:
    """Answer ``question`` on an ORM ``Session``, an ``Engine`` or a ``Connection``.

    ``options``: ``model``, ``policy``, ``audit`` and ``user`` pick the cached Asker for the
    target's engine; the rest (``row_limit``, ``timeout_s``, ``allow_writes``, ``max_tokens``,
    ``repair``, ``examples``) apply to this question. On a session or a connection the
    statement runs on that connection, inside its transaction (except on MySQL/MariaDB, see
    the module docstring).
    """
    asker_opts, per_question = split_options(options)
    if isinstance(target, Session | sa.Connection):
        conn = _session_connection(target) if isinstance(target, Session) else target
        asker = asker_for(conn.engine, **asker_opts)
        found = Dialect.find(conn.dialect.name)
        if found is not None and found.explicit_begin:
            # START TRANSACTION READ ONLY would implicitly commit the caller's transaction, so
            # on MySQL/MariaDB the question runs on a connection of its own from the pool.
            return asker.ask(question, **per_question)
        return ask_on(asker, conn, question, **per_question)
    if isinstance(target, sa.Engine):
        return asker_for(target, **asker_opts).ask(question, **per_question)
    from ..ask.aio import is_async_bind

    if is_async_bind(target):
        raise ConnectionConfigError(
            f"{type(target).__qualname__} is asyncio: use `await ask_async(target, question)`"
        )
    raise ConnectionConfigError(
        f"cannot ask on a {type(target).__module__}.{type(target).__qualname__}: pass an "
        "SQLAlchemy Session, Engine or Connection"
    )


async def ask_async(target: Any, question: str, **options: Any) -> AskResult:
    """:func:`ask` for asyncio code: ``target`` may also be an ``AsyncSession``,
    ``AsyncEngine`` or ``AsyncConnection`` (``grid_sql.ask.aio``: the Asker of the engine's
    synchronous twin, the statement on a connection of its own). Generation and execution run
    off the event loop; concurrent calls share one model backend."""
    from ..ask.aio import is_async_bind

    if is_async_bind(target):
        return await ask_async_on(target, question, **options)
    return await run_off_loop(lambda: ask(target, question, **options))


class GridSession(Session):
    """An ORM ``Session`` with :meth:`ask`.

    ``grid_options`` (Asker settings and default per-question options) can be given to
    ``sessionmaker(..., class_=GridSession, grid_options={...})`` or to the constructor;
    keyword arguments of :meth:`ask` override them.
    """

    def __init__(
        self, bind: Any = None, *, grid_options: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        super().__init__(bind=bind, **kw)
        self.grid_options: dict[str, Any] = dict(grid_options or {})

    def ask(self, question: str, **options: Any) -> AskResult:
        """Answer ``question`` on this session's connection and transaction."""
        return ask(self, question, **{**self.grid_options, **options})


async def ask_async_on(target: object, question: str, **options: Any) -> AskResult:
    """``await ask_async(async_session_or_engine_or_connection, question)``: the cached Asker
    of the target's engine (see :func:`grid_sql.front.sqlalchemy.ask`; options as there),
    built and asked off the event loop."""
    engine = async_engine_of(target)
    asker_opts, per_question = split_options(options)

    def answer() -> AskResult:
        with _TWINS_LOCK:
            twin = _TWINS.get(engine)
            if twin is None:
                twin = _TWINS[engine] = engine_for_url(sync_target(engine))
        return asker_for(twin, **asker_opts).ask(question, **per_question)

    return await run_off_loop(answer)


def forget_async(engine: AsyncEngine) -> None:
    """Drop the synchronous twin of ``engine`` and its cached Askers."""
    with _TWINS_LOCK:
        twin = _TWINS.pop(engine, None)
    if twin is not None:
        forget(twin)


_TWINS: dict[AsyncEngine, Engine] = {}
_TWINS_LOCK = threading.Lock()
