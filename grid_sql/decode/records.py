"""The per-token decision record: the seam between the decode loop and the audit trail.

The decode loop (``grid_sql.decode``) produces one :class:`StepRecord` per emitted token —
sampled, forced (jump-forward interiors included), the reserve completion and the EOS tail —
and the audit trail (``grid_sql.audit``) chains them (paper §6.4). The fields are exactly
what a replay recomputes from the archived artifacts, so a record is evidence, not a log line.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..mask.guide import mask_digest  # noqa: F401 - re-exported (its old home)


class StepKind(enum.StrEnum):
    """How the token at a step was chosen."""

    SAMPLED = "sampled"  # drawn (or argmax) from the masked distribution
    # the model's own choice (greedy favourite, or a draw from its whole softmax) checked
    # against the language instead of masked (decode/loop.py, check_first): no mask is filled
    # (the record carries no entry ids, no digest and 0 allowed/blocked; replay checks it)
    CHECKED = "checked"
    FORCED = "forced"  # singleton mask: fed without sampling (jump-forward span)
    RESERVE = "reserve"  # part of the reserve completion when the length budget ran out
    BIND = "bind"  # a FROM item written for a select-list obligation (decode/bind.py)
    EOS = "eos"  # end of sequence, legal only at ACCEPT


class StopReason(enum.StrEnum):
    """Why a generation stopped. Every non-error stop leaves a complete statement."""

    EOS = "eos"  # the model chose EOS at an accepting configuration
    RESERVE = "reserve"  # budget reached: the reserve completion closed the statement
    STOP_AT_ACCEPT = "stop_at_accept"  # caller's stop condition met at ACCEPT (e.g. ';')
    TRUNCATED = "truncated"  # processor mode only: the caller's generate() hit its limit


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One decoding decision.

    ``config_hash`` is the configuration's rolling hash *before* the token; ``entry_ids``
    are the mask-cache entries consulted for this step's mask (CI root first, then the CD
    sub-walks in resolution order); ``mask_digest`` identifies the full mask bit for bit;
    ``allowed`` counts the legal ids (EOS included) and ``blocked`` = vocabulary size −
    ``allowed``. A ``CHECKED`` step filled no mask: no entry ids, an empty digest, and 0 for
    both counts.
    """

    step: int
    config_hash: int
    entry_ids: tuple[str, ...]
    mask_digest: str
    token: int
    allowed: int
    blocked: int
    kind: StepKind
