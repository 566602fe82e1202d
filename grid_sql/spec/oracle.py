"""Executable specification of L (docs/design/foundation.md §2, §4): the slow, obvious oracle.

Independent of the fast path: parsing uses lark's own LALR(1) table construction driven by a
ten-line shift/reduce loop; lexing runs the ``regex`` package on *bytes* patterns, with
``partial=True`` for "some extension could still match".  No DFAs, no tries, no caches
beyond memoizing the allowed-terminal set of a stack.

Decisions where foundation.md leaves room (see also tests/spec):
* The union automaton that fixes the lexeme length uses the *regexes* of all terminals
  (lexicons are not consulted); the lexicon only filters the candidates of the longest
  match. If the longest full match has no viable candidate the prefix is dead (no fallback
  to a shorter match).
* A category terminal's remainder is live iff its regex can still match an extension AND r
  is a prefix of an allowed word under the folding rule (bare lexeme lower-cased against the
  lower-cased bare words; lexemes starting with ``"`` ````` ``[`` compared exactly).
* ``allowed_terminals(w)`` is A(stack) for the stack after w's *forced* emissions; the
  pending remainder (e.g. trailing whitespace) is not emitted, so it does not change A.
* Rules whose nonterminals derive nothing are dropped before building the table (role
  projections may remove the only rules of a nonterminal); an unproductive start raises.
* The operational semantics is not prefix-closed for grammars whose lexemes are not
  "separable" (see tests/spec/test_spec_properties.py::test_semantics_gap_documented).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import lark
import regex
from lark.common import ParserConf
from lark.grammar import NonTerminal, Rule, Terminal
from lark.lexer import PatternStr
from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

from grid_sql.errors import EmptyLanguageError, GrammarError, LexiconError

QUOTE_BYTES = b'"`['
Stack = tuple[int, ...]  # LALR state ids, bottom first
Lexicon = Mapping[str, tuple[frozenset[bytes], bool]]
END = "$END"


@dataclass(frozen=True)
class SpecTerminal:
    name: str
    pattern: str  # Python regex source, applied to BYTES (encoded as UTF-8)
    priority: int
    is_string: bool


@dataclass(frozen=True)
class SpecGrammar:
    terminals: tuple[SpecTerminal, ...]
    rules: tuple[tuple[str, tuple[str, ...]], ...]  # (lhs, rhs symbols)
    start: str
    ignored: frozenset[str]
    # category terminal -> (allowed words, fold_bare_case)
    lexicon: Mapping[str, tuple[frozenset[bytes], bool]] = field(default_factory=dict)

    @classmethod
    def from_lark(
        cls, lark_obj: lark.Lark, start: str = "start", lexicon: Lexicon | None = None
    ) -> SpecGrammar:
        terms = tuple(
            SpecTerminal(
                str(t.name), t.pattern.to_regexp(), t.priority, isinstance(t.pattern, PatternStr)
            )
            for t in lark_obj.terminals
        )
        rules = tuple(
            (str(r.origin.name), tuple(str(s.name) for s in r.expansion)) for r in lark_obj.rules
        )
        return cls(
            terms, rules, start, frozenset(map(str, lark_obj.ignore_tokens)), dict(lexicon or {})
        )


def _productive_rules(g: SpecGrammar) -> list[tuple[str, tuple[str, ...]]]:
    """Drop rules using a nonterminal that derives no terminal string (so LR 'no error so far'
    still means 'some completion exists')."""
    terms = {t.name for t in g.terminals}
    lhss = {lhs for lhs, _ in g.rules}
    unknown = {
        s for _, rhs in g.rules for s in rhs if s not in terms and s not in lhss and s.isupper()
    }
    # lark's convention: upper-case names are terminals (a projection never removes those)
    if unknown:
        raise GrammarError(f"rules use terminals missing from the description: {sorted(unknown)}")
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in g.rules:
            if lhs not in productive and all(s in terms or s in productive for s in rhs):
                productive.add(lhs)
                changed = True
    if g.start not in productive:
        raise EmptyLanguageError(f"start symbol {g.start!r} derives no sentence")
    return [
        (lhs, rhs)
        for lhs, rhs in g.rules
        if lhs in productive and all(s in terms or s in productive for s in rhs)
    ]


class SpecOracle:
    """Reference answers for: viable prefix, allowed terminals, EOS legality."""

    def __init__(self, grammar: SpecGrammar):
        self.g = grammar
        self.names = [t.name for t in grammar.terminals]
        self.rx = {t.name: regex.compile(t.pattern.encode("utf-8")) for t in grammar.terminals}
        # the union of all terminal languages, as one alternation (only decides lexeme length)
        self.union = regex.compile(
            b"|".join(b"(?:%s)" % t.pattern.encode() for t in grammar.terminals)
        )
        # resolution order: priority desc, string before regex, then name
        self.order = [
            t.name
            for t in sorted(grammar.terminals, key=lambda t: (-t.priority, not t.is_string, t.name))
        ]
        self.lexicon = self._check_lexicon(grammar.lexicon)
        terms = set(self.names)
        rules: list[Rule] = []
        order: dict[str, int] = {}
        for lhs, rhs in _productive_rules(grammar):
            order[lhs] = order.get(lhs, -1) + 1
            rules.append(
                Rule(
                    NonTerminal(lhs),
                    [Terminal(s) if s in terms else NonTerminal(s) for s in rhs],
                    order[lhs],
                )
            )
        try:
            an = LALR_Analyzer(ParserConf(rules, {}, [grammar.start]), strict=True)
            an.compute_lalr()
        except lark.exceptions.GrammarError as e:
            raise GrammarError(f"not LALR(1) / malformed: {e}") from e
        pt: Any = an.parse_table  # IntParseTable: {state: {symbol: (Shift|Reduce, arg)}}
        self.table: dict[int, dict[str, tuple[Any, Any]]] = pt.states
        self.start_state: int = pt.start_states[grammar.start]
        self.end_state: int = pt.end_states[grammar.start]
        self.allowed = lru_cache(maxsize=None)(self._allowed)

    def _check_lexicon(self, lexicon: Lexicon) -> dict[str, tuple[frozenset[bytes], bool]]:
        out = {}
        for name, (words, fold) in lexicon.items():
            if name not in self.rx or name in self.g.ignored:
                raise LexiconError(f"lexicon for unknown or ignored terminal {name!r}")
            bad = sorted(w for w in words if self.rx[name].fullmatch(w) is None)
            if bad:  # precondition W_c ⊆ R_c (foundation.md §4)
                raise LexiconError(f"{name}: words not matching its regex: {bad[:5]!r}")
            if fold:
                words = frozenset(w if w[:1] and w[:1] in QUOTE_BYTES else w.lower() for w in words)
            out[name] = (frozenset(words), bool(fold))
        return out

    def with_lexicon(self, lexicon: Lexicon) -> SpecOracle:
        """The same grammar under another L3 lexicon (shares the parse table; the lexicon
        never changes the parser, only which lexemes a category terminal accepts)."""
        other = copy.copy(self)
        other.g = dataclasses.replace(self.g, lexicon=dict(lexicon))
        other.lexicon = self._check_lexicon(lexicon)
        return other

    @classmethod
    def from_lark_text(
        cls,
        text: str,
        start: str = "start",
        import_paths: Sequence[str | Path] = (),
        lexicon: Lexicon | None = None,
    ) -> SpecOracle:
        kw: dict[str, Any] = dict(
            parser="lalr", lexer="basic", start=start, import_paths=[str(p) for p in import_paths]
        )
        try:
            try:
                lk = lark.Lark(text, strict=True, **kw)
            except lark.exceptions.LexError:  # terminal collisions (categories share IDENT's regex)
                # conflicts are still caught by our own strict analyzer
                lk = lark.Lark(text, strict=False, **kw)
        except lark.exceptions.GrammarError as e:
            raise GrammarError(f"grammar rejected by lark: {e}") from e
        return cls(SpecGrammar.from_lark(lk, start, lexicon))

    @classmethod
    def from_lark_file(
        cls,
        path: str | Path,
        start: str = "start",
        import_paths: Sequence[str | Path] | None = None,
        lexicon: Lexicon | None = None,
    ) -> SpecOracle:
        """A dialect file; `%import`s resolve against its directory unless import_paths is given."""
        path = Path(path)
        paths = [path.parent] if import_paths is None else list(import_paths)
        return cls.from_lark_text(path.read_text(), start, [str(p) for p in paths], lexicon)

    # ---- parser -------------------------------------------------------------------------
    def shift(self, stack: Stack, term: str) -> Stack | bool | None:
        """Feed `term` (reduce chain, then SHIFT): the new stack; None on error;
        True when `term` is $END and the chain reaches ACCEPT."""
        st = list(stack)
        while True:
            act = self.table[st[-1]].get(term)
            if act is None:
                return None
            kind, arg = act
            if kind is Shift:
                assert term != END
                return tuple(st + [arg])
            if arg.expansion:
                del st[-len(arg.expansion) :]
            kind2, goto = self.table[st[-1]][arg.origin.name]
            assert kind2 is Shift
            st.append(goto)
            if term == END and goto == self.end_state:
                return True

    def _allowed(self, stack: Stack) -> frozenset[str]:
        return frozenset(t for t in self.names if self.shift(stack, t) is not None)

    # ---- lexer --------------------------------------------------------------------------
    def _lex_key(self, name: str, s: bytes) -> tuple[frozenset[bytes], bytes]:
        words, fold = self.lexicon[name]
        if fold and s[:1] and s[:1] not in QUOTE_BYTES:
            return words, s.lower()
        return words, s

    def full(self, name: str, s: bytes) -> bool:
        """s is a complete lexeme of terminal `name` (pattern, and lexicon word if it has one)."""
        if not s or self.rx[name].fullmatch(s) is None:
            return False
        if name in self.lexicon:
            words, key = self._lex_key(name, s)
            return key in words
        return True

    def live(self, name: str, s: bytes) -> bool:
        """Some extension of s (possibly s itself) is a complete lexeme of `name`."""
        if self.rx[name].fullmatch(s, partial=True) is None:
            return False
        if name in self.lexicon:
            words, key = self._lex_key(name, s)
            return any(w.startswith(key) for w in words)
        return True

    def emit(self, stack: Stack, lexeme: bytes) -> Stack | None:
        """Contextual resolution of one forced lexeme: new stack, or None if no candidate
        is viable (ignored terminals leave the stack unchanged)."""
        for name in self.order:
            if self.full(name, lexeme):
                if name in self.g.ignored:
                    return stack
                nxt = self.shift(stack, name)
                if isinstance(nxt, tuple):
                    return nxt
        return None

    def scan(self, w: bytes, eos: bool = False) -> tuple[Stack, bytes] | None:
        """Run all forced emissions of w. Returns (stack, remainder) or None if some emission fails.
        With eos=True the trailing remainder is finalized too (remainder is then b"")."""
        stack: Stack = (self.start_state,)
        i = 0
        while i < len(w):
            # union-automaton liveness over the patterns of ALL terminals: n = longest live prefix
            n = 0
            while i + n < len(w) and self.union.fullmatch(w[i : i + n + 1], partial=True):
                n += 1
            if i + n == len(w) and not eos:
                break  # pending lexeme: could still grow
            # the lexeme: the longest full match of some terminal within those n bytes
            size = next((k for k in range(n, 0, -1) if self.union.fullmatch(w[i : i + k])), 0)
            if size == 0:
                return None
            nxt = self.emit(stack, w[i : i + size])
            if nxt is None:
                return None
            stack, i = nxt, i + size
        return stack, w[i:]

    # ---- public answers -----------------------------------------------------------------
    def config(self, w: bytes) -> tuple[Stack, bytes] | None:
        """(stack, remainder) if w is a viable prefix, else None."""
        res = self.scan(bytes(w))
        if res is None:
            return None
        stack, r = res
        if r and not any(
            self.live(t, r) for t in self.names if t in self.g.ignored or t in self.allowed(stack)
        ):
            return None
        return res

    def is_viable_prefix(self, w: bytes) -> bool:
        return self.config(w) is not None

    def remainder(self, w: bytes) -> bytes | None:
        res = self.config(w)
        return None if res is None else res[1]

    def allowed_terminals(self, w: bytes) -> frozenset[str]:
        """A(stack): terminals the parser can shift after w's forced emissions. The pending
        remainder (e.g. trailing whitespace, which could still grow) is not emitted yet, so
        for w = b"select a " this is the set after `select a`; ValueError if w is not viable."""
        res = self.config(w)
        if res is None:
            raise ValueError(f"not a viable prefix: {w!r}")
        return self.allowed(res[0])

    def accepts(self, w: bytes) -> bool:
        res = self.scan(bytes(w), eos=True)
        return res is not None and self.shift(res[0], END) is True

    def next_bytes(self, w: bytes) -> frozenset[int]:
        """Bytes b such that w+b is still a viable prefix (reference for a byte-level mask)."""
        return frozenset(b for b in range(256) if self.is_viable_prefix(bytes(w) + bytes([b])))
