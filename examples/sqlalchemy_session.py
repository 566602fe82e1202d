"""SQLAlchemy 2.x: ``session.ask(...)`` on an ORM session (GridSession).

The Asker is built once per engine and reused by every session; the statement runs on the
session's own connection and transaction.
Run: ``python examples/sqlalchemy_session.py`` (model from $GRID_SQL_MODEL).
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

from grid_sql.data import chinook_url
from grid_sql.front.sqlalchemy import GridSession

MODEL = os.environ.get("GRID_SQL_MODEL", "qwen2.5-coder-0.5b")


def main() -> None:
    engine = sa.create_engine(chinook_url())  # read-only SQLite URI
    Session = sessionmaker(engine, class_=GridSession, grid_options={"model": MODEL})
    with Session() as session:
        # ordinary ORM/Core work and questions share the session
        n = session.execute(sa.text("SELECT count(*) FROM Track")).scalar_one()
        print(f"{n} tracks")
        result = session.ask("How many tracks are longer than five minutes?", row_limit=5)
        print(f"SQL: {result.sql}")
        print(f"rows: {result.rows}")
        print(f"audit id: {result.audit_id}")
        again = session.ask("List three genres.", row_limit=3)
        print(f"SQL: {again.sql}\nrows: {again.rows}")


if __name__ == "__main__":
    main()
