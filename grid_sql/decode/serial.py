"""One lock per model backend, shared by everything that generates with it.

Why: a backend holds one KV cache and one position (``Backend.prefill``/``step``), so two
generations interleaved on it would corrupt each other. Each :class:`~grid_sql.ask.asker.Asker`
already serializes its own generations, but several Askers (one per connection, notebook,
request, or ``ask_async`` caller) may share one loaded model; this lock is what they share.
Kept outside the backend classes so it covers every backend, including ones written
elsewhere, without their cooperation.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def backend_lock(backend: object) -> threading.RLock:
    """The re-entrant lock of ``backend`` (created on first use, dropped with the backend)."""
    with _GUARD:
        lock = _LOCKS.get(backend)
        if lock is None:
            lock = _LOCKS[backend] = threading.RLock()
        return lock
