"""One-byte extensions of a pending lexeme, decided in bulk (the termination reserve's search).

``ParserRuntime.advance(cfg, bytes([b]))`` for a byte the union DFA continues the pending
lexeme with (no emission) is a new scan state over the same stack plus the liveness test of
the longer lexeme. The reserve's breadth-first search closing a pending lexeme asks that for
~60 bytes per level (``mask/reserve.py`` ``_bfs_close``), and each ask repeated what does not
depend on the byte: the allowed set and lexicon view of the stack, the case folding of the
lexeme so far (issue #26: this search was a third of a cold reserve). :func:`extender`
does that part once per configuration; the verdicts and configurations are ``advance``'s.
"""

from __future__ import annotations

from collections.abc import Callable

from ..grammar.lexer import DEAD
from ..grammar.lexicon import QUOTE_BYTES
from .incremental import Configuration, ParserRuntime, ScanState

__all__ = ["extender"]

_BYTE = [bytes([b]) for b in range(256)]
_LOWER = [bytes([b]).lower() for b in range(256)]


def extender(rt: ParserRuntime, cfg: Configuration) -> Callable[[int], Configuration | None]:
    """``f(b)`` = ``rt.advance(cfg, bytes([b]))`` for a byte ``b`` the DFA continues the
    pending lexeme of ``cfg`` with (``rt.trans[cfg.scan.dfa * 256 + b] != DEAD``); for other
    bytes (an emission) it defers to ``advance`` itself."""
    node, scan = cfg.stack, cfg.scan
    rem, base = scan.rem, scan.dfa * 256
    trans, accept, live = rt.trans, rt.accept_masks, rt.live_masks
    allowed = rt.allowed_mask(node) | rt.ignored_mask
    view = rt.lex_at(node)
    lexicon, lmask = (rt.lexicon, rt.lexicon_mask) if view is None else (view.words, view.mask)
    # per lexicon category read: (folds case, the lexeme so far as it compares, its
    # prefixes, exclude), made on first use (fold_lexeme's rule: the first byte tells quoted)
    quoted = bool(rem) and rem[0] in QUOTE_BYTES
    folded: dict[int, tuple[bool, bytes, frozenset[bytes], bool]] = {}

    def fold(tid: int) -> tuple[bool, bytes, frozenset[bytes], bool]:
        cat = lexicon[tid]
        low = cat.fold_quoted_case or (cat.fold_bare_case and not quoted)
        pre = frozenset() if cat.exclude else cat.prefixes  # (a complement admits every prefix)
        got = folded[tid] = (low, rem.lower() if low else rem, pre, cat.exclude)
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
                low_, key, prefixes, exclude = folded.get(tid) or fold(tid)
                if exclude or key + (_LOWER[b] if low_ else _BYTE[b]) in prefixes:
                    break
                m ^= low
            else:
                return None
        if accept[t]:
            return Configuration(node, ScanState(t, rem2, len(rem2), t))
        return Configuration(node, ScanState(t, rem2, scan.la_len, scan.la_state))

    return step
