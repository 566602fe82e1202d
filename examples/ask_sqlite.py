"""Ask the packaged Chinook database questions with an Asker (the core API).

Run: ``python examples/ask_sqlite.py`` (model from $GRID_SQL_MODEL, default
qwen2.5-coder-0.5b; fetch it once with ``python -m grid_sql.decode.models fetch``).
"""

from __future__ import annotations

import os

from grid_sql.data import chinook_path
from grid_sql.errors import PolicyViolation
from grid_sql.front.ask import Asker

MODEL = os.environ.get("GRID_SQL_MODEL", "qwen2.5-coder-0.5b")

# The application policy only narrows what the database allows: here, read-only and no
# access to the Employee table (it holds personal data).
POLICY = {"verbs": ["select"], "tables": {"deny": ["Employee"]}}

QUESTIONS = [
    "How many albums are there?",
    "List the names of the first five artists.",
    "Which five customers spent the most? Show their names and total.",
]


def main() -> None:
    asker = Asker(chinook_path(), model=MODEL, policy=POLICY, row_limit=10)
    print(asker.explain_policy().splitlines()[-3])  # the statements the model can write
    for question in QUESTIONS:
        print(f"\nQ: {question}")
        try:
            result = asker.ask(question)
        except PolicyViolation as exc:
            # Column rights are checked after generation; a statement that still violates them
            # after one repair round is refused and never executed.
            print(f"refused: {exc.sql}\n  {exc.violations}")
            continue
        print(f"SQL: {result.sql}")
        print(f"columns: {result.columns}")
        for row in result.rows[:5]:
            print("  ", row)
        print(result.audit_summary())


if __name__ == "__main__":
    main()
