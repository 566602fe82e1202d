"""Jupyter front without a model: the extension loads into a real IPython shell, the magics
report usage errors, and an AskResult renders as HTML through IPython's display formatter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from grid_sql.ask.result import AskResult, Repair

from .conftest import MODEL, Q_GENRES, Q_MEDIA, READ_ONLY, few_shot


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "grid_sql")
    return ip


def test_import_grid_sql_stays_light() -> None:
    code = (
        "import sys, grid_sql\n"
        "heavy = [m for m in ('IPython', 'pandas', 'torch', 'transformers', 'llama_cpp')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert callable(grid_sql.load_ipython_extension) and callable(grid_sql.read_sql_nl)\n"
        "assert callable(grid_sql.connect)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_load_ext_registers_magics(shell: InteractiveShell) -> None:
    magics = shell.magics_manager.magics
    assert "grid_connect" in magics["line"]
    assert "ask" in magics["line"] and "ask" in magics["cell"]


def test_ask_before_connect_is_a_usage_error(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="grid_connect"):
        shell.run_line_magic("ask", "how many albums?")
    with pytest.raises(UsageError, match="grid_connect"):
        shell.run_cell_magic("ask", "", "how many albums?")


def test_connect_argument_errors_are_usage_errors(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="required"):
        shell.run_line_magic("grid_connect", "")
    with pytest.raises(UsageError, match="unrecognized"):
        shell.run_line_magic("grid_connect", "sqlite:///x.db --no-such-flag")
    with pytest.raises(UsageError, match="invalid int"):
        shell.run_line_magic("grid_connect", "sqlite:///x.db --row-limit many")


def _result() -> AskResult:
    return AskResult(
        question="albums by <b>year</b>?",
        sql="SELECT title, year FROM album WHERE title <> '<script>' ORDER BY year",
        columns=["title", "year"],
        rows=[("Blue Train", 1958), ("Kind of Blue & more", 1959)],
        truncated=True,
        rowcount=2,
        stop_reason="eos",
        audit_id="a1b2c3",
        repairs=[Repair(sql="SELECT secret FROM album", violations=["column"], round=0)],
        timings={"generation": 1.25, "execution": 0.0021, "total": 1.3},
    )


def test_result_renders_as_html_in_ipython(shell: InteractiveShell) -> None:
    data, _meta = shell.display_formatter.format(_result())
    page = data["text/html"]
    assert "<b>SELECT</b> title, year <b>FROM</b> album" in page  # SQL highlighted
    assert "&lt;script&gt;" in page and "<script>" not in page  # escaped, cannot inject
    assert "<th>title</th><th>year</th>" in page
    assert "<td>Kind of Blue &amp; more</td><td>1959</td>" in page
    summary = page[page.rindex("<small>") :]
    assert "audit a1b2c3" in summary and "stop eos" in summary and "truncated" in summary
    assert "1 repaired attempt(s)" in summary
    assert "text/plain" in data and "audit_id='a1b2c3'" in data["text/plain"]


# ------------------------------------------------------------------ with the real model
@pytest.mark.slow  # its own Asker and model load: 4-75 s here, load-dependent
def test_connect_and_ask_magics(
    shell: InteractiveShell, chinook_copy: Path, audit_db: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(READ_ONLY))
    shots = tmp_path / "shots.json"
    shots.write_text(json.dumps([{"question": e.question, "sql": e.sql} for e in few_shot()]))
    shell.run_line_magic(
        "grid_connect",
        f"{chinook_copy} --model {MODEL} --audit {audit_db} --policy {policy} "
        f"--examples {shots} --row-limit 3 --max-tokens 32",
    )
    result = shell.run_line_magic("ask", Q_GENRES)
    assert isinstance(result, AskResult) and result.audit_id
    assert len(result.rows) <= 3  # --row-limit reached the Asker
    page = shell.display_formatter.format(result)[0]["text/html"]
    assert f"audit {result.audit_id}" in page and "<table>" in page
    # the cell magic through the whole cell path, as a notebook runs it
    run = shell.run_cell(f"%%ask --df --out frame\n{Q_MEDIA}\n")
    run.raise_error()
    frame = run.result
    assert isinstance(frame, pd.DataFrame) and shell.user_ns["frame"] is frame
    assert frame.attrs["sql"] and frame.attrs["audit_id"] and len(frame) <= 3


@pytest.fixture
def published(shell: InteractiveShell) -> Iterator[list[dict[str, Any]]]:
    """What IPython's display machinery publishes (display, display handles' updates)."""
    from IPython.core.displaypub import CapturingDisplayPublisher

    pub = CapturingDisplayPublisher()
    saved, shell.display_pub = shell.display_pub, pub
    try:
        yield pub.outputs
    finally:
        shell.display_pub = saved


def test_live_output_follows_the_tokens_then_the_result_replaces_it(
    shell: InteractiveShell,
    published: list[dict[str, Any]],
    opts: dict[str, Any],
    chinook_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``%%ask`` in a notebook: one display, updated as tokens arrive (IPython's real display
    handles, captured), then emptied; ``--plot`` puts the chart or its reason in the HTML."""
    import html
    import re

    from grid_sql.ask.asker import Asker
    from grid_sql.front import jupyter_live

    monkeypatch.setattr(jupyter_live, "MIN_INTERVAL_S", 0.0)  # every token, not throttled
    magics = shell.magics_manager.registry["GridMagics"]
    assert magics.live is False  # a terminal shell: no live output unless asked
    monkeypatch.setattr(magics, "live", True)
    monkeypatch.setattr(magics, "asker", Asker(chinook_copy, **opts))
    monkeypatch.setattr(magics, "conversation", magics.asker.conversation())
    run = shell.run_cell(f"%%ask --plot\n{Q_GENRES}\n")
    run.raise_error()
    result = run.result
    assert isinstance(result, AskResult) and result.sql
    ids = {o["transient"]["display_id"] for o in published}
    assert len(ids) == 1  # one live area
    assert [o["update"] for o in published] == [False] + [True] * (len(published) - 1)
    views = [o["data"]["text/html"] for o in published]
    codes = [
        html.unescape(m.group(1)) for v in views if (m := re.search(r"<code>(.*)</code>", v, re.S))
    ]
    generating = [c for v, c in zip(views, codes, strict=False) if "generating" in v]
    assert len(generating) >= 3 and generating[0] == ""  # the empty start, then per token
    assert all(b.startswith(a) for a, b in zip(generating, generating[1:], strict=False))
    assert generating[-1].strip().startswith(result.sql.rstrip(";"))
    assert "checked, running" in views[-2] and codes[-1] == result.sql
    assert views[-1] == ""  # emptied: the returned result shows the SQL and table
    page = shell.display_formatter.format(result)[0]["text/html"]
    assert "no chart: no numeric column" in page  # names only: the reason, not a chart
    assert magics.conversation.history[-1].sql == result.sql  # a conversation turn


def test_bad_examples_file_is_a_usage_error(shell: InteractiveShell, tmp_path: Path) -> None:
    bad = tmp_path / "shots.json"
    bad.write_text(json.dumps({"question": "q"}))
    with pytest.raises(UsageError, match="question: ..., sql: ..."):
        shell.run_line_magic("grid_connect", f"{tmp_path / 'x.sqlite'} --examples {bad}")


def test_ask_line_options_and_apostrophes() -> None:
    from grid_sql.front.jupyter import _leading_options

    assert _leading_options("--df --out x What's the top album?") == (
        ["--df", "--out", "x"],
        "What's the top album?",
    )
    assert _leading_options("  How many  albums? ") == ([], "How many albums?")


def test_show_chart_publishes_a_png_or_prints_the_reason(
    shell: InteractiveShell, published: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """``%%ask --plot --df``: the DataFrame has no chart of its own, so the chart is
    displayed as an image through IPython's display machinery first."""
    import base64
    import io

    from PIL import Image

    from grid_sql.front.jupyter_live import show_chart

    rows: list[tuple[Any, ...]] = [("AC/DC", 2), ("Accept", 2), ("Aerosmith", 1)]
    bars = AskResult("albums per artist", "SELECT ...", ["artist", "albums"], rows, False, 3,
                     "eos", None)  # fmt: skip
    show_chart(bars)
    (out,) = published
    png = out["data"]["image/png"]
    img = Image.open(io.BytesIO(png if isinstance(png, bytes) else base64.b64decode(png)))
    assert (img.format, img.size) == ("PNG", (640, 400))
    show_chart(_result())  # title × year: a year is a time axis but nothing is measured
    assert len(published) == 1 and "no chart: no numeric column" in capsys.readouterr().out
