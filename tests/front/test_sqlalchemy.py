"""SQLAlchemy front with the real SmolLM2 model: ``ask`` on an engine, a connection and an ORM
session; the Asker is built once per engine; the statement runs inside the session's own
transaction (PostgreSQL/SQLite) and leaves it usable; what is reported is what ran."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from grid_sql.ask.result import AskResult
from grid_sql.decode import StopReason
from grid_sql.errors import ConnectionConfigError
from grid_sql.front import sqlalchemy as sa_front
from grid_sql.front.sqlalchemy import GridSession, ask, asker_for, forget

from .conftest import Q_1959, Q_GENRES, few_shot


def _rows_as_run(conn: sa.Connection, result: AskResult) -> Counter[str]:
    """The statement's full result, run again on ``conn`` (as a multiset of rows)."""
    rows = conn.exec_driver_sql(result.sql.rstrip().rstrip(";")).fetchall()
    return Counter(repr(tuple(r)) for r in rows)


def _check(result: AskResult) -> None:
    assert isinstance(result, AskResult)
    assert result.sql.strip()
    assert result.audit_id
    assert result.stop_reason in {s.value for s in StopReason}
    assert result.rowcount == len(result.rows)
    assert {"generation", "execution", "total"} <= set(result.timings)


def test_unbound_session_is_a_config_error() -> None:
    with GridSession() as session, pytest.raises(ConnectionConfigError, match="no bind"):
        session.ask(Q_GENRES)
    with pytest.raises(ConnectionConfigError, match="Session, Engine or Connection"):
        ask(object(), Q_GENRES)  # type: ignore[arg-type]


@pytest.mark.slow  # first Chinook Asker + model load: 4-75 s here, load-dependent
def test_ask_on_a_connection_reports_what_ran(
    chinook_engine: sa.Engine, opts: dict[str, Any]
) -> None:
    with chinook_engine.connect() as conn:
        result = ask(conn, Q_GENRES, row_limit=3, **opts)
        _check(result)
        # what is reported is what ran: the capped rows are rows of the statement's result
        ran = _rows_as_run(conn, result)
        assert len(result.rows) == min(3, ran.total())
        assert result.truncated == (ran.total() > 3)
        assert Counter(repr(tuple(r)) for r in result.rows) <= ran
        conn.exec_driver_sql("UPDATE Album SET Title = 'x' WHERE AlbumId = 1")  # still writable
        conn.rollback()
    asker = asker_for(chinook_engine, **opts)
    assert asker is asker_for(chinook_engine, **dict(opts))  # cached per engine and options
    assert asker.policy.statement_verbs == {"select"}  # the read-only app policy applied


def test_grid_session_runs_inside_the_session_transaction(
    chinook_engine: sa.Engine, opts: dict[str, Any]
) -> None:
    factory = sessionmaker(chinook_engine, class_=GridSession, grid_options=opts)
    with factory() as session:
        assert isinstance(session, Session)
        session.execute(sa.text("INSERT INTO Genre (GenreId, Name) VALUES (999, 'Zydeco')"))
        result = session.ask(Q_GENRES)
        _check(result)
        # the question ran on the session's connection (it sees the uncommitted row if it
        # reads Genre) and left the session's transaction open and intact
        assert session.in_transaction()
        assert (
            session.execute(sa.text("SELECT count(*) FROM Genre WHERE GenreId = 999")).scalar() == 1
        )
        ran = _rows_as_run(session.connection(), result)
        assert Counter(repr(tuple(r)) for r in result.rows) <= ran
        session.rollback()
        assert (
            session.execute(sa.text("SELECT count(*) FROM Genre WHERE GenreId = 999")).scalar() == 0
        )
    # the same Asker served the session (cache keyed on the engine) until forget()
    assert asker_for(chinook_engine, **opts) is asker_for(chinook_engine, **dict(opts))
    forget(chinook_engine)
    assert chinook_engine not in sa_front._ASKERS


@pytest.mark.slow  # builds a PostgreSQL Asker: 4-75 s here, load-dependent
@pytest.mark.db
def test_grid_session_on_postgresql(pg_url: sa.URL, backend: Any, audit_db: Any) -> None:
    engine = sa.create_engine(pg_url)
    grid = {"model": backend, "audit": audit_db, "examples": few_shot(), "max_tokens": 32}
    factory = sessionmaker(engine, class_=GridSession, grid_options=grid)
    with factory() as session:
        session.execute(sa.text("CREATE TEMP TABLE scratch (a int)"))
        session.execute(sa.text("INSERT INTO scratch VALUES (1)"))
        result = session.ask(Q_1959)
        _check(result)
        # READ ONLY + statement_timeout were scoped to a SAVEPOINT: the session can still write
        session.execute(sa.text("INSERT INTO scratch VALUES (2)"))
        assert session.execute(sa.text("SELECT count(*) FROM scratch")).scalar() == 2
        assert session.execute(sa.text("SHOW transaction_read_only")).scalar() == "off"
        session.rollback()
    engine.dispose()


@pytest.mark.slow  # builds a MariaDB Asker: 4-75 s here, load-dependent
@pytest.mark.db
def test_grid_session_on_mariadb_uses_its_own_connection(
    my_url: sa.URL, backend: Any, audit_db: Any
) -> None:
    engine = sa.create_engine(my_url)
    grid = {"model": backend, "audit": audit_db, "examples": few_shot(), "max_tokens": 32}
    factory = sessionmaker(engine, class_=GridSession, grid_options=grid)
    with factory() as session:
        session.execute(sa.text("SELECT 1"))  # the session's transaction is open on the server
        result = session.ask(Q_1959)
        _check(result)
        assert session.in_transaction()  # not committed behind the caller's back
        assert session.execute(sa.text("SELECT count(*) FROM album")).scalar() == 4
    engine.dispose()
