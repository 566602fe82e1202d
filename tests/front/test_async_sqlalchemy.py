"""SQLAlchemy's asyncio objects (#27 §3) with the real SmolLM2 model: an ``AsyncEngine``,
``AsyncConnection`` or ``AsyncSession`` is accepted where an engine or session is (aiosqlite
on SQLite, asyncpg on PostgreSQL, aiomysql on MariaDB), and concurrent asks on one backend
leave the event loop responsive (a loop-latency probe)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa

from grid_sql.ask.aio import sync_target
from grid_sql.ask.asker import Asker
from grid_sql.ask.result import AskResult
from grid_sql.errors import ConnectionConfigError
from grid_sql.front.sqlalchemy import ask, ask_async, forget_async

from .conftest import Q_1959, Q_GENRES, Q_MEDIA, few_shot

pytest.importorskip("greenlet")
pytest.importorskip("aiosqlite")
from sqlalchemy.ext.asyncio import (  # noqa: E402 - needs the optional drivers above
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

T = TypeVar("T")
TICK_S = 0.02


async def _probed(work: Callable[[], Awaitable[T]]) -> tuple[T, float, int]:
    """``await work()`` while a ticker measures the loop: (result, longest gap, ticks)."""
    done = asyncio.Event()
    worst, ticks = 0.0, 0

    async def ticker() -> None:
        nonlocal worst, ticks
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            worst, last, ticks = max(worst, now - last), now, ticks + 1

    tick = asyncio.create_task(ticker())
    try:
        return await work(), worst, ticks
    finally:
        done.set()
        await tick


def test_async_sqlite_session_engine_and_connection(
    chinook_copy: Path, opts: dict[str, Any]
) -> None:
    url = f"sqlite+aiosqlite:///{chinook_copy}"
    engine = create_async_engine(url)
    questions = [Q_GENRES, Q_MEDIA] * 2

    async def main() -> tuple[list[AskResult], float, int, int, AskResult]:
        async with async_sessionmaker(engine)() as session:

            async def concurrent() -> list[AskResult]:
                return list(
                    await asyncio.gather(*(ask_async(session, q, **opts) for q in questions))
                )

            results, worst, ticks = await _probed(concurrent)
            # the caller's session stays usable, on the async driver
            genres = (await session.execute(sa.text("SELECT count(*) FROM Genre"))).scalar_one()
        async with engine.connect() as conn:
            on_conn = await ask_async(conn, Q_GENRES, **opts)
        return results, worst, ticks, genres, on_conn

    t0 = time.perf_counter()
    results, worst, ticks, genres, on_conn = asyncio.run(main())
    elapsed = time.perf_counter() - t0
    print(
        f"\n4 concurrent ask_async on an AsyncSession: {elapsed:.1f} s, longest gap {worst:.3f} s"
    )
    assert [r.question for r in results] == questions
    by_q: dict[str, set[str]] = {}
    for r in results:
        by_q.setdefault(r.question, set()).add(r.sql)
    assert all(len(s) == 1 for s in by_q.values()), by_q  # greedy: the same SQL each time
    genre_rows = next(r for r in results if r.question == Q_GENRES).rows
    assert len(genre_rows) == genres == 25  # the answer is Chinook's 25 genres, all of them
    assert on_conn.sql == next(r.sql for r in results if r.question == Q_GENRES)
    # A loop blocked by generation would stall for a whole ask (elapsed / 4 here); the bound is
    # relative so that a loaded host (CI beside other jobs) does not fail a correct loop.
    assert worst < elapsed / (2 * len(questions)), (worst, ticks, elapsed)
    assert ticks >= elapsed / TICK_S * 0.3, (worst, ticks, elapsed)
    asyncio.run(engine.dispose())
    forget_async(engine)


def test_asker_takes_an_async_engine(chinook_copy: Path, opts: dict[str, Any]) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{chinook_copy}")
    asker = Asker(engine, **opts)
    assert sync_target(engine) == chinook_copy  # the file itself: SQLite's file rules apply
    t0 = time.perf_counter()
    res, worst, _ = asyncio.run(_probed(lambda: asker.ask_async(Q_MEDIA)))
    elapsed = time.perf_counter() - t0
    assert [r[0] for r in res.rows] == [
        "MPEG audio file",
        "Protected AAC audio file",
        "Protected MPEG-4 video file",
        "Purchased AAC audio file",
        "AAC audio file",
    ]
    assert worst < elapsed / 4, (worst, elapsed)  # on the loop, the ask would be one gap


def test_async_binds_that_cannot_be_used_are_config_errors(opts: dict[str, Any]) -> None:
    memory = create_async_engine("sqlite+aiosqlite://")
    with pytest.raises(ConnectionConfigError, match="in-memory"):
        Asker(memory, **opts)
    with pytest.raises(ConnectionConfigError, match="await ask_async"):
        ask(AsyncSession(memory), Q_GENRES)  # type: ignore[arg-type]
    with pytest.raises(ConnectionConfigError, match="no bind"):
        asyncio.run(ask_async(AsyncSession(), Q_GENRES))
    with pytest.raises(ConnectionConfigError, match="AsyncEngine, AsyncConnection or"):
        sync_target(object())


def test_the_twin_is_the_same_server_and_role_with_the_sync_driver() -> None:
    pytest.importorskip("asyncpg")
    pg = create_async_engine("postgresql+asyncpg://role:s3cret@db.example:5433/app")
    twin = sync_target(pg)
    assert isinstance(twin, sa.URL)
    assert twin.render_as_string(hide_password=False) == (
        "postgresql+psycopg://role:s3cret@db.example:5433/app"
    )


@pytest.mark.parametrize(("fixture", "driver"), [("pg_url", "asyncpg"), ("my_url", "aiomysql")])
def test_async_session_on_a_server(
    fixture: str, driver: str, request: pytest.FixtureRequest, backend: Any, audit_db: Path
) -> None:
    pytest.importorskip(driver)
    url: sa.URL = request.getfixturevalue(fixture)
    engine = create_async_engine(url.set(drivername=f"{url.get_backend_name()}+{driver}"))
    grid = {"model": backend, "audit": audit_db, "examples": few_shot(), "max_tokens": 32}

    async def main() -> tuple[AskResult, int]:
        async with AsyncSession(engine) as session:
            result = await ask_async(session, Q_1959, **grid)
            n = (await session.execute(sa.text("SELECT count(*) FROM album"))).scalar_one()
        await engine.dispose()
        return result, n

    result, n = asyncio.run(main())
    forget_async(engine)
    assert n == 4 and result.audit_id
    assert sorted(r[0] for r in result.rows) == ["Kind of Blue", "Mingus Ah Um"]
