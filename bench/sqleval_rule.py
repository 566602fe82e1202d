"""defog sql-eval's correctness rule, re-implemented without pandas (issue #25 §5).

Why a re-implementation: ``bench/defog.py`` must score answers exactly as sql-eval does, so
its figures compare with the ones defog publishes, but sql-eval's code is pandas on
DataFrames read with ``pd.read_sql_query``. The rule below is written from sql-eval's
``eval/eval.py`` (github.com/defog-ai/sql-eval, read at commit 079e59c2; functions
``get_all_minimal_queries``, ``normalize_table``, ``compare_df``, ``subset_df``,
``compare_query_results``) and applied to plain ``(columns, rows)`` results:

* **Accepted gold queries.** The gold ``query`` is split at ``;``; in each part the first
  ``{a, b, ...}`` group expands to every non-empty combination of its columns (in their
  order, sizes 1..n) and ``GROUP BY {}`` repeats the chosen combination.
* **Correct** when, for some accepted gold query, the generated result *equals* it or
  *contains* it:

  - *equal*: the same shape and the same values cell by cell as returned; else the same
    after normalising both (duplicate rows dropped, columns sorted by name, rows sorted by
    every column unless the question is about ordering);
  - *contains* (extra columns allowed): the gold result is not empty, every gold column
    matches a distinct generated column holding the same values once both are sorted, and
    the gold result equals the generated result cut down to those columns (renamed to the
    gold's names), both normalised. Numbers match here within pandas' default tolerance
    (``assert_series_equal``/``assert_frame_equal``: ``|a - b| <= 1e-8 + 1e-5 |b|``).

* **Row order counts** only when the question's ``query_category`` is ``order_by`` or the
  question says ``order``/``sort``/``arrange``; then normalising keeps the row order unless
  some columns are already ascending, in which case rows are sorted by those columns first,
  then by the others (sql-eval's way of telling the ORDER BY key apart).

Value conventions of ``read_sql_query`` that matter: ``Decimal`` is read as ``float``
(``coerce_float``), and a missing value equals a missing value. Where pandas would raise
(normalising a result with two columns of one name), sql-eval's runner counts the question
wrong; so does :func:`correct`.
"""

from __future__ import annotations

import decimal
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Result",
    "compare",
    "contains",
    "correct",
    "minimal_queries",
    "normalize",
    "order_matters",
]

_BRACES = re.compile(r"\{([^{}]*)\}")
_ORDER_WORDS = re.compile(r"\b(order|sort|arrange)\b", re.IGNORECASE)
RTOL = 1e-5
ATOL = 1e-8


@dataclass(frozen=True)
class Result:
    """A result set: column names and rows (values as the driver returned them)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Result:
        return cls(tuple(columns), tuple(tuple(_value(v) for v in r) for r in rows))

    @property
    def empty(self) -> bool:  # a DataFrame with no rows or no columns
        return not self.rows or not self.columns


class DuplicateColumns(ValueError):
    """Normalising needs distinct column names (pandas' reindex refuses duplicates)."""


def _value(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def minimal_queries(query: str) -> list[str]:
    """Every accepted gold query of a sql-eval ``query`` field (see the module docstring)."""
    out: list[str] = []
    for part in query.split(";"):
        part = part.strip()
        if not part:
            continue
        m = _BRACES.search(part)
        if m is None:
            out.append(part)
            continue
        options = [c.strip() for c in m.group(1).split(",")]
        left, right = part[: m.start()], part[m.end() :]
        for r in range(1, len(options) + 1):
            for combo in itertools.combinations(options, r):
                cols = ", ".join(combo)
                out.append(left + cols + right.replace("GROUP BY {}", f"GROUP BY {cols}"))
    return out


def order_matters(category: str, question: str) -> bool:
    """sql-eval keeps row order for the ``order_by`` category and ordering questions."""
    return category == "order_by" or bool(_ORDER_WORDS.search(question))


def _key(v: Any) -> tuple[int, str, Any]:
    """Sort key: missing values last (pandas ``na_position='last'``); numbers together."""
    if v is None:
        return (2, "", 0)
    if isinstance(v, bool | int | float):
        return (0, "", v)
    return (1, type(v).__name__, v)


def _ascending(values: Sequence[Any]) -> bool:
    keys = [_key(v) for v in values]
    try:
        return all(a <= b for a, b in itertools.pairwise(keys))
    except TypeError:
        return False


def _sort_rows(rows: list[tuple[Any, ...]], by: Sequence[int]) -> list[tuple[Any, ...]]:
    try:
        return sorted(rows, key=lambda r: tuple(_key(r[i]) for i in by))
    except TypeError:  # values of several types in one column: order by their spelling
        return sorted(rows, key=lambda r: tuple(repr(_key(r[i])) for i in by))


def normalize(res: Result, ordered: bool) -> Result:
    """sql-eval's ``normalize_table``: drop duplicate rows (first kept), sort the columns by
    name, then sort the rows (see the module docstring for the ordered case)."""
    if len(set(res.columns)) != len(res.columns):
        raise DuplicateColumns(f"duplicate column names: {list(res.columns)}")
    rows = list(dict.fromkeys(res.rows))
    perm = sorted(range(len(res.columns)), key=lambda i: res.columns[i])
    cols = tuple(res.columns[i] for i in perm)
    rows = [tuple(r[i] for i in perm) for r in rows]
    width = range(len(cols))
    if not ordered:
        rows = _sort_rows(rows, list(width))
    else:
        pre = [i for i in width if _ascending([r[i] for r in rows])]
        if pre:
            rows = _sort_rows(rows, pre + [i for i in width if i not in pre])
    return Result(cols, tuple(rows))


def _close(a: Any, b: Any) -> bool:
    """pandas' ``assert_*_equal(check_exact=False)`` on one value pair."""
    if a is None or b is None:
        return a is None and b is None
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool | str):
        return abs(a - b) <= ATOL + RTOL * abs(b)
    return bool(a == b)


def _same_cells(a: Result, b: Result, close: bool) -> bool:
    if len(a.rows) != len(b.rows) or len(a.columns) != len(b.columns):
        return False
    eq = _close if close else (lambda x, y: x is y or x == y)
    return all(
        eq(x, y) for ra, rb in zip(a.rows, b.rows, strict=True) for x, y in zip(ra, rb, strict=True)
    )


def compare(gold: Result, gen: Result, ordered: bool) -> bool:
    """sql-eval's ``compare_df``: equal as returned, else equal once both are normalised."""
    if _same_cells(gold, gen, close=False):
        return True
    return _same_cells(normalize(gold, ordered), normalize(gen, ordered), close=False)


def contains(gold: Result, gen: Result, ordered: bool) -> bool:
    """sql-eval's ``subset_df``: the generated result holds the gold one (extra columns)."""
    if gold.empty:
        return False
    if len(gold.rows) != len(gen.rows):  # a column of another length never matches
        return False
    free = list(range(len(gen.columns)))
    matched: list[int] = []
    for gi in range(len(gold.columns)):
        col = sorted((r[gi] for r in gold.rows), key=_key)
        for j in free:
            other = sorted((r[j] for r in gen.rows), key=_key)
            if all(_close(x, y) for x, y in zip(col, other, strict=True)):
                matched.append(j)
                free.remove(j)
                break
        else:
            return False
    cut = Result(gold.columns, tuple(tuple(r[j] for j in matched) for r in gen.rows))
    return _same_cells(normalize(gold, ordered), normalize(cut, ordered), close=True)


def correct(golds: Sequence[Result], gen: Result, category: str, question: str) -> bool:
    """sql-eval's ``compare_query_results`` verdict: some accepted gold result is equal to
    or contained in ``gen``. A normalisation pandas would refuse counts as wrong."""
    ordered = order_matters(category, question)
    try:
        return any(compare(g, gen, ordered) or contains(g, gen, ordered) for g in golds)
    except DuplicateColumns:
        return False
