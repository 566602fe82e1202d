"""The grammar pipeline: L1 dialect grammar → L2 role projection → L3 schema lexicon.

A :class:`Grammar` is an immutable IR read from lark syntax (lark does the grammar parsing
and the LALR(1) construction). Terminal numbering is fixed when the L1 grammar is frozen
(terminals sorted by name) and never changes under projection or lexicons, so artifacts of
every role over one dialect share terminal ids (paper §4.3, the cross-family tier).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lark.exceptions import GrammarError as LarkGrammarError
from lark.exceptions import LarkError
from lark.grammar import Rule as LarkRule
from lark.lexer import PatternStr

from ..errors import EmptyLanguageError, GrammarError, LexiconError
from .lexicon import SchemaLexicon

if TYPE_CHECKING:
    from .lexer import LexerTables
    from .scope import ScopeTable
    from .tables import LALRTables

PRAGMA_RE = re.compile(r"^\s*//!\s*category\s+(.*)$", re.MULTILINE)
# (terminal pattern, word set) pairs whose every word fullmatches the pattern
_validated: set[tuple[str, frozenset[bytes]]] = set()
_validated_lock = threading.Lock()
_VALIDATED_LIMIT = 256


def _json_fingerprint(kind: str, obj: Any) -> str:
    """``fingerprint.fingerprint(kind, obj)`` for a value made only of JSON types (str keys,
    lists, str, int, bool, None): the canonical encoding is then plain ``json.dumps`` with
    sorted keys, so the recursive canonicalisation (most of a projection's fingerprinting
    time) is skipped. Same digest; ``tests/grammar/test_lalr_compile.py`` checks it."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-fp")
    h.update(kind.encode() + b"\0")
    h.update(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def _hex_fingerprint(kind: str, encoded: str) -> str:
    """:func:`_json_fingerprint` of a value whose canonical JSON is ``encoded``."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-fp")
    h.update(kind.encode() + b"\0")
    h.update(encoded.encode())
    return h.hexdigest()


# Keyword terminals (string terminals of these names) reserved in SQLite, PostgreSQL and
# MySQL/MariaDB alike: none of them accepts one bare as a table alias. Where a select-list
# obligation blocks such a keyword (``grammar/scope.py``), a word spelled like it is not
# read as an identifier instead (``FROM t WHERE`` does not name an alias ``WHERE``).
RESERVED_WORDS = frozenset(
    {
        "ALL", "AND", "AS", "CASE", "CHECK", "COLLATE", "CONSTRAINT", "CREATE", "DEFAULT",
        "DISTINCT", "ELSE", "EXCEPT", "FOREIGN", "FROM", "GROUP", "HAVING", "IN", "INTERSECT",
        "INTO", "IS", "JOIN", "LIMIT", "NOT", "NULL", "ON", "OR", "ORDER", "PRIMARY",
        "REFERENCES", "SELECT", "TABLE", "THEN", "UNION", "UNIQUE", "USING", "WHEN", "WHERE",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Terminal:
    """A grammar terminal with its regular lexeme language (a regex over bytes)."""

    id: int
    name: str
    pattern: str
    priority: int
    is_string: bool
    ignored: bool
    category: bool

    @property
    def reserved(self) -> bool:
        """A keyword reserved in all three dialects (``RESERVED_WORDS``): where a select-list
        obligation blocks it, its spelling does not fall back to an identifier."""
        return self.is_string and self.name in RESERVED_WORDS

    @property
    def resolution_key(self) -> tuple[int, int, str]:
        """Order of contextual resolution: priority, then strings before regexes, then name."""
        return (-self.priority, 0 if self.is_string else 1, self.name)


@dataclass(frozen=True)
class Rule:
    """A production ``lhs -> rhs`` (rhs symbols are terminal or nonterminal names)."""

    id: int
    lhs: str
    rhs: tuple[str, ...]


@dataclass(frozen=True)
class RoleProjection:
    """L2: which productions a role keeps.

    ``drop`` names nonterminals (all their productions go) and terminals (every production
    using them goes; an *ignored* terminal such as a comment stops being ignored, so its
    lexemes leave the language). ``keep_statements``, when given, keeps only those
    alternatives of the ``statement`` rule (e.g. ``{"select_stmt"}``). Useless-symbol
    elimination always follows.
    """

    drop: frozenset[str] = frozenset()
    keep_statements: frozenset[str] | None = None
    statement_rule: str = "statement"

    @classmethod
    def select_only(cls) -> RoleProjection:
        return cls(keep_statements=frozenset({"select_stmt"}))

    def describe(self) -> dict[str, Any]:
        return {
            "drop": sorted(self.drop),
            "keep_statements": None
            if self.keep_statements is None
            else sorted(self.keep_statements),
            "statement_rule": self.statement_rule,
        }


def _lark_rule_rhs(rule: LarkRule) -> tuple[str, ...]:
    return tuple(s.name for s in rule.expansion)


def _read_pragmas(texts: Iterable[str]) -> set[str]:
    cats: set[str] = set()
    for text in texts:
        for m in PRAGMA_RE.finditer(text):
            cats.update(m.group(1).split())
    return cats


class Grammar:
    """An immutable, fingerprinted grammar: terminals, rules, start symbol, lexicon.

    Build with :meth:`from_lark` or :meth:`dialect`; specialise with :meth:`project` (L2) and
    :meth:`with_lexicon` (L3). Each step returns a new grammar sharing terminal ids.
    """

    def __init__(
        self,
        terminals: Sequence[Terminal],
        lark_rules: Sequence[LarkRule],
        start: str,
        *,
        l1_fingerprint: str | None = None,
        projection: RoleProjection | None = None,
        lexicon: SchemaLexicon | None = None,
        name: str = "",
        scopes: ScopeTable | None = None,
        _sorted_rhs: Sequence[tuple[str, tuple[str, ...]]] | None = None,
        _same_body: Grammar | None = None,
    ) -> None:
        # _sorted_rhs (internal, from _derive): lark_rules are already in canonical order and
        # these are their (lhs, rhs names), so a re-specialization skips re-sorting them.
        # _same_body (internal, from _derive): a grammar with these very terminals and lark
        # rules, whose rules, encoded body and tables key are reused (a lexicon that removes
        # no production, the L3 step of every role).
        self.terminals: tuple[Terminal, ...] = tuple(terminals)
        self.terminal_ids: dict[str, int] = {t.name: t.id for t in self.terminals}
        self.start = start
        self.name = name
        self.projection = projection
        self.lexicon = lexicon
        self.scopes = scopes  # scope-aware column lexicons (grammar/scope.py); None: off
        self._is_reduced = False  # set by _derive: rules are the output of _reduce
        same = _same_body
        if same is not None and (
            same.start != start
            or same.terminals != self.terminals
            or len(same._lark_rules) != len(lark_rules)
            or any(a is not b for a, b in zip(same._lark_rules, lark_rules, strict=True))
        ):
            same = None
        if same is not None:
            self._lark_rules: tuple[LarkRule, ...] = same._lark_rules
            self.rules: tuple[Rule, ...] = same.rules
            self.nonterminals: tuple[str, ...] = same.nonterminals
            self._body_json: str = same._body_json
            if "tables_key" in same.__dict__:
                self.__dict__["tables_key"] = same.__dict__["tables_key"]
            if "_rule_positions" in same.__dict__:
                self.__dict__["_rule_positions"] = same.__dict__["_rule_positions"]
        else:
            if _sorted_rhs is not None and len(_sorted_rhs) == len(lark_rules):
                self._lark_rules = tuple(lark_rules)
                self.rules = tuple(Rule(i, lhs, rhs) for i, (lhs, rhs) in enumerate(_sorted_rhs))
            else:
                self._lark_rules = tuple(
                    sorted(lark_rules, key=lambda r: (r.origin.name, _lark_rule_rhs(r)))
                )
                self.rules = tuple(
                    Rule(i, r.origin.name, _lark_rule_rhs(r))
                    for i, r in enumerate(self._lark_rules)
                )
            self.nonterminals = tuple(sorted({r.lhs for r in self.rules}))
            body = {
                "start": start,
                "terminals": [
                    [t.name, t.pattern, t.priority, t.is_string, t.ignored, t.category]
                    for t in self.terminals
                ],
                "rules": [[r.lhs, r.rhs] for r in self.rules],  # tuples encode as JSON lists
            }
            # The canonical JSON of the body, kept: it is the prefix of the fingerprint's
            # encoding below, and derived grammars with the same body reuse it.
            self._body_json = json.dumps(body, sort_keys=True, separators=(",", ":"))
        self.l1_fingerprint = l1_fingerprint or _hex_fingerprint("grammar-l1", self._body_json)
        # = _json_fingerprint("grammar", {"body": body, "l1": ..., "lexicon": ...,
        # ["scopes": ...]}) written out in sorted key order around the kept body encoding
        # (tests/grammar/test_lalr_compile.py checks it against the generic encoder).
        dumps = json.dumps
        enc = (
            '{"body":' + self._body_json
            + ',"l1":' + dumps(self.l1_fingerprint)
            + ',"lexicon":' + dumps(lexicon.fingerprint if lexicon else None)
        )  # fmt: skip
        if scopes is not None:  # absent when off: fingerprints of unscoped grammars unchanged
            enc += ',"scopes":' + dumps(scopes.fingerprint)
        self.fingerprint: str = _hex_fingerprint("grammar", enc + "}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_lark(
        cls,
        text: str,
        start: str = "start",
        *,
        import_paths: Sequence[str | Path] = (),
        source_path: str | Path | None = None,
        categories: Iterable[str] = (),
        name: str = "",
    ) -> Grammar:
        """Load a lark grammar; identifier categories come from ``//! category`` pragmas.

        Raises :class:`GrammarError` for malformed grammars and
        :class:`~grid_sql.errors.GrammarConflictError` if the grammar is not LALR(1).

        The loaded grammar is kept in the on-disk grammar store (``grammar/cache.py``),
        keyed by every file the loader reads, so a later process skips lark's loader.
        """
        from lark.load_grammar import load_grammar

        from . import cache as store

        key = store.source_key(
            text,
            start,
            import_paths=import_paths,
            source_path=source_path,
            categories=categories,
            name=name,
        )
        hit = store.load(key, Grammar.from_store)
        if hit is not None and cls is Grammar:
            hit.validate()
            return hit

        try:
            lgrammar, used_files = load_grammar(
                text,
                str(source_path) if source_path else "<string>",
                [str(p) for p in import_paths],
                False,
            )
            lterms, lrules, ignore = lgrammar.compile([start], set())
        except (LarkGrammarError, LarkError) as exc:
            raise GrammarError(f"malformed grammar: {exc}") from exc
        except Exception as exc:  # lark raises bare exceptions for some bad input
            raise GrammarError(f"malformed grammar: {type(exc).__name__}: {exc}") from exc

        texts = [text]
        for p in used_files:
            try:
                texts.append(Path(str(p)).read_text())
            except OSError:
                pass
        cats = _read_pragmas(texts) | set(categories)

        names = sorted(t.name for t in lterms)
        known = set(names)
        missing = sorted(c for c in cats if c not in known)
        # A category declared in a shared core may be unused by one start symbol; only
        # an explicitly requested category must exist.
        missing_explicit = sorted(c for c in categories if c not in known)
        if missing_explicit:
            raise GrammarError(f"category terminal(s) not in grammar: {missing_explicit}")
        cats -= set(missing)
        by_name = {t.name: t for t in lterms}
        ignored = set(ignore)
        terminals = []
        for i, n in enumerate(names):
            td = by_name[n]
            terminals.append(
                Terminal(
                    id=i,
                    name=n,
                    pattern=td.pattern.to_regexp(),
                    priority=int(td.priority),
                    is_string=isinstance(td.pattern, PatternStr),
                    ignored=n in ignored,
                    category=n in cats,
                )
            )
        for r in lrules:
            if r.options and r.options.priority:
                raise GrammarError(
                    f"rule priorities are not allowed (rule {r.origin.name} has priority "
                    f"{r.options.priority}): resolve the ambiguity in the grammar instead"
                )
        g = cls(terminals, lrules, start, name=name)
        g.validate()
        store.save(g, key)
        return g

    @classmethod
    def from_store(cls, doc: dict[str, Any]) -> Grammar:
        """The grammar of an on-disk store document (``grammar/cache.py``'s ``encode``): its
        terminals in their frozen numbering and its rules; the store checks the fingerprint.
        Raises on a malformed document (the store treats that as a rejected entry)."""
        from lark.grammar import NonTerminal, RuleOptions
        from lark.grammar import Terminal as LarkTerminal

        terms = [
            Terminal(i, str(n), str(p), int(pr), bool(s), bool(ig), bool(c))
            for i, (n, p, pr, s, ig, c) in enumerate(doc["terminals"])
        ]
        names = {t.name for t in terms}
        rules = [
            LarkRule(
                NonTerminal(lhs),
                [LarkTerminal(s) if s in names else NonTerminal(s) for s in rhs],
                options=RuleOptions(),
            )
            for lhs, rhs in doc["rules"]
        ]
        return Grammar(terms, rules, str(doc["start"]), name=str(doc["name"]))

    @classmethod
    def dialect(cls, name: str) -> Grammar:
        """The shipped L1 grammar of a SQL dialect (``sqlite``, ``postgresql``, ``mysql``)."""
        return load_dialect(name)

    def _derive(
        self,
        lark_rules: Sequence[LarkRule],
        projection: RoleProjection | None,
        lexicon: SchemaLexicon | None,
        terminals: Sequence[Terminal] | None = None,
    ) -> Grammar:
        # lark_rules is a subsequence of self._lark_rules (projection and reduction only
        # filter), so it is already in canonical order and its (lhs, rhs) are known. Order and
        # identity are checked, so anything else (or a stale id table) takes the sort.
        pos, mine, rules = self._rule_positions, self._lark_rules, self.rules
        known: list[tuple[str, tuple[str, ...]]] = []
        last = -1
        for r in lark_rules:
            p = pos.get(id(r), -1)
            if p <= last or mine[p] is not r:  # not a subsequence of self's rules: sort
                break
            last = p
            known.append((rules[p].lhs, rules[p].rhs))
        rhs = known if len(known) == len(lark_rules) else None
        same = rhs is not None and len(known) == len(mine)  # every rule of self, in order
        g = Grammar(
            self.terminals if terminals is None else terminals,
            lark_rules,
            self.start,
            l1_fingerprint=self.l1_fingerprint,
            projection=projection,
            lexicon=lexicon,
            name=self.name,
            scopes=self.scopes,
            _sorted_rhs=rhs,
            _same_body=self if same else None,
        )
        g._is_reduced = True  # both callers pass the output of _reduce
        g.validate()
        return g

    def project(self, projection: RoleProjection) -> Grammar:
        """L2: keep a subset of productions, then eliminate useless symbols (mandatory)."""
        drop = set(projection.drop)
        unknown = sorted(
            s for s in drop if s not in self.terminal_ids and s not in set(self.nonterminals)
        )
        if unknown:
            raise GrammarError(f"projection names unknown symbols: {unknown}")
        rules = [
            lr
            for lr, r in zip(self._lark_rules, self.rules, strict=True)
            if r.lhs not in drop and drop.isdisjoint(r.rhs)
        ]
        if projection.keep_statements is not None:
            stmt = projection.statement_rule
            alts = {
                _lark_rule_rhs(r)[0]
                for r in self._lark_rules
                if r.origin.name == stmt and len(r.expansion) == 1
            }
            bad = sorted(set(projection.keep_statements) - alts)
            if bad:
                raise GrammarError(
                    f"keep_statements names {bad}, which are not alternatives of "
                    f"'{stmt}' (alternatives: {sorted(alts)})"
                )
            rules = [
                r
                for r in rules
                if r.origin.name != stmt or _lark_rule_rhs(r)[0] in projection.keep_statements
            ]
        merged = projection
        if self.projection is not None:
            keep = projection.keep_statements
            if self.projection.keep_statements is not None:
                keep = (
                    self.projection.keep_statements
                    if keep is None
                    else keep & self.projection.keep_statements
                )
            merged = RoleProjection(
                drop=self.projection.drop | projection.drop,
                keep_statements=keep,
                statement_rule=projection.statement_rule,
            )
        # dropped ignored terminals (comments) are no longer skipped: nothing can shift them
        terminals = tuple(
            replace(t, ignored=False) if t.ignored and t.name in drop else t for t in self.terminals
        )
        return self._derive(self._reduce(rules, self.lexicon), merged, self.lexicon, terminals)

    def with_lexicon(self, lexicon: SchemaLexicon) -> Grammar:
        """L3: restrict category terminals to allowed words (validated: W_c ⊆ R_c).

        A lexicon that restricts called names (``FUNCTION_NAME``) but says nothing of the
        functions of no arguments (``NILADIC_NAME``) leaves those no words: otherwise an
        unrestricted category ranked above the table names would call any name with ``()``
        (``version()``) and lex every qualifier. The same for a FROM item's function
        (``TABLE_FUNCTION_NAME``): unrestricted, it would call any name there."""
        for dependent in ("NILADIC_NAME", "TABLE_FUNCTION_NAME"):
            if (
                "FUNCTION_NAME" in lexicon.categories
                and dependent in self.terminal_ids
                and dependent not in lexicon.categories
            ):
                cats = lexicon.categories
                lexicon = SchemaLexicon(
                    {**{n: c.words for n, c in cats.items()}, dependent: ()},
                    {**{n: c.fold_bare_case for n, c in cats.items()}, dependent: False},
                )
        for name, cat in lexicon.categories.items():
            if name not in self.terminal_ids:
                raise LexiconError(f"lexicon names unknown terminal {name!r}")
            term = self.terminals[self.terminal_ids[name]]
            if not term.category:
                raise LexiconError(
                    f"terminal {name!r} is not an identifier category of this grammar"
                )
            self._validate_words(term, cat.words, cat.fold_bare_case)
        rules = list(self._lark_rules)
        unusable = {n for n, c in lexicon.categories.items() if not c.words}
        # A reduced grammar stays reduced unless the lexicon empties a terminal it uses.
        if not (self._is_reduced and not (unusable & self.used_terminals)):
            rules = self._reduce(rules, lexicon)
        return self._derive(rules, self.projection, lexicon)

    def with_scopes(self, scopes: ScopeTable | None) -> Grammar:
        """The same language restricted by scope-aware column lexicons (``grammar/scope.py``,
        ``docs/scope.md``): a column position admits only columns of the tables in scope.
        ``None`` turns the restriction off. Needs a ``COLUMN_NAME`` lexicon. Shares the
        LALR and lexer tables with ``self`` (the scope never changes the automaton)."""
        if scopes is not None and (self.lexicon is None or "COLUMN_NAME" not in self.lexicon):
            raise LexiconError("scope-aware lexicons need a COLUMN_NAME schema lexicon")
        g = Grammar(
            self.terminals,
            self._lark_rules,
            self.start,
            l1_fingerprint=self.l1_fingerprint,
            projection=self.projection,
            lexicon=self.lexicon,
            name=self.name,
            scopes=scopes,
        )
        for attr in ("tables", "lexer"):  # cached_property values: same automaton
            if attr in self.__dict__:
                g.__dict__[attr] = self.__dict__[attr]
        return g

    def _validate_words(self, term: Terminal, words: frozenset[bytes], fold: bool) -> None:
        import regex

        # Word sets already checked against this pattern pass without a regex match per
        # word: every role of a schema repeats most of its categories (FUNCTION_NAME: the
        # dialect's ~500 function spellings), ~0.5 ms of matching per re-specialization.
        memo_key = (term.pattern, words)
        with _validated_lock:
            if memo_key in _validated:
                return
        pat = regex.compile(term.pattern.encode())
        for w in sorted(words):
            if not w:
                raise LexiconError(f"empty word in the lexicon of {term.name}")
            if pat.fullmatch(w) is None:
                hint = ""
                if fold:
                    hint = " (bare words are compared lower-cased)"
                raise LexiconError(
                    f"lexicon word {w!r} of {term.name} is not a lexeme of its terminal "
                    f"(regex {term.pattern!r}){hint}; names outside the identifier regex "
                    "must be listed in quoted form"
                )
        with _validated_lock:
            if len(_validated) >= _VALIDATED_LIMIT:
                _validated.clear()
            _validated.add(memo_key)

    def _reduce(self, rules: list[LarkRule], lexicon: SchemaLexicon | None) -> list[LarkRule]:
        """Useless-symbol elimination: drop unproductive, then unreachable symbols.

        Linear time (each rule counts its not-yet-productive symbols; a worklist settles
        them), because every role × schema re-specialization runs it twice.
        """
        unusable = set()
        if lexicon is not None:
            unusable = {n for n, c in lexicon.categories.items() if not c.words}
        term_ids = self.terminal_ids
        terms = set(term_ids) - unusable
        # (lhs, rhs names) of each rule: this grammar's own Rule when the lark rule is one of
        # its own (always, for project/with_lexicon), else read from the lark rule
        pos, own = self._rule_positions, self.rules
        shapes: list[tuple[str, tuple[str, ...]]] = []
        for r in rules:
            p = pos.get(id(r))
            if p is not None and self._lark_rules[p] is r:
                shapes.append((own[p].lhs, own[p].rhs))
            else:
                shapes.append((r.origin.name, _lark_rule_rhs(r)))
        lhs_of = [lhs for lhs, _ in shapes]
        pending: list[int] = []
        users: dict[str, list[int]] = {}
        queue: list[str] = []
        for i, (lhs, rhs) in enumerate(shapes):
            needs = {s for s in rhs if s not in terms}
            pending.append(len(needs))
            for n in needs:
                users.setdefault(n, []).append(i)
            if not needs:
                queue.append(lhs)
        productive: set[str] = set()
        while queue:
            n = queue.pop()
            if n in productive:
                continue
            productive.add(n)
            for i in users.get(n, ()):
                pending[i] -= 1
                if pending[i] == 0:
                    queue.append(lhs_of[i])
        if self.start not in productive:
            raise EmptyLanguageError(
                f"the projected grammar generates no sentence: start symbol {self.start!r} "
                "is unproductive after the projection/lexicon"
            )
        kept = [i for i in range(len(rules)) if pending[i] == 0]
        by_lhs: dict[str, list[int]] = {}
        for i in kept:
            by_lhs.setdefault(lhs_of[i], []).append(i)
        reach = {self.start}
        todo = [self.start]
        while todo:
            nt = todo.pop()
            for i in by_lhs.get(nt, ()):
                for sym in shapes[i][1]:
                    if sym not in term_ids and sym not in reach:
                        reach.add(sym)
                        todo.append(sym)
        return [rules[i] for i in kept if lhs_of[i] in reach]

    # ------------------------------------------------------------------ derived artifacts
    def validate(self) -> None:
        """Build the LALR(1) tables now, so conflicts surface at construction."""
        _ = self.tables

    @cached_property
    def tables(self) -> LALRTables:
        from .tables import LALRTables

        return LALRTables.build(self)

    @cached_property
    def tables_key(self) -> bytes:
        """What the LALR tables depend on (``tables.structure_key``), computed once."""
        from .tables import structure_key

        return structure_key(self)

    @cached_property
    def lexer(self) -> LexerTables:
        from .lexer import LexerTables

        return LexerTables.build(self.terminals)

    @cached_property
    def scan_fingerprint(self) -> str:
        """What a trie walk reads from the grammar besides its cache key: the lexer tables
        (patterns and resolution order) and which terminals are skipped as ignored.

        A role projection that drops comments keeps the lexer but stops ignoring them, so
        the lexer fingerprint alone would let a dialect grammar's mask entries (comments
        admitted after whitespace) be reused by the role's guide (OBL-KEY1): mask cache
        namespaces are keyed by this instead.
        """
        ignored = sorted(t.id for t in self.terminals if t.ignored)
        return _json_fingerprint("grammar-scan", [self.lexer.fingerprint, ignored])

    @cached_property
    def _rule_positions(self) -> dict[int, int]:
        """Position of each of this grammar's lark rules (by identity) in canonical order."""
        return {id(r): i for i, r in enumerate(self._lark_rules)}

    @property
    def lark_rules(self) -> tuple[LarkRule, ...]:
        return self._lark_rules

    @property
    def used_terminals(self) -> frozenset[str]:
        """Terminals that occur in some (reduced) production."""
        return frozenset(s for r in self.rules for s in r.rhs if s in self.terminal_ids)

    @property
    def category_terminals(self) -> tuple[Terminal, ...]:
        return tuple(t for t in self.terminals if t.category)

    def __repr__(self) -> str:
        return (
            f"Grammar({self.name or 'anonymous'}, {len(self.terminals)} terminals, "
            f"{len(self.rules)} rules, fp={self.fingerprint[:12]})"
        )


# ---------------------------------------------------------------------------- dialect grammars
# The shipped L1 grammars, one lark file per registered dialect in ``dialects/`` (repo root in
# a development checkout, ``grid_sql/dialects`` inside a wheel). Here, not in
# ``grammar/dialects.py`` (which re-exports them), so that ``Grammar.dialect`` needs no import
# of a module that imports this one. Loading builds the LALR(1) tables, so each dialect is
# loaded once per process and shared: every role projection derives from the same L1 object.
_DIALECT_GRAMMARS: dict[str, Grammar] = {}
_DIALECT_LOCK = threading.Lock()


def dialects_dir() -> Path:
    """Where the dialect grammar files are (wheel layout first, then the source tree)."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "dialects", here.parent / "dialects"):
        if (cand / "common.lark").is_file():
            return cand
    raise GrammarError(f"dialect grammars not found next to {here}")


def canonical_dialect(name: str) -> str:
    """The registered dialect's name for ``name`` or an alias (``postgres`` → ``postgresql``);
    raises :class:`grid_sql.dialect.UnknownDialectError` (a :class:`GrammarError`)."""
    from ..dialect import Dialect

    return Dialect.get(name).name


def load_dialect(name: str) -> Grammar:
    """The L1 grammar of dialect ``name`` (cached per process)."""
    key = canonical_dialect(name)
    with _DIALECT_LOCK:
        g = _DIALECT_GRAMMARS.get(key)
        if g is None:
            d = dialects_dir()
            path = d / f"{key}.lark"
            g = Grammar.from_lark(
                path.read_text(), "start", import_paths=[d], source_path=path, name=key
            )
            _DIALECT_GRAMMARS[key] = g
    return g
