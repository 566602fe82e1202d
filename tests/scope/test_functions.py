"""Called names are their own category (``FUNCTION_NAME``): under a role grammar a name
followed by ``(`` must be a function of the dialect (or a column the position admits, since
COLUMN_NAME outranks FUNCTION_NAME), so a column the scope rule blocks can no longer come
back spelled as a call (``Channel_id (`` in the Spider runs)."""

from __future__ import annotations

from grid_sql.parser import ParserRuntime
from grid_sql.policy.conformance import sqlite_functions
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle

from .helpers import role, scoped
from .test_rule import DB, columns

WHERE = "SELECT * FROM singer WHERE "


def _viable(g, text: str) -> bool:
    rt = ParserRuntime.for_grammar(g)
    return rt.advance(rt.initial, text.encode()) is not None


def test_blocked_column_cannot_be_called() -> None:
    called = {c for c in columns(DB) if _viable(scoped(DB), WHERE + c + "(1) = 1")}
    # in scope: singer's columns (a COLUMN_NAME may be called: the checker judges it), and
    # Year (a date-unit word, admitted at every unqualified column position)
    fns = {c for c in columns(DB) if c.lower() in sqlite_functions()}
    assert called == columns(DB, "singer") | {"Year"} | fns
    assert "Stadium_ID" not in called and "Theme" not in called
    # before the category: any word could be called
    assert {
        c for c in columns(DB) if _viable(role(DB, functions=False), WHERE + c + "(1) = 1")
    } == columns(DB)


def test_only_functions_the_library_has() -> None:
    g = role(DB)
    for ok in (
        "count(*)",
        "COUNT(*)",
        '"count"(*)',
        "[max](Age)",
        "strftime('%Y', 'now')",
        "iif(1, 2, 3)",
    ):
        assert _viable(g, f"SELECT {ok} FROM singer"), ok
    for bad in ("MONTH(Age)", "date_format(Age)", "len(Name)", "foo(1)", "nvl(Age, 1)"):
        assert not _viable(g, f"SELECT {bad}"), bad
        assert _viable(role(DB, functions=False), f"SELECT {bad}"), bad


def test_names_spelled_like_functions_still_work_as_names() -> None:
    """A function word is still a qualifier, an output alias in ORDER BY, an alias."""
    g = scoped(DB)
    for sql in (
        "SELECT count(*) AS total FROM singer ORDER BY total DESC",
        "SELECT max(Age) AS count FROM singer ORDER BY count",
        "SELECT max.Age FROM singer AS max WHERE max.Age > 1",
        "SELECT Age AS singer FROM singer ORDER BY singer",
    ):
        rt = ParserRuntime.for_grammar(g)
        cfg = rt.advance(rt.initial, sql.encode())
        assert cfg is not None and rt.eos_allowed(cfg), sql


def test_spec_has_the_same_function_lexicon() -> None:
    g = scoped(DB)
    spec = SpecOracle(to_spec(g))
    for sql in (
        WHERE + "Theme(1) = 1",
        WHERE + "Age(1) = 1",
        "SELECT foo(1)",
        "SELECT length(Name) FROM singer",
    ):
        assert spec.is_viable_prefix(sql.encode()) == _viable(g, sql), sql


def test_extra_functions_for_user_defined_ones() -> None:
    from grid_sql.grammar import Grammar
    from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
    from grid_sql.policy.grammar import role_grammar

    from .helpers import snapshot

    snap = snapshot(DB)
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}), snap)
    g = role_grammar(Grammar.dialect("sqlite"), snap, pol, extra_functions=["my_udf"])
    assert _viable(g, "SELECT my_udf(Age) FROM singer")
    assert _viable(g, "SELECT MY_UDF(Age) FROM singer")
    assert not _viable(role(DB), "SELECT my_udf(Age) FROM singer")
