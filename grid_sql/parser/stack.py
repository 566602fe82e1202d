"""The persistent LALR(1) parse stack: immutable nodes with shared structure.

A push is O(1) and never copies: a configuration is just a pointer to its top node, so
speculation (trying a token) and rollback (keeping an older pointer) cost nothing. Each node
carries a rolling configuration hash (paper §6.4) so the audit trail never rehashes a stack,
and memoizes its allowed-terminal set (paper §3, reduce-chain simulation).
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

_HASH_PERSON = b"grid-sql-cfg"
# Serial numbers of nodes, never reused in a process (``next`` is atomic under the GIL).
_UIDS = itertools.count()


def mix_hash(parent_hash: int, state: int, symbol: int) -> int:
    """H(node) = low64 BLAKE2b-128(H(parent) || u32(state) || u32(symbol))."""
    h = hashlib.blake2b(
        parent_hash.to_bytes(8, "little")
        + state.to_bytes(4, "little")
        + symbol.to_bytes(4, "little"),
        digest_size=16,
        person=_HASH_PERSON,
    ).digest()
    return int.from_bytes(h[:8], "little")


class StackNode:
    """One LALR state on the persistent stack (``parent`` is the node below).

    ``uid`` names the node in the memo keys of the parser and mask layers instead of the node
    itself. Why: a key tuple holding only ints and bytes is one the cyclic garbage collector
    stops tracking, while one holding a node stays tracked for as long as the memo keeps it;
    the scoped grammars' memos hold hundreds of thousands of keys, and every full collection
    walked them all (issue #26: those collections were the cold path's worst fills). A uid is
    never reused, so a memo entry whose node was freed can only miss, never answer for
    another node.
    """

    __slots__ = (
        "uid",
        "state",
        "parent",
        "symbol",
        "value",
        "depth",
        "hash",
        "allowed",
        "eos",
        "ctx",
        "lex",
    )

    def __init__(
        self, state: int, parent: StackNode | None, symbol: int, value: Any = None
    ) -> None:
        self.uid: int = next(_UIDS)
        self.state = state
        self.parent = parent
        self.symbol = symbol
        # semantic value (grammar/scope.py): an identifier's lexeme, or what a reduction
        # synthesized; None unless the grammar has scope-aware lexicons
        self.value = value
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.hash: int = 0 if parent is None else mix_hash(parent.hash, state, symbol)
        self.allowed: int | None = None  # memo: bitmask of shiftable terminal ids
        self.eos: bool | None = None  # memo: $END reaches ACCEPT
        self.ctx: Any = None  # memo: scope context (grammar/scope.py Context)
        self.lex: Any = None  # memo: the lexicon view in force at this node

    def ancestor(self, k: int) -> StackNode:
        node = self
        for _ in range(k):
            assert node.parent is not None, "popped below the stack root"
            node = node.parent
        return node

    def states(self) -> list[int]:
        """The states from bottom to top (O(depth); for tests and debugging only)."""
        out = []
        node: StackNode | None = self
        while node is not None:
            out.append(node.state)
            node = node.parent
        return out[::-1]

    def __repr__(self) -> str:
        return f"StackNode(depth={self.depth}, top={self.state}, hash={self.hash:016x})"
