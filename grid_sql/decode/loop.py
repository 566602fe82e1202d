"""The GRID-owned decode loop (termination mode 1, paper §5 Proposition 9 and §6.1).

Per step, in the paper's normative order: the exact mask of the current configuration is
filled (``Guide.fill_bitmask``), applied to the model's logits (disallowed -> -inf: only the
allowed ids' logits are read, which picks exactly as masking the row in place would, without
writing it), a token is picked (argmax at temperature 0, else seeded sampling from the
masked softmax),
the matcher advances, and a :class:`~grid_sql.decode.records.StepRecord` is emitted. Singleton
masks are a forced span: their tokens are appended without sampling (one record each) and fed
to the model as one batch. EOS is only ever in the mask at ACCEPT, so a model-chosen EOS ends
a complete statement.

By default the loop checks the model's own choice first (``check_first``): one parser
advance decides whether the favourite (greedy) or a draw from the whole softmax (sampling) is
in the language, and only where it is not is the exact mask filled and the normative step
above taken. Greedy, the tokens are the same, since the masked argmax is the favourite
whenever the favourite is allowed; sampling, the distribution is the masked softmax's
(:func:`draw_unmasked`). What changes is that such a step fills no mask
(``StepKind.CHECKED``), so a process meeting new statements stops paying for the masks it
never needed.

Termination: the loop keeps the invariant ``reserve cost(κ) <= remaining budget`` where the
reserve (``grid_sql.mask.reserve``) is a token-denominated completion legal under the exact
mask. A move (sampled token or forced span) is taken only if the completion from the
configuration it leads to still fits; otherwise the reserve completion of the current
configuration is written instead (kind RESERVE) and the generation ends there. So every
non-error stop is a complete statement. Every stop also appends one EOS record at ACCEPT
(the paper's "Write(shortest completion + EOS)", and the audit trail's EOS tail), which is
not counted in ``max_tokens`` and not fed to the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import BudgetError, MaskError, TokenizerError, TokenRejected
from ..mask.guide import Guide, Matcher
from ..mask.reserve import ReserveTable, reserve_table
from ..parser.incremental import Configuration
from .backend import Backend
from .bind import BindOnClose
from .records import StepKind, StepRecord, StopReason

__all__ = ["Generation", "Timings", "generate", "pick_token"]

OnStep = Callable[[StepRecord], None]


@dataclass(slots=True)
class Timings:
    """Wall-clock seconds by phase (``model`` excludes the prompt's ``prefill``)."""

    prefill: float = 0.0
    model: float = 0.0
    mask: float = 0.0  # mask fill + in-place application
    reserve: float = 0.0  # reserve cost/completion bookkeeping
    total: float = 0.0

    @property
    def guard(self) -> float:
        """Everything grid-sql adds on top of the model (mask + reserve + picking)."""
        return max(0.0, self.total - self.prefill - self.model)


@dataclass(frozen=True, slots=True)
class BlockedIntent:
    """A step where the model's favourite token was outside the exact mask (issue #30).

    ``step``: tokens emitted before it (the prefix is ``token_ids[:step]``); ``token``: the
    favourite; ``prob``: its probability under the unmasked distribution; ``outside``: the
    probability mass the mask removed. What the model *wanted* to write there is evidence the
    Asker reads (a denied table, a foreign idiom), never something that was written."""

    step: int
    token: int
    prob: float
    outside: float


def blocked_intent(
    logits: np.ndarray, bitmask: np.ndarray, step: int, fav: int | None = None
) -> BlockedIntent | None:
    """The :class:`BlockedIntent` of one sampled step, or None when the favourite is allowed.
    ``fav``: the unmasked argmax when the caller has it already."""
    if fav is None:
        fav = int(np.argmax(logits))
    if fav < 32 * bitmask.shape[0] and _bit(bitmask, fav):
        return None
    lg = np.asarray(logits, dtype=np.float64)
    top = lg[fav]
    if not np.isfinite(top):
        return None
    w = np.exp(lg - top)
    w[~np.isfinite(w)] = 0.0
    total = float(w.sum())
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), bitorder="little")
    allowed = bits[: lg.shape[0]].astype(bool)
    inside = float(w[: allowed.shape[0]][allowed].sum())
    return BlockedIntent(step, fav, 1.0 / total, max(0.0, 1.0 - inside / total))


@dataclass(slots=True)
class Generation:
    """The result of one constrained generation."""

    token_ids: list[int]  # emitted tokens, EOS excluded
    text: bytes  # their spelling: a complete statement for every stop reason but TRUNCATED
    stop_reason: StopReason
    records: list[StepRecord]
    timings: Timings
    prompt_tokens: int
    mode: int = 1  # 1: GRID-owned loop (reserve available); 2: logits-processor mode
    blocked: list[BlockedIntent] = field(default_factory=list)  # the model's blocked favourites

    @property
    def sql(self) -> str:
        return self.text.decode("utf-8", errors="replace").strip()

    @property
    def mask_seconds(self) -> float:
        return self.timings.mask

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)


def pick_token(
    logits: np.ndarray,
    bitmask: np.ndarray,
    temperature: float,
    rng: np.random.Generator,
    top: int | None = None,
) -> int:
    """Argmax over the allowed ids (temperature 0, lowest id on ties) or a sample from the
    softmax over the allowed ids only (a disallowed token has probability exactly 0: hard
    masking, Proposition 7).

    Only allowed ids' logits are read, so ``logits`` need not be masked first (a masked row
    gives the same pick): greedy decoding checks the unmasked argmax against the bitmask
    and falls back to the allowed ids only when the model's favourite is blocked, so the
    usual step never touches the whole row twice (issue #6: the guard's share). ``top``: the
    unmasked argmax when the caller has it already.
    """
    size = logits.shape[0]
    if temperature <= 0.0:
        top = int(np.argmax(logits)) if top is None else top
        if top < 32 * bitmask.shape[0] and _bit(bitmask, top):
            return top
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little", count=size)
    ids = np.flatnonzero(bits)
    if temperature <= 0.0:
        return int(ids[np.argmax(logits[ids])])  # ids ascend: first maximum = lowest id
    z = logits[ids].astype(np.float64) / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    return int(ids[rng.choice(ids.size, p=p)])


def draw_unmasked(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int | None:
    """A sample from the softmax over the whole row (None if the row has no finite maximum).

    The first stage of check-first sampling: a draw ``t`` the language admits is kept, and
    otherwise a second draw comes from the softmax over the allowed ids only
    (:func:`pick_token`). Exact: for an allowed ``t``, P(t) = p(t) + (1 - p(A)) p(t) / p(A)
    = p(t) / p(A), the masked softmax (``tests/decode/test_pick.py`` draws both).
    """
    z = logits.astype(np.float64) / temperature
    top = z.max()
    if not np.isfinite(top):
        return None
    p = np.exp(z - top)
    p[~np.isfinite(p)] = 0.0
    total = p.sum()
    if not total > 0.0:
        return None
    return int(rng.choice(p.size, p=p / total))


def _bit(buf: np.ndarray, token: int) -> bool:
    return bool((int(buf[token >> 5]) >> (token & 31)) & 1)


class _Recorder:
    """Fills the exact mask of a configuration and turns a chosen token into a record."""

    def __init__(self, guide: Guide, m: Matcher, on_step: OnStep | None, t: Timings) -> None:
        self.guide = guide
        self.m = m
        self.buf = m.allocate_bitmask()
        self.records: list[StepRecord] = []
        self.on_step = on_step
        self.t = t
        self._filled_for: Configuration | None = None
        self._fill: tuple[int, tuple[str, ...], str] = (0, (), "")

    def fill(self) -> tuple[int, tuple[str, ...], str]:
        """(allowed count, entry ids, mask digest) of the current configuration's mask,
        now in ``buf`` (the digest comes with the guide's warm record: no rehash on a hit)."""
        cfg = self.m.config
        if self._filled_for is not cfg:
            t0 = time.perf_counter()
            self._fill = self.guide.fill_bitmask_digest(cfg, self.buf)
            self._filled_for = cfg
            self.t.mask += time.perf_counter() - t0
        return self._fill

    def emit_checked(self, token: int, kind: StepKind = StepKind.CHECKED) -> None:
        """Record ``token`` without a mask and advance: the model's own choice (favourite or
        unmasked draw) already checked to be in the language here (:meth:`Matcher.cost_after`
        was not None), or
        (``kind`` EOS) the EOS tail, which the matcher accepts only at ACCEPT (the EOS bit
        of the exact mask is that test: ``ParserRuntime.eos_allowed``)."""
        rec = StepRecord(
            step=len(self.records),
            config_hash=self.m.config_hash,
            entry_ids=(),
            mask_digest="",
            token=token,
            allowed=0,
            blocked=0,
            kind=kind,
        )
        try:
            self.m.accept_token(token)
        except TokenRejected as exc:  # cannot happen: checked before, or at ACCEPT
            raise MaskError(f"{kind.value} token {token} rejected by the parser: {exc}") from exc
        self.records.append(rec)
        if self.on_step is not None:
            self.on_step(rec)

    def emit(self, token: int, kind: StepKind) -> None:
        """Record ``token`` at the current configuration and advance the matcher."""
        n_allowed, entry_ids, digest = self.fill()
        if not _bit(self.buf, token):
            raise MaskError(f"{kind.value} token {token} is not in the exact mask")
        rec = StepRecord(
            step=len(self.records),
            config_hash=self.m.config_hash,
            entry_ids=entry_ids,
            mask_digest=digest,
            token=token,
            allowed=n_allowed,
            blocked=self.guide.vocab.size - n_allowed,
            kind=kind,
        )
        self.m.accept_token(token)
        self.records.append(rec)
        if self.on_step is not None:
            self.on_step(rec)


def _ends_statement(m: Matcher) -> bool:
    """At ACCEPT right after a top-level ``;`` (a ``;`` inside a literal is not accepting).

    Only the last token is looked at (O(1) per step): a ``;`` followed by whitespace-only
    tokens was already seen accepting when it was emitted.
    """
    tb = m.guide.token_bytes
    return bool(m.tokens) and tb[m.tokens[-1]].rstrip().endswith(b";") and m.is_accepting()


def generate(
    backend: Backend,
    guide: Guide,
    prompt_ids: Sequence[int],
    *,
    max_tokens: int,
    temperature: float = 0.0,
    seed: int | None = None,
    on_step: OnStep | None = None,
    stop_at_semicolon: bool = True,
    reserve: ReserveTable | None = None,
    bind: BindOnClose | None = None,
    check_first: bool = True,
) -> Generation:
    """Decode one statement of ``guide``'s language from ``backend`` after ``prompt_ids``.

    ``check_first``: each step first checks the model's own choice against the language
    (one parser advance) and fills the exact mask only where that choice is outside it.
    Greedy, the choice is the favourite: the masked argmax *is* the favourite whenever the
    favourite is allowed (lowest id on ties either way), so the emitted tokens are those of
    the masked loop. Sampling, the choice is a draw from the whole softmax, and a rejected
    draw is followed by a draw from the masked softmax: each allowed token then has exactly
    its masked-softmax probability (:func:`draw_unmasked`), from other random draws than the
    every-mask loop's. Why: a mask the process has not seen costs milliseconds under the
    Asker's scoped grammar (``bench/RESULTS-e2e.md``). Such steps are recorded as
    ``CHECKED`` (no digest: the audit replay checks the token instead); ``False`` fills every
    step's mask (and takes forced spans before consulting the model), as the paper's
    normative order does.

    ``max_tokens`` bounds the emitted tokens (EOS excluded). ``bind`` (grammars with
    select-list obligations only): where the model's first choice would close a FROM clause
    an obligation keeps open, write the FROM item it needs (``grid_sql.decode.bind``; tokens
    of kind ``bind``). Raises :class:`BudgetError` if it cannot hold the shortest completion
    of the empty statement, and :class:`TokenizerError` if the guide was compiled for another
    vocabulary.
    """
    if guide.vocab.fingerprint != backend.vocab.fingerprint:
        raise TokenizerError(
            "the guide was compiled for another vocabulary than the backend's "
            f"({guide.vocab.source!r} vs {backend.vocab.source!r})"
        )
    if max_tokens < 0:
        raise BudgetError(f"max_tokens must be >= 0, got {max_tokens}")
    t_start = time.perf_counter()
    timings = Timings()
    t0 = time.perf_counter()
    res = reserve if reserve is not None else reserve_table(guide.grammar, guide.vocab)
    timings.reserve += time.perf_counter() - t0  # the table is built once per (grammar, vocab)
    m = guide.matcher()
    rec = _Recorder(guide, m, on_step, timings)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    need = res.cost(m.config)
    timings.reserve += time.perf_counter() - t0
    if need > max_tokens:
        raise BudgetError(
            f"max_tokens={max_tokens} cannot hold the shortest complete statement ({need} tokens)"
        )

    try:
        return _decode(
            backend, guide, prompt_ids, m, rec, res, max_tokens, temperature, rng, timings,
            t_start, stop_at_semicolon, bind, check_first,
        )  # fmt: skip
    except MaskError as exc:
        # where it broke, for the caller's incident record (the Asker's dead-end fallback)
        if exc.partial is None:
            exc.partial = guide.vocab.spell(m.tokens).decode("utf-8", "replace")
        raise


def _decode(
    backend: Backend,
    guide: Guide,
    prompt_ids: Sequence[int],
    m: Matcher,
    rec: _Recorder,
    res: ReserveTable,
    max_tokens: int,
    temperature: float,
    rng: np.random.Generator,
    timings: Timings,
    t_start: float,
    stop_at_semicolon: bool,
    bind: BindOnClose | None,
    check_first: bool = False,
) -> Generation:
    """The decode loop of :func:`generate` (split out so a MaskError carries the partial
    text)."""
    eos = guide.eos_id

    def cost(cfg: Configuration) -> int:
        t0 = time.perf_counter()
        c = res.cost(cfg)
        timings.reserve += time.perf_counter() - t0
        return c

    def write_reserve() -> None:
        t0 = time.perf_counter()
        comp = res.completion(m.config)
        timings.reserve += time.perf_counter() - t0
        if comp.cost > max_tokens - len(m.tokens):  # the invariant says it cannot
            raise MaskError(f"reserve of {comp.cost} tokens exceeds the remaining budget")
        for t in comp.tokens:
            rec.emit(t, StepKind.RESERVE)

    logits: np.ndarray  # the model's row for the next choice (bind_step feeds it too)
    binds = 0  # FROM items written for obligations (at most bind.max_binds)

    def feed(toks: list[int]) -> None:
        """Give the model the tokens just written; its next row lands in ``logits``."""
        nonlocal logits
        t0 = time.perf_counter()
        logits = backend.step(toks)
        timings.model += time.perf_counter() - t0

    def bind_step(top: int, remaining: int) -> bool:
        """Where the model's favourite ``top`` would close a FROM clause an obligation keeps
        open, write the FROM item it needs (records of kind BIND, fed to the model as one
        batch) and say so; False when the policy does not fire."""
        nonlocal binds
        assert bind is not None
        t0 = time.perf_counter()
        span = bind.span(m.config, lambda: guide.vocab.spell(m.tokens), top)
        toks = bind.tokens(span) if span is not None else []
        ok = False
        if toks and len(toks) <= remaining:
            mark, cfg0 = len(m.tokens), m.config
            try:
                m.accept_tokens(toks)
                ok = cost(m.config) <= remaining - len(toks)
            except TokenRejected:
                pass
            m.rollback(len(m.tokens) - mark)
            assert m.config is cfg0
        timings.mask += time.perf_counter() - t0
        if not ok:
            return False
        binds += 1
        for t in toks:
            rec.emit(t, StepKind.BIND)
        feed(toks)
        return True

    t0 = time.perf_counter()
    logits = backend.prefill(prompt_ids)
    timings.prefill = time.perf_counter() - t0
    stop: StopReason
    blocked: list[BlockedIntent] = []
    while True:
        remaining = max_tokens - len(m.tokens)
        bind_tried = False
        top: int | None = None
        if check_first:
            # The model's favourite first (see generate): no mask where it is allowed.
            t0 = time.perf_counter()
            top = int(np.argmax(logits))
            timings.mask += time.perf_counter() - t0
            if bind is not None and binds < bind.max_binds:
                bind_tried = True
                if bind_step(top, remaining):
                    continue
            # the model's choice: its favourite, or a draw from its whole softmax
            if temperature <= 0.0:
                pick: int | None = top
            else:
                t0 = time.perf_counter()
                pick = draw_unmasked(logits, temperature, rng)
                timings.mask += time.perf_counter() - t0
            if pick is None:
                pass
            elif pick == eos:
                if logits[pick] > -np.inf and m.is_accepting():
                    stop = StopReason.EOS
                    break
            elif logits[pick] > -np.inf:
                t0 = time.perf_counter()
                after = m.cost_after(pick, res)  # None: the choice leaves the language
                timings.reserve += time.perf_counter() - t0
                if after is not None:
                    if remaining < 1 or after > remaining - 1:
                        write_reserve()
                        stop = StopReason.RESERVE
                        break
                    rec.emit_checked(pick)
                    if stop_at_semicolon and _ends_statement(m):
                        stop = StopReason.STOP_AT_ACCEPT
                        break
                    feed([pick])
                    continue
            # the choice is outside the language: the exact mask decides (below)
        # Jump-forward: a singleton mask chain is written without consulting the model.
        forced = m.forced_tokens(limit=max(remaining, 0))
        if forced:
            mark = len(m.tokens)
            cfg0 = m.config
            m.accept_tokens(forced)
            fits = cost(m.config) <= remaining - len(forced)
            m.rollback(len(m.tokens) - mark)
            assert m.config is cfg0
            if not fits:
                write_reserve()
                stop = StopReason.RESERVE
                break
            for t in forced:
                rec.emit(t, StepKind.FORCED)
            if stop_at_semicolon and _ends_statement(m):
                stop = StopReason.STOP_AT_ACCEPT
                break
            feed(forced)
            continue
        rec.fill()
        if bind is not None and binds < bind.max_binds and not bind_tried:
            if top is None:
                top = int(np.argmax(logits))
            if bind_step(top, remaining):
                continue
        t0 = time.perf_counter()
        if top is None:  # one pass over the row for both readers below
            top = int(np.argmax(logits))
        hit = blocked_intent(logits, rec.buf, len(m.tokens), top)
        if hit is not None:
            blocked.append(hit)
        tok = pick_token(logits, rec.buf, temperature, rng, top)
        timings.mask += time.perf_counter() - t0
        if not (_bit(rec.buf, tok) and logits[tok] > -np.inf):
            raise MaskError(f"every allowed token has a -inf or NaN logit (picked {tok})")
        if tok == eos:
            stop = StopReason.EOS
            break
        if remaining < 1:
            write_reserve()
            stop = StopReason.RESERVE
            break
        t0 = time.perf_counter()
        after = m.cost_after(tok, res)  # the reserve where tok leads, without advancing
        timings.reserve += time.perf_counter() - t0
        if after is None:  # cannot happen: tok is in the exact mask
            raise MaskError(f"sampled token {tok} rejected by the parser")
        fits = after <= remaining - 1
        if not fits:
            write_reserve()
            stop = StopReason.RESERVE
            break
        rec.emit(tok, StepKind.SAMPLED)
        if stop_at_semicolon and _ends_statement(m):
            stop = StopReason.STOP_AT_ACCEPT
            break
        feed([tok])
    if not m.is_accepting():  # cannot happen: every branch above ends at ACCEPT
        raise MaskError(f"generation stopped ({stop.value}) outside ACCEPT")
    if check_first:  # the EOS tail needs no mask: ACCEPT is its whole test
        rec.emit_checked(eos, StepKind.EOS)
    else:
        rec.emit(eos, StepKind.EOS)
    timings.total = time.perf_counter() - t_start
    tokens = [t for t in m.tokens if t != eos]
    return Generation(
        token_ids=tokens,
        text=guide.vocab.spell(tokens),
        stop_reason=stop,
        records=rec.records,
        timings=timings,
        prompt_tokens=len(prompt_ids),
        blocked=blocked,
    )
