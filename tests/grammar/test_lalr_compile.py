"""LALR(1) tables built by the Rust kernel are lark's tables, bit for bit.

lark's ``LALR_Analyzer`` (renumbered canonically, ``tables._analyse_lark``) is the reference;
``_kernels.build_lalr`` (``tables._analyse_kernel``) must give identical action/goto arrays,
rule arrays, start/end states and nonterminal ids on the shipped dialect grammars, on role
projections, and on random small grammars — or decline (conflicts, order-dependent
lookaheads), in which case lark runs and reports.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from lark.grammar import NonTerminal, RuleOptions
from lark.grammar import Rule as LarkRule
from lark.grammar import Terminal as LarkTerminal

from grid_sql import _kernels
from grid_sql.errors import EmptyLanguageError, GrammarConflictError
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


def generic_grammar_fingerprints(g: Grammar) -> tuple[str, str]:
    body = {
        "start": g.start,
        "terminals": [
            [t.name, t.pattern, t.priority, t.is_string, t.ignored, t.category] for t in g.terminals
        ],
        "rules": [[r.lhs, list(r.rhs)] for r in g.rules],
    }
    fp_body: dict[str, object] = {
        "l1": g.l1_fingerprint,
        "body": body,
        "lexicon": g.lexicon.fingerprint if g.lexicon else None,
    }
    return fingerprint("grammar-l1", body), fingerprint("grammar", fp_body)


def test_grammar_fingerprints_are_the_canonical_ones() -> None:
    l1 = Grammar.dialect("sqlite")
    l1_fp, fp = generic_grammar_fingerprints(l1)
    assert (l1.l1_fingerprint, l1.fingerprint) == (l1_fp, fp)
    g = l1.project(RoleProjection.select_only()).with_lexicon(
        SchemaLexicon({"TABLE_NAME": [b"album", b'"Album"'], "COLUMN_NAME": [b"title"]})
    )
    assert g.l1_fingerprint == l1.l1_fingerprint
    assert g.fingerprint == generic_grammar_fingerprints(g)[1]
    assert g.tables.grammar_fingerprint == g.fingerprint
    # with scope-aware lexicons the fingerprint adds the scope table's (sorted key order)
    from grid_sql.grammar.scope import ScopeTable

    sc = g.with_scopes(ScopeTable({"album": ["title"]}))
    assert sc.scopes is not None
    fp_body: dict[str, object] = {
        "l1": sc.l1_fingerprint,
        "body": json.loads(sc._body_json),
        "lexicon": sc.lexicon.fingerprint if sc.lexicon else None,
        "scopes": sc.scopes.fingerprint,
    }
    assert sc.fingerprint == fingerprint("grammar", fp_body) != g.fingerprint


def test_reduce_keeps_exactly_the_useful_rules() -> None:
    # an unusable category (no words) removes every production through it, transitively
    l1 = Grammar.dialect("sqlite")
    g = l1.project(RoleProjection.select_only())
    lex = SchemaLexicon({"TABLE_NAME": [b"album"], "COLUMN_NAME": []})
    reduced = g.with_lexicon(lex)
    assert "COLUMN_NAME" not in reduced.used_terminals
    assert "COLUMN_NAME" in g.used_terminals
    kept = {(r.lhs, r.rhs) for r in reduced.rules}
    assert kept < {(r.lhs, r.rhs) for r in g.rules}
    # fixpoint check: every kept rule's symbols are usable and its lhs reachable
    lhs = {r.lhs for r in reduced.rules}
    for r in reduced.rules:
        assert all(s in lhs or (s in g.terminal_ids and s != "COLUMN_NAME") for s in r.rhs)


def reduce_reference(
    g: Grammar, rules: list[LarkRule], unusable: set[str]
) -> list[LarkRule] | None:
    """The fixpoint-iteration useless-symbol elimination the linear one replaced (None: the
    start symbol is unproductive)."""
    terms = set(g.terminal_ids) - unusable
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in rules:
            if r.origin.name not in productive and all(
                s.name in terms or s.name in productive for s in r.expansion
            ):
                productive.add(r.origin.name)
                changed = True
    if g.start not in productive:
        return None
    rules = [
        r
        for r in rules
        if r.origin.name in productive
        and all(s.name in terms or s.name in productive for s in r.expansion)
    ]
    reach, todo = {g.start}, [g.start]
    while todo:
        nt = todo.pop()
        for r in rules:
            if r.origin.name == nt:
                for s in r.expansion:
                    if not s.is_term and s.name not in reach:
                        reach.add(s.name)
                        todo.append(s.name)
    return [r for r in rules if r.origin.name in reach]


@pytest.mark.parametrize("unusable", [(), ("COLUMN_NAME",), ("TABLE_NAME", "SCHEMA_NAME")])
def test_reduce_matches_the_fixpoint_reference(unusable: tuple[str, ...]) -> None:
    l1 = Grammar.dialect("sqlite")
    rng = random.Random(len(unusable))
    rules = list(l1.lark_rules)
    nonempty = 0
    for _ in range(6):
        sample = [r for r in rules if rng.random() < 0.97]
        lex = SchemaLexicon({n: [] for n in unusable}) if unusable else None
        ref = reduce_reference(l1, sample, set(unusable))
        if ref is None:
            with pytest.raises(EmptyLanguageError):
                l1._reduce(sample, lex)
            continue
        assert l1._reduce(sample, lex) == ref
        nonempty += 1
    assert nonempty


def test_lexicon_over_a_reduced_grammar_keeps_its_rules() -> None:
    # fast path: the lexicon empties only terminals the projection no longer uses
    g = Grammar.dialect("sqlite").project(RoleProjection.select_only())
    assert "INSERT_TABLE_NAME" not in g.used_terminals
    lex = SchemaLexicon({"INSERT_TABLE_NAME": [], "TABLE_NAME": [b"album"]})
    fast = g.with_lexicon(lex)
    assert fast.rules == g.rules
    assert list(fast.lark_rules) == g._reduce(list(g.lark_rules), lex)
    # a derived grammar built from a non-subsequence falls back to sorting, same result
    shuffled = list(reversed(g.lark_rules))
    again = g._derive(shuffled, g.projection, lex)
    assert again.rules == fast.rules and again.fingerprint == fast.fingerprint
