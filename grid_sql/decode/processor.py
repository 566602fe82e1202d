"""Processor mode (paper §5, mode 2): exact masks for callers who run ``model.generate``.

A logits processor can only mask; it cannot append tokens. So the guarantee weakens to
EOS-only-at-ACCEPT (the exact mask admits EOS iff the output is a complete statement):
there is no reserve completion and no jump-forward, and when ``generate`` stops on its own
length limit the output may be an incomplete statement. :meth:`GridLogitsProcessor.finish`
records that stop as ``StopReason.TRUNCATED`` (``Generation.mode == 2``) so the audit seal
can say so.

    proc = GridLogitsProcessor(guide)
    out = model.generate(ids, logits_processor=LogitsProcessorList([proc]),
                         max_new_tokens=64, do_sample=False)
    gen = proc.finish(out)[0]

It is duck-typed to transformers' ``LogitsProcessor`` protocol (``__call__(input_ids,
scores) -> scores``), so importing this module does not import torch or transformers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..mask.guide import Guide, Matcher
from .loop import Generation, Timings
from .records import StepKind, StepRecord, StopReason, mask_digest

__all__ = ["GridLogitsProcessor"]


@dataclass(slots=True)
class _Pending:
    """The mask offered at a step, waiting for the token ``generate`` picks from it."""

    config_hash: int
    entry_ids: tuple[str, ...]
    digest: str
    allowed: int


class _Row:
    def __init__(self, guide: Guide) -> None:
        self.m: Matcher = guide.matcher()
        self.buf = self.m.allocate_bitmask()
        self.records: list[StepRecord] = []
        self.pending: _Pending | None = None
        self.consumed = 0  # generated tokens already fed to the matcher


class GridLogitsProcessor:
    """Masks each row's next-token scores with the exact mask of its own matcher."""

    def __init__(self, guide: Guide, *, prompt_len: int | None = None) -> None:
        self.guide = guide
        self.prompt_len = prompt_len
        self.rows: list[_Row] = []
        self.mask_seconds = 0.0
        self._t0: float | None = None

    def _advance(self, row: _Row, new: list[int]) -> None:
        g = self.guide
        for tok in new:
            if row.m.is_terminated():
                break  # generate() pads finished rows; they are not part of the output
            p = row.pending
            if p is None:  # pragma: no cover - a token always follows an offered mask
                raise RuntimeError("token without an offered mask")
            row.m.accept_token(tok)  # raises TokenRejected if generate() ignored the mask
            kind = StepKind.EOS if tok == g.eos_id else StepKind.SAMPLED
            row.records.append(
                StepRecord(
                    step=len(row.records),
                    config_hash=p.config_hash,
                    entry_ids=p.entry_ids,
                    mask_digest=p.digest,
                    token=tok,
                    allowed=p.allowed,
                    blocked=g.vocab.size - p.allowed,
                    kind=kind,
                )
            )
            row.pending = None
            row.consumed += 1

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        t0 = time.perf_counter()
        if self._t0 is None:
            self._t0 = t0
        ids = input_ids.detach().cpu().numpy()
        if self.prompt_len is None:
            self.prompt_len = int(ids.shape[1])
        if not self.rows:
            self.rows = [_Row(self.guide) for _ in range(ids.shape[0])]
        g = self.guide
        size = g.vocab.size
        for r, row in enumerate(self.rows):
            gen = ids[r, self.prompt_len :].tolist()
            self._advance(row, gen[row.consumed :])
            if row.m.is_terminated():
                scores[r, :] = -torch.inf
                scores[r, g.eos_id] = 0.0
                continue
            cfg = row.m.config
            n, entry_ids = g.fill_bitmask(cfg, row.buf)
            row.pending = _Pending(cfg.config_hash, tuple(entry_ids), mask_digest(row.buf), n)
            bits = np.unpackbits(row.buf.view(np.uint8), bitorder="little", count=size)
            blocked = torch.from_numpy(bits == 0).to(scores.device)
            scores[r, :size].masked_fill_(blocked, -torch.inf)
            if scores.shape[-1] > size:  # padded logit rows never name a token
                scores[r, size:] = -torch.inf
        self.mask_seconds += time.perf_counter() - t0
        return scores

    def finish(self, sequences: Any) -> list[Generation]:
        """One :class:`Generation` per row of ``generate``'s output (``mode == 2``)."""
        ids = sequences.detach().cpu().numpy() if hasattr(sequences, "detach") else sequences
        ids = np.asarray(ids)
        if self.prompt_len is None or not self.rows:
            raise ValueError("finish() before the processor saw a generate() step")
        total = time.perf_counter() - (self._t0 or time.perf_counter())
        out: list[Generation] = []
        eos = self.guide.eos_id
        for r, row in enumerate(self.rows):
            self._advance(row, ids[r, self.prompt_len :].tolist()[row.consumed :])
            stop = StopReason.EOS if row.m.is_terminated() else StopReason.TRUNCATED
            tokens = [t for t in row.m.tokens if t != eos]
            out.append(
                Generation(
                    token_ids=tokens,
                    text=self.guide.vocab.spell(tokens),
                    stop_reason=stop,
                    records=list(row.records),
                    timings=Timings(mask=self.mask_seconds, total=total),
                    prompt_tokens=self.prompt_len,
                    mode=2,
                )
            )
        return out
