"""The termination reserve under scope-aware lexicons: a completion written from a scoped
position names an in-scope column, is legal token by token, and ends at ACCEPT."""

from __future__ import annotations

import pytest

from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.mask.reserve import reserve_table

from ..mask.helpers import greedy_tokens, vocab
from .helpers import scoped

DB = "concert_singer"
PREFIXES = [
    b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.",
    b"SELECT * FROM singer AS T1 WHERE T1.",
    b"SELECT * FROM concert WHERE concert.",
    b"SELECT * FROM concert WHERE Th",
    b"SELECT Name FROM singer GROUP BY ",
    # select-list obligations: the reserve binds the references before closing the FROM
    b"SELECT T2.Name FROM singer AS T1",
    b"SELECT T2.Theme , T3.* FROM singer AS T1 ",
    b"SELECT Theme FROM singer",
    b"SELECT Theme , T2.Name FROM singer JOIN stad",
    b"SELECT T1.Name FROM singer AS T1 WHERE T1.Age > (SELECT T9.Age FROM concert",
    b"SELECT T2.Name FROM",
    # the `.` the grammar alone would write next is blocked (a name no reference continues)
    b"SELECT Name FROM singer GROUP BY Name HAVING count",
    b"SELECT Name FROM singer GROUP BY Name HAVING count ",
    b"SELECT * FROM singer WHERE Age",
    # words held to the qualifier names / output aliases
    b"SELECT Age AS x FROM singer AS T1 ORDER BY ",
    b"SELECT Age AS x FROM singer AS T1 ORDER BY T",
    b"SELECT * FROM singer AS T1 WHERE T",
    b'SELECT * FROM singer AS T1 WHERE "',
    b"SELECT Age AS x FROM singer AS s ORDER BY s",  # cannot end: must qualify
    # fresh aliases: the fixed alias spelling `A` is taken, so the reserve writes a longer one
    b"SELECT * FROM singer AS A JOIN concert AS",
    b"SELECT * FROM singer AS a JOIN concert",
    b"SELECT * FROM singer AS A JOIN concert AS A",
]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_reserve_completion_is_legal_with_scopes(prefix: bytes) -> None:
    g = scoped(DB)
    v = vocab("gpt-2")
    guide = Guide(g, v, cache=MaskCache())
    m = guide.matcher()
    m.accept_tokens(greedy_tokens("gpt-2", prefix))
    comp = reserve_table(g, v).completion(m.config)
    for t in comp.tokens:
        assert t in set(m.allowed_token_ids().tolist()), (prefix, comp.data)
        m.accept_token(t)
    assert m.is_accepting(), (prefix, comp.data)
    assert comp.cost == len(comp.tokens)
    if b"T2.Name" in prefix:
        assert b" AS T2" in comp.data, comp.data  # bound, not merely closed


def test_reserve_completion_exists_at_every_prefix_with_scopes() -> None:
    """Every byte prefix of statements that reach the scope rule's refinements of the allowed
    set (the blocked `.`, qualifier-only words): the completion exists and is verified."""
    from grid_sql.parser import ParserRuntime

    g = scoped(DB, True)
    rt = ParserRuntime.for_grammar(g)
    table = reserve_table(g, vocab("qwen2"))
    for sql in (
        b"SELECT Name FROM singer AS T1 GROUP BY Name HAVING count(*) > 1 AND T1.Age > 2",
        b"SELECT Age AS x FROM singer AS s WHERE s.Age > 1 ORDER BY x DESC , s.Name",
        b"SELECT Age AS x FROM singer AS s ORDER BY s.Age , x",
        b"SELECT * FROM singer WHERE Age IN (SELECT Year FROM concert WHERE Theme = 'x')",
    ):
        for i in range(1, len(sql) + 1):
            cfg = rt.advance(rt.initial, sql[:i])
            assert cfg is not None, sql[:i]
            comp = table.completion(cfg)  # raises MaskError when it cannot be verified
            assert comp.cost == len(comp.tokens)


def test_same_target_skip_changes_no_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    """The completion search advances one byte per reached DFA state where no lexicon reads
    the bytes (reserve._SKIP_SAME_TARGET); every byte prefix of statements with strings,
    comments, quoted and lexicon identifiers under scopes, and of the L1 dialects, gets the
    same completion with the skip off."""
    import grid_sql.mask.reserve as reserve
    from grid_sql.grammar import Grammar

    v = vocab("gpt-2")
    cases = [
        (
            scoped(DB),
            b"SELECT T1.Name FROM singer AS T1 WHERE T1.Country = 'Fr''a' AND \"Age\" > 3",
        ),
        (scoped(DB), b"SELECT count(*) FROM concert AS c WHERE c.Theme LIKE '%x%'"),
        (Grammar.dialect("sqlite"), b"SELECT a /* c */ FROM t WHERE b = 'x' -- y\n AND \"q\" = 1"),
        (Grammar.dialect("mysql"), b"SELECT `a` FROM t WHERE b = 'x\\'y' # c\n AND c = 1"),
        (Grammar.dialect("postgresql"), b"SELECT $$x$$, E'\\n' /* c */ FROM t WHERE b = 1"),
    ]
    compared = 0
    for g, stmt in cases:
        table = reserve_table(g, v)
        rt = table.rt
        for i in range(len(stmt) + 1):
            cfg = rt.advance(rt.initial, stmt[:i])
            if cfg is None:
                continue
            monkeypatch.setattr(reserve, "_SKIP_SAME_TARGET", True)
            on = table._compute(cfg)
            monkeypatch.setattr(reserve, "_SKIP_SAME_TARGET", False)
            off = table._compute(cfg)
            assert (on.data, on.tokens) == (off.data, off.tokens), stmt[:i]
            compared += 1
    assert compared > 250
