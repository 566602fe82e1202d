"""Soundness of scope-aware column lexicons on real gold SQL (issue #8 §2).

Every Spider dev gold query (on its own database; 972 of 1034, ``wta_1`` is not shipped)
and every defog sql-eval gold statement (three dialects, on its own schema) that the
unscoped schema-lexicon grammar with unrestricted function names accepts is still accepted
with scopes on and the dialect's function-name lexicon (``FUNCTION_NAME``), and every token
boundary of its greedy GPT-2 and Qwen2 tokenizations is a viable configuration of the
scoped runtime (what decoding needs: the gold token is then in the exact mask, which
``test_masks.py`` checks on samples against the brute-force and the Python walk).
"""

from __future__ import annotations

import pytest

from grid_sql.mask.vocab import greedy_token_ids
from grid_sql.parser import ParserRuntime

from ..mask.helpers import vocab
from .helpers import defog_gold, defog_grammar, role, scoped, spider_dev

VOCABS = ("gpt-2", "qwen2")


def _check_tokens(rt: ParserRuntime, spellings: list[bytes], label: str) -> None:
    cfg = rt.initial
    for k, t in enumerate(spellings):
        nxt = rt.advance(cfg, t)
        done = b"".join(spellings[:k])
        assert nxt is not None, f"{label}: blocked at token {k} {t!r} after {done!r}"
        cfg = nxt
    assert rt.eos_allowed(cfg), f"{label}: not a sentence with scopes on"


def _spellings(vname: str, data: bytes) -> list[bytes]:
    v = vocab(vname)
    return [v.token_bytes[t] for t in greedy_token_ids(v, data, max_len=16)]


@pytest.mark.slow
def test_spider_dev_gold_admitted_with_scopes() -> None:
    checked = 0
    for db, q in spider_dev():
        rt0 = ParserRuntime.for_grammar(role(db, functions=False))
        data = q.encode()
        c0 = rt0.advance(rt0.initial, data)
        if c0 is None or not rt0.eos_allowed(c0):
            continue  # outside the unscoped role language already (not what scopes change)
        rt = ParserRuntime.for_grammar(scoped(db))
        for vname in VOCABS:
            _check_tokens(rt, _spellings(vname, data), f"{db} [{vname}] {q}")
        checked += 1
    assert checked >= 750  # 759 on the 2026 data


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_defog_gold_admitted_with_scopes(dialect: str) -> None:
    checked = 0
    for db, q in defog_gold(dialect):
        data = q.encode()
        rt0 = ParserRuntime.for_grammar(defog_grammar(db, dialect, False, functions=False))
        c0 = rt0.advance(rt0.initial, data)
        if c0 is None or not rt0.eos_allowed(c0):
            continue
        rt = ParserRuntime.for_grammar(defog_grammar(db, dialect, True))
        for vname in VOCABS:
            _check_tokens(rt, _spellings(vname, data), f"{dialect} {db} [{vname}] {q}")
        checked += 1
    assert checked >= 150


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_spider_dev_gold_transpiled_admitted_with_scopes(dialect: str) -> None:
    """The Spider gold transpiled by sqlglot (as the corpus tests do), on each database's
    catalog in the target dialect's spellings."""
    import sqlglot

    from .helpers import spider_dialect_grammar

    target = {"postgresql": "postgres", "mysql": "mysql"}[dialect]
    checked = 0
    for db, q in spider_dev():
        try:
            t = "; ".join(sqlglot.transpile(q, read="sqlite", write=target))
        except Exception:  # noqa: BLE001 - a query sqlglot cannot transpile is not ours
            continue
        data = t.encode()
        rt0 = ParserRuntime.for_grammar(spider_dialect_grammar(db, dialect, False, functions=False))
        c0 = rt0.advance(rt0.initial, data)
        if c0 is None or not rt0.eos_allowed(c0):
            continue
        rt = ParserRuntime.for_grammar(spider_dialect_grammar(db, dialect, True))
        for vname in VOCABS:
            _check_tokens(rt, _spellings(vname, data), f"{dialect} {db} [{vname}] {t}")
        checked += 1
    assert checked >= 200  # 248 PostgreSQL (bare mixed-case names do not fold to the catalog)
