"""Apply an exact mask to logits in place: numpy and torch (paper §6.1, the last step).

Masks are XGrammar-layout int32 words (bit ``i % 32`` of word ``i // 32`` = token ``i``), so
these helpers also accept a bitmask filled by another engine. Logits may be one row
``(V',)`` or a batch ``(B, V')`` with a bitmask ``(B, W)``; ``V'`` may exceed the vocabulary
(models pad their output layer): ids past ``32 * W`` and past ``vocab_size`` are blocked,
since no grammar can admit a token that has no spelling. Nothing is copied: the logits are
written where they are (on the GPU for a CUDA tensor), and torch is imported only when a
tensor is passed.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _check(n_rows_logits: int, n_rows_mask: int) -> None:
    if n_rows_logits != n_rows_mask:
        raise ValueError(f"{n_rows_logits} logits rows but {n_rows_mask} bitmask rows")


def _allowed_numpy(bitmask: np.ndarray, width: int) -> np.ndarray:
    """bool[rows, width]: whether each id is allowed (ids past the mask are not)."""
    words = np.ascontiguousarray(bitmask, dtype=np.int32).view(np.uint8)
    bits = np.unpackbits(words.reshape(words.shape[0], -1), axis=1, bitorder="little")
    out = np.zeros((bits.shape[0], width), dtype=bool)
    n = min(width, bits.shape[1])
    out[:, :n] = bits[:, :n].astype(bool)
    return out


def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, *, vocab_size: int | None = None
) -> None:
    """Set every logit whose token the bitmask does not allow to ``-inf``, in place.

    ``logits``: a numpy array or a torch tensor, 1-d or 2-d (float). ``bitmask``: int32 words
    of the same kind (a numpy bitmask is accepted for a torch tensor too), 1-d or 2-d.
    ``vocab_size``: ids at or past it are blocked as well (padding rows of the output layer).
    """
    if isinstance(logits, np.ndarray):
        _apply_numpy(logits, np.asarray(bitmask), vocab_size)
        return
    _apply_torch(logits, bitmask, vocab_size)


def _apply_numpy(logits: np.ndarray, bitmask: np.ndarray, vocab_size: int | None) -> None:
    if logits.ndim not in (1, 2) or bitmask.ndim != logits.ndim:
        raise ValueError(
            f"logits {logits.shape} and bitmask {bitmask.shape} must both be 1-d or 2-d"
        )
    if bitmask.dtype != np.int32:
        raise ValueError(f"bitmask must be int32 words, got {bitmask.dtype}")
    rows = logits.reshape(1, -1) if logits.ndim == 1 else logits
    masks = bitmask.reshape(1, -1) if bitmask.ndim == 1 else bitmask
    _check(rows.shape[0], masks.shape[0])
    allowed = _allowed_numpy(masks, rows.shape[1])
    if vocab_size is not None:
        allowed[:, vocab_size:] = False
    rows[~allowed] = -np.inf


def _apply_torch(logits: Any, bitmask: Any, vocab_size: int | None) -> None:
    import torch

    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a numpy array or a torch tensor, not {type(logits)}")
    if isinstance(bitmask, np.ndarray):
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask, dtype=np.int32))
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32 words, got {bitmask.dtype}")
    if logits.dim() not in (1, 2) or bitmask.dim() != logits.dim():
        raise ValueError(
            f"logits {tuple(logits.shape)} and bitmask {tuple(bitmask.shape)} must both be "
            "1-d or 2-d"
        )
    rows = logits.view(1, -1) if logits.dim() == 1 else logits
    masks = (bitmask.view(1, -1) if bitmask.dim() == 1 else bitmask).to(logits.device)
    _check(rows.shape[0], masks.shape[0])
    width = rows.shape[1]
    ids = torch.arange(width, device=logits.device)
    word = (ids >> 5).clamp_(max=masks.shape[1] - 1)
    bit = (ids & 31).to(torch.int32)
    allowed = ((masks[:, word] >> bit) & 1).bool()
    allowed &= (ids < 32 * masks.shape[1]).unsqueeze(0)
    if vocab_size is not None:
        allowed &= (ids < vocab_size).unsqueeze(0)
    rows.masked_fill_(~allowed, -torch.inf)
