"""Hand-written cases for the executable specification (foundation.md §2, §4)."""

from __future__ import annotations

import dataclasses

import pytest

from grid_sql.errors import EmptyLanguageError, GrammarError, LexiconError
from grid_sql.spec import SpecGrammar, SpecOracle, SpecTerminal

# A toy SQL: keywords are case-insensitive string terminals, TABLE_NAME is a category
# terminal sharing IDENT's bare regex (plus a quoted form), COUNT is a keyword used only by
# `show count`, ARROW exists only in `show count -> x` (to show munch over ALL terminals).
TOY = r"""
start: statement [SEMI]
statement: select_stmt | delete_stmt | show_stmt
select_stmt: SELECT sel_list FROM table_ref [WHERE expr]
delete_stmt: DELETE FROM table_ref [WHERE expr]
show_stmt: SHOW COUNT [ARROW IDENT]
sel_list: sel_item (COMMA sel_item)*
sel_item: expr | STAR
table_ref: TABLE_NAME [IDENT]
expr: sum [cmp_op sum]
cmp_op: LT | LE | EQ
sum: atom (MINUS atom)*
atom: IDENT | NUMBER | STRING | LPAR expr RPAR

SELECT: "select"i
FROM: "from"i
WHERE: "where"i
DELETE: "delete"i
SHOW: "show"i
COUNT: "count"i
SEMI: ";"
COMMA: ","
STAR: "*"
LT: "<"
LE: "<="
EQ: "="
MINUS: "-"
ARROW: "->"
LPAR: "("
RPAR: ")"
IDENT: /[A-Za-z_][A-Za-z_0-9]*/
TABLE_NAME: /[A-Za-z_][A-Za-z_0-9]*|"([^"]|"")*"/
NUMBER: /[0-9]+(e[0-9]+)?/
STRING: /'([^']|'')*'/
WS: /[ \t\r\n]+/
LINE_COMMENT: /--[^\n]*/
BLOCK_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
%ignore WS
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""

TABLES = {"TABLE_NAME": (frozenset({b"employees", b"orders", b'"Order Details"'}), True)}


@pytest.fixture(scope="module")
def toy() -> SpecOracle:
    return SpecOracle.from_lark_text(TOY)


@pytest.fixture(scope="module")
def toy_lex() -> SpecOracle:
    return SpecOracle.from_lark_text(TOY, lexicon=TABLES)


def V(o, s):
    return o.is_viable_prefix(s.encode() if isinstance(s, str) else s)


def A(o, s):
    return o.accepts(s.encode() if isinstance(s, str) else s)


# ---- grammar description ----------------------------------------------------------------
def test_from_lark_description(toy):
    g = toy.g
    names = {t.name for t in g.terminals}
    assert {"SELECT", "IDENT", "TABLE_NAME", "WS", "LINE_COMMENT"} <= names
    sel = next(t for t in g.terminals if t.name == "SELECT")
    assert sel.is_string and sel.pattern == "(?i:select)"
    assert not next(t for t in g.terminals if t.name == "IDENT").is_string
    assert g.ignored == {"WS", "LINE_COMMENT", "BLOCK_COMMENT"}
    assert ("select_stmt", ("SELECT", "sel_list", "FROM", "table_ref")) in g.rules


def test_resolution_order_priority_string_name():
    # at equal priority the string terminal wins; higher priority beats everything
    terms = (
        SpecTerminal("A_RE", "ab", 0, False),
        SpecTerminal("B_STR", "ab", 0, True),
        SpecTerminal("C_HI", "ab", 1, False),
    )
    rules = (
        ("start", ("A_RE",)),
        ("start", ("B_STR", "B_STR")),
        ("start", ("C_HI", "C_HI", "C_HI")),
    )
    o = SpecOracle(SpecGrammar(terms, rules, "start", frozenset()))
    assert o.order == ["C_HI", "B_STR", "A_RE"]
    assert o.accepts(b"ababab") and not o.accepts(b"abab") and not o.accepts(b"ab")
    # projection without C_HI's rule: B_STR wins, A_RE is never emitted
    o2 = SpecOracle(SpecGrammar(terms, rules[:2], "start", frozenset()))
    assert o2.accepts(b"abab") and not o2.accepts(b"ab")


# ---- keywords vs identifiers -------------------------------------------------------------
def test_keyword_vs_identifier_by_viability(toy):
    # COUNT can't be shifted after SELECT, so `count` is an IDENT there
    assert A(toy, "select count from t")
    assert A(toy, "select a from t count")  # alias position: IDENT
    assert A(toy, "show count")  # keyword position
    # where both WHERE and the alias IDENT can shift, the keyword wins
    assert toy.allowed_terminals(b"select a from t where ") == frozenset(
        {"IDENT", "NUMBER", "STRING", "LPAR"}
    )
    assert not A(toy, "select a from t where")
    assert A(toy, "select a from t wherex")  # a longer identifier is not the keyword
    # a keyword that could be shifted wins even if it later dead-ends
    # (an alias named `where` followed by `;` would parse, but WHERE wins at emission)
    assert not V(toy, "select a from t where ;")
    assert not A(toy, "select a from t where ")
    assert A(toy, "select a from t wherex ;")
    # where only IDENT can shift, a keyword spelling is an identifier
    assert A(toy, "select from from t")
    assert A(toy, "select where from t where where = 1")


def test_case_insensitive_keywords(toy):
    assert A(toy, "SeLeCt A FrOm T WHERE b = 1")
    assert A(toy, "DELETE FROM t")
    assert V(toy, "SEL") and V(toy, "sElE")
    assert not V(toy, "SELX")


def test_allowed_terminals_at_start_and_after_forced_emissions(toy):
    assert toy.allowed_terminals(b"") == {"SELECT", "DELETE", "SHOW"}
    assert toy.remainder(b"select a from t") == b"t"
    assert toy.allowed_terminals(b"select a from t") == {"TABLE_NAME"}
    # trailing whitespace is a pending remainder; the stack is that after `select a`
    assert toy.remainder(b"select a ") == b" "
    assert toy.allowed_terminals(b"select a ") == {"COMMA", "FROM", "MINUS", "LT", "LE", "EQ"}
    assert toy.allowed_terminals(b"select a from t ") == {"IDENT", "WHERE", "SEMI"}
    with pytest.raises(ValueError):
        toy.allowed_terminals(b"select a from t x y")


# ---- maximal munch -----------------------------------------------------------------------
def test_maximal_munch_operators(toy):
    assert A(toy, "select a from t where a <= 1")
    assert A(toy, "select a from t where a<=1")
    assert A(toy, "select a from t where a < 1")
    assert not V(toy, "select a from t where a < = 1")  # `<` then `=`: EQ can't follow LT
    assert V(toy, "select a from t where a <")
    assert toy.remainder(b"select a from t where a <") == b"<"
    assert toy.remainder(b"select a from t where a <=") == b"<="


def test_munch_is_over_all_terminals(toy):
    # `->` is a lexeme (ARROW) even where only MINUS could be shifted: dead, not `-` `>`
    assert A(toy, "select a from t where a - 1")
    assert not V(toy, "select a from t where a ->")
    assert not V(toy, "select a from t where a -> 1")
    assert A(toy, "show count -> x")


def test_numbers_exponent(toy):
    assert A(toy, "select a from t where a = 1e5")
    assert V(toy, "select a from t where a = 1e")
    assert toy.remainder(b"select a from t where a = 1e") == b"1e"
    # at EOS `1e` finalizes as NUMBER `1` then IDENT `e`, which can't follow
    assert not A(toy, "select a from t where a = 1e")
    # `1ex` kills the automaton after `1e`: emit `1`, rescan `ex` as IDENT, dead here
    assert not V(toy, "select a from t where a = 1ex")
    # ... but alive where an IDENT may follow a NUMBER? not in this grammar: check via select list
    assert not V(toy, "select 1ex")
    assert A(toy, "select 1e5, 2 from t")


def test_comments_vs_minus(toy):
    assert V(toy, "select a from t where a -")
    assert A(toy, "select a from t where a --1")  # a line comment, not two minuses
    assert A(toy, "select a from t where a -- c\n = 1")
    assert not V(toy, "select a from t where a - -1")
    assert A(toy, "select /* x */ a /* ** */ from t")
    assert V(toy, "select /* x *")
    assert not A(toy, "select /* x */ a from t /* open")
    assert V(toy, "select /* x */ */")  # STAR, then `/` pending as a block-comment start
    assert not V(toy, "select /* x */ */ ")


def test_ignored_whitespace(toy):
    assert A(toy, "  select\n\ta\r\nfrom   t  ;  ")
    assert A(toy, "select a from t;")
    assert not V(toy, "select a from t;;")


def test_strings_with_doubled_quotes(toy):
    assert A(toy, "select a from t where a = 'it''s'")
    assert V(toy, "select a from t where a = 'it''")
    assert toy.remainder(b"select a from t where a = 'it''") == b"'it''"
    # finalizing `'it''` gives STRING `'it'` then a lone `'`: not a sentence
    assert not A(toy, "select a from t where a = 'it''")
    assert A(toy, "select a from t where a = 'it'")
    assert A(toy, "select a from t where a = ''")
    assert not V(toy, "select a from t where a = 'it' '")
    assert V(toy, b"select a from t where a = '\xff\x00")  # any byte inside a string


# ---- EOS ---------------------------------------------------------------------------------
def test_eos_mid_lexeme(toy):
    assert A(toy, "select a from t")  # `t` is still pending
    assert not A(toy, "select a from")
    assert not A(toy, "select a from ")
    assert A(toy, "select a from t ")
    assert not A(toy, "")
    assert not A(toy, "select")
    assert A(toy, "select a from t where (a)")


# ---- lexicons (L3) -----------------------------------------------------------------------
def test_lexicon_restriction(toy_lex):
    o = toy_lex
    assert V(o, "select a from emp")
    assert not V(o, "select a from sal")
    assert A(o, "select a from employees")
    assert not A(o, "select a from emp")
    assert not V(o, "select a from employeesx")
    assert A(o, "select a from orders o where o = 1")  # the alias is a plain IDENT
    assert A(o, "delete from orders")
    assert not V(o, "delete from salaries")
    # lexicon applies only to the category terminal; identifiers elsewhere are unrestricted
    assert A(o, "select salary from orders")


def test_lexicon_fold_bare_case_and_quoted(toy_lex):
    o = toy_lex
    assert A(o, "select a from EMPLOYEES")
    assert V(o, "select a from EmP")
    assert V(o, 'select a from "Order')
    assert A(o, 'select a from "Order Details"')
    assert not V(o, 'select a from "order')  # quoted words compare exactly
    assert not V(o, 'select a from "employees"')
    no_fold = SpecOracle.from_lark_text(
        TOY, lexicon={"TABLE_NAME": (TABLES["TABLE_NAME"][0], False)}
    )
    assert A(no_fold, "select a from employees")
    assert not V(no_fold, "select a from EMP")
    assert not A(no_fold, "select a from Employees")


def test_lexicon_word_stored_uppercase_is_folded():
    o = SpecOracle.from_lark_text(TOY, lexicon={"TABLE_NAME": (frozenset({b"Customer"}), True)})
    assert A(o, "select a from customer") and A(o, "select a from CUSTOMER")


def test_empty_lexicon_blocks_category(toy):
    o = SpecOracle(dataclasses.replace(toy.g, lexicon={"TABLE_NAME": (frozenset(), True)}))
    assert V(o, "select a ")
    assert not V(o, "select a from t")
    assert V(o, "select a from ")  # operational semantics: remainder empty, stack fine


# ---- role projections (L2) ---------------------------------------------------------------
def test_projection_removes_delete(toy):
    g = toy.g
    proj = dataclasses.replace(g, rules=tuple(r for r in g.rules if r[0] != "delete_stmt"))
    o = SpecOracle(proj)
    assert not V(o, "delete")
    assert not V(o, "del")
    assert not V(o, "d")
    assert V(o, "sel")
    assert A(o, "select a from t")
    assert o.allowed_terminals(b"") == {"SELECT", "SHOW"}
    assert A(toy, "delete from t") and V(toy, "del")
    # dropping only the `statement -> delete_stmt` edge is the same language
    proj2 = dataclasses.replace(
        g, rules=tuple(r for r in g.rules if r != ("statement", ("delete_stmt",)))
    )
    assert not V(SpecOracle(proj2), "delete")


def test_projection_of_clause(toy):
    # a clause ban: select without WHERE
    g = toy.g
    rules = tuple(r for r in g.rules if not (r[0] == "select_stmt" and "WHERE" in r[1]))
    o = SpecOracle(dataclasses.replace(g, rules=rules))
    assert A(o, "select a from t")
    assert V(o, "select a from t wher")  # live as an alias IDENT
    assert A(o, "select a from t where_")
    # the banned keyword can't shift, so `where` resolves to the alias IDENT ...
    assert A(o, "select a from t where")
    # ... and the clause is unreachable
    assert not V(o, "select a from t where a")
    assert V(toy, "select a from t where a")
    assert A(o, "delete from t where a = 1")


def test_empty_projection_and_conflicts(toy):
    g = toy.g
    with pytest.raises(EmptyLanguageError):
        SpecOracle(dataclasses.replace(g, rules=tuple(r for r in g.rules if r[0] != "statement")))
    with pytest.raises(GrammarError):
        SpecOracle.from_lark_text('start: a | b\na: "x"\nb: "x"\n')
    with pytest.raises(GrammarError):  # a terminal missing from the description
        SpecOracle(
            dataclasses.replace(g, terminals=tuple(t for t in g.terminals if t.name != "SEMI"))
        )


# ---- regex partial matching sanity --------------------------------------------------------
@pytest.mark.parametrize(
    "pattern",
    [
        "'([^']|'')*'",
        "[0-9]+(e[0-9]+)?",
        "--[^\\n]*",
        "(?i:select)",
        "ab|abc|b*",
        "a(bc|bd)+",
        "/\\*([^*]|\\*+[^*/])*\\*+/",
    ],
)
def test_partial_liveness_matches_brute_force(pattern):
    import itertools

    import regex

    rx = regex.compile(pattern.encode())
    alphabet = [b"'", b"a", b"b", b"c", b"d", b"e", b"1", b"-", b"\n", b"/", b"*", b"S"]
    words = [b""] + [b"".join(p) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    full = {
        w
        for w in words + [b"".join(p) for p in itertools.product(alphabet, repeat=4)]
        if rx.fullmatch(w)
    }
    for w in words:
        if len(w) > 2:
            continue
        brute = any(f.startswith(w) for f in full)
        if brute:  # every prefix of a (found) full match must be partially live
            assert rx.fullmatch(w, partial=True) is not None, (pattern, w)


def test_lexicon_validated_against_regex():
    with pytest.raises(LexiconError):  # W_c must be a subset of R_c
        SpecOracle.from_lark_text(TOY, lexicon={"TABLE_NAME": (frozenset({b"bad name"}), True)})
    with pytest.raises(LexiconError):
        SpecOracle.from_lark_text(TOY, lexicon={"NO_SUCH": (frozenset({b"x"}), True)})


def test_byte_semantics():
    # foundation.md §1: patterns act on bytes; (?i) folds ASCII only; `.`/`[^x]` take any byte
    terms = (
        SpecTerminal("KW", "(?i:k)", 0, True),
        SpecTerminal("ANY", "#.", 0, False),
        SpecTerminal("NOTQ", "'[^']*'", 0, False),
    )
    rules = (("start", ("KW",)), ("start", ("ANY",)), ("start", ("NOTQ",)))
    o = SpecOracle(SpecGrammar(terms, rules, "start", frozenset()))
    assert [b for b in range(256) if o.accepts(bytes([b]))] == [ord("K"), ord("k")]
    assert sum(o.accepts(b"#" + bytes([b])) for b in range(256)) == 255  # all but \n
    assert o.accepts("'é'".encode()) and o.accepts(b"'\x80\n\xff'")
    assert not o.is_viable_prefix(b"#\n")


CATS = r"""
start: COLUMN_NAME | IDENT LPAR RPAR
COLUMN_NAME: /[A-Za-z_][A-Za-z_0-9]*/
IDENT: /[A-Za-z_][A-Za-z_0-9]*/
LPAR: "("
RPAR: ")"
"""


def test_category_vs_ident_same_regex():
    # equal priority, both regex: name order decides (COLUMN_NAME < IDENT), unless the lexicon
    # removes the category candidate -- then the word falls through to IDENT
    plain = SpecOracle.from_lark_text(CATS)
    assert plain.accepts(b"count")
    assert not plain.is_viable_prefix(b"count(")  # emitted as COLUMN_NAME, then `(` is dead
    cols = SpecOracle.from_lark_text(
        CATS, lexicon={"COLUMN_NAME": (frozenset({b"age", b"name"}), True)}
    )
    assert cols.accepts(b"count()") and cols.accepts(b"AGE")
    assert not cols.accepts(b"count")
    assert cols.is_viable_prefix(b"coun")  # live via IDENT
    assert cols.is_viable_prefix(b"ag") and cols.is_viable_prefix(b"age")
    assert not cols.is_viable_prefix(b"age(")  # a lexicon word is a COLUMN_NAME


def test_with_lexicon_shares_table(toy, toy_lex):
    o = toy.with_lexicon(TABLES)
    assert o.table is toy.table and o.g.lexicon == TABLES
    for w in (b"select a from emp", b"select a from sal", b"select a from EMPLOYEES", b"from t"):
        assert o.is_viable_prefix(w) == toy_lex.is_viable_prefix(w)
        assert o.accepts(w) == toy_lex.accepts(w)
    assert toy.accepts(b"select a from t")  # the original is unchanged
    with pytest.raises(LexiconError):
        toy.with_lexicon({"TABLE_NAME": (frozenset({b"two words"}), False)})
