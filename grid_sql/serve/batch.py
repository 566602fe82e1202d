"""Per-slot matcher state for a running batch, masks filled for the whole batch (paper §6.3).

An engine keeps requests in *slots* (vLLM: the persistent request index; a test server: its
sequence id). :class:`BatchMasker` keeps one :class:`~grid_sql.mask.guide.Matcher` per slot
whose request asked for a guide (other slots pass through unmasked), follows the engine's
batch changes (:meth:`~BatchMasker.add`, :meth:`~BatchMasker.remove`,
:meth:`~BatchMasker.move`), advances on sampled tokens (:meth:`~BatchMasker.accept`,
:meth:`~BatchMasker.sync`) and fills the bitmask rows of a whole step in one call
(:meth:`~BatchMasker.fill`). Compiled guides are shared across slots and threads (they come
from a :class:`~grid_sql.serve.registry.GuideRegistry`); per-slot state is never shared.

Not ready yet. A slot whose guide is still compiling never gets an approximate mask. What
happens instead is the engine's choice, made per call:

* ``fill(..., block=True)`` waits for the builds (the wait releases the GIL; builds run on
  the registry's workers and were started at :meth:`add`, so they overlap the engine's
  forward pass). This is all vLLM's logits-processor interface allows: ``apply()`` must
  return logits for every row, and a processor cannot hold one request back.
* ``fill(..., block=False)`` reports the slot as *pending* and leaves its row alone; an
  engine that owns its scheduler (grid-sql's test server) skips the request for the round
  and its co-tenants go on — the paper's "deferred one round".

Rows are filled in one batched call of the guides' ``fill_rows`` (heterogeneous guides).
Cold masks (``block=False`` only): that call runs with ``walk=False`` — a row whose entries
are all resident (fill memo, cache, CD resolution memo) is filled exactly as a blocking fill
would, a row that needs a trie walk is left untouched and handed to the masker's worker
thread (the Rust walk releases the GIL; a warm steady state never creates it) and reported
pending: the engine defers the request (its sequence does not advance) and the
next round copies the worker's exact row, computed for the very configuration the matcher
still holds. A request is deferred at most ``max_defer_rounds`` consecutive rounds for a
cold mask; then :meth:`~BatchMasker.fill` waits for its walk (never starved). Counters in
:attr:`BatchMasker.stats`. ``block=True`` (vLLM) computes every mask in the call.

Preemption / resumption: :meth:`add` takes the output tokens generated so far and replays
them into the fresh matcher once the guide is ready (rollback is replay from the initial
configuration; a matcher's own history covers shorter rollbacks in :meth:`sync`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GridSQLError, GuideUnavailable, OptionError, TokenRejected
from ..mask.guide import Guide, Matcher, bitmask_words
from ..mask.guide import fill_rows as guide_fill_rows
from ..mask.vocab import Vocabulary
from ..parser.incremental import Configuration
from .registry import GuideRef, GuideRegistry, GuideSpec

#: consecutive rounds a request may be deferred for a cold mask before fill waits for it
MAX_DEFER_ROUNDS = 4


@dataclass
class _Slot:
    fingerprint: str
    future: Future[Guide]
    tokens: list[int]  # output so far, replayed once the guide is ready
    matcher: Matcher | None = None
    error: GridSQLError | None = None
    # a cold mask being filled on the masker's worker: for exactly ``cold_cfg`` (identity)
    cold: Future[np.ndarray] | None = None
    cold_cfg: Configuration | None = None
    deferred: int = 0  # consecutive rounds deferred for a cold mask


@dataclass
class BatchFill:
    """One step's masks: ``bitmask[i]`` is the row of ``slots[i]``.

    ``masked[i]``: the row holds an exact mask (apply it). ``pending[i]``: the guide is not
    ready (only with ``block=False``; the row is untouched, defer the request). Neither:
    a pass-through slot (the row is untouched, do not apply it). ``errors``: slots whose
    guide could not be had or whose tokens left the grammar; their row allows EOS only, so
    an engine that cannot fail one request ends it at once (the client's parse gate then
    refuses the empty statement).
    """

    bitmask: np.ndarray
    masked: np.ndarray
    pending: np.ndarray
    errors: dict[int, GridSQLError] = field(default_factory=dict)
    #: the pending rows whose guide is ready but whose mask is a cold walk on the worker
    cold: np.ndarray | None = None


@dataclass
class MaskerStats:
    """Cold-mask counters of one :class:`BatchMasker` (``block=False`` fills only).

    ``warm``: rows filled at once by the probe's verdict; ``offloaded``: cold walks handed to
    the worker; ``deferred``: row-rounds reported pending for a cold mask; ``waited``: rows
    whose walk had used up ``max_defer_rounds`` and was waited for; ``stale``: worker rows
    dropped because the slot's configuration changed (sync, move, re-add) before use.
    """

    warm: int = 0
    offloaded: int = 0
    deferred: int = 0
    waited: int = 0
    stale: int = 0


class BatchMasker:
    """Matchers for the guided slots of one engine's batch (see the module docstring)."""

    def __init__(
        self,
        vocab: Vocabulary,
        registry: GuideRegistry,
        *,
        max_defer_rounds: int = MAX_DEFER_ROUNDS,
    ) -> None:
        """``max_defer_rounds``: consecutive rounds a ``block=False`` fill may defer a slot
        for a cold mask before it waits for the walk; 0 computes cold masks in the call
        (as ``block=True`` does)."""
        if max_defer_rounds < 0:
            raise OptionError(f"max_defer_rounds must be >= 0, got {max_defer_rounds}")
        self.vocab = vocab
        self.registry = registry
        self.n_words = bitmask_words(vocab.size)
        self.eos_id = vocab.eos_token_id
        self.max_defer_rounds = max_defer_rounds
        self.stats = MaskerStats()
        self._slots: dict[int, _Slot] = {}
        self._pool: ThreadPoolExecutor | None = None  # made on the first cold miss only
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        """Stop the cold-mask worker (walks in flight finish; their rows are dropped)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BatchMasker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- batch membership --------------------------------------------------------------
    def add(
        self,
        slot: int,
        ref: GuideRef | None,
        tokens: Sequence[int] = (),
        *,
        defer_errors: bool = False,
    ) -> str | None:
        """(Re)initialise ``slot``; ``ref`` None makes it pass-through. ``tokens``: the
        request's output so far (non-empty on resumption after preemption).

        Starts the guide build (single flight in the registry) and returns its fingerprint.
        A request the registry refuses at once (unknown fingerprint, other tokenizer) raises
        GuideUnavailable, or with ``defer_errors`` becomes an error slot (reported by
        :meth:`fill`, EOS-only row) for engines that cannot fail a request here."""
        self._slots.pop(slot, None)
        if ref is None:
            return None
        fp = ref.fingerprint if isinstance(ref, GuideSpec) else str(ref)
        try:
            fut = self.registry.submit(ref, self.vocab)
        except GridSQLError as e:
            if not defer_errors:
                raise
            fut = Future()
            fut.set_exception(e)
        st = _Slot(fp, fut, [int(t) for t in tokens])
        self._slots[slot] = st
        if fut.done():
            self._materialise(st)
        return fp

    def remove(self, slot: int) -> None:
        self._slots.pop(slot, None)

    def move(self, src: int, dst: int, *, swap: bool = False) -> None:
        """Batch reorder: swap two slots, or move ``src`` to ``dst`` (``src`` left empty,
        whatever was at ``dst`` dropped) — vLLM v1's MoveDirectionality SWAP/UNIDIRECTIONAL."""
        a = self._slots.pop(src, None)
        b = self._slots.pop(dst, None)
        if a is not None:
            self._slots[dst] = a
        if swap and b is not None:
            self._slots[src] = b

    def fail(self, slot: int, error: GridSQLError) -> None:
        """Mark a guided slot broken (e.g. the engine committed a token outside its mask, as
        a forcing stage after the processor may): its rows allow EOS only from now on and
        :meth:`fill` reports ``error`` for it. No-op for pass-through slots."""
        st = self._slots.get(slot)
        if st is not None:
            st.matcher = None
            st.error = error

    def is_masked(self, slot: int) -> bool:
        return slot in self._slots

    def fingerprint(self, slot: int) -> str | None:
        st = self._slots.get(slot)
        return None if st is None else st.fingerprint

    def n_tokens(self, slot: int) -> int:
        """Output tokens the slot's state has taken (accepted or queued for replay)."""
        st = self._slots[slot]
        return len(st.matcher.tokens) if st.matcher is not None else len(st.tokens)

    def matcher(self, slot: int) -> Matcher | None:
        st = self._slots.get(slot)
        return None if st is None else st.matcher

    # -- advancing -----------------------------------------------------------------------
    def accept(self, slot: int, token: int) -> None:
        """Advance ``slot`` by a sampled token (no-op for pass-through). Raises
        TokenRejected if the token is outside the slot's mask."""
        st = self._slots.get(slot)
        if st is None:
            return
        if st.matcher is None:
            st.tokens.append(int(token))
            return
        st.matcher.accept_token(int(token))

    def sync(self, slot: int, tokens: Sequence[int]) -> None:
        """Make the slot's accepted output equal ``tokens``: roll back a divergent suffix,
        accept the rest. For engines that report committed history rather than events."""
        st = self._slots.get(slot)
        if st is None:
            return
        toks = [int(t) for t in tokens]
        if st.matcher is None:
            st.tokens = toks
            return
        have = st.matcher.tokens
        n = 0
        lim = min(len(have), len(toks))
        while n < lim and have[n] == toks[n]:
            n += 1
        if n < len(have):
            st.matcher.rollback(len(have) - n)
        if n < len(toks):
            st.matcher.accept_tokens(toks[n:])

    # -- masks ---------------------------------------------------------------------------
    def _materialise(self, st: _Slot) -> None:
        """Make the slot's matcher from its finished build and replay its tokens."""
        if st.matcher is not None or st.error is not None:
            return
        try:
            guide = st.future.result()
        except GridSQLError as e:
            st.error = e
            return
        except Exception as e:  # noqa: BLE001 - surfaced per slot, never kills the batch
            err = GuideUnavailable(f"guide {st.fingerprint[:16]}: {e}")
            err.__cause__ = e
            st.error = err
            return
        m = guide.matcher()
        try:
            m.accept_tokens(st.tokens)
        except TokenRejected as e:
            st.error = e
            return
        st.matcher = m
        st.tokens = []

    def fill(
        self,
        slots: Sequence[int],
        bitmask: np.ndarray | None = None,
        *,
        block: bool = True,
        drafts: Sequence[Sequence[int]] | None = None,
    ) -> BatchFill:
        """Fill the mask rows of ``slots`` (one row each, a slot may repeat) in one call.

        ``bitmask``: int32 ``(len(slots), >= n_words)`` to write into (allocated if None).
        ``drafts[i]``: speculative tokens after the slot's committed output for row ``i``;
        the row gets the mask after them (they are rolled back afterwards; if one leaves
        the grammar the row gets the mask after the valid prefix — the engine's rejection
        sampler discards such a row anyway).
        """
        n = len(slots)
        if bitmask is None:
            bitmask = np.zeros((n, self.n_words), dtype=np.int32)
        elif (
            bitmask.dtype != np.int32
            or bitmask.ndim != 2
            or bitmask.shape[0] != n
            or bitmask.shape[1] < self.n_words
        ):
            raise ValueError(f"bitmask must be int32 ({n}, >= {self.n_words})")
        if drafts is not None and len(drafts) != n:
            raise ValueError(f"{len(drafts)} draft lists for {n} rows")
        masked = np.zeros(n, dtype=bool)
        pending = np.zeros(n, dtype=bool)
        cold = np.zeros(n, dtype=bool)
        states = [self._slots.get(s) for s in slots]
        waiting = [
            st.future for st in states if st is not None and st.matcher is None and st.error is None
        ]
        if waiting and block:
            wait_futures(waiting)  # Future.wait blocks in a lock: the GIL is released
        defer_cold = not block and self.max_defer_rounds > 0
        rows: list[int] = []  # per-row path: drafts, terminated matchers
        matchers: list[Matcher] = []
        row_drafts: list[Sequence[int]] = []
        batch: list[tuple[int, _Slot, Matcher]] = []  # one batched guide fill for the rest
        errors: dict[int, GridSQLError] = {}
        counted: set[int] = set()  # a slot repeated in one call is deferred once
        for i, st in enumerate(states):
            if st is None:
                continue
            if st.matcher is None and st.error is None:
                if not st.future.done():
                    pending[i] = True
                    continue
                self._materialise(st)
            if st.error is not None or st.matcher is None:
                errors[int(slots[i])] = st.error or GuideUnavailable("no matcher")
                self._eos_only(bitmask[i])
                masked[i] = True
                continue
            d = drafts[i] if drafts is not None else ()
            if d or st.matcher.is_terminated():
                rows.append(i)
                matchers.append(st.matcher)
                row_drafts.append(d)
                continue
            if defer_cold:
                got = self._cold_row(st, bitmask[i], id(st) in counted)
                if got is not None:  # the slot has a walk on the worker: its row or a defer
                    counted.add(id(st))
                    masked[i] = got
                    pending[i] = cold[i] = not got
                    continue
            batch.append((i, st, st.matcher))
        if batch:
            idx = [i for i, _, _ in batch]
            pairs = [(m.guide, m.config) for _, _, m in batch]
            recs = [m.warm_record() for _, _, m in batch]
            res = guide_fill_rows(pairs, bitmask, idx, walk=not defer_cold, records=recs)
            for (i, st, _), r in zip(batch, res, strict=True):
                if r is not None:
                    masked[i] = True
                    if defer_cold and id(st) not in counted:
                        st.deferred = 0
                        self.stats.warm += 1
                    continue
                # a walk is needed: to the worker, the request deferred (row untouched)
                pending[i] = cold[i] = True
                if id(st) not in counted:
                    counted.add(id(st))
                    self._submit(st)
        self._fill_rows(matchers, row_drafts, bitmask, rows)
        masked[rows] = True
        return BatchFill(bitmask, masked, pending, errors, cold)

    def wait(self, slots: Sequence[int], timeout: float | None = None) -> None:
        """Block until one of ``slots``' guide builds or cold walks finishes (or ``timeout``).

        For an engine whose every request is deferred this round: it has nothing to run,
        and re-filling at once would only spin (and take the GIL from the walk)."""
        futs: list[Future[Any]] = []
        for s in slots:
            st = self._slots.get(s)
            if st is None:
                continue
            if st.matcher is None and st.error is None and not st.future.done():
                futs.append(st.future)
            elif st.cold is not None and not st.cold.done():
                futs.append(st.cold)
        if futs:
            wait_futures(futs, timeout=timeout, return_when=FIRST_COMPLETED)

    # -- cold masks (block=False) ------------------------------------------------------------
    def _cold_row(self, st: _Slot, row: np.ndarray, again: bool) -> bool | None:
        """The slot's outstanding walk, if any. None: there is none (fill the row in the
        batch). True: ``row`` now holds the worker's exact mask. False: the walk is still
        running, defer the request (or, after ``max_defer_rounds``, it was waited for)."""
        m = st.matcher
        assert m is not None
        fut = st.cold
        if fut is None:
            return None
        if st.cold_cfg is not m.config or fut.cancelled():
            # the slot was synced or re-added since, or the worker was closed under it
            fut.cancel()
            st.cold = st.cold_cfg = None
            st.deferred = 0
            self.stats.stale += 1
            return None
        if not fut.done():
            if again:
                return False
            if st.deferred < self.max_defer_rounds:
                st.deferred += 1
                self.stats.deferred += 1
                return False
            self.stats.waited += 1  # the starvation bound: wait for it (GIL released)
        got = fut.result()  # a walk's exception surfaces here, as in a blocking fill
        if not again:
            st.cold = st.cold_cfg = None
            st.deferred = 0
        row[:] = 0
        row[: self.n_words] = got
        return True

    def _submit(self, st: _Slot) -> None:
        """Hand the slot's mask walk to the worker; the request is deferred this round."""
        m = st.matcher
        assert m is not None
        st.cold = self._worker().submit(self._walk, m.guide, m.config)
        st.cold_cfg = m.config
        st.deferred = 1
        self.stats.offloaded += 1
        self.stats.deferred += 1

    def _walk(self, guide: Guide, cfg: Configuration) -> np.ndarray:
        """On the worker: the exact mask of ``cfg`` (the guide's own fill, memoized there)."""
        row = np.zeros(self.n_words, dtype=np.int32)
        guide.fill_bitmask(cfg, row)
        return row

    def _worker(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="grid-sql-cold-mask")
            return self._pool

    def _fill_rows(
        self,
        matchers: Sequence[Matcher],
        drafts: Sequence[Sequence[int]],
        bitmask: np.ndarray,
        rows: Sequence[int],
    ) -> None:
        """The per-row path for rows with drafts and terminated matchers: row ``rows[k]``
        of ``bitmask`` gets the exact mask of ``matchers[k]`` after ``drafts[k]``. EOS only
        at ACCEPT (the guide's mask); a terminated matcher (EOS taken) allows EOS only, so
        an engine that keeps sampling it never sees an all-blocked row."""
        for m, d, r in zip(matchers, drafts, rows, strict=True):
            taken = 0
            try:
                for t in d:
                    m.accept_token(int(t))
                    taken += 1
            except TokenRejected:
                pass
            try:
                if m.is_terminated():
                    self._eos_only(bitmask[r])
                else:
                    m.fill_next_token_bitmask(bitmask[r])
            finally:
                if taken:
                    m.rollback(taken)

    def _eos_only(self, row: np.ndarray) -> None:
        row[:] = 0
        row.view(np.uint32)[self.eos_id >> 5] = np.uint32(1 << (self.eos_id & 31))
