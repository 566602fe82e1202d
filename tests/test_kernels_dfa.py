"""Union lexer DFA kernel (grid_sql._kernels): parity with Python's byte regexes.

Oracles, independent of the Rust build:
- accept[p] <=> ``re.fullmatch(pattern_p, data)`` with *bytes* patterns (foundation §1);
- live[p]   <=> ``regex.fullmatch(pattern_p, data, partial=True)``: ``data`` is a prefix of
  some full match (the ``regex`` module's partial matching).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import regex

from grid_sql import _kernels

# A realistic SQL terminal set (one regex per terminal, in a fixed order).
SQL_TERMINALS: list[tuple[str, str]] = [
    ("SELECT", r"(?i:select)"),
    ("FROM", r"(?i:from)"),
    ("WHERE", r"(?i:where)"),
    ("AND", r"(?i:and)"),
    ("OR", r"(?i:or)"),
    ("NOT", r"(?i:not)"),
    ("NULL", r"(?i:null)"),
    ("AS", r"(?i:as)"),
    ("IDENT", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("QUOTED_IDENT", r'"(?:[^"]|"")*"'),
    ("BACKTICK_IDENT", r"`(?:[^`]|``)*`"),
    ("STRING", r"'(?:[^']|'')*'"),
    ("NUMBER", r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"),
    ("EQ", r"="),
    ("NE", r"<>|!="),
    ("LE", r"<="),
    ("GE", r">="),
    ("LT", r"<"),
    ("GT", r">"),
    ("CONCAT", r"\|\|"),
    ("STAR", r"\*"),
    ("COMMA", r","),
    ("LPAR", r"\("),
    ("RPAR", r"\)"),
    ("SEMI", r";"),
    ("DOT", r"\."),
    ("MINUS", r"-"),
    ("PLUS", r"\+"),
    ("SLASH", r"/"),
    ("WS", r"[ \t\r\n]+"),
    ("LINE_COMMENT", r"--[^\n]*"),
    ("BLOCK_COMMENT", r"/\*(?:[^*]|\*+[^*/])*\*+/"),
]
PATTERNS = [p for _, p in SQL_TERMINALS]

# Bytes that exercise every terminal above, plus a non-ASCII byte and NUL.
ALPHABET = b"sSeElLcCtTfrom_xX019.'\"` \n*/-+<>=!|,();\xe9\x00"
# Fragments that reach deep states (keywords, closing quotes, exponents, comments).
FRAGMENTS = [
    b"select",
    b"SeLeCt",
    b"from",
    b"null",
    b"as",
    b"''",
    b"'",
    b'""',
    b"``",
    b"1e+9",
    b"1.",
    b".5",
    b"E-",
    b"--",
    b"/*",
    b"*/",
    b"**",
    b"\n",
    b"  ",
    b"<>",
    b"||",
    b"x_1",
]


class Tables:
    def __init__(self, patterns: list[str]) -> None:
        trans, accept, live, n_states, n_words = _kernels.build_union_dfa(patterns)
        self.n_states = n_states
        self.n_words = n_words
        self.n_patterns = len(patterns)
        self.trans_bytes = trans
        self.trans = np.frombuffer(trans, dtype="<u4").reshape(n_states, 256)
        self.accept = np.frombuffer(accept, dtype="<u8").reshape(n_states, n_words)
        self.live = np.frombuffer(live, dtype="<u8").reshape(n_states, n_words)

    def walk(self, data: bytes, start: int = _kernels.START_STATE) -> int:
        s = start
        for b in data:
            s = int(self.trans[s, b])
        return s

    def bits(self, table: np.ndarray, state: int) -> list[bool]:
        words = table[state]
        return [bool((int(words[p // 64]) >> (p % 64)) & 1) for p in range(self.n_patterns)]


def random_inputs(rng: random.Random, n: int, max_parts: int = 6) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(n):
        parts: list[bytes] = []
        for _ in range(rng.randint(0, max_parts)):
            if rng.random() < 0.5:
                parts.append(rng.choice(FRAGMENTS))
            else:
                parts.append(bytes(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))))
        out.append(b"".join(parts))
    return out


def check_parity(patterns: list[str], inputs: list[bytes]) -> None:
    t = Tables(patterns)
    full = [re.compile(p.encode("latin-1")) for p in patterns]
    partial = [regex.compile(p.encode("latin-1")) for p in patterns]
    for data in inputs:
        s = t.walk(data)
        want_accept = [r.fullmatch(data) is not None for r in full]
        want_live = [r.fullmatch(data, partial=True) is not None for r in partial]
        assert t.bits(t.accept, s) == want_accept, (data, s)
        assert t.bits(t.live, s) == want_live, (data, s)
        # dead state <=> nothing live
        assert (s == _kernels.DEAD_STATE) == (not any(want_live)), (data, s)


def test_layout() -> None:
    t = Tables(PATTERNS)
    assert t.n_words == 1
    assert t.n_states >= 2
    assert len(t.trans_bytes) == t.n_states * 256 * 4
    assert (t.trans[_kernels.DEAD_STATE] == _kernels.DEAD_STATE).all()
    assert not t.accept[_kernels.DEAD_STATE].any() and not t.live[_kernels.DEAD_STATE].any()
    assert all(t.bits(t.live, _kernels.START_STATE))
    assert not any(t.bits(t.accept, _kernels.START_STATE))
    assert int(t.trans.max()) < t.n_states


def test_sql_terminals_parity_random() -> None:
    rng = random.Random(20261202)
    check_parity(PATTERNS, random_inputs(rng, 3000))


def test_sql_terminals_parity_short_exhaustive() -> None:
    # every string of length <= 2 over a small alphabet
    alphabet = b"sSe'\"`1.*/-<>= \n\xe9"
    inputs = (
        [b""] + [bytes([a]) for a in alphabet] + [bytes([a, b]) for a in alphabet for b in alphabet]
    )
    check_parity(PATTERNS, inputs)


def test_keyword_identifier_overlap() -> None:
    t = Tables(PATTERNS)
    names = [n for n, _ in SQL_TERMINALS]
    sel, ident = names.index("SELECT"), names.index("IDENT")
    s = t.walk(b"SeLeCt")
    assert t.bits(t.accept, s)[sel] and t.bits(t.accept, s)[ident]
    s2 = t.walk(b"selects")
    assert not t.bits(t.live, s2)[sel] and t.bits(t.accept, s2)[ident]
    s3 = t.walk(b"sel")
    assert t.bits(t.live, s3)[sel] and not t.bits(t.accept, s3)[sel]


def test_many_patterns_multiword_bitsets() -> None:
    # > 64 patterns: bitsets span two words (pattern 69 = word 1, bit 5).
    kws = [f"(?i:kw{i:02d})" for i in range(70)] + [r"[A-Za-z][a-z0-9]*"]
    t = Tables(kws)
    assert t.n_words == 2
    s = t.walk(b"Kw69")
    acc = t.bits(t.accept, s)
    assert acc[69] and acc[70] and sum(acc) == 2
    assert (int(t.accept[s, 1]) >> 5) & 1 == 1
    rng = random.Random(7)
    inputs = [
        b"".join(rng.choice([b"kw", b"KW", b"0", b"6", b"9", b"x", b"k", b"w"]) for _ in range(4))
        for _ in range(500)
    ]
    check_parity(kws, inputs)


def test_dfa_scan_matches_numpy_walk() -> None:
    t = Tables(PATTERNS)
    rng = random.Random(11)
    for data in random_inputs(rng, 500):
        for start in (_kernels.START_STATE, _kernels.DEAD_STATE, rng.randrange(t.n_states)):
            assert _kernels.dfa_scan(t.trans_bytes, data, start) == t.walk(data, start)
    big = bytes(rng.choice(ALPHABET) for _ in range(1 << 17))  # long enough to release the GIL
    assert _kernels.dfa_scan(t.trans_bytes, big, 1) == t.walk(big, 1)


def test_dfa_scan_rejects_bad_tables() -> None:
    t = Tables(PATTERNS)
    with pytest.raises(ValueError, match="256"):
        _kernels.dfa_scan(t.trans_bytes[:-4], b"a", 1)
    with pytest.raises(ValueError, match="out of range"):
        _kernels.dfa_scan(t.trans_bytes, b"a", t.n_states)
    corrupt = bytearray(1024)
    corrupt[4 * ord("a") : 4 * ord("a") + 4] = (5).to_bytes(4, "little")
    with pytest.raises(ValueError, match="refers to state 5"):
        _kernels.dfa_scan(bytes(corrupt), b"a", 0)


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        (["a", "(b"], r"pattern 1 .*not a valid regex"),
        (["a", "b*"], r"pattern 1 .*matches the empty string"),
        (["(?:x|)"], r"pattern 0 .*matches the empty string"),
        (["a", "b", r"\bc"], r"pattern 2 .*look-around"),
        (["^a"], r"pattern 0 .*look-around"),
        ([], r"at least one pattern"),
    ],
)
def test_build_errors(patterns: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _kernels.build_union_dfa(patterns)


def test_state_cap() -> None:
    with pytest.raises(ValueError, match="exceeds the cap of 64 states"):
        _kernels.build_union_dfa([r"[ab]*a[ab]{8}"], max_states=64)


def test_build_is_deterministic() -> None:
    assert _kernels.build_union_dfa(PATTERNS) == _kernels.build_union_dfa(PATTERNS)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_dialect_terminal_sets_parity(dialect: str, repo_root: Path) -> None:
    # The real terminal sets of the shipped grammars stay within the common regex subset
    # (foundation §1) and the union DFA agrees with `re`/`regex` on them.
    load_grammar = pytest.importorskip("lark.load_grammar").load_grammar
    path = repo_root / "dialects" / f"{dialect}.lark"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    # Only the terminals are needed: compile the grammar without building parse tables
    # (a full lark.Lark(...) LALR build of a dialect takes seconds).
    grammar, _ = load_grammar(path.read_text(), str(path), [path.parent], False)
    terminals, _, _ = grammar.compile(["start"], "*")
    patterns = [t.pattern.to_regexp() for t in terminals]
    assert patterns
    words = FRAGMENTS + [b"SELECT", b"count", b"`t`", b"$1"]
    rng = random.Random(dialect)
    inputs = [
        b"".join(
            rng.choice(words) if rng.random() < 0.6 else bytes([rng.choice(ALPHABET)])
            for _ in range(rng.randint(0, 4))
        )
        for _ in range(300)
    ]
    check_parity(patterns, inputs)
