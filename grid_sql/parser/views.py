"""Building the memoized scope views of a ``ParserRuntime`` (``docs/scope.md``).

Kept out of ``incremental.py``: the view for a position is the grammar's lexicons with
``COLUMN_NAME`` held to the words the scope rule admits there (``grammar/scope.py``), three-part
names blocked after a bound qualifier, and the words of qualifier-only identifiers and CTE
references (``parser/ctes.py``) replaced. Its fingerprint is part of every identifier
cache key, so two views differ in fingerprint whenever they differ in words.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..grammar.lexicon import CategoryWords

if TYPE_CHECKING:
    from ..grammar.scope import ScopeRules
    from .incremental import ParserRuntime

VIEW_LIMIT = 1 << 12  # distinct scoped lexicon views kept per grammar before clearing


@dataclass(frozen=True, eq=False, slots=True)
class LexiconView:
    """The identifier lexicons in force at a configuration: ``words`` per category
    terminal, ``mask`` the bitmask of those terminals, ``fp`` a fingerprint of the view
    (None for the grammar's own lexicon; scoped views differ only for ``COLUMN_NAME`` and,
    after a bound qualifier ``q.``, the other identifier terminals, which admit nothing)."""

    words: dict[int, CategoryWords]
    mask: int
    fp: str | None


def make_view(
    rt: ParserRuntime,
    sem: ScopeRules,
    words: frozenset[bytes] | None,
    qualified: bool,
    quals: tuple[tuple[int, CategoryWords], ...],
    ctes: tuple[tuple[int, CategoryWords], ...] = (),
) -> LexiconView:
    """The (memoized) view with COLUMN_NAME held to ``words`` (None: the lexicon's),
    three-part names blocked when ``qualified``, and the terminals of ``quals`` (words a
    qualifier may be) and ``ctes`` (CTE names, ``parser/ctes.py``) replaced."""
    key = (words, qualified, quals, ctes)
    view = rt._views.get(key)
    if view is None:
        lex = dict(rt.lexicon)
        mask = rt.lexicon_mask
        h = hashlib.blake2b(digest_size=16, person=b"grid-sql-scope")
        if words is not None:
            cw = lex[sem.column_tid]
            lex[sem.column_tid] = CategoryWords(words, cw.fold_bare_case)
            h.update(b"q" if qualified else b"u")
            for w in sorted(words):
                h.update(len(w).to_bytes(4, "little") + w)
        elif qualified:
            h.update(b"A")  # the whole column lexicon, qualified
        if qualified:
            for tid in sem.blocked_after_qualifier:
                lex[tid] = CategoryWords(frozenset())
                mask |= 1 << tid
        for tid, cat in quals:
            lex[tid] = cat
            mask |= 1 << tid
            h.update(b"Q" + tid.to_bytes(4, "little") + bytes([cat.fold_quoted_case]))
            for w in sorted(cat.words):
                h.update(len(w).to_bytes(4, "little") + w)
        for tid, cat in ctes:
            lex[tid] = cat
            mask |= 1 << tid
            h.update(b"C" + tid.to_bytes(4, "little"))
            for w in sorted(cat.words):
                h.update(len(w).to_bytes(4, "little") + w)
        view = LexiconView(lex, mask, h.hexdigest())
        if len(rt._views) >= VIEW_LIMIT:
            rt._views.clear()
        rt._views[key] = view
    return view
