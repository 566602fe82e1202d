"""Every example runs offline on the packaged Chinook with SmolLM2: the four scripts as
subprocesses and the notebook through nbclient with the venv's ``python3`` kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import MODEL, REPO

EXAMPLES = REPO / "examples"
SCRIPTS = [
    "ask_sqlite.py",
    "sqlalchemy_session.py",
    "dbapi_cursor.py",
    "pandas_read_sql.py",
    "conversation.py",
]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GRID_SQL_MODEL"] = MODEL
    env["GRID_SQL_AUDIT_DB"] = str(tmp_path / "audit.sqlite")
    return env


def test_every_example_is_tested() -> None:
    found = {
        p.name
        for p in EXAMPLES.iterdir()
        if p.suffix in (".py", ".ipynb") and not p.name.startswith("_")
    }
    assert found == {*SCRIPTS, "notebook.ipynb"}


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_script_runs(script: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # every question got an answer or a typed refusal, and both are audited
    questions = proc.stdout.count("\nQ: ")
    assert questions >= 1
    assert proc.stdout.count("SQL: ") + proc.stdout.count("refused (") == questions
    assert "audit" in proc.stdout


@pytest.mark.slow
def test_notebook_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any('class="grid-sql-result"' in h for h in html)  # AskResult rendered
    assert any("<table" in h for h in html)
    # %%ask --plot: the chart embedded as a PNG, or the reason there is none
    assert any("grid-sql-chart" in h or "grid-sql-no-chart" in h for h in html)
    # the live SQL display was updated in place and emptied when the answer came
    assert any(
        o.output_type == "display_data" and o["data"].get("text/html") == "" for o in outputs
    )
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "grid-sql connected" in text
