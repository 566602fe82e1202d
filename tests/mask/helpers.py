"""Shared helpers for mask tests: real vocabularies, greedy tokenization, brute force."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary
from grid_sql.parser import Configuration

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TOKENIZERS = SHARED / "data" / "tokenizers"


@functools.cache
def vocab(name: str) -> Vocabulary:
    return Vocabulary.from_gguf(TOKENIZERS / f"ggml-vocab-{name}.gguf")


@functools.cache
def _spelling_index(name: str) -> dict[bytes, int]:
    v = vocab(name)
    out: dict[bytes, int] = {}
    for i, b in enumerate(v.token_bytes):
        if b and i not in v.special_ids:
            out.setdefault(b, i)
    return out


def greedy_tokens(name: str, text: bytes, max_len: int = 16) -> list[int]:
    """Longest-match tokenization (any tokenization is a legal input to a matcher)."""
    idx = _spelling_index(name)
    out, pos = [], 0
    while pos < len(text):
        for n in range(min(max_len, len(text) - pos), 0, -1):
            t = idx.get(text[pos : pos + n])
            if t is not None:
                out.append(t)
                pos += n
                break
        else:
            raise AssertionError(f"vocabulary {name} cannot spell byte {text[pos]!r}")
    return out


def brute_force_ids(guide: Guide, cfg: Configuration) -> np.ndarray:
    """Trial-parse every token with the incremental parser (exact, slow)."""
    rt = guide.runtime
    tb = guide.token_bytes
    special = guide.special
    ok = [i for i, b in enumerate(tb) if b and i not in special and rt.advance(cfg, b) is not None]
    return np.array(ok, dtype=np.int32)
