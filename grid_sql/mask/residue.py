"""CD residue resolution of the Python fill (paper §4.2): the classes of a walk's residue
resolved against the live stack, their sub-walks, and the memos that share them.

Split out of ``guide.py`` (the :class:`~grid_sql.mask.guide.Guide` mixes it in). The
methods run as methods of the guide (``self`` is a ``Guide``); each annotates ``self`` so
every attribute it uses is type-checked, and mypy refuses a self type narrower than the
class (``[misc]``), hence the ignore on those ``def`` lines.

The memos are :class:`FillMemo` s keyed by stack-node uid (``parser/stack.py``). Without
scope rules they live until a bound clears them, as the Rust filler's do (this path is its
reference). With scope rules they are *aged* at the end of every fill: an entry lives for
the fill that stored it and the next one (promoted when that one reads it). Why: every
step of a scoped decode is a new stack, so its classes are new keys and earlier fills'
records are rarely read again, while the memos grew to hundreds of thousands of keys that
every full collection of the cyclic garbage collector walked, inside some fill. Over the
1,001 fills of the 42 Chinook gold statements aging costs 0.7 % more class advances and
makes the slowest fill 195 instead of 338 ms, a full collection 169 instead of 236 ms
(``bench/scoped_gc.py`` with and without ``--no-age``; ``bench/RESULTS-masks.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from ..errors import MaskError
from ..grammar.lexer import DEAD, START
from ..grammar.scope import NONE
from ..parser.incremental import EMPTY_SCAN, Configuration
from ..parser.stack import StackNode
from .cache import MaskEntry
from .walk import ScanFrame

if TYPE_CHECKING:
    from .guide import Guide

RESOLVE_MEMO_LIMIT = 1 << 18  # (stack, terminal, requeue) classes kept before clearing
SUB_MEMO_LIMIT = 1 << 16  # memoized CD sub-walks before the resolution memo is cleared
_UNSEEN: Any = object()

K = TypeVar("K")
V = TypeVar("V")


class FillMemo(Generic[K, V]):
    """A memo of two generations: ``age`` makes the current one the old one and drops the
    old; a read that finds a key only in the old one copies it into the current one
    (module doc). Plain dicts underneath, benign races: a concurrent fill may miss an entry
    another one just stored or aged, and recomputes it."""

    __slots__ = ("new", "old")

    def __init__(self) -> None:
        self.new: dict[K, V] = {}
        self.old: dict[K, V] = {}

    def get(self, key: K, default: Any = None) -> Any:
        v = self.new.get(key, _UNSEEN)
        if v is not _UNSEEN:
            return v
        if not self.old:
            return default
        v = self.old.get(key, _UNSEEN)
        if v is _UNSEEN:
            return default
        self.new[key] = v
        return v

    def __setitem__(self, key: K, value: V) -> None:
        self.new[key] = value

    def __len__(self) -> int:
        return len(self.new) + len(self.old)

    def age(self) -> None:
        self.old = self.new
        self.new = {}

    def clear(self) -> None:
        """Drop both generations (in place: callers holding the memo keep using it)."""
        self.new = {}
        self.old = {}


class ResidueResolution:
    """The CD residue resolution of :class:`~grid_sql.mask.guide.Guide` (a mixin; its
    state is set by :meth:`_init_resolution`)."""

    _advanced: FillMemo[tuple[int, int, bytes, bytes | None], tuple[Any, ...] | None]
    _shifted: FillMemo[tuple[int, int, bytes | None], StackNode]
    _subs_at: FillMemo[tuple[int, int, bytes, int, int, bool], dict[int, Any]]
    _n_subs: int
    _modes: dict[tuple[int, int], int]
    _dotish: frozenset[int]
    _subs_gen: int

    def _init_resolution(self: Guide) -> None:  # type: ignore[misc]  # self: the Guide (module doc)
        # class record: (configuration below, pending lexeme live, {node: sub-walk result})
        # (with scope-aware lexicons the emitted identifier is part of both keys: it is the
        # semantic value the sub-walk's scope is computed from)
        self._advanced = FillMemo()
        self._shifted = FillMemo()
        # the sub-walk memo of a class record, shared by every class record (any stack,
        # terminal, requeue) whose advance reaches the same configuration: a sub-walk is a
        # function of (configuration below, pending lexeme live, trie node) only, and a
        # fresh stack at each step mostly advances onto configurations seen before
        self._subs_at = FillMemo()
        self._n_subs = 0  # sub-walks memoized inside the class records of _advanced
        self._modes = {}  # see _value_read
        # bytes that may start a `.` or an ignored terminal (a qualifier's dot may follow)
        self._dotish = frozenset()
        rt = self.runtime
        if rt.sem is not None:
            self._dotish = frozenset(
                b
                for b in range(256)
                if b == 0x2E
                or (
                    rt.trans[START * 256 + b] != DEAD
                    and rt.live_masks[rt.trans[START * 256 + b]] & rt.ignored_mask
                )
            )
        self._subs_gen = self.cache.generation

    def _resolve_residue(  # type: ignore[misc]  # self: the Guide (module doc)
        self: Guide,
        stack: StackNode,
        entry: MaskEntry,
        entries: list[MaskEntry],
        extra: list[np.ndarray],
        walk: bool = True,
    ) -> None:
        """Resolve ``entry``'s CD residue against ``stack`` (paper §4.2), appending the
        sub-walk entries and the passing alias classes in residue order, depth first.

        Verdict-equivalence: a residue entry's resolution depends on its class (stack,
        terminal, requeue) only, and everything below its trie node on (resulting
        configuration, node) only. So each class of the entry is resolved once (a rejected
        class drops all of its residue entries), and the sub-walks are memoized per class
        by node. Stacks are hash-consed by the parser runtime, so the class memo
        (``_advanced``) is keyed by node uid and survives across fills and requests: a step
        whose root entry is new still finds most of its CD sub-walks already resolved.
        """
        memo_on = self.cache.enabled
        if memo_on and self._subs_gen != self.cache.generation:
            self._clear_resolution_memo()  # entries rolled over: the memo must not outlive them
            self._subs_gen = self.cache.generation
        advanced = self._advanced
        keys, class_of = (
            entry.classes() if self.runtime.sem is None else self._scoped_classes(stack, entry)
        )
        resolved: list[tuple[Any, ...] | None] = []
        for term, requeue, *lexeme in keys:
            lx = lexeme[0] if lexeme else None
            if lx is not None and not self._value_read(stack, term, requeue):
                lx = None  # the name is never read by the scope rule: one class for all
            ak = (stack.uid, term, requeue, lx)
            rec = advanced.new.get(ak, _UNSEEN)  # (FillMemo.get inlined)
            if rec is _UNSEEN and advanced.old:
                rec = advanced.old.get(ak, _UNSEEN)
                if rec is not _UNSEEN:
                    advanced[ak] = rec
            if rec is _UNSEEN:
                res = self._advance_class(stack, term, requeue, lx)
                if res is None:
                    rec = None
                else:
                    c2, sc = res[0], res[0].scan
                    ck = (c2.stack.uid, sc.dfa, sc.rem, sc.la_len, sc.la_state, res[1])
                    subs_at = self._subs_at.get(ck)
                    if subs_at is None:
                        subs_at = self._subs_at[ck] = {}
                    rec = (c2, res[1], subs_at)
                if len(advanced) >= RESOLVE_MEMO_LIMIT:
                    self._clear_resolution_memo()
                advanced[ak] = rec
            resolved.append(rec)
        ids_at = self.trie.ids_at
        for (sub, _, _), ci in zip(entry.residue, class_of, strict=True):
            rec = resolved[ci]
            if rec is None:
                continue
            cfg2, live, subs = rec
            got = subs.get(sub) if memo_on else None
            if got is None:
                sub_entries: list[MaskEntry] = []
                sub_extra: list[np.ndarray] = []
                if live:
                    here = ids_at(sub)
                    if here.size:
                        sub_extra.append(here)
                e2 = self.entry_for(cfg2, sub, walk=walk)
                sub_entries.append(e2)
                self._resolve_residue(cfg2.stack, e2, sub_entries, sub_extra, walk)
                got = (sub_entries, sub_extra)
                if memo_on:
                    if self._n_subs >= SUB_MEMO_LIMIT:
                        self._clear_resolution_memo()
                    subs[sub] = got
                    self._n_subs += 1
            entries.extend(got[0])
            extra.extend(got[1])

    def _scoped_classes(  # type: ignore[misc]  # self: the Guide (module doc)
        self: Guide, stack: StackNode, entry: MaskEntry
    ) -> tuple[tuple[tuple[Any, ...], ...], tuple[int, ...]]:
        """:meth:`MaskEntry.classes` refined by the emitted lexeme of identifier terminals
        (scope-aware lexicons: the lexeme is a semantic value on the shifted stack, so two
        entries emitting different names are not verdict-equivalent below their node).
        Computed once per entry: the lexemes are a function of the entry's key."""
        sem = self.runtime.sem
        assert sem is not None
        # the entry is shared by every guide of its cache namespace: the memo is valid for
        # the set of valued terminals it was computed with only
        memo = entry._scoped_classes
        if memo is not None and (memo[0] is sem.valued_key or memo[0] == sem.valued_key):
            got: tuple[tuple[tuple[Any, ...], ...], tuple[int, ...]] = memo[1]
            return got
        key = entry.key
        frame = self._frame_of(key.remainder)
        lex = self.runtime.lex_at(stack)
        depth0 = int(self.trie.nodes["depth"][key.node])
        index: dict[tuple[Any, ...], int] = {}
        of: list[int] = []
        for sub, term, requeue in entry.residue:
            lexeme = None
            if term in sem.valued:
                path = self._spelling(sub)[depth0:]
                lexeme = self.walker.cd_lexeme(frame, path, key.allowed, lex)
            of.append(index.setdefault((term, requeue, lexeme), len(index)))
        c = (tuple(index), tuple(of))
        object.__setattr__(entry, "_scoped_classes", (sem.valued_key, c))  # benign race
        return c

    def _spelling(self: Guide, node: int) -> bytes:  # type: ignore[misc]  # self: the Guide (module doc)
        """The bytes spelled from the trie root to ``node`` (a prefix of any token below)."""
        trie = self.trie
        ids = trie.subtree_ids(node)
        if not ids.size:
            raise MaskError(f"trie node {node} has no token below it")
        return self.token_bytes[int(ids[0])][: int(trie.nodes["depth"][node])]

    def _value_read(self: Guide, stack: StackNode, term: int, requeue: bytes) -> bool:  # type: ignore[misc]  # self: the Guide (module doc)
        """Whether the scope rule can read the lexeme of ``term`` shifted on ``stack``.

        From the LALR state the terminal is shifted into: if that state has no shift and
        every rule it may reduce drops the value (``grammar/scope.py`` merge rules), the
        name is never read; if the only keeping rule is ``any_name`` (a qualifier), it is
        read only when a ``.`` lands directly on it, so only when ``requeue`` starts with
        ``.`` or an ignored terminal. Sound because a dropped value leaves every lexicon
        view of the sub-walk unchanged; memoized per (stack, terminal).
        """
        mk = (stack.uid, term)
        mode = self._modes.get(mk)
        if mode is None:
            mode = self._value_mode(stack, term)
            if len(self._modes) >= RESOLVE_MEMO_LIMIT:
                self._modes.clear()
            self._modes[mk] = mode
        if mode == 2:
            return True
        if mode == 3:  # a qualifier or a typed literal's head: read before `.` or a string
            return requeue[0] in self._dotish or requeue[0] == 0x27
        return mode == 1 and requeue[0] in self._dotish

    def _value_mode(self: Guide, stack: StackNode, term: int) -> int:  # type: ignore[misc]  # self: the Guide (module doc)
        """0: value dropped, 1: read only as a qualifier, 2: kept, 3: read only as a
        qualifier or a typed literal's head (``ScopeRules.typed_words``; see _value_read)."""
        rt = self.runtime
        sem = rt.sem
        assert sem is not None
        top = rt.shift(stack, term)  # interned: cheap, and the CD pass shifts it anyway
        row = rt.action[top.state]
        mode = 0
        typed = False  # may head a typed literal whose head must be a type word
        listed: bool | None = None  # shifted into a select list before its FROM
        for a in row:
            if a > 0:
                return 2
            if a < 0:
                r = -a - 1
                if rt.rule_lhs[r] == sem.nt_output_alias:
                    return 2  # a bare sort key: kept (``ParserRuntime._must_qualify``)
                if r in sem.qualifier_rules:
                    mode = 1
                elif rt.rule_lhs[r] == sem.nt_typed_name and sem.typed_words is not None:
                    typed = True
                elif sem.rule_kind[r] in ("column_ref", "star_ref"):
                    # a column reference: read (select-list obligations) only in a select
                    # list before its FROM; elsewhere dropped like a merge
                    if not sem.bind:
                        continue
                    if listed is None:
                        assert top.parent is not None
                        levels = rt.ctx_at(top.parent).levels
                        listed = bool(levels) and levels[-1].state == NONE
                    if listed:
                        return 2
                elif sem.rule_kind[r] not in ("merge", "reset"):
                    return 2
        return 3 if typed else mode

    def _frame_of(self: Guide, rem: bytes) -> ScanFrame:  # type: ignore[misc]  # self: the Guide (module doc)
        """The scan frame of a pending lexeme (scanned from the start state)."""
        rt = self.runtime
        st, la_len, la_st = START, -1, DEAD
        for i, b in enumerate(rem):
            st = rt.trans[st * 256 + b]
            if rt.accept_masks[st]:
                la_len, la_st = i + 1, st
        return ScanFrame(st, rem, la_len, la_st)

    def _clear_resolution_memo(self) -> None:
        self._advanced.clear()
        self._shifted.clear()
        self._subs_at.clear()
        self._n_subs = 0

    def _age_resolution_memo(self: Guide) -> None:  # type: ignore[misc]  # self: the Guide (module doc)
        """End of a fill: with scope rules, what the fill before it stored is dropped (module
        doc); without, nothing (the Rust filler's memos, which this path is the reference
        of, are not aged either)."""
        if self.runtime.sem is None:
            return
        self._advanced.age()
        self._shifted.age()
        self._subs_at.age()
        self._n_subs = 0

    def _advance_class(  # type: ignore[misc]  # self: the Guide (module doc)
        self: Guide, stack: StackNode, term: int, requeue: bytes, lexeme: bytes | None = None
    ) -> tuple[Configuration, bool] | None:
        """Shift ``term`` (spelled ``lexeme``, needed with scope-aware lexicons only) on
        ``stack`` and re-scan ``requeue``: the configuration below a residue entry and
        whether its pending lexeme is live (None: rejected)."""
        rt = self.runtime
        sk = (stack.uid, term, lexeme)
        shifted = self._shifted
        s1 = shifted.new.get(sk)
        if s1 is None and shifted.old:
            s1 = shifted.get(sk)
        if s1 is None:
            s1 = rt.shift(stack, term, lexeme)
            if len(self._shifted) >= RESOLVE_MEMO_LIMIT:
                self._shifted.clear()  # only shifts: the class records stay valid
            self._shifted[sk] = s1
        raw = rt._advance(s1, EMPTY_SCAN, requeue)
        if raw is None:
            return None
        n2, sc2 = raw
        return Configuration(n2, sc2), rt.remainder_live(n2, sc2)
