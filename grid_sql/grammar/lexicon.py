"""L3 schema lexicons: finite allow-lists for identifier-category terminals (paper §2).

A lexicon restricts what a category terminal (``TABLE_NAME``, ``COLUMN_NAME``, ...) may
spell. It is the mechanism that puts forbidden tables outside the language, so it must be
exact: every word is validated against its terminal's regex at build time (W_c ⊆ R_c),
because a word the scanner can never complete would be a dead end at a viable state.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .fingerprint import fingerprint

QUOTE_BYTES = frozenset(b'"`[')


def fold_lexeme(lexeme: bytes, fold_bare_case: bool, fold_quoted_case: bool = False) -> bytes:
    """The form of ``lexeme`` compared against a category's words.

    With ``fold_bare_case`` a bare (unquoted) lexeme is compared ASCII-lower-cased, as SQL
    folds unquoted identifiers; a quoted lexeme is compared exactly, unless
    ``fold_quoted_case`` (the scope rule's name lists, which compare names case-insensitively
    even when quoted: ``grammar/scope.py`` ``norm_name``).
    """
    if lexeme and (fold_quoted_case or (fold_bare_case and lexeme[0] not in QUOTE_BYTES)):
        return lexeme.lower()
    return lexeme


@dataclass(frozen=True)
class CategoryWords:
    """The allowed words of one category terminal, with their prefix closure.

    With ``exclude`` the words are the *refused* ones: every lexeme of the terminal but
    those is admitted (the scope rule's fresh-alias views, ``grammar/scope.py``), and every
    partial lexeme counts as live. That is exact only when each refused word is a proper
    prefix of another lexeme of the terminal (``t1`` of ``t1x``, ``"t1"`` of ``"t1""x"``),
    which the caller ensures (never ``[t1]``).

    ``refused_prefixes`` (with ``exclude`` only): no lexeme whose folded form begins with
    one of them is admitted, and no partial one either, since nothing extends it back out
    (the keywords a select-list obligation blocks where a table's alias may be written:
    ``FROM t GROUPBYx``, docs/scope.md "Keyword-led aliases"). Every other partial lexeme
    stays live: one byte off the refused prefix leaves it.
    """

    words: frozenset[bytes]
    fold_bare_case: bool = False
    fold_quoted_case: bool = False
    exclude: bool = False
    refused_prefixes: frozenset[bytes] = frozenset()
    # ``words`` are already in folded form (a caller that keeps a large constant set
    # folded once): not folded again; not part of the value
    folded: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.folded:
            object.__setattr__(self, "words", frozenset(self._fold(w) for w in self.words))
        if self.refused_prefixes:
            if not self.exclude or any(not p for p in self.refused_prefixes):
                raise ValueError("refused_prefixes: non-empty words of a complement lexicon")
            pre = frozenset(self._fold(p) for p in self.refused_prefixes)
            object.__setattr__(self, "refused_prefixes", pre)

    def refuses_prefix(self, partial: bytes) -> bool:
        """Whether ``partial`` (and so every extension of it) begins with a refused prefix."""
        if not self.refused_prefixes:
            return False
        key = self._fold(partial)
        return any(key.startswith(p) for p in self.refused_prefixes)

    @functools.cached_property
    def prefixes(self) -> frozenset[bytes]:
        """Every prefix of every (folded) word. Built on first use: scope views make a
        category per FROM clause, alias and qualifier, and many are only read for whole
        words or not at all (issue #26: building them eagerly was ~6 % of a cold reserve)."""
        return frozenset({w[:i] for w in self.words for i in range(len(w) + 1)})

    @functools.cached_property
    def _sorted(self) -> tuple[bytes, ...]:
        return tuple(sorted(self.words))

    @functools.cached_property
    def _nexts(self) -> dict[bytes, frozenset[int]]:
        return {}

    def next_bytes(self, prefix: bytes) -> frozenset[int]:
        """The bytes some word continues (folded) ``prefix`` with, for the termination
        reserve's search closing a pending lexeme: a byte no word continues the lexeme
        with is dead for this category (``parser/extend.py``). The words with the prefix
        are a run of the sorted words; answers are kept per prefix."""
        got = self._nexts.get(prefix)
        if got is None:
            words = self._sorted
            i = bisect.bisect_left(words, prefix)
            n = len(prefix)
            out: set[int] = set()
            while i < len(words) and words[i].startswith(prefix):
                if len(words[i]) > n:
                    out.add(words[i][n])
                i += 1
            got = self._nexts[prefix] = frozenset(out)
        return got

    @functools.cached_property
    def shortest_first(self) -> tuple[bytes, ...]:
        """The words, shortest first, then bytewise: the order the termination reserve
        tries them in (sorted once per category instead of once per completion)."""
        return tuple(sorted(self.words, key=lambda w: (len(w), w)))

    def _fold(self, lexeme: bytes) -> bytes:
        return fold_lexeme(lexeme, self.fold_bare_case, self.fold_quoted_case)

    def admits(self, lexeme: bytes) -> bool:
        """Whether ``lexeme`` is one of the allowed words (not a refused one)."""
        if self.exclude and self.refuses_prefix(lexeme):
            return False
        return (self._fold(lexeme) in self.words) != self.exclude

    def admits_prefix(self, partial: bytes) -> bool:
        """Whether ``partial`` can still be extended to an allowed word."""
        if self.exclude:
            return not self.refuses_prefix(partial)
        return self._fold(partial) in self.prefixes

    def reads(self, partial: bytes) -> bool:
        """Whether the listed words (allowed or refused) still tell the extensions of
        ``partial`` apart: it is a prefix of one of them. When not, the category decides
        every extension alike (none is a word), whatever the bytes of ``partial``."""
        return self._fold(partial) in self.prefixes


class SchemaLexicon:
    """Allowed words per identifier-category terminal.

    ``SchemaLexicon({"TABLE_NAME": [b"Customer", b'"Customer"']}, fold_bare_case=True)``.
    Categories missing from the mapping stay unrestricted (ordinary terminals). Words are
    byte strings (``str`` is UTF-8 encoded). A category mapped to no words makes its
    terminal unusable, and the grammar is reduced accordingly.
    """

    def __init__(
        self,
        words: Mapping[str, Iterable[bytes | str]],
        fold_bare_case: bool | Mapping[str, bool] = False,
    ) -> None:
        cats: dict[str, CategoryWords] = {}
        for name, ws in words.items():
            fold = (
                fold_bare_case.get(name, False)
                if isinstance(fold_bare_case, Mapping)
                else bool(fold_bare_case)
            )
            bws = frozenset(w.encode() if isinstance(w, str) else bytes(w) for w in ws)
            cats[name] = CategoryWords(bws, fold)
        self.categories: dict[str, CategoryWords] = dict(sorted(cats.items()))
        self.fingerprint: str = fingerprint(
            "lexicon",
            {
                n: {"fold": c.fold_bare_case, "words": sorted(c.words)}
                for n, c in self.categories.items()
            },
        )

    def __contains__(self, terminal: str) -> bool:
        return terminal in self.categories

    def __getitem__(self, terminal: str) -> CategoryWords:
        return self.categories[terminal]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{n}: {len(c.words)}" for n, c in self.categories.items())
        return f"SchemaLexicon({sizes})"
