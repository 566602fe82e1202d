"""Live grants (#27 §5): a REVOKE on a live server, or a changed SQLite schema, takes effect on
the next question of the same Asker, at mask level (the role grammar's table lexicon) and at
the checker, with the new policy fingerprint sealed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import Asker
from grid_sql.audit import AuditStore
from grid_sql.errors import OptionError, PolicyViolation
from tests.ask.conftest import PASSWORD
from tests.servers import server_engine


def _tables(asker: Asker) -> set[str]:
    """The table names the role grammar lets the model write (lower-cased, unquoted)."""
    lex = asker.grammar.lexicon
    assert lex is not None
    return {w.decode().strip('"`[]').lower() for w in lex["TABLE_NAME"].words}


def test_sqlite_schema_changes_are_noticed(chinook_copy: Path, tmp_path: Path) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = Asker(chinook_copy, audit=store, live_grants=0)
    before = asker.checker.policy.fingerprint  # what run_sql checks against and seals
    assert "review" not in _tables(asker)
    with pytest.raises(PolicyViolation):
        asker.run_sql("SELECT count(*) FROM Review")
    con = sqlite3.connect(chinook_copy)
    con.executescript(
        "CREATE TABLE Review (ReviewId INTEGER PRIMARY KEY, Stars INTEGER);"
        "INSERT INTO Review VALUES (1, 5); DROP TABLE PlaylistTrack;"
    )
    con.close()
    res = asker.run_sql("SELECT count(*) FROM Review")  # no new Asker
    assert res.rows == [(1,)] and asker.refreshes == 1
    assert "review" in _tables(asker) and "playlisttrack" not in _tables(asker)
    now = asker.checker.policy.fingerprint
    assert now != before
    assert store.get(res.audit_id or "").seal["artifacts"]["policy"] == now
    assert not asker.refresh_grants(force=True)  # unchanged since: nothing re-read


def test_checks_are_rate_limited(chinook_copy: Path) -> None:
    asker = Asker(chinook_copy, audit=False, live_grants=3600)
    con = sqlite3.connect(chinook_copy)
    con.execute("CREATE TABLE Review (ReviewId INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    with pytest.raises(PolicyViolation):  # within the interval: not looked at yet
        asker.run_sql("SELECT count(*) FROM Review")
    assert asker.refresh_grants(force=True) and asker.run_sql("SELECT count(*) FROM Review").rows
    off = Asker(chinook_copy, audit=False, live_grants=None)
    assert not off.refresh_grants(force=True)
    with pytest.raises(OptionError):
        Asker(chinook_copy, audit=False, live_grants=-1)


LIVE_USER = "gs_front_live"


@pytest.mark.db
@pytest.mark.parametrize("server", ["pg_front", "my_front"])
def test_a_live_revoke_takes_effect_on_the_next_question(
    server: str, request: pytest.FixtureRequest
) -> None:
    url_of: Callable[[str], sa.URL] = request.getfixturevalue(server)
    pg = server == "pg_front"
    admin = server_engine("GRID_SQL_PG_URL" if pg else "GRID_SQL_MYSQL_URL")
    db_url = url_of("gs_front_ro")
    admin_db = sa.create_engine(admin.url.set(database=db_url.database))
    on = "item, note" if pg else f"{db_url.database}.item"

    def run(*stmts: str) -> None:
        with admin_db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for s in stmts:
                conn.exec_driver_sql(s)

    if pg:
        run(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{LIVE_USER}') "
            f"THEN CREATE ROLE {LIVE_USER} LOGIN PASSWORD '{PASSWORD}'; END IF; END $$",
            f"GRANT SELECT ON {on} TO {LIVE_USER}",
        )
    else:
        run(
            f"CREATE USER IF NOT EXISTS '{LIVE_USER}'@'%%' IDENTIFIED BY '{PASSWORD}'",
            f"GRANT SELECT ON {on} TO '{LIVE_USER}'@'%%'",
            f"GRANT SELECT ON {db_url.database}.note TO '{LIVE_USER}'@'%%'",
        )
    note = "note" if pg else f"{db_url.database}.note"
    who = LIVE_USER if pg else f"'{LIVE_USER}'@'%%'"
    try:
        asker = Asker(url_of(LIVE_USER), audit=False, live_grants=0)
        assert {"item", "note"} <= _tables(asker)
        assert asker.run_sql("SELECT count(*) FROM note").rows
        run(f"REVOKE SELECT ON {note} FROM {who}")
        with pytest.raises(PolicyViolation):  # refused by the checker: the policy is new
            asker.run_sql("SELECT count(*) FROM note")
        assert "note" not in _tables(asker) and "item" in _tables(asker)
        assert asker.refreshes == 1
        run(f"GRANT SELECT ON {note} TO {who}")
        assert asker.run_sql("SELECT count(*) FROM note").rows and "note" in _tables(asker)
    finally:
        run(f"GRANT SELECT ON {note} TO {who}")
        admin_db.dispose()
        admin.dispose()
