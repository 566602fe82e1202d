"""Catalog comments reach the snapshot and the prompt (issue #25 §2): PostgreSQL
``COMMENT ON TABLE/COLUMN`` and MariaDB ``COMMENT '...'``, read in the bulk reflection."""

from __future__ import annotations

import uuid

import pytest

from grid_sql.ask.prompt import describe_table, visible_tables
from grid_sql.policy.grants import sqlite_baseline
from grid_sql.schema.introspect import introspect
from grid_sql.schema.model import SchemaSnapshot
from tests.servers import server_engine

pytestmark = pytest.mark.db


def _check(snap: SchemaSnapshot, schema: str) -> None:
    t = snap.table("sales_m", schema)
    assert t is not None
    assert t.comment == "Monthly revenue per store"
    cols = {c.name: c.comment for c in t.columns}
    assert cols == {"k": None, "amt": "revenue in EUR"}
    vt = next(v for v in visible_tables(snap, sqlite_baseline(snap)) if v.name == "sales_m")
    text = describe_table(vt, {(schema, "sales_m")}, False)
    assert "/* revenue in EUR */" in text and text.endswith("-- Monthly revenue per store")


def test_postgresql_comments():
    admin = server_engine("GRID_SQL_PG_URL")
    schema = f"gs_cmt_{uuid.uuid4().hex[:8]}"
    with admin.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE SCHEMA {schema};"
            f"CREATE TABLE {schema}.sales_m (k int PRIMARY KEY, amt numeric);"
            f"COMMENT ON TABLE {schema}.sales_m IS 'Monthly revenue per store';"
            f"COMMENT ON COLUMN {schema}.sales_m.amt IS 'revenue in EUR';"
            f"CREATE TABLE {schema}.other (id int)"
        )
    try:
        _check(introspect(admin, schemas=[schema]), schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def test_mariadb_comments():
    admin = server_engine("GRID_SQL_MYSQL_URL")
    db = f"gs_cmt_{uuid.uuid4().hex[:8]}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {db}")
        conn.exec_driver_sql(
            f"CREATE TABLE {db}.sales_m (k int PRIMARY KEY, amt decimal(10,2) "
            f"COMMENT 'revenue in EUR') COMMENT 'Monthly revenue per store'"
        )
        conn.exec_driver_sql(f"CREATE TABLE {db}.other (id int)")
    try:
        _check(introspect(admin, schemas=[db]), db)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {db}")
        admin.dispose()
