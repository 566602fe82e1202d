"""The cheapest grammar completion of an LALR stack (the termination reserve's step 2).

Split out of :mod:`grid_sql.mask.reserve` (its module doc has the design). A *key* is a
state over the stack below it, ``(state, uid of the node below)``; its value is the cheapest
cost to ACCEPT: over the LR(0) kernel items ``A -> α·β`` of the state, ``cost(β)`` plus the
value of the key the reduction of ``A`` leads to (pop ``|α|``, GOTO). A one-symbol item
(``|α| = 1``) keeps the stack below, so left recursion (``list -> list · , item``) makes
keys reach themselves.

The search is a depth-first one with memoized values and a cut (infinity) where a key is
reached again while it is being solved. A value found under a cut may be too high: the
cheapest path of a key solved below the cut key may run through it. Such a call is
finished by relaxation (Bellman-Ford over the keys it met, from those upper bounds), so
every value a call returns or keeps is the cheapest cost to ACCEPT, a function of the key
alone, whichever keys earlier calls solved. That is what lets the values be kept across
calls (consecutive configurations share all of their stack but the top few nodes: issue
#26, re-solving it was a fifth of a cold reserve) without the result depending on the
history of the process. Among items of equal cost the first in the state's item order is
taken, so the symbols are a function of the key too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MaskError
from ..parser.stack import StackNode

__all__ = ["Item", "Kept", "solve_stack"]

Key = tuple[int, int]
# key -> (cost, the chosen item's symbols, the key it leads to): a completion is read by
# following the keys, as within a call (whole tails per key made keeping quadratic in depth)
Kept = dict[Key, tuple[float, tuple[int, ...], "Key | None"]]


@dataclass(frozen=True, slots=True)
class Item:
    """An LR(0) kernel item ``lhs -> α·β`` with the search metric's cost of ``β``."""

    lhs: int  # nonterminal id (-1 for the augmented root rule)
    k: int  # |α|: states popped by the reduction
    beta: tuple[int, ...]  # symbols after the dot (terminal ids, or n_t + 1 + nonterminal id)
    cost: int


def solve_stack(
    items: Sequence[Sequence[Item]],
    goto: Any,
    end_state: int,
    node: StackNode,
    kept: Kept | None,
    kept_limit: int,
) -> tuple[tuple[int, ...] | None, float, bool]:
    """(symbols from ``node`` to ACCEPT or None, their cost, whether a cut was met).

    ``items[state]``: the kernel items, cheapest first; ``kept``: values of earlier calls
    (read, and this call's added; cleared past ``kept_limit`` before the call, so every key
    a kept entry leads to is kept too), or None."""
    if kept is not None and len(kept) > kept_limit:
        kept.clear()
    memo: dict[Key, tuple[float, tuple[int, ...], Key | None]] = {}
    below_of: dict[Key, StackNode | None] = {}
    busy: set[Key] = set()
    cut = False

    def enter(state: int, below: StackNode | None, frames: list[list[Any]]) -> float | None:
        """A value now (memo, kept, ACCEPT, cycle), or None after pushing a frame."""
        nonlocal cut
        key = (state, -1 if below is None else below.uid)
        hit = memo.get(key)
        if hit is not None:
            return hit[0]
        if kept is not None:
            old = kept.get(key)
            if old is not None:  # (the keys it leads to are kept: read by ``tail``)
                memo[key] = old
                return old[0]
        if state == end_state:
            memo[key] = (0.0, (), None)
            return 0.0
        if key in busy:
            cut = True
            return math.inf
        busy.add(key)
        below_of[key] = below
        # [key, state, below, next item index, best, pending (item, goto, base)]
        frames.append([key, state, below, 0, (math.inf, (), None), None])
        return None

    def solve(state0: int, below0: StackNode | None) -> float:
        """Iterative (an explicit frame stack): the recursion went one Python frame per
        unit-rule goto and hit the interpreter's limit on deep stacks (120 nested
        parentheses, or a degenerate model output in a repair round)."""
        frames: list[list[Any]] = []
        first = enter(state0, below0, frames)
        if first is not None:
            return first
        ret = math.inf
        while frames:
            f = frames[-1]
            key, state, below, idx, best, pending = f
            if pending is not None:  # a child frame just finished with ``ret``
                it, g2, base = pending
                c = it.cost + ret
                if c < best[0]:
                    best = (c, it.beta, (g2, base.uid))
                idx += 1
                pending = None
            row = items[state]
            pushed = False
            while idx < len(row):
                it = row[idx]
                if it.cost >= best[0]:
                    idx = len(row)
                    break
                if it.lhs < 0:  # augmented root item: complete the start symbol
                    best = (float(it.cost), it.beta, None)
                    idx += 1
                    continue
                if below is None or it.k - 1 > below.depth:
                    idx += 1
                    continue
                base = below if it.k == 1 else below.ancestor(it.k - 1)
                g2 = goto[base.state][it.lhs]
                if g2 < 0:
                    idx += 1
                    continue
                f[3], f[4], f[5] = idx, best, (it, g2, base)
                rest = enter(g2, base, frames)
                if rest is None:
                    pushed = True
                    break
                f[5] = None
                c = it.cost + rest
                if c < best[0]:
                    best = (c, it.beta, (g2, base.uid))
                idx += 1
            if pushed:
                continue
            busy.discard(key)
            memo[key] = best
            ret = best[0]
            frames.pop()
        return ret

    def relax() -> None:
        """Bring every value the search met to the cheapest cost (upper bounds before;
        each round is the search's item loop over the values of the last)."""
        changed = True
        while changed:
            changed = False
            for key, below in below_of.items():
                best: tuple[float, tuple[int, ...], Key | None] = (math.inf, (), None)
                for it in items[key[0]]:
                    if it.cost >= best[0]:
                        break
                    if it.lhs < 0:
                        best = (float(it.cost), it.beta, None)
                        continue
                    if below is None or it.k - 1 > below.depth:
                        continue
                    base = below if it.k == 1 else below.ancestor(it.k - 1)
                    g2 = goto[base.state][it.lhs]
                    if g2 < 0:
                        continue
                    child = memo.get((g2, base.uid))
                    # every item the search did not prune was entered; a pruned one
                    # cannot win now that values only went down
                    c = it.cost + (math.inf if child is None else child[0])
                    if c < best[0]:
                        best = (c, it.beta, (g2, base.uid))
                if best[0] < memo[key][0] or (best[0] == memo[key][0] and best != memo[key]):
                    changed = changed or best[0] < memo[key][0]
                    memo[key] = best

    total = solve(node.state, node.parent)
    if cut:
        relax()
    root = (node.state, -1 if node.parent is None else node.parent.uid)
    total = memo[root][0] if root in memo else total
    got: tuple[int, ...] | None = None
    if not math.isinf(total):
        out: list[int] = []
        seen: set[Key] = set()
        k: Key | None = root
        while k is not None:
            if k in seen:  # only a cycle of cost 0 could: a cyclic grammar
                raise MaskError(f"the cheapest completion of {node!r} loops")
            seen.add(k)
            entry = memo.get(k)
            if entry is None:
                assert kept is not None  # (a key a kept entry leads to)
                entry = kept[k]
            out.extend(entry[1])
            k = entry[2]
        got = tuple(out)
    if kept is not None:
        kept.update(memo)
    return got, total, cut
