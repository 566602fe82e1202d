"""Result caps by rows *and* bytes (issue #23 §6).

Why bytes too: ``row_limit`` alone lets a thousand rows of a multi-megabyte text or blob
column through; the byte cap bounds what a result costs the caller (and the prompt or the
JSON it is printed into). Sizes are estimated from the Python values (text in UTF-8 bytes,
bytes as they are, other scalars as their ``str``), not the wire format.
"""

from __future__ import annotations

from typing import Any

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
