"""The serving engine behind :class:`grid_sql.serve.server.GridServer`: requests, the
llama.cpp batch engine, the masker's slots and the scheduler thread that runs the rounds.

Split out of :mod:`grid_sql.serve.server` (the HTTP half, which re-exports ``ServerStats``):
the round loop — admit, feed, fill masks for the whole batch in one call, defer a request
whose mask is not ready, sample, retire — is the part paper §6.3 is about and is read and
changed on its own; the server module only turns HTTP bodies into :class:`_Request` objects
and events back into responses.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import GridSQLError, ModelError, OptionError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..decode.backend import LlamaCppBackend
    from .batch import BatchMasker

__all__ = ["ServerStats"]


# ----------------------------------------------------------------------------- requests


@dataclass(eq=False)
class _Request:
    """One generation in the batch: what to feed, what was produced, when."""

    rid: str
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    seed: int | None
    stop: tuple[str, ...]
    include_stop: bool
    return_ids: bool
    grid: Mapping[str, Any] | None  # the per-request grid-sql arguments (None: unmasked)
    stream: queue.SimpleQueue[tuple[str, Any]] | None = None
    # engine state
    slot: int = -1
    pending: list[int] = field(default_factory=list)  # tokens to feed the model next
    n_past: int = 0  # positions of this sequence in the KV cache
    held: np.ndarray | None = None  # logits kept while the request's mask is not ready
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str = ""
    deferred_rounds: int = 0
    cold_deferred_rounds: int = 0  # of which: its mask was a cold walk on the worker
    # timings (time.perf_counter)
    t_arrival: float = 0.0
    t_admitted: float = 0.0
    token_times: list[float] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.pending = list(self.prompt_ids)
        self.t_arrival = time.perf_counter()
        self.rng = np.random.default_rng(self.seed)


@dataclass
class ServerStats:
    """Engine-side counters; ``steps`` holds (round start, seconds, active, fed) per round.

    ``deferred``: request-rounds skipped because a mask was not ready (``deferred_cold`` of
    them for a cold mask walk, the rest for a compiling guide); ``advanced_while_deferred``:
    tokens co-tenants took in rounds where some request was deferred; ``fill_steps``: each
    round's mask fill seconds (aligned with ``steps``), ``fill_max_seconds`` the slowest (a
    cold walk on the critical path shows up there)."""

    rounds: int = 0
    deferred: int = 0
    deferred_cold: int = 0
    advanced_while_deferred: int = 0
    steps: list[tuple[float, float, int, int]] = field(default_factory=list)
    fill_steps: list[float] = field(default_factory=list)
    fill_seconds: float = 0.0
    fill_max_seconds: float = 0.0
    decode_seconds: float = 0.0

    def reset(self) -> None:
        self.rounds = self.deferred = self.deferred_cold = self.advanced_while_deferred = 0
        self.steps.clear()
        self.fill_steps.clear()
        self.fill_seconds = self.fill_max_seconds = self.decode_seconds = 0.0


# ----------------------------------------------------------------------------- engine


class _LlamaBatchEngine:
    """One llama.cpp context holding up to ``max_batch`` sequences (one per slot).

    The model weights are the backend's (loaded once by :class:`LlamaCppBackend`, which also
    owns the vocabulary and chat template); the batch context is a second context on them
    with ``n_seq_max`` sequences and a unified KV buffer, so a short request does not reserve
    ``n_ctx / max_batch`` positions it never uses.
    """

    def __init__(
        self, backend: LlamaCppBackend, *, max_batch: int, n_ctx: int, n_batch: int, n_threads: int
    ) -> None:
        import llama_cpp.llama_cpp as lc
        from llama_cpp._internals import LlamaBatch, LlamaContext

        self.lc = lc
        p = lc.llama_context_default_params()
        p.n_ctx = n_ctx
        p.n_batch = n_batch
        p.n_ubatch = min(n_batch, 512)
        p.n_seq_max = max_batch
        p.kv_unified = True
        p.n_threads = n_threads
        p.n_threads_batch = n_threads
        try:
            self.ctx = LlamaContext(model=backend.llm._model, params=p, verbose=False)
        except ValueError as e:
            raise ModelError(f"llama.cpp cannot create a {max_batch}-sequence context: {e}") from e
        self.batch = LlamaBatch(n_tokens=n_batch, embd=0, n_seq_max=1, verbose=False)
        self.n_batch = n_batch
        self.n_ctx = n_ctx
        self.vocab_size = backend.vocab.size

    def forget(self, slot: int) -> None:
        """Drop a finished sequence's cached positions (its slot is reused)."""
        self.lc.llama_memory_seq_rm(self.ctx.memory, slot, -1, -1)

    def decode(self, feeds: Sequence[tuple[int, int, Sequence[int], bool]]) -> list[int]:
        """Feed ``(slot, first position, tokens, want logits)`` for several sequences in one
        ``llama_decode``; the batch index of each feed's logits row (-1 when not wanted)."""
        b = self.batch.batch
        n = 0
        rows: list[int] = []
        for slot, pos0, toks, want in feeds:
            for i, t in enumerate(toks):
                b.token[n] = t
                b.pos[n] = pos0 + i
                b.seq_id[n][0] = slot
                b.n_seq_id[n] = 1
                b.logits[n] = False
                n += 1
            if want:
                b.logits[n - 1] = True
            rows.append(n - 1 if want else -1)
        b.n_tokens = n
        rc = self.lc.llama_decode(self.ctx.ctx, b)
        if rc != 0:
            raise ModelError(f"llama_decode returned {rc} (KV cache full or bad batch)")
        return rows

    def logits(self, row: int) -> np.ndarray:
        ptr = self.lc.llama_get_logits_ith(self.ctx.ctx, row)
        return np.ctypeslib.as_array(ptr, shape=(self.vocab_size,))


# ----------------------------------------------------------------------------- masks


class _MaskerSlots:
    """The scheduler's view of the batch masker, with the skip-a-round defer (paper §6.3).

    A request's guide build starts when its request is parsed (``registry.submit``: single
    flight, on the registry's workers, off the scheduler thread). Each round the masker fills
    every slot's row in one call with ``block=False``: a slot whose guide is still compiling,
    or whose mask is a cold walk (handed to the masker's worker), is reported pending, and the
    scheduler holds its logits and skips it for the round — its co-tenants keep decoding, and
    no approximate mask is ever used. ``cold`` holds the last call's cold-deferred slots.
    """

    def __init__(self, masker: BatchMasker) -> None:
        self.masker = masker
        self.n_words = int(masker.n_words)
        self._buf = np.zeros((0, self.n_words), dtype=np.int32)
        self.cold: set[int] = set()

    def add(self, slot: int, grid: Mapping[str, Any] | None, prompt_ids: Sequence[int]) -> None:
        self.masker.add(slot, None if grid is None else grid["fingerprint"])

    def fill(self, slots: Sequence[int]) -> list[np.ndarray | BaseException | None]:
        """A mask row per ready slot, ``None`` for a slot whose guide is still compiling,
        the error for one whose guide could not be had."""
        if self._buf.shape[0] < len(slots):
            self._buf = np.zeros((len(slots), self.n_words), dtype=np.int32)
        got = self.masker.fill(slots, self._buf[: len(slots)], block=False)
        out: list[np.ndarray | BaseException | None] = []
        self.cold = set()
        for i, s in enumerate(slots):
            err = got.errors.get(int(s))
            if err is not None:
                out.append(err)
            elif got.pending[i]:
                out.append(None)
                if got.cold is not None and got.cold[i]:
                    self.cold.add(int(s))
            else:
                out.append(got.bitmask[i])
        return out

    def wait(self, slots: Sequence[int], timeout: float) -> None:
        self.masker.wait(slots, timeout)

    def accept(self, slot: int, token: int) -> None:
        self.masker.accept(slot, token)

    def remove(self, slot: int) -> None:
        self.masker.remove(slot)


# ----------------------------------------------------------------------------- scheduler


class _Scheduler:
    """Continuous batching: rounds of one decode + one batch mask fill (see module doc)."""

    def __init__(self, backend: LlamaCppBackend, engine: _LlamaBatchEngine, masker: Any) -> None:
        self.backend = backend
        self.engine = engine
        self.masker = masker
        self.vocab = backend.vocab
        self.max_batch = engine.ctx.params.n_seq_max
        self.eog = {self.vocab.eos_token_id}
        lv = backend.llm._model.vocab
        for t in self.vocab.special_ids:  # end-of-generation ids (EOS, <|im_end|>, ...)
            if engine.lc.llama_vocab_is_eog(lv, int(t)):
                self.eog.add(int(t))
        self.stats = ServerStats()
        self.max_batched_tokens = engine.n_batch
        self._waiting: list[_Request] = []
        self._active: dict[int, _Request] = {}
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="grid-sql-scheduler", daemon=True)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=30)

    def submit(self, req: _Request) -> None:
        need = len(req.prompt_ids) + req.max_tokens
        if need > self.engine.n_ctx:
            raise OptionError(
                f"prompt ({len(req.prompt_ids)} tokens) + max_tokens ({req.max_tokens}) exceeds "
                f"the server's context of {self.engine.n_ctx} tokens"
            )
        with self._cv:
            if self._stop:
                raise ModelError("the server is shutting down")
            self._waiting.append(req)
            self._cv.notify_all()

    # -- the loop -------------------------------------------------------------------------
    def _reserved(self) -> int:
        return sum(len(r.prompt_ids) + r.max_tokens for r in self._active.values())

    def _admit(self) -> None:
        """Move waiting requests into free slots while their KV reservation fits."""
        with self._cv:
            while not self._stop and not self._active and not self._waiting:
                self._cv.wait(timeout=0.5)
            if self._stop:
                return
            free = [s for s in range(self.max_batch) if s not in self._active]
            admitted: list[_Request] = []
            while self._waiting and free:
                r = self._waiting[0]
                if self._reserved() + len(r.prompt_ids) + r.max_tokens > self.engine.n_ctx:
                    break  # wait for a co-tenant to finish
                self._waiting.pop(0)
                r.slot = free.pop(0)
                self._active[r.slot] = r
                admitted.append(r)
        for r in admitted:
            r.t_admitted = time.perf_counter()
            try:
                self.masker.add(r.slot, r.grid, r.prompt_ids)
            except GridSQLError as e:
                self._finish(r, error=e)

    def _run(self) -> None:
        while True:
            try:
                self._admit()
                if self._stop:
                    break
                if self._active:
                    self._round()
            except BaseException as e:  # noqa: BLE001 - fail the batch, keep serving
                for r in list(self._active.values()):
                    self._finish(r, error=e)
        for r in list(self._active.values()) + self._waiting:
            self._finish(r, error=ModelError("the server shut down"))

    def _round(self) -> None:
        t0 = time.perf_counter()
        eng = self.engine
        budget = self.max_batched_tokens
        feeds: list[tuple[int, int, Sequence[int], bool]] = []
        fed: list[_Request] = []
        # decoding requests first (one token each), then prompt chunks in what is left: a long
        # prompt joining the batch never holds its co-tenants' next token back for a round
        order = sorted(self._active, key=lambda s: (len(self._active[s].pending) > 1, s))
        for slot in order:
            r = self._active[slot]
            if r.held is not None or not r.pending or budget == 0:
                continue
            k = min(len(r.pending), budget)
            feeds.append((slot, r.n_past, r.pending[:k], k == len(r.pending)))
            fed.append(r)
            budget -= k
        rows: dict[int, np.ndarray] = {}
        if feeds:
            td = time.perf_counter()
            idx = eng.decode(feeds)
            self.stats.decode_seconds += time.perf_counter() - td
            for r, (_, _, toks, _), i in zip(fed, feeds, idx, strict=True):
                r.n_past += len(toks)
                del r.pending[: len(toks)]
                if i >= 0:
                    rows[r.slot] = eng.logits(i)
        for slot, r in self._active.items():
            if r.held is not None:
                rows[slot] = r.held
        # one mask fill for every request that has logits this round
        masked = [s for s in sorted(rows) if self._active[s].grid is not None]
        ready: dict[int, np.ndarray | None] = dict.fromkeys(rows)
        failed: list[_Request] = []
        deferred: list[int] = []
        dt = 0.0
        if masked:
            tf = time.perf_counter()
            got = self.masker.fill(masked)
            dt = time.perf_counter() - tf
            self.stats.fill_seconds += dt
            self.stats.fill_max_seconds = max(self.stats.fill_max_seconds, dt)
            cold = getattr(self.masker, "cold", ())
            for s, bits in zip(masked, got, strict=True):
                if isinstance(bits, BaseException):  # its guide build failed
                    self._active[s].error = bits
                    del ready[s]
                    failed.append(self._active[s])
                elif bits is None:  # guide not ready: defer this request, never approximate
                    r = self._active[s]
                    if r.held is None:
                        r.held = rows[s].copy()
                    r.deferred_rounds += 1
                    self.stats.deferred += 1
                    if s in cold:
                        r.cold_deferred_rounds += 1
                        self.stats.deferred_cold += 1
                    deferred.append(s)
                    del ready[s]
                else:
                    ready[s] = bits
        now = time.perf_counter()
        finished: list[_Request] = failed
        for s, bits in ready.items():
            r = self._active[s]
            logits = rows[s]
            if bits is not None:
                from ..mask.logits import apply_token_bitmask_inplace

                apply_token_bitmask_inplace(logits, bits)
            from ..decode.loop import pick_token

            full = bits if bits is not None else self._all
            tok = pick_token(logits, full, r.temperature, r.rng)
            if bits is not None and not (int(bits[tok >> 5]) >> (tok & 31)) & 1:
                finished.append(r)
                r.error = ModelError(f"degenerate logits: token {tok} outside the mask")
                continue
            r.held = None
            if r.grid is not None:
                self.masker.accept(s, tok)
            r.token_times.append(now)
            if tok in self.eog:
                r.finish_reason = "stop"
                finished.append(r)
                continue
            r.tokens.append(tok)
            r.pending = [tok]
            self._emit_text(r)
            if r.finish_reason:
                finished.append(r)
            elif len(r.tokens) >= r.max_tokens:
                r.finish_reason = "length"
                finished.append(r)
        if deferred:
            self.stats.advanced_while_deferred += sum(1 for s in ready if not self._active[s].error)
            if not feeds and not ready:  # every request waits on a mask: nothing to run
                self.masker.wait(deferred, 0.05)
        for r in finished:
            self._finish(r, error=r.error)
        self.stats.rounds += 1
        self.stats.fill_steps.append(dt)
        self.stats.steps.append(
            (t0, time.perf_counter() - t0, len(self._active) + len(finished), len(fed))
        )

    @property
    def _all(self) -> np.ndarray:
        """An all-ones mask (sampling helper input for unmasked requests)."""
        a = getattr(self, "_ones", None)
        if a is None:
            a = self._ones = np.full((self.vocab.size + 31) // 32, -1, dtype=np.int32)
        return a

    def _render(self, r: _Request) -> tuple[str, bool]:
        """The output text so far (cut at the first stop string) and whether one was hit."""
        text = self.vocab.spell(r.tokens).decode("utf-8", errors="replace")
        cut = [(text.find(s), s) for s in r.stop if s in text]
        if not cut:
            return text, False
        at, s = min(cut)
        return text[: at + len(s) if r.include_stop else at], True

    def _emit_text(self, r: _Request) -> None:
        text, stopped = self._render(r)
        if stopped:
            r.finish_reason = "stop"
        elif text.endswith("\ufffd"):
            return  # a multi-byte character is still incomplete
        if r.stream is not None and len(text) > len(r.text):
            r.stream.put(("delta", text[len(r.text) :]))
        r.text = text

    def _finish(self, r: _Request, *, error: BaseException | None = None) -> None:
        if r.done.is_set():
            return
        if r.slot >= 0:
            with self._cv:
                self._active.pop(r.slot, None)
            try:
                self.masker.remove(r.slot)
            except (GridSQLError, KeyError):
                pass  # never added (a bad spec) or already removed
            self.engine.forget(r.slot)
        else:
            with self._cv:
                if r in self._waiting:
                    self._waiting.remove(r)
        if error is None:
            text, _ = self._render(r)
            if r.stream is not None and len(text) > len(r.text):
                r.stream.put(("delta", text[len(r.text) :]))
            r.text = text
        r.error = error
        if r.stream is not None:
            r.stream.put(("error", error) if error is not None else ("done", None))
        r.done.set()
