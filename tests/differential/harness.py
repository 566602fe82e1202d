"""Shared differential harness: the fast incremental parser vs the executable spec."""

from __future__ import annotations

import random
from collections.abc import Iterable

from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle


class Differential:
    """Compare verdicts of the fast path and the spec on byte strings."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.rt = ParserRuntime.for_grammar(grammar)
        self.spec = SpecOracle(to_spec(grammar))
        self.checked = 0

    def verdict_fast(self, w: bytes) -> tuple[bool, bool, frozenset[str] | None]:
        cfg = self.rt.advance(self.rt.initial, w)
        if cfg is None:
            return (False, False, None)
        return (True, self.rt.eos_allowed(cfg), self.rt.allowed_terminals(cfg))

    def verdict_spec(self, w: bytes) -> tuple[bool, bool, frozenset[str] | None]:
        viable = self.spec.is_viable_prefix(w)
        if not viable:
            return (False, self.spec.accepts(w), None)
        return (True, self.spec.accepts(w), self.spec.allowed_terminals(w))

    def check(self, w: bytes) -> tuple[bool, bool, frozenset[str] | None]:
        fast, spec = self.verdict_fast(w), self.verdict_spec(w)
        self.checked += 1
        assert fast == spec, f"divergence on {w!r}: fast={fast} spec={spec}"
        return fast

    def check_incremental(self, chunks: Iterable[bytes]) -> None:
        """Feeding chunk by chunk equals feeding the concatenation (and the spec)."""
        cfg = self.rt.initial
        seen = b""
        for c in chunks:
            seen += c
            nxt = self.rt.advance(cfg, c)
            whole = self.rt.advance(self.rt.initial, seen)
            assert (nxt is None) == (whole is None), f"incremental divergence at {seen!r}"
            assert (nxt is None) == (not self.spec.is_viable_prefix(seen)), seen
            if nxt is None:
                return
            assert whole is not None
            assert nxt.stack.hash == whole.stack.hash and nxt.scan == whole.scan
            cfg = nxt


def mutations(s: bytes, rng: random.Random, n: int, alphabet: bytes) -> list[bytes]:
    """Byte-level mutations: substitution, insertion, deletion, truncation, duplication."""
    out = []
    for _ in range(n):
        b = bytearray(s)
        op = rng.randrange(5)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.choice(alphabet)
        elif op == 1:
            b[i:i] = bytes([rng.choice(alphabet)])
        elif op == 2 and b:
            del b[min(i, len(b) - 1)]
        elif op == 3:
            del b[i:]
        else:
            j = rng.randrange(len(b) + 1)
            b[i:i] = b[min(i, j) : max(i, j)][:8]
        out.append(bytes(b))
    return out
