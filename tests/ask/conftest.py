"""Fixtures for the front tests: the packaged Chinook copy and real PostgreSQL/MariaDB roles.

The servers come from ``scripts/services.sh`` (GRID_SQL_PG_URL / GRID_SQL_MYSQL_URL). Locally a
missing server skips; with ``CI=true`` it fails, as in tests/db. The front uses its own scratch
database and roles (``grid_sql_front``, ``gs_front_ro`` select-only, ``gs_front_rw`` with
INSERT/UPDATE too) so it never races the db-layer fixtures.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.data import chinook_path
from tests.servers import server_engine

FRONT_DB = "grid_sql_front"
PASSWORD = "gs-front-pw"
SETUP_VERSION = 1

SCHEMA = """
CREATE TABLE item (id int PRIMARY KEY, name varchar(40) NOT NULL, price int NOT NULL);
CREATE TABLE note (id int PRIMARY KEY, body varchar(200));
"""
ROWS = "INSERT INTO item (id, name, price) VALUES " + ", ".join(
    f"({i}, 'item {i}', {i * 10})" for i in range(1, 26)
)


MUSIC = """
CREATE TABLE artist (artist_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE album (album_id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                    artist_id INTEGER REFERENCES artist(artist_id));
INSERT INTO artist VALUES (1, 'AC/DC'), (2, 'Accept');
INSERT INTO album VALUES (1, 'Back in Black', 1), (2, 'Balls to the Wall', 2);
"""


def music_asker(d: Path, model: object, examples: list[object]) -> object:
    """An Asker (audited, 48 tokens) over a two-table SQLite music database in ``d``, whose
    few-shot ``examples`` the small test model copies under greedy decoding."""
    import sqlite3

    from grid_sql.ask.asker import Asker
    from grid_sql.audit import AuditStore

    con = sqlite3.connect(d / "music.sqlite")
    con.executescript(MUSIC)
    con.commit()
    con.close()
    return Asker(
        d / "music.sqlite",
        model=model,
        audit=AuditStore(d / "audit.sqlite"),
        max_tokens=48,
        examples=examples,  # type: ignore[arg-type]
    )


@pytest.fixture
def chinook_copy(tmp_path: Path) -> Path:
    """A writable copy of the packaged Chinook database."""
    dst = tmp_path / "chinook.sqlite"
    shutil.copyfile(chinook_path(), dst)
    return dst


@pytest.fixture(scope="session")
def pg_front() -> Callable[[str], sa.URL]:
    """``url(role)`` for the PostgreSQL scratch database (roles gs_front_ro / gs_front_rw)."""
    admin = server_engine("GRID_SQL_PG_URL")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(7317006)"))
        try:
            marker = conn.execute(
                sa.text(
                    "SELECT shobj_description(oid, 'pg_database') FROM pg_database"
                    " WHERE datname = :db"
                ),
                {"db": FRONT_DB},
            ).scalar()
            if marker != f"grid-sql-front v{SETUP_VERSION}":
                for role in ("gs_front_ro", "gs_front_rw"):
                    conn.execute(
                        sa.text(
                            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                            f"'{role}') THEN CREATE ROLE {role}; END IF; END $$"
                        )
                    )
                    conn.execute(sa.text(f"ALTER ROLE {role} LOGIN PASSWORD '{PASSWORD}'"))
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {FRONT_DB} WITH (FORCE)"))
                conn.execute(sa.text(f"CREATE DATABASE {FRONT_DB}"))
                db = sa.create_engine(admin.url.set(database=FRONT_DB))
                with db.begin() as dconn:
                    dconn.exec_driver_sql(SCHEMA + ROWS)
                    dconn.exec_driver_sql(
                        "GRANT SELECT ON item, note TO gs_front_ro;"
                        "GRANT SELECT, INSERT, UPDATE ON item, note TO gs_front_rw;"
                    )
                db.dispose()
                conn.execute(
                    sa.text(f"COMMENT ON DATABASE {FRONT_DB} IS 'grid-sql-front v{SETUP_VERSION}'")
                )
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(7317006)"))

    def url(role: str) -> sa.URL:
        return admin.url.set(database=FRONT_DB, username=role, password=PASSWORD)

    return url


@pytest.fixture(scope="session")
def my_front() -> Callable[[str], sa.URL]:
    """``url(user)`` for the MariaDB scratch database (users gs_front_ro / gs_front_rw)."""
    admin = server_engine("GRID_SQL_MYSQL_URL")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT GET_LOCK('grid_sql_front_setup', 120)"))
        try:
            conn.execute(sa.text(f"CREATE DATABASE IF NOT EXISTS {FRONT_DB}"))
            conn.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {FRONT_DB}.setup_marker (v int)"))
            current = conn.execute(sa.text(f"SELECT max(v) FROM {FRONT_DB}.setup_marker")).scalar()
            if current != SETUP_VERSION:
                conn.exec_driver_sql(f"DROP DATABASE {FRONT_DB}")
                conn.exec_driver_sql(f"CREATE DATABASE {FRONT_DB}")
                conn.exec_driver_sql(f"USE {FRONT_DB}")
                for stmt in (SCHEMA + ROWS).split(";"):
                    if stmt.strip():
                        conn.exec_driver_sql(stmt)
                for user in ("gs_front_ro", "gs_front_rw"):
                    conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
                    conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY '{PASSWORD}'")
                conn.exec_driver_sql(f"GRANT SELECT ON {FRONT_DB}.* TO 'gs_front_ro'@'%%'")
                conn.exec_driver_sql(
                    f"GRANT SELECT, INSERT, UPDATE ON {FRONT_DB}.* TO 'gs_front_rw'@'%%'"
                )
                conn.exec_driver_sql(f"CREATE TABLE {FRONT_DB}.setup_marker (v int)")
                conn.exec_driver_sql(
                    f"INSERT INTO {FRONT_DB}.setup_marker VALUES ({SETUP_VERSION})"
                )
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK('grid_sql_front_setup')"))

    def url(user: str) -> sa.URL:
        return admin.url.set(database=FRONT_DB, username=user, password=PASSWORD)

    return url


def _cached_llama(name: str):
    """Registry model ``name`` through llama.cpp; fails under CI=true when it is not cached
    (`make models` fetches it there), skips elsewhere."""
    from grid_sql.decode.models import cached_path

    if not cached_path(name).is_file():
        msg = f"{name} is not cached (make models)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    from grid_sql.decode.backend import load_backend

    return load_backend(name, backend="llama.cpp")


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M through llama.cpp, loaded once per module."""
    return _cached_llama("smollm2-135m")


@pytest.fixture(scope="module")
def qwen():
    """Qwen2.5-Coder-0.5B through llama.cpp, loaded once per module."""
    return _cached_llama("qwen2.5-coder-0.5b")
