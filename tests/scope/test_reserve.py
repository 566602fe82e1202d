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
