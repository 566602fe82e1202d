"""pandas: ``grid_sql.read_sql_nl(question, con)`` returns a DataFrame with its provenance.

Run: ``python examples/pandas_read_sql.py`` (model from $GRID_SQL_MODEL, see _setup.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from _setup import EXAMPLES, MODEL, POLICY, refused

import grid_sql
from grid_sql.data import chinook_url
from grid_sql.errors import GridSQLError


def main() -> None:
    engine = sa.create_engine(chinook_url())
    # the Asker is cached per engine: the second question reuses the loaded model and grammar
    for question in (
        "List the titles of the albums of the artist with id 1.",
        "How many artists are there?",
    ):
        print(f"\nQ: {question}")
        try:
            df = grid_sql.read_sql_nl(
                question, engine, model=MODEL, policy=POLICY, examples=EXAMPLES
            )
        except GridSQLError as exc:
            print(refused(exc))
            continue
        print(df.head(10).to_string())
        print(f"SQL: {df.attrs['sql']}")
        print(f"audit id: {df.attrs['audit_id']}  truncated: {df.attrs['truncated']}")


if __name__ == "__main__":
    main()
