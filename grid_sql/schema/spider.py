"""Snapshots from Spider's ``tables.json`` (offline use: no database needed).

Why: benchmarks and checker tests run over Spider's 166 schemas, most of which have no database
on disk; ``tables.json`` holds exactly the catalog facts a snapshot needs (original names,
coarse types, primary and foreign keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grid_sql.errors import SchemaError
from grid_sql.schema.model import (
    ColumnInfo,
    ForeignKeyInfo,
    SchemaInfo,
    SchemaSnapshot,
    TableInfo,
)


def snapshot_from_spider(entry: Mapping[str, Any], *, dialect: str = "sqlite") -> SchemaSnapshot:
    """One ``tables.json`` entry → a snapshot with one schema, ``main`` (SQLite's name).

    Uses the ``*_original`` names (the real identifiers in the .sqlite files), not the
    lower-cased, space-separated display names.
    """
    try:
        tables = list(entry["table_names_original"])
        col_names = list(entry["column_names_original"])
        col_types = list(entry["column_types"])
        pk_raw = list(entry.get("primary_keys", []))
        fk_raw = list(entry.get("foreign_keys", []))
    except (KeyError, TypeError) as exc:
        raise SchemaError(f"not a Spider tables.json entry: missing {exc}") from exc
    cols_of: dict[int, list[ColumnInfo]] = {i: [] for i in range(len(tables))}
    where: dict[int, tuple[int, str]] = {}
    for idx, ((tidx, name), ctype) in enumerate(zip(col_names, col_types, strict=True)):
        if tidx < 0:  # the synthetic "*" column
            continue
        cols_of[tidx].append(ColumnInfo(name=name, type=str(ctype)))
        where[idx] = (tidx, name)
    pk_of: dict[int, list[str]] = {i: [] for i in range(len(tables))}
    for item in pk_raw:  # ints, or lists of ints for composite keys in newer releases
        for idx in item if isinstance(item, list) else [item]:
            tidx, name = where[idx]
            pk_of[tidx].append(name)
    fk_of: dict[int, list[ForeignKeyInfo]] = {i: [] for i in range(len(tables))}
    for src, dst in fk_raw:
        (st, sc), (dt, dc) = where[src], where[dst]
        fk_of[st].append(ForeignKeyInfo((sc,), tables[dt], (dc,), referred_schema="main"))
    infos = tuple(
        TableInfo(
            name=tname,
            kind="table",
            columns=tuple(cols_of[i]),
            primary_key=tuple(pk_of[i]),
            foreign_keys=tuple(fk_of[i]),
        )
        for i, tname in enumerate(tables)
    )
    return SchemaSnapshot(
        dialect=dialect, default_schema="main", schemas=(SchemaInfo("main", infos),)
    )


def load_spider_tables(path: str | Path) -> dict[str, SchemaSnapshot]:
    """Every database of a Spider ``tables.json``, keyed by ``db_id``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"cannot read Spider tables file {path}: {exc}") from exc
    return {e["db_id"]: snapshot_from_spider(e) for e in data}
