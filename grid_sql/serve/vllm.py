"""grid-sql's exact masks inside vLLM: a batch-level custom logits processor (paper §6.3).

vLLM has no registry for third-party structured-output backends, but it loads custom logits
processors: ``LLM(model, logits_processors=[GridLogitsProcessor])``, ``vllm serve
--logits-processors grid_sql.serve.vllm:GridLogitsProcessor``, or installed under the
``vllm.logits_processors`` entry point (this package declares it, so installing grid-sql
into vLLM's environment is enough). A request opts in with
``SamplingParams(extra_args=grid_args(spec))`` — over HTTP ``"vllm_xargs": grid_args(spec)``.

The interface is vLLM 0.33's (``vllm.v1.worker.gpu.sample.logits_processor``, model runner
V2, unchanged in 0.34; the v1 ``BatchUpdate``/``MoveDirectionality`` interface is gone):

* per-request state lives in *slots* (the persistent request index); ``add_request(slot,
  params)`` (re)initialises a slot — there is no remove or move call, slots are recycled;
* ``apply(logits, ctx)`` gets the whole step's logits ``[rows, V]`` and the row -> slot map
  (``ctx.expanded_idx_mapping``; with speculative decoding a request owns one row per draft
  token, ``ctx.expanded_local_pos``, the drafts in ``ctx.input_ids``);
* there is no per-token accept callback: the committed output is read back from the
  engine's own buffers (``all_token_ids[slot, prompt_len:total_len]``), exactly as vLLM's
  bad-words processor does. A preempted request comes back through ``add_request`` with its
  partial output in those buffers; the slot's matcher is rebuilt and replays it.

Not ready: the build starts at ``add_request`` on the registry's worker and runs while the
request prefills. Rows of a request still in a chunked prefill are left alone (vLLM discards
their sample), so a cold guide never holds a step before its request's first committed
token. At that token ``apply`` must return logits for every row and the interface cannot
hold one request back: if the build is still running then, ``apply`` waits for it (the wait
releases the GIL). Never an approximate mask. A guide that cannot be built
(unknown fingerprint, another tokenizer, empty language) leaves its request EOS only, logged:
the request ends at once with an empty completion, which the client's parse gate refuses.

Import-light like vLLM's own interface module: vLLM's frontend process imports this class to
run ``validate_params``, so torch is imported only inside the runner-side methods.

Reading the committed tokens costs one device-to-host copy of the new tokens per step (and
the row map), a synchronisation point that vLLM's own structured-output path avoids by
keeping the grammar state in the scheduler; it is the price of the processor interface.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor

from ..errors import GuideSpecError, TokenRejected
from ..mask.logits import apply_token_bitmask_inplace
from ..mask.vocab import Vocabulary
from .batch import BatchMasker
from .registry import GuideRegistry, parse_grid_args

if TYPE_CHECKING:
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, LogitsProcRequestState

log = logging.getLogger("grid_sql.serve")

ENV_TOKENIZER = "GRID_SQL_VLLM_TOKENIZER"  # .gguf, tokenizer.json or a directory holding it
ENV_STORE = "GRID_SQL_GUIDE_STORE"  # on-disk guide artifacts (content addressed)
ENV_CAPACITY = "GRID_SQL_GUIDE_CAPACITY"

_REGISTRY: GuideRegistry | None = None
_REGISTRY_LOCK = threading.Lock()


def shared_registry() -> GuideRegistry:
    """The process-wide registry (store and capacity from the environment)."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            _REGISTRY = GuideRegistry(
                capacity=int(os.environ.get(ENV_CAPACITY, "32")),
                store=os.environ.get(ENV_STORE) or None,
            )
        return _REGISTRY


@functools.lru_cache(maxsize=4)
def load_vocabulary(
    source: str | os.PathLike[str], *, trust_remote_code: bool = False
) -> Vocabulary:
    """The served model's vocabulary: a GGUF file, a tokenizer.json, a directory holding one,
    or a Hugging Face tokenizer name (through transformers); cached per source, since
    every engine in the process (and every test) would otherwise reload it. Not padded to the logits
    width: ids past the tokenizer are blocked when the mask is applied, and the fingerprint
    is the one a client computes from the same tokenizer."""
    p = Path(source)
    if p.is_file() and p.suffix == ".gguf":
        return Vocabulary.from_gguf(p)
    if p.is_file():
        return Vocabulary.from_tokenizer_json(p)
    if (p / "tokenizer.json").is_file():
        return Vocabulary.from_tokenizer_json(p / "tokenizer.json")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(source), trust_remote_code=trust_remote_code)
    return Vocabulary.from_hf(tok)


def _vocabulary_for(vllm_config: Any) -> Vocabulary:
    src = os.environ.get(ENV_TOKENIZER)
    mc = getattr(vllm_config, "model_config", None)
    if not src and mc is not None:
        src = getattr(mc, "tokenizer", None) or getattr(mc, "model", None)
    if not src:
        raise GuideSpecError(
            f"grid-sql processor: no tokenizer (set {ENV_TOKENIZER} or give vLLM a model)"
        )
    return load_vocabulary(src, trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))


def _device_tensor(x: Any) -> torch.Tensor:
    """vLLM's staged/UVA buffers expose the device tensor as ``.gpu``; plain tensors pass."""
    t: torch.Tensor = getattr(x, "gpu", x)
    return t


def _host_array(x: Any) -> np.ndarray:
    """Host view of a per-slot length buffer (UvaBackedTensor ``.np``, or a tensor)."""
    a = getattr(x, "np", None)
    if isinstance(a, np.ndarray):
        return a
    return np.asarray(_device_tensor(x).cpu().numpy())


class GridLogitsProcessor(LogitsProcessor):
    """vLLM custom logits processor applying grid-sql's exact per-request masks."""

    def __init__(self, vllm_config: Any, req_states: LogitsProcRequestState) -> None:
        self.req_states = req_states
        self.vocab = _vocabulary_for(vllm_config)
        self.registry = shared_registry()
        self.masker = BatchMasker(self.vocab, self.registry)
        self._warned: set[tuple[int, str]] = set()

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Admission check (vLLM's frontend): a malformed spec fails the request there."""
        parse_grid_args(sampling_params.extra_args)  # GuideSpecError is a ValueError

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        ref = parse_grid_args(sampling_params.extra_args)
        # output so far is read back in apply() (on resume it is staged, not yet on device)
        self.masker.add(req_idx, ref, defer_errors=True)
        return ref is not None

    def _sampled_slots(self, ctx: LogitsContext) -> list[int]:
        """The guided slots whose token this step is committed.

        A request in the middle of a chunked prefill gets a logits row, but vLLM discards
        its sample (nothing is committed until the prefill is complete): its row needs no
        mask, and its guide need not be ready. Those slots are left out — not synced, not
        filled, their logits untouched — so a cold guide compiles during its own request's
        prefill chunks without ever holding the step. Decided on the host, no device sync:
        ``seq_lens_upper_bound_np`` (exact without drafts, and a prefilling request has
        none) below the slot's ``prefill_len`` means the prefill goes on after this step."""
        masker = self.masker
        prefill = _host_array(self.req_states.prefill_len)
        out: set[int] = set()
        for s, ub in zip(
            ctx.idx_mapping_np.tolist(), ctx.seq_lens_upper_bound_np.tolist(), strict=True
        ):
            if masker.is_masked(s) and ub >= int(prefill[s]):
                out.add(s)
        return sorted(out)

    def _sync_committed(self, slots: list[int]) -> None:
        """Bring each slot's matcher to the committed output (new tokens accepted; a
        shorter history rolled back)."""
        import torch

        rs = self.req_states
        tokens = _device_tensor(rs.all_token_ids)
        idx = torch.as_tensor(slots, dtype=torch.long, device=tokens.device)
        total = _device_tensor(rs.total_len)[idx.to(_device_tensor(rs.total_len).device)]
        total_np = total.cpu().numpy()
        prompt_np = _host_array(rs.prompt_len)
        flat: list[int] = []
        spans: list[tuple[int, int, int, bool]] = []  # slot, start, count, full
        width = tokens.shape[1]
        for s, tot in zip(slots, total_np.tolist(), strict=True):
            pl = int(prompt_np[s])
            out = int(tot) - pl
            have = self.masker.n_tokens(s)
            full = out < have
            start = pl if full else pl + have
            n = int(tot) - start
            spans.append((s, len(flat), n, full))
            flat.extend(s * width + p for p in range(start, start + n))
        if not flat:
            return
        got = tokens.reshape(-1)[torch.as_tensor(flat, dtype=torch.long, device=tokens.device)]
        vals = got.cpu().numpy().tolist()
        for s, off, n, full in spans:
            new = vals[off : off + n]
            try:
                if full:
                    self.masker.sync(s, new)
                else:
                    for t in new:
                        self.masker.accept(s, t)
            except TokenRejected as e:
                # a stage after this processor (thinking-budget forcing) may commit a token
                # outside the mask; the request can no longer be masked exactly
                self.masker.fail(s, e)

    def apply(self, logits: torch.Tensor, ctx: LogitsContext) -> torch.Tensor:
        import torch

        masker = self.masker
        slots = self._sampled_slots(ctx)
        if not slots:
            return logits
        self._sync_committed(slots)
        row_slots = ctx.expanded_idx_mapping.cpu().numpy().tolist()
        live = set(slots)
        rows = [r for r, s in enumerate(row_slots) if s in live]
        local = ctx.expanded_local_pos.cpu().numpy()
        drafts: list[list[int]] | None = None
        if rows and bool(np.any(local[rows] > 0)):
            ids = ctx.input_ids.cpu().numpy().tolist()
            drafts = [
                [int(t) for t in ids[r - int(local[r]) + 1 : r + 1]] if local[r] > 0 else []
                for r in rows
            ]
        fill = masker.fill([row_slots[r] for r in rows], drafts=drafts, block=True)
        for slot, err in fill.errors.items():
            key = (slot, masker.fingerprint(slot) or "")
            if key not in self._warned:
                self._warned.add(key)
                log.warning("grid-sql guide unavailable for slot %d, EOS only: %s", slot, err)
        bits = torch.from_numpy(fill.bitmask)
        if len(rows) == logits.shape[0]:
            apply_token_bitmask_inplace(logits, bits, vocab_size=self.vocab.size)
            return logits
        idx = torch.as_tensor(rows, dtype=torch.long, device=logits.device)
        sub = logits.index_select(0, idx)
        apply_token_bitmask_inplace(sub, bits, vocab_size=self.vocab.size)
        logits.index_copy_(0, idx, sub)
        return logits
