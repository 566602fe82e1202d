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


# Realistic statements over the scratch schema (joins, subqueries, CTEs, stars, DML): for every
# role, "the server raises no permission error" must equal "the checker reports nothing".
# `%%` because the drivers' paramstyle is "format"; the checker sees a single `%`.
PG_STATEMENTS = (
    "SELECT name FROM customer",
    "SELECT * FROM customer",
    "SELECT c.id, c.name FROM customer c WHERE c.email LIKE '%%x'",
    "SELECT count(*) FROM customer",
    "SELECT o.total, c.name FROM orders o JOIN customer c ON c.id = o.customer_id",
    "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customer WHERE name = 'Ann')",
    "WITH big AS (SELECT customer_id, sum(total) AS s FROM orders GROUP BY customer_id)"
    " SELECT * FROM big",
    "SELECT name FROM customer_names",
    'SELECT "Official_ratings_(millions)" FROM "Sales"."Order Items"',
    'SELECT i.id, o.total FROM "Sales"."Order Items" i JOIN orders o ON o.id = i.order_id',
    "UPDATE customer SET name = 'x' WHERE id = -1",
    "UPDATE customer SET name = email WHERE false",
    "UPDATE orders SET total = total + 1 WHERE id = -1",
    "DELETE FROM orders WHERE id = -1",
    "DELETE FROM audit_log WHERE false",
    "INSERT INTO audit_log (msg) SELECT 'x' WHERE false",
    "INSERT INTO audit_log (msg) VALUES ('x')",
    'SELECT "order" FROM "select"',
    'SELECT "from" FROM "select"',
    'SELECT * FROM "select"',
    "SELECT body FROM public_notes",
    "TRUNCATE audit_log",
    "SELECT id FROM hidden.t",
    "SELECT (SELECT max(total) FROM orders o WHERE o.customer_id = c.id) FROM customer c",
    "SELECT id FROM customer UNION SELECT id FROM orders",
    "UPDATE orders SET total = 0 WHERE customer_id IN (SELECT id FROM customer) AND false",
    "SELECT id, name FROM customer ORDER BY name",
    "DELETE FROM orders USING customer WHERE orders.customer_id = customer.id AND false",
    'SELECT v FROM "Sales".secret',
    "SELECT count(*) FROM orders RIGHT JOIN public_notes ON true",
    "MERGE INTO orders o USING public_notes n ON o.id = n.id AND false WHEN MATCHED THEN DELETE",
    "MERGE INTO orders o USING public_notes n ON o.id = n.id AND false"
    " WHEN NOT MATCHED THEN INSERT (id) VALUES (n.id)",
    "MERGE INTO audit_log a USING public_notes n ON a.id = n.id AND false"
    " WHEN MATCHED THEN UPDATE SET msg = n.body",
)
MY_STATEMENTS = (
    "SELECT name FROM customer",
    "SELECT * FROM customer",
    "SELECT c.id, c.name FROM customer c WHERE c.email LIKE '%%x'",
    "SELECT count(*) FROM customer",
    "SELECT o.total, c.name FROM orders o JOIN customer c ON c.id = o.customer_id",
    "SELECT id FROM orders WHERE customer_id IN (SELECT id FROM customer WHERE name = 'Ann')",
    "WITH big AS (SELECT customer_id, sum(total) AS s FROM orders GROUP BY customer_id)"
    " SELECT * FROM big",
    "SELECT name FROM customer_names",
    "SELECT `Official_ratings_(millions)` FROM `Order Items`",
    "UPDATE customer SET name = 'x' WHERE id = -1",
    "UPDATE customer SET name = email WHERE 1 = 0",
    "UPDATE orders SET total = total + 1 WHERE id = -1",
    "DELETE FROM orders WHERE id = -1",
    "DELETE FROM audit_log WHERE 1 = 0",
    "INSERT INTO audit_log (msg) SELECT 'x' FROM DUAL WHERE 1 = 0",
    "SELECT `order` FROM `select`",
    "SELECT `from` FROM `select`",
    "SELECT * FROM `select`",
    "SELECT body FROM public_notes",
    "SELECT v FROM grid_sql_test2.other",
    "SELECT (SELECT max(total) FROM orders o WHERE o.customer_id = c.id) FROM customer c",
    "SELECT id FROM customer UNION SELECT id FROM orders",
    "UPDATE orders SET total = 0 WHERE customer_id IN (SELECT id FROM customer) AND 1 = 0",
    "SELECT id, name FROM customer ORDER BY name",
)


def statement_mismatches(
    conn: Connection, checker: object, statements: tuple[str, ...], denied_codes: set[str]
) -> tuple[list[tuple[str, bool, list[str]]], list[bool]]:
    """Run each statement (rolled back) and compare with the checker's verdict."""
    from grid_sql.policy import Checker

    assert isinstance(checker, Checker)
    mismatches = []
    outcomes = []
    for sql in statements:
        server_ok = run_probe(conn, Probe("", "", None, "", sql), denied_codes)
        outcomes.append(server_ok)
        found = checker.check(sql.replace("%%", "%"))
        if server_ok != (not found):
            mismatches.append((sql, server_ok, [v.message for v in found]))
    return mismatches, outcomes
