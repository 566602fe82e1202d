"""Honest answers (issue #30): a question that needs objects the role may not read is refused
with the reason, never answered with a different, allowed query. Real Qwen2.5-Coder-0.5B
through llama.cpp, greedy, on Chinook with Employee and Customer's Email/Phone denied; plus
the reading of blocked favourites itself on the real Qwen2 vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.intent import denied_intents
from grid_sql.decode.loop import BlockedIntent
from grid_sql.errors import PolicyRefusal
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect

POLICY = {
    "verbs": ["select"],
    "tables": {"deny": ["Employee"]},
    "columns": {"deny": {"Customer": ["Email", "Phone"]}},
}


@pytest.fixture(scope="module")
def asker(tmp_path_factory: pytest.TempPathFactory, qwen: object) -> Asker:
    import shutil

    from grid_sql.data import chinook_path

    db = tmp_path_factory.mktemp("refusal") / "chinook.sqlite"
    shutil.copyfile(chinook_path(), db)
    return Asker(db, model=qwen, policy=POLICY, audit=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "needs"),
    [
        ("Show me the employees' birth dates.", "Employee.BirthDate"),
        (
            "What are the phone numbers and email addresses of our customers in Brazil?",
            "Customer.Phone",
        ),
        ("List the names of all employees and their titles.", "Employee"),
    ],
)
def test_questions_needing_denied_objects_are_refused(
    asker: Asker, question: str, needs: str
) -> None:
    with pytest.raises(PolicyRefusal) as info:
        asker.ask(question)
    assert needs in info.value.needs
    assert "may not read" in str(info.value) and "nothing was executed" in str(info.value)


def test_ordinary_questions_still_answer(asker: Asker) -> None:
    r = asker.ask("How many tracks are there?")
    assert r.rows == [(3503,)]


def test_answer_allowed_part_keeps_the_old_behaviour(asker: Asker, qwen: object) -> None:
    other = Asker(
        asker.bind, model=qwen, policy=POLICY, audit=False, on_denied="answer_allowed_part"
    )  # type: ignore[arg-type]
    r = other.ask("What are the phone numbers and email addresses of our customers in Brazil?")
    assert "Phone" not in r.sql and "Email" not in r.sql  # an allowed query, as before


def _intents(prefix: bytes, fav: bytes, vocab: object) -> list[str]:
    from ..mask.helpers import greedy_tokens

    snap = introspect(
        open_sqlite(
            Path(__file__).resolve().parents[2].parent / "shared/data/chinook/Chinook_Sqlite.sqlite"
        )
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(POLICY), snap)
    ids = greedy_tokens("qwen2", prefix)
    tok = vocab.token_bytes.index(fav)  # type: ignore[attr-defined]
    found = denied_intents(ids, [BlockedIntent(len(ids), tok, 0.9, 0.9)], vocab, snap, pol)  # type: ignore[arg-type]
    return sorted({n for f in found for n in f.needs})


def test_reading_blocked_favourites() -> None:
    from ..mask.helpers import vocab

    v = vocab("qwen2")
    assert _intents(b"SELECT c.FirstName FROM Customer c WHERE c", b".Email", v) == [
        "Customer.Email"
    ]
    assert _intents(b"SELECT BirthDate", b" FROM", v) == ["Employee.BirthDate"]
    assert _intents(b"SELECT * FROM", b" Employee", v) == ["Employee"]
    # names the role may read, or too short to say, are no evidence
    assert _intents(b"SELECT", b" FirstName", v) == []
    assert _intents(b"SELECT * FROM", b" Em", v) == []
    assert _intents(b"SELECT Title FROM", b" Album", v) == []


def _asked(question: str) -> list[str]:
    from grid_sql.ask.intent import question_intents

    snap = introspect(
        open_sqlite(
            Path(__file__).resolve().parents[2].parent / "shared/data/chinook/Chinook_Sqlite.sqlite"
        )
    )
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(POLICY), snap)
    return sorted({n for f in question_intents(question, snap, pol) for n in f.needs})


def test_questions_that_name_a_denied_object() -> None:
    """The prompt shows only the role's schema, so the 1.5B answered "phone numbers and email
    addresses" with `SELECT Fax, SupportRepId` without ever trying to write Phone: the
    question's own words are evidence too (case, plurals and `e-mail` folded)."""
    assert _asked("What are the phone numbers and e-mail addresses of customers in Brazil?") == [
        "Customer.Email",
        "Customer.Phone",
        "Employee.Email",
        "Employee.Phone",
    ]
    assert _asked("Show me the employees' birth dates.") == ["Employee", "Employee.BirthDate"]
    assert _asked("Which BirthDate is the earliest?") == ["Employee.BirthDate"]
    # names the role may also read elsewhere, and words that only resemble a denied name
    assert _asked("List the album titles and the customers' fax numbers.") == []
    assert _asked("Which support rep id serves the most customers?") == []
    assert _asked("Show the billing address and city of every invoice.") == []
    assert _asked("How many tracks are in each genre?") == []


def test_a_question_naming_a_denied_object_is_refused_before_generating(asker: Asker) -> None:
    with pytest.raises(PolicyRefusal) as info:
        asker.generate_sql("What are the email addresses of our customers in Brazil?")
    assert info.value.needs == ["Customer.Email", "Employee.Email"]
    assert "the question asks for email" in str(info.value)
    assert info.value.sql is None and info.value.audit_ids == ()
