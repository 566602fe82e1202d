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
from typing import TypeVar

T = TypeVar("T")


async def run_off_loop(fn: Callable[[], T]) -> T:
    """``fn()`` on the running loop's default executor (with the caller's context vars)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    return await loop.run_in_executor(None, functools.partial(ctx.run, fn))
