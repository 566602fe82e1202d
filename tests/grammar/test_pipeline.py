"""The grammar pipeline: IR, projection (L2), lexicon (L3), fingerprints, typed errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grid_sql.errors import EmptyLanguageError, GrammarConflictError, GrammarError, LexiconError
from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon
from grid_sql.parser import accepts, is_viable_prefix

from .toy_grammars import CRUD


@pytest.fixture(scope="module")
def crud() -> Grammar:
    return Grammar.from_lark(CRUD, name="crud")


def test_ir_terminals_sorted_and_categories(crud: Grammar) -> None:
    names = [t.name for t in crud.terminals]
    assert names == sorted(names)
    assert [t.id for t in crud.terminals] == list(range(len(names)))
    cats = {t.name for t in crud.terminals if t.category}
    assert cats == {"TABLE_NAME", "COLUMN_NAME"}
    assert {t.name for t in crud.terminals if t.ignored} == {"WS", "COMMENT"}


def test_projection_removes_verbs_and_keeps_numbering(crud: Grammar) -> None:
    ro = crud.project(RoleProjection.select_only())
    assert [t.name for t in ro.terminals] == [t.name for t in crud.terminals]
    assert is_viable_prefix(crud, b"delete from t")
    assert not is_viable_prefix(ro, b"delete")
    assert not is_viable_prefix(ro, b"dro")
    assert not is_viable_prefix(ro, b"insert")
    assert accepts(ro, b"select * from t where a <= 3;")
    # reducedness: no rule of a removed verb survives
    lhs = {r.lhs for r in ro.rules}
    assert not lhs & {"insert_stmt", "delete_stmt", "drop_stmt"}


def test_projection_drop_terminal_and_reduction(crud: Grammar) -> None:
    g = crud.project(RoleProjection(drop=frozenset({"where_clause", "DROP"})))
    assert is_viable_prefix(g, b"select * from t where")  # `where` is now an alias
    assert not is_viable_prefix(g, b"select * from t where a")
    assert not is_viable_prefix(g, b"drop")
    assert accepts(g, b"select * from t")


def test_empty_projection_is_typed_error(crud: Grammar) -> None:
    with pytest.raises(EmptyLanguageError, match="no sentence"):
        crud.project(RoleProjection(drop=frozenset({"statement"})))
    with pytest.raises(GrammarError, match="unknown symbols"):
        crud.project(RoleProjection(drop=frozenset({"no_such_rule"})))
    with pytest.raises(GrammarError, match="keep_statements"):
        crud.project(RoleProjection(keep_statements=frozenset({"merge_stmt"})))


def test_lexicon_restricts_identifiers(crud: Grammar) -> None:
    lex = SchemaLexicon(
        {"TABLE_NAME": [b"employees", b"employees_public", b"orders", b'"Odd (name)"']}
    )
    g = crud.project(RoleProjection.select_only()).with_lexicon(lex)
    assert is_viable_prefix(g, b"select * from emplo")
    assert not is_viable_prefix(g, b"select * from sal")
    assert accepts(g, b"select * from employees")
    assert accepts(g, b'select * from "Odd (name)" x')
    assert not accepts(g, b"select * from employ")
    assert not is_viable_prefix(g, b"select * from employeesx ")


def test_lexicon_fold_bare_case(crud: Grammar) -> None:
    lex = SchemaLexicon({"TABLE_NAME": [b"Customer", b'"Customer"']}, fold_bare_case=True)
    g = crud.with_lexicon(lex)
    assert accepts(g, b"select * from CUSTOMER")
    assert accepts(g, b'select * from "Customer"')
    assert not accepts(g, b'select * from "CUSTOMER"')


def test_category_words_fold_quoted_case() -> None:
    """The scope rule's name lists compare quoted spellings case-folded too."""
    from grid_sql.grammar.lexicon import CategoryWords

    both = CategoryWords(frozenset({b"t1", b'"t1"'}), True, True)
    assert all(both.admits(w) for w in (b"T1", b"t1", b'"T1"', b'"t1"'))
    assert both.admits_prefix(b'"T') and not both.admits(b"`t1`")
    bare = CategoryWords(frozenset({b"t1", b'"T1"'}), True)
    assert bare.admits(b'"T1"') and not bare.admits(b'"t1"') and bare.admits(b"T1")


def test_lexicon_validation_errors(crud: Grammar) -> None:
    with pytest.raises(LexiconError, match="quoted form"):
        crud.with_lexicon(SchemaLexicon({"TABLE_NAME": [b"Official_ratings_(millions)"]}))
    with pytest.raises(LexiconError, match="unknown terminal"):
        crud.with_lexicon(SchemaLexicon({"NOPE": [b"x"]}))
    with pytest.raises(LexiconError, match="not an identifier category"):
        crud.with_lexicon(SchemaLexicon({"IDENT": [b"x"]}))


def test_validation_memo_never_admits_a_bad_word(crud: Grammar) -> None:
    # validated word sets are memoized per terminal pattern; a failing set must fail every
    # time, and a set that passed once passes again without changing the result
    bad = SchemaLexicon({"TABLE_NAME": [b"t", b"Official_ratings_(millions)"]})
    for _ in range(2):
        with pytest.raises(LexiconError, match="quoted form"):
            crud.with_lexicon(bad)
    good = SchemaLexicon({"TABLE_NAME": [b"t", b'"Official_ratings_(millions)"']})
    a, b = crud.with_lexicon(good), crud.with_lexicon(good)
    assert a.fingerprint == b.fingerprint
    assert accepts(b, b'select * from "Official_ratings_(millions)"')


def test_lexicon_step_shares_the_parent_rules() -> None:
    # a lexicon that removes no production reuses the projection's rules, encoded body and
    # tables key; the fingerprint is still the canonical one (checked in test_lalr_compile)
    l2 = Grammar.dialect("sqlite").project(RoleProjection.select_only())
    l3 = l2.with_lexicon(SchemaLexicon({"TABLE_NAME": [b"album"], "COLUMN_NAME": [b"title"]}))
    assert l3.rules is l2.rules and l3.lark_rules is l2.lark_rules
    assert l3.tables_key == l2.tables_key and l3.fingerprint != l2.fingerprint
    assert l3.tables.action is l2.tables.action
    # a lexicon that empties a used terminal takes the full path
    red = l2.with_lexicon(SchemaLexicon({"TABLE_NAME": [b"album"], "COLUMN_NAME": []}))
    assert len(red.rules) < len(l2.rules) and red.tables_key != l2.tables_key


def test_empty_lexicon_category_reduces_grammar(crud: Grammar) -> None:
    g = crud.with_lexicon(SchemaLexicon({"COLUMN_NAME": []}))
    assert accepts(g, b"select * from t")
    assert not is_viable_prefix(g, b"select a")
    with pytest.raises(EmptyLanguageError):
        crud.with_lexicon(SchemaLexicon({"TABLE_NAME": []}))


def test_malformed_and_conflicting_grammars() -> None:
    with pytest.raises(GrammarError, match="malformed"):
        Grammar.from_lark("start: (")
    with pytest.raises(GrammarError, match="malformed"):
        Grammar.from_lark('start: undefined_rule\nA: "a"')
    ambiguous = 'start: e\ne: e "+" e | "x"\n'
    with pytest.raises(GrammarConflictError, match="not LALR"):
        Grammar.from_lark(ambiguous)
    rr = 'start: a | b\na: "x"\nb: "x"\n'
    with pytest.raises(GrammarConflictError):
        Grammar.from_lark(rr)


def test_fingerprints_deterministic_across_processes(crud: Grammar) -> None:
    code = (
        "import sys; sys.path.insert(0, 'tests/grammar');"
        "from toy_grammars import CRUD; from grid_sql.grammar import Grammar, RoleProjection;"
        "g = Grammar.from_lark(CRUD);"
        "p = g.project(RoleProjection.select_only());"
        "print(g.fingerprint, p.fingerprint, g.tables.fingerprint, p.tables.fingerprint)"
    )
    outs = set()
    for seed in ("0", "1", "12345"):
        r = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        outs.add(r.stdout.strip())
    assert len(outs) == 1
    p = crud.project(RoleProjection.select_only())
    assert outs.pop().split() == [
        crud.fingerprint,
        p.fingerprint,
        crud.tables.fingerprint,
        p.tables.fingerprint,
    ]
    assert crud.fingerprint != p.fingerprint
    lex = SchemaLexicon({"TABLE_NAME": [b"a"]})
    assert crud.with_lexicon(lex).fingerprint != crud.fingerprint
