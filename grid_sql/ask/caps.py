"""Result caps by rows *and* bytes (issue #23 §6).

Why bytes too: ``row_limit`` alone lets a thousand rows of a multi-megabyte text or blob
column through; the byte cap bounds what a result costs the caller (and the prompt or the
JSON it is printed into). Sizes are estimated from the Python values (text in UTF-8 bytes,
bytes as they are, other scalars as their ``str``), not the wire format.
"""

from __future__ import annotations

import logging
from typing import Any

from ..dialect import Dialect
from ..errors import OptionError

DEFAULT_BYTE_LIMIT = 16 * 1024 * 1024
_BATCH = 256


def check_byte_limit(value: object) -> int:
    """``value`` as a byte cap (an int >= 0), or :class:`OptionError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OptionError(f"byte_limit must be an integer >= 0, got {value!r}")
    return value


def value_bytes(value: Any) -> int:
    """The estimated size of one cell."""
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return len(str(value))


def fetch_capped(
    result: Any, row_limit: int, byte_limit: int
) -> tuple[list[tuple[Any, ...]], bool]:
    """At most ``row_limit`` rows whose cells total at most ``byte_limit`` bytes, and whether
    the result had more (a row past either cap was seen). Reads at most one row past a cap."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while True:
        batch = result.fetchmany(min(_BATCH, row_limit + 1 - len(rows)))
        if not batch:
            return rows, False
        for r in batch:
            row = tuple(r)
            size += sum(value_bytes(v) for v in row)
            if len(rows) >= row_limit or size > byte_limit:
                return rows, True
            rows.append(row)


def stop_reading(conn: Any, dialect: str) -> bool:
    """Past a cap on MySQL/MariaDB, kill the query before its result is closed.

    Why: an unbuffered (server-side) PyMySQL cursor is drained to its last row when closed,
    so a capped read of a huge result still transferred all of it (4 M rows: 4.6 s). ``KILL
    QUERY`` from a second connection of the same engine (a user may kill its own threads)
    ends the stream at once. Skipped where the engine has a single connection (StaticPool:
    the DB-API front over a caller's connection); the drain then happens as before.
    Returns whether the query was killed."""
    found = Dialect.find(dialect)
    if found is None or not found.kill_capped_reads:
        return False
    import sqlalchemy as sa
    from sqlalchemy.pool import AssertionPool, SingletonThreadPool, StaticPool

    raw = conn.connection.dbapi_connection
    thread_id = getattr(raw, "thread_id", None)
    engine = conn.engine
    if not callable(thread_id) or isinstance(
        engine.pool, StaticPool | SingletonThreadPool | AssertionPool
    ):
        return False
    try:
        with engine.connect() as other:
            other.exec_driver_sql(f"KILL QUERY {int(thread_id())}")
    except sa.exc.SQLAlchemyError:  # no second connection: drain as before
        return False
    return True


class _DropCursorCloseError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Error closing cursor"


def close_result(conn: Any, result: Any, dialect: str, capped: bool) -> None:
    """Close ``result``; past a cap on MySQL/MariaDB, kill the query first
    (:func:`stop_reading`). The drain then ends with "Query execution was interrupted", which
    SQLAlchemy swallows and logs as an error with a traceback: an expected outcome here, so
    that one record is dropped from the pool's logger while the result closes."""
    if not (capped and stop_reading(conn, dialect)):
        result.close()
        return
    logger = conn.engine.pool.logger
    quiet = _DropCursorCloseError()
    logger.addFilter(quiet)
    try:
        result.close()
    finally:
        logger.removeFilter(quiet)
