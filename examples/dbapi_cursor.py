"""DB-API (PEP 249): ``grid_sql.connect`` wraps a driver connection; cursors gain nl_execute.

Run: ``python examples/dbapi_cursor.py`` (model from $GRID_SQL_MODEL).
"""

from __future__ import annotations

import os
import sqlite3

import grid_sql
from grid_sql.data import chinook_path

MODEL = os.environ.get("GRID_SQL_MODEL", "qwen2.5-coder-0.5b")


def main() -> None:
    raw = sqlite3.connect(f"file:{chinook_path()}?mode=ro", uri=True)
    con = grid_sql.connect(raw, model=MODEL, row_limit=10)
    cur = con.cursor()

    # the standard API, straight to sqlite3
    cur.execute("SELECT Name FROM Genre WHERE GenreId <= ?", (3,))
    print([name for (name,) in cur.fetchall()])

    # a question: description, rowcount and fetch* read the answer
    cur.nl_execute("How many invoices are there per country?")
    print(f"SQL: {cur.last_sql}")
    print(f"columns: {[d[0] for d in cur.description]}  rows: {cur.rowcount}")
    for row in cur.fetchmany(5):
        print("  ", row)
    print(f"audit id: {cur.audit_id}")
    con.close()


if __name__ == "__main__":
    main()
