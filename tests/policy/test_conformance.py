"""Schema conformance: each class of finding, its quotable message and its fix, on real
schemas (Chinook, Spider); what must not be flagged (USING, correlation, output aliases,
opaque derived tables, the dialect's own functions)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlglot

from grid_sql.data import chinook_path
from grid_sql.policy import AppPolicy, Checker, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.conformance import (
    SchemaView,
    apply_edits,
    check_query,
    sqlite_functions,
    top_clause,
)
from grid_sql.schema import introspect

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SPIDER = DATA / "spider" / "database"


@pytest.fixture(scope="module")
def chinook():
    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    engine.dispose()
    return Checker(snap, sqlite_baseline(snap))


def _spider(db: str) -> Checker:
    snap = introspect(f"sqlite:///{SPIDER / db / f'{db}.sqlite'}")
    return Checker(snap, sqlite_baseline(snap))


def _one(checker: Checker, sql: str):
    found = checker.check(sql)
    assert len(found) == 1, [v.message for v in found]
    v = found[0]
    if v.position is not None and v.snippet is not None:
        assert sql[v.position : v.position + len(v.snippet)] == v.snippet
    return v


def test_wrong_alias_names_the_table_its_columns_and_the_owner(chinook):
    sql = "SELECT T1.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId"
    v = _one(chinook, sql)
    assert v.kind == "unknown_column"
    assert v.message == (
        "`T1.Name`: table `Album` (alias T1) has no column `Name`; it has AlbumId, Title, "
        "ArtistId; `Name` is a column of table `Artist` (alias T2)."
    )
    assert v.fix == "replace `T1.Name` with `T2.Name`"
    assert v.snippet == "T1.Name" and v.position == sql.index("T1.Name")
    assert v.to_dict()["fix"] == v.fix


def test_column_of_an_unjoined_table_gets_a_join_along_the_foreign_key(chinook):
    v = _one(chinook, "SELECT Title, Name FROM Album")
    assert v.message.startswith(
        "`Name`: table `Album` has no column `Name`; it has AlbumId, Title, ArtistId; "
        "`Name` is a column of `Artist`"
    )
    assert "which this query does not join" in v.message
    assert v.fix == (
        "add `JOIN Artist ON Artist.ArtistId = Album.ArtistId` and replace `Name` with "
        "`Artist.Name`"
    )


def test_ambiguous_bare_name(chinook):
    sql = "SELECT Name FROM Track JOIN Genre ON Track.GenreId = Genre.GenreId"
    v = _one(chinook, sql)
    assert v.kind == "ambiguous_column"
    assert v.message == (
        "`Name` is ambiguous: table `Track` and table `Genre` both have a column `Name`; "
        "qualify it as `Track.Name` or `Genre.Name`."
    )
    # USING and NATURAL joins merge the shared column: not ambiguous
    assert chinook.check("SELECT GenreId, Name FROM Genre JOIN Track USING (GenreId)") != []
    assert chinook.check("SELECT GenreId FROM Genre JOIN Track USING (GenreId)") == []
    assert chinook.check("SELECT ArtistId FROM Artist NATURAL JOIN Album") == []


def test_unknown_table_and_unknown_alias(chinook):
    v = _one(chinook, "SELECT Name FROM Artists")
    assert v.kind == "unknown_table"
    assert (
        v.message
        == "`Artists`: there is no table `Artists` in this database; did you mean `Artist`?"
    )
    assert v.fix == "replace `Artists` with `Artist`"
    v = _one(chinook, "SELECT T3.Name FROM Artist AS T1")
    assert v.kind == "unknown_table"
    assert v.message == (
        "`T3.Name`: there is no table or alias `T3` in this query (in scope: `Artist` AS T1); "
        "`Name` is a column of table `Artist` (alias T1)."
    )
    assert v.fix == "replace `T3.Name` with `T1.Name`"


def test_close_name_suggested(chinook):
    v = _one(chinook, "SELECT invoice_date FROM Invoice")
    assert v.message.endswith("did you mean `InvoiceDate`?")
    assert v.fix == "replace `invoice_date` with `InvoiceDate`"


def test_correlated_outer_scope_cte_and_derived_tables(chinook):
    ok = [
        "SELECT Name FROM Artist a WHERE EXISTS "
        "(SELECT 1 FROM Album b WHERE b.ArtistId = a.ArtistId)",
        "SELECT Name FROM Artist WHERE ArtistId IN (SELECT ArtistId FROM Album WHERE Title = Name)",
        "WITH t AS (SELECT ArtistId, count(*) AS n FROM Album GROUP BY ArtistId) "
        "SELECT t.n, a.Name FROM t JOIN Artist a ON a.ArtistId = t.ArtistId",
        "SELECT x.c FROM (SELECT count(*) AS c FROM Track) AS x",
        "WITH t(a, b) AS (SELECT ArtistId, Name FROM Artist) SELECT b FROM t",
        # CTEs that are defined but not in this FROM clause do not make a name ambiguous
        "WITH a AS (SELECT ArtistId, Name FROM Artist), b AS (SELECT ArtistId, Name FROM a) "
        "SELECT Name FROM b ORDER BY ArtistId",
        "SELECT BillingCountry, SUM(Total) AS revenue FROM Invoice GROUP BY BillingCountry "
        "HAVING revenue > 10 ORDER BY revenue DESC",
        "SELECT Name FROM Artist UNION SELECT Name FROM Genre ORDER BY Name",
        "SELECT strftime('%Y', InvoiceDate), substr(BillingCity, 1, 3), ifnull(BillingState, "
        "''), iif(Total > 5, 1, 0), group_concat(BillingCity), round(avg(Total), 2) "
        "FROM Invoice",
    ]
    for sql in ok:
        assert chinook.check(sql) == [], sql
    v = _one(
        chinook,
        "SELECT Name FROM Artist a WHERE EXISTS "
        "(SELECT 1 FROM Album b WHERE b.ArtistId = a.AlbumId)",
    )
    assert v.fix == "replace `a.AlbumId` with `b.AlbumId`"
    v = _one(
        chinook,
        "WITH t AS (SELECT ArtistId, count(*) AS n FROM Album GROUP BY ArtistId) "
        "SELECT t.Title FROM t",
    )
    assert v.message.startswith("`t.Title`: `t` has no column `Title`; it has artistid, n")


def test_derived_table_with_star_is_not_judged(chinook):
    """Columns hidden behind ``*`` cannot be judged by conformance: nothing is guessed."""
    view = SchemaView(chinook.snapshot, chinook.policy, "sqlite")
    sql = "SELECT x.Nope FROM (SELECT * FROM Album) AS x"
    assert check_query(sqlglot.parse_one(sql, read="sqlite"), sql, view) == []


def test_functions_sqlite_lacks(chinook):
    v = _one(chinook, "SELECT YEAR(InvoiceDate) FROM Invoice")
    assert v.kind == "unknown_function"
    assert v.message == ("`YEAR(...)`: SQLite has no function YEAR; use strftime('%Y', x) instead.")
    assert v.fix == "replace `YEAR(...)` with strftime('%Y', x)"
    kinds = {
        f.snippet.lower()
        for f in chinook.check(
            "SELECT DATE_FORMAT(InvoiceDate, '%Y'), EXTRACT(YEAR FROM InvoiceDate), "
            "LEFT(BillingCity, 2), NOW() FROM Invoice"
        )
        if f.kind == "unknown_function" and f.snippet
    }
    assert kinds == {"date_format", "extract", "left", "now"}
    # the list is the linked library's own
    con = sqlite3.connect(":memory:")
    assert {"strftime", "julianday", "group_concat"} <= sqlite_functions()
    assert "year" not in sqlite_functions()
    con.close()


def test_select_top(chinook):
    found = chinook.check("SELECT TOP 5 Name FROM Artist")
    top = [v for v in found if v.kind == "unknown_function"]
    assert [v.message for v in top] == [
        "`TOP 5`: SQLite has no SELECT TOP; end the statement with LIMIT 5 instead."
    ]
    assert top[0].fix == "remove `TOP 5` and append `LIMIT 5`"
    assert top_clause("SELECT Name FROM Artist LIMIT 5", "sqlite") is None


def test_dialect_deny_lists():
    from grid_sql.schema import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

    for dialect, schema, sql, name in [
        ("postgresql", "public", "SELECT ifnull(a, 0), YEAR(b) FROM t", {"ifnull", "YEAR"}),
        ("mysql", "shop", "SELECT strftime('%Y', b), string_agg(a, ',') FROM t", None),
    ]:
        t = TableInfo("t", "table", (ColumnInfo("a", "INT"), ColumnInfo("b", "DATE")), ("a",))
        snap = SchemaSnapshot(dialect, schema, (SchemaInfo(schema, (t,)),))
        found = Checker(snap, sqlite_baseline_like(snap)).check(sql)
        assert {v.kind for v in found} == {"unknown_function"}, [v.message for v in found]
        if name:
            assert {v.snippet for v in found} == name
        ok = Checker(snap, sqlite_baseline_like(snap)).check("SELECT coalesce(a, 0), b FROM t")
        assert ok == []


def sqlite_baseline_like(snap):
    """A permissive policy for a synthetic snapshot of any dialect (SELECT on everything)."""
    from grid_sql.policy.model import Policy, TablePolicy

    tables = tuple(
        TablePolicy(
            s,
            t.name,
            "table",
            frozenset({"select"}),
            tuple((c.name, frozenset({"select"})) for c in t.columns),
        )
        for s, t in snap.iter_tables()
    )
    return Policy(
        dialect=snap.dialect,
        role="r",
        default_schema=snap.default_schema,
        tables=tables,
        statement_verbs=frozenset({"select"}),
    )


def test_postgres_case_folding():
    from grid_sql.schema import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

    t = TableInfo("customer", "table", (ColumnInfo("id", "INT"), ColumnInfo("Phone", "TEXT")))
    snap = SchemaSnapshot("postgresql", "public", (SchemaInfo("public", (t,)),))
    checker = Checker(snap, sqlite_baseline_like(snap))
    assert checker.check('SELECT "Phone", ID FROM Customer') == []
    (v,) = checker.check("SELECT Phone FROM customer")
    assert v.kind == "unknown_column" and v.fix == 'replace `Phone` with `"Phone"`'


def test_suggestions_never_name_hidden_columns(chinook):
    snap = chinook.snapshot
    pol = narrow(
        sqlite_baseline(snap),
        AppPolicy.from_mapping({"columns": {"deny": {"Customer": ["Email", "Phone"]}}}),
        snap,
    )
    (v,) = Checker(snap, pol).check("SELECT Mail FROM Customer")
    assert "FirstName" in v.message and "Email" not in v.message and "Phone" not in v.message


@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
def test_spider_model_mistakes():
    """Statements Qwen2.5-Coder-0.5B wrote under the constrained guide (Spider dev)."""
    v = _one(
        _spider("course_teach"),
        "SELECT T2.Hometown FROM teacher AS T1 JOIN course_arrange AS T2 "
        "ON T1.Teacher_ID = T2.Teacher_ID GROUP BY T1.Hometown HAVING COUNT(*) >= 2",
    )
    assert v.message == (
        "`T2.Hometown`: table `course_arrange` (alias T2) has no column `Hometown`; it has "
        "Course_ID, Teacher_ID, Grade; `Hometown` is a column of table `teacher` (alias T1)."
    )
    assert v.fix == "replace `T2.Hometown` with `T1.Hometown`"
    world = _spider("world_1")
    v = _one(world, "SELECT Code FROM countrylanguage WHERE Language = 'Spanish'")
    assert "`countrylanguage.CountryCode` holds the same values" in v.message
    assert v.fix == "replace `Code` with `CountryCode`"
    v = _one(world, "SELECT Name FROM countrylanguage ORDER BY Percentage DESC LIMIT 1")
    assert v.fix == (
        "add `JOIN country ON country.Code = countrylanguage.CountryCode` and replace `Name` "
        "with `country.Name`"
    )
    v = _one(_spider("pets_1"), "SELECT PetType, weight FROM Pets ORDER BY PetAge ASC LIMIT 1")
    assert v.fix == "replace `PetAge` with `pet_age`"


@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
def test_wrong_table_is_swapped_not_joined():
    """Spider dev #10: every column the query reads lives on one other table, so the fix is
    that table (a join through singer_in_concert would change the counts)."""
    from grid_sql.policy.checker import proposed_fix

    checker = _spider("concert_singer")
    sql = "SELECT Country, COUNT(*) FROM singer_in_concert GROUP BY Country"
    found = checker.check(sql)
    assert [v.position for v in found] == [sql.index("Country"), sql.rindex("Country")]
    assert {v.fix for v in found} == {"replace table `singer_in_concert` with `singer`"}
    assert proposed_fix(sql, found) == "SELECT Country, COUNT(*) FROM singer GROUP BY Country"
    # a table that provides some of the columns is kept, and the missing one joined
    sql = "SELECT Name, Year FROM singer_in_concert JOIN concert USING (concert_ID)"
    assert all("replace table" not in (v.fix or "") for v in checker.check(sql))


def test_join_is_inserted_after_the_join_clause_it_extends(chinook):
    from grid_sql.policy.checker import proposed_fix

    sql = "SELECT g.Name, t.Title FROM Genre AS g JOIN Track AS t ON (t.GenreId = g.GenreId)"
    fixed = proposed_fix(sql, chinook.check(sql))
    assert fixed == (
        "SELECT g.Name, Album.Title FROM Genre AS g JOIN Track AS t ON (t.GenreId = g.GenreId) "
        "JOIN Album ON Album.AlbumId = t.AlbumId"
    )
    assert chinook.check(fixed) == []


def test_join_through_a_link_table(chinook):
    """No foreign key between the two tables: two hops through the many-to-many link."""
    (v,) = chinook.check("SELECT Name, Composer FROM Playlist")
    assert v.fix == (
        "add `JOIN PlaylistTrack ON PlaylistTrack.PlaylistId = Playlist.PlaylistId JOIN Track "
        "ON Track.TrackId = PlaylistTrack.TrackId` and replace `Composer` with `Track.Composer`"
    )


def test_sqlite_subquery_group_and_order_by_do_not_see_outer_columns(chinook):
    """Chinook question 14 (repair arm): SQLite resolves a subquery's GROUP BY/ORDER BY
    against its own FROM only ("no such column: ReportsTo"); WHERE, the select list and
    window clauses do see the enclosing query. Each verdict is checked against SQLite."""
    con = sqlite3.connect(f"file:{chinook_path()}?mode=ro", uri=True)
    outer = "SELECT FirstName FROM Employee e WHERE EmployeeId IN "
    bad = [
        "SELECT FirstName, LastName FROM Employee WHERE EmployeeId IN (SELECT ReportsTo FROM "
        "Customer JOIN Invoice ON Invoice.CustomerId = Customer.CustomerId GROUP BY ReportsTo "
        "ORDER BY SUM(Invoice.Total) DESC LIMIT 1)",
        outer + "(SELECT 1 FROM Customer ORDER BY ReportsTo)",
        outer + "(SELECT 1 FROM Customer GROUP BY ReportsTo + 1)",
        outer + "(SELECT 1 FROM Customer GROUP BY e.ReportsTo)",
        outer + "(SELECT 1 FROM Customer GROUP BY (SELECT ReportsTo))",
    ]
    ok = [
        outer + "(SELECT ReportsTo FROM Customer)",
        outer + "(SELECT 1 FROM Customer WHERE ReportsTo = 1)",
        outer + "(SELECT ReportsTo AS r FROM Customer GROUP BY r)",
        outer + "(SELECT sum(1) OVER (ORDER BY ReportsTo) FROM Customer)",
        outer + "(SELECT 1 FROM Customer GROUP BY (SELECT max(Total) FROM Invoice "
        "WHERE Invoice.CustomerId = Customer.CustomerId))",
    ]
    for sql in bad:
        with pytest.raises(sqlite3.OperationalError, match="no such column"):
            con.execute(sql).fetchall()
        found = chinook.check(sql)
        assert len(found) == 1, (sql, [v.message for v in found])
        assert "GROUP BY and ORDER BY against the subquery's own FROM only" in found[0].message
    for sql in ok:
        con.execute(sql).fetchall()
        assert chinook.check(sql) == [], sql
    v = _one(chinook, bad[0])
    assert v.kind == "unknown_column" and v.snippet == "ReportsTo"
    assert v.position == bad[0].index("GROUP BY ReportsTo") + len("GROUP BY ")
    con.close()


def test_three_part_name_whose_first_part_is_no_schema(chinook):
    """`a.b.c` is schema.table.column: with `a` no schema it cannot resolve (SQLite: "no such
    column"), which the checker used to pass (Spider runs: `TV_Channel.id . ID`)."""
    import sqlite3

    sql = "SELECT T1.ArtistId . Name FROM Artist AS T1"
    v = _one(chinook, sql)
    assert v.kind == "unknown_column" and v.snippet == "T1.ArtistId . Name"
    assert "`T1` is not a schema of this database" in v.message
    assert v.fix == "replace `T1.ArtistId . Name` with `T1.ArtistId`"  # `b` is a column of `a`
    with pytest.raises(sqlite3.OperationalError, match="no such column"):
        sqlite3.connect(chinook_path()).execute(sql)
    v = _one(chinook, "SELECT Name FROM Artist WHERE x.y.z = 1")
    assert v.kind == "unknown_column" and v.fix is None
    # a real schema: resolved as before (SQLite's main; the policy checker judges the rest)
    assert chinook.check("SELECT main.Artist.Name FROM Artist") == []


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("SELECT T1.Name FROM Artist AS T1 JOIN Album AS T1 ON 1 = 1", "T1"),
        ("SELECT Title FROM Album WHERE AlbumId IN (SELECT 1 FROM Track a, Genre a)", "a"),
    ],
)
def test_a_name_bound_twice_is_a_finding_not_a_crash(chinook, sql: str, name: str):
    """sqlglot's scope raises on a reused FROM name (seen in model output); the checker
    reports it instead of crashing. PostgreSQL and MySQL refuse such a statement; SQLite
    runs it, reading the name as whichever item it finds first."""
    v = _one(chinook, sql)
    assert v.kind == "duplicate_alias" and f"`{name}` names two FROM items" in v.message


def test_a_bare_name_of_another_schemas_table_names_its_schema():
    """A bare table name resolves in the default schema only (PostgreSQL's search_path): the
    same table in another schema is refused, and the message must name it with its schema
    (it used to suggest the refused bare word again: defog's big catalog, `FROM restaurant`
    for `restaurants.restaurant`); a name in several schemas lists them, with no edit."""
    from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

    def t(name: str, *cols: str) -> TableInfo:
        return TableInfo(name, columns=tuple(ColumnInfo(c, "text") for c in cols))

    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo("public", (t("distractor", "id"),)),
            SchemaInfo("restaurants", (t("restaurant", "id", "name"),)),
            SchemaInfo("academic", (t("author", "aid", "name"),)),
            SchemaInfo("scholar", (t("author", "authorid", "authorname"),)),
        ),
    )
    checker = Checker(snap, sqlite_baseline(snap))
    assert checker.check("SELECT name FROM restaurants.restaurant") == []
    sql = "SELECT name FROM restaurant AS r"
    v = _one(checker, sql)
    assert v.kind == "unknown_table"
    assert v.message == (
        "`restaurant`: there is no table `restaurant` in the default schema `public`; "
        "it is `restaurants.restaurant` (write its schema)"
    )
    assert v.fix == "replace `restaurant` with `restaurants.restaurant`"
    assert apply_edits(sql, v.edits) == "SELECT name FROM restaurants.restaurant AS r"
    assert checker.check(apply_edits(sql, v.edits) or "") == []
    v = _one(checker, "SELECT name FROM author")
    assert "it is in several schemas" in v.message
    assert "academic.author, scholar.author" in v.message
    assert not v.edits
    # a near miss in the default schema keeps its suggestion
    assert _one(checker, "SELECT id FROM distractors").message.endswith(
        "did you mean `distractor`?"
    )
