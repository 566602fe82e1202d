"""Numbers as a person reads them: each column rounded to one sensible precision for display.

Why per column and only for display: a database hands back ``AVG(Total)`` as
``5.651941747572815`` and a SQLite sum of prices as ``37.620000000000005`` (binary floating
point noise); printed as is, a table is hard to read and the noise looks like data. So the CLI
table and the HTML view show every number of a column with the same number of decimals, chosen
from the column's values, while :attr:`AskResult.rows`, :meth:`AskResult.to_dict` and the
DataFrame keep the exact values the database returned (an analysis must not inherit a display
choice).

The rule, per column of numbers (``int``, ``float``, ``Decimal``; ``bool`` is no number):

* a value *needs* the decimals of its shortest exact rendering: a ``Decimal`` its scale
  (``NUMERIC(10,2)`` keeps ``1.00``), a float its digits to 12 significant figures (which drops
  the noise: ``37.620000000000005`` needs 2);
* the column is *allowed* 2 decimals when its smallest non-zero magnitude is at least 1, else
  enough for 3 significant figures of that magnitude (``0.000123`` keeps 6), at most 12;
* it is shown with ``min(needed, allowed)`` decimals, the same for every value, so the column
  lines up; an all-integer column is shown as integers.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Any

MAX_DECIMALS = 12
_SIGNIFICANT = 12  # float digits kept when measuring what a value needs (drops binary noise)


def is_number(value: Any) -> bool:
    """A numeric database value (``bool`` is not one: it displays as True/False)."""
    return isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)


def _needed(value: int | float | decimal.Decimal) -> int:
    """Decimals of the shortest faithful rendering of ``value``."""
    if isinstance(value, int):
        return 0
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return 0
        exp = value.as_tuple().exponent
        return max(0, -int(exp))
    if not math.isfinite(value):
        return 0
    text = f"{value:.{_SIGNIFICANT}g}"
    if "e" in text:  # tiny or huge: count through the exponent
        mant, _, exp_s = text.partition("e")
        frac = mant.partition(".")[2]
        return max(0, len(frac) - int(exp_s))
    return len(text.partition(".")[2])


def _allowed(values: Sequence[int | float | decimal.Decimal]) -> int:
    """Decimals a column may show: 2 at magnitudes of 1 and above, 3 significant figures below."""
    mags = [abs(float(v)) for v in values if v != 0 and math.isfinite(float(v))]
    if not mags:
        return 2
    smallest = min(mags)
    if smallest >= 1:
        return 2
    return min(MAX_DECIMALS, 2 - math.floor(math.log10(smallest)))


def column_decimals(values: Sequence[Any]) -> int | None:
    """Decimals to show for a column with these values; None when it holds no non-integer
    number (nothing to round: integers and text are shown as they are)."""
    nums = [v for v in values if is_number(v)]
    if not any(not isinstance(v, int) for v in nums):
        return None
    return min(max(_needed(v) for v in nums), _allowed(nums))


def format_number(value: int | float | decimal.Decimal, decimals: int | None) -> str:
    """``value`` with ``decimals`` decimals (None: as the database rendered it)."""
    if decimals is None or isinstance(value, int):
        if decimals and isinstance(value, int):
            return f"{value:.{decimals}f}"
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        try:
            q = value.quantize(decimal.Decimal(1).scaleb(-decimals), decimal.ROUND_HALF_EVEN)
        except decimal.InvalidOperation:  # more digits than the context holds: show it exact
            return str(value)
        return f"{q:f}"
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def display_rows(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, null: str = "NULL"
) -> list[list[str]]:
    """``rows`` as display strings: numbers rounded per column (the module rule), NULL as
    ``null``, everything else ``str()``. The input rows are not changed."""
    decimals = [column_decimals([r[i] for r in rows]) for i in range(len(columns))]
    out: list[list[str]] = []
    for row in rows:
        cells = []
        for v, d in zip(row, decimals, strict=True):
            if v is None:
                cells.append(null)
            elif is_number(v):
                cells.append(format_number(v, d))
            else:
                cells.append(str(v))
        out.append(cells)
    return out
