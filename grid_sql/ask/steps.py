"""The Asker's generation steps: generate (or fall back to the plain role grammar at a dead
end), find denied intents and foreign idioms in what the model was kept from writing, and seal
the audit records.

Split out of :mod:`grid_sql.ask.asker`, which keeps the public path (``generate_sql``, ``ask``,
``run_sql``) that calls these steps. Who generates is the Asker's ``generation`` strategy
(:mod:`grid_sql.ask.generation`: the local loop, or a server). They run as methods of the Asker
(``self`` is an ``Asker``); each annotates ``self`` so that every attribute it uses is
type-checked, and mypy refuses a self type narrower than the class (``[misc]``), hence the
ignore on each ``def``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import MaskError
from ..policy.checker import Violation
from .components import OnStep, role_grammar_for
from .generation import AskGeneration, GenerationMode, GenerationRequest
from .idioms import ForeignIdiom, foreign_idioms
from .intent import DeniedIntent, denied_intents, question_intents
from .prompt import (
    Message,
)
from .result import Repair

if TYPE_CHECKING:
    from .asker import Asker  # pragma: no cover - typing only


_LOG = logging.getLogger("grid_sql")


class GenerationSteps:
    """Generation and sealing steps of ``Asker`` (a mixin: no state of its own)."""

    # ------------------------------------------------------------------ internals
    def _denied_intents(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker, gen: AskGeneration, mode: GenerationMode, question: str
    ) -> list[DeniedIntent]:
        """The denied objects the question names, and the blocked favourites of ``gen`` that
        spell names the role may not use."""
        asked = question_intents(question, self.snapshot, mode.policy)
        if not gen.blocked or gen.guide is None:
            return asked
        v = gen.guide.vocab
        return asked + denied_intents(gen.token_ids, gen.blocked, v, self.snapshot, mode.policy)

    def _foreign_idioms(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker, gen: AskGeneration, mode: GenerationMode
    ) -> list[ForeignIdiom]:
        """The blocked favourites of ``gen`` that spell another dialect's construct."""
        if not gen.blocked or gen.guide is None:
            return []
        return foreign_idioms(
            gen.token_ids, gen.blocked, gen.guide.vocab, mode.grammar, self.dialect, self._names
        )

    def _generate_or_fall_back(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker,
        msgs: list[Message],
        max_tokens: int,
        mode: GenerationMode,
        on_step: OnStep | None,
        repairs: list[Repair],
        rnd: int,
        question: str = "",
    ) -> tuple[AskGeneration, GenerationMode]:
        """:meth:`_generate`, and once more on the *unscoped* role grammar if the scoped one
        reaches a dead end (issue #29, defence in depth: Propositions 8/9 say it cannot, and
        a broken precondition must cost the user nothing but show). The unscoped grammar is
        still exact for the role (verbs, tables, column lexicon); the checker covers columns
        as always. The incident is a ``dead_end`` repair entry, a ``dead-end-fallback`` flag
        in the retry's seal, and a warning in the log."""
        try:
            gen = self._generate(msgs, max_tokens, mode, on_step, question)
            if any(r.kind == "dead_end" for r in repairs):  # a repair round after the fallback
                gen.flags = ("dead-end-fallback",)
            return gen, mode
        except MaskError as exc:
            if mode.grammar.scopes is None:
                raise
            _LOG.warning(
                "grid-sql: dead end under the scoped role grammar (%s) after %r; "
                "retrying on the unscoped role grammar",
                exc,
                exc.partial,
            )
            repairs.append(Repair(exc.partial or "", [f"dead end: {exc}"], rnd, kind="dead_end"))
            plain = GenerationMode(
                mode.policy, role_grammar_for(self.snapshot, mode.policy), mode.checker
            )
            gen = self._generate(msgs, max_tokens, plain, on_step, question)
            gen.flags = ("dead-end-fallback",)
            return gen, plain

    def _generate(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker,
        msgs: list[Message],
        max_tokens: int,
        mode: GenerationMode,
        on_step: OnStep | None = None,
        question: str = "",
    ) -> AskGeneration:
        """One generation by the Asker's :attr:`generation` strategy."""
        request = GenerationRequest(
            msgs,
            max_tokens,
            mode,
            self.snapshot,
            records=self.audit is not None,
            on_step=on_step,
            question=question,
        )
        return self.generation.generate(request)

    def _seal(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker,
        gen: AskGeneration,
        question: str,
        mode: GenerationMode,
        *,
        flags: tuple[str, ...] = (),
        previous: str | None = None,
    ) -> str | None:
        """Seal one generation. With ``gen.fix`` the final SQL is the autofixed statement and
        the seal carries the generated SQL and the edits; the schema and policy are archived
        so ``audit verify`` re-derives the fix from them. How the tokens were produced is the
        strategy's (``seal_mode``, ``seal_flags``: a server's processor, a remote replay)."""
        fix = gen.fix
        strategy = self.generation
        store = self.audit
        if store is None or gen.guide is None:
            return None
        from ..audit.log import ArtifactRefs, AuditLog

        log = AuditLog()
        log.extend(gen.records)
        record = log.seal(
            stop_reason=gen.stop_reason,
            artifacts=ArtifactRefs(
                grammar=gen.guide.grammar.fingerprint,
                tokenizer=gen.guide.vocab.fingerprint,
                policy=mode.policy.fingerprint,
                schema=self.snapshot.fingerprint,
                model_id=gen.model_id or None,
            ),
            final_sql=fix.fixed if fix is not None and fix.fixed is not None else gen.sql,
            question=question,
            user=self.user,
            mode=strategy.seal_mode,
            flags=(*strategy.seal_flags, *flags),
            dialect=self.dialect,
            autofix=None
            if fix is None
            else {"generated_sql": gen.sql, "edits": [e.as_list() for e in fix.edits]},
            previous=previous,
        )
        if fix is None:
            return store.append(record, grammar=gen.guide.grammar, vocab=gen.guide.vocab)
        return store.append(
            record,
            grammar=gen.guide.grammar,
            vocab=gen.guide.vocab,
            schema=self.snapshot,
            policy=mode.policy,
        )

    def _seal_statement(  # type: ignore[misc]  # self: the Asker (module doc)
        self: Asker, sql: str, found: Sequence[Violation], allow_writes: bool
    ) -> str | None:
        """Seal a ``run_sql`` statement with the checker's verdict, before it runs (None:
        auditing is off); the policy and schema it was checked against are archived."""
        store = self.audit
        if store is None:
            return None
        from ..audit.statement import seal_run_sql

        return seal_run_sql(
            store,
            sql,
            violations=[v.message for v in found],
            policy=self._mode(allow_writes).policy,
            schema=self.snapshot,
            user=self.user,
            dialect=self.dialect,
            allow_writes=allow_writes,
        )
