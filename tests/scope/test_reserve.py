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
