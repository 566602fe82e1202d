"""Async: ``await asker.ask_async(question)`` without blocking the event loop.

Why a thread executor and not an async model: generation is CPU/GPU-bound work inside the
model library, which has no async interface; what an async web service needs is that its
loop keeps serving other requests while a question is answered. So the blocking
``Asker.ask`` runs on the loop's default executor. Generations on one backend are
serialized by the backend's lock (:mod:`grid_sql.decode.serial`: a backend holds one KV
cache), so many concurrent ``ask_async`` calls queue for the model while their executions
(database round trips) overlap; the loop only awaits futures.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from ..dialect import Dialect
from ..errors import ConnectionConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from sqlalchemy.ext.asyncio import AsyncEngine


T = TypeVar("T")


async def run_off_loop(fn: Callable[[], T]) -> T:
    """``fn()`` on the running loop's default executor (with the caller's context vars)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    return await loop.run_in_executor(None, functools.partial(ctx.run, fn))


# ---------------------------------------------------------------- SQLAlchemy AsyncEngine
# Why a synchronous twin of an AsyncEngine: everything the Asker does with a connection
# (catalog and grant reads, the live-grants fingerprint, execution under a deadline) uses
# the DB-API connection directly: the SQLite progress handler and query_only pragma, the
# socket deadline that cuts a server gone silent, PyMySQL's KILL QUERY. Async drivers
# (aiosqlite, asyncpg, aiomysql, psycopg's async mode) expose none of that through
# SQLAlchemy's adapters, and generation has to leave the loop anyway. So an AsyncEngine
# (or an AsyncConnection / AsyncSession bound to one) is accepted by reading its URL,
# credentials included, and opening the same database, as the same role, with the
# synchronous driver of the same dialect; the work runs on the loop's executor
# (:func:`run_off_loop`). The statement therefore runs on a connection of its own: it does
# not see an AsyncSession's uncommitted changes.

# The synchronous twin of each async driver is the dialect's (``Dialect.sync_drivers``);
# this table (backend, async driver) -> URL drivername is derived from them for callers.
SYNC_DRIVERS = {
    (d.name, a): f"{d.name}+{s}"
    for d in map(Dialect.get, Dialect.names())
    for a, s in d.sync_drivers.items()
}


def is_async_bind(obj: object) -> bool:
    """An object of SQLAlchemy's asyncio extension (AsyncEngine, AsyncConnection,
    AsyncSession); checked by module so the extension is imported only when one is given."""
    return type(obj).__module__.startswith("sqlalchemy.ext.asyncio")


def async_engine_of(obj: object) -> AsyncEngine:
    """The AsyncEngine behind an AsyncEngine, AsyncConnection or bound AsyncSession."""
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

    if isinstance(obj, AsyncEngine):
        return obj
    if isinstance(obj, AsyncConnection):
        return obj.engine
    if isinstance(obj, AsyncSession):
        bind = obj.bind
        if bind is None:
            raise ConnectionConfigError(
                "the AsyncSession has no bind: create it with async_sessionmaker(engine)"
            )
        return bind if isinstance(bind, AsyncEngine) else bind.engine
    raise ConnectionConfigError(
        f"cannot use a {type(obj).__qualname__}: pass an AsyncEngine, AsyncConnection or "
        "AsyncSession"
    )


def sync_target(obj: object) -> sa.URL | Path:
    """What the Asker opens for an async bind: the SQLite file (so it gets the file rules:
    read-only when the policy only reads), else the URL with the synchronous driver."""
    url = async_engine_of(obj).url
    key = (url.get_backend_name(), url.get_driver_name())
    found = Dialect.find(key[0])  # MariaDB is the mysql dialect, its URLs stay mariadb+...
    sync = None if found is None else found.sync_drivers.get(key[1])
    driver = None if sync is None else f"{key[0]}+{sync}"
    if found is None or driver is None:
        known = ", ".join(f"{b}+{d}" for b, d in SYNC_DRIVERS)
        raise ConnectionConfigError(
            f"no synchronous driver known for {key[0]}+{key[1]} (async drivers supported: {known})"
        )
    if found.embedded:  # a file: open it as one
        db = url.database or ""
        if db in ("", ":memory:") or db.startswith("file::memory:") or "mode=memory" in db:
            raise ConnectionConfigError(
                "an in-memory SQLite database is private to its connection: give the "
                "AsyncEngine a database file"
            )
        return Path(db)
    return url.set(drivername=driver)
