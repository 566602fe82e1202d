"""Charts and display rounding (#27 §6) on real Chinook results: the chart kind chosen for
category × number, time × number and text-only answers, a headless PNG that decodes to the
requested size, and numbers rounded per column in the CLI table and the HTML view while the
rows keep the database's exact values."""

from __future__ import annotations

import base64
import decimal
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.chart import choose, column_role
from grid_sql.ask.display import column_decimals, display_rows
from grid_sql.cli import format_table
from grid_sql.errors import NoChartError

PIL = pytest.importorskip("PIL.Image")

BY_COUNTRY = (
    "SELECT BillingCountry, SUM(Total) AS revenue FROM Invoice "
    "GROUP BY BillingCountry ORDER BY revenue DESC"
)
BY_MONTH = (
    "SELECT strftime('%Y-%m', InvoiceDate) AS month, SUM(Total) AS revenue FROM Invoice "
    "GROUP BY month ORDER BY month"
)
BY_DATE = "SELECT InvoiceDate, Total FROM Invoice WHERE CustomerId = 2 ORDER BY InvoiceDate"
BY_YEAR_COUNTRY = (
    "SELECT CAST(strftime('%Y', InvoiceDate) AS INTEGER) AS year, BillingCountry, SUM(Total) "
    "FROM Invoice WHERE BillingCountry IN ('USA', 'Canada', 'France') GROUP BY 1, 2"
)
TEXT_ONLY = "SELECT FirstName, LastName, Country FROM Customer ORDER BY CustomerId LIMIT 5"
BY_CUSTOMER = (
    "SELECT c.CustomerId, c.FirstName, c.LastName, SUM(i.Total) AS spent FROM Customer c "
    "JOIN Invoice i ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId ORDER BY spent DESC "
    "LIMIT 5"
)


@pytest.fixture(scope="module")
def asker(tmp_path_factory: pytest.TempPathFactory) -> Asker:
    import shutil

    from grid_sql.data import chinook_path

    dst = tmp_path_factory.mktemp("chart") / "chinook.sqlite"
    shutil.copyfile(chinook_path(), dst)
    return Asker(dst, audit=False)


def _png(data: bytes) -> tuple[str, tuple[int, int]]:
    img = PIL.open(io.BytesIO(data))
    img.load()  # decodes the whole image: a truncated PNG fails here
    return img.format, img.size


def test_category_by_number_is_a_bar_chart(asker: Asker, tmp_path: Path) -> None:
    res = asker.run_sql(BY_COUNTRY)
    assert res.chart().kind == "bar" and res.chart().y == (1,)
    png = res.plot_png(size=(6.4, 4.0), dpi=100)
    assert _png(png) == ("PNG", (640, 400))
    (tmp_path / "bar.png").write_bytes(png)
    fig = res.plot()
    ax = fig.axes[0]
    assert len(ax.patches) == len(res.rows)  # one bar per country, heights the sums
    assert [round(p.get_height(), 6) for p in ax.patches] == [
        round(float(r[1]), 6) for r in res.rows
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == [r[0] for r in res.rows]


def test_identifier_columns_are_labels_not_measures(asker: Asker) -> None:
    res = asker.run_sql(BY_CUSTOMER)
    chart = res.chart()
    assert (chart.kind, chart.y, chart.label) == ("bar", (3,), (0, 1, 2))
    labels = [t.get_text() for t in res.plot().axes[0].get_xticklabels()]
    assert labels[0] == " ".join(str(v) for v in res.rows[0][:3])


@pytest.mark.parametrize("sql", [BY_MONTH, BY_DATE])
def test_time_by_number_is_a_line_chart(asker: Asker, sql: str) -> None:
    res = asker.run_sql(sql)
    assert column_role(res.columns[0], [r[0] for r in res.rows]) == "time"
    assert res.chart().kind == "line"
    fig = res.plot(size=(8, 3), dpi=50)
    (line,) = fig.axes[0].get_lines()
    assert len(line.get_xdata()) == len(res.rows)
    assert _png(res.plot_png(size=(8, 3), dpi=50)) == ("PNG", (400, 150))


def test_a_category_beside_time_is_one_line_per_category(asker: Asker) -> None:
    res = asker.run_sql(BY_YEAR_COUNTRY)
    chart = res.chart()
    assert (chart.kind, chart.x, chart.y, chart.series) == ("line", 0, (2,), (1,))
    lines = res.plot().axes[0].get_lines()
    assert sorted(line.get_label() for line in lines) == ["Canada", "France", "USA"]


def test_text_only_has_no_chart_and_says_why(asker: Asker) -> None:
    res = asker.run_sql(TEXT_ONLY)
    with pytest.raises(NoChartError, match="no numeric column"):
        res.chart()
    with pytest.raises(NoChartError, match="no numeric column"):
        res.plot()


def test_other_shapes_without_a_chart(asker: Asker) -> None:
    with pytest.raises(NoChartError, match="one row of numbers"):
        asker.run_sql("SELECT COUNT(*), SUM(Total) FROM Invoice").chart()
    with pytest.raises(NoChartError, match="no rows"):
        asker.run_sql("SELECT Name, GenreId FROM Genre WHERE Name = 'none such'").chart()
    with pytest.raises(NoChartError, match="only numeric columns"):
        asker.run_sql("SELECT Milliseconds, Bytes FROM Track LIMIT 5").chart()
    with pytest.raises(NoChartError, match="at most 10"):
        choose(["year", "country", "n"], [(2000 + i % 3, f"c{i}", i) for i in range(33)])


def test_html_embeds_the_chart_only_when_asked(asker: Asker) -> None:
    res = asker.run_sql(BY_COUNTRY)
    assert "<img" not in res._repr_html_()
    res.show_chart = True
    page = res._repr_html_()
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert m is not None
    assert _png(base64.b64decode(m.group(1))) == ("PNG", (640, 400))
    text = asker.run_sql(TEXT_ONLY)
    text.show_chart = True
    assert "no chart: no numeric column" in text._repr_html_()


def test_numbers_are_rounded_for_display_and_exact_in_rows(asker: Asker) -> None:
    res = asker.run_sql(BY_COUNTRY)
    usa = res.rows[0]
    assert usa[0] == "USA" and usa[1] != round(usa[1], 2)  # SQLite's float sum carries noise
    table = format_table(res.columns, res.rows)
    assert re.search(r"^USA\s+523\.06\s*$", table, re.M), table
    page = res._repr_html_()
    assert "<td>USA</td><td>523.06</td>" in page and str(usa[1]) not in page
    df = res.to_dataframe()
    assert df.iloc[0]["revenue"] == usa[1]  # the DataFrame keeps the exact value
    assert res.to_dict()["rows"][0][1] == usa[1]
    # a column is shown with one number of decimals: 195.1 lines up as 195.10
    assert "<td>France</td><td>195.10</td>" in page


def test_column_precision_rule() -> None:
    D = decimal.Decimal
    assert column_decimals([1, 2, 3]) is None  # integers: nothing to round
    assert column_decimals([37.620000000000005, 1.5]) == 2
    assert column_decimals([5.651941747572815]) == 2
    assert column_decimals([0.000123456, 0.5]) == 6  # 3 significant figures of the smallest
    assert column_decimals([D("1.00"), D("2.50")]) == 2  # NUMERIC(10,2) keeps its scale
    assert column_decimals([D("5.6519417475728155")]) == 2
    assert column_decimals(["a", None, 1.25]) == 2
    rows = [(D("1.005"), -0.0001, None, True), (D("2"), 3.0, "x", False)]
    assert display_rows(["a", "b", "c", "d"], rows) == [
        ["1.00", "-0.0001", "NULL", "True"],  # 1.005 to even; 4 decimals are all b needs
        ["2.00", "3.0000", "x", "False"],
    ]
    assert display_rows(["x"], [(float("nan"),), (1.5,)]) == [["nan"], ["1.5"]]


def test_plot_is_headless() -> None:
    # no display, no pyplot: the Figure renders on the Agg canvas in a fresh interpreter
    code = (
        "import sys\n"
        "from grid_sql.ask.chart import render, to_png\n"
        "png = to_png(render(['k', 'v'], [('a', 1), ('b', 2.5)], title='t'))\n"
        "assert png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=Path.cwd())


# ------------------------------------------------------------------ with the real model
def test_charts_of_generated_answers(qwen: object, tmp_path: Path) -> None:
    """Qwen2.5-Coder-0.5B answers on Chinook (greedy): per genre is a bar chart, per year
    a line; both render headless to PNG."""
    import shutil

    from grid_sql.data import chinook_path

    shutil.copyfile(chinook_path(), tmp_path / "chinook.sqlite")
    asker = Asker(tmp_path / "chinook.sqlite", model=qwen, audit=False, max_tokens=64)  # type: ignore[arg-type]
    conv = asker.conversation()
    per_genre = conv.ask("How many tracks are there in each genre?")
    assert per_genre.chart().kind == "bar", per_genre.sql
    assert _png(per_genre.plot_png(dpi=80)) == ("PNG", (512, 320))
    per_year = conv.ask("What is the total invoice amount per year?")
    assert per_year.chart().kind == "line", per_year.sql
    (tmp_path / "per_year.png").write_bytes(per_year.plot_png())
    assert _png((tmp_path / "per_year.png").read_bytes()) == ("PNG", (640, 400))
