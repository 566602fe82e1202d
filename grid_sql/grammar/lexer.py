"""The union lexer automaton over all terminals (paper §2 L1, §4.1).

The byte-level DFA of every terminal is built by ``regex-automata`` in the Rust kernel and
combined into one union automaton whose states carry two terminal sets: ``accept`` (the
bytes read so far are a full lexeme of these terminals) and ``live`` (some extension may
still be). Maximal munch and contextual resolution are then table lookups. The automaton
depends only on the terminals, so every projection and lexicon of a dialect shares it.

Determinizing the union costs ~25 ms of CPU for a SQL dialect, a tenth of a warm compile, so
built automata are also kept on disk next to the grammar store (``grammar/cache.py``):
``<cache>/lexers/v1/<key[:2]>/<key>.bin``, keyed by the terminals' fingerprint and the
kernel version, with a BLAKE2b digest of the tables that a reload must reproduce. A damaged
or foreign entry is rebuilt and rewritten, never used.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import GrammarError
from ..store import entry_path, read_framed, write_framed
from .fingerprint import fingerprint

if TYPE_CHECKING:
    from .ir import Terminal

DEAD = 0
START = 1

_CACHE: dict[str, LexerTables] = {}
_CACHE_LOCK = threading.Lock()
# (name, pattern, resolution key) per terminal -> (DFA store key, tables key)
_KEYS: dict[tuple[tuple[str, str, tuple[int, int, str]], ...], tuple[str, str]] = {}
_KEYS_LIMIT = 64


def _row_ints(words_le: bytes, n_rows: int, n_words: int) -> tuple[int, ...]:
    """Each row of ``n_words`` little-endian u64 words as one Python int (bit i = terminal i)."""
    step = n_words * 8
    fb = int.from_bytes
    return tuple(fb(words_le[i : i + step], "little") for i in range(0, n_rows * step, step))


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
        # The automaton depends on the patterns (in order) only, so the on-disk store is keyed
        # by them; the tables' candidate lists also depend on the resolution order, so two
        # terminal sets that differ only in priorities must not share one LexerTables.
        # The two digests (~0.6 ms of canonical JSON) are memoized on exactly what they read:
        # every role grammar of a dialect asks again with new Terminal objects.
        what = tuple((t.name, t.pattern, t.resolution_key) for t in terminals)
        with _CACHE_LOCK:
            keys = _KEYS.get(what)
        if keys is None:
            dfa_key = fingerprint("lexer", [[t.name, t.pattern] for t in terminals])
            key = fingerprint(
                "lexer-tables", [dfa_key, [list(t.resolution_key) for t in terminals]]
            )
            with _CACHE_LOCK:
                if len(_KEYS) >= _KEYS_LIMIT:
                    _KEYS.clear()
                _KEYS[what] = (dfa_key, key)
        else:
            dfa_key, key = keys
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
        from .. import _kernels

        raw = _load_stored(dfa_key)
        if raw is None:
            try:
                trans, acc, live, n_states, n_words = _kernels.build_union_dfa(patterns)
            except ValueError as exc:
                raise GrammarError(f"cannot build the lexer automaton: {exc}") from exc
            raw = (bytes(trans), bytes(acc), bytes(live), int(n_states), int(n_words))
            _store(dfa_key, raw)
        trans, acc, live, n_states, n_words = raw
        accept_masks = _row_ints(acc, n_states, n_words)
        live_masks = _row_ints(live, n_states, n_words)
        order = sorted(range(len(terminals)), key=lambda i: terminals[i].resolution_key)
        # accepting terminals per state in resolution order: one bit matrix, columns in order
        bits = np.unpackbits(
            np.frombuffer(acc, dtype=np.uint8).reshape(n_states, n_words * 8),
            axis=1,
            bitorder="little",
        )[:, order].astype(bool)
        oarr = np.asarray(order, dtype=np.int64)
        cands = tuple(
            tuple(oarr[row].tolist()) if m else ()
            for row, m in zip(bits, accept_masks, strict=True)
        )
        tables = cls(trans, n_states, accept_masks, live_masks, cands, key)
        with _CACHE_LOCK:
            _CACHE.setdefault(key, tables)
        return tables


# ---------------------------------------------------------------- on-disk store
_MAGIC = b"GRIDSQL-LEXER\x00"
_STORE_FORMAT = 1
_Raw = tuple[bytes, bytes, bytes, int, int]


def _entry_path(key: str) -> Path | None:
    return entry_path("lexers", _STORE_FORMAT, key, ".bin")


def _kernel_version() -> str:
    from .. import _kernels

    return str(getattr(_kernels, "__version__", "?"))


_PERSON = b"grid-sql-lexdfa"


def _store(key: str, raw: _Raw) -> None:
    p = _entry_path(key)
    if p is None:
        return
    trans, acc, live, n_states, n_words = raw
    head = {
        "format": _STORE_FORMAT,
        "key": key,
        "kernels": _kernel_version(),
        "n_states": n_states,
        "n_words": n_words,
    }
    write_framed(p, _MAGIC, head, (trans, acc, live), _PERSON)


def _load_stored(key: str) -> _Raw | None:
    """The stored automaton for ``key``, or None (absent, disabled, damaged, foreign)."""
    p = _entry_path(key)
    if p is None:
        return None
    entry = read_framed(p, _MAGIC, 3, _PERSON)
    if entry is None:
        return None
    head, (trans, acc, live) = entry
    try:
        n_states, n_words = int(head["n_states"]), int(head["n_words"])
        if (
            head["format"] != _STORE_FORMAT
            or head["key"] != key
            or head["kernels"] != _kernel_version()
            or len(trans) != n_states * 256 * 4
            or len(acc) != len(live)
            or len(acc) != n_states * n_words * 8
        ):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return trans, acc, live, n_states, n_words
