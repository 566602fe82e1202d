"""Conversations: follow-up questions answered in the context of the previous turns.

``conv = asker.conversation()``; ``conv.ask("How many customers per country?")`` then
``conv.ask("only those in Brazil")``: the second generation sees the first turn's question
and SQL, so "those" has a referent. What the model is shown of earlier turns, and why:

* each turn's **question and the SQL that answered it**, as a user / assistant exchange
  before the new question: the model continues a thread it can read, and its own SQL is the
  most precise statement of what "those" or "that" referred to;
* the **result's column names** (a note before the next question): what the follow-up can
  refer to ("sort them by the count");
* **never the result rows**: row values are data written by whoever can write the database,
  and data in a prompt is a prompt-injection channel (the same reason ``example_values`` is
  opt-in, :mod:`grid_sql.ask.prompt`). The grammar and checker would still bound what can
  be written, but a prompt is no place for third-party text.

The window is bounded (``max_turns`` and ``max_chars`` of history text; the oldest turns are
dropped first), so a long session neither outgrows the model's context nor slows every
prefill; with a prompt budget the thread is counted first and the schema fitted around it
(a thread over half the prompt loses its oldest turns). The schema shown is ranked against
the whole window's questions, so the tables the thread is about stay described in full on a
large schema.

Audit: each turn's generations are sealed with ``previous`` = the audit id of the previous
answered turn (:meth:`grid_sql.audit.log.AuditLog.seal`), so an auditor can walk the thread
back from any answer (``grid-sql audit show`` prints it as ``follows``). The masks never
depend on the prompt, so replay is unchanged. Only answered turns enter the history: a
refused question produced no SQL to build on (its records are still sealed, with the same
``previous``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import OptionError
from .prompt import Example, Message, build_messages
from .result import AskResult

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .asker import Asker
    from .budget import PromptBudget
    from .stream import StreamEvent

DEFAULT_MAX_TURNS = 6
DEFAULT_MAX_CHARS = 3000


@dataclass(frozen=True)
class Turn:
    """One answered turn: the question, the SQL that ran, its column names and audit id.

    ``result`` is the full :class:`AskResult` for the caller; the prompt of later turns uses
    ``question``, ``sql`` and ``columns`` only (never the rows)."""

    question: str
    sql: str
    columns: tuple[str, ...]
    audit_id: str | None
    result: AskResult = field(repr=False, compare=False)

    def prompt_chars(self) -> int:
        """What this turn costs of the window's character budget."""
        return len(self.question) + len(self.sql) + sum(len(c) + 2 for c in self.columns)


def _columns_note(turn: Turn) -> str:
    if not turn.columns:
        return ""
    return f"(That statement returned the columns: {', '.join(turn.columns)}.)\n"


@dataclass(frozen=True)
class TurnContext:
    """What :meth:`Asker.generate_sql` needs for a follow-up: the window of earlier turns
    (oldest first) and the audit id the new turn's records name as ``previous``."""

    window: tuple[Turn, ...]
    previous: str | None

    def messages(
        self,
        asker: Asker,
        question: str,
        examples: Sequence[Example] | None,
        writes: bool,
        budget: PromptBudget | None = None,
    ) -> list[Message]:
        """The follow-up prompt: system rules and schema (ranked against every question in
        the window), few-shot pairs, the window as user/assistant exchanges, then the
        question with the previous turn's column names before it."""
        ex = asker.examples if examples is None else tuple(examples)
        policy = asker._mode(writes).policy
        window = list(self.window)
        thread = _thread(window, question)
        if budget is not None:
            # The thread is counted before the schema is fitted (the schema shrinks to leave
            # it room, so the whole prompt still fits the context); a thread that would take
            # more than half the prompt loses its oldest turns first.
            while window and budget.count_messages(thread) > budget.first // 2:
                window.pop(0)
                thread = _thread(window, question)
            if window:  # (a chat template may refuse an empty conversation)
                budget = replace(budget, first=budget.first - budget.count_messages(thread[:-1]))
        rank = " ".join([*(t.question for t in window), question])
        msgs = build_messages(
            rank,
            asker.snapshot,
            policy,
            examples=ex,
            values=asker._column_values(),
            budget=budget,
            date_help=asker.date_help,
        )
        tail = msgs.pop()  # the question, spelled for ranking; rebuilt below
        assert tail["role"] == "user"
        return msgs + thread


def _thread(window: Sequence[Turn], question: str) -> list[Message]:
    """The earlier turns as user/assistant exchanges, then the new question, each question
    with the previous turn's column names before it."""
    out: list[Message] = []
    note = ""
    for turn in window:
        out.append({"role": "user", "content": f"{note}Question: {turn.question}"})
        out.append({"role": "assistant", "content": turn.sql})
        note = _columns_note(turn)
    out.append({"role": "user", "content": f"{note}Question: {question}"})
    return out


class Conversation:
    """A thread of questions on one :class:`Asker` (see the module docstring).

    Not thread-safe as a thread: turns are ordered, so ask them one after another (the
    Asker itself may serve many conversations concurrently).
    """

    def __init__(
        self,
        asker: Asker,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        if max_turns < 0:
            raise OptionError("max_turns must be >= 0")
        if max_chars < 0:
            raise OptionError("max_chars must be >= 0")
        self.asker = asker
        self.max_turns = max_turns
        self.max_chars = max_chars
        self._turns: list[Turn] = []

    @property
    def history(self) -> tuple[Turn, ...]:
        """Every answered turn, oldest first (the prompt uses only :meth:`window`)."""
        return tuple(self._turns)

    def window(self) -> tuple[Turn, ...]:
        """The turns the next prompt shows: the newest ones within ``max_turns`` and
        ``max_chars``, oldest dropped first, in order."""
        out: list[Turn] = []
        used = 0
        for turn in reversed(self._turns):
            cost = turn.prompt_chars()
            if len(out) >= self.max_turns or used + cost > self.max_chars:
                break
            out.append(turn)
            used += cost
        return tuple(reversed(out))

    def context(self) -> TurnContext:
        """The context of the next turn (its window and the audit id it follows)."""
        last = self._turns[-1].audit_id if self._turns else None
        return TurnContext(self.window(), last)

    def record(self, result: AskResult) -> Turn:
        """Add an answered turn to the history (what :meth:`ask` does with its result)."""
        turn = Turn(result.question, result.sql, tuple(result.columns), result.audit_id, result)
        self._turns.append(turn)
        return turn

    def amend_last(self, result: AskResult) -> Turn:
        """Replace the newest turn's result (a previewed write that then ran for real)."""
        if not self._turns:
            raise OptionError("the conversation has no turn to amend")
        self._turns.pop()
        return self.record(result)

    def ask(self, question: str, **options: Any) -> AskResult:
        """Answer ``question`` as the next turn (options as :meth:`Asker.ask`); the turn
        enters the history when it was answered (a raised error leaves it unchanged)."""
        if "context" in options:
            raise OptionError("context is set by the conversation")
        res = self.asker.ask(question, context=self.context(), **options)
        self.record(res)
        return res

    async def ask_async(self, question: str, **options: Any) -> AskResult:
        """:meth:`ask` with generation and execution off the event loop (see
        :meth:`Asker.ask_async`)."""
        from .aio import run_off_loop

        return await run_off_loop(lambda: self.ask(question, **options))

    def stream(self, question: str, **options: Any) -> Iterator[StreamEvent]:
        """:meth:`ask` as a stream of events (see :meth:`Asker.stream`); the turn enters
        the history when its ``result`` event is produced."""
        from .stream import check_no_hooks, stream_ask

        check_no_hooks(options)
        if "context" in options:
            raise OptionError("context is set by the conversation")
        ctx = self.context()

        def run(**hooks: Any) -> AskResult:
            res = self.asker.ask(question, context=ctx, **options, **hooks)
            self.record(res)
            return res

        return stream_ask(self.asker, run)

    def reset(self) -> None:
        """Forget every turn (the next question starts a new thread)."""
        self._turns.clear()

    def __len__(self) -> int:
        return len(self._turns)
