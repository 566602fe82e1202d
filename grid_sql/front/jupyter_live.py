"""The notebook's live output: the SQL shown while it is generated, then replaced by the answer.

Why a display handle and not printing: a notebook front end redraws an updated display in
place (``update_display_data``), so one output area can show the statement growing token by
token (the stream's ``token`` events, :mod:`grid_sql.ask.stream`) and a repair round
starting over, without a scroll of partial lines. Updates are throttled to
:data:`MIN_INTERVAL_S` (a front end need not redraw 30 times a second); the last text is
always shown. When the answer arrives the live area is emptied: the returned
:class:`AskResult` renders the final SQL with its table. Imports IPython (only the magics
call it).
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING, Any

from IPython.display import HTML, Image, display

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..ask.conversation import Conversation
    from ..ask.result import AskResult

MIN_INTERVAL_S = 0.1


def _view(text: str, round_: int, done: bool) -> HTML:
    note = f" (repair round {round_})" if round_ else ""
    state = "checked, running" if done else "generating"
    return HTML(
        '<div class="grid-sql-live">'
        f"<small>{state}{note}…</small><pre><code>{html.escape(text)}</code></pre></div>"
    )


def answer_live(conv: Conversation, question: str, **options: Any) -> AskResult:
    """``conv.ask(question)`` through its stream, with a display updated as tokens arrive.

    Raises the error the plain :meth:`Conversation.ask` would have raised."""
    handle = display(_view("", 0, False), display_id=True)
    text, round_, last = "", 0, 0.0
    result: AskResult | None = None
    try:
        for ev in conv.stream(question, **options):
            if ev.kind == "token":
                text += ev.text
                now = time.monotonic()
                if now - last >= MIN_INTERVAL_S:
                    handle.update(_view(text, round_, False))
                    last = now
            elif ev.kind == "repair" and ev.repair is None:  # a new generation round
                text, round_ = "", ev.round
                handle.update(_view(text, round_, False))
            elif ev.kind == "sql":
                handle.update(_view(ev.text, round_, True))
            elif ev.kind == "error" and ev.error is not None:
                raise ev.error
            elif ev.kind == "result":
                result = ev.result
    finally:
        handle.update(HTML(""))  # the answer (or the error) replaces the live view
    if result is None:  # pragma: no cover - a stream ends with a result or an error event
        raise RuntimeError("the stream ended without a result")
    return result


def show_chart(result: AskResult) -> None:
    """Display the result's chart as a PNG, or print why there is none (``%%ask --plot --df``,
    where the returned DataFrame has no chart of its own)."""
    from ..errors import NoChartError

    try:
        display(Image(data=result.plot_png(), format="png"))
    except NoChartError as exc:
        print(exc)
