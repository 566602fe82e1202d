"""A statement the checker passes but the database refuses gets the unused repair round, with
the database's message quoted back (real SmolLM2-135M, real SQLite; following a few-shot example
the model writes a one-argument `substring(...)`, which SQLite rejects: the checker knows the
function, not its arity)."""

from __future__ import annotations

from typing import Any

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.prompt import Example
from grid_sql.ask.result import GeneratedSQL, Repair
from grid_sql.errors import ExecutionError, OptionError, StatementTimeout

from .conftest import music_asker

QUESTION = "How many different album titles and artists are there?"
REFUSED = "SELECT count(DISTINCT substr(title)) FROM album"


@pytest.fixture(scope="module")
def asker(tmp_path_factory, smollm2):
    return music_asker(tmp_path_factory.mktemp("execrepair"), smollm2, [Example(QUESTION, REFUSED)])


def test_checker_passes_what_the_database_refuses(asker):
    assert asker._mode(False).checker.check(REFUSED) == []
    with pytest.raises(ExecutionError, match="wrong number of arguments") as err:
        asker.run_sql(REFUSED)
    assert err.value.sql is None  # the caller's own statement: nothing to name


def test_database_refusal_goes_back_for_the_repair_round(asker, monkeypatch):
    calls: list[dict[str, Any]] = []
    made: list[str] = []
    real = Asker.generate_sql

    def spy(self: Asker, question: str, **options: Any) -> GeneratedSQL:
        calls.append(dict(options))
        gen = real(self, question, **options)
        made.append(gen.sql)
        return gen

    monkeypatch.setattr(Asker, "generate_sql", spy)
    try:
        res = asker.ask(QUESTION)
    except ExecutionError as exc:  # the repaired statement was refused too: typed, not retried
        assert "the database rejected the statement" in str(exc)
        assert exc.sql in made and exc.audit_ids  # the refused statement, named and audited
        res = None
    assert len(calls) == 2, calls  # the first round, then the repair round with the message
    assert "refused" not in calls[0]
    sql, problems = calls[1]["refused"]
    assert sql == made[0] and asker._mode(False).checker.check(sql) == []
    assert len(problems) == 1 and "wrong number of arguments to function" in problems[0]
    if res is not None:
        first = res.repairs[0]
        assert first.kind == "execution" and first.round == 0 and first.sql == sql
        assert res.audit_id is not None and res.sql != sql


def test_generate_sql_with_a_refused_statement_is_one_repair_round(asker):
    gen = asker.generate_sql(QUESTION, refused=(REFUSED, ["the database said no"]))
    assert gen.repairs[0] == Repair(REFUSED, ["the database said no"], 0, kind="execution")
    assert len(gen.audit_ids) == len([r for r in gen.repairs if r.kind != "autofix"])
    with pytest.raises(OptionError):
        asker.generate_sql(QUESTION, refused=(REFUSED, []))


def test_no_execution_repair_without_the_round_or_for_timeouts_and_writes(asker, monkeypatch):
    gen = GeneratedSQL(question=QUESTION, sql=REFUSED, stop_reason="eos", audit_id=None)
    refused = ExecutionError("the database rejected the statement: x")
    assert asker._may_repair_execution(gen, refused, False, {})
    assert not asker._may_repair_execution(gen, refused, False, {"repair": False})
    assert not asker._may_repair_execution(gen, refused, True, {})
    assert not asker._may_repair_execution(gen, StatementTimeout("slow"), False, {})
    gen.repairs = [Repair("SELECT x", ["no such column"], 0)]
    assert not asker._may_repair_execution(gen, refused, False, {})
    gen.repairs = [Repair("SELECT x", ["no such column"], 0, kind="autofix")]
    assert asker._may_repair_execution(gen, refused, False, {})
    # with repair off, the database's refusal is raised as is, after one generation
    calls: list[int] = []
    real = Asker.generate_sql
    monkeypatch.setattr(
        Asker, "generate_sql", lambda self, q, **o: calls.append(1) or real(self, q, **o)
    )
    with pytest.raises(ExecutionError, match="wrong number of arguments"):
        asker.ask(QUESTION, repair=False)
    assert calls == [1]
