"""Select-list obligations (``docs/scope.md``): a FROM clause may not close while a reference
of the select list before it is bound nowhere. Each case is decided by the fast path and by
the executable spec, and both must give the stated answer."""

from __future__ import annotations

import pytest

from grid_sql.grammar.scope import ScopeTable
from grid_sql.parser.incremental import accepts, is_viable_prefix
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle

from .helpers import lexicon_grammar, role, scoped, snapshot

DB = "concert_singer"  # singer(Name, Age, ...), concert(Theme, Year, ...), stadium(Name, ...)

# (text, viable prefix, complete statement)
CASES = [
    # the failure the rule targets: a qualifier the FROM clause never binds
    ("SELECT T2.Name FROM singer AS T1", True, False),
    ("SELECT T2.Name FROM singer AS T1 WHERE ", False, False),
    ("SELECT T2.Name FROM singer AS T1 ORDER BY ", False, False),
    ("SELECT T2.Name FROM singer AS T1 ;", False, False),
    ("SELECT T2.Name FROM singer AS T1 JOIN stadium AS T2", True, True),
    # fresh aliases: a table lacking `Name` may still be `T2` (the checker names the column,
    # autofix may requalify it); an alias may not repeat a name the FROM exposes
    ("SELECT T2.Name FROM singer AS T1 JOIN concert AS T2", True, True),
    ("SELECT Name FROM singer AS T1 JOIN concert AS T1 ", False, False),
    ('SELECT Name FROM singer AS T1 JOIN concert AS "t1" ', False, False),
    ("SELECT Name FROM singer AS T1 JOIN concert t1 ON 1", False, False),
    ("SELECT Name FROM singer AS T1 JOIN concert AS T1", True, False),  # may grow: T1b
    ("SELECT Name FROM singer AS T1 JOIN concert AS T1b JOIN stadium AS T2", True, True),
    ("SELECT Name FROM singer JOIN concert AS singer ", False, False),
    # `singer` is hidden by its alias (fresh), but a table name may not be an alias (hijack)
    ("SELECT Name FROM singer AS s JOIN concert AS singer", True, False),
    ("SELECT Name FROM singer AS s JOIN concert AS singr", True, True),
    ("SELECT Name FROM singer AS s WHERE EXISTS (SELECT 1 FROM concert AS s)", True, True),
    ("SELECT T2.Name FROM singer AS T1 , stadium AS T2 WHERE 1", True, True),
    ("SELECT T2.* FROM singer AS T1 WHERE ", False, False),
    ("SELECT singer.Name FROM singer WHERE 1", True, True),
    ("SELECT main.singer.Name FROM singer WHERE 1", True, True),  # three-part: not tracked
    # a bare column no FROM table has
    ("SELECT Theme FROM singer", True, False),
    ("SELECT Theme FROM singer AS s GROUP BY ", False, False),
    # a reserved word is never an alias, so the blocked keyword cannot come back as one
    ("SELECT Theme FROM singer WHERE ", False, False),
    ("SELECT Theme FROM singer UNION ", False, False),
    ("SELECT Theme FROM singer , concert GROUP BY Theme", True, True),
    # ... nor begin an alias written right there (docs/scope.md, "Keyword-led aliases")
    ("SELECT Theme FROM singer GROUP", False, False),
    ("SELECT Theme FROM singer GROUPBY ", False, False),
    ("SELECT Theme FROM singer\nwhere_x", False, False),
    ("SELECT Theme FROM singer groupie JOIN concert ON 1", False, False),
    ("SELECT Theme FROM singer UNIONS", False, False),
    ("SELECT Theme FROM singer grou", True, False),  # one byte off: still an alias
    ("SELECT Theme FROM singer grouse JOIN concert ON 1", True, True),
    ("SELECT Theme FROM singer joined JOIN concert ON 1", True, True),  # JOIN is not blocked
    ("SELECT Theme FROM singer AS groupie JOIN concert ON 1", True, True),  # after AS: free
    ('SELECT Theme FROM singer "groupie" JOIN concert ON 1', True, True),  # quoted: free
    ("SELECT Name FROM singer groupie WHERE 1", True, True),  # nothing blocked: free
    ("SELECT Name FROM stadium", True, True),
    # what the rule leaves alone
    ('SELECT "Theme" FROM singer', True, True),  # SQLite: an unmatched "x" is a string
    ("SELECT Age AS Theme , Theme FROM singer", True, True),  # an output alias
    ("SELECT count(*) FROM singer WHERE 1", True, True),
    ("SELECT d.Name FROM (SELECT Name FROM singer) AS d", True, True),
    ("SELECT Theme FROM (SELECT 1) WHERE 1", True, True),  # a derived table: columns unknown
    # correlation: an enclosing level past its FROM binds; one before its FROM cannot say
    ("SELECT Age FROM singer AS T1 WHERE Age > (SELECT max(T1.Age) FROM concert)", True, True),
    ("SELECT Age FROM singer AS T1 WHERE Age > (SELECT max(T9.Age) FROM concert )", False, False),
    ("SELECT (SELECT T1.Name FROM concert) FROM singer AS T1", True, True),
    # (an inner reference left open is not handed to the enclosing level: the checker's)
    ("SELECT (SELECT T9.Name FROM concert) FROM singer AS T1", True, True),
    # each query of a compound has its own FROM
    ("SELECT Name FROM singer UNION SELECT Theme FROM concert", True, True),
    ("SELECT Name FROM concert AS c UNION ", False, False),
    # more than MAX_REFS (32) distinct references: not tracked
    ("SELECT " + " , ".join(f"T{i}.Age" for i in range(1, 34)) + " FROM singer AS T1", True, True),
    ("SELECT " + " , ".join(f"T{i}.Age" for i in range(1, 33)) + " FROM singer AS T1", True, False),
]


@pytest.fixture(scope="module")
def spec() -> SpecOracle:
    return SpecOracle(to_spec(scoped(DB)))


@pytest.mark.parametrize(("text", "viable", "complete"), CASES)
def test_obligation_cases(spec: SpecOracle, text: str, viable: bool, complete: bool) -> None:
    g = scoped(DB)
    w = text.encode()
    assert is_viable_prefix(g, w) is viable, "fast: viable"
    assert spec.is_viable_prefix(w) is viable, "spec: viable"
    assert accepts(g, w) is complete, "fast: complete"
    assert spec.accepts(w) is complete, "spec: complete"


def test_off_is_the_old_language() -> None:
    """Without the flag (``ScopeTable(...)``'s default) unbound references close freely and
    the fingerprint is the one of scope tables before the rule."""
    g = role(DB)
    tables = {t.name: t.column_names for _, t in snapshot(DB).iter_tables()}
    off = g.with_scopes(ScopeTable(tables))
    on = g.with_scopes(ScopeTable(tables, bind_select_list=True))
    w = b"SELECT T2.Name FROM singer AS T1 WHERE 1"
    assert accepts(off, w) and not accepts(on, w)
    assert off.fingerprint != on.fingerprint
    assert ScopeTable(tables).fingerprint == ScopeTable(tables, bind_select_list=False).fingerprint


def test_other_dialects() -> None:
    """The rule reads the same grammar rules in every dialect (PostgreSQL, MySQL)."""
    tables = (("singer", ("name", "age")), ("concert", ("theme", "year")))
    for dialect in ("postgresql", "mysql"):
        g = lexicon_grammar(dialect, tables, True, True)
        assert accepts(g, b"SELECT s.name FROM singer AS s WHERE s.age > 1"), dialect
        assert not accepts(g, b"SELECT c.theme FROM singer AS s WHERE s.age > 1"), dialect
        assert accepts(g, b"SELECT c.theme FROM singer AS s JOIN concert AS c ON 1 = 1")


def test_archived_grammar_keeps_the_rule() -> None:
    """An audit archive rebuilds the same language (the flag travels with the scope table)."""
    from grid_sql.audit.artifacts import grammar_artifact, rebuild_grammar

    g = scoped(DB)
    back = rebuild_grammar(grammar_artifact(g))
    assert back.fingerprint == g.fingerprint
    assert back.scopes is not None and back.scopes.bind_select_list
