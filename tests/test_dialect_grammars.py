"""The L1 dialect grammars (dialects/*.lark): strict LALR(1) build, naming conventions,
fixture corpora (one statement per line; ``*_invalid.sql`` must be rejected), the
identifier-category design under a schema lexicon, and a Spider smoke test.

Acceptance is decided by grid-sql's executable specification (``grid_sql.spec.SpecOracle``,
foundation.md §2 lexing), not by lark's own lexer. The full coverage run lives in
``scripts/grammar_coverage.py``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import lark
import pytest

from grid_sql.spec import SpecOracle
from grid_sql.spec.oracle import SpecGrammar

ROOT = Path(__file__).resolve().parents[1]
DIALECTS_DIR = ROOT / "dialects"
FIXTURES = ROOT / "tests" / "fixtures"
SHARED = ROOT.parent / "shared" / "data"
DIALECTS = ("sqlite", "postgresql", "mysql")
CATEGORIES = (
    "TABLE_NAME",
    "COLUMN_NAME",
    "SCHEMA_NAME",
    "INSERT_TABLE_NAME",
    "UPDATE_TABLE_NAME",
    "DELETE_TABLE_NAME",
    "TRUNCATE_TABLE_NAME",
    "FUNCTION_NAME",
    "NILADIC_NAME",
    "TYPE_NAME",
    "TABLE_FUNCTION_NAME",
)

COMMON_VERBS = (
    "select_stmt",
    "insert_stmt",
    "update_stmt",
    "delete_stmt",
    "create_table_stmt",
    "create_view_stmt",
    "create_index_stmt",
    "drop_table_stmt",
    "alter_table_stmt",
)
DIALECT_VERBS = {
    "sqlite": ("pragma_stmt", "attach_stmt", "detach_stmt", "vacuum_stmt"),
    "postgresql": ("truncate_stmt", "grant_stmt", "revoke_stmt", "copy_stmt"),
    "mysql": (
        "truncate_stmt",
        "grant_stmt",
        "revoke_stmt",
        "into_outfile_clause",
        "load_data_stmt",
    ),
}
# SQLite has no such statements; the grammar must not invent them.
ABSENT_VERBS = {
    "sqlite": ("truncate_stmt", "grant_stmt", "revoke_stmt"),
    "postgresql": (),
    "mysql": (),
}


# ---- helpers ---------------------------------------------------------------------------
def fixture_lines(path: Path) -> list[tuple[int, str]]:
    """One statement per line; blank lines and `--` comment lines are skipped."""
    out = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        s = line.strip()
        if s and not s.startswith("--"):
            out.append((no, line))
    return out


def fixture_cases(invalid: bool):
    cases = []
    for d in DIALECTS:
        for path in sorted((FIXTURES / d).glob("*.sql")):
            if path.stem.endswith("_invalid") != invalid:
                continue
            for no, line in fixture_lines(path):
                cases.append(pytest.param(d, line, id=f"{d}/{path.name}:{no}"))
    return cases


@cache
def lark_grammar(dialect: str) -> lark.Lark:
    # basic lexer: the strict regex-collision check then covers ALL terminal pairs
    return lark.Lark.open(
        str(DIALECTS_DIR / f"{dialect}.lark"), parser="lalr", lexer="basic", strict=True
    )


@cache
def oracle(dialect: str) -> SpecOracle:
    return SpecOracle.from_lark_file(DIALECTS_DIR / f"{dialect}.lark")


@cache
def lexicon_oracle(dialect: str, drop_rules: tuple[str, ...] = ()) -> SpecOracle:
    return with_lexicon(dialect, LEX, drop_rules)


def with_lexicon(dialect: str, lexicon: dict, drop_rules: tuple[str, ...] = ()) -> SpecOracle:
    g = oracle(dialect).g
    rules = tuple(r for r in g.rules if r[0] not in drop_rules)
    return SpecOracle(SpecGrammar(g.terminals, rules, g.start, g.ignored, lexicon))


# ---- build and conventions -------------------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
def test_builds_strict_lalr(dialect):
    """lark strict=True: shift/reduce conflicts and same-priority regex collisions are errors."""
    g = lark_grammar(dialect)
    assert g.options.parser == "lalr"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_regexes_in_the_byte_level_common_subset(dialect):
    """The kernel's regex-automata build of the union DFA accepts every terminal pattern
    (foundation.md §1: Python re / Rust regex common subset, bytes semantics)."""
    pytest.importorskip("grid_sql._kernels")
    from grid_sql.grammar import load_dialect
    from grid_sql.grammar.lexer import LexerTables

    g = load_dialect(dialect)
    assert all(t.pattern.isascii() for t in g.terminals)  # escapes stay escapes (no raw bytes)
    LexerTables.build(g.terminals)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_names_not_mangled_and_no_rule_priorities(dialect):
    g = lark_grammar(dialect)
    names = [t.name for t in g.terminals] + [r.origin.name for r in g.rules]
    assert not [n for n in names if "common__" in n], "every core definition is imported by name"
    assert not [r for r in g.rules if r.options and r.options.priority]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_identifier_categories(dialect):
    text = (DIALECTS_DIR / f"{dialect}.lark").read_text()
    m = re.search(r"^//!\s*category\s+(.*)$", text, re.M)
    # SQLite has no TRUNCATE statement, hence no TRUNCATE_TABLE_NAME
    cats = set(CATEGORIES) - ({"TRUNCATE_TABLE_NAME"} if dialect == "sqlite" else set())
    assert m and set(m.group(1).split()) == cats
    terms = {t.name: t for t in lark_grammar(dialect).terminals}
    idents = [terms[n] for n in (*sorted(cats), "IDENT")]
    # one shared regex, distinct priorities (explicit resolution order), all below keywords
    assert len({t.pattern.to_regexp() for t in idents}) == 1
    prio = {t.name: t.priority for t in idents}
    assert prio["COLUMN_NAME"] > prio["TABLE_NAME"] > prio["SCHEMA_NAME"] > prio["IDENT"]
    # a called name: below COLUMN_NAME (func_name takes both), above the qualifier-only ones
    assert prio["COLUMN_NAME"] > prio["FUNCTION_NAME"] > prio["TABLE_NAME"]
    # a function of no arguments: right below the called name, so it plays its roles
    assert prio["FUNCTION_NAME"] > prio["NILADIC_NAME"] > prio["TABLE_NAME"]
    # every write-target category outranks SCHEMA_NAME (a qualifier may lex as either)
    for verb in ("INSERT", "UPDATE", "DELETE", "TRUNCATE"):
        if f"{verb}_TABLE_NAME" not in prio:
            continue
        assert prio["TABLE_NAME"] > prio[f"{verb}_TABLE_NAME"] > prio["SCHEMA_NAME"]
    # a conversion's type: below every name a typed literal's head may also be, above IDENT
    assert prio["SCHEMA_NAME"] > prio["TYPE_NAME"] > prio["IDENT"]
    # a FROM item's function: last (without a lexicon the table and schema names and IDENT
    # play its role through free_func_name; an unrestricted one cannot shadow a CTE name)
    assert prio["IDENT"] > prio["TABLE_FUNCTION_NAME"]
    assert len(set(prio.values())) == len(prio)
    assert max(prio.values()) < terms["SELECT"].priority
    assert all(t.pattern.type == "str" for n, t in terms.items() if n in ("SELECT", "FROM", "LPAR"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_privileged_verbs_are_named_rules(dialect):
    rules = {r.origin.name for r in lark_grammar(dialect).rules}
    for verb in COMMON_VERBS + DIALECT_VERBS[dialect]:
        assert verb in rules, verb
    for verb in ABSENT_VERBS[dialect]:
        assert verb not in rules, verb
    start = [r for r in lark_grammar(dialect).rules if r.origin.name == "start"]
    assert {tuple(s.name for s in r.expansion) for r in start} == {
        ("statement",),
        ("statement", "SEMI"),
    }


# ---- fixtures ---------------------------------------------------------------------------
def test_fixture_corpus_size():
    n = sum(len(fixture_lines(p)) for p in FIXTURES.glob("*/*.sql"))
    assert n >= 300
    for d in DIALECTS:
        assert list((FIXTURES / d).glob("*_invalid.sql")), d


@pytest.mark.parametrize("dialect,sql", fixture_cases(invalid=False))
def test_valid_fixture_parses(dialect, sql):
    assert oracle(dialect).accepts(sql.encode()), sql


@pytest.mark.parametrize("dialect,sql", fixture_cases(invalid=True))
def test_invalid_fixture_rejected(dialect, sql):
    assert not oracle(dialect).accepts(sql.encode()), sql


# ---- identifier categories under a schema lexicon (foundation.md §2, §4) ---------------
LEX = {
    "TABLE_NAME": (frozenset({b"employees", b"orders"}), True),
    "COLUMN_NAME": (frozenset({b"name", b"dept", b"year", b"id"}), True),
    "SCHEMA_NAME": (frozenset({b"main", b"public"}), True),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "sql,ok",
    [
        ("SELECT name FROM employees", True),
        ("SELECT salary FROM employees", False),  # bare unknown name is not a column
        ("SELECT count(*), max(id) FROM employees", True),  # function names are free
        ("SELECT T1.name FROM employees AS T1 JOIN orders AS T2 ON T1.id = T2.id", True),
        ("SELECT T1.salary FROM employees AS T1", False),  # qualified column still checked
        ("SELECT year FROM employees WHERE year > 2000", True),  # non-reserved word as column
        ("SELECT e.name FROM public.employees e", True),
        ("SELECT e.name FROM secret.employees e", False),  # unknown schema qualifier
        ("SELECT name AS salary FROM employees ORDER BY name", True),  # aliases are free
        ("WITH x AS (SELECT name FROM employees) SELECT * FROM x", True),  # via cte_ref
    ],
)
def test_lexicon_positions(dialect, sql, ok):
    assert lexicon_oracle(dialect).accepts(sql.encode()) is ok, sql


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cte_ref_is_the_only_unchecked_table_position(dialect):
    """`cte_ref` accepts any name in FROM; a projection that drops it (and so CTE references)
    leaves TABLE_NAME as the only way to name a relation (`table_function` still admits a
    name followed by `(`: a call, not a table; drop that rule too for the strictest roles)."""
    full = lexicon_oracle(dialect)
    strict = lexicon_oracle(dialect, ("cte_ref",))
    assert full.accepts(b"SELECT * FROM salaries")
    assert not strict.accepts(b"SELECT * FROM salaries")
    assert strict.accepts(b"SELECT * FROM employees")
    assert not strict.accepts(b"SELECT x.name FROM salaries AS x")
    assert strict.is_viable_prefix(b"SELECT * FROM emp")


# ---- Spider smoke test (the full run is scripts/grammar_coverage.py) --------------------
def _spider():
    p = SHARED / "spider" / "dev.json"
    if not p.is_file():
        pytest.skip(f"{p} not available")
    return [x["query"] for x in json.loads(p.read_text())]


def test_spider_gold_sample_sqlite():
    qs = _spider()[::20]
    bad = [q for q in qs if not oracle("sqlite").accepts(q.encode())]
    assert not bad


@pytest.mark.parametrize("dialect,write", [("postgresql", "postgres"), ("mysql", "mysql")])
def test_spider_gold_sample_transpiled(dialect, write):
    sqlglot = pytest.importorskip("sqlglot")
    qs = _spider()[::50]
    bad = []
    for q in qs:
        t = sqlglot.transpile(q, read="sqlite", write=write)[0]
        if not oracle(dialect).accepts(t.encode()):
            bad.append(t)
    assert not bad


# ---- operator precedence (tree shape; lark's own contextual lexer is enough here) -------
@cache
def tree_parser(dialect: str) -> lark.Lark:
    return lark.Lark.open(
        str(DIALECTS_DIR / f"{dialect}.lark"), parser="lalr", keep_all_tokens=True
    )


def _shape(t) -> str:
    if isinstance(t, lark.Token):
        return (
            str(t.value).upper() if t.type.isalpha() and t.type == t.value.upper() else str(t.value)
        )
    kids = [c for c in t.children if c is not None]
    if len(kids) == 1:
        return _shape(kids[0])
    return "(" + " ".join(_shape(c) for c in kids) + ")"


def shape(dialect: str, expr: str) -> str:
    tree = tree_parser(dialect).parse(f"SELECT {expr}")
    return _shape(next(t for t in tree.iter_subtrees_topdown() if t.data == "expr"))


PRECEDENCE = [
    ("*", "a OR b AND c", "(a OR (b AND c))"),
    ("*", "a AND b OR c", "((a AND b) OR c)"),
    ("*", "NOT a = b", "(NOT (a = b))"),
    ("*", "a + b * c - d", "((a + (b * c)) - d)"),
    ("*", "a = b + 1", "(a = (b + 1))"),
    ("*", "a BETWEEN b AND c AND d", "((a BETWEEN b AND c) AND d)"),
    ("*", "- a * b", "((- a) * b)"),
    ("*", "a < b AND c IN (1, 2)", "((a < b) AND (c IN (( (1 , 2) ))))"),
    ("sqlite", "a || b * c", "((a || b) * c)"),
    ("postgresql", "a || b * c", "(a || (b * c))"),
    ("postgresql", "- a ^ b * c", "(((- a) ^ b) * c)"),
    ("postgresql", "a::int + b", "((a :: int) + b)"),
    ("mysql", "a || b AND c", "(a || (b AND c))"),
    ("mysql", "a XOR b OR c", "((a XOR b) OR c)"),
]


@pytest.mark.parametrize(
    "dialect,expr,expected",
    [
        pytest.param(d2, e, x, id=f"{d2}:{e}")
        for d, e, x in PRECEDENCE
        for d2 in (DIALECTS if d == "*" else (d,))
    ],
)
def test_operator_precedence(dialect, expr, expected):
    assert shape(dialect, expr) == expected


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_prefix_of_a_valid_fixture_is_viable(dialect):
    """No dead ends inside the language: all prefixes of accepted sentences stay viable."""
    lines = [
        line
        for p in sorted((FIXTURES / dialect).glob("*.sql"))
        if not p.stem.endswith("_invalid")
        for _, line in fixture_lines(p)
    ]
    o = oracle(dialect)
    for sql in lines[:: max(1, len(lines) // 6)]:
        b = sql.encode()
        for k in range(len(b) + 1):
            assert o.is_viable_prefix(b[:k]), (b[:k], sql)
