"""Schema layer: a plain typed model of the catalog plus one SQLAlchemy-Inspector adapter."""

from grid_sql.schema.introspect import connect, dialect_name, introspect, make_engine
from grid_sql.schema.model import (
    ColumnInfo,
    ForeignKeyInfo,
    SchemaInfo,
    SchemaSnapshot,
    TableInfo,
    TableKind,
)
from grid_sql.schema.spider import load_spider_tables, snapshot_from_spider

__all__ = [
    "ColumnInfo",
    "ForeignKeyInfo",
    "SchemaInfo",
    "SchemaSnapshot",
    "TableInfo",
    "TableKind",
    "connect",
    "dialect_name",
    "introspect",
    "load_spider_tables",
    "make_engine",
    "snapshot_from_spider",
]
