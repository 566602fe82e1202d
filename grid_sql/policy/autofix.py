"""Deterministic schema-conformance fixes, applied before (or instead of) the LLM repair round.

Why: the largest class of refusals left after the checker-guided repair round is a real
column read through the wrong alias (``T2.name`` where only ``T1``'s table has ``name``),
mostly in a SELECT list, where no left-to-right mask can help (paper Proposition 11). The
conformance checker already knows the fix, and a small model given it in a repair prompt
applies it badly (bench/RESULTS-spider.md §5). A fix that the schema alone decides needs no
model and cannot invent anything.

Two fixes come from the schema (:class:`~grid_sql.policy.conformance.CertainEdit`):

* ``requalify`` — ``q.c`` whose table lacks ``c`` while exactly one other FROM item visible
  at that point (this level or an enclosing one, by the checker's own resolution rules) has
  ``c``, both are FROM items of the same level (never a new or lost correlation), and every
  FROM item's columns are known;
* ``equal_join`` — an ambiguous bare ``c`` whose candidates are all joined by ``=`` on ``c``
  (inner joins only, one declared type), so that every candidate holds the same value; a
  derived table counts when it passes a base table's ``c`` through unchanged (its type is
  that column's: ``Resolver.output_type``), and the qualifier written is a real table's.

and one fix that SQL's own rules decide:

* ``to_having`` — an aggregate condition ANDed into the WHERE of a query with a GROUP BY
  moves to its HAVING (:func:`grid_sql.policy.aggregates.having_edits`; the engine refuses
  the statement as written, and the per-group filter is its only valid reading).

Everything else (close spellings, several candidates, unknown tables or aliases, functions,
column rights, aggregates with no GROUP BY) is left to the repair round. Edits are exact text
replacements at token positions, so the model's formatting is kept; SQL is never regenerated
through sqlglot. The fixed statement must still be a sentence of the role's grammar (the
language the mask enforced) and pass the full checker (policy + conformance); otherwise
nothing is applied.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from grid_sql.grammar.ir import Grammar
from grid_sql.parser.incremental import accepts
from grid_sql.policy.checker import Checker, Violation
from grid_sql.policy.conformance import CertainEdit, apply_edits, certain_fixes

FIXABLE_KINDS = frozenset({"unknown_column", "ambiguous_column"})
EditKind = Literal["requalify", "equal_join", "to_having"]


@dataclass(frozen=True)
class FixEdit:
    """One applied edit: ``old`` at ``[start, end)`` of the generated SQL became ``new``."""

    start: int
    end: int
    old: str
    new: str
    kind: EditKind
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "old": self.old,
            "new": self.new,
            "kind": self.kind,
            "reason": self.reason,
        }

    def as_list(self) -> list[Any]:
        """Compact canonical form for the audit seal (integers and strings only)."""
        return [self.start, self.end, self.old, self.new, self.kind]

    def __str__(self) -> str:
        return f"`{self.old}` -> `{self.new}` at {self.start} ({self.reason})"


@dataclass(frozen=True)
class AutofixResult:
    """What :func:`autofix` did with one statement.

    ``sql`` is the statement as generated; ``fixed`` the statement with ``edits`` applied, or
    None when nothing was applied. ``complete``: ``fixed`` passes the full checker (it may be
    executed). ``remaining``: the violations left (of ``fixed`` when edits were kept, else of
    ``sql``). ``dropped``: why proposed edits were not kept (None when none were proposed or
    they were kept).
    """

    sql: str
    fixed: str | None = None
    edits: tuple[FixEdit, ...] = ()
    complete: bool = False
    remaining: tuple[Violation, ...] = ()
    dropped: str | None = None
    proposed: tuple[FixEdit, ...] = field(default=(), repr=False)

    @property
    def applied(self) -> bool:
        return self.fixed is not None

    def describe(self) -> str:
        if not self.edits:
            return "autofix: nothing applied" + (f" ({self.dropped})" if self.dropped else "")
        head = "autofix: " + ("fixed" if self.complete else "partly fixed")
        return head + "".join(f"\n  {e}" for e in self.edits)


def proposed_edits(sql: str, checker: Checker) -> list[FixEdit]:
    """The certain fixes of ``sql``'s column findings, by the checker's own parse of it."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        stmt = checker.parse_query(sql)  # the checker's own reading (SQLite `"word"` strings)
        if stmt is None:
            return []
        found: list[CertainEdit] = certain_fixes(stmt, sql, checker.schema_view)
    except RecursionError:
        return []
    finally:
        logger.setLevel(level)
    out: dict[tuple[int, int], FixEdit] = {}
    for c in found:
        out.setdefault((c.start, c.end), FixEdit(c.start, c.end, c.old, c.new, c.kind, c.reason))
    return sorted(out.values(), key=lambda e: e.start)


def _signature(v: Violation) -> tuple[Any, ...]:
    return (v.kind, v.table, v.column, v.verb, v.snippet)


def autofix(
    sql: str,
    checker: Checker,
    grammar: Grammar | None,
    violations: Sequence[Violation] | None = None,
    *,
    partial: bool = True,
) -> AutofixResult:
    """Apply the fixes the schema alone decides to ``sql``'s violations, if they hold up.

    ``violations``: the checker's verdict on ``sql`` (computed when None). ``grammar``: the
    role grammar the statement was generated under; the fixed statement must be a sentence
    of it (None skips that test, for statements that did not come from a guide).

    When every violation has a certain fix, the fixed statement must pass the full checker,
    else nothing is applied. With ``partial``, when only some have one, the fixes are kept if
    the statement stays in the language and the violations left are exactly the unfixed ones
    (nothing new); the result is then not ``complete`` and goes to the repair round.
    """
    found = list(checker.check(sql) if violations is None else violations)
    if not found:
        return AutofixResult(sql, complete=False, remaining=())
    edits = proposed_edits(sql, checker)
    covered = {e.start for e in edits}
    fixable = [v for v in found if v.kind in FIXABLE_KINDS and v.position in covered]
    # only edits answering a reported violation (a certain fix is computed per finding)
    wanted = {v.position for v in fixable}
    edits = [e for e in edits if e.start in wanted]
    moves = [v for v in found if v.kind == "aggregate_misuse" and v.edits]
    seen: set[tuple[int, int, str]] = set()
    for v in moves:
        for start, end, new in v.edits:
            if (start, end, new) not in seen:
                seen.add((start, end, new))
                reason = "an aggregate condition belongs in HAVING of a grouped query"
                edits.append(FixEdit(start, end, sql[start:end], new, "to_having", reason))
    fixable += moves
    edits.sort(key=lambda e: (e.start, e.end))
    if not edits:
        return AutofixResult(sql, remaining=tuple(found))
    complete = len(fixable) == len(found)
    if not complete and not partial:
        return AutofixResult(
            sql, remaining=tuple(found), dropped="other violations remain", proposed=tuple(edits)
        )
    fixed = apply_edits(sql, ((e.start, e.end, e.new) for e in edits))
    if fixed is None:
        return AutofixResult(
            sql, remaining=tuple(found), dropped="edits overlap", proposed=tuple(edits)
        )
    if grammar is not None and not accepts(grammar, fixed.encode("utf-8")):
        return AutofixResult(
            sql,
            remaining=tuple(found),
            dropped="the fixed statement is outside the role's grammar",
            proposed=tuple(edits),
        )
    after = checker.check(fixed)
    if complete and after:
        return AutofixResult(
            sql,
            remaining=tuple(found),
            dropped="the fixed statement fails the checker: " + after[0].message,
            proposed=tuple(edits),
        )
    if not complete:
        left = Counter(_signature(v) for v in found if v not in fixable)
        if not after or Counter(_signature(v) for v in after) - left:
            # something new (or, oddly, nothing at all) came up: not the expected partial fix
            return AutofixResult(
                sql,
                remaining=tuple(found),
                dropped="the partly fixed statement has new violations",
                proposed=tuple(edits),
            )
    return AutofixResult(
        sql,
        fixed=fixed,
        edits=tuple(edits),
        complete=complete,
        remaining=tuple(after),
        proposed=tuple(edits),
    )


def replay_edits(sql: str, edits: Sequence[Sequence[Any]]) -> str | None:
    """``sql`` with sealed edits ``[start, end, old, new, kind]`` applied, or None when an edit
    does not fit (its ``old`` is not the text at its position, the edits overlap, or an edit
    does more than change which FROM item a column is read through or, for ``to_having``,
    move conditions from a WHERE clause to a HAVING clause)."""
    todo: list[tuple[int, int, str]] = []
    for e in edits:
        if len(e) != 5:
            return None
        start, end, old, new, kind = e
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            return None
        if sql[start:end] != old or kind not in ("requalify", "equal_join", "to_having"):
            return None
        if kind == "to_having":
            if not _having_shape(old, new):
                return None
            todo.append((start, end, new))
            continue
        col = old.rsplit(".", 1)[-1] if kind == "requalify" else old
        if "." not in new or not new.endswith("." + col.strip()):
            return None  # only the qualifier may change
        todo.append((start, end, new))
    if not todo:
        return None
    out = apply_edits(sql, todo)
    if out is not None and any(e[4] == "to_having" for e in edits) and not _only_moved(sql, out):
        return None
    return out


_WHERE = re.compile(r"\s*WHERE\b", re.IGNORECASE)
_HEAD = re.compile(r"\s+(HAVING|AND)\s", re.IGNORECASE)
_GLUE = frozenset({"WHERE", "HAVING", "AND"})


def _having_shape(old: str, new: str) -> bool:
    """A sealed ``to_having`` edit is a WHERE clause rewritten (or removed) or a HAVING
    condition appended; nothing else."""
    if _WHERE.match(old):
        return new == "" or _WHERE.match(new) is not None
    return old == "" and _HEAD.match(new) is not None


def _only_moved(before: str, after: str) -> bool:
    """Apart from the words WHERE, HAVING and AND, the edited statement's words are some of
    the original's: ``to_having`` edits only move (or drop repeated) conditions."""

    def words(sql: str) -> Counter[str]:
        toks = re.findall(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\w+|[^\w\s]", sql)
        return Counter(t if t[0] in "'\"`" else t.upper() for t in toks if t.upper() not in _GLUE)

    return not (words(after) - words(before))
