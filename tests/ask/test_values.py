"""Example values in the prompt (opt-in): only readable, short, one-line text values of
columns that are no foreign key, read through the role's connection, quoted safely."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.prompt import build_messages
from grid_sql.ask.values import ColumnValues, column_values
from grid_sql.data import chinook_path
from grid_sql.errors import OptionError
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("values") / "v.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE country (code TEXT PRIMARY KEY, name TEXT, secret TEXT, notes TEXT,
                              area REAL);
        CREATE TABLE lang (country TEXT REFERENCES country(code), official TEXT,
                           name TEXT);
        INSERT INTO country VALUES
            ('NL', 'Netherlands', 's1', 'short', 41.5),
            ('BE', 'Belgium', 's2', 'a note much too long for a value!', 30.7),
            ('FR', 'France', 's3', NULL, 551.7),
            ('DE', 'Germany', 's4', 'x', 357.6);
        INSERT INTO lang VALUES ('NL', 'T', 'Dutch'), ('BE', 'T', 'Dutch'), ('BE', 'F', 'It''s'),
                                ('FR', 'T', 'French');
        """
    )
    con.commit()
    con.close()
    return path


def _role(path: Path, rules: dict[str, object]):  # noqa: ANN202
    engine = open_sqlite(path)
    snap = introspect(engine)
    return engine, snap, narrow(sqlite_baseline(snap), AppPolicy.from_mapping(rules), snap)


def test_only_readable_short_text_non_key_columns(db: Path) -> None:
    engine, snap, pol = _role(
        db, {"verbs": ["select"], "columns": {"deny": {"country": ["secret"]}}}
    )
    try:
        vals = column_values(engine, snap, pol, per_column=3)
    finally:
        engine.dispose()
    country = vals[("main", "country")]
    assert "secret" not in country  # denied: never read into a prompt
    assert "notes" not in country  # one value longer than max_len: free text, left out
    assert "area" not in country  # not text
    assert country["code"] == ColumnValues(country["code"].values, complete=False)
    assert len(country["code"].values) == 3
    lang = vals[("main", "lang")]
    assert "country" not in lang  # a foreign key: its values are shown at country.code
    assert lang["official"] == ColumnValues(("T", "F"), complete=True)
    assert set(lang["name"].values) == {"Dutch", "It's", "French"} and lang["name"].complete


def test_comment_quotes_values_and_says_whether_complete() -> None:
    assert ColumnValues(("T", "F"), True).comment() == "/* one of 'T', 'F' */"
    assert ColumnValues(("It's",), False).comment() == "/* e.g. 'It''s' */"


def test_prompt_lines_and_asker_option(db: Path) -> None:
    engine, snap, pol = _role(db, {"verbs": ["select"]})
    try:
        vals = column_values(engine, snap, pol, per_column=2)
    finally:
        engine.dispose()
    text = build_messages("official languages", snap, pol, values=vals)[0]["content"]
    assert "official TEXT /* one of 'T', 'F' */" in text
    assert "country TEXT REFERENCES country(code), " in text
    plain = build_messages("official languages", snap, pol)[0]["content"]
    assert "/*" not in plain
    asker = Asker(db, audit=False, example_values=2)
    assert "official TEXT /* one of 'T', 'F' */" in asker.messages("x")[0]["content"]
    assert "/*" not in Asker(db, audit=False).messages("x")[0]["content"]
    with pytest.raises(OptionError):
        Asker(db, audit=False, example_values=-1)


def test_chinook_values_are_real_rows() -> None:
    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    pol = sqlite_baseline(snap)
    try:
        vals = column_values(engine, snap, pol, per_column=3)
    finally:
        engine.dispose()
    genre = vals[("main", "Genre")]["Name"]
    assert not genre.complete and len(genre.values) == 3
    con = sqlite3.connect(chinook_path())
    names = {r[0] for r in con.execute("SELECT Name FROM Genre")}
    con.close()
    assert set(genre.values) <= names
    assert "SupportRepId" not in vals[("main", "Customer")]  # foreign key
