"""Property tests: projections stay reduced, dead-end free and deterministic."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from grid_sql.errors import EmptyLanguageError
from grid_sql.grammar import Grammar, RoleProjection
from grid_sql.parser import ParserRuntime

from ..grammar.toy_grammars import CRUD

BASE = Grammar.from_lark(CRUD, name="crud")
DROPPABLE = sorted(
    ({r.lhs for r in BASE.rules} | {t.name for t in BASE.terminals if not t.ignored}) - {"start"}
)


def _reduced(g: Grammar) -> None:
    terms = set(g.terminal_ids)
    lhs = {r.lhs for r in g.rules}
    for r in g.rules:  # every symbol used is a terminal or a defined (productive) nonterminal
        assert all(s in terms or s in lhs for s in r.rhs), r
    reach, todo = {g.start}, [g.start]
    while todo:
        nt = todo.pop()
        for r in g.rules:
            if r.lhs == nt:
                for s in r.rhs:
                    if s in lhs and s not in reach:
                        reach.add(s)
                        todo.append(s)
    assert reach == lhs


def _no_dead_ends(g: Grammar, seed: int, steps: int = 40) -> None:
    """Shifting any allowed terminal never reaches a stack with nothing to do."""
    rt = ParserRuntime.for_grammar(g)
    rng = random.Random(seed)
    for _ in range(20):
        node = rt.root
        for _ in range(steps):
            m = rt.allowed_mask(node)
            allowed = [t for t in range(rt.n_terminals) if (m >> t) & 1]
            assert allowed or rt.accepts_end(node), "dead end: no terminal and no EOS"
            if not allowed or (rt.accepts_end(node) and rng.random() < 0.3):
                break
            node = rt.shift(node, rng.choice(allowed))


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(DROPPABLE), max_size=4), st.integers(0, 2**16))
def test_projection_is_reduced_and_dead_end_free(drop: set[str], seed: int) -> None:
    try:
        g = BASE.project(RoleProjection(drop=frozenset(drop)))
    except EmptyLanguageError:
        # then no derivation of `start` avoids the dropped symbols: check by brute force
        kept = [r for r in BASE.rules if r.lhs not in drop and not set(r.rhs) & drop]
        prod: set[str] = set()
        changed = True
        while changed:
            changed = False
            for r in kept:
                if r.lhs not in prod and all(s in BASE.terminal_ids or s in prod for s in r.rhs):
                    prod.add(r.lhs)
                    changed = True
        assert "start" not in prod
        return
    _reduced(g)
    _no_dead_ends(g, seed)
    again = BASE.project(RoleProjection(drop=frozenset(drop)))
    assert again.fingerprint == g.fingerprint
    assert again.tables.fingerprint == g.tables.fingerprint
