"""The termination reserve's completions past scope refinements (``mask/reserve.py``).

Split out of :mod:`grid_sql.mask.reserve` (its module doc has the design): the cheapest
grammar completion reads only the grammar, but with scopes the runtime may refuse the
terminal it would write first (the ``.`` after a name no reference can continue) or a bare
word where the item must go on as ``s.t``. These methods rank the completions through the
terminals the runtime does allow, and search the configurations themselves when spelling
the cheapest one word by word still fails. Mixed into :class:`ReserveTable`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import MaskError
from ..parser.incremental import Configuration, ParserRuntime
from ..parser.stack import StackNode

if TYPE_CHECKING:
    from .reserve import ReserveTable

SCALE = 64  # the search metric's weight of a token (mask/reserve.py's _SCALE)

_MAX_SEARCH = 4_000  # configurations the fallback completion search may visit
_MAX_SEARCH_DEPTH = 48  # terminals it may write
_RANKED_MEMO_LIMIT = 1 << 12  # rankings kept per table (_allowed_completions)


@dataclass(frozen=True, slots=True)
class Completion:
    """A reserve completion: ``tokens`` spell ``data``; ``cost`` = ``len(tokens)`` (EOS not
    included: the caller appends it)."""

    tokens: tuple[int, ...]
    data: bytes

    @property
    def cost(self) -> int:
        return len(self.tokens)


class FedText:
    """The configurations after ``cfg`` followed by texts that grow piece by piece.

    A completion is built by appending words to one byte string and asking, after each
    append, where ``cfg`` + text stands (``ParserRuntime.advance(cfg, text)``). Feeding the
    whole text each time made building a completion quadratic in its length (issue #26:
    the select-list obligation checks were two fifths of a cold reserve). Here each text's
    raw configuration is kept and a longer text is fed from the longest one kept that
    begins it (``ParserRuntime.feed`` is a streaming step); liveness is tested on the
    result, so :meth:`at` answers exactly what ``advance`` answers.
    """

    __slots__ = ("_lens", "_raw", "_rt")

    def __init__(self, rt: ParserRuntime, cfg: Configuration) -> None:
        self._rt = rt
        self._raw: dict[bytes, Configuration | None] = {b"": cfg}
        self._lens: list[int] = [0]  # the lengths of the texts kept, longest first

    def at(self, data: bytes) -> Configuration | None:
        """``rt.advance(cfg, data)`` (``cfg`` itself for an empty text)."""
        raw = self._raw
        if data in raw:
            c = raw[data]
        else:
            # the longest kept text that begins ``data``: one lookup per kept length, not
            # per kept text (the completion search keeps thousands of texts)
            base = next(data[:n] for n in self._lens if n <= len(data) and data[:n] in raw)
            prev = raw[base]
            c = None if prev is None else self._rt.feed(prev, data[len(base) :])
            raw[data] = c
            if len(data) not in self._lens:
                self._lens.append(len(data))
                self._lens.sort(reverse=True)
        if c is None or not data:
            return c
        return c if self._rt.remainder_live(c.stack, c.scan) else None


class RefinedCompletions:
    """The completion ranking and search through allowed terminals (module doc)."""

    def _search_completion(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, cfg: Configuration
    ) -> Completion | None:
        """A verified completion by depth-first search over the terminals the runtime allows
        at each step (scope refinements included), each spelled by up to three words of the
        view in force, cheapest grammar completion first; bounded by ``_MAX_SEARCH`` advances.
        Not minimal: the reported cost is still exactly the tokens written."""
        rt = self.rt
        closed = self._close_pending(cfg)
        if closed is None:
            return None
        ext, _ = closed
        budget = [_MAX_SEARCH]
        text = FedText(rt, cfg)

        def order(node: StackNode) -> list[int]:
            return [terms[0] for _, terms in self._allowed_completions(node)]

        def words(data: bytes, t: int) -> list[bytes]:
            at = text.at(data + self.sep)
            view = rt.lex_at(at.stack) if at is not None else None
            cat = view.words.get(t) if view is not None else None
            if cat is None or cat.exclude:
                w = self._scoped_word(text, data, t)
                return [self.lexeme[t] if w is None else w]
            return list(cat.shortest_first[:3])

        def dfs(data: bytes, depth: int) -> bytes | None:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            at = text.at(data)
            node = None if at is None else rt.finalize(at)
            if at is None or node is None:
                return None
            if rt.eos_allowed(at):
                return data
            if depth == 0:
                return None
            for t in order(node):
                for w in words(data, t):
                    got = dfs(data + self.sep + w, depth - 1)
                    if got is not None:
                        return got
                    if budget[0] < 0:
                        return None
            return None

        data = dfs(ext, _MAX_SEARCH_DEPTH)
        if data is None:
            return None
        rest = data[len(ext) :]
        tokens = (self._spell(ext) if ext else []) + (self._spell(rest) if rest else [])
        return Completion(tuple(tokens), data)

    def _completion_via_allowed(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode
    ) -> list[int]:
        """The cheapest terminal sequence to ACCEPT whose first terminal the runtime allows at
        ``node`` (the grammar-only search of :meth:`_stack_completion` does not see the
        scope rule's refinements of the allowed set); same token-weighted metric."""
        best = self._best_allowed(node)
        if best is None:
            raise MaskError(f"no completion through an allowed terminal from {node!r}")
        return best

    def _best_allowed(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode, depth: int = 2
    ) -> list[int] | None:
        """The terminals of the first entry of :meth:`_allowed_completions` (None: it is
        empty), found best-first instead of ranking every allowed terminal.

        Why: a full ranking checks the scope refinements after every allowed terminal
        (a new node's allowed set and lexicon view each), ~1 ms a call on a scoped grammar,
        while the first entry is all this and the cheapest completion past a refinement
        need. Each terminal ``t`` gets a lower bound first: ``t``'s tokens plus
        ``ceil(C / (SCALE + 1))`` with ``C`` the search metric of the grammar's cheapest
        completion after it, every rule counted (the completions leave ``cte_ref`` out, a
        refined one may take it). Any completion after ``t`` with ``T`` tokens has metric at
        most ``(SCALE + 1) T`` (at most one disfavoured terminal per token) and at least
        ``C``, so ``T`` is at least the bound, refined or not. Terminals are settled in order of
        (bound, id); the first settled entry that comes off the heap is the ranking's
        first, ties included. Kept per (node, depth) like the ranking."""
        key = (node.uid, depth)
        memo = self._best_memo
        if key in memo:
            return memo[key]
        rt = self.rt
        heap: list[tuple[int, int, list[int] | None, StackNode | None]] = []
        for t in self._writable_terms(node):
            n2 = rt.shift(node, t, self.lexeme[t])
            _, c = self._stack_completion_cost(n2, every_rule=True)
            if not math.isinf(c):
                bound = len(self.piece[t]) + math.ceil(c / (SCALE + 1))
                heap.append((bound, t, None, n2))
        heapq.heapify(heap)
        best: list[int] | None = None
        while heap:
            _, t, terms, shifted = heapq.heappop(heap)
            if terms is not None:
                best = terms
                break
            assert shifted is not None
            rest = self._rest_after(shifted, depth)
            if rest is not None:
                terms = [t, *rest]
                heapq.heappush(heap, (sum(len(self.piece[x]) for x in terms), t, terms, None))
        if len(memo) >= _RANKED_MEMO_LIMIT:
            memo.clear()
        memo[key] = best
        return best

    def _rest_after(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, n2: StackNode, depth: int
    ) -> list[int] | None:
        """The terminals after an allowed terminal shifted to ``n2``: the grammar's cheapest
        completion, or, where the scope refinements refuse its first terminal (or the end),
        the cheapest through what they allow (``depth`` levels; None: no completion)."""
        rt = self.rt
        syms = self._stack_completion(n2)
        rest = None if syms is None else self._expand(syms)
        if depth and rest is not None and rt.sem is not None:
            if (rest and not self._writable(n2, rest[0])) or (not rest and not rt.accepts_end(n2)):
                rest = self._best_allowed(n2, depth - 1)
        return rest

    def _allowed_completions(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode, depth: int = 2
    ) -> list[tuple[int, list[int]]]:
        """``(tokens, terminals)`` of the cheapest grammar completion through each terminal
        the runtime allows at ``node``, cheapest first (ties: lower terminal id). One ranking
        for both users: the cheapest completion past a scope refinement takes the first, the
        completion search tries them in this order. Where the refinements also refuse what
        the grammar completion writes right after the terminal (a schema name that may not
        end a FROM item: it must go on as ``s.t``), that terminal's completion goes through
        the allowed terminals there too (``depth`` levels).

        A function of the (interned) node and ``depth``, so kept per table (by the node's
        never-reused uid; issue #26: each call shifts every allowed terminal and solves its
        stack, ~4 ms on a scoped grammar). Callers must not mutate what it returns."""
        key = (node.uid, depth)
        hit = self._ranked_memo.get(key)
        if hit is not None:
            return hit
        ranked = self._rank_allowed(node, depth)
        if len(self._ranked_memo) >= _RANKED_MEMO_LIMIT:
            self._ranked_memo.clear()
        self._ranked_memo[key] = ranked
        return ranked

    def _rank_allowed(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode, depth: int
    ) -> list[tuple[int, list[int]]]:
        """What :meth:`_allowed_completions` returns, computed."""
        rt = self.rt
        ranked: list[tuple[int, list[int]]] = []
        for t in self._writable_terms(node):
            rest = self._rest_after(rt.shift(node, t, self.lexeme[t]), depth)
            if rest is not None:
                terms = [t, *rest]
                ranked.append((sum(len(self.piece[x]) for x in terms), terms))
        ranked.sort(key=lambda r: (r[0], r[1][0]))
        return ranked

    def _writable_terms(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode
    ) -> Iterator[int]:
        """The terminals a completion may start with at ``node``, in id order: allowed
        there, spelled by the table, and :meth:`_writable`."""
        bits = self.rt.allowed_mask(node) & self.rt.term_bits
        while bits:
            low = bits & -bits
            bits ^= low
            t = low.bit_length() - 1
            if t in self.piece and self._writable(node, t):
                yield t

    def _writable(  # type: ignore[misc]  # self: the ReserveTable
        self: ReserveTable, node: StackNode, t: int
    ) -> bool:
        """The runtime allows ``t`` at ``node`` and, for a category terminal, the view there
        admits some word (a bare table name where the default schema holds no table admits
        none: the item starts with a schema name instead)."""
        rt = self.rt
        if not (rt.allowed_mask(node) >> t) & 1:
            return False
        cat = rt.lex_at(node).words.get(t)  # (an IDENT held to the bound CTE names too)
        return cat is None or cat.exclude or bool(cat.words)
