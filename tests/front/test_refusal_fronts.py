"""Honest answers in every front (issue #30 §2): a question that needs an object the role may
not read is a :class:`PolicyRefusal` with its reason and ``needs`` in the CLI (printed plainly,
no traceback, ``needs`` in ``--json``), the DB-API cursor and pandas (raised, nothing
executed) and the Jupyter magic (printed, no traceback). Real Qwen2.5-Coder-0.5B on Chinook
with Employee denied (SmolLM2, the other front tests' model, does not reach for the table)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import grid_sql
from grid_sql.cli import main
from grid_sql.errors import PolicyRefusal

QUESTION = "Show me the employees' birth dates."
POLICY = {"verbs": ["select"], "tables": {"deny": ["Employee"]}}


@pytest.fixture(scope="module")
def qwen05() -> Any:
    from grid_sql.ask.asker import load_backend

    return load_backend("qwen2.5-coder-0.5b")


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    p = tmp_path / "policy.json"
    p.write_text(json.dumps(POLICY))
    return p


def _assert_refusal(exc: PolicyRefusal) -> None:
    assert "Employee.BirthDate" in exc.needs
    assert "may not read" in str(exc) and "nothing was executed" in str(exc)


def test_cli_prints_the_reason_without_a_traceback(
    chinook_copy: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "--db", str(chinook_copy), "--policy", str(policy_file)]
    argv += ["--model", "qwen2.5-coder-0.5b", "--no-audit", QUESTION]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "refused: this question needs " in err and "Employee.BirthDate" in err
    assert "\nneeds: " in err and "may not read" in err
    assert "Traceback" not in err and "PolicyRefusal" not in err
    assert main([*argv[:-1], "--json", QUESTION]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["error_type"] == "PolicyRefusal" and payload["rows"] == []
    assert "Employee.BirthDate" in payload["needs"]


def test_dbapi_cursor_raises_it_and_keeps_no_result(chinook_copy: Path, qwen05: Any) -> None:
    con = grid_sql.connect(sqlite3.connect(chinook_copy), model=qwen05, policy=POLICY, audit=False)
    cur = con.cursor()
    with pytest.raises(PolicyRefusal) as info:
        cur.nl_execute(QUESTION)
    _assert_refusal(info.value)
    assert cur.result is None and cur.description is None


def test_pandas_raises_it(chinook_copy: Path, qwen05: Any) -> None:
    with pytest.raises(PolicyRefusal) as info:
        grid_sql.read_sql_nl(QUESTION, chinook_copy, model=qwen05, policy=POLICY, audit=False)
    _assert_refusal(info.value)


def test_jupyter_prints_the_reason(
    chinook_copy: Path, qwen05: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from grid_sql.ask.asker import Asker

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "grid_sql")
    magics = ip.magics_manager.registry["GridMagics"]
    magics.asker = Asker(chinook_copy, model=qwen05, policy=POLICY, audit=False)
    magics.conversation = magics.asker.conversation()  # what %grid_connect sets up
    assert ip.run_line_magic("ask", f"--out answer {QUESTION}") is None
    out = capsys.readouterr().out
    assert "refused: this question needs " in out and "Employee.BirthDate" in out
    assert "\nneeds: " in out
    assert "answer" not in ip.user_ns
