"""Shared helpers for mask tests: real vocabularies, greedy tokenization, brute force."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

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
