"""pandas front: ``grid_sql.read_sql_nl`` returns the executed rows with their provenance."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa

import grid_sql
from grid_sql.errors import ConnectionConfigError
from grid_sql.front import pandas as gpd
from grid_sql.front.sqlalchemy import asker_for, engine_for_url, split_options

from .conftest import Q_GENRES, Q_MEDIA


def test_read_sql_nl_on_an_engine(chinook_engine: sa.Engine, opts: dict[str, Any]) -> None:
    df = grid_sql.read_sql_nl(Q_MEDIA, chinook_engine, **opts)
    assert isinstance(df, pd.DataFrame)
    sql, audit_id = df.attrs["sql"], df.attrs["audit_id"]
    assert sql.strip() and audit_id
    assert df.attrs["question"] == Q_MEDIA
    with chinook_engine.connect() as conn:
        ran = conn.exec_driver_sql(sql.rstrip().rstrip(";"))
        expected = pd.DataFrame.from_records([tuple(r) for r in ran], columns=list(ran.keys()))
    if not df.attrs["truncated"]:
        pd.testing.assert_frame_equal(df, expected, check_dtype=False)
    # the cached Asker itself is a valid con too (per-question options only)
    asker_opts, per_question = split_options(opts)
    asker = asker_for(chinook_engine, **asker_opts)
    again = grid_sql.read_sql_nl(Q_MEDIA, asker, **per_question)
    assert again.attrs["sql"] == sql  # greedy decoding, same prompt: same statement
    assert again.attrs["audit_id"] != audit_id  # a new, separately audited generation


def test_read_sql_nl_on_a_dbapi_connection_reuses_its_asker(
    chinook_copy: Path, opts: dict[str, Any]
) -> None:
    raw = sqlite3.connect(chinook_copy)
    df = grid_sql.read_sql_nl(Q_GENRES, raw, **opts)
    wrapper = gpd._WRAPPED[id(raw)]
    asker = wrapper.asker
    df2 = grid_sql.read_sql_nl(Q_MEDIA, raw, row_limit=1, **opts)
    assert gpd._WRAPPED[id(raw)] is wrapper and wrapper.asker is asker
    assert df.attrs["audit_id"] != df2.attrs["audit_id"]
    assert len(df2) <= 1
    raw.execute("INSERT INTO Genre (Name) VALUES ('Zydeco')")  # the connection stays writable
    raw.rollback()


def test_bad_con_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConnectionConfigError, match="cannot use"):
        grid_sql.read_sql_nl("how many albums?", 42)
    with pytest.raises(ConnectionConfigError, match="neither a database URL"):
        grid_sql.read_sql_nl("how many albums?", tmp_path / "missing.sqlite")


def test_engine_for_url_is_one_engine_per_url(chinook_copy: Path) -> None:
    a = engine_for_url(chinook_copy)
    assert engine_for_url(str(chinook_copy)) is a
    assert engine_for_url(f"sqlite:///{chinook_copy.resolve()}") is a
