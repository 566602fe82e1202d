"""pandas: ``grid_sql.read_sql_nl(question, con)`` returns a DataFrame with its provenance.

Run: ``python examples/pandas_read_sql.py`` (model from $GRID_SQL_MODEL).
"""

from __future__ import annotations

import os

import sqlalchemy as sa

import grid_sql
from grid_sql.data import chinook_url

MODEL = os.environ.get("GRID_SQL_MODEL", "qwen2.5-coder-0.5b")


def main() -> None:
    engine = sa.create_engine(chinook_url())
    df = grid_sql.read_sql_nl("Which albums does the artist AC/DC have?", engine, model=MODEL)
    print(df.head(10).to_string())
    print(f"\nSQL: {df.attrs['sql']}")
    print(f"audit id: {df.attrs['audit_id']}  truncated: {df.attrs['truncated']}")
    # the Asker is cached per engine: a second question reuses the loaded model and grammar
    df2 = grid_sql.read_sql_nl("How many customers are there?", engine, model=MODEL)
    print(df2.to_string(), df2.attrs["sql"], sep="\n")


if __name__ == "__main__":
    main()
