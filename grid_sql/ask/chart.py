"""A result's chart: which one makes sense (:func:`choose`) and drawing it (:func:`render`).

Why a choice and not a chart builder: a question's answer has no chart type attached, and the
people asking want "the obvious picture" or none. So the choice is made from the result's
columns and values alone, conservatively:

* a **line** when a column is a time axis (``date``/``datetime`` values, ISO date strings as
  SQLite returns them, ``strftime('%Y', ...)`` years, or an integer column named ``year``)
  and at least one column is a measure; with one category column beside it, one line per
  category (at most :data:`MAX_SERIES`);
* a **bar** when a column is a category (text, or an integer identifier: a column named
  ``id`` / ``...Id`` / ``..._id`` is a label, not a quantity) and at least one is a measure;
  several category columns are joined into one label ("Luís Gonçalves"); at most
  :data:`MAX_BARS` bars, the first rows in the query's order (the title says so);
* otherwise **none**, raising :class:`~grid_sql.errors.NoChartError` with the reason (no
  rows; no numeric column; only numbers, so no axis to put them on; too many series).

Measures are plotted as floats (``Decimal`` too); the result's rows are not changed.
matplotlib is imported only by :func:`render`, on a :class:`matplotlib.figure.Figure` with the
Agg canvas: no pyplot, no GUI backend, no global figure state, so it works headless, in a
server and in threads.
"""

from __future__ import annotations

import datetime as _dt
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import NoChartError
from .display import is_number

if TYPE_CHECKING:  # pragma: no cover - typing only
    from matplotlib.figure import Figure

ChartKind = Literal["bar", "line"]
MAX_BARS = 40
MAX_SERIES = 10
MAX_MEASURES = 4

_ISO = re.compile(r"^\d{4}(-\d{2}(-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?)?)?$")
_ID = re.compile(r"(^|_)id$|[a-z]Id$|(^|[a-z_])ID$")
_YEAR = re.compile(r"(^|_)(year|yr)s?$", re.IGNORECASE)

ColumnRole = Literal["time", "category", "measure", "empty"]


@dataclass(frozen=True)
class Chart:
    """The chart chosen for a result: ``kind``, the ``x`` column index, the measure column
    indexes ``y`` and, for a line chart per category, the ``series`` column indexes."""

    kind: ChartKind
    x: int
    y: tuple[int, ...]
    series: tuple[int, ...] = ()
    label: tuple[int, ...] = ()  # bar charts: the category columns joined into the label


def _as_time(value: Any) -> _dt.datetime | None:
    """``value`` as a datetime when it is a date, a datetime or an ISO date string."""
    if isinstance(value, _dt.datetime):
        return value
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day)
    if isinstance(value, str) and _ISO.match(value):
        text = value + ("-01-01" if len(value) == 4 else "-01" if len(value) == 7 else "")
        try:
            return _dt.datetime.fromisoformat(text)
        except ValueError:  # 2009-13-45: shaped like a date, is none
            return None
    return None


def column_role(name: str, values: Sequence[Any]) -> ColumnRole:
    """How a column can serve a chart (see the module docstring)."""
    present = [v for v in values if v is not None]
    if not present:
        return "empty"
    if all(is_number(v) for v in present):
        ints = all(isinstance(v, int) for v in present)
        if ints and _YEAR.search(name) and all(1000 <= v <= 2999 for v in present):
            return "time"
        if ints and _ID.search(name):
            return "category"
        return "measure"
    if all(_as_time(v) is not None for v in present):
        return "time"
    return "category"


def choose(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Chart:
    """The chart for these columns and rows, or :class:`NoChartError` saying why there is none."""
    if not columns:
        raise NoChartError("no chart: the statement returned no columns (not a query)")
    if not rows:
        raise NoChartError("no chart: the result has no rows")
    roles = [column_role(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    measures = tuple(i for i, r in enumerate(roles) if r == "measure")[:MAX_MEASURES]
    times = [i for i, r in enumerate(roles) if r == "time"]
    cats = tuple(i for i, r in enumerate(roles) if r == "category")
    if not measures:
        raise NoChartError(
            "no chart: no numeric column to measure (columns: "
            + ", ".join(f"{c} ({r})" for c, r in zip(columns, roles, strict=True))
            + ")"
        )
    if times:
        if len(cats) > 1:
            raise NoChartError(
                "no chart: a time axis with more than one category column "
                f"({', '.join(columns[i] for i in cats)}) has no single line per category"
            )
        if cats:
            groups = {r[cats[0]] for r in rows}
            if len(groups) > MAX_SERIES:
                raise NoChartError(
                    f"no chart: {len(groups)} values of {columns[cats[0]]} would be "
                    f"{len(groups)} lines (at most {MAX_SERIES} are readable)"
                )
            return Chart("line", times[0], measures[:1], series=cats)
        return Chart("line", times[0], measures)
    if cats:
        return Chart("bar", cats[0], measures, label=cats)
    if len(rows) == 1:
        raise NoChartError("no chart: one row of numbers (the table says it all)")
    raise NoChartError(
        "no chart: only numeric columns, no category or time to put them against "
        f"({', '.join(columns)})"
    )


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def render(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str = "",
    truncated: bool = False,
    chart: Chart | None = None,
    size: tuple[float, float] = (6.4, 4.0),
    dpi: int = 100,
) -> Figure:
    """A matplotlib Figure (Agg canvas, headless) of the chosen (or given) chart."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the [charts] extra
        raise ImportError("charts need matplotlib: pip install 'grid-sql[charts]'") from exc
    spec = chart if chart is not None else choose(columns, rows)
    fig = Figure(figsize=size, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    note = " (first rows only)" if truncated else ""
    if spec.kind == "line":
        _draw_lines(ax, columns, rows, spec)
    else:
        shown = rows[:MAX_BARS]
        if len(rows) > MAX_BARS:
            note = f" (first {MAX_BARS} of {len(rows)}{'+' if truncated else ''} rows)"
        _draw_bars(ax, columns, shown, spec)
    ax.set_title(_shorten(title, 70) + note, fontsize=10)
    return fig


def _draw_lines(
    ax: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]], spec: Chart
) -> None:
    timed = [(t, r) for r in rows if (t := _x_time(r[spec.x], columns[spec.x])) is not None]
    timed.sort(key=lambda p: p[0])
    groups: dict[str, list[tuple[_dt.datetime, Sequence[Any]]]] = {}
    for t, r in timed:
        key = "" if not spec.series else str(r[spec.series[0]])
        groups.setdefault(key, []).append((t, r))
    for key, points in groups.items():
        xs = [t for t, _ in points]
        for j in spec.y:
            label = key if spec.series else columns[j]
            ax.plot(xs, [_float(r[j]) for _, r in points], marker="o", markersize=3, label=label)
    ax.set_xlabel(columns[spec.x])
    ax.set_ylabel(columns[spec.y[0]] if len(spec.y) == 1 else "")
    if len(groups) > 1 or len(spec.y) > 1:
        ax.legend(fontsize=8, title=columns[spec.series[0]] if spec.series else None)
    ax.grid(True, alpha=0.3)
    _integer_ticks(ax, rows, spec.y)
    if timed and all((t.month, t.day, t.time()) == (1, 1, _dt.time()) for t, _ in timed):
        from matplotlib.dates import DateFormatter, YearLocator  # yearly data: ticks on years

        ax.xaxis.set_major_locator(YearLocator())
        ax.xaxis.set_major_formatter(DateFormatter("%Y"))
    ax.figure.autofmt_xdate()


def _x_time(value: Any, name: str) -> _dt.datetime | None:
    if isinstance(value, int) and _YEAR.search(name):  # a year column of integers
        return _dt.datetime(value, 1, 1)
    return _as_time(value)


def _draw_bars(ax: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]], spec: Chart) -> None:
    labels = [_shorten(" ".join("" if r[i] is None else str(r[i]) for i in spec.label), 24)
              for r in rows]  # fmt: skip
    n = len(spec.y)
    width = 0.8 / n
    positions = range(len(rows))
    for k, j in enumerate(spec.y):
        offset = (k - (n - 1) / 2) * width
        ax.bar([p + offset for p in positions], [_float(r[j]) for r in rows], width,
               label=columns[j])  # fmt: skip
    ax.set_xticks(list(positions), labels)
    if sum(len(s) for s in labels) > 48 or max((len(s) for s in labels), default=0) > 10:
        for tick in ax.get_xticklabels():
            tick.set_rotation(60)
            tick.set_horizontalalignment("right")
    ax.set_xlabel(" ".join(columns[i] for i in spec.label))
    ax.set_ylabel(columns[spec.y[0]] if n == 1 else "")
    if n > 1:
        ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    _integer_ticks(ax, rows, spec.y)


def _integer_ticks(ax: Any, rows: Sequence[Sequence[Any]], y: Sequence[int]) -> None:
    """Counts get whole-number ticks (no 2.5 albums on the axis)."""
    if all(isinstance(r[j], int) for r in rows for j in y if r[j] is not None):
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
