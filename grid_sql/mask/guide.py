"""Compiled guides and per-request matchers: the public masking API (paper §6.1).

``guide = Guide(grammar, vocab)`` is immutable and
thread-safe; ``m = guide.matcher()`` is cheap per-request state. A mask is

    M(κ) = CI(key κ) ∪ ⋃ CD-pass(live stack) ∪ {EOS iff ACCEPT}     (paper Definition 4)

with the CI part cached under its configuration key and the CD residue resolved against the
live stack every step (``walk.py``). Masks are written in XGrammar's layout: an int32 array
of ``ceil(V / 32)`` words, bit ``i % 32`` of word ``i // 32`` set iff token ``i`` is allowed.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import MaskError
from ..grammar.ir import Grammar
from ..parser.incremental import Configuration, ParserRuntime
from ..parser.stack import StackNode
from .cache import KIND_GENERIC, KIND_IDENT, MaskCache, MaskEntry, MaskKey
from .matcher import Matcher
from .residue import ResidueResolution
from .trie import TokenTrie, get_token_trie
from .vocab import Vocabulary
from .walk import ScanFrame, Walker, mask_filler, stack_pairs

DEFAULT_CACHE = MaskCache()
FILL_MEMO_BYTES = 64 << 20


WARM_LIMIT = 1 << 16  # configurations with a warm record per guide before clearing
_I32 = np.dtype(np.int32)
_REJECTED: Any = object()


class _NeedWalk(Exception):
    """Raised inside a no-walk fill (:meth:`Guide.try_fill_bitmask`) at a cache miss."""


class _Warm:
    """The warm-path record of one configuration (identity of its interned stack + scan).

    ``fill`` is ``(row, count, entry ids, cache epoch)`` once a fill has produced the row:
    valid while the cache's epoch is unchanged (no entry evicted, rolled over or replaced
    since the row's entries were seen resident), so a hit is one epoch compare and a row
    copy instead of a structural key, a cache key and a lookup; after a change it is
    revalidated as a structural-memo hit is (root entry resident with the same id).
    Assigned as one tuple so a
    concurrent reader never sees a half-updated record. ``next`` maps an accepted token id
    to the record of the configuration it leads to (``_REJECTED`` if it leaves the
    language): the parser step is a pure function of (stack structure, scan, spelling),
    and tokens recur.
    """

    __slots__ = ("cfg", "fill", "next", "digest", "cost")

    def __init__(self, cfg: Configuration) -> None:
        self.cfg = cfg
        self.fill: tuple[np.ndarray, int, tuple[str, ...], int] | None = None
        self.next: dict[int, Any] = {}
        # (row, mask_digest of it): the digest of ``fill``'s row, valid while that row is
        # the record's (Guide.fill_bitmask_digest)
        self.digest: tuple[np.ndarray, str] | None = None
        self.cost: tuple[Any, int] | None = None  # (reserve table, its cost here)


def mask_digest(bitmask: np.ndarray) -> str:
    """BLAKE2b-128 of a mask in XGrammar layout (int32 words, little endian): the audit
    trail's ``mask_digest`` (``decode/records.py`` re-exports it)."""
    words = np.ascontiguousarray(bitmask, dtype="<i4")
    return hashlib.blake2b(words.data, digest_size=16, person=b"grid-sql-mask").hexdigest()


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def ids_to_bitmask(ids: np.ndarray, n_words: int) -> np.ndarray:
    """Pack token ids into XGrammar-layout int32 words."""
    words = np.zeros(n_words, dtype=np.uint32)
    if ids.size:
        ids = ids.astype(np.int64, copy=False)
        np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
    return words.view(np.int32)


def bitmask_to_ids(buf: np.ndarray) -> np.ndarray:
    """Token ids whose bit is set (inverse of :func:`ids_to_bitmask`)."""
    bits = np.unpackbits(buf.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).astype(np.int32)


class Guide(ResidueResolution):
    """A grammar compiled against a vocabulary: immutable, shareable across requests."""

    def __init__(
        self,
        grammar: Grammar,
        vocab: Vocabulary,
        *,
        cache: MaskCache | None = None,
        trie: TokenTrie | None = None,
        kernel_fill: bool = True,
    ) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.trie = trie or get_token_trie(vocab)
        self.runtime = ParserRuntime.for_grammar(grammar)
        self.walker = Walker(self.runtime, self.trie)
        self.cache = cache if cache is not None else DEFAULT_CACHE
        self.namespace = f"{grammar.scan_fingerprint[:32]}:{self.trie.fingerprint[:32]}"
        self.schema_fp = grammar.lexicon.fingerprint if grammar.lexicon is not None else None
        self.n_words = bitmask_words(vocab.size)
        self._row_shape = (self.n_words,)
        self.eos_id = vocab.eos_token_id
        self.token_bytes = vocab.token_bytes
        self.special = vocab.special_ids
        # Whole-mask memo keyed on the configuration's structure (see fill_bitmask).
        self._memo: OrderedDict[tuple[Any, ...], tuple[np.ndarray, int, tuple[str, ...]]] = (
            OrderedDict()
        )
        self._memo_bytes = 0
        self._memo_lock = threading.Lock()
        # Finished rows by content (see _remember): many configurations share a mask.
        self._rows: weakref.WeakValueDictionary[tuple[int, int], np.ndarray] = (
            weakref.WeakValueDictionary()
        )
        # Warm records by configuration identity, in front of the structural memo (_Warm).
        # Stacks are hash-consed, so the stack object stands for its structure; after an
        # intern-table clear a structurally equal stack is a new object, misses here and is
        # answered by the structural memo (which still decides). Bounded by clearing.
        self._warm: dict[tuple[Any, ...], _Warm] = {}
        self._warm_bytes = 0
        # CD resolution memos and per-guide constants (mask/residue.py)
        self._init_resolution()
        # The whole fill in Rust (_kernels.MaskFiller, kernels/core/src/fill.rs) for grammars
        # without scope rules when the Rust walk is on: same rows, counts and entry ids as
        # collect() below (tests/kernels/test_mask_filler.py), its entries in its own store.
        # kernel_fill=False keeps the Python orchestration over the MaskCache (the reference).
        self.kernel_fill = kernel_fill
        self._filler: Any = None
        self._filler_lock = threading.Lock()
        self._py_walks = 0  # trie walks run by entry_for (the Python orchestration)

    @property
    def n_walks(self) -> int:
        """Trie walks this guide has run (cache misses), by either fill path."""
        f = self._filler
        return self._py_walks + (0 if f is None else int(f.walks))

    def filler(self) -> Any:
        """The guide's ``_kernels.MaskFiller`` when the kernel fill applies (built on first
        use), else None: the grammar has scope rules, the Rust walk is off
        (``GRID_SQL_KERNELS=0``), the cache is disabled, or ``kernel_fill`` is False."""
        if (
            not self.kernel_fill
            or self.runtime.sem is not None
            or not self.walker.use_kernel
            or not self.cache.enabled
        ):
            return None
        f = self._filler
        if f is None:
            with self._filler_lock:
                f = self._filler
                if f is None:
                    f = mask_filler(self.walker, self.vocab.size, self.eos_id, self.cache.max_bytes)
                    self._filler = f
        return f

    def store_nbytes(self) -> int:
        """Bytes of the Rust filler's own entry store (0 without one)."""
        f = self._filler
        return 0 if f is None else int(f.store_bytes)

    def drop_store(self) -> None:
        """Drop the filler's stored entries (the cache's shared bound; always exact: a
        dropped entry is recomputed on demand with the same id)."""
        f = self._filler
        if f is not None:
            f.reset()

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        return Matcher(self, max_tokens=max_tokens)

    # ------------------------------------------------------------------ masks
    def key_for(self, cfg: Configuration, node: int) -> MaskKey:
        rt = self.runtime
        allowed = rt.allowed_mask(cfg.stack)
        if allowed & rt.lexicon_mask:
            scope = rt.lex_at(cfg.stack).fp
            return MaskKey(KIND_IDENT, node, cfg.scan.rem, allowed, self.schema_fp, scope)
        if allowed & rt.fresh_mask:  # a table's alias may be held to fresh names
            scope = rt.lex_at(cfg.stack).fp
            if scope is not None:
                return MaskKey(KIND_IDENT, node, cfg.scan.rem, allowed, self.schema_fp, scope)
        return MaskKey(KIND_GENERIC, node, cfg.scan.rem, allowed, None)

    def entry_for(self, cfg: Configuration, node: int = 0, *, walk: bool = True) -> MaskEntry:
        """The cached CI entry of ``cfg`` below trie ``node`` (walk and publish on a miss;
        with ``walk=False`` a miss raises ``_NeedWalk`` instead)."""
        key = self.key_for(cfg, node)
        e = self.cache.get(self.namespace, key)
        if e is not None:
            return e
        if not walk:
            raise _NeedWalk
        s = cfg.scan
        frame = ScanFrame(s.dfa, s.rem, s.la_len, s.la_state)
        lex = self.runtime.lex_at(cfg.stack)
        ci_ids, residue = self.walker.walk_payload(node, frame, key.allowed, lex)
        self._py_walks += 1
        return self.cache.publish(self.namespace, MaskEntry.make(key, ci_ids, residue))

    def allowed_ids(self, cfg: Configuration) -> tuple[np.ndarray, bool, list[str]]:
        """(sorted allowed non-EOS ids, EOS legal, entry ids consulted)."""
        entries, extra = self.collect(cfg)
        parts = [e.ci_ids for e in entries if e.ci_ids.size] + [x for x in extra if x.size]
        # sorted and distinct by a scatter over the vocabulary, not np.unique: the parts are
        # in trie order and large (most of a vocabulary at an identifier position), and
        # sorting them cost ~4 ms a step in the walk arm's profile
        seen = np.zeros(self.vocab.size, dtype=bool)
        for p in parts:
            seen[p] = True
        ids = np.flatnonzero(seen)
        eos = self.runtime.eos_allowed(cfg)
        return ids.astype(np.int32, copy=False), eos, [e.entry_id for e in entries]

    def collect(
        self, cfg: Configuration, *, walk: bool = True
    ) -> tuple[list[MaskEntry], list[np.ndarray]]:
        """The entries making up the mask of ``cfg`` (root first, then the CD sub-walks in
        residue order, depth first) and the alias classes of the CD nodes that passed.
        ``walk=False``: raise ``_NeedWalk`` at the first entry not in the cache."""
        entries: list[MaskEntry] = [self.entry_for(cfg, 0, walk=walk)]
        extra: list[np.ndarray] = []
        try:
            self._resolve_residue(cfg.stack, entries[0], entries, extra, walk)
        finally:
            self._age_resolution_memo()
        return entries, extra

    def _memo_key(self, cfg: Configuration) -> tuple[Any, ...]:
        """The configuration by structure: LALR states bottom to top plus the scan state.

        The mask (and every entry consulted) is a function of exactly these: actions and
        gotos read states only. Equality, not a hash, decides a hit. With scope-aware
        lexicons the semantic values are part of the structure too (they decide the
        lexicons of this and every stack the CD residue reaches).
        """
        states: list[Any] = []
        node: StackNode | None = cfg.stack
        if self.runtime.sem is None:
            while node is not None:
                states.append(node.state)
                node = node.parent
        else:
            while node is not None:
                states.append((node.state, node.value))
                node = node.parent
        s = cfg.scan
        return (tuple(states), s.dfa, s.rem, s.la_len, s.la_state)

    def fill_bitmask(self, cfg: Configuration, buf: np.ndarray) -> tuple[int, tuple[str, ...]]:
        """Write the exact mask of ``cfg`` into ``buf``; returns (allowed count, entry ids).
        The ids are a shared tuple (hundreds of sub-walk entries at an identifier position:
        copying them would cost a warm fill more than its row).

        Each entry's CI part is ORed in as pre-packed words (:meth:`MaskEntry.packed`);
        only the alias classes of CD nodes that passed are set bit by bit. Configurations
        recur across requests (same statement shapes), while the CD pass must re-run the
        LALR simulation on freshly shifted stacks every time, so the finished row is also
        memoized per configuration structure. A memo hit still consults the root entry in
        the cache (so the identifier rule and roll-overs keep applying) and must agree with
        its entry id. In front of that memo, the configuration's warm record (:class:`_Warm`)
        answers with one epoch compare while no cache entry has left since its row was
        built.
        """
        return self._fill_warm(self._warm_for(cfg), buf, True)

    def fill_bitmask_digest(
        self, cfg: Configuration, buf: np.ndarray
    ) -> tuple[int, tuple[str, ...], str]:
        """:meth:`fill_bitmask` plus :func:`mask_digest` of the filled ``buf``.

        Why: the decode loop records every step's digest for the audit trail, and hashing a
        19 KB row (Qwen2's vocabulary) cost 43 of a 266 µs warm step (``bench/e2e_steps.py``
        at b255895). It is kept with the warm record's row (rows are immutable and shared by
        content), so a warm hit
        hashes nothing; it is the digest of exactly what ``buf`` holds (the row is copied
        into it whole)."""
        w = self._warm_for(cfg)
        n, t = self._fill_warm(w, buf, True)
        f = w.fill
        if f is None or not self.cache.enabled or buf.size != self.n_words:
            return n, t, mask_digest(buf)
        d = w.digest
        if d is None or d[0] is not f[0]:
            d = w.digest = (f[0], mask_digest(f[0]))
        return n, t, d[1]

    def try_fill_bitmask(
        self, cfg: Configuration, buf: np.ndarray
    ) -> tuple[int, tuple[str, ...]] | None:
        """:meth:`fill_bitmask` if no trie walk is needed, else None with ``buf`` untouched.

        Fills exactly when every entry the mask is made of is already resident (a fill-memo
        hit, or the root entry and every CD sub-walk entry found in the cache, in the
        resolution memo or in the Rust filler's store); the result is then bit-identical to
        :meth:`fill_bitmask` (same row, count and entry ids). Never an approximate mask. The
        CD pass's LALR simulation may still run (cheap, no walk). With the cache disabled
        every fill walks: None.
        """
        try:
            return self._fill_warm(self._warm_for(cfg), buf, False)
        except _NeedWalk:
            return None

    def fill_rows(
        self,
        cfgs: Sequence[Configuration],
        buf: np.ndarray,
        rows: Sequence[int] | None = None,
        *,
        walk: bool = True,
    ) -> list[tuple[int, tuple[str, ...]] | None]:
        """Fill row ``rows[k]`` (default ``k``) of the 2-d int32 ``buf`` with the mask of
        ``cfgs[k]``, each exactly as :meth:`fill_bitmask` would (``walk=False``: as
        :meth:`try_fill_bitmask`, None and the row untouched where a walk is needed).
        For many guides at once see :func:`fill_rows`."""
        return fill_rows([(self, c) for c in cfgs], buf, rows, walk=walk)

    def _warm_for(self, cfg: Configuration) -> _Warm:
        """The warm record of ``cfg`` (created empty on first sight)."""
        s = cfg.scan
        k = (cfg.stack, s.dfa, s.rem, s.la_len, s.la_state)
        w = self._warm.get(k)
        if w is None:
            if len(self._warm) >= WARM_LIMIT or self._warm_bytes > FILL_MEMO_BYTES:
                self._warm = {}  # records held by live matchers stay valid (and exact)
                self._warm_bytes = 0
            w = self._warm.setdefault(k, _Warm(cfg))
        return w

    def _step(self, w: _Warm, token_id: int) -> _Warm | None:
        """The record after accepting non-EOS ``token_id`` at ``w`` (None: rejected)."""
        nxt = w.next.get(token_id)
        if nxt is None:
            tb = self.token_bytes
            spelling = (
                tb[token_id] if 0 <= token_id < len(tb) and token_id not in self.special else b""
            )
            cfg = self.runtime.advance(w.cfg, spelling) if spelling else None
            nxt = _REJECTED if cfg is None else self._warm_for(cfg)
            w.next[token_id] = nxt
        return None if nxt is _REJECTED else nxt

    def _fill_warm(self, w: _Warm, buf: np.ndarray, walk: bool) -> tuple[int, tuple[str, ...]]:
        """Fill from ``w``'s record when valid, else through :meth:`_fill` and record it.
        Returns the entry ids as the record's tuple (callers that keep them copy)."""
        f = w.fill
        cache = self.cache
        nw = self.n_words
        if (
            f is not None
            and cache.enabled
            and buf.dtype is _I32
            and buf.ndim == 1
            and buf.size >= nw
        ):
            if f[3] != cache.epoch and self._filler is None:
                # Some entry left since the row was recorded: revalidate as a structural memo
                # hit does (root entry resident, same id; the identifier rule re-checked),
                # without rebuilding the structural key. Keeps the record useful while a full
                # cache evicts on every publish.
                epoch = cache.epoch
                root = cache.get(self.namespace, self.key_for(w.cfg, 0))
                if root is not None and root.entry_id == f[2][0]:
                    f = w.fill = (f[0], f[1], f[2], epoch)
                else:
                    f = None
            if f is not None:
                if buf.size == nw:
                    buf[...] = f[0]  # no slice view: ~0.1-0.2 µs of a ~1 µs hit
                else:
                    buf[:nw] = f[0]
                    buf[nw:] = 0
                return f[1], f[2]
        epoch = cache.epoch  # read before: an eviction during the fill invalidates the record
        n, t, row = self._fill(w.cfg, buf, walk)
        if row is not None:
            if w.fill is None:
                self._warm_bytes += row.nbytes
            w.fill = (row.view(np.int32), n, t, epoch)
        return n, t

    def _warm_row(self, w: _Warm, scratch: np.ndarray) -> tuple[int, np.ndarray]:
        """(allowed count, the mask's words) of ``w``: its recorded row itself (read-only,
        no copy) while the record is valid, else ``scratch`` filled by :meth:`_fill_warm`.

        Why: the jump-forward check (:meth:`Matcher.forced_tokens`) needs the count at every
        step and the words only for a singleton; with the 19 KB row copied the check took
        42 µs a step next to a model, whose forward pass leaves the row out of the CPU
        caches, and 17 µs without (``bench/e2e_steps.py`` at b255895 and 6a861a3)."""
        f = w.fill
        if f is not None and self.cache.enabled and f[3] == self.cache.epoch:
            return f[1], f[0]
        n, _ = self._fill_warm(w, scratch, True)
        return n, scratch

    def _fill(
        self, cfg: Configuration, buf: np.ndarray, walk: bool
    ) -> tuple[int, tuple[str, ...], np.ndarray | None]:
        """The fill behind the warm records: the structural memo, then the Rust filler
        (:meth:`filler`) or the Python orchestration (:meth:`collect`, the reference); also
        returns the finished row (read-only uint32) when the cache is on, for the warm
        record."""
        if buf.dtype != np.int32 or buf.ndim != 1 or buf.size < self.n_words:
            raise ValueError(f"bitmask buffer must be a 1-d int32 array of >= {self.n_words} words")
        if not walk and not self.cache.enabled:
            raise _NeedWalk
        nw = self.n_words
        words = buf.view(np.uint32)
        memo_on = self.cache.enabled
        mk = self._memo_key(cfg) if memo_on else None
        kf = self.filler()
        if mk is not None:
            with self._memo_lock:
                hit = self._memo.get(mk)
                if hit is not None:
                    self._memo.move_to_end(mk)
            if hit is not None:
                # a kernel-fill row is exact by construction (its entries are the filler's,
                # keyed by kind); a collect() row is revalidated against the MaskCache
                root = (
                    None if kf is not None else self.cache.get(self.namespace, self.key_for(cfg, 0))
                )
                if kf is not None or (root is not None and root.entry_id == hit[2][0]):
                    words[:nw] = hit[0]
                    words[nw:] = 0
                    return hit[1], hit[2], hit[0]
        if kf is not None:
            s = cfg.scan
            # the filler writes C-contiguous int32 memory in place (a strided view goes
            # through a copy)
            direct = buf.flags.c_contiguous and buf.flags.writeable
            out = buf if direct else np.empty(buf.size, dtype=np.int32)
            walks = kf.walks
            try:
                got = kf.fill(
                    stack_pairs(cfg.stack), (s.dfa, s.rem, s.la_len, s.la_state), out, walk
                )
            except ValueError as exc:
                raise MaskError(f"{exc} (stack {cfg.stack!r})") from exc
            if got is None:
                raise _NeedWalk
            if kf.walks != walks:  # the store grew: one bound with the other guides' stores
                self.cache.charge_store(self)
            if not direct:
                buf[...] = out
            n, got_ids = got
            entry_ids = tuple(got_ids)
            return n, entry_ids, self._remember(mk, words[:nw], n, entry_ids)
        entries, extra = self.collect(cfg, walk=walk)
        eos = self.runtime.eos_allowed(cfg)
        words[:] = 0
        for e in entries:
            if e.ci_ids.size:
                e.packed(nw).or_into(words)
        if extra:
            ids = np.concatenate(extra) if len(extra) > 1 else extra[0]
            np.bitwise_or.at(words, ids >> 5, np.uint32(1) << (ids & 31).astype(np.uint32))
        if eos:
            words[self.eos_id >> 5] |= np.uint32(1 << (self.eos_id & 31))
        n = int(np.bitwise_count(words[:nw]).sum())
        if n == 0:
            raise MaskError(f"empty mask at a viable configuration (stack {cfg.stack!r})")
        entry_ids = tuple(e.entry_id for e in entries)
        return n, entry_ids, self._remember(mk, words[:nw], n, entry_ids)

    def _remember(
        self, mk: tuple[Any, ...] | None, words: np.ndarray, n: int, entry_ids: tuple[str, ...]
    ) -> np.ndarray | None:
        """Keep a finished row in the structural memo (cache on); returns the read-only row."""
        if mk is None:
            return None
        # One array per distinct row content: configurations that differ only in what a
        # mask cannot see (e.g. the stack below an identifier position) share their row,
        # so the rows a decode replays are fewer and hotter in the CPU caches. A strided
        # sample of the words picks the bucket (~0.4 µs); equality is checked on all words.
        ck = (n, hash(words[::61].tobytes()))
        with self._memo_lock:
            row = self._rows.get(ck)
        if row is None or row.tobytes() != words.tobytes():
            row = words.copy()
            row.setflags(write=False)
            with self._memo_lock:
                self._rows.setdefault(ck, row)
        with self._memo_lock:
            if mk not in self._memo:
                self._memo[mk] = (row, n, entry_ids)
                self._memo_bytes += row.nbytes  # a shared row counts per entry (an upper bound)
                while self._memo_bytes > FILL_MEMO_BYTES and len(self._memo) > 1:
                    _, old = self._memo.popitem(last=False)
                    self._memo_bytes -= old[0].nbytes
        return row


def fill_rows(
    pairs: Sequence[tuple[Guide, Configuration]],
    buf: np.ndarray,
    rows: Sequence[int] | None = None,
    *,
    walk: bool = True,
    records: Sequence[Any] | None = None,
) -> list[tuple[int, tuple[str, ...]] | None]:
    """Batched fill for heterogeneous guides: row ``rows[k]`` (default ``k``) of the 2-d
    int32 ``buf`` gets the mask of ``pairs[k] = (guide, cfg)`` exactly as
    ``guide.fill_bitmask(cfg, row)`` would write it (``walk=False``: as
    ``try_fill_bitmask``, None and the row untouched where a trie walk is needed). Rows
    narrower than a guide's ``n_words`` raise ValueError; words beyond it are zeroed.

    Rows whose finished words are resident (warm records) are written by one native call
    (``_kernels.copy_rows``, GIL released) instead of a slice assignment each: a serving
    step's warm rows cost one interpreter round trip, not one per request. The others go
    through the guide's own fill, row by row, before that call. ``records[k]``: the warm
    record a matcher already holds for ``pairs[k]``'s configuration (``Matcher.warm_record``),
    which saves looking it up by configuration."""
    if buf.ndim != 2 or buf.dtype != np.int32:
        raise ValueError("fill_rows needs a 2-d int32 buffer")
    idx = range(len(pairs)) if rows is None else rows
    if len(idx) != len(pairs):
        raise ValueError(f"{len(pairs)} configurations but {len(idx)} rows")
    width = buf.shape[1]
    # one native copy needs a C-contiguous buffer and distinct rows (so the order of the
    # copies and the per-row fills cannot matter); otherwise rows are copied one by one
    native = _copy_rows if buf.flags.c_contiguous and len(set(idx)) == len(idx) else None
    srcs: list[np.ndarray] = []
    dst: list[int] = []
    out: list[tuple[int, tuple[str, ...]] | None] = []
    if records is not None and len(records) != len(pairs):
        raise ValueError(f"{len(pairs)} configurations but {len(records)} records")
    for k, ((g, cfg), r) in enumerate(zip(pairs, idx, strict=True)):
        w = records[k] if records is not None else None
        if w is None or w.cfg is not cfg:
            w = g._warm_for(cfg)
        f = w.fill
        nw = g.n_words
        # a kernel-fill row stays exact across cache epochs (as Matcher's own hit test)
        if (
            f is not None
            and (g._filler is not None or f[3] == g.cache.epoch)
            and g.cache.enabled
            and width >= nw
        ):
            if native is not None:
                srcs.append(f[0])
                dst.append(int(r))
            else:  # the warm hit of _fill_warm, without a row view per call
                buf[r, :nw] = f[0]
                if width > nw:
                    buf[r, nw:] = 0
            out.append((f[1], f[2]))
            continue
        try:
            out.append(g._fill_warm(w, buf[r], walk))
        except _NeedWalk:
            out.append(None)
    if dst and native is not None:
        native(srcs, buf, dst)
    return out


def _native_copy_rows() -> Any:
    """``_kernels.copy_rows``, or None for an extension built before it existed, or none
    (the per-row copies are the same rows)."""
    try:
        from .. import _kernels
    except ImportError:
        return None
    return getattr(_kernels, "copy_rows", None)


_copy_rows = _native_copy_rows()
