"""``grid-sql chat`` driven through a pipe (a real subprocess and the real 0.5B model), and the
write confirmation ``ask``/``chat`` share (model-free: a previewed ``run_sql`` statement)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.front.chat import commit_previewed, confirm, print_preview


def _rock_ms(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(
            con.execute("SELECT sum(Milliseconds) FROM Track WHERE GenreId = 1").fetchone()[0]
        )
    finally:
        con.close()


def test_a_write_runs_only_when_confirmed(chinook_copy: Path) -> None:
    asker = Asker(chinook_copy, audit=False, allow_writes=True)
    before = _rock_ms(chinook_copy)
    res = asker.run_sql("UPDATE Track SET Milliseconds = 1 WHERE GenreId = 1", dry_run=True)
    out = io.StringIO()
    print_preview(res, out)
    assert (
        f"would change {res.rowcount} row(s)" in out.getvalue() and "Milliseconds" in out.getvalue()
    )
    piped = io.StringIO("y\n")  # not a terminal: a typed "y" is not a confirmation
    assert not confirm("Run it?", yes=False, stdin=piped, out=out)
    assert "pass --yes" in out.getvalue()
    assert _rock_ms(chinook_copy) == before
    assert confirm("Run it?", yes=True, stdin=piped, out=out)
    done = commit_previewed(asker, res, 100, 10.0)
    assert done.preview is None and done.rowcount == res.rowcount and done.sql == res.sql
    assert _rock_ms(chinook_copy) == res.rowcount  # every Rock track now lasts 1 ms


def test_chat_through_a_pipe_follows_up(chinook_copy: Path) -> None:
    from grid_sql.decode.models import cached_path

    if not cached_path("qwen2.5-coder-0.5b").is_file():
        pytest.skip("qwen2.5-coder-0.5b is not cached (make models)")
    lines = "How many customers are there in each country?\nWhat about only Germany?\n\\q\n"
    proc = subprocess.run(
        [sys.executable, "-m", "grid_sql", "chat", "--db", str(chinook_copy), "--json",
         "--model", "qwen2.5-coder-0.5b", "--no-audit", "--max-tokens", "64"],
        input=lines, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = (json.loads(x) for x in proc.stdout.splitlines())
    assert first["error"] is None and len(first["rows"]) > 20
    assert second["error"] is None and "'Germany'" in second["sql"]
    assert any(4 in row for row in second["rows"])  # Chinook has 4 customers in Germany
