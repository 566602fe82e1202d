"""Deterministic autofix: only fixes the schema alone decides, applied as exact text edits,
kept only if the result is in the role's grammar and passes the full checker (real Chinook
and Spider schemas, the real role grammars)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_sql.ask.asker import _SELECT_ONLY, role_grammar_for
from grid_sql.data import chinook_path
from grid_sql.policy import AppPolicy, Checker, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.autofix import autofix, replay_edits
from grid_sql.schema import introspect

SPIDER = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "spider" / "database"
JOIN = "FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId"


@pytest.fixture(scope="module")
def role():
    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    engine.dispose()
    pol = narrow(sqlite_baseline(snap), _SELECT_ONLY, snap)
    return Checker(snap, pol), role_grammar_for(snap, pol)


def _fixed(role, sql: str) -> str:
    checker, grammar = role
    r = autofix(sql, checker, grammar)
    assert r.complete and r.fixed is not None, (r.dropped, [v.message for v in r.remaining])
    assert checker.check(r.fixed) == [] and not r.remaining
    for e in r.edits:  # every edit names the text it replaced, at its position
        assert sql[e.start : e.end] == e.old
    assert replay_edits(sql, [e.as_list() for e in r.edits]) == r.fixed
    return r.fixed


def _untouched(role, sql: str):
    checker, grammar = role
    r = autofix(sql, checker, grammar)
    assert r.fixed is None and not r.edits and not r.complete
    assert r.remaining and list(r.remaining) == checker.check(sql)
    return r


def test_requalify_in_select_list_where_group_and_order(role):
    tail = "WHERE T1.Name LIKE 'A%' GROUP BY T1.Name ORDER BY T1.Name"
    sql = f"SELECT T1.Title, T1.Name {JOIN} {tail}"
    fixed = _fixed(role, sql)
    assert fixed == f"SELECT T1.Title, T2.Name {JOIN} {tail.replace('T1.', 'T2.')}"
    r = autofix(sql, *role)
    assert [e.kind for e in r.edits] == ["requalify"] * 4
    assert "table `Album` (alias T1) has no column `Name`" in r.edits[0].reason


def test_requalify_in_an_on_clause_but_never_into_a_tautology(role):
    sql = "SELECT T1.Title FROM Album AS T1 JOIN Track AS T2 ON T1.AlbumId = T1.TrackId"
    assert _fixed(role, sql) == (
        "SELECT T1.Title FROM Album AS T1 JOIN Track AS T2 ON T1.AlbumId = T2.TrackId"
    )
    # `T2.Name = T2.Name` would be TRUE: the join condition would be lost
    _untouched(role, "SELECT T2.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.Name = T2.Name")


def test_never_across_query_levels_and_shadowing(role):
    # Album has no Name; the outer Artist has. `A.Name` would run, but it turns a filter on
    # the album (most likely its Title) into a correlation to the artist: a guess, not a fix
    _untouched(
        role,
        "SELECT Name FROM Artist AS A WHERE EXISTS "
        "(SELECT 1 FROM Album AS B WHERE B.ArtistId = A.ArtistId AND B.Name LIKE 'A%')",
    )
    # nor the other way: an outer alias lacking the column, an inner table having it
    _untouched(
        role,
        "SELECT Title FROM Album AS A WHERE EXISTS "
        "(SELECT 1 FROM Artist AS B WHERE B.ArtistId = A.ArtistId AND A.Name LIKE 'A%')",
    )
    # within the subquery's own level it is still certain
    sql = (
        "SELECT Name FROM Artist AS A WHERE EXISTS (SELECT 1 FROM Album AS B JOIN Track AS C "
        "ON C.AlbumId = B.AlbumId WHERE B.ArtistId = A.ArtistId AND B.Milliseconds > 1)"
    )
    assert _fixed(role, sql) == sql.replace("B.Milliseconds", "C.Milliseconds")
    # the outer alias is shadowed by an inner one of the same name: `T1.Name` would bind to
    # the inner Album again, so nothing is certain
    _untouched(
        role,
        "SELECT T1.Name FROM Artist AS T1 WHERE EXISTS "
        "(SELECT 1 FROM Album AS T1 WHERE T1.Name = 'x')",
    )


def test_several_candidates_or_none_are_left_alone(role):
    # Name is a column of Artist, Track, Genre, MediaType, Playlist: two of them in scope
    _untouched(
        role,
        "SELECT T1.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId "
        "JOIN Track AS T3 ON T3.AlbumId = T1.AlbumId",
    )
    # a column of a table the query does not join: a join would be a guess
    _untouched(role, "SELECT Title, Name FROM Album")
    # a close spelling is a guess too
    _untouched(role, "SELECT T1.Titel FROM Album AS T1")
    # an unknown alias
    _untouched(role, f"SELECT T3.Name {JOIN}")


def test_ambiguous_name_qualified_only_when_the_candidates_are_joined_equal(role):
    sql = f"SELECT ArtistId, T1.Title {JOIN} WHERE ArtistId > 3"
    assert _fixed(role, sql) == f"SELECT T1.ArtistId, T1.Title {JOIN} WHERE T1.ArtistId > 3"
    r = autofix(sql, *role)
    assert {e.kind for e in r.edits} == {"equal_join"}
    # the equality may come from WHERE too
    sql = "SELECT ArtistId FROM Album AS T1, Artist AS T2 WHERE T1.ArtistId = T2.ArtistId"
    assert _fixed(role, sql).startswith("SELECT T1.ArtistId FROM")
    # an outer join NULL-extends one side: the candidates differ there
    _untouched(
        role,
        "SELECT ArtistId FROM Artist AS T2 LEFT JOIN Album AS T1 ON T1.ArtistId = T2.ArtistId",
    )
    # not joined on the name: several real candidates
    _untouched(
        role,
        "SELECT Name FROM Artist AS T2 JOIN Genre AS T3 ON T3.GenreId = T2.ArtistId",
    )


def test_equal_join_through_a_derived_table_that_passes_the_column_through(role):
    """defog q149: a bare name a derived table and a joined table both have, joined `=` on
    it. The derived table's column is the base table's, unchanged, so it has that column's
    declared type and the candidates hold the same value; the qualifier is the real table's."""
    derived = "(SELECT ArtistId FROM Artist GROUP BY ArtistId) AS a"
    join = "JOIN Album AS T1 ON a.ArtistId = T1.ArtistId"
    sql = f"SELECT COUNT(DISTINCT ArtistId) FROM {derived} {join}"
    assert _fixed(role, sql) == sql.replace("DISTINCT ArtistId", "DISTINCT T1.ArtistId")
    r = autofix(sql, *role)
    assert {e.kind for e in r.edits} == {"equal_join"}
    # qualified and renamed to itself: still the same column
    sql = (
        "SELECT ArtistId FROM (SELECT x.ArtistId AS ArtistId FROM Artist AS x) AS a "
        "JOIN Album AS T1 ON T1.ArtistId = a.ArtistId"
    )
    assert _fixed(role, sql).startswith("SELECT T1.ArtistId FROM")
    # an expression, an aggregate, a set operation or a column list: the type is not known
    for inner in (
        "(SELECT ArtistId + 0 AS ArtistId FROM Artist) AS a",
        "(SELECT MAX(ArtistId) AS ArtistId FROM Artist) AS a",
        "(SELECT ArtistId FROM Artist UNION SELECT ArtistId FROM Album) AS a",
        "(SELECT ArtistId FROM Artist) AS a(ArtistId)",
    ):
        _untouched(
            role, f"SELECT ArtistId FROM {inner} JOIN Album AS T1 ON a.ArtistId = T1.ArtistId"
        )
    # not joined on the name
    _untouched(
        role,
        "SELECT ArtistId FROM (SELECT ArtistId FROM Artist) AS a JOIN Album AS T1 "
        "ON a.ArtistId = T1.AlbumId",
    )


def test_quoted_identifiers_and_odd_spacing_keep_the_formatting(role):
    sql = (
        'SELECT  T1 .  "Name" ,\n   "T1".Title\nFROM Album  AS "T1"\n  JOIN "Artist" AS "T2" '
        'ON "T1"."ArtistId"=T2.ArtistId'
    )
    fixed = _fixed(role, sql)
    assert fixed == sql.replace('T1 .  "Name"', '"T2"."Name"')
    r = autofix(sql, *role)
    (e,) = r.edits
    assert (e.old, e.new, e.start) == ('T1 .  "Name"', '"T2"."Name"', sql.index("T1 ."))


def test_hidden_columns_are_never_the_target(role):
    checker, _ = role
    snap = checker.snapshot
    pol = narrow(
        narrow(sqlite_baseline(snap), _SELECT_ONLY, snap),
        AppPolicy.from_mapping({"columns": {"deny": {"Artist": ["Name"]}}}),
        snap,
    )
    hidden = (Checker(snap, pol), role_grammar_for(snap, pol))
    r = _untouched(hidden, f"SELECT T1.Title, T1.Name {JOIN}")
    assert not r.proposed


def test_a_fix_outside_the_role_language_is_dropped(role):
    """The statement came from a guide whose language lacks the fixed name (here: a role
    that may not read Artist.Name, while the checker is the baseline's): dropped."""
    checker, _ = role
    snap = checker.snapshot
    pol = narrow(
        narrow(sqlite_baseline(snap), _SELECT_ONLY, snap),
        AppPolicy.from_mapping({"tables": {"deny": ["Artist"]}}),
        snap,
    )
    r = autofix(f"SELECT T1.Title, T1.Name {JOIN}", checker, role_grammar_for(snap, pol))
    assert r.fixed is None and r.proposed and "outside the role's grammar" in (r.dropped or "")


def test_a_fix_the_checker_still_refuses_is_dropped(role):
    checker, grammar = role
    snap = checker.snapshot
    # the role may read Artist.Name but the checker's policy (stricter) may not: the fix is
    # certain by the schema, the full checker refuses the result, so it is dropped
    strict = narrow(
        narrow(sqlite_baseline(snap), _SELECT_ONLY, snap),
        AppPolicy.from_mapping({"columns": {"deny": {"Artist": ["Name"]}}}),
        snap,
    )
    sql = f"SELECT T1.Title, T1.Name {JOIN}"
    found = checker.check(sql)
    r = autofix(sql, Checker(snap, strict), grammar, found)
    assert r.fixed is None and not r.complete


def test_partial_fix_keeps_only_the_certain_edits(role):
    checker, grammar = role
    sql = f"SELECT T1.Name, Title, Milliseconds {JOIN}"  # Milliseconds: Track's, not joined
    r = autofix(sql, checker, grammar)
    assert not r.complete and r.fixed == f"SELECT T2.Name, Title, Milliseconds {JOIN}"
    assert [v.snippet for v in r.remaining] == ["Milliseconds"]
    assert autofix(sql, checker, grammar, partial=False).fixed is None


def test_replay_edits_rejects_edits_that_do_more_than_requalify():
    sql = f"SELECT T1.Name {JOIN}"
    ok = [[7, 14, "T1.Name", "T2.Name", "requalify"]]
    assert replay_edits(sql, ok) == f"SELECT T2.Name {JOIN}"
    assert replay_edits(sql, [[7, 14, "T1.Name", "T2.Title", "requalify"]]) is None
    assert replay_edits(sql, [[7, 14, "T1.Nam", "T2.Name", "requalify"]]) is None
    assert replay_edits(sql, [[7, 14, "T1.Name", "T2.Name", "rewrite"]]) is None
    assert replay_edits(sql, [[6, 14, "T1.Name", "T2.Name", "requalify"]]) is None


def test_aggregate_condition_moves_from_where_to_having(role):
    """An aggregate condition ANDed into the WHERE of a grouped query moves to HAVING; one the
    HAVING already states is dropped, not repeated (Spider q244's repair round, in Chinook
    words); the result runs and equals the statement written with HAVING by hand."""
    checker, grammar = role
    sql = (
        "SELECT T1.Name FROM Artist AS T1 JOIN Album AS T2 ON T1.ArtistId = T2.ArtistId "
        "WHERE T1.Name LIKE 'A%' AND COUNT(*) >= 2 GROUP BY T1.Name ORDER BY T1.Name"
    )
    want = (
        "SELECT T1.Name FROM Artist AS T1 JOIN Album AS T2 ON T1.ArtistId = T2.ArtistId "
        "WHERE T1.Name LIKE 'A%' GROUP BY T1.Name HAVING COUNT(*) >= 2 ORDER BY T1.Name"
    )
    assert _fixed(role, sql) == want
    r = autofix(sql, checker, grammar)
    assert {e.kind for e in r.edits} == {"to_having"}
    con = sqlite3.connect(f"file:{chinook_path()}?mode=ro", uri=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="aggregate"):
            con.execute(sql)
        rows = con.execute(want).fetchall()
        every = con.execute(want.replace(">= 2", ">= 0")).fetchall()
        assert rows and len(rows) < len(every)  # the moved condition still filters groups
    finally:
        con.close()
    dup = "SELECT Name FROM Genre WHERE COUNT(*) < 200 GROUP BY Name HAVING COUNT(*) < 200"
    assert _fixed(role, dup) == "SELECT Name FROM Genre GROUP BY Name HAVING COUNT(*) < 200"
    # HAVING extended, every aggregate conjunct moved, the non-aggregate one kept in place
    sql = (
        "SELECT GenreId FROM Track WHERE max(Milliseconds) > 1 AND GenreId > 2 AND "
        "min(Bytes) > 0 GROUP BY GenreId HAVING sum(UnitPrice) > 1 LIMIT 3"
    )
    assert _fixed(role, sql) == (
        "SELECT GenreId FROM Track WHERE GenreId > 2 GROUP BY GenreId HAVING sum(UnitPrice) > 1"
        " AND max(Milliseconds) > 1 AND min(Bytes) > 0 LIMIT 3"
    )


@pytest.mark.parametrize(
    "sql",
    [
        # no GROUP BY: HAVING would make the query one group, another statement
        "SELECT Name FROM Genre WHERE COUNT(*) < 200",
        # OR / BETWEEN at the top of the WHERE: the condition cannot be split
        "SELECT Name FROM Genre WHERE GenreId = 1 OR COUNT(*) < 200 GROUP BY Name",
        "SELECT Name FROM Genre WHERE GenreId BETWEEN 1 AND 3 AND COUNT(*) < 2 GROUP BY Name",
        # OR at the top of the HAVING: appending `AND c` would bind to its last disjunct
        "SELECT Name FROM Genre WHERE COUNT(*) < 2 GROUP BY Name HAVING max(GenreId) > 1 OR "
        "min(GenreId) > 2",
    ],
)
def test_aggregate_in_where_left_to_the_repair_round(role, sql):
    r = _untouched(role, sql)
    assert {v.kind for v in r.remaining} == {"aggregate_misuse"}


def test_replay_edits_rejects_to_having_edits_that_do_more_than_move():
    sql = "SELECT a FROM t WHERE a = 1 AND count(*) > 2 GROUP BY a"
    where = [16, 44, "WHERE a = 1 AND count(*) > 2", "WHERE a = 1", "to_having"]
    add = [55, 55, "", " HAVING count(*) > 2", "to_having"]
    assert replay_edits(sql, [where, add]) == (
        "SELECT a FROM t WHERE a = 1 GROUP BY a HAVING count(*) > 2"
    )
    # a condition that was not in the WHERE, a rewrite of something else, a wrong keyword
    assert replay_edits(sql, [where, [55, 55, "", " HAVING count(*) > 3", "to_having"]]) is None
    assert replay_edits(sql, [where, [55, 55, "", " HAVING b > 2", "to_having"]]) is None
    assert replay_edits(sql, [[0, 8, "SELECT a", "SELECT b", "to_having"]]) is None
    assert replay_edits(sql, [where, [55, 55, "", " ORDER count(*) > 2", "to_having"]]) is None
    assert replay_edits(sql, [[16, 44, where[2], "a = 1", "to_having"], add]) is None


@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
def test_recorded_spider_generations():
    """First-round statements Qwen2.5-Coder-0.5B wrote under the guide (Spider dev q396, q970,
    bench/results/spider-qwen2.5-coder-0.5b.jsonl); q396's fix is the statement the model's
    own repair round produced."""
    db = SPIDER / "course_teach" / "course_teach.sqlite"
    snap = introspect(f"sqlite:///{db}")
    pol = narrow(sqlite_baseline(snap), _SELECT_ONLY, snap)
    role = (Checker(snap, pol), role_grammar_for(snap, pol))
    sql = (
        "SELECT T2.Hometown FROM teacher AS T1 JOIN course_arrange AS T2 ON T1.Teacher_ID = "
        "T2.Teacher_ID GROUP BY T2.Hometown ORDER BY COUNT(*) DESC LIMIT 1"
    )
    assert _fixed(role, sql) == sql.replace("T2.Hometown", "T1.Hometown")
    db = SPIDER / "dog_kennels" / "dog_kennels.sqlite"
    snap = introspect(f"sqlite:///{db}")
    pol = narrow(sqlite_baseline(snap), _SELECT_ONLY, snap)
    checker = Checker(snap, pol)
    sql = (
        "SELECT T1.role_code, T1.street, T1.city, T1.state FROM Professionals AS T1 JOIN Dogs "
        "AS T2 ON T1.dog_id = T2.dog_id WHERE T2.city LIKE '%West%'"
    )
    r = autofix(sql, checker, role_grammar_for(snap, pol))
    # `T1.dog_id = T2.dog_id` -> `T2.dog_id = T2.dog_id` would be a cross join: left alone;
    # `T2.city` -> `T1.city` is certain, so the statement is only partly fixed
    assert not r.complete and r.fixed == sql.replace("T2.city", "T1.city")


def test_postgres_folding_and_quoted_names():
    """PostgreSQL folds unquoted names: `T1."Name"` moves to the one table with a column
    exactly `Name`, written with the alias as the query spells it; an unquoted `T1.Name`
    means `name`, which no table has, so nothing is certain."""
    from grid_sql.policy.model import Policy, TablePolicy
    from grid_sql.schema import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

    album = TableInfo("album", "table", (ColumnInfo("id", "int4"), ColumnInfo("artist_id", "int4")))
    artist = TableInfo("artist", "table", (ColumnInfo("id", "int4"), ColumnInfo("Name", "text")))
    snap = SchemaSnapshot("postgresql", "public", (SchemaInfo("public", (album, artist)),))
    pol = Policy(
        "postgresql",
        "r",
        "public",
        tuple(
            TablePolicy(
                "public",
                t.name,
                "table",
                frozenset({"select"}),
                tuple((c.name, frozenset({"select"})) for c in t.columns),
            )
            for t in (album, artist)
        ),
        frozenset({"select"}),
    )
    checker = Checker(snap, pol)
    join = 'FROM album AS T1 JOIN artist AS "Ar" ON T1.artist_id = "Ar".id'
    r = autofix(f'SELECT T1."Name" {join}', checker, None)
    assert r.complete and r.fixed == f'SELECT "Ar"."Name" {join}'
    r = autofix(f"SELECT T1.Name {join}", checker, None)
    assert r.fixed is None and [v.kind for v in r.remaining] == ["unknown_column"]
