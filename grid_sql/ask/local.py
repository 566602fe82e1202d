"""The local generation strategy: grid-sql's own decode loop on the Asker's model.

Every token is chosen under the role grammar's exact mask in this process, so the per-token
records come from the loop itself (seal mode ``loop``), the prompt is budgeted with the model's
own tokenizer and context, and a FROM clause the model would close too early is completed by
bind-on-close (``grid_sql.decode.bind``). Moved out of the Asker's ``_generate`` hook so that
a server-side generator (:mod:`grid_sql.serve.client`) is a sibling strategy, not a subclass
overriding it (:class:`~grid_sql.ask.generation.GenerationStrategy`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..decode.records import StopReason
from ..decode.serial import backend_lock
from ..errors import GridSQLError, ModelError
from ..mask.guide import Guide
from .budget import LINK_ABOVE, check_room, linker_for
from .components import guide_for
from .generation import AskGeneration, GenerationRequest, GenerationStrategy

if TYPE_CHECKING:
    from ..decode.backend import Backend
    from ..decode.bind import BindOnClose
    from .asker import Asker  # pragma: no cover - typing only

__all__ = ["LocalGeneration"]


class LocalGeneration(GenerationStrategy):
    """Generate with the decode loop on ``owner``'s backend (loaded on first use), one
    generation at a time per backend (a backend holds one KV cache, shared by every Asker
    on it). The owner's ``bind_on_close`` option says whether a FROM clause the model would
    close while the select list still names an unbound column is completed. The strategy
    shares the owner's lock and lazily loaded backend (same package, one Asker each)."""

    seal_mode = "loop"

    def __init__(self, owner: Asker) -> None:
        self.owner = owner
        self._binders: dict[tuple[str, str], BindOnClose] = {}

    def prompt_backend(self, *, load: bool) -> Backend | None:
        return self.owner.backend if load else self.owner._backend

    def forget(self) -> None:
        self._binders.clear()

    def generate(self, request: GenerationRequest) -> AskGeneration:
        from ..decode.loop import generate

        owner = self.owner
        with owner._lock, backend_lock(owner.backend):
            backend = owner.backend
            guide = guide_for(request.mode.grammar, backend)
            prompt_ids = backend.chat_prompt(request.messages)
            check_room(backend, len(prompt_ids), request.max_tokens)
            t0 = time.perf_counter()
            binder = self._binder(guide, request) if owner.bind_on_close else None
            try:
                out = generate(
                    backend,
                    guide,
                    prompt_ids,
                    max_tokens=request.max_tokens,
                    on_step=request.on_step,
                    bind=binder,
                    check_first=not owner.every_mask,
                )
            except GridSQLError:
                raise
            except (RuntimeError, ValueError, OSError) as exc:
                # the model library failed mid-generation; nothing was produced or run
                raise ModelError(f"generation failed in {backend!r}: {exc}") from exc
            seconds = time.perf_counter() - t0
        g = AskGeneration(
            sql=out.sql,
            stop_reason=StopReason(out.stop_reason).value,
            records=list(out.records),
            seconds=seconds,
            mask_seconds=out.mask_seconds,
            n_tokens=out.n_tokens,
            guide=guide,
            model_id=backend.model_id,
        )
        g.blocked, g.token_ids = list(out.blocked), list(out.token_ids)
        return g

    def _binder(self, guide: Guide, request: GenerationRequest) -> BindOnClose | None:
        """The bind-on-close policy of ``guide``, with the snapshot's foreign keys (None:
        its grammar has no select-list obligations, e.g. ``scopes=False``)."""
        from ..decode.bind import BindOnClose, snapshot_links

        scopes = guide.grammar.scopes
        if scopes is None or not scopes.bind_select_list:
            return None
        key = (guide.grammar.fingerprint, guide.vocab.fingerprint)
        b = self._binders.get(key)
        if b is None:
            links = snapshot_links(request.snapshot)
            b = self._binders[key] = BindOnClose(guide, links)
        linker = linker_for(request.snapshot, request.mode.policy)
        if request.question and len(linker.tables) > LINK_ABOVE:
            # a catalog the prompt cannot show whole: candidates in the order the prompt's
            # own linker ranks them for the question (smaller ones keep the name order
            # every measurement of bind on close used)
            b = b.ranked((t.schema, t.name) for t in linker.rank(request.question))
        return b
