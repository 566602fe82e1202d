"""The scope rule on real schemas: what a column position admits with scopes on.

Each check names every column of the database at a position and asks the scoped runtime
which ones keep the statement viable, so the expected sets are the tables' columns as the
catalog lists them (Spider ``concert_singer``, Chinook).
"""

from __future__ import annotations

import pytest

from grid_sql.errors import LexiconError, ParseError
from grid_sql.grammar import Grammar
from grid_sql.grammar.scope import ScopeTable
from grid_sql.parser import IncrementalParser, ParserRuntime

from .helpers import role, scoped, snapshot

DB = "concert_singer"


def columns(db: str, *tables: str) -> set[str]:
    out: set[str] = set()
    for _, t in snapshot(db).iter_tables():
        if not tables or t.name in tables:
            out |= set(t.column_names)
    return out


def admitted(g: Grammar, prefix: str, suffix: str = " = 1", db: str = DB) -> set[str]:
    """The columns ``c`` of the database for which ``prefix + c + suffix`` is viable."""
    rt = ParserRuntime.for_grammar(g)
    return {c for c in columns(db) if rt.advance(rt.initial, (prefix + c + suffix).encode())}


def test_qualifier_admits_only_its_tables_columns() -> None:
    q = "SELECT T1.Name FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.concert_ID WHERE "
    assert admitted(scoped(DB), q + "T2.") == columns(DB, "concert")
    assert admitted(scoped(DB), q + "T1.") == columns(DB, "singer")
    # unscoped: every column of the schema
    assert admitted(role(DB), q + "T2.") == columns(DB)
    # a table named without alias binds its own name
    assert admitted(scoped(DB), "SELECT * FROM stadium WHERE stadium.") == columns(DB, "stadium")


def test_wrong_alias_column_is_not_even_a_prefix() -> None:
    """After a bound ``T2.`` no other identifier terminal can follow (no three-part name),
    so the model cannot spell a column of another table there at all."""
    rt = ParserRuntime.for_grammar(scoped(DB))
    base = "SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.concert_ID WHERE T2."
    assert rt.advance(rt.initial, (base + "Th").encode()) is not None  # Theme
    assert rt.advance(rt.initial, (base + "Ag").encode()) is None  # Age is singer's
    assert rt.advance(rt.initial, (base + "Age").encode()) is None
    rt0 = ParserRuntime.for_grammar(role(DB))
    assert rt0.advance(rt0.initial, (base + "Age = 1").encode()) is not None


def test_where_after_from_admits_only_in_scope_columns() -> None:
    assert admitted(scoped(DB), "SELECT * FROM singer WHERE ") == columns(DB, "singer") | {"Year"}
    # (Year: a date-unit word stays admitted everywhere, see grammar/scope.py KEYWORD_ARGS)
    two = "SELECT * FROM singer AS T1 JOIN singer_in_concert AS T2 ON "
    assert admitted(scoped(DB), two) == columns(DB, "singer", "singer_in_concert") | {"Year"}
    for clause in (" GROUP BY ", " ORDER BY "):
        # (a bare name alone in ORDER BY may be an output alias, any IDENT: hence `+ 1`)
        got = admitted(scoped(DB), "SELECT count(*) FROM concert" + clause, suffix=" + 1")
        assert got == columns(DB, "concert")


def test_select_list_before_from_is_unrestricted() -> None:
    """Proposition 11: the select list precedes FROM, so nothing is known there."""
    assert admitted(scoped(DB), "SELECT ", suffix=" FROM") == columns(DB)
    assert admitted(scoped(DB), "SELECT T9.", suffix=" FROM") == columns(DB)
    # and the statement completes when the column belongs to the table named later
    assert ParserRuntime.for_grammar(scoped(DB)).advance(
        ParserRuntime.for_grammar(scoped(DB)).initial, b"SELECT T2.Theme FROM concert AS T2"
    )


def test_correlated_subquery_sees_outer_tables() -> None:
    q = (
        "SELECT Name FROM singer AS T1 WHERE EXISTS (SELECT 1 FROM singer_in_concert AS T3 "
        "WHERE T3.Singer_ID = T1.Singer_ID AND "
    )
    assert admitted(scoped(DB), q) == columns(DB, "singer", "singer_in_concert") | {"Year"}
    assert admitted(scoped(DB), q + "T1.") == columns(DB, "singer")
    # the inner alias shadows an outer one of the same name
    q2 = "SELECT * FROM singer AS T WHERE EXISTS (SELECT 1 FROM concert AS T WHERE T."
    assert admitted(scoped(DB), q2) == columns(DB, "concert")
    # an inner select list (before its FROM) is unrestricted again
    q3 = "SELECT * FROM singer AS T1 WHERE Age > (SELECT T1."
    assert admitted(scoped(DB), q3, suffix=" FROM concert)") == columns(DB)


def test_undecidable_positions_fall_back_to_the_lexicon() -> None:
    everything = columns(DB)
    derived = "SELECT * FROM (SELECT Name AS n FROM singer) AS d WHERE "
    assert admitted(scoped(DB), derived) == everything
    assert admitted(scoped(DB), derived + "d.") == everything
    renamed = "SELECT * FROM singer AS s(a, b) WHERE s."
    assert admitted(scoped(DB), renamed) == everything
    # (an unbound qualifier once every FROM is known: see test_unbound_qualifier_after_from)
    # (it cannot even be spelled: at an expression start `nosuch` could only qualify)
    rt = ParserRuntime.for_grammar(scoped(DB))
    assert rt.advance(rt.initial, b"SELECT * FROM singer WHERE nosuch.") is None
    assert rt.advance(rt.initial, b"SELECT * FROM singer WHERE nosuch") is None
    # a CTE may shadow a table: inside and after WITH nothing is restricted
    cte = "WITH singer AS (SELECT 1 AS x) SELECT * FROM singer WHERE "
    assert admitted(scoped(DB), cte) == everything
    # a schema name can start a three-part name: its column is one of that table's (not
    # the date-unit words an unqualified position keeps: `main.singer.Year` names no column)
    three = "SELECT * FROM singer WHERE main.singer."
    assert admitted(scoped(DB), three) == columns(DB, "singer")
    assert admitted(scoped(DB), "SELECT main.concert.") == columns(DB, "concert")


def test_output_aliases_stay_admitted_where_they_were() -> None:
    rt = ParserRuntime.for_grammar(scoped(DB))
    # `Theme` is a column of concert, used here as an output alias of a singer query
    q = b"SELECT Name AS Theme FROM singer WHERE Theme = 'x' ORDER BY Theme"
    assert rt.advance(rt.initial, q) is not None
    assert rt.eos_allowed(rt.advance(rt.initial, q))  # type: ignore[arg-type]


def test_chinook_business_query() -> None:
    ch = "chinook"
    q = "SELECT c.FirstName FROM Customer c JOIN Invoice i ON c.CustomerId = i.CustomerId WHERE i."
    assert admitted(scoped(ch), q, db=ch) == columns(ch, "Invoice")
    assert admitted(scoped(ch), q.replace("WHERE i.", "WHERE c."), db=ch) == columns(ch, "Customer")


def test_rollback_and_copies_keep_the_scope_consistent() -> None:
    p = IncrementalParser(scoped(DB))
    p.feed(b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON ")
    q = p.copy()
    p.feed(b"T1.Age = 1 AND T2.")
    assert p.is_viable(b"Theme") and not p.is_viable(b"Age")
    p.rollback(1)
    with pytest.raises(ParseError):
        p.feed(b"T2.Age")
    assert q.is_viable(b"T1.Age") and q.is_viable(b"T2.Theme") and not q.is_viable(b"T1.Theme")


def test_off_by_default_and_fingerprinted() -> None:
    g = role(DB)
    assert g.scopes is None
    assert scoped(DB).fingerprint != g.fingerprint
    assert g.with_scopes(None).fingerprint == g.fingerprint
    assert ParserRuntime.for_grammar(g).sem is None
    with pytest.raises(LexiconError):
        Grammar.dialect("sqlite").with_scopes(ScopeTable({"t": ["a"]}))


def test_audit_artifact_rebuilds_the_scoped_grammar() -> None:
    from grid_sql.audit.artifacts import grammar_artifact, rebuild_grammar

    g = scoped(DB)
    back = rebuild_grammar(grammar_artifact(g))
    assert back.fingerprint == g.fingerprint
    assert back.scopes is not None and back.scopes.columns == g.scopes.columns  # type: ignore[union-attr]
    assert rebuild_grammar(grammar_artifact(role(DB))).scopes is None


def test_subqueries_of_update_and_delete_may_correlate_to_the_target() -> None:
    """A SELECT nested in UPDATE/DELETE may name the target's columns (correlation); the
    rule does not model DML bindings, so positions inside such statements are unrestricted
    (this was blocked before: ``concert_ID = Age`` with Age of the UPDATE target)."""
    from grid_sql.spec.bridge import to_spec
    from grid_sql.spec.oracle import SpecOracle

    from .helpers import spider_dialect_grammar

    g = spider_dialect_grammar(DB, "sqlite", True)
    rt = ParserRuntime.for_grammar(g)
    spec = SpecOracle(to_spec(g))
    for sql in (
        "UPDATE singer SET Age = 1 WHERE Singer_ID IN "
        "(SELECT Singer_ID FROM singer_in_concert WHERE concert_ID = Age)",
        "DELETE FROM singer WHERE EXISTS "
        "(SELECT 1 FROM singer_in_concert AS s WHERE s.Singer_ID = Singer_ID AND Age > 1)",
    ):
        cfg = rt.advance(rt.initial, sql.encode())
        assert cfg is not None and rt.eos_allowed(cfg), sql
        assert spec.accepts(sql.encode()), sql
    # a SELECT statement's own subquery is still restricted
    assert admitted(g, "SELECT * FROM singer WHERE ") == columns(DB, "singer") | {"Year"}


def test_unbound_qualifier_after_from() -> None:
    """``q.`` with ``q`` bound nowhere once every FROM is known: no continuation is a valid
    reference, so the scoped view keeps the columns in scope and blocks three-part names
    (Spider run: ``ORDER BY "Book" . ORDERBY .Template_Type_Code``)."""
    rt = ParserRuntime.for_grammar(scoped(DB))

    def viable(sql: str) -> bool:
        return rt.advance(rt.initial, sql.encode()) is not None

    # a word that can only qualify is held to the names a qualifier may be (`T9` is none)
    assert not viable("SELECT * FROM singer WHERE T9.")
    assert not viable("SELECT * FROM singer WHERE T9")
    # at a sort key the word may also be an output alias: `"Book"` is neither
    assert not viable('SELECT Age FROM singer ORDER BY "Book"')
    assert viable('SELECT Age AS Book FROM singer ORDER BY "Book"')
    assert not viable('SELECT Age AS Book FROM singer ORDER BY "Book".')
    assert not viable('SELECT Age FROM singer ORDER BY "Book" . ORDERBY .Age')
    # schema-qualified names stay open; a select list stays unrestricted (Proposition 11)
    assert viable("SELECT * FROM singer WHERE main.singer.Age = 1")
    assert viable("SELECT * FROM main.singer WHERE main.singer.Age = 1")
    assert admitted(scoped(DB), "SELECT T9.", suffix=" FROM") == columns(DB)
    # a subquery nested in a select list: its outer FROM is still to come
    assert viable("SELECT (SELECT T9.Theme FROM singer) FROM concert AS T9")
    # correlation reaches the outer level's names
    sub = "SELECT * FROM concert AS c WHERE EXISTS (SELECT 1 FROM singer WHERE c."
    assert admitted(scoped(DB), sub) == columns(DB, "concert")
    # the unscoped role grammar is unchanged
    assert admitted(role(DB), "SELECT * FROM singer WHERE T9.") == columns(DB)


def test_dot_after_a_name_no_reference_can_continue() -> None:
    """The ``.`` itself is blocked where nothing after it can be a valid reference and the
    name has another way on (Spider runs: ``WHERE section_id . `course_id```,
    ``WHERE conductor.Conductor_ID . `Conductor_ID```): after a bare column bound nowhere as
    a qualifier once every FROM is known, and after ``q.c`` when ``q`` is no schema."""
    rt = ParserRuntime.for_grammar(scoped(DB))

    def viable(sql: str) -> bool:
        return rt.advance(rt.initial, sql.encode()) is not None

    where = "SELECT * FROM singer AS T1 WHERE "
    for blocked in ("Age .", "Age.", "Age /* c */ .", "T1.Age .", "T1.Age."):
        assert not viable(where + blocked), blocked
    for kept in ("Age", "T1.Age", "T1.", "main.singer.Age = 1", "main.T1", "Age = T1.Age"):
        assert viable(where + kept), kept
    # a word with no other way on than its `.` keeps it (no dead end), but at an expression
    # start such a word (IDENT, TABLE_NAME) admits only the names a qualifier may be:
    # FROM item names of every level, schemas, in any case and quoting
    for word in ("T9", "singer_in_concert", '"2005-11-12"', "Total_spent", "SELECTidFROM"):
        assert not viable(where + word), word
    for word in (
        "T1.Age",
        "t1.Age",
        '"t1".Age',
        "`T1`.Age",
        "[t1].Age",
        "singer.Age",
        "main.singer.Age",
    ):
        assert viable(where + word + " = 1"), word
    # at a sort key the word may also be an output alias of the select list
    for ok in ("x", "X DESC", "s.Age", "singer.Age", "Age", "T1"):
        assert viable(f"SELECT Age AS x , Name AS T1 FROM singer AS s ORDER BY {ok}"), ok
    for bad in ("nosuch", "Theme", '"nosuch"', "concert.Theme", "zz"):
        assert not viable(f"SELECT Age AS x FROM singer AS s ORDER BY {bad}"), bad
    # a qualifier name that is no output alias must go on as a qualifier (only `.`, no end)
    rt = ParserRuntime.for_grammar(scoped(DB))
    bare = rt.advance(rt.initial, b"SELECT Age AS x FROM singer AS s ORDER BY s")
    assert bare is not None and not rt.eos_allowed(bare)
    assert not viable("SELECT Age AS x FROM singer AS s ORDER BY s DESC")
    assert not viable("SELECT Age AS x FROM singer AS s ORDER BY s , x")
    assert viable("SELECT Age AS x FROM singer AS s ORDER BY s . Age DESC")
    alias = rt.advance(rt.initial, b"SELECT Age AS s FROM singer AS s ORDER BY s")
    assert alias is not None and rt.eos_allowed(alias)  # also an output alias: may end
    # (compound: any branch's alias; window ORDER BY in a select list: free)
    assert viable("SELECT Age AS a FROM singer UNION SELECT Capacity AS b FROM stadium ORDER BY b")
    assert viable("SELECT Age , rank() OVER (ORDER BY zz) FROM singer")
    # the select list before FROM: `Age.` may be bound later (its `.` stays), but only a
    # schema can start a three-part name, there too
    assert viable("SELECT Age . Name FROM singer")
    assert not viable("SELECT T1.Age . Name FROM singer AS T1")
    assert not viable("SELECT Name .COUNTconcert_ID .COUNTry")  # Spider q36
    assert not viable("SELECT T1.x")  # no IDENT second part of s.t.c either
    assert viable("SELECT main.singer.Age FROM singer") and viable("SELECT T1.* FROM singer AS T1")
    # ... and an enclosing level's FROM still to come leaves a nested query's names open
    assert viable("SELECT (SELECT 1 FROM singer WHERE Age . Name) FROM concert")
    # a schema keeps its three-part names; a correlated outer alias stays a qualifier
    assert viable("SELECT * FROM singer WHERE main.singer.Age = 1")
    sub = "SELECT * FROM concert AS c WHERE EXISTS (SELECT 1 FROM singer WHERE c.Theme = Name)"
    assert viable(sub)
    assert not viable(
        "SELECT * FROM concert AS c WHERE EXISTS (SELECT 1 FROM singer WHERE c.Theme ."
    )
    # the unscoped role grammar is unchanged
    rt0 = ParserRuntime.for_grammar(role(DB))
    assert rt0.advance(rt0.initial, (where + "T1.Age . Name").encode()) is not None
