"""The LALR tables' rows in the shapes the parser's Python hot path reads fastest.

Split out of ``parser/incremental.py``. Rows are converted on first use and shared by every
runtime of grammars with the same productions (``rows_of``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..grammar.tables import LALRTables

__all__ = ["RowGroups", "Rows", "TableRows", "rows_of"]


class Rows(dict[int, list[int]]):
    """Rows of a table as Python lists, converted on first access (``rows[state]``).

    A role grammar has ~550 states, and converting all of them (action, goto and the
    non-error terminals per state) cost ~2.5-5 ms of every re-specialization, while a
    request touches a few dozen states. Indexing is a dict lookup: as fast as a list's
    on the hot path once a row exists. Concurrent first accesses compute equal rows.
    """

    __slots__ = ("_arr",)

    def __init__(self, arr: np.ndarray) -> None:
        super().__init__()
        self._arr = arr

    def __missing__(self, state: int) -> list[int]:
        if not 0 <= state < len(self._arr):  # a list would raise too; never grow the dict
            raise IndexError(f"state {state} out of range ({len(self._arr)} states)")
        row: list[int] = self._arr[state].tolist()
        self[state] = row
        return row

    def __len__(self) -> int:
        return len(self._arr)

    def __iter__(self) -> Iterator[list[int]]:  # type: ignore[override]
        return (self[s] for s in range(len(self._arr)))


@dataclass(frozen=True, slots=True)
class TableRows:
    action: Rows
    goto: Rows
    rule_lhs: list[int]
    rule_len: list[int]
    row_groups: RowGroups


_ROWS_LOCK = threading.Lock()


def rows_of(tables: LALRTables) -> TableRows:
    """The lazily converted rows of ``tables``, kept in ``tables.derived``: the tables memo
    (grammar/tables.py) hands the same analysis to every grammar with the same productions
    (a role's L2 and L3 grammars, a repeated role), so their runtimes share the rows
    converted so far."""
    with _ROWS_LOCK:
        rows = tables.derived.get("parser_rows")
        if rows is None:
            rows = TableRows(
                Rows(tables.action),
                Rows(tables.goto),
                tables.rule_lhs.tolist(),
                tables.rule_len.tolist(),
                RowGroups(tables.action, tables.n_terminals),
            )
            tables.derived["parser_rows"] = rows
    assert isinstance(rows, TableRows)
    return rows


class RowGroups(dict[int, tuple[int, tuple[tuple[int, int], ...]]]):
    """Per state, its terminals (``$END`` excluded) as bitmasks grouped by action: ``(shift
    mask, ((reduce action, mask), ...))``, on first use. ``_lalr_mask`` simulates terminals
    together: with the groups it splits a set of terminals with a few big-int ANDs instead
    of one Python step per terminal (issue #26: a new node's mask was ~10 % of a cold
    reserve)."""

    __slots__ = ("_arr",)

    def __init__(self, action: np.ndarray, n_terminals: int) -> None:
        super().__init__()
        self._arr = action[:, :n_terminals]

    def __missing__(self, state: int) -> tuple[int, tuple[tuple[int, int], ...]]:
        if not 0 <= state < len(self._arr):
            raise IndexError(f"state {state} out of range ({len(self._arr)} states)")
        row = self._arr[state]
        shift = _mask(row > 0)
        reduces = tuple((int(a), _mask(row == a)) for a in sorted(set(row[row < 0].tolist())))
        got = (shift, reduces)
        self[state] = got
        return got


def _mask(flags: np.ndarray) -> int:
    """The bitmask of the true positions of a boolean row."""
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")
