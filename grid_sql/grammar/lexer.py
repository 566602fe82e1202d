"""The union lexer automaton over all terminals (paper §2 L1, §4.1).

The byte-level DFA of every terminal is built by ``regex-automata`` in the Rust kernel and
combined into one union automaton whose states carry two terminal sets: ``accept`` (the
bytes read so far are a full lexeme of these terminals) and ``live`` (some extension may
still be). Maximal munch and contextual resolution are then table lookups. The automaton
depends only on the terminals, so every projection and lexicon of a dialect shares it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import GrammarError
from .fingerprint import fingerprint

if TYPE_CHECKING:
    from .ir import Terminal

DEAD = 0
START = 1

_CACHE: dict[str, LexerTables] = {}
_CACHE_LOCK = threading.Lock()


def _bits_to_int(words: np.ndarray) -> int:
    return int.from_bytes(words.astype("<u8").tobytes(), "little")


@dataclass(frozen=True, eq=False)
class LexerTables:
    """Union DFA: ``trans[state * 256 + byte]``, per-state accept/live terminal sets."""

    trans_bytes: bytes
    n_states: int
    accept_masks: tuple[int, ...]  # bitmask over terminal ids
    live_masks: tuple[int, ...]
    accept_candidates: tuple[tuple[int, ...], ...]  # accepting terminals in resolution order
    fingerprint: str

    @property
    def trans(self) -> memoryview:
        return memoryview(self.trans_bytes).cast("I")

    def trans_array(self) -> np.ndarray:
        """The transition table as a read-only ``uint32[n_states, 256]`` array."""
        return np.frombuffer(self.trans_bytes, dtype="<u4").reshape(self.n_states, 256)

    def scan(self, data: bytes, state: int = START) -> int:
        """Walk ``data`` from ``state`` (no emissions); returns the final state (0 = dead)."""
        t = self.trans
        for b in data:
            state = t[state * 256 + b]
            if state == DEAD:
                return DEAD
        return state

    @classmethod
    def build(cls, terminals: Sequence[Terminal]) -> LexerTables:
        patterns = [t.pattern for t in terminals]
        key = fingerprint("lexer", [[t.name, t.pattern] for t in terminals])
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
        from .. import _kernels

        try:
            trans, acc, live, n_states, n_words = _kernels.build_union_dfa(patterns)
        except ValueError as exc:
            raise GrammarError(f"cannot build the lexer automaton: {exc}") from exc
        acc_w = np.frombuffer(acc, dtype="<u8").reshape(n_states, n_words)
        live_w = np.frombuffer(live, dtype="<u8").reshape(n_states, n_words)
        accept_masks = tuple(_bits_to_int(acc_w[s]) for s in range(n_states))
        live_masks = tuple(_bits_to_int(live_w[s]) for s in range(n_states))
        order = sorted(range(len(terminals)), key=lambda i: terminals[i].resolution_key)
        cands = tuple(
            tuple(i for i in order if (m >> i) & 1) if m else () for m in accept_masks
        )
        tables = cls(bytes(trans), int(n_states), accept_masks, live_masks, cands, key)
        with _CACHE_LOCK:
            _CACHE.setdefault(key, tables)
        return tables
