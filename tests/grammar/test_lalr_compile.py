"""LALR(1) tables built by the Rust kernel are lark's tables, bit for bit.

lark's ``LALR_Analyzer`` (renumbered canonically, ``tables._analyse_lark``) is the reference;
``_kernels.build_lalr`` (``tables._analyse_kernel``) must give identical action/goto arrays,
rule arrays, start/end states and nonterminal ids on the shipped dialect grammars, on role
projections, and on random small grammars — or decline (conflicts, order-dependent
lookaheads), in which case lark runs and reports.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from lark.grammar import NonTerminal, RuleOptions
from lark.grammar import Rule as LarkRule
from lark.grammar import Terminal as LarkTerminal

from grid_sql import _kernels
from grid_sql.errors import GrammarConflictError
from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon, Terminal
from grid_sql.grammar import tables as T
from grid_sql.grammar.fingerprint import fingerprint

from .toy_grammars import CRUD

pytestmark = pytest.mark.skipif(
    not hasattr(_kernels, "build_lalr"), reason="grid_sql._kernels lacks build_lalr (make ext)"
)


def assert_same(k: T._Analysed | None, ref: T._Analysed) -> None:
    assert k is not None, "kernel declined a grammar lark builds"
    assert k.action.shape == ref.action.shape
    assert np.array_equal(k.action, ref.action)
    assert np.array_equal(k.goto, ref.goto)
    assert np.array_equal(k.rule_lhs, ref.rule_lhs)
    assert np.array_equal(k.rule_len, ref.rule_len)
    assert (k.start_state, k.end_state) == (ref.start_state, ref.end_state)
    assert k.nonterminal_ids == ref.nonterminal_ids


def test_sqlite_dialect_identical_to_lark() -> None:
    g = Grammar.dialect("sqlite")
    assert_same(T._analyse_kernel(g), T._analyse_lark(g))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["postgresql", "mysql"])
def test_other_dialects_identical_to_lark(name: str) -> None:
    g = Grammar.dialect(name)
    assert_same(T._analyse_kernel(g), T._analyse_lark(g))


@pytest.mark.parametrize(
    "projection",
    [
        RoleProjection.select_only(),
        RoleProjection(drop=frozenset({"cte_ref", "table_function", "LINE_COMMENT"})),
        RoleProjection(
            drop=frozenset({"with_clause", "window_clause"}),
            keep_statements=frozenset({"select_stmt", "delete_stmt"}),
        ),
    ],
    ids=["select_only", "strict_drops", "select_delete"],
)
def test_projections_identical_to_lark(projection: RoleProjection) -> None:
    l1 = Grammar.dialect("sqlite")
    drop = frozenset(s for s in projection.drop if s in l1.terminal_ids or s in l1.nonterminals)
    g = l1.project(RoleProjection(drop=drop, keep_statements=projection.keep_statements))
    assert_same(T._analyse_kernel(g), T._analyse_lark(g))


def test_toy_grammar_and_lexicon_share_tables() -> None:
    g = Grammar.from_lark(CRUD, "start")
    assert_same(T._analyse_kernel(g), T._analyse_lark(g))
    lex = g.with_lexicon(SchemaLexicon({"TABLE_NAME": [b"users"], "COLUMN_NAME": [b"id"]}))
    # same productions: the memo hands back the same arrays, the fingerprint names the grammar
    assert lex.tables.action is g.tables.action
    assert lex.tables.fingerprint != g.tables.fingerprint


def test_streamed_fingerprint_is_the_canonical_one() -> None:
    g = Grammar.from_lark(CRUD, "start")
    t = g.tables
    ref = fingerprint(
        "lalr-tables",
        {
            "grammar": g.fingerprint,
            "action": t.action.tobytes(),
            "goto": t.goto.tobytes(),
            "lhs": t.rule_lhs.tobytes(),
            "len": t.rule_len.tobytes(),
            "start": t.start_state,
            "end": t.end_state,
        },
    )
    assert t.fingerprint == ref


def test_lark_path_gives_the_same_tables() -> None:
    g = Grammar.from_lark(CRUD, "start")
    T.clear_memo()
    by_lark = T.LALRTables.build(g, use_kernel=False)
    T.clear_memo()
    by_kernel = T.LALRTables.build(g, use_kernel=True)
    assert by_lark.fingerprint == by_kernel.fingerprint
    assert np.array_equal(by_lark.action, by_kernel.action)


def test_conflicts_are_reported_by_lark() -> None:
    with pytest.raises(GrammarConflictError, match="Shift/Reduce"):
        Grammar.from_lark('start: e\ne: e "+" e | N\nN: /[0-9]+/\n', "start")
    with pytest.raises(GrammarConflictError, match="Reduce/Reduce"):
        Grammar.from_lark("start: a | b\na: N\nb: N\nN: /[0-9]+/\n", "start")


def test_kernel_rejects_bad_symbols() -> None:
    with pytest.raises(ValueError, match="out of range"):
        _kernels.build_lalr(2, 1, [(0, [7])], 0)
    with pytest.raises(ValueError, match="out of range"):
        _kernels.build_lalr(2, 1, [(0, [1])], 3)


# ---------------------------------------------------------------- random small grammars
def random_grammar(rng: random.Random) -> Grammar:
    n_t = rng.randint(1, 4)
    n_nt = rng.randint(1, 5)
    tnames = [f"T{i}" for i in range(n_t)]
    nnames = ["start"] + [f"n{i}" for i in range(1, n_nt)]
    terminals = [Terminal(i, n, f"t{i}", 0, True, False, False) for i, n in enumerate(tnames)]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    rules = []
    for lhs in nnames:
        for _ in range(rng.randint(1, 3)):
            rhs = tuple(
                rng.choice(tnames if rng.random() < 0.5 else nnames)
                for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))
            )
            if (lhs, rhs) in seen:
                continue
            seen.add((lhs, rhs))
            syms = [LarkTerminal(s) if s in tnames else NonTerminal(s) for s in rhs]
            rules.append(LarkRule(NonTerminal(lhs), syms, options=RuleOptions()))
    return Grammar(terminals, rules, "start")


def test_random_grammars_agree_with_lark() -> None:
    rng = random.Random(4)
    built = declined = 0
    for _ in range(400):
        g = random_grammar(rng)
        k = T._analyse_kernel(g)
        try:
            ref = T._analyse_lark(g)
        except GrammarConflictError:
            assert k is None, "kernel built tables for a grammar lark rejects"
            declined += 1
            continue
        if k is None:  # declined: only order-dependent lookaheads may make it do this
            args = T.kernel_spec(g)
            assert args is not None
            with pytest.raises(ValueError, match="reads relation"):
                _kernels.build_lalr(*args[:4])
            declined += 1
            continue
        assert_same(k, ref)
        built += 1
    assert built > 100 and declined > 20


def test_reads_cycle_declined_and_reported_by_lark() -> None:
    # l: a b l | <empty>; a, b nullable: `reads` has the cycle (q1, b) -> (q2, a) -> (q1, b).
    # DeRemer and Pennello: such a grammar is not LR(k); lark reports the conflict.
    t = [Terminal(0, "X", "x", 0, True, False, False)]

    def r(lhs: str, *rhs: str) -> LarkRule:
        return LarkRule(NonTerminal(lhs), [NonTerminal(s) for s in rhs], options=RuleOptions())

    g = Grammar(t, [r("start", "l"), r("l", "a", "b", "l"), r("l"), r("a"), r("b")], "start")
    args = T.kernel_spec(g)
    assert args is not None
    with pytest.raises(ValueError, match="reads relation"):
        _kernels.build_lalr(*args[:4])
    with pytest.raises(GrammarConflictError):
        g.validate()
