"""A schema-conformance finding, a certain edit, and applying edits to the checked SQL.

The vocabulary that :mod:`grid_sql.policy.conformance` and the rules beside it
(``dialect_calls``, ``aggregates``, ``autofix``) share; apart so that none of them imports the
conformance pass to name a finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

FindingKind = Literal[
    "unknown_column",
    "unknown_table",
    "ambiguous_column",
    "unknown_function",
    "duplicate_alias",
    "aggregate_misuse",
]

_MAX_LISTED = 15


@dataclass(frozen=True)
class Finding:
    """One schema-conformance problem: ``message`` says what is wrong, ``fix`` what to write."""

    kind: FindingKind
    message: str
    fix: str | None = None
    table: str | None = None
    column: str | None = None
    position: int | None = None
    snippet: str | None = None
    # Text edits (start, end, replacement) on the checked SQL that carry out ``fix``; empty
    # when the fix is not mechanical (an ambiguous name, a function's arguments).
    edits: tuple[tuple[int, int, str], ...] = ()


def apply_edits(sql: str, edits: Iterable[tuple[int, int, str]]) -> str | None:
    """``sql`` with every edit applied (duplicates once); None if two edits overlap."""
    todo = sorted(set(edits), key=lambda e: (e[0], e[1]), reverse=True)
    if not todo:
        return None
    out = sql
    limit = len(sql) + 1
    for start, end, text in todo:
        if end > limit or start > end:
            return None
        out = out[:start] + text + out[end:]
        limit = start
    return out


@dataclass(frozen=True)
class CertainEdit:
    """A fix the schema alone decides (no guess): one text edit at a column reference.

    ``kind`` is ``requalify`` (``T2.name`` where only one FROM item in scope has ``name``) or
    ``equal_join`` (a bare name several FROM items have, all joined by ``=`` on it, so every
    candidate holds the same value). ``start``/``end`` are offsets into the checked SQL;
    ``old`` is the text there, ``new`` its replacement; ``reason`` says why in words.
    """

    start: int
    end: int
    old: str
    new: str
    reason: str
    kind: Literal["requalify", "equal_join"]
