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
from collections.abc import Iterable, Mapping, Sequence
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
from grid_sql.spec.aggregates import aggregate_banned
from grid_sql.spec.ctes import (
    ALIAS_CLAUSES,
    ALIAS_STOPS,
    bound_names,
    cte_outs,
    cte_words,
    list_names,
    query_outs,
    spellings,
)
from grid_sql.spec.tables import schema_only, table_words

QUOTE_BYTES = b'"`['
Stack = tuple[int, ...]  # LALR state ids, bottom first
Lexicon = Mapping[str, tuple[frozenset[bytes], bool]]
END = "$END"


# SQL keywords reserved in SQLite, PostgreSQL and MySQL alike (string terminals of these
# names): where an obligation blocks one, its spelling is not read as an identifier.
SPEC_RESERVED_WORDS = frozenset(
    "ALL AND AS CASE CHECK COLLATE CONSTRAINT CREATE DEFAULT DISTINCT ELSE EXCEPT FOREIGN FROM "
    "GROUP HAVING IN INTERSECT INTO IS JOIN LIMIT NOT NULL ON OR ORDER PRIMARY REFERENCES "
    "SELECT TABLE THEN UNION UNIQUE USING WHEN WHERE".split()
)


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
    # scope-aware column lexicons (docs/scope.md): ScopeSpec's arguments in order (table ->
    # column names, schema names, then the optional rules; spec/bridge.py writes them),
    # names lower-case and unquoted; None: off
    scopes: tuple[Any, ...] | None = None

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
        # a word spelled like a reserved keyword that a select-list obligation blocks is
        # not read as an identifier ranked below it
        self.reserved = frozenset(
            t.name for t in grammar.terminals if t.is_string and t.name in SPEC_RESERVED_WORDS
        )
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
        self._scope: ScopeSpec | None = (
            None if grammar.scopes is None else ScopeSpec(*grammar.scopes)
        )
        self._view: dict[str, tuple[frozenset[bytes], Any]] | None = None  # scoped lexicon
        self._forest: tuple[Any, ...] = ()  # parse forest of the last scoped scan

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
    def _lexicon_now(self) -> dict[str, tuple[frozenset[bytes], Any]]:
        return self.lexicon if self._view is None else self._view

    def _lex_key(self, name: str, s: bytes) -> tuple[frozenset[bytes], bytes]:
        words, fold = self._lexicon_now()[name]
        if fold == 2 or isinstance(fold, Exclude) or (fold and s[:1] and s[:1] not in QUOTE_BYTES):
            return words, s.lower()
        return words, s

    def full(self, name: str, s: bytes) -> bool:
        """s is a complete lexeme of terminal `name` (pattern, and lexicon word if it has one)."""
        if not s or self.rx[name].fullmatch(s) is None:
            return False
        if name in self._lexicon_now():
            words, key = self._lex_key(name, s)
            fold = self._lexicon_now()[name][1]
            if isinstance(fold, Exclude):
                return key not in words and not fold.refuses(key)
            return key in words
        return True

    def live(self, name: str, s: bytes) -> bool:
        """Some extension of s (possibly s itself) is a complete lexeme of `name`."""
        if self.rx[name].fullmatch(s, partial=True) is None:
            return False
        if name in self._lexicon_now():
            words, key = self._lex_key(name, s)
            fold = self._lexicon_now()[name][1]
            if isinstance(fold, Exclude):  # refused words: longer lexemes are admitted,
                return not fold.refuses(key)  # but for a refused prefix's extensions
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

    def _shift_tree(
        self, stack: Stack, forest: tuple[Any, ...], term: str, lexeme: bytes
    ) -> tuple[Stack, tuple[Any, ...]] | bool | None:
        """:meth:`shift` that also keeps the parse forest of the stack: a token is
        ``(name, lexeme)``, a reduced nonterminal ``(name, children)``. None on error, or
        when the chain closes a FROM clause leaving a select-list reference unbound
        (:meth:`ScopeSpec.unbound`); True when ``term`` is $END and the chain accepts."""
        st, fo = list(stack), list(forest)
        if term != "DOT" and self._scope is not None and self._bare_qualifier(stack, forest):
            # a bare sort key that names no output alias: only `.` may follow it
            if self._shift_tree(stack, forest, "DOT", b"") is not None:
                return None
        if term == "STRING" and self._scope is not None and self._untyped_head(stack, forest):
            return None  # a typed literal's head must be a type word (spec/tables.py)
        sc = self._scope
        if (
            term != "DOT"
            and sc is not None
            and sc.table_schemas is not None
            and schema_only(self, stack, forest, sc.default_schema, sc.table_schemas, sc.bare_all)
        ):
            # a FROM item's first word that is only a schema name: only `.` may follow it
            if self._shift_tree(stack, forest, "DOT", b"") is not None:
                return None
        if (
            term not in ("DOT", "LPAR")
            and sc is not None
            and sc.ctes
            and forest
            and _tok(forest[-1], "SCHEMA_NAME")
            and any(
                kind is not Shift and arg.origin.name == "cte_ref"
                for x, (kind, arg) in self.table[stack[-1]].items()
                if x in self.rx or x == END
            )
            and forest[-1][1] not in bound_names(forest[:-1])
        ):
            return None  # a schema name bound as no CTE: only `s.` or `s(` (spec/ctes.py)
        while True:
            act = self.table[st[-1]].get(term)
            if act is None:
                return None
            kind, arg = act
            if kind is Shift:
                assert term != END
                if term == "DOT" and self._scope is not None and self._scope.dot_dead(tuple(fo)):
                    # blocked where the name has another way on (never a dead end)
                    if any(
                        t != "DOT" and self._shift_tree(stack, forest, t, b"") is not None
                        for t in self.allowed(stack)
                    ):
                        return None
                return tuple(st + [arg]), tuple(fo + [(term, lexeme)])
            n = len(arg.expansion)
            kids = tuple(fo[len(fo) - n :]) if n else ()
            if n:
                del st[-n:]
                del fo[-n:]
            goto = self.table[st[-1]][arg.origin.name][1]
            st.append(goto)
            fo.append((arg.origin.name, kids))
            if arg.origin.name == "from_clause" and self._scope is not None:
                if self._scope.unbound(tuple(fo)):
                    return None
            if term == END and goto == self.end_state:
                return True

    def _untyped_head(self, stack: Stack, forest: tuple[Any, ...]) -> bool:
        """The forest ends with a name that ``STRING`` would turn into a typed literal's
        head (the table reduces it to ``typed_name`` there) and that is not a word of the
        TYPE_NAME lexicon (compared unquoted, case-folded)."""
        if "TYPE_NAME" not in self.lexicon or not forest or not _tok(forest[-1]):
            return False
        act = self.table[stack[-1]].get("STRING")
        if act is None or act[0] is Shift or act[1].origin.name != "typed_name":
            return False
        types = {_norm(w) for w in self.lexicon["TYPE_NAME"][0]}
        return _norm(forest[-1][1]) not in types

    def _bare_qualifier(self, stack: Stack, forest: tuple[Any, ...]) -> bool:
        """The forest ends with an IDENT/TABLE_NAME word that the table may only reduce to
        ``any_name`` or ``output_alias`` (a sort key), every FROM is known, and the word is
        no output alias of the innermost level."""
        assert self._scope is not None
        if not forest or not _tok(forest[-1]) or forest[-1][0] not in ("IDENT", "TABLE_NAME"):
            return False
        row = self.table[stack[-1]]
        acts = [row[x] for x in row if x in self.rx or x == END]
        if any(kind is Shift for kind, _ in acts):
            return False
        becomes = {arg.origin.name for _, arg in acts}
        if "output_alias" not in becomes or not becomes <= {"any_name", "output_alias"}:
            return False
        quals = self._scope.qualifier_names(forest)
        word = _norm(forest[-1][1])
        if quals is None or word not in quals:
            return False  # (a word bound nowhere: its `.` is dead, see dot_dead)
        levels, _ = self._scope._levels(forest)
        aliases = levels[-1].aliases
        return "*" not in aliases and word not in aliases

    def _allowed_scoped(self, stack: Stack, forest: tuple[Any, ...]) -> frozenset[str]:
        """A(stack) under select-list obligations: the terminals whose chain shifts without
        closing a FROM clause that leaves a select-list reference unbound."""
        return frozenset(
            t for t in self.allowed(stack) if self._shift_tree(stack, forest, t, b"") is not None
        )

    def _scan_scoped(self, w: bytes, eos: bool) -> tuple[Stack, bytes] | None:
        """:meth:`scan` under scope-aware column lexicons: the lexicon in force before each
        emission is the scope rule evaluated on the parse forest so far."""
        assert self._scope is not None
        stack: Stack = (self.start_state,)
        forest: tuple[Any, ...] = ()
        self._view = self._scope.view(self, stack, forest)
        i = 0
        while i < len(w):
            n = 0
            while i + n < len(w) and self.union.fullmatch(w[i : i + n + 1], partial=True):
                n += 1
            if i + n == len(w) and not eos:
                break
            size = next((k for k in range(n, 0, -1) if self.union.fullmatch(w[i : i + k])), 0)
            if size == 0:
                return None
            lexeme = w[i : i + size]
            for name in self.order:
                if self.full(name, lexeme):
                    if name in self.g.ignored:
                        nxt: tuple[Stack, tuple[Any, ...]] | None = (stack, forest)
                        break
                    got = self._shift_tree(stack, forest, name, lexeme)
                    if isinstance(got, tuple):
                        nxt = got
                        break
                    if name in self.reserved and name in self.allowed(stack):
                        return None  # a reserved keyword an obligation blocks: no fallback
            else:
                return None
            assert nxt is not None
            stack, forest = nxt
            self._view = self._scope.view(self, stack, forest)
            i += size
        self._forest = forest
        return stack, w[i:]

    def scan(self, w: bytes, eos: bool = False) -> tuple[Stack, bytes] | None:
        """Run all forced emissions of w. Returns (stack, remainder) or None if some emission fails.
        With eos=True the trailing remainder is finalized too (remainder is then b"")."""
        if self._scope is not None:
            return self._scan_scoped(w, eos)
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
        if r:
            allowed = (
                self.allowed(stack)
                if self._scope is None
                else self._allowed_scoped(stack, self._forest)
            )
            if not any(self.live(t, r) for t in self.names if t in self.g.ignored or t in allowed):
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
        if self._scope is not None:
            return self._allowed_scoped(res[0], self._forest)
        return self.allowed(res[0])

    def accepts(self, w: bytes) -> bool:
        res = self.scan(bytes(w), eos=True)
        if res is None:
            return False
        if self._scope is not None:
            return self._shift_tree(res[0], self._forest, END, b"") is True
        return self.shift(res[0], END) is True

    def next_bytes(self, w: bytes) -> frozenset[int]:
        """Bytes b such that w+b is still a viable prefix (reference for a byte-level mask)."""
        return frozenset(b for b in range(256) if self.is_viable_prefix(bytes(w) + bytes([b])))


# ---- scope-aware column lexicons (docs/scope.md), on the parse forest -------------------
SCOPE_DEFAULT_SCHEMAS = frozenset({"main", "temp", "public", "pg_catalog", "information_schema"})
SCOPE_KEYWORD_ARGS = frozenset(
    {"microsecond", "second", "minute", "hour", "day", "week", "month", "quarter", "year"}
)
SCOPE_PSEUDO_COLUMNS = frozenset(
    {"rowid", "oid", "_rowid_", "ctid", "xmin", "xmax", "cmin", "cmax", "tableoid", "user"}
)
SCOPE_MAX_REFS = 32


@dataclass(frozen=True)
class Exclude:
    """Lexicon fold marker: the words are refused (compared case-folded), and so is every
    lexeme that begins with one of ``prefixes`` (docs/scope.md, "Keyword-led aliases")."""

    prefixes: frozenset[bytes] = frozenset()

    def refuses(self, key: bytes) -> bool:
        return any(key.startswith(p) for p in self.prefixes)


EXCLUDE = Exclude()
_IDENT_TERMINALS = (
    "FUNCTION_NAME",
    "NILADIC_NAME",
    "TABLE_FUNCTION_NAME",
    "TABLE_NAME",
    "INSERT_TABLE_NAME",
    "UPDATE_TABLE_NAME",
    "DELETE_TABLE_NAME",
    "TRUNCATE_TABLE_NAME",
    "SCHEMA_NAME",
    "TYPE_NAME",
    "IDENT",
)


def _norm(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    if len(s) >= 2 and s[0] == s[-1] and s[0] in '"`':
        s = s[1:-1].replace(s[0] + s[0], s[0])
    elif len(s) >= 2 and s[0] == "[" and s[-1] == "]":
        s = s[1:-1]
    return s.lower()


def _tok(x: Any, name: str | None = None) -> bool:
    return isinstance(x[1], bytes) and (name is None or x[0] == name)


def _tree(x: Any, name: str) -> bool:
    return isinstance(x[1], tuple) and x[0] == name


_SpecItem = tuple[frozenset[str], str | None, bool, str | None, tuple[str, ...]]
# a FROM item: (names, table, columns unknown, schema qualifier, columns it defines)


@dataclass
class _Level:
    state: str  # "select-list" | "from" | "after-from" | "query-tail"
    items: list[_SpecItem]
    aliases: list[str]
    refs: frozenset[tuple[str | None, str]] | None = frozenset()  # None: too many
    exposed: list[str] = field(default_factory=list)  # names the FROM items so far expose


class ScopeSpec:
    """The scope rule read off the parse forest of the stack (the lark-style value stack:
    tokens and partial trees), written independently of ``grammar/scope.py``'s synthesized
    values: FROM items and output aliases are collected by walking subtrees."""

    def __init__(
        self,
        tables: Mapping[str, frozenset[str]],
        schemas: frozenset[str],
        bind: bool = False,
        fresh: bool = False,
        alias_refuse: frozenset[str] = frozenset(),
        unbindable: frozenset[str] = frozenset(),
        ctes: bool = False,
        alias_clauses: frozenset[str] = frozenset(),
        output_refuse: frozenset[str] = frozenset(),
        table_schemas: Mapping[str, Mapping[str, frozenset[str]]] | None = None,
        default_schema: str | None = None,
        bare_all: bool = False,
        aggregates: frozenset[str] = frozenset(),
        nested_aggregates: bool = True,
        table_functions: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.tables = tables
        # function -> the columns a FROM item calling it exposes (docs/scope.md)
        self.table_functions = dict(table_functions or {})
        # aggregates where they run (spec/aggregates.py); empty: off
        self.aggregates = aggregates
        self.nested_aggregates = nested_aggregates
        self.bare_all = bare_all  # a bare table name reaches every schema (SQLite)
        # table names by schema (docs/scope.md): schema -> table -> columns; None: off
        self.table_schemas = table_schemas if default_schema is not None else None
        self.default_schema = default_schema or ""
        self.alias_clauses = alias_clauses  # where output aliases resolve (docs/scope.md)
        self.ctes = ctes  # CTE references held to the CTE names bound (docs/scope.md)
        self.schemas = SCOPE_DEFAULT_SCHEMAS | schemas
        self.bind = bind
        self.fresh_exposed = fresh
        self.alias_refuse = alias_refuse
        self.output_refuse = output_refuse  # names no output alias may spell (#30 §3)
        self.fresh = fresh or bool(alias_refuse) or bool(output_refuse)
        self.unbindable = unbindable  # qualifiers no FROM item can ever be named
        self.all_columns = {c for cs in tables.values() for c in cs}

    def _cols(self, it: _SpecItem) -> frozenset[str]:
        """The columns of item ``it``'s table: in the schema it names (bare: the default
        schema) when the catalog has several, else of every table of that name."""
        if self.table_schemas is not None and it[1]:
            got = self.table_schemas.get(it[3] or self.default_schema, {}).get(it[1])
            if got is not None:
                return frozenset(got)
        return frozenset(self.tables.get(it[1] or "", ()))

    def _walk(self, x: Any, want: str) -> list[Any]:
        """``want`` subtrees of ``x`` (not looking inside nested queries or ``want``s)."""
        if _tok(x) or x[0] == "query":
            return []
        if x[0] == want:
            return [x]
        return [y for k in x[1] for y in self._walk(k, want)]

    def _items(self, x: Any) -> list[_SpecItem]:
        out: list[_SpecItem] = []
        for tp in self._walk(x, "table_primary"):
            kids = tp[1]
            alias = kids[-1] if _tree(kids[-1], "table_alias") else None
            a_name = None
            renames = False
            cols: tuple[str, ...] = ()  # the alias's column list (docs/scope.md)
            if alias is not None:
                a_name = next(_norm(k[1]) for k in alias[1] if _tok(k, "IDENT"))
                lists = [k for k in alias[1] if _tree(k, "ident_list")]
                renames = bool(lists)
                if lists and self.ctes:
                    cols = tuple(_norm(w) for w in list_names(lists[0]))
            first = kids[0]
            if _tree(first, "table_name"):
                t = _norm(first[1][-1][1])
                sq = first[1][0] if _tree(first[1][0], "schema_qualifier") else None
                schema = _norm(sq[1][0][1]) if sq is not None else None
                out.append(
                    (frozenset({t} | ({a_name} if a_name else set())), t, renames, schema, cols)
                )
            elif _tok(first, "LPAR") and _tree(kids[1], "table_ref") and alias is None:
                out.extend(self._items(kids[1]))
            elif _tree(first, "cte_ref") and alias is None:
                out.append((frozenset({_norm(first[1][0][1])}), None, True, None, ()))
            elif _tok(first, "DUAL"):
                continue  # MySQL's FROM DUAL: no columns, no name
            else:
                outs: tuple[str, ...] = ()
                if self.ctes and _tok(first, "LPAR") and _tree(kids[1], "query") and not renames:
                    outs = query_outs(self._aliases, kids[1])
                calls = [k for k in kids if _tree(k, "table_function")]
                if self.ctes and calls and not renames:
                    outs = self._function_outs(calls[0], a_name)
                if renames:
                    outs = cols
                out.append((frozenset({a_name or "*"}), None, True, None, outs))
        return out

    def _function_outs(self, call: Any, alias: str | None) -> tuple[str, ...]:
        """The columns a FROM item's ``table_function`` tree exposes (docs/scope.md, "Table
        functions"): the dialect's list, or for a function of one scalar column the alias,
        else the function's name."""
        name = call[1][0]
        while not _tok(name):  # table_func_name -> (free_func_name ->) the word
            name = name[1][0]
        f = _norm(name[1])
        cols = self.table_functions.get(f)
        if cols is None:
            return ()
        return cols or ((alias,) if alias is not None else (f,))

    def _exposed(self, x: Any) -> list[str]:
        """The names the FROM items in ``x`` answer to as a whole: the alias when there is
        one, else the table or CTE name (a parenthesized join: its items'); unknown ones
        are left out."""
        out: list[str] = []
        for tp in self._walk(x, "table_primary"):
            kids = tp[1]
            if _tree(kids[-1], "table_alias"):
                out += [_norm(k[1]) for k in kids[-1][1] if _tok(k, "IDENT")][:1]
            elif _tree(kids[0], "table_name"):
                out.append(_norm(kids[0][1][-1][1]))
            elif _tok(kids[0], "LPAR") and _tree(kids[1], "table_ref"):
                out += self._exposed(kids[1])
            elif _tree(kids[0], "cte_ref") and _tok(kids[0][1][0]):
                out.append(_norm(kids[0][1][0][1]))
        return out

    def _aliases(self, x: Any) -> list[str]:
        out = []
        for a in self._walk(x, "alias"):
            last = a[1][-1]
            if _tree(last, "alias_name"):
                last = last[1][0]
            out.append(_norm(last[1]) if _tok(last, "IDENT") else "*")
        return out

    def _refs(self, select_list: Any) -> frozenset[tuple[str | None, str]] | None:
        """The references a select list makes of its FROM: ``q.c`` and ``q.*`` as (q, c),
        bare ``c`` as (None, c) unless double-quoted (SQLite reads an unmatched one as a
        string), a pseudo-column, a date-unit word, or in no table at all; None if more
        than SCOPE_MAX_REFS distinct."""
        if not self.bind:
            return frozenset()
        out: set[tuple[str | None, str]] = set()
        for cr in self._walk(select_list, "column_ref"):
            kids = cr[1]
            if len(kids) == 1:
                lx = kids[0][1]
                c = _norm(lx)
                if lx[:1] == b'"' or c in SCOPE_KEYWORD_ARGS | SCOPE_PSEUDO_COLUMNS:
                    continue
                if c in self.all_columns:
                    out.add((None, c))
            elif len(kids) == 3:
                q = _norm(kids[0][1][0][1])
                if q not in self.unbindable:
                    out.add((q, _norm(kids[2][1])))
        for si in self._walk(select_list, "select_item"):
            kids = si[1]
            if len(kids) == 3 and _tok(kids[2], "STAR"):
                q = _norm(kids[0][1][0][1])
                if q not in self.unbindable:
                    out.add((q, "*"))
        return None if len(out) > SCOPE_MAX_REFS else frozenset(out)

    def unbound(self, forest: tuple[Any, ...]) -> bool:
        """``forest`` ends with a FROM clause just reduced: does it leave a reference of the
        select list before it bound by no FROM item of any level (decided only when every
        enclosing level is past its FROM too)?"""
        if not self.bind:
            return False
        levels, ctes = self._levels(forest)
        if not levels or levels[-1].state != "after-from" or not levels[-1].refs:
            return False
        if any(lv.state != "after-from" for lv in levels[:-1]):
            return False
        items = [it for lv in levels for it in lv.items]
        names = {n for it in items for n in it[0]}
        aliases = {a for lv in levels for a in lv.aliases}
        schemas = self.schemas | {it[3] for it in items if it[3]}
        columns = {c for it in items for c in self._cols(it)}
        some_opaque = any(self._opaque(it, ctes) for it in items)
        for q, c in levels[-1].refs:
            if "*" in names:
                continue
            if q is not None:
                if q not in names and q not in schemas:
                    return True
            elif not (some_opaque or "*" in aliases or c in aliases or c in columns or c in names):
                return True
        return False

    def _opaque(self, it: _SpecItem, ctes: list[str]) -> bool:
        _, table, renamed, _, _ = it
        return renamed or table is None or table not in self.tables or "*" in ctes or table in ctes

    def _levels(self, forest: tuple[Any, ...]) -> tuple[list[_Level], list[str]]:
        """The query levels of a parse forest (outermost first) and the CTE names seen."""
        levels: list[_Level] = []
        ctes: list[str] = []
        prev: Any = None
        for x in forest:
            if _tok(x):
                if x[0] in ("SELECT", "UPDATE", "DELETE"):
                    # UPDATE/DELETE: a target a nested SELECT may correlate to, not modelled:
                    # a level whose binding is unknown, as a select list before its FROM
                    levels.append(_Level("select-list", [], [], frozenset()))
                elif x[0] == "WITH":
                    ctes.append("*")
                elif (
                    x[0] == "FROM"
                    and levels
                    and levels[-1].state == "select-list"
                    and prev is not None
                    and _tree(prev, "select_list")
                ):
                    levels[-1] = _Level("from", [], levels[-1].aliases, levels[-1].refs)
            elif x[0] in ("select_core", "query_body", "query_term"):
                levels.append(_Level("query-tail", self._items(x), self._aliases(x)))
            elif x[0] == "with_clause":
                ctes += [_norm(c[1][0][1]) for c in self._walk(x, "cte")]
            elif levels:
                top = levels[-1]
                if x[0] == "select_list" and top.state == "select-list":
                    levels[-1] = _Level("select-list", [], self._aliases(x), self._refs(x))
                elif (
                    x[0] == "from_clause"
                    and top.state == "select-list"
                    and prev is not None
                    and _tree(prev, "select_list")
                ):
                    levels[-1] = _Level("after-from", self._items(x), top.aliases, top.refs)
                elif top.state == "from" and (
                    x[0] in ("table_primary", "table_ref", "join_clause", "from_list")
                    or x[0].startswith("__from_list")
                ):
                    levels[-1] = _Level(
                        "from",
                        top.items + self._items(x),
                        top.aliases,
                        top.refs,
                        top.exposed + self._exposed(x),
                    )
            prev = x
        return levels, ctes

    def restriction(self, forest: tuple[Any, ...]) -> tuple[frozenset[str] | None, bool]:
        levels, ctes = self._levels(forest)

        def opaque(it: _SpecItem) -> bool:
            return self._opaque(it, ctes)

        if not levels:
            return None, False
        f = forest
        if (
            len(f) >= 2
            and _tok(f[-1], "DOT")
            and _tree(f[-2], "any_name")
            and not (len(f) >= 3 and _tok(f[-3], "DOT"))
        ):
            return self._qualified(levels, ctes, _norm(f[-2][1][0][1]))[:2]
        if (
            len(f) >= 4
            and _tok(f[-1], "DOT")
            and _tree(f[-2], "any_name")
            and _tok(f[-3], "DOT")
            and _tree(f[-4], "any_name")
        ):
            # `s.t.`: a column of the catalog's table t, wherever it is written
            s, t = _norm(f[-4][1][0][1]), _norm(f[-2][1][0][1])
            if s in self.schemas and self.tables.get(t):
                ts = self.table_schemas
                per = None if ts is None else ts.get(s, {}).get(t)
                return frozenset(per or self.tables[t]), False
        cols: set[str] = set()
        for lv in levels:
            if lv.state == "select-list" or "*" in lv.aliases:
                return None, False
            for it in lv.items:
                if opaque(it):
                    return None, False
                cols |= self._cols(it)
            cols |= set(lv.aliases)
        return (frozenset(cols) | SCOPE_KEYWORD_ARGS, False) if cols else (None, False)

    def _qualified(
        self, levels: list[_Level], ctes: list[str], q: str
    ) -> tuple[frozenset[str] | None, bool, bool]:
        """After ``q.``: (columns admitted or None, no other identifier terminal, no
        continuation valid at all)."""

        def opaque(it: _SpecItem) -> bool:
            return self._opaque(it, ctes)

        for k in range(len(levels) - 1, -1, -1):
            lv = levels[k]
            if lv.state == "select-list":  # may still be bound; three parts need a schema
                return None, q not in self.schemas, False
            hits = [it for it in lv.items if q in it[0] or "*" in it[0]]
            if lv.state in ("query-tail", "from") and k < len(levels) - 1:
                if hits:
                    return None, False, False
                continue
            if hits:
                if any(opaque(it) for it in hits):
                    return None, False, False
                found = frozenset(c for it in hits for c in self._cols(it))
                return (found, q not in self.schemas, False) if found else (None, False, False)
        # bound nowhere, every FROM known: nothing after `q.` is a valid reference unless
        # q is a schema (three-part name); keep the columns in scope, block the rest
        written = {it[3] for lv in levels for it in lv.items}
        if q in self.schemas or q in written:
            return None, False, False
        inscope = {c for lv in levels for it in lv.items for c in self._cols(it)}
        every = {c for cs in self.tables.values() for c in cs}
        return frozenset(inscope or every), True, True

    def dot_dead(self, forest: tuple[Any, ...]) -> bool:
        """``forest`` ends with a name a ``.`` would qualify: is every continuation of that
        ``.`` invalid? The first part of ``q.``: ``q`` bound nowhere (every FROM known) and
        no schema; the ``.`` after ``q.c``: ``q`` no schema (no three-part name)."""
        f = forest
        if not f or not _tree(f[-1], "any_name"):
            return False
        if len(f) >= 2 and _tok(f[-2], "DOT"):
            if len(f) < 3 or not _tree(f[-3], "any_name") or (len(f) >= 4 and _tok(f[-4], "DOT")):
                return False
            return self.restriction(f[:-1])[1]
        levels, ctes = self._levels(f)
        if not levels:
            return False
        return self._qualified(levels, ctes, _norm(f[-1][1][0][1]))[2]

    def view(
        self, oracle: SpecOracle, stack: Stack, forest: tuple[Any, ...]
    ) -> dict[str, tuple[frozenset[bytes], Any]] | None:
        """The lexicons at a configuration (None: the grammar's own): the column and
        qualifier rules of :meth:`_column_view`, and at an identifier that can only be a
        CTE reference the CTE names bound there, compared byte for byte
        (``spec/ctes.py``)."""
        view = self._column_view(oracle, stack, forest)
        words = cte_words(oracle, stack, forest) if self.ctes else None
        if words is not None:
            view = dict(oracle.lexicon) if view is None else view
            view["IDENT"] = (words, False)
        if self.table_schemas is not None:
            entries = table_words(
                oracle, stack, forest, self.default_schema, self.table_schemas, self.bare_all
            )
            if entries:
                view = dict(oracle.lexicon) if view is None else view
                view.update(entries)
        if (
            self.aggregates
            and "FUNCTION_NAME" in oracle.lexicon
            and "FUNCTION_NAME" in oracle.allowed(stack)
            and aggregate_banned(forest, self.aggregates, self.nested_aggregates)
        ):
            view = dict(oracle.lexicon) if view is None else view
            words, fold = view["FUNCTION_NAME"]
            view["FUNCTION_NAME"] = (
                frozenset(w for w in words if _norm(w) not in self.aggregates),
                fold,
            )
        return view

    def _column_view(
        self, oracle: SpecOracle, stack: Stack, forest: tuple[Any, ...]
    ) -> dict[str, tuple[frozenset[bytes], Any]] | None:
        """The column and qualifier lexicons at a configuration (None: the grammar's own).
        A fold of 2 compares every lexeme case-folded, quoted ones too (the names a
        qualifier may be); a fold of ``EXCLUDE`` does so for words that are refused, every
        other lexeme admitted."""
        if self.fresh:
            fresh = self._fresh_alias(oracle, stack, forest)
            if fresh is not None:
                refused, led = fresh
                alias_view: dict[str, tuple[frozenset[bytes], Any]] = dict(oracle.lexicon)
                alias_view["IDENT"] = (refused, Exclude(led) if led else EXCLUDE)
                return alias_view
        if "COLUMN_NAME" not in oracle.lexicon or "COLUMN_NAME" not in oracle.allowed(stack):
            return None
        view: dict[str, tuple[frozenset[bytes], Any]] | None = None
        names, qualified = self.restriction(forest)
        aliases = self.alias_extra(forest)
        rx = oracle.rx["COLUMN_NAME"]
        if names is None:
            # the whole lexicon, plus the columns CTEs and derived tables define and the
            # output aliases the clause resolves
            defined = (self.defined_columns(forest) if self.ctes else set()) | aliases
            extra = spellings(rx, defined) if defined else frozenset()
            if extra:
                words, fold = oracle.lexicon["COLUMN_NAME"]
                view = dict(oracle.lexicon)
                view["COLUMN_NAME"] = (words | extra, fold)
        if names is not None:
            words, fold = oracle.lexicon["COLUMN_NAME"]
            keep = frozenset(w for w in words if _norm(w) in names)
            if keep:
                view = dict(oracle.lexicon)
                view["COLUMN_NAME"] = (keep, fold)
            else:
                qualified = False
            extra = spellings(rx, aliases) if aliases else frozenset()
            if extra:
                view = dict(oracle.lexicon) if view is None else view
                view["COLUMN_NAME"] = ((keep or words) | extra, fold)
        if qualified:
            view = dict(oracle.lexicon) if view is None else view
            for t in _IDENT_TERMINALS:
                if t in oracle.rx:
                    view[t] = (frozenset(), False)
        if forest and _tok(forest[-1], "DOT"):
            return view
        quals = self.qualifier_names(forest)
        if quals is None:
            return view
        levels, _ = self._levels(forest)
        for t in ("TABLE_NAME", "IDENT"):
            if t not in oracle.rx or t not in oracle.allowed(stack):
                continue
            after = oracle.shift(stack, t)
            if not isinstance(after, tuple):
                continue
            row = oracle.table[after[-1]]
            acts = [row[x] for x in row if x in oracle.rx or x == END]
            if any(kind is Shift for kind, _ in acts):
                continue  # the name is not complete here
            becomes = {arg.origin.name for _, arg in acts}
            typed = "TYPE_NAME" in oracle.lexicon  # a typed literal's head: a type word
            if not becomes <= {"any_name", "output_alias"} | ({"typed_name"} if typed else set()):
                continue  # the word may be more than a qualifier or an output alias here
            may = set(quals) if "any_name" in becomes else set()
            if "typed_name" in becomes:
                may |= {_norm(w) for w in oracle.lexicon["TYPE_NAME"][0]}
            if "output_alias" in becomes:
                if "*" in levels[-1].aliases:
                    continue
                may |= set(levels[-1].aliases)
            if t in oracle.lexicon:
                words, fold = oracle.lexicon[t]
                entry: tuple[frozenset[bytes], Any] = (
                    frozenset(w for w in words if _norm(w) in may),
                    fold,
                )
            elif all(q.isascii() for q in may):
                forms = set()
                for q in may:
                    dq, bq = q.replace('"', '""'), q.replace("`", "``")
                    forms |= {q, f'"{dq}"', f"`{bq}`"}
                    if "]" not in q:
                        forms.add(f"[{q}]")
                spelled = (f.encode() for f in forms)
                entry = (frozenset(w for w in spelled if oracle.rx[t].fullmatch(w)), 2)
            else:
                continue
            view = dict(oracle.lexicon) if view is None else view
            view[t] = entry
        return view

    def _fresh_alias(
        self, oracle: SpecOracle, stack: Stack, forest: tuple[Any, ...]
    ) -> tuple[frozenset[bytes], frozenset[bytes]] | None:
        """At an IDENT that can only be a table's alias (written after a table name): the
        spellings it may not be (the names the FROM so far exposes) and the words it may not
        begin with (the reserved keywords a select-list obligation blocks there: "Keyword-led
        aliases"); None elsewhere or when none."""
        if "IDENT" not in oracle.rx or "IDENT" not in oracle.allowed(stack) or not forest:
            return None
        after = oracle.shift(stack, "IDENT")
        if not isinstance(after, tuple):
            return None
        acts = [(x, a) for x, a in oracle.table[after[-1]].items() if x in oracle.rx or x == END]
        if not any(kind is not Shift for _, (kind, _) in acts):
            return None
        reduced = set()
        for x, (kind, arg) in acts:
            if kind is Shift and x != "LPAR":
                return None
            if kind is not Shift:
                reduced.add(arg.origin.name)
        if self.output_refuse and reduced <= {"alias", "alias_name"}:
            forms = self._forms(oracle, self.output_refuse)  # an output alias
            return None if forms is None else (forms, frozenset())
        if reduced != {"table_alias"}:
            return None
        head = forest[-2] if _tok(forest[-1], "AS") and len(forest) >= 2 else forest[-1]
        if not (_tree(head, "table_name") or _tok(head, "TABLE_NAME")):
            return None
        levels, _ = self._levels(forest)
        if not levels or levels[-1].state != "from":
            return None
        refused = set(levels[-1].exposed) if self.fresh_exposed else set()
        refused |= self.alias_refuse  # no hijacked names
        forms = self._forms(oracle, refused) or frozenset()
        led = frozenset(
            name.lower().encode()
            for name in oracle.reserved
            if name in oracle.allowed(stack)
            and not isinstance(oracle._shift_tree(stack, forest, name, name.encode()), tuple)
        )
        return (forms, led) if forms or led else None

    @staticmethod
    def _forms(oracle: SpecOracle, refused: Iterable[str]) -> frozenset[bytes] | None:
        """The bare, double-quoted and backticked spellings of ``refused`` IDENT lexes."""
        forms = set()
        for q in refused:
            if not q.isascii():
                continue
            dq, bq = q.replace('"', '""'), q.replace("`", "``")
            forms |= {q, f'"{dq}"', f"`{bq}`"}  # not `[q]`: nothing extends it past `]`
        words = frozenset(w for w in (f.encode() for f in forms) if oracle.rx["IDENT"].fullmatch(w))
        return words or None

    def alias_extra(self, forest: tuple[Any, ...]) -> set[str]:
        """The output aliases of the innermost level naming no catalog column, when the
        nearest clause keyword in the forest opens a clause of ``alias_clauses`` (none after
        a ``.``, or when a stop token comes first: docs/scope.md, "Output aliases")."""
        if not self.alias_clauses or not forest or _tok(forest[-1], "DOT"):
            return set()
        for x in reversed(forest):
            if not _tok(x):
                continue
            if x[0] in ALIAS_CLAUSES:
                if ALIAS_CLAUSES[x[0]] not in self.alias_clauses:
                    return set()
                levels, _ = self._levels(forest)
                if not levels:
                    return set()
                return set(levels[-1].aliases) - {"*"} - self.all_columns
            if x[0] in ALIAS_STOPS:
                return set()
        return set()

    def defined_columns(self, forest: tuple[Any, ...]) -> set[str]:
        """The output aliases of the CTEs completed in the forest and of the derived tables
        in its levels' FROM items, less every column name of the catalog and unknown names
        (docs/scope.md, "CTE names")."""
        levels, _ = self._levels(forest)
        names = cte_outs(self._aliases, forest, _norm)
        for lv in levels:
            for it in lv.items:
                names.update(it[4])
        names.discard("*")
        return names - self.all_columns

    def qualifier_names(self, forest: tuple[Any, ...]) -> frozenset[str] | None:
        """The names ``q`` for which ``q.`` may go on to a valid reference (None: any):
        every FROM item name of every level, the schemas and the schema qualifiers written
        in FROM; None before some level's FROM or with an item of unknown name."""
        levels, _ = self._levels(forest)
        if not levels:
            return None
        out = set(self.schemas)
        for lv in levels:
            if lv.state == "select-list":
                return None
            for it in lv.items:
                if "*" in it[0]:
                    return None
                out |= it[0]
                if it[3]:
                    out.add(it[3])
        return frozenset(out)
