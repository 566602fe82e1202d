"""SchemaSnapshot: plain data, stable fingerprints, SQLite introspection, Spider tables.json."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grid_sql.errors import ConnectionConfigError, SchemaError
from grid_sql.schema import (
    SchemaSnapshot,
    introspect,
    load_spider_tables,
    snapshot_from_spider,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SPIDER = SHARED / "spider"
SPIDER_DBS = sorted(p.name for p in (SPIDER / "database").iterdir()) if SPIDER.exists() else []

needs_spider = pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")


@needs_spider
def test_nineteen_spider_databases() -> None:
    assert len(SPIDER_DBS) == 19 and "wta_1" not in SPIDER_DBS


@needs_spider
@pytest.mark.parametrize("db", SPIDER_DBS)
def test_spider_sqlite_snapshot_matches_tables_json(db: str) -> None:
    """Introspection of the .sqlite file and the tables.json entry agree on every name."""
    snap = introspect(f"sqlite:///{SPIDER / 'database' / db / f'{db}.sqlite'}")
    ref = load_spider_tables(SPIDER / "tables.json")[db]
    assert snap.dialect == "sqlite" and snap.default_schema == "main"
    got = {t.name: t.column_names for _, t in snap.iter_tables()}
    # SQLAlchemy hides SQLite's internal tables (sqlite_sequence); tables.json lists them.
    want = {
        t.name: t.column_names for _, t in ref.iter_tables() if not t.name.startswith("sqlite_")
    }
    assert got == want
    # Deterministic: a second reflection hashes the same.
    again = introspect(f"sqlite:///{SPIDER / 'database' / db / f'{db}.sqlite'}")
    assert again.fingerprint == snap.fingerprint and again == snap
    # Plain data round trip.
    back = SchemaSnapshot.from_dict(json.loads(snap.canonical_json()))
    assert back == snap and back.fingerprint == snap.fingerprint


@needs_spider
def test_names_outside_the_identifier_regex() -> None:
    """The column that broke precondition (d) in the paper, and one starting with a digit."""
    snap = introspect(f"sqlite:///{SPIDER / 'database' / 'orchestra' / 'orchestra.sqlite'}")
    perf = snap.table("performance")
    assert perf is not None and perf.column("Official_ratings_(millions)") is not None
    tv = introspect(f"sqlite:///{SPIDER / 'database' / 'tvshow' / 'tvshow.sqlite'}")
    series = tv.table("TV_series")
    assert series is not None and "18_49_Rating_Share" in series.column_names


@needs_spider
def test_all_tables_json_entries_load() -> None:
    snaps = load_spider_tables(SPIDER / "tables.json")
    assert len(snaps) == 166
    assert len({s.fingerprint for s in snaps.values()}) == 166
    pets = snaps["pets_1"]
    has_pet = pets.table("Has_Pet")
    assert has_pet is not None and has_pet.foreign_keys


def test_composite_primary_key_entry() -> None:
    entry = {
        "db_id": "x",
        "table_names_original": ["a"],
        "column_names_original": [[-1, "*"], [0, "k1"], [0, "k2"]],
        "column_types": ["text", "number", "number"],
        "primary_keys": [[1, 2]],
        "foreign_keys": [],
    }
    snap = snapshot_from_spider(entry)
    a = snap.table("a")
    assert a is not None and a.primary_key == ("k1", "k2")
    with pytest.raises(SchemaError, match="missing"):
        snapshot_from_spider({"db_id": "y"})


def _make_db(path: Path, ddl: str) -> str:
    con = sqlite3.connect(path)
    con.executescript(ddl)
    con.close()
    return f"sqlite:///{path}"


def test_quoted_reserved_and_case_sensitive_names(tmp_path: Path) -> None:
    url = _make_db(
        tmp_path / "w.sqlite",
        'CREATE TABLE "select" ("order" INTEGER PRIMARY KEY, "weird col)" TEXT NOT NULL,'
        ' "MixedCase" REAL DEFAULT 1.5);'
        'CREATE TABLE "Child" (id INTEGER, sel INTEGER REFERENCES "select"("order"));'
        'CREATE VIEW "v w" AS SELECT "order" FROM "select";',
    )
    snap = introspect(url)
    sel = snap.table("select")
    assert sel is not None
    assert sel.column_names == ("order", "weird col)", "MixedCase")
    assert sel.primary_key == ("order",)
    assert [c.nullable for c in sel.columns] == [True, False, True]
    assert sel.columns[2].default == "1.5"
    child = snap.table("Child")
    assert child is not None and child.foreign_keys[0].referred_table == "select"
    assert snap.table("child") is child  # unique case-insensitive fallback
    view = snap.table("v w")
    assert view is not None and view.kind == "view"


def test_fingerprint_changes_with_catalog(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    url = _make_db(path, "CREATE TABLE a (x INTEGER);")
    first = introspect(url).fingerprint
    assert len(first) == 64 and introspect(url).fingerprint == first
    _make_db(path, "ALTER TABLE a ADD COLUMN y TEXT;")
    second = introspect(url).fingerprint
    assert second != first
    _make_db(path, "CREATE TABLE b (z INTEGER);")
    assert introspect(url).fingerprint not in (first, second)


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConnectionConfigError, match="not found"):
        introspect(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.sqlite'}")
    with pytest.raises(ConnectionConfigError, match="invalid database URL"):
        introspect("::::")
    with pytest.raises(SchemaError, match="cannot read Spider tables file"):
        load_spider_tables(tmp_path / "missing.json")
