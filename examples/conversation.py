"""A conversation: a question, then follow-ups that build on it; the last one streamed; the
first answer drawn as a chart.

Run: ``python examples/conversation.py`` (model from $GRID_SQL_MODEL, see _setup.py). The
chart (``AskResult.plot``, needs the ``[charts]`` extra) is saved as ``albums_per_artist.png``
in the current directory, or the reason there is none is printed.
Each follow-up is generated with the earlier questions and SQL (never their rows), and each
turn's audit record names the previous turn's (``previous``), so an auditor can follow the
thread with ``grid-sql audit show``.
"""

from __future__ import annotations

import sys

from _setup import EXAMPLES, MODEL, POLICY, refused

from grid_sql.ask.asker import Asker
from grid_sql.ask.result import AskResult
from grid_sql.data import chinook_path
from grid_sql.errors import GridSQLError, NoChartError

TURNS = [
    "How many albums does each artist have?",
    "Only for the artist named AC/DC.",
]
STREAMED = "List their titles."


def main() -> None:
    asker = Asker(chinook_path(), model=MODEL, policy=POLICY, examples=EXAMPLES, row_limit=5)
    conv = asker.conversation()
    answers = []
    for question in TURNS:
        print(f"\nQ: {question}")
        try:
            result = conv.ask(question)
        except GridSQLError as exc:
            print(refused(exc))
            continue
        print(f"SQL: {result.sql}")
        for row in result.rows:
            print("  ", row)
        print(result.audit_summary())
        answers.append(result)
    if answers:
        chart(answers[0])
    print(f"\nQ: {STREAMED}")
    started = False
    for event in conv.stream(STREAMED):
        if event.kind == "token":
            if not started:
                print("SQL: ", end="")  # the statement as it is generated
                started = True
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif event.kind == "repair" and event.repair is None:
            print("\n  (refused; the repair round writes) ", end="")
        elif event.kind == "error" and event.error is not None:
            if started:
                print(f"\n  not run: {type(event.error).__name__}")
            else:
                print(refused(event.error))
        elif event.kind == "result" and event.result is not None:
            print(f"\nrows: {event.result.rows}")
            print(event.result.audit_summary())
    print(f"\n{len(conv.history)} answered turn(s) in the thread:")
    for turn in conv.history:
        print(f"  {turn.audit_id and turn.audit_id[:12]}  {turn.question!r} -> {turn.sql}")


def chart(result: AskResult) -> None:
    """The chart that suits the answer (bar: category × number; line: time × number)."""
    try:
        spec = result.chart()
        result.plot().savefig("albums_per_artist.png")  # a headless matplotlib Figure
    except NoChartError as exc:
        print(f"  {exc}")
        return
    print(f"  {spec.kind} chart of {', '.join(result.columns[i] for i in spec.y)} by "
          f"{result.columns[spec.x]}: albums_per_artist.png")  # fmt: skip


if __name__ == "__main__":
    main()
