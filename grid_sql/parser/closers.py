"""Terminals that would close a FROM clause with select-list references bound nowhere.

The select-list obligations (``docs/scope.md``): a reference ``q.c`` written before its
FROM clause must be bound by the FROM items when that clause closes, so a terminal whose
reduce chain reduces the FROM clause while a reference is unbound is not allowed there.
``ParserRuntime.allowed_mask`` asks this for every closer terminal of every new stack node
(``WHERE``, ``GROUP``, ``ORDER``, ``)``, ``;`` ...), and the reserve asks it again for each
terminal of a completion. Kept out of ``incremental.py``.

The closers of one node mostly share their reduce chain up to the FROM clause: the chains
are simulated for all of them together, grouped by action like ``_lalr_mask`` (issue #26:
one chain simulation and one scope check per terminal were a fifth of a cold reserve), and
the scope context a chain closes with is reduced once per (node, chain) and kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..grammar.scope import OPEN, Context

if TYPE_CHECKING:
    from .incremental import ParserRuntime
    from .stack import StackNode

CLOSED_LIMIT = 1 << 16  # (node, chain) contexts kept per runtime before the table is cleared


def open_refs(rt: ParserRuntime, node: StackNode) -> bool:
    """Whether the innermost level at ``node`` is in its FROM clause with select-list
    references to bind (no closer can leave one unbound otherwise)."""
    ctx = rt.ctx_at(node)
    return bool(ctx.levels) and ctx.levels[-1].state == OPEN and bool(ctx.levels[-1].refs)


def context_after(rt: ParserRuntime, node: StackNode, rules: tuple[int, ...]) -> Context:
    """The scope context after reducing ``rules`` (a chain ending with the FROM clause)
    at ``node``, kept per (node, chain)."""
    key = (node.uid, rules)
    hit = rt._closed.get(key)
    if hit is not None:
        return hit
    sem = rt.sem
    assert sem is not None
    for r in rules:
        node = rt._reduce_valued(node, r, sem)
    ctx = rt.ctx_at(node)
    if len(rt._closed) >= CLOSED_LIMIT:
        rt._closed.clear()
    rt._closed[key] = ctx
    return ctx


def closing_chains(rt: ParserRuntime, node: StackNode, bits: int) -> dict[tuple[int, ...], int]:
    """For the terminals of ``bits`` (no ``$END``): the reduce chain of each up to and
    including its first FROM-clause reduction -> the bitmask of the terminals with that
    chain. Terminals whose chain shifts or fails first are left out. Equal to running
    ``_chain_rules`` per terminal and cutting at the FROM clause."""
    sem = rt.sem
    assert sem is not None
    fc = sem.nt_from_clause
    action, lhs = rt.action, rt.rule_lhs
    terms: list[int] = []
    while bits:
        low = bits & -bits
        bits ^= low
        terms.append(low.bit_length() - 1)
    out: dict[tuple[int, ...], int] = {}
    work: list[tuple[StackNode, tuple[int, ...], tuple[int, ...], list[int]]] = [
        (node, (), (), terms)
    ]
    while work:
        base, overlay, rules, ts = work.pop()
        row = action[overlay[-1] if overlay else base.state]
        groups: dict[int, list[int]] = {}
        for t in ts:
            a = row[t]
            if a < 0:  # (a shift or an error ends the chain with no FROM clause closed)
                groups.setdefault(a, []).append(t)
        for a, group in groups.items():
            r = -a - 1
            chain = (*rules, r)
            if lhs[r] == fc:
                m = 0
                for t in group:
                    m |= 1 << t
                out[chain] = out.get(chain, 0) | m
                continue
            work.append((*rt.reduce_virtual(base, overlay, r), chain, group))
    return out


def drop_unbound_closers(rt: ParserRuntime, node: StackNode, m: int) -> int:
    """``m`` without the terminals that would close a FROM clause while a reference of
    its select list is bound nowhere (a reserved keyword among them keeps its stop bit:
    no identifier fallback)."""
    if not open_refs(rt, node):
        return m
    sem = rt.sem
    assert sem is not None
    out = m
    for chain, tb in closing_chains(rt, node, m & rt.closers_mask).items():
        if sem.unbound_refs(context_after(rt, node, chain)):
            out &= ~tb
            out |= (tb & rt.reserved_mask) << rt.stop_shift
    return out


def closed_context(rt: ParserRuntime, node: StackNode, tid: int) -> Context | None:
    """The scope context right after reading ``tid`` (``$END`` included) at ``node``
    closes a FROM clause whose select list holds references (None if it closes none, or
    no references): its top level lists the FROM items the clause ends with."""
    sem = rt.sem
    if sem is None or not sem.bind or not (rt.closers_mask >> tid) & 1:
        return None
    if not open_refs(rt, node):
        return None
    # the chain by states first (cheap); values only for a chain closing the FROM
    rules, _ = rt._chain_rules(node, tid)
    fc = sem.nt_from_clause
    lhs = rt.rule_lhs
    end = next((i for i, r in enumerate(rules) if lhs[r] == fc), -1)
    if end < 0:
        return None
    return context_after(rt, node, tuple(rules[: end + 1]))
