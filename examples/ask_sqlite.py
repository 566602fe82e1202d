"""Ask the packaged Chinook database questions with an Asker (the core API).

Run: ``python examples/ask_sqlite.py`` (model from $GRID_SQL_MODEL, see _setup.py).
"""

from __future__ import annotations

from _setup import EXAMPLES, MODEL, POLICY, refused

from grid_sql.ask.asker import Asker
from grid_sql.data import chinook_path
from grid_sql.errors import GridSQLError

QUESTIONS = [
    "How many albums are there?",
    "List the names of the first five artists.",
    "List the names of all media types.",
]


def main() -> None:
    asker = Asker(chinook_path(), model=MODEL, policy=POLICY, examples=EXAMPLES, row_limit=10)
    print(asker.explain_policy())
    for question in QUESTIONS:
        print(f"\nQ: {question}")
        try:
            result = asker.ask(question)
        except GridSQLError as exc:
            # e.g. PolicyViolation: column rights are checked after generation; a statement
            # that still violates them after one repair round is refused, never executed
            print(refused(exc))
            continue
        print(f"SQL: {result.sql}")
        print(f"columns: {result.columns}")
        for row in result.rows[:5]:
            print("  ", row)
        print(result.audit_summary())


if __name__ == "__main__":
    main()
