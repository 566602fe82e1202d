"""Fixtures for the user-facing fronts: Chinook (packaged) and real PostgreSQL/MariaDB.

The servers come from ``scripts/services.sh`` (GRID_SQL_PG_URL / GRID_SQL_MYSQL_URL). Locally a
missing server skips; with ``CI=true`` it fails, as in tests/db. The fronts use their own scratch
database ``grid_sql_fronts`` and a select-only login ``gs_fronts_ro`` so they never race the
other suites' fixtures.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.servers import server_engine

DB = "grid_sql_fronts"
USER = "gs_fronts_ro"
PASSWORD = "gs-fronts-pw"
SETUP_VERSION = 1
SCHEMA = [
    "CREATE TABLE album (id int PRIMARY KEY, title varchar(60) NOT NULL, year int NOT NULL)",
    "INSERT INTO album VALUES (1, 'Blue Train', 1958), (2, 'Kind of Blue', 1959),"
    " (3, 'A Love Supreme', 1965), (4, 'Mingus Ah Um', 1959)",
]

REPO = Path(__file__).resolve().parents[2]


def chinook_source() -> Path:
    """The packaged Chinook database (``grid_sql.data``), else the shared copy."""
    try:
        from grid_sql.data import chinook_path

        return Path(chinook_path())
    except ImportError:
        return REPO.parent / "shared/data/chinook/Chinook_Sqlite.sqlite"


@pytest.fixture
def chinook_copy(tmp_path: Path) -> Path:
    """A private, writable copy of Chinook (tests may write to it)."""
    dst = tmp_path / "chinook.sqlite"
    shutil.copyfile(chinook_source(), dst)
    return dst


@pytest.fixture(scope="session")
def pg_url() -> sa.URL:
    """URL of the PostgreSQL scratch database as the select-only login."""
    admin = server_engine("GRID_SQL_PG_URL")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(7317012)"))
        try:
            marker = conn.execute(
                sa.text(
                    "SELECT shobj_description(oid, 'pg_database') FROM pg_database"
                    " WHERE datname = :db"
                ),
                {"db": DB},
            ).scalar()
            if marker != f"grid-sql-fronts v{SETUP_VERSION}":
                conn.execute(
                    sa.text(
                        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                        f"'{USER}') THEN CREATE ROLE {USER}; END IF; END $$"
                    )
                )
                conn.execute(sa.text(f"ALTER ROLE {USER} LOGIN PASSWORD '{PASSWORD}'"))
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
                conn.execute(sa.text(f"CREATE DATABASE {DB}"))
                db = sa.create_engine(admin.url.set(database=DB))
                with db.begin() as dconn:
                    for stmt in SCHEMA:
                        dconn.exec_driver_sql(stmt)
                    dconn.exec_driver_sql(f"GRANT SELECT ON album TO {USER}")
                db.dispose()
                conn.execute(
                    sa.text(f"COMMENT ON DATABASE {DB} IS 'grid-sql-fronts v{SETUP_VERSION}'")
                )
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(7317012)"))
    admin.dispose()
    return sa.make_url(os.environ["GRID_SQL_PG_URL"]).set(
        database=DB, username=USER, password=PASSWORD
    )


@pytest.fixture(scope="session")
def my_url() -> sa.URL:
    """URL of the MariaDB scratch database as the select-only login."""
    admin = server_engine("GRID_SQL_MYSQL_URL")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT GET_LOCK('grid_sql_fronts_setup', 120)"))
        try:
            conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
            conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {DB}.setup_marker (v int)")
            current = conn.exec_driver_sql(f"SELECT max(v) FROM {DB}.setup_marker").scalar()
            if current != SETUP_VERSION:
                conn.exec_driver_sql(f"DROP DATABASE {DB}")
                conn.exec_driver_sql(f"CREATE DATABASE {DB}")
                conn.exec_driver_sql(f"USE {DB}")
                for stmt in SCHEMA:
                    conn.exec_driver_sql(stmt)
                conn.exec_driver_sql(f"DROP USER IF EXISTS '{USER}'@'%%'")
                conn.exec_driver_sql(f"CREATE USER '{USER}'@'%%' IDENTIFIED BY '{PASSWORD}'")
                conn.exec_driver_sql(f"GRANT SELECT ON {DB}.album TO '{USER}'@'%%'")
                conn.exec_driver_sql(f"CREATE TABLE {DB}.setup_marker (v int)")
                conn.exec_driver_sql(f"INSERT INTO {DB}.setup_marker VALUES ({SETUP_VERSION})")
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK('grid_sql_fronts_setup')"))
    admin.dispose()
    return sa.make_url(os.environ["GRID_SQL_MYSQL_URL"]).set(
        database=DB, username=USER, password=PASSWORD
    )


# ------------------------------------------------------------------ model-backed fixtures
MODEL = "smollm2-135m"  # weak at SQL but fast: the fronts are tested, not the model
# SQLite has no grants (every verb is allowed): the application policy makes the role read-only
# and keeps two small tables, so the prompt (the role's view of the schema) stays short.
READ_ONLY = {"verbs": ["select"], "tables": {"allow": ["Genre", "MediaType"]}}
Q_GENRES = "List the names of all genres."
Q_MEDIA = "List the names of all media types."
Q_1959 = "Which albums came out in 1959?"


def few_shot() -> list[Any]:
    """Few-shot pairs (an Asker feature) that steer the small model to answerable SQL: the
    fronts are under test here, not SmolLM2's SQL skills."""
    from grid_sql.ask.prompt import Example

    return [
        Example(Q_GENRES, "SELECT Name FROM Genre;"),
        Example(Q_MEDIA, "SELECT Name FROM MediaType;"),
        Example(Q_1959, "SELECT title FROM album WHERE year = 1959;"),
    ]


@pytest.fixture(scope="session")
def backend() -> Any:
    """One loaded SmolLM2 backend shared by every front test (Askers take it as ``model=``)."""
    from grid_sql.ask.asker import load_backend

    return load_backend(MODEL)


@pytest.fixture(scope="session")
def audit_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.sqlite"


@pytest.fixture(scope="session")
def opts(backend: Any, audit_db: Path) -> dict[str, Any]:
    """Asker options shared by the model tests: one backend, one audit store, read-only,
    few-shot pairs and a small budget."""
    return {
        "model": backend,
        "audit": audit_db,
        "policy": READ_ONLY,
        "examples": few_shot(),
        "max_tokens": 32,
        "repair": False,
    }


@pytest.fixture(scope="session")
def chinook_engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """A writable Chinook copy shared by the session; tests roll back what they write."""
    dst = tmp_path_factory.mktemp("chinook") / "chinook.sqlite"
    shutil.copyfile(chinook_source(), dst)
    return sa.create_engine(f"sqlite:///{dst}")
