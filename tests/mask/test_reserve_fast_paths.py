"""The termination reserve's fast paths against what they stand for (issue #26).

Each fast path must answer exactly what the plain computation answers, or the reserve's
completions (and with them masks, forced EOS and audit trails) would change:

- ``parser/extend.py`` ``extension_filter``: ``advance(cfg, bytes([b]))`` for every byte,
  and it skips only bytes that advance finds dead;
- ``FedText.at``: ``advance(cfg, text)`` for texts fed piece by piece, branching included;
- ``_stack_completion`` with values carried across calls: a fresh search's symbols;
- ``_allowed_completions`` (kept per node): the ranking computed again, and
  ``_best_allowed`` (best-first, by lower bounds): that ranking's first entry;
- ``ParserRuntime.closed_context`` (kept per node and chain): the reduction redone;
- ``parser/closers.py`` (closer chains simulated together): one terminal at a time;
- ``_lalr_mask`` (terminals split by action groups, kept per (state, node below)): the
  reduce chain run terminal by terminal;
- ``ParserRuntime.shift`` kept per (node, terminal, value): the reduce chain run again.

The configurations are every byte prefix of statements on a scoped role grammar (Chinook,
select-list obligations on) and on the plain SQLite dialect grammar, so pending lexemes
under case-folded lexicons, quoted names, strings and FROM clauses with unbound references
all occur.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from grid_sql.grammar import Grammar
from grid_sql.grammar.lexer import DEAD
from grid_sql.mask.reserve import ReserveTable
from grid_sql.mask.reserve_search import FedText
from grid_sql.parser.closers import closing_chains, drop_unbound_closers
from grid_sql.parser.extend import extension_filter
from grid_sql.parser.incremental import Configuration, ParserRuntime
from grid_sql.parser.stack import StackNode

from ..scope.helpers import scoped
from .helpers import vocab

STATEMENTS = [
    b"SELECT g.Name, SUM(il.Quantity) FROM Genre g JOIN Track t ON t.GenreId = g.GenreId "
    b"JOIN InvoiceLine il ON il.TrackId = t.TrackId GROUP BY g.Name ORDER BY 2 DESC LIMIT 5",
    b"SELECT BillingCountry, SUM(Total) AS total FROM Invoice GROUP BY BillingCountry "
    b"ORDER BY total DESC",
    b"SELECT \"FirstName\", c.lastname FROM customer AS c WHERE c.Country = 'Brazil'",
    b"SELECT T1.Name FROM Artist AS T1 WHERE T1.ArtistId IN (SELECT ArtistId FROM Album)",
    b"WITH t AS (SELECT ArtistId, COUNT(*) AS n FROM Album GROUP BY ArtistId) "
    b"SELECT a.Name, t.n FROM Artist a JOIN t ON t.ArtistId = a.ArtistId",
]


@functools.cache
def _grammar(kind: str) -> Grammar:
    return scoped("chinook") if kind == "scoped" else Grammar.dialect("sqlite")


@functools.cache
def _table(kind: str) -> ReserveTable:
    return ReserveTable(_grammar(kind), vocab("gpt-2"))


def _prefixes(rt: ParserRuntime, stmt: bytes) -> list[tuple[bytes, Configuration]]:
    out = []
    for i in range(len(stmt) + 1):
        c = rt.advance(rt.initial, stmt[:i])
        if c is not None:
            out.append((stmt[:i], c))
    return out


def _final_nodes(rt: ParserRuntime) -> Iterator[tuple[Configuration, StackNode]]:
    """Every byte prefix of the statements whose pending lexeme finalizes, with the stack
    it finalizes to."""
    for stmt in STATEMENTS:
        for _, cfg in _prefixes(rt, stmt):
            node = rt.finalize(cfg)
            if node is not None:
                yield cfg, node


def _chain(node: StackNode | None) -> list[tuple[int, int, object]]:
    """A stack as its (state, symbol, value) entries, top first."""
    out = []
    while node is not None:
        out.append((node.state, node.symbol, node.value))
        node = node.parent
    return out


def _same(a: Configuration | None, b: Configuration | None) -> bool:
    """Equal configurations: the same stack entries (the same interned nodes, unless the
    shared runtime's intern table filled up and was cleared in between) and scan state."""
    if a is None or b is None:
        return a is b
    return (a.stack is b.stack or _chain(a.stack) == _chain(b.stack)) and a.scan == b.scan


@pytest.mark.parametrize("kind", ["scoped", "dialect"])
@pytest.mark.parametrize("stmt", STATEMENTS, ids=range(len(STATEMENTS)))
def test_extender_is_advance_by_one_byte(kind: str, stmt: bytes) -> None:
    rt = _table(kind).rt
    checked = live = filtered = 0
    for _, cfg in _prefixes(rt, stmt):
        step, ok, other = extension_filter(rt, cfg)
        for b in range(256):
            want = rt.advance(cfg, bytes([b]))
            assert _same(step(b), want), (cfg.scan.rem, bytes([b]))
            checked += 1
            live += want is not None
            t = rt.trans[cfg.scan.dfa * 256 + b]
            if t != DEAD and ok is not None and b not in ok and not rt.live_masks[t] & other:
                assert want is None, (cfg.scan.rem, bytes([b]))  # the filter skips dead only
                filtered += 1
    assert live > 100 and checked > live  # both verdicts occur
    if kind == "scoped":
        assert filtered > 100  # identifiers under the column and table lexicons


@pytest.mark.parametrize("kind", ["scoped", "dialect"])
@pytest.mark.parametrize("stmt", STATEMENTS, ids=range(len(STATEMENTS)))
def test_fed_text_is_advance(kind: str, stmt: bytes) -> None:
    rt = _table(kind).rt
    for start in (0, len(stmt) // 3, len(stmt) // 2):
        cfg = rt.advance(rt.initial, stmt[:start])
        assert cfg is not None
        rest = stmt[start:]
        text = FedText(rt, cfg)
        for i in range(len(rest) + 1):
            # the prefix the text grows by, and branches off it that are never extended
            for data in (rest[:i], rest[:i] + b" x", rest[:i] + b"'", rest[:i] + b")"):
                assert _same(text.at(data), rt.advance(cfg, data) if data else cfg), data


@pytest.mark.parametrize("kind", ["scoped", "dialect"])
def test_carried_stack_completions_are_fresh_ones(kind: str) -> None:
    table = _table(kind)
    rt = table.rt
    nodes = []
    for stmt in STATEMENTS:
        for _, cfg in _prefixes(rt, stmt):
            node = rt.finalize(cfg)
            if node is not None:
                nodes.append(node)
    # twice: the second pass answers from values carried from the first
    cuts = 0
    for _ in range(2):
        for node in nodes:
            fresh, cost, cut = table._solve_stack(node, carried=False)
            cuts += cut
            assert table._stack_completion_cost(node) == (
                None if fresh is None else list(fresh),
                cost,
            )
    assert table._sc_memo
    assert cuts  # left recursion met while solving (the CTE statement's prefixes)


def test_kept_rankings_and_closed_contexts_are_recomputed_ones() -> None:
    table = _table("scoped")
    rt = table.rt
    assert rt.sem is not None and rt.sem.bind
    closing = 0
    for cfg, node in _final_nodes(rt):
        for depth in (2, 1, 0):
            ranked = table._rank_allowed(node, depth)
            if depth == 2:
                assert table._allowed_completions(node) == ranked
            # the best-first search finds the ranking's first entry, ties included
            assert table._best_allowed(node, depth) == (ranked[0][1] if ranked else None)
        bits = rt.closers_mask
        while bits:
            low = bits & -bits
            bits ^= low
            t = low.bit_length() - 1
            kept = rt.closed_context(node, t)
            rt._closed.clear()
            again = rt.closed_context(node, t)
            assert kept == again, (cfg.scan.rem, t)
            closing += kept is not None
    assert closing > 20  # FROM clauses with unbound select-list references were closed


def test_grouped_closers_are_per_terminal_ones() -> None:
    rt = _table("scoped").rt
    sem = rt.sem
    assert sem is not None
    fc = sem.nt_from_clause
    dropped = 0
    for _cfg, node in _final_nodes(rt):
        m = rt._lalr_mask(node)
        # the chains, one terminal at a time, cut at the FROM clause
        want: dict[tuple[int, ...], int] = {}
        bits = m & rt.closers_mask
        while bits:
            low = bits & -bits
            bits ^= low
            rules, _ = rt._chain_rules(node, low.bit_length() - 1)
            end = next((i for i, r in enumerate(rules) if rt.rule_lhs[r] == fc), -1)
            if end >= 0:
                chain = tuple(rules[: end + 1])
                want[chain] = want.get(chain, 0) | low
        assert closing_chains(rt, node, m & rt.closers_mask) == want
        # the refinement, one terminal at a time (allowed_mask's own loop before)
        out = m
        bits = m & rt.closers_mask
        while bits:
            low = bits & -bits
            bits ^= low
            if rt.unbound_on(node, low.bit_length() - 1):
                out ^= low
                if low & rt.reserved_mask:
                    out |= low << rt.stop_shift
        assert drop_unbound_closers(rt, node, m) == out
        dropped += out != m
    assert dropped > 10  # closers held back by unbound select-list references


@pytest.mark.parametrize("kind", ["scoped", "dialect"])
def test_kept_lalr_masks_are_computed_ones(kind: str) -> None:
    table = _table(kind)
    rt = table.rt
    shared = compared = 0
    for _cfg, node in _final_nodes(rt):
        # the grouped simulation is the chain run terminal by terminal
        want = 0
        for t in range(rt.n_terminals):
            if rt._simulate(node, t):
                want |= 1 << t
        assert rt._lalr_mask(node) == want
        rt.allowed_mask(node)
        # words of one position: same state over the same node, other values
        for t in range(rt.n_terminals):
            if (rt.allowed_mask(node) >> t) & 1 and t in table.lexeme:
                n2 = rt.shift(node, t, table.lexeme[t] + b"x")
                key = (n2.state, -1 if n2.parent is None else n2.parent.uid)
                shared += key in rt._lalr_memo
                rt.allowed_mask(n2)
                kept = rt._lalr_memo.get(key)  # (None: cleared with a full intern table)
                if kept is not None:
                    assert kept == rt._lalr_mask(n2)
                    compared += 1
    assert shared and compared


@pytest.mark.parametrize("kind", ["scoped", "dialect"])
def test_kept_shifts_are_computed_ones(kind: str) -> None:
    table = _table(kind)
    rt = table.rt
    checked = 0
    for _cfg, node in _final_nodes(rt):
        bits = rt.allowed_mask(node) & rt.term_bits
        while bits:
            low = bits & -bits
            bits ^= low
            t = low.bit_length() - 1
            if t not in table.lexeme:
                continue
            kept = rt.shift(node, t, table.lexeme[t])
            assert rt.shift(node, t, table.lexeme[t]) is kept
            rt._shifted.clear()
            # the chain reduced again (values included) gives the same stack (the same
            # node, unless the intern table filled up and was cleared in between)
            assert _chain(rt.shift(node, t, table.lexeme[t])) == _chain(kept)
            # another word: another stack exactly where the terminal carries its word
            other = rt.shift(node, t, table.lexeme[t] + b"q")
            valued = rt.sem is not None and t in rt.sem.valued
            assert (_chain(other) == _chain(kept)) != valued
            checked += 1
    assert checked > 500
