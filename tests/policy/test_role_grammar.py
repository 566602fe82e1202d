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
    assert accepts(
        chinook_role,
        b"SELECT FirstName, Total FROM Customer c JOIN Invoice i "
        b"ON c.CustomerId = i.CustomerId ORDER BY Total DESC LIMIT 5",
    )
    assert accepts(chinook_role, b'SELECT "Name" FROM "Artist"')
    assert accepts(chinook_role, b"select name from ARTIST")  # SQLite folds bare names
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM Employee ")  # denied table
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM sqlite_master ")
    assert not is_viable_prefix(chinook_role, b"SELECT * FROM Salaries")
    # a column that exists only in the denied table is not a column anywhere
    assert not is_viable_prefix(chinook_role, b"SELECT ReportsTo FROM")
    assert is_viable_prefix(chinook_role, b"SELECT CustomerId FROM")


def _rights(snap, grants: dict[str, set[str]]):
    """A Policy giving each named Chinook table exactly ``grants[name]`` (others nothing)."""
    from grid_sql.policy import COLUMN_PRIVILEGES, Policy, TablePolicy

    tables = []
    for sname, t in snap.iter_tables():
        verbs = frozenset(grants.get(t.name, set()))
        cols = tuple((c.name, verbs & frozenset(COLUMN_PRIVILEGES)) for c in t.columns)
        tables.append(TablePolicy(sname, t.name, t.kind, verbs, cols))
    used = set().union(*grants.values())
    return Policy("sqlite", "test", snap.default_schema, tuple(tables), frozenset(used))


def test_table_lexicons_are_verb_scoped() -> None:
    """INSERT INTO / UPDATE / DELETE FROM admit only the tables holding that privilege,
    and FROM admits only readable tables (issue #5 §3)."""
    snap = introspect(open_sqlite(CHINOOK))
    policy = _rights(
        snap,
        {
            "Artist": {"select"},
            "Playlist": {"insert"},  # insert-only: writable, never readable
            "Genre": {"select", "update"},
            "MediaType": {"select", "delete"},
        },
    )
    g = role_grammar(Grammar.dialect("sqlite"), snap, policy)
    assert accepts(g, b"INSERT INTO Playlist (Name) VALUES ('x')")
    assert accepts(g, b"INSERT INTO Playlist (Name) SELECT Name FROM Artist")
    assert not is_viable_prefix(g, b"SELECT * FROM Playlist ")
    assert not is_viable_prefix(g, b"INSERT INTO Artist ")
    assert not is_viable_prefix(g, b"INSERT INTO Genre ")
    assert accepts(g, b"UPDATE Genre SET Name = 'x' WHERE GenreId = 1")
    assert not is_viable_prefix(g, b"UPDATE Artist ")
    assert not is_viable_prefix(g, b"UPDATE MediaType ")
    assert accepts(g, b"DELETE FROM MediaType WHERE MediaTypeId = 9")
    assert not is_viable_prefix(g, b"DELETE FROM Genre ")
    assert not is_viable_prefix(g, b"DELETE FROM Playlist ")
    # reads go through FROM: every readable table, and only those
    for t in (b"Artist", b"Genre", b"MediaType"):
        assert accepts(g, b"SELECT * FROM " + t)
    # a table the role holds no right on is outside every position
    for prefix in (b"SELECT * FROM Track ", b"INSERT INTO Track ", b"DELETE FROM Track "):
        assert not is_viable_prefix(g, prefix)


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_write_targets_schema_qualified(dialect: str) -> None:
    """A qualified write target still goes through the verb's lexicon (PG/MySQL shapes)."""
    g = Grammar.dialect(dialect)
    assert accepts(g, b"INSERT INTO s.t (a) VALUES (1)")
    assert accepts(g, b"UPDATE s.t SET a = 1")
    assert accepts(g, b"DELETE FROM s.t WHERE a = 1")
    assert accepts(g, b"TRUNCATE TABLE s.t")
    if dialect == "mysql":
        assert accepts(g, b"UPDATE t JOIN u ON t.a = u.a SET t.b = u.b")
        assert accepts(g, b"UPDATE t, u SET t.b = u.b WHERE t.a = u.a")


def test_order_by_output_alias(chinook_role: Grammar) -> None:
    """ORDER BY may name an output alias (an IDENT: no lexicon can know it) but a table
    outside the role's lexicon still cannot be read through it."""
    assert accepts(
        chinook_role,
        b"SELECT c.FirstName, SUM(i.Total) AS revenue FROM Customer c JOIN Invoice i "
        b"ON c.CustomerId = i.CustomerId GROUP BY c.CustomerId ORDER BY revenue DESC LIMIT 5",
    )
    assert accepts(chinook_role, b'SELECT Name AS n FROM Artist ORDER BY "n", Name')
    # only bare names: not inside expressions, where it would be a function or a column
    assert not is_viable_prefix(chinook_role, b"SELECT Name AS n FROM Artist ORDER BY n + 1")
    assert not is_viable_prefix(chinook_role, b"SELECT 1 FROM Artist ORDER BY 1 FROM Employee")
    assert not is_viable_prefix(
        chinook_role, b"SELECT 1 FROM Artist ORDER BY (SELECT 1 FROM Employee "
    )


def test_role_grammar_has_no_comments(chinook_role: Grammar) -> None:
    """Comments are outside generation languages (budget sink, hiding place); the L1
    dialect keeps them, and `- -` is still two minus signs."""
    for text in (b"SELECT 1 --", b"SELECT 1 /*", b"SELECT Name FROM Artist -- x\n"):
        assert not is_viable_prefix(chinook_role, text)
        assert is_viable_prefix(Grammar.dialect("sqlite"), text)
    assert accepts(chinook_role, b"SELECT 1 - -1")
    assert accepts(chinook_role, b"SELECT Name\n  FROM Artist\tWHERE 1")
