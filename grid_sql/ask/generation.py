"""What the Asker generates under and what one generation hands back to it.

Split out of :mod:`grid_sql.ask.asker` (plain data, no behaviour): ``GenerationMode`` is the
policy, grammar and checker of generation with or without writes; ``AskGeneration`` one
generation as the Asker needs it, decoupled from the decode loop's own type. Both are public
because a generator that runs elsewhere (``grid_sql.serve.client.RemoteAsker``) produces and
consumes them; they were ``_Mode``/``_Gen``, which the remote path had to import as privates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..grammar import Grammar
from ..mask.guide import Guide
from ..policy.autofix import AutofixResult
from ..policy.checker import Checker
from ..policy.model import Policy

__all__ = ["AskGeneration", "GenerationMode"]


@dataclass(frozen=True)
class GenerationMode:
    """What generation runs under: the policy it was compiled from, its grammar, its checker."""

    policy: Policy
    grammar: Grammar
    checker: Checker


class AskGeneration:
    """One generation as the Asker needs it (decoupled from the decode loop's own type)."""

    __slots__ = (
        "sql",
        "stop_reason",
        "records",
        "seconds",
        "mask_seconds",
        "n_tokens",
        "guide",
        "model_id",
        "fix",
        "flags",
        "blocked",
        "token_ids",
    )

    def __init__(
        self,
        *,
        sql: str,
        stop_reason: str,
        records: list[Any],
        seconds: float,
        mask_seconds: float,
        n_tokens: int,
        guide: Guide,
        model_id: str,
    ) -> None:
        self.sql = sql
        self.stop_reason = stop_reason
        self.records = records
        self.seconds = seconds
        self.mask_seconds = mask_seconds
        self.n_tokens = n_tokens
        self.guide = guide
        self.model_id = model_id
        self.fix: AutofixResult | None = None  # set when autofix resolved the checker's verdict
        self.flags: tuple[str, ...] = ()  # seal flags (``dead-end-fallback``)
        self.blocked: list[Any] = []  # BlockedIntent per step (GRID-owned loop only)
        self.token_ids: list[int] = []
