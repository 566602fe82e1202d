"""The Asker's conversational surface: follow-ups, streaming and async.

Kept out of :mod:`grid_sql.ask.asker` (a mixin the :class:`~grid_sql.ask.asker.Asker`
inherits) so that module stays about one question's path; each method here is a thin entry
into :mod:`grid_sql.ask.conversation`, :mod:`grid_sql.ask.stream` or
:mod:`grid_sql.ask.aio`, all of which drive the ordinary :meth:`Asker.ask`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from .conversation import DEFAULT_MAX_CHARS, DEFAULT_MAX_TURNS, Conversation

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .asker import Asker
    from .result import AskResult
    from .stream import StreamEvent


class InteractiveMixin:
    """``conversation()``, ``stream()`` and ``ask_async()`` of :class:`Asker`."""

    def conversation(
        self, *, max_turns: int = DEFAULT_MAX_TURNS, max_chars: int = DEFAULT_MAX_CHARS
    ) -> Conversation:
        """A new thread of questions: each follow-up is generated with the previous turns'
        questions, SQL and result column names (never their rows) within a window of
        ``max_turns`` turns and ``max_chars`` characters, and each turn's audit record names
        the previous turn's (``grid_sql.ask.conversation``)."""
        return Conversation(_asker(self), max_turns=max_turns, max_chars=max_chars)

    def stream(self, question: str, **options: Any) -> Iterator[StreamEvent]:
        """:meth:`ask` as events (``token``, ``repair``, ``sql``, ``result``, ``error``;
        ``grid_sql.ask.stream``). Options as :meth:`ask`, except ``on_step``."""
        from .stream import check_no_hooks, stream_ask

        check_no_hooks(options)
        asker = _asker(self)
        return stream_ask(asker, lambda **hooks: asker.ask(question, **options, **hooks))

    async def ask_async(self, question: str, **options: Any) -> AskResult:
        """:meth:`ask` off the event loop (``grid_sql.ask.aio``): concurrent calls share
        the model backend one generation at a time while the loop stays responsive."""
        from .aio import run_off_loop

        asker = _asker(self)
        return await run_off_loop(lambda: asker.ask(question, **options))


def _asker(obj: InteractiveMixin) -> Asker:
    """The mixin's instance as the Asker it always is (the mixin has no other host)."""
    return cast("Asker", obj)
