"""bench/role_language.py's rewrite of SQLite's double-quoted strings (Spider's gold)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rl():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(
        "role_language", REPO / "bench" / "role_language.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["role_language"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def snap():  # type: ignore[no-untyped-def]
    from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

    cols = tuple(ColumnInfo(n, "text") for n in ("Name", "Continent", "Code"))
    country = TableInfo("country", columns=cols)
    return SchemaSnapshot("sqlite", "main", (SchemaInfo("main", (country,)),))


def test_only_the_words_sqlite_reads_as_strings_are_rewritten(rl, snap) -> None:  # type: ignore[no-untyped-def]
    sql = 'SELECT "Name" FROM country WHERE Continent = "Asia" AND Code != "it\'s"'
    assert rl.single_quoted(sql, snap) == (
        "SELECT \"Name\" FROM country WHERE Continent = 'Asia' AND Code != 'it''s'"
    )


def test_aliases_qualified_names_and_plain_text_stay(rl, snap) -> None:  # type: ignore[no-untyped-def]
    for sql in (
        'SELECT Name AS "n" FROM country ORDER BY "n"',
        'SELECT T1."Name" FROM country AS T1',
        "SELECT Name FROM country WHERE Continent = 'Asia'",
        "not sql at all (",
    ):
        assert rl.single_quoted(sql, snap) == sql


def test_a_rewritten_statement_is_inside_the_role_language(rl, snap) -> None:  # type: ignore[no-untyped-def]
    from grid_sql.ask.asker import role_grammar_for
    from grid_sql.parser import ParserRuntime
    from grid_sql.policy import Checker

    pol = rl.select_only(snap)
    rt = ParserRuntime.for_grammar(role_grammar_for(snap, pol, scopes=True, bind_select_list=True))
    chk = Checker(snap, pol)
    sql = 'SELECT Name FROM country WHERE Continent = "Asia"'
    before = rl.measure("t", "t", sql, rt, chk)
    after = rl.measure("t", "t", rl.single_quoted(sql, snap), rt, chk)
    assert before.checker_ok and after.checker_ok
    assert not before.inside and after.inside
