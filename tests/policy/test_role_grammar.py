"""Policy → grammar: verbs and tables outside a role's rights are outside its language."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.grammar import Grammar
from grid_sql.parser import accepts, is_viable_prefix
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.schema import introspect

CHINOOK = Path(__file__).resolve().parents[2].parent / "shared/data/chinook/Chinook_Sqlite.sqlite"


@pytest.fixture(scope="module")
def chinook_role() -> Grammar:
    engine = open_sqlite(CHINOOK)
    snap = introspect(engine)
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="test"
    )
    policy = narrow(sqlite_baseline(snap), app, snap)
    return role_grammar(Grammar.dialect("sqlite"), snap, policy)


def test_select_only_role_cannot_start_other_verbs(chinook_role: Grammar) -> None:
    for verb in (b"delete", b"drop", b"insert", b"update", b"pragma", b"attach", b"create"):
        assert not is_viable_prefix(chinook_role, verb + b" "), verb


def test_tables_and_columns_restricted(chinook_role: Grammar) -> None:
    assert accepts(chinook_role, b"SELECT FirstName, Total FROM Customer c JOIN Invoice i "
                                 b"ON c.CustomerId = i.CustomerId ORDER BY Total DESC LIMIT 5")
    assert accepts(chinook_role, b'SELECT "Name" FROM "Artist"')
    assert accepts(chinook_role, b"select name from ARTIST")  # SQLite folds bare names
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM Employee ")  # denied table
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM sqlite_master ")
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM Salaries")
    # a column that exists only in the denied table is not a column anywhere
    assert not is_viable_prefix(chinook_role, b"SELECT ReportsTo FROM")
    assert is_viable_prefix(chinook_role, b"SELECT CustomerId FROM")
