"""Shared helpers for mask tests: real vocabularies, greedy tokenization, brute force."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, greedy_token_ids
from grid_sql.parser import Configuration

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TOKENIZERS = SHARED / "data" / "tokenizers"


@functools.cache
def vocab(name: str) -> Vocabulary:
    return Vocabulary.from_gguf(TOKENIZERS / f"ggml-vocab-{name}.gguf")


def greedy_tokens(name: str, text: bytes, max_len: int = 16) -> list[int]:
    """Longest-match spelling (any tokenization is a legal input to a matcher)."""
    return greedy_token_ids(vocab(name), text, max_len=max_len)


def brute_force_ids(guide: Guide, cfg: Configuration) -> np.ndarray:
    """Trial-parse every token with the incremental parser (exact, slow)."""
    rt = guide.runtime
    tb = guide.token_bytes
    special = guide.special
    ok = [i for i, b in enumerate(tb) if b and i not in special and rt.advance(cfg, b) is not None]
    return np.array(ok, dtype=np.int32)


def assert_masks_exact(
    grammar: Grammar, prefixes: Iterable[bytes], *, reserve: bool = True, name: str = "gpt-2"
) -> None:
    """At each prefix (spelled greedily in ``name``'s vocabulary): the guide's token mask
    equals the brute force, and with ``reserve`` the termination reserve's completion is
    accepted token by token and ends the statement."""
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.reserve import reserve_table

    v = vocab(name)
    guide = Guide(grammar, v, cache=MaskCache())
    table = reserve_table(grammar, v) if reserve else None
    for p in prefixes:
        m = guide.matcher()
        m.accept_tokens(greedy_tokens(name, p))
        ids = m.allowed_token_ids()
        ids = ids[ids != guide.eos_id]
        np.testing.assert_array_equal(ids, brute_force_ids(guide, m.config), err_msg=repr(p))
        if table is not None:
            comp = table.completion(m.config)  # raises MaskError when it cannot be verified
            for t in comp.tokens:
                m.accept_token(t)
            assert m.is_accepting(), (p, comp.data)
