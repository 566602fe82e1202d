"""The incremental parser: maximal munch, contextual resolution, EOS gating, rollback."""

from __future__ import annotations

import pytest

from grid_sql.errors import ParseError
from grid_sql.grammar import Grammar
from grid_sql.parser import IncrementalParser, ParserRuntime, accepts, is_viable_prefix

from ..grammar.toy_grammars import CRUD


@pytest.fixture(scope="module")
def crud() -> Grammar:
    return Grammar.from_lark(CRUD, name="crud")


def test_keyword_vs_identifier_by_parser_viability(crud: Grammar) -> None:
    # `count` is a keyword where COUNT(*) may start, an identifier (column) elsewhere
    assert accepts(crud, b"select count(*) from t")
    assert accepts(crud, b"select a from count")
    assert accepts(crud, b"SeLeCt a FROM t")
    # keywords are not reserved: `from` is a column where FROM cannot be shifted
    assert accepts(crud, b"select from from t")
    assert not accepts(crud, b"select a from t x y")


def test_maximal_munch_and_pending_lexemes(crud: Grammar) -> None:
    assert accepts(crud, b"select * from t where a <= 1e5")
    assert accepts(crud, b"select * from t where a < 1")
    assert is_viable_prefix(crud, b"select * from t where a <")  # `<` or `<=` pending
    assert is_viable_prefix(crud, b"select * from t where a = 1e")  # exponent pending
    assert not accepts(crud, b"select * from t where a = 1e")
    assert accepts(crud, b"select * from t -- trailing comment")
    assert accepts(crud, b"select * from t where a = 'it''s'")
    assert is_viable_prefix(crud, b"select * from t where a = 'it'")
    assert not is_viable_prefix(crud, b"select * from t where a = 'x' 'y'")


def test_eos_mid_lexeme(crud: Grammar) -> None:
    p = IncrementalParser(crud)
    p.feed(b"select a from t")
    assert p.pending == b"t"
    assert p.accepts_eos()
    p.feed(b";")
    assert p.accepts_eos()
    q = IncrementalParser(crud)
    q.feed(b"select a from")
    assert not q.accepts_eos()


def test_feed_errors_leave_state_and_rollback(crud: Grammar) -> None:
    p = IncrementalParser(crud)
    p.feed(b"select ")
    h = p.config_hash
    with pytest.raises(ParseError, match="viable"):
        p.feed(b")")
    assert p.config_hash == h
    assert not p.try_feed(b";")
    p.feed(b"a")
    p.feed(b" from t")
    c = p.copy()
    p.rollback(2)
    assert p.config_hash == h
    assert c.accepts_eos()
    assert p.allowed_terminals() >= {"STAR", "COLUMN_NAME", "COUNT"}


def test_config_hash_rolls_with_the_stack(crud: Grammar) -> None:
    a = IncrementalParser(crud)
    b = IncrementalParser(crud)
    a.feed(b"select a from t where x = 1 ")
    b.feed(b"SELECT  a FROM t WHERE x=1 ")
    assert a.config_hash == b.config_hash
    b.feed(b"and")
    b.feed(b" y = 2 ")
    assert a.config_hash != b.config_hash


def test_allowed_set_is_exact_under_lalr_reductions(crud: Grammar) -> None:
    rt = ParserRuntime.for_grammar(crud)
    p = IncrementalParser(crud)
    p.feed(b"select a from t where x = 1 ")
    allowed = p.allowed_terminals()
    assert {"AND", "OR", "SEMI"} <= allowed
    assert "FROM" not in allowed
    # each allowed terminal really extends the prefix, each other one does not
    for t in crud.terminals:
        if t.ignored:
            continue
        assert ((rt.allowed_mask(p.config.stack) >> t.id) & 1) == (t.name in allowed)
