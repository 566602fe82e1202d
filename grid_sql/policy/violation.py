"""A checker finding (:class:`Violation`) and the rules it can name (``ViolationKind``).

Apart from :mod:`grid_sql.policy.checker` so that the finding producers the checker calls
(``edges``, the scope and DML rules) can build findings without importing the checker back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Violation", "ViolationKind"]

ViolationKind = Literal[
    "parse_error",
    "multiple_statements",
    "statement_not_allowed",
    "table_not_allowed",
    "column_not_readable",
    "column_not_writable",
    "banned_function",
    "banned_clause",
    "banned_type",
    "unknown_table",
    "unknown_column",
    "ambiguous_column",
    "unknown_function",
    "duplicate_alias",
    "aggregate_misuse",
]


@dataclass(frozen=True)
class Violation:
    """One policy or schema problem in a statement.

    ``kind`` says which rule; ``table`` is ``schema.table`` when one is involved; ``position``
    is a 0-based character offset into the checked SQL (None when the reference was implicit,
    e.g. a column reached through ``*``); ``snippet`` is the offending text; ``why`` is the
    rule behind it; ``message`` is one self-contained sentence for a repair prompt; ``fix``,
    when the checker knows one, is a short concrete instruction ("replace `T2.name` with
    `T1.name`") — small models follow those better than a description of the problem.
    """

    kind: ViolationKind
    message: str
    table: str | None = None
    column: str | None = None
    verb: str | None = None
    position: int | None = None
    snippet: str | None = None
    why: str = ""
    fix: str | None = None
    # (start, end, replacement) text edits on the checked SQL that carry out ``fix``
    edits: tuple[tuple[int, int, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "table": self.table,
            "column": self.column,
            "verb": self.verb,
            "position": self.position,
            "snippet": self.snippet,
            "why": self.why,
            "fix": self.fix,
            "edits": [list(e) for e in self.edits],
        }
