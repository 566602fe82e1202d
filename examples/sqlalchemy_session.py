"""SQLAlchemy 2.x: ``session.ask(...)`` on an ORM session (GridSession).

The Asker is built once per engine and reused by every session; the statement runs on the
session's own connection and transaction.
Run: ``python examples/sqlalchemy_session.py`` (model from $GRID_SQL_MODEL, see _setup.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from _setup import EXAMPLES, MODEL, POLICY, refused
from sqlalchemy.orm import sessionmaker

from grid_sql.data import chinook_url
from grid_sql.errors import GridSQLError
from grid_sql.front.sqlalchemy import GridSession


def main() -> None:
    engine = sa.create_engine(chinook_url())  # read-only SQLite URI
    Session = sessionmaker(
        engine,
        class_=GridSession,
        grid_options={"model": MODEL, "policy": POLICY, "examples": EXAMPLES, "row_limit": 5},
    )
    with Session() as session:
        # ordinary Core/ORM work and questions share the session
        n = session.execute(sa.text("SELECT count(*) FROM Genre")).scalar_one()
        print(f"{n} genres")
        for question in ("How many genres are there?", "List the titles of five albums."):
            print(f"\nQ: {question}")
            try:
                result = session.ask(question)
            except GridSQLError as exc:
                print(refused(exc))
                continue
            print(f"SQL: {result.sql}")
            print(f"rows: {result.rows}")
            print(result.audit_summary())


if __name__ == "__main__":
    main()
