"""A conversation: a question, then follow-ups that build on it; the last one streamed.

Run: ``python examples/conversation.py`` (model from $GRID_SQL_MODEL, see _setup.py).
Each follow-up is generated with the earlier questions and SQL (never their rows), and each
turn's audit record names the previous turn's (``previous``), so an auditor can follow the
thread with ``grid-sql audit show``.
"""

from __future__ import annotations

import sys

from _setup import EXAMPLES, MODEL, POLICY, refused

from grid_sql.ask.asker import Asker
from grid_sql.data import chinook_path
from grid_sql.errors import GridSQLError

TURNS = [
    "How many albums does each artist have?",
    "Only for the artist named AC/DC.",
]
STREAMED = "List their titles."


def main() -> None:
    asker = Asker(chinook_path(), model=MODEL, policy=POLICY, examples=EXAMPLES, row_limit=5)
    conv = asker.conversation()
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


if __name__ == "__main__":
    main()
