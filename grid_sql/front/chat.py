"""``grid-sql chat``: a conversation at a prompt, and the write confirmation both commands use.

    grid-sql chat --db URL [--model M] [--policy FILE] [--allow-writes] [--yes] ...

Each line is the next turn of one :class:`~grid_sql.ask.conversation.Conversation`
(follow-ups see the earlier questions and SQL); ``\\reset`` starts a new thread, ``\\q``,
``exit``, ``quit`` or end of input ends it. On a terminal the prompt has line editing and
history (``readline``) and the SQL is printed as it is generated (:meth:`Asker.stream`);
piped input is read line by line and answered without the live echo, so scripts and tests
drive it the same way.

Writes (``--allow-writes``): the statement is first run as a preview (``dry_run=True``:
rolled back, the rows it would change counted and sampled); then, on a terminal, the user
confirms before it runs for real. ``--yes`` confirms without asking; without a terminal and
without ``--yes`` a write is only previewed, never run: a script must say so explicitly.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import GridSQLError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..ask.asker import Asker
    from ..ask.conversation import Conversation
    from ..ask.result import AskResult
    from ..ask.stream import StreamEvent

PROMPT = "grid-sql> "
QUIT = {"\\q", "exit", "quit"}


def print_preview(res: AskResult, out: TextIO) -> None:
    """What a previewed write would change: the count and the sampled rows before it."""
    from .console import format_table

    p = res.preview
    if p is None:
        return
    print(
        f"preview: {p.verb.upper()} would change {p.rowcount} row(s); nothing changed yet", file=out
    )
    if p.sampled and p.rows:
        print(f"rows before the change (first {len(p.rows)}):", file=out)
        print(format_table(p.columns, p.rows), file=out)


def confirm(question: str, *, yes: bool, stdin: TextIO, out: TextIO) -> bool:
    """True when the write may run: ``--yes``, or a "y" typed on a terminal."""
    if yes:
        return True
    if not stdin.isatty():
        print("not run: confirm writes on a terminal, or pass --yes", file=out)
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def commit_previewed(asker: Asker, res: AskResult, row_limit: int, timeout_s: float) -> AskResult:
    """Run a previewed statement for real, as it was previewed (no new generation); its
    outcome is chained to the same audit record, after the preview's."""
    from dataclasses import replace

    run = asker._execute(res.sql, True, row_limit, timeout_s, res.audit_id, False)
    timings = dict(res.timings)
    timings["execution"] = timings.get("execution", 0.0) + run.seconds
    return replace(
        res,
        columns=run.columns,
        rows=run.rows,
        truncated=run.truncated,
        rowcount=run.rowcount,
        timings=timings,
        preview=None,
    )


def answer(
    conv: Conversation,
    question: str,
    a: argparse.Namespace,
    *,
    stdin: TextIO,
    out: TextIO,
    live: bool,
) -> AskResult:
    """One turn: generated (echoed live on a terminal), previewed if it writes, confirmed,
    run. Raises the typed error of a failed turn."""
    opts: dict[str, Any] = {"dry_run": True} if a.allow_writes else {}
    if live:
        res = echo_stream(conv.stream(question, **opts), out)
    else:
        res = conv.ask(question, **opts)
    if res.preview is None:
        return res
    if not live:
        print(f"SQL: {res.sql}", file=out)
    print_preview(res, out)
    if getattr(a, "dry_run", False) or not confirm("Run it?", yes=a.yes, stdin=stdin, out=out):
        return res
    done = commit_previewed(conv.asker, res, a.max_rows, a.timeout)
    conv.amend_last(done)  # the history keeps what really ran
    return done


def echo_stream(events: Iterator[StreamEvent], out: TextIO) -> AskResult:
    """The result of a stream (:meth:`Asker.stream`), its tokens printed as they arrive;
    raises the stream's error."""
    print("SQL: ", end="", file=out, flush=True)
    for ev in events:
        if ev.kind == "token":
            print(ev.text, end="", file=out, flush=True)
        elif ev.kind == "repair" and ev.repair is None:
            print("\n  (refused; repairing) SQL: ", end="", file=out, flush=True)
        elif ev.kind == "error":
            print(file=out)
            assert ev.error is not None
            raise ev.error
        elif ev.kind == "result":
            print(file=out)
            assert ev.result is not None
            return ev.result
    raise GridSQLError("the stream ended without a result")  # pragma: no cover - defect


def chat_main(a: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """The ``chat`` command (see the module docstring). Exit status 0, or 1 when the
    database or model could not be opened."""
    from ..ask.asker import Asker
    from .console import EXIT_ERROR, error_payload, print_result

    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    try:
        asker = Asker(
            a.db,
            model=a.model,
            policy=a.policy,
            audit=False if a.no_audit else a.audit,
            allow_writes=a.allow_writes,
            row_limit=a.max_rows,
            timeout_s=a.timeout,
            max_tokens=a.max_tokens,
        )
        _ = asker.backend
    except GridSQLError as exc:
        print(f"error ({type(exc).__name__}): {exc}", file=sys.stderr)
        return EXIT_ERROR
    tty = stdin.isatty()
    if tty:
        try:
            import readline  # noqa: F401 - line editing and history for input()
        except ImportError:  # pragma: no cover - platforms without readline
            pass
    conv = asker.conversation()
    live = tty and out.isatty()
    while True:
        try:
            line = input(PROMPT) if tty else stdin.readline()
        except EOFError:
            break
        if not line:
            break
        q = line.strip()
        if not q:
            continue
        if q in QUIT:
            break
        if q == "\\reset":
            conv.reset()
            print("(new conversation)", file=out)
            continue
        try:
            res = answer(conv, q, a, stdin=stdin, out=out, live=live)
        except GridSQLError as exc:
            if a.json:
                print(json.dumps(error_payload(exc, q)), file=out)
            else:
                print(f"error ({type(exc).__name__}): {exc}", file=out)
            continue
        if a.json:
            print(json.dumps(res.to_dict()), file=out)
        else:
            print_result(res, out)
    return 0
