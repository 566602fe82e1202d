"""What a question turns into: the generated statement, its repairs, and the executed result.

Why one plain result object for every front: the SQLAlchemy, DB-API, pandas, Jupyter and CLI
fronts all show the same evidence (the SQL that ran, the rows, the audit id that proves how the
SQL was produced, the repair history and where the time went), so it is computed once here and
each front only renders it. Everything is plain data: JSON-ready via :meth:`AskResult.to_dict`,
a DataFrame via :meth:`AskResult.to_dataframe` (pandas imported lazily).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import html
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas
    from matplotlib.figure import Figure

    from .chart import Chart
    from .execute import Execution
    from .preview import WritePreview


@dataclass(frozen=True)
class Repair:
    """One rejected statement and why: the SQL the checker refused and its violation messages.

    ``round`` is 0 for the first generation and 1 for the repair round, so the history reads in
    order; the violations are the one-sentence messages quoted back to the model. ``kind`` is
    ``"checker"`` when the statement went back to the model, ``"execution"`` when the
    database refused a checked statement and its message went back, ``"autofix"`` when the
    checker's deterministic fixes resolved every violation instead, ``"typefix"`` when the
    database reported a type error that has one reading and the fixed statement ran instead
    of a repair round (grid_sql/ask/typefix.py): ``edits`` then lists each text edit
    (``start``, ``end``, ``old``, ``new``, ``kind``, ``reason``) applied to ``sql``.
    """

    sql: str
    violations: list[str]
    round: int
    kind: str = "checker"
    edits: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sql": self.sql,
            "violations": list(self.violations),
            "round": self.round,
            "kind": self.kind,
            "edits": [dict(e) for e in self.edits],
        }


@dataclass
class GeneratedSQL:
    """A statement produced under the role's guide and accepted by the post-parse checker.

    Nothing has been executed. ``repairs`` lists each refused earlier attempt; ``audit_ids``
    every audited generation in order (the last one produced ``sql``); ``audit_id`` is that
    last one. ``timings`` in seconds: ``generation`` (model + mask), ``mask`` (the mask share),
    ``check`` (post-parse checker), ``total``.
    """

    question: str
    sql: str
    stop_reason: str
    audit_id: str | None = None
    audit_ids: list[str] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "sql": self.sql,
            "stop_reason": self.stop_reason,
            "audit_id": self.audit_id,
            "audit_ids": list(self.audit_ids),
            "repairs": [r.to_dict() for r in self.repairs],
            "timings": dict(self.timings),
            "tokens": self.tokens,
            "error": None,
        }


def _jsonable(value: Any) -> Any:
    """A JSON-safe rendering of one database value (exact decimals as strings)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


_SQL_KEYWORDS = re.compile(
    r"\b(SELECT|FROM|WHERE|JOIN|LEFT|RIGHT|INNER|OUTER|FULL|CROSS|ON|GROUP|BY|ORDER|HAVING|"
    r"LIMIT|OFFSET|AS|AND|OR|NOT|IN|IS|NULL|LIKE|BETWEEN|DISTINCT|UNION|ALL|WITH|CASE|WHEN|"
    r"THEN|ELSE|END|ASC|DESC|INSERT|INTO|VALUES|UPDATE|SET|DELETE|EXISTS|COUNT|SUM|AVG|MIN|"
    r"MAX)\b",
    re.IGNORECASE,
)
HTML_ROW_LIMIT = 50


def highlight_sql(sql: str) -> str:
    """HTML for ``sql`` with keywords in bold (escaped first, so the SQL cannot inject markup)."""
    return _SQL_KEYWORDS.sub(lambda m: f"<b>{m.group(0)}</b>", html.escape(sql))


@dataclass
class AskResult:
    """A question answered: the executed statement and its (capped) result, with the evidence.

    ``rows`` holds at most the caller's ``row_limit`` rows; ``truncated`` says more existed.
    ``rowcount`` is the number of rows returned, or affected for an opted-in write (for a
    previewed write, ``dry_run=True``, the rows it would affect; ``preview`` has the details).
    ``stop_reason`` is a :class:`grid_sql.decode.StopReason` value; ``timings`` in seconds:
    ``generation``, ``mask``, ``execution``, ``total`` (plus ``check`` and ``prompt``).
    ``show_chart``: the HTML view embeds the chart (``%%ask --plot`` sets it; see :meth:`plot`).
    """

    question: str
    sql: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    rowcount: int
    stop_reason: str
    audit_id: str | None
    repairs: list[Repair] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    preview: WritePreview | None = None
    show_chart: bool = field(default=False, compare=False)

    @classmethod
    def answered(cls, gen: GeneratedSQL, ran: Execution, started: float) -> AskResult:
        """The answer of ``gen`` once it ran: its timings plus the execution and the total
        since ``started`` (``time.perf_counter()``). One constructor for every path that
        generates then executes (the Asker, the SQLAlchemy session), so they report alike."""
        timings = dict(gen.timings)
        timings["execution"] = ran.seconds
        timings["total"] = time.perf_counter() - started
        return cls(
            question=gen.question,
            sql=gen.sql,
            columns=ran.columns,
            rows=ran.rows,
            truncated=ran.truncated,
            rowcount=ran.rowcount,
            stop_reason=gen.stop_reason,
            audit_id=gen.audit_id,
            repairs=list(gen.repairs),
            timings=timings,
            preview=ran.preview,
        )

    @property
    def dry_run(self) -> bool:
        """A previewed write: ``rowcount`` rows would change, nothing did (``preview``)."""
        return self.preview is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; ``error`` is always None here (failures are raised, not returned)."""
        return {
            "question": self.question,
            "sql": self.sql,
            "columns": list(self.columns),
            "rows": [[_jsonable(v) for v in row] for row in self.rows],
            "truncated": self.truncated,
            "rowcount": self.rowcount,
            "stop_reason": self.stop_reason,
            "audit_id": self.audit_id,
            "repairs": [r.to_dict() for r in self.repairs],
            "timings": {k: round(v, 6) for k, v in self.timings.items()},
            "preview": None if self.preview is None else self.preview.to_dict(),
            "error": None,
        }

    def to_dataframe(self) -> pandas.DataFrame:
        """The rows as a DataFrame; ``df.attrs`` carries ``sql``, ``audit_id`` and ``truncated``."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - pandas is in the [pandas] extra
            raise ImportError(
                "AskResult.to_dataframe needs pandas: pip install 'grid-sql[pandas]'"
            ) from exc
        df = pd.DataFrame.from_records(self.rows, columns=self.columns)
        df.attrs["sql"] = self.sql
        df.attrs["audit_id"] = self.audit_id
        df.attrs["question"] = self.question
        df.attrs["truncated"] = self.truncated
        return df

    def chart(self) -> Chart:
        """The chart that suits these rows (``grid_sql.ask.chart``: a bar for category ×
        number, a line for time × number); :class:`~grid_sql.errors.NoChartError` says why
        there is none."""
        from .chart import choose

        return choose(self.columns, self.rows)

    def plot(self, *, size: tuple[float, float] = (6.4, 4.0), dpi: int = 100) -> Figure:
        """The chart as a matplotlib Figure (headless Agg canvas; ``fig.savefig(...)`` or
        :meth:`plot_png`), titled with the question; :class:`~grid_sql.errors.NoChartError`
        when no chart suits the result. Needs the ``[charts]`` extra (matplotlib)."""
        from .chart import render

        return render(
            self.columns, self.rows, title=self.question, truncated=self.truncated, size=size,
            dpi=dpi,
        )  # fmt: skip

    def plot_png(self, *, size: tuple[float, float] = (6.4, 4.0), dpi: int = 100) -> bytes:
        """:meth:`plot` as PNG bytes (``size`` inches × ``dpi`` pixels)."""
        from .chart import to_png

        return to_png(self.plot(size=size, dpi=dpi))

    def audit_summary(self) -> str:
        """One line: audit id, stop reason, repairs, row count and timings."""
        t = self.timings
        parts = [
            f"audit {self.audit_id or '(not recorded)'}",
            f"stop {self.stop_reason}",
            f"{len(self.rows)} row(s)" + (" (truncated)" if self.truncated else ""),
        ]
        fixed = sum(r.kind == "autofix" for r in self.repairs)
        if len(self.repairs) > fixed:
            parts.append(f"{len(self.repairs) - fixed} repaired attempt(s)")
        if fixed:
            parts.append("autofixed (schema-certain edits)")
        if "generation" in t:
            parts.append(f"generation {t['generation']:.2f}s")
        if "execution" in t:
            parts.append(f"execution {t['execution'] * 1000:.1f}ms")
        return " · ".join(parts)

    def _repr_html_(self) -> str:
        from .display import display_rows

        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        # numbers rounded per column for reading (module grid_sql.ask.display); rows stay exact
        shown = display_rows(self.columns, self.rows[:HTML_ROW_LIMIT], null="None")
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in shown
        )
        more = len(self.rows) - HTML_ROW_LIMIT
        tail = f"<p><i>… {more} more row(s) not shown</i></p>" if more > 0 else ""
        return (
            '<div class="grid-sql-result">'
            f"<pre><code>{highlight_sql(self.sql)}</code></pre>"
            f"{self._chart_html() if self.show_chart else ''}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"
            f"<p><small>{html.escape(self.audit_summary())}</small></p></div>"
        )

    def _chart_html(self) -> str:
        """The chart as an embedded PNG, or the reason there is none (the view never fails)."""
        from ..errors import NoChartError

        try:
            png = self.plot_png()
        except NoChartError as exc:
            return f'<p class="grid-sql-no-chart"><i>{html.escape(str(exc))}</i></p>'
        except ImportError as exc:
            return f"<p><i>{html.escape(str(exc))}</i></p>"
        data = base64.b64encode(png).decode("ascii")
        return f'<img class="grid-sql-chart" alt="chart" src="data:image/png;base64,{data}"/>'

    def __repr__(self) -> str:
        return (
            f"AskResult(sql={self.sql!r}, columns={self.columns!r}, rows={len(self.rows)}"
            f"{'+' if self.truncated else ''}, audit_id={self.audit_id!r})"
        )
