"""DB-API (PEP 249): ``grid_sql.connect`` wraps a driver connection; cursors gain nl_execute.

Run: ``python examples/dbapi_cursor.py`` (model from $GRID_SQL_MODEL, see _setup.py).
"""

from __future__ import annotations

import sqlite3

from _setup import EXAMPLES, MODEL, POLICY, refused

import grid_sql
from grid_sql.data import chinook_path
from grid_sql.errors import GridSQLError


def main() -> None:
    raw = sqlite3.connect(f"file:{chinook_path()}?mode=ro", uri=True)
    con = grid_sql.connect(raw, model=MODEL, policy=POLICY, examples=EXAMPLES, row_limit=10)
    cur = con.cursor()

    # the standard API, straight to sqlite3
    cur.execute("SELECT Name FROM Genre WHERE GenreId <= ?", (3,))
    print([name for (name,) in cur.fetchall()])

    # a question: description, rowcount and fetch* read the answer
    question = "List the names of all media types."
    print(f"\nQ: {question}")
    try:
        cur.nl_execute(question)
    except GridSQLError as exc:
        print(refused(exc))
    else:
        print(f"SQL: {cur.last_sql}")
        print(f"columns: {[d[0] for d in cur.description]}  rows: {cur.rowcount}")
        for row in cur.fetchmany(5):
            print("  ", row)
        print(f"audit id: {cur.audit_id}")
    con.close()


if __name__ == "__main__":
    main()
