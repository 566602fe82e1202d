"""An identical retry is detected and not run twice (issue #25 §3): the comparison on the three
dialects' tokenizers, and the real SmolLM2-135M writing its refused statement again."""

from __future__ import annotations

from typing import Any

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.prompt import Example
from grid_sql.ask.retry import same_statement
from grid_sql.errors import ExecutionError

from .conftest import music_asker

DIALECTS = ("sqlite", "postgresql", "mysql")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_spacing_keyword_case_comments_and_semicolon_do_not_make_a_new_statement(dialect):
    a = "SELECT count(DISTINCT substr(title)) FROM album WHERE x = 'Rock'"
    for b in (
        a + ";",
        "select  COUNT(distinct substr(title))\nfrom album where x='Rock' ;",
        "SELECT count(DISTINCT substr(title)) /* again */ FROM album WHERE x = 'Rock'",
    ):
        assert same_statement(a, b, dialect), b


@pytest.mark.parametrize("dialect", DIALECTS)
def test_names_literals_and_structure_are_compared_exactly(dialect):
    a = "SELECT count(DISTINCT substr(title)) FROM album WHERE x = 'Rock'"
    for b in (
        "SELECT count(DISTINCT substr(title)) FROM album WHERE x = 'rock'",  # a literal
        "SELECT count(DISTINCT substr(\"Title\")) FROM album WHERE x = 'Rock'",  # quoted
        "SELECT count(substr(title)) FROM album WHERE x = 'Rock'",
        "SELECT count(DISTINCT substr(title, 1)) FROM album WHERE x = 'Rock'",
        "SELECT count(DISTINCT substr(title)) FROM album WHERE x = 'Rock' LIMIT 1",
    ):
        assert not same_statement(a, b, dialect), b


def test_unquoted_names_fold_where_the_server_folds_them():
    a, b = "SELECT Title FROM Album", "SELECT title FROM album"
    assert same_statement(a, b, "sqlite") and same_statement(a, b, "postgresql")
    assert not same_statement(a, b, "mysql")  # table names are case-sensitive there
    assert same_statement("SELECT COUNT(*) FROM t", "select count(*) from t", "mysql")


def test_quoted_names_keep_their_case():
    assert not same_statement('SELECT "Name" FROM t', 'SELECT "name" FROM t', "postgresql")
    assert not same_statement("SELECT `Name` FROM t", "SELECT `name` FROM t", "mysql")
    assert same_statement('SELECT "Name" FROM t', 'select "Name" from t;', "postgresql")


def test_an_identical_retry_is_not_run_twice(tmp_path, smollm2, monkeypatch):
    # Copying its few-shot example, SmolLM2 writes a one-argument substring(), which SQLite
    # refuses; given the refusal it writes the same statement again (greedy), plus a ';'.
    question = "How many albums are there?"
    asker = music_asker(
        tmp_path, smollm2, [Example(question, "SELECT count(DISTINCT substr(title)) FROM album")]
    )
    made: list[str] = []
    ran: list[str] = []
    real_gen, real_exec = Asker.generate_sql, Asker._execute

    def gen_spy(self: Asker, q: str, **o: Any) -> Any:
        g = real_gen(self, q, **o)
        made.append(g.sql)
        return g

    def exec_spy(self: Asker, sql: str, *a: Any, **k: Any) -> Any:
        ran.append(sql)
        return real_exec(self, sql, *a, **k)

    monkeypatch.setattr(Asker, "generate_sql", gen_spy)
    monkeypatch.setattr(Asker, "_execute", exec_spy)
    with pytest.raises(ExecutionError, match="wrong number of arguments") as err:
        asker.ask(question)
    assert len(made) == 2 and same_statement(made[0], made[1], "sqlite")
    assert "not run twice" in str(err.value)
    assert ran == made[:1]  # the database saw the statement once
    # the error names the refused statement and both generations' audit records
    assert err.value.sql == made[0]
    assert len(err.value.audit_ids) >= 2 and all(err.value.audit_ids)
