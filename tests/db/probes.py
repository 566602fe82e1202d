"""Probe statements: the smallest statement that needs exactly one privilege.

Each probe touches no row (``WHERE false`` / ``LIMIT 0`` / ``SELECT ... WHERE false``) and runs
in a transaction that is rolled back, so probing writes nothing. TRUNCATE is the exception in
MySQL (it commits implicitly), so there it is only probed on the empty scratch tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from grid_sql.schema import SchemaSnapshot


@dataclass(frozen=True)
class Probe:
    schema: str
    table: str
    column: str | None
    verb: str
    sql: str


def probes_for(snapshot: SchemaSnapshot, dialect: sa.Dialect, *, truncate: bool) -> Iterator[Probe]:
    """Table probes (select via count(*), delete, truncate) and column probes
    (select, insert, update) for every table and every column of ``snapshot``."""
    q = dialect.identifier_preparer.quote
    false = "false" if dialect.name == "postgresql" else "1 = 0"
    for schema, t in snapshot.iter_tables():
        name = f"{q(schema)}.{q(t.name)}"
        yield Probe(schema, t.name, None, "select", f"SELECT count(*) FROM {name}")
        if t.kind == "table":
            yield Probe(schema, t.name, None, "delete", f"DELETE FROM {name} WHERE {false}")
            if truncate:
                yield Probe(schema, t.name, None, "truncate", f"TRUNCATE TABLE {name}")
        for c in t.columns:
            col = q(c.name)
            yield Probe(schema, t.name, c.name, "select", f"SELECT {col} FROM {name} LIMIT 0")
            if t.kind != "table":
                continue
            src = (
                "SELECT NULL WHERE false"
                if dialect.name == "postgresql"
                else ("SELECT NULL FROM DUAL WHERE 1 = 0")
            )
            yield Probe(schema, t.name, c.name, "insert", f"INSERT INTO {name} ({col}) {src}")
            yield Probe(
                schema, t.name, c.name, "update", f"UPDATE {name} SET {col} = NULL WHERE {false}"
            )


def run_probe(conn: Connection, probe: Probe, denied_codes: set[str]) -> bool:
    """True if the server accepted the statement's privileges (other errors count as accepted:
    they are raised after the privilege check, e.g. NOT NULL), False on a permission error."""
    tx = conn.begin()
    try:
        conn.exec_driver_sql(probe.sql)
        return True
    except sa.exc.DBAPIError as exc:
        code = _code(exc.orig)
        if code in denied_codes:
            return False
        return True
    finally:
        tx.rollback()


def _code(orig: BaseException | None) -> str:
    """MySQL error number when there is one (its SQLSTATE 42000 is shared with syntax errors),
    else the SQLSTATE (PostgreSQL)."""
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return str(args[0])
    return str(getattr(orig, "sqlstate", "") or "")
