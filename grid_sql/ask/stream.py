"""Streaming: an answer as a sequence of events, the SQL visible while it is generated.

``for ev in asker.stream(question)``: ``ev.kind`` is

* ``"token"``: one decoding step; ``ev.text`` is its decoded text (an incremental UTF-8
  decoder per generation, so a character split across tokens appears once it is complete and
  the texts of a generation concatenate to exactly its generated text);
* ``"repair"``: a new generation round starts (the checker or the database refused the
  previous one; ``ev.text`` is the refused statement) or, ``ev.repair`` set, the checker's
  deterministic fixes rewrote the statement (kind ``"autofix"``); the full history is on
  the result's ``repairs``;
* ``"sql"``: the statement that will run (``ev.text``), before it runs;
* ``"result"``: ``ev.result``, the :class:`AskResult`; the last event;
* ``"error"``: ``ev.error``, the typed error the same :meth:`Asker.ask` would have raised;
  the last event (a stream reports, it does not raise).

Why a worker thread and a queue: generation is one blocking call into the decode loop
(:func:`grid_sql.decode.loop.generate`), which reports each step through its ``on_step``
hook; the thread runs the ordinary ``ask`` with that hook, so streaming adds no second code
path to generation, checking, repair, audit or execution. Closing the iterator early (``break``
out of the loop) cancels the generation at its next step: nothing further is generated,
sealed or executed.
"""

from __future__ import annotations

import codecs
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..decode.records import StepKind, StepRecord
from ..errors import GridSQLError, OptionError
from .result import AskResult, GeneratedSQL, Repair

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .asker import Asker

EventKind = Literal["token", "repair", "sql", "result", "error"]


@dataclass(frozen=True)
class StreamEvent:
    """One event of :meth:`Asker.stream` (see the module docstring for each ``kind``)."""

    kind: EventKind
    text: str = ""
    round: int = 0
    step: StepRecord | None = None
    repair: Repair | None = None
    result: AskResult | None = None
    error: GridSQLError | None = None


class _Cancelled(BaseException):
    """Raised inside the decode loop's hook when the consumer closed the stream.

    A BaseException so no ``except Exception`` on the way (the model-error wrapping in the
    Asker) turns it into a ModelError; nothing is sealed or executed after it."""


_DONE = object()


class _State:
    """Where the stream is: the generation round, and that round's text so far."""

    def __init__(self) -> None:
        self.round = 0
        self.started = False
        self.text = ""


def stream_ask(asker: Asker, run: Callable[..., AskResult]) -> Iterator[StreamEvent]:
    """Events of ``run(on_step=..., on_sql=...)`` (an ``Asker.ask`` call with those hooks)."""
    try:
        vocab = asker.backend.vocab  # load the model here: a failure is the first event
    except GridSQLError as exc:
        return iter([StreamEvent("error", error=exc)])
    return _events(vocab.token_bytes, run)


def _events(token_bytes: Any, run: Callable[..., AskResult]) -> Iterator[StreamEvent]:
    events: queue.Queue[Any] = queue.Queue()
    cancelled = threading.Event()
    state = _State()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def on_step(rec: StepRecord) -> None:
        if cancelled.is_set():
            raise _Cancelled
        if rec.step == 0 and state.started:  # a new generation: the last one was refused
            state.round += 1
            events.put(StreamEvent("repair", text=state.text.strip(), round=state.round))
            decoder.reset()
            state.text = ""
        state.started = True
        if rec.kind == StepKind.EOS:  # not part of the text; flush a dangling partial char
            text = decoder.decode(b"", final=True)
            decoder.reset()
        else:
            text = decoder.decode(bytes(token_bytes[rec.token]))
        state.text += text
        events.put(StreamEvent("token", text=text, round=state.round, step=rec))

    def on_sql(gen: GeneratedSQL) -> None:
        for rep in gen.repairs:
            if rep.kind == "autofix" and rep.round == state.round:
                events.put(StreamEvent("repair", text=rep.sql, round=rep.round, repair=rep))
        events.put(StreamEvent("sql", text=gen.sql, round=state.round))

    def work() -> None:
        try:
            res = run(on_step=on_step, on_sql=on_sql)
            events.put(StreamEvent("result", text=res.sql, result=res))
        except _Cancelled:
            pass
        except GridSQLError as exc:
            events.put(StreamEvent("error", error=exc))
        except BaseException as exc:  # pragma: no cover - a defect: re-raised in the consumer
            events.put(exc)
        finally:
            events.put(_DONE)

    worker = threading.Thread(target=work, name="grid-sql-stream", daemon=True)
    worker.start()
    try:
        while True:
            ev = events.get()
            if ev is _DONE:
                break
            if isinstance(ev, BaseException):
                raise ev
            yield ev
    finally:
        cancelled.set()  # a consumer that stopped early stops the generation too


def check_no_hooks(options: dict[str, Any]) -> None:
    """Streams set ``on_step``/``on_sql`` themselves."""
    for k in ("on_step", "on_sql"):
        if k in options:
            raise OptionError(f"{k} is set by the stream; read the events instead")
