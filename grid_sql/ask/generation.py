"""What the Asker generates under, how it gets a statement generated, and what one
generation hands back to it.

Split out of :mod:`grid_sql.ask.asker`: ``GenerationMode`` is the policy, grammar and checker
of generation with or without writes; ``AskGeneration`` one generation as the Asker needs it,
decoupled from the decode loop's own type; ``GenerationStrategy`` who generates it.

Why a strategy: the Asker's pipeline (prompt, post-parse check, autofix, repair round, audit
seal, safe execution) is the same whether the model runs in this process
(:class:`grid_sql.ask.local.LocalGeneration`, the decode loop) or behind a server
(:class:`grid_sql.serve.client.ServerGeneration`). The remote path used to subclass the Asker
and override its private ``_generate``/``_seal`` hooks, so every change to them was a silent
change to it; now it hands the Asker an object with this small public interface.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..grammar import Grammar
from ..mask.guide import Guide
from ..policy.autofix import AutofixResult
from ..policy.checker import Checker
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot

if TYPE_CHECKING:
    from ..decode.backend import Backend
    from .components import OnStep
    from .prompt import Message

__all__ = ["AskGeneration", "GenerationMode", "GenerationRequest", "GenerationStrategy"]


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


@dataclass(frozen=True)
class GenerationRequest:
    """One generation the Asker asks for: the chat ``messages``, at most ``max_tokens``, under
    ``mode`` (whose grammar bounds what may be written), for the role's ``snapshot``.
    ``records``: the Asker seals audit records, so per-token records are wanted (a remote
    strategy replays the server's tokens for them). ``on_step``: called with each step
    record as it is emitted, where the strategy has them as they happen. ``question``: the
    question the messages ask (empty where unknown)."""

    messages: list[Message]
    max_tokens: int
    mode: GenerationMode
    snapshot: SchemaSnapshot
    records: bool = True
    on_step: OnStep | None = None
    question: str = ""  # the user's question (the local strategy ranks FROM items by it)


class GenerationStrategy(abc.ABC):
    """Who generates the Asker's statements (the local decode loop, a server, ...).

    :meth:`generate` returns an :class:`AskGeneration` whose ``sql`` is a statement of the
    request's grammar, or raises a typed error (:class:`~grid_sql.errors.MaskError` at a dead
    end makes the Asker retry on the unscoped role grammar). The Asker checks, repairs, seals
    and runs it; :attr:`seal_mode` and :attr:`seal_flags` say in the seal how the tokens
    were produced."""

    seal_mode: str = "loop"
    """The audit record's ``mode``: ``loop`` (grid-sql's own loop chose every token under the
    mask) or ``processor`` (a logits processor masked on a server: EOS only at ACCEPT)."""

    @property
    def seal_flags(self) -> tuple[str, ...]:
        """Flags every seal of this strategy's generations carries (before the round's)."""
        return ()

    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> AskGeneration:
        """One statement for ``request``."""

    def prompt_backend(self, *, load: bool) -> Backend | None:
        """The local backend whose tokenizer and context the prompt must fit (``load``: load
        it if it is not loaded yet); None: the prompt is bounded by bytes under ``n_ctx``."""
        return None

    def forget(self) -> None:
        """The role's rights or the schema changed (``grid_sql.ask.live``): drop anything
        derived from the old grammars. Nothing by default."""
        return None
