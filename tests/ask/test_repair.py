"""The checker-guided repair round: what the model is told after a refusal, and (with the real
Qwen2.5-Coder-0.5B) that a wrong-alias statement is repaired through the guide."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.ask.prompt import alias_hints, build_messages, repair_messages, repair_tables
from grid_sql.data import chinook_path
from grid_sql.policy import AppPolicy, Checker, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.checker import proposed_fix
from grid_sql.schema import introspect

SPIDER = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "spider" / "database"


@pytest.fixture(scope="module")
def chinook():
    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    engine.dispose()
    return snap


def _repair(snap, policy, sql: str):
    checker = Checker(snap, policy)
    found = checker.check(sql)
    texts = [v.message for v in found]
    fixes = [v.fix for v in found if v.fix]
    candidate = proposed_fix(sql, found)
    if candidate is not None and checker.check(candidate):
        candidate = None
    msgs = build_messages("Which artist made each album?", snap, policy)
    out = repair_messages(
        msgs,
        sql,
        texts,
        fixes=fixes,
        tables=repair_tables(sql, texts, snap, policy),
        snapshot=snap,
        candidate=candidate,
    )
    assert out[: len(msgs)] == msgs and out[-2] == {"role": "assistant", "content": sql}
    return out[-1]["content"], candidate


def test_wrong_alias_repair_prompt(chinook):
    sql = "SELECT T1.Title, T1.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId"
    text, candidate = _repair(chinook, sqlite_baseline(chinook), sql)
    assert text.startswith("That SQL is wrong:\n1. `T1.Name`: table `Album` (alias T1) has no")
    assert "Fix it: replace `T1.Name` with `T2.Name`." in text
    assert candidate == (
        "SELECT T1.Title, T2.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId"
    )
    assert f"With those fixes the statement reads:\n{candidate}" in text
    # exactly the tables involved, in full
    assert "CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY" in text
    assert "CREATE TABLE Artist (" in text and "CREATE TABLE Track" not in text


def test_join_repair_names_the_owner_table_and_repeated_fixes_are_counted(chinook):
    sql = "SELECT Name, count(*) FROM Album GROUP BY Name"
    text, candidate = _repair(chinook, sqlite_baseline(chinook), sql)
    assert text.count("`Name`: table `Album` has no column `Name`") == 1  # quoted once
    assert (
        "Fix it: add `JOIN Artist ON Artist.ArtistId = Album.ArtistId` and replace `Name` with "
        "`Artist.Name` (all 2 places)."
    ) in text
    assert candidate == (
        "SELECT Artist.Name, count(*) FROM Album JOIN Artist ON Artist.ArtistId = "
        "Album.ArtistId GROUP BY Artist.Name"
    )
    assert "CREATE TABLE Artist (" in text


def test_no_candidate_without_a_mechanical_fix(chinook):
    sql = "SELECT Name FROM Track JOIN Genre ON Track.GenreId = Genre.GenreId"
    text, candidate = _repair(chinook, sqlite_baseline(chinook), sql)
    assert candidate is None and "statement reads" not in text
    assert "`Name` is ambiguous" in text


def test_repair_prompt_never_shows_hidden_columns(chinook):
    pol = narrow(
        sqlite_baseline(chinook),
        AppPolicy.from_mapping({"columns": {"deny": {"Customer": ["Email", "Phone"]}}}),
        chinook,
    )
    text, _ = _repair(chinook, pol, "SELECT FirstName, Mail FROM Customer")
    assert "CREATE TABLE Customer (" in text
    assert "Email" not in text and "Phone" not in text


def test_alias_hints_ignore_table_aliases(chinook):
    sql = (
        "SELECT T1.Title FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId "
        "WHERE T2.Name = 'AC/DC'"
    )
    assert alias_hints(sql, chinook) == []
    bad = (
        "SELECT BillingCountry, SUM(Total) AS rev FROM Invoice GROUP BY BillingCountry "
        "HAVING rev > 1"
    )
    (hint,) = alias_hints(bad, chinook)
    assert "The output alias rev cannot be referred to later" in hint


@pytest.mark.slow  # Qwen2.5-Coder-0.5B on CPU, two generations: ~150 s on a busy 2-core host
@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
def test_real_model_repairs_a_wrong_alias(qwen):
    """Spider dev #397: the 0.5B model writes `T2.Hometown` on course_arrange; the repair
    round (violations, fix, fixed statement, involved tables) gets an accepted statement."""
    from grid_sql.ask.asker import Asker

    db = SPIDER / "course_teach" / "course_teach.sqlite"
    asker = Asker(db, model=qwen, audit=False, max_tokens=96)
    gen = asker.generate_sql("Show the hometowns shared by at least two teachers.")
    assert asker.checker.check(gen.sql) == []
    assert [r.round for r in gen.repairs] == [0]
    (rep,) = gen.repairs
    assert any("`T2.Hometown`" in v for v in rep.violations)
    assert "T2.Hometown" not in gen.sql
