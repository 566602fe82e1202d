"""One-byte extensions of a pending lexeme, decided in bulk (the termination reserve's search).

``ParserRuntime.advance(cfg, bytes([b]))`` for a byte the union DFA continues the pending
lexeme with (no emission) is a new scan state over the same stack plus the liveness test of
the longer lexeme. The reserve's breadth-first search closing a pending lexeme asks that for
~60 bytes per level (``mask/reserve.py`` ``_bfs_close``), and each ask repeated what does not
depend on the byte: the allowed set and lexicon view of the stack, the case folding of the
lexeme so far (issue #26: this search was a third of a cold reserve). :func:`extension_filter`
does that part once per configuration; the verdicts and configurations are ``advance``'s.
"""

from __future__ import annotations

from collections.abc import Callable

from ..grammar.lexer import DEAD
from ..grammar.lexicon import QUOTE_BYTES, CategoryWords
from .incremental import Configuration, ParserRuntime, ScanState

__all__ = ["extension_filter"]

_BYTE = [bytes([b]) for b in range(256)]
_LOWER = [bytes([b]).lower() for b in range(256)]
_UPPER = [bytes([b]).upper()[0] for b in range(256)]


def extension_filter(
    rt: ParserRuntime, cfg: Configuration
) -> tuple[Callable[[int], Configuration | None], frozenset[int] | None, int]:
    """``(f, ok, other)``. ``f(b)`` = ``rt.advance(cfg, bytes([b]))`` for a byte ``b`` the
    DFA continues the pending lexeme of ``cfg`` with (``rt.trans[cfg.scan.dfa * 256 + b] !=
    DEAD``); for other bytes (an emission) it defers to ``advance`` itself. ``ok`` and
    ``other`` let a caller skip bytes ``f`` would find dead without calling it: a byte the
    DFA continues the lexeme with into state ``t`` is dead when it is not in ``ok`` and
    ``live_masks[t] & other`` is 0 (no word of a lexicon category that may be read here
    continues the lexeme with it, case-folded where the category folds, and no other
    terminal that may be read is live in ``t``). ``ok`` is None where that cannot be told
    (no pending lexeme, or a category that admits every lexeme but some)."""
    node, scan = cfg.stack, cfg.scan
    rem, base = scan.rem, scan.dfa * 256
    trans, accept, live = rt.trans, rt.accept_masks, rt.live_masks
    allowed = rt.allowed_mask(node) | rt.ignored_mask
    view = rt.lex_at(node)
    lexicon, lmask = (rt.lexicon, rt.lexicon_mask) if view is None else (view.words, view.mask)
    # per lexicon category read: (folds case, the lexeme so far as it compares, its
    # prefixes, the category itself when it is a complement), made on first use
    # (fold_lexeme's rule: the first byte tells quoted)
    quoted = bool(rem) and rem[0] in QUOTE_BYTES
    folded: dict[int, tuple[bool, bytes, frozenset[bytes], CategoryWords | None]] = {}

    def fold(tid: int) -> tuple[bool, bytes, frozenset[bytes], CategoryWords | None]:
        cat = lexicon[tid]
        low = cat.fold_quoted_case or (cat.fold_bare_case and not quoted)
        pre = frozenset() if cat.exclude else cat.prefixes  # (a complement: refused_prefixes)
        got = folded[tid] = (low, rem.lower() if low else rem, pre, cat if cat.exclude else None)
        return got

    def step(b: int) -> Configuration | None:
        t = trans[base + b]
        if t == DEAD or not rem:  # an emission, or a lexeme's first byte: advance decides
            return rt.advance(cfg, _BYTE[b])
        rem2 = rem + _BYTE[b]
        m = live[t] & allowed
        if not m & ~lmask:
            m &= lmask
            while m:
                low = m & -m
                tid = low.bit_length() - 1
                low_, key, prefixes, complement = folded.get(tid) or fold(tid)
                if complement is not None:
                    if not complement.refuses_prefix(rem2):
                        break
                elif key + (_LOWER[b] if low_ else _BYTE[b]) in prefixes:
                    break
                m ^= low
            else:
                return None
        if accept[t]:
            return Configuration(node, ScanState(t, rem2, len(rem2), t))
        return Configuration(node, ScanState(t, rem2, scan.la_len, scan.la_state))

    other = allowed & ~lmask
    ok: frozenset[int] | None = None
    if rem:
        bytes_ok: set[int] = set()
        m = allowed & lmask
        while m:
            low_bit = m & -m
            m ^= low_bit
            cat = lexicon[low_bit.bit_length() - 1]
            if cat.exclude:
                return step, None, other
            low = cat.fold_quoted_case or (cat.fold_bare_case and not quoted)
            nxt = cat.next_bytes(rem.lower() if low else rem)
            bytes_ok |= nxt
            if low:  # the lexeme compares lower-cased: either case of a letter continues it
                bytes_ok.update(_UPPER[c] for c in nxt if _UPPER[c] != c)
        ok = frozenset(bytes_ok)
    return step, ok, other
