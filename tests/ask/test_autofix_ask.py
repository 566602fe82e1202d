"""The Asker's autofix path end to end with the real SmolLM2-135M: a wrong-alias statement
(the model copies a few-shot example that has one) is fixed without a repair round, shown in
the result, sealed with its edits, and re-derived by ``audit verify``; with ``autofix=False``
the typed refusal is unchanged."""

from __future__ import annotations

import pytest

from grid_sql.ask.prompt import Example
from grid_sql.errors import PolicyViolation

from .conftest import music_asker

QUESTION = "Which artist made each album?"
WRONG = "SELECT T1.title, T1.name FROM album AS T1 JOIN artist AS T2 ON T1.artist_id = T2.artist_id"


@pytest.fixture(scope="module")
def asker(tmp_path_factory, smollm2):
    return music_asker(tmp_path_factory.mktemp("autofix"), smollm2, [Example(QUESTION, WRONG)])


def test_wrong_alias_is_autofixed_sealed_and_verified(asker):
    from grid_sql.audit import Verifier

    res = asker.ask(QUESTION)
    (rep,) = res.repairs
    generated = rep.sql
    assert generated.rstrip(";").strip() == WRONG  # greedy: the model copies its example
    assert rep.kind == "autofix" and rep.round == 0 and "has no column `name`" in rep.violations[0]
    assert [(e["old"], e["new"], e["kind"]) for e in rep.edits] == [
        ("T1.name", "T2.name", "requalify")
    ]
    assert res.sql.startswith(WRONG.replace("T1.name", "T2.name"))
    assert sorted(res.rows) == [("Back in Black", "AC/DC"), ("Balls to the Wall", "Accept")]
    assert res.to_dict()["repairs"][0]["kind"] == "autofix"
    assert "autofixed" in res.audit_summary()
    store = asker.audit
    record = store.get(res.audit_id)
    assert record.final_sql == res.sql and record.seal["autofix"]["generated_sql"] == generated
    report = Verifier(store).verify(res.audit_id)
    assert report.ok and not report.warnings, report.describe()


def test_without_autofix_the_refusal_is_unchanged(asker):
    with pytest.raises(PolicyViolation) as info:
        asker.generate_sql(QUESTION, autofix=False, repair=False)
    err = info.value
    assert err.sql.rstrip(";").strip() == WRONG
    assert [v.kind for v in err.violations] == ["unknown_column"]
    assert [r.kind for r in err.repairs] == ["checker"]
