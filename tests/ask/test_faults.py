"""Faults fail closed and honestly (issue #23 §6): no password in any error or log line,
stale pooled connections pre-pinged, a lost connection a typed error (never a repair prompt),
connect/read timeouts bounding every call, typed errors for bad options and inputs.

The server tests run against the real PostgreSQL/MariaDB test servers (scripts/services.sh);
the "server that never answers" is a local socket on 127.0.0.1 that accepts and stays silent,
or a TCP relay to the real server that stops relaying.
"""

from __future__ import annotations

import logging
import math
import socket
import sqlite3
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import Asker, check_question
from grid_sql.ask.execute import execute
from grid_sql.errors import (
    ConnectionConfigError,
    ConnectionLostError,
    ExecutionError,
    GridSQLError,
    OptionError,
    PolicyError,
    QuestionError,
)
from grid_sql.schema.faults import SLACK_S
from grid_sql.schema.introspect import connect, make_engine
from tests.servers import server_engine

SECRET = "s3cretPW9"

BAD_URLS = [
    f"postgresql://u:{SECRET}@host:notaport/db",
    f"postgresql+psycopg://u:{SECRET}@[::1/db",
    f"u:{SECRET}@host/db",
    f"mysql+pymysql://u:{SECRET}@h:port/db",
    f"postgresql://u:{SECRET}:more@host:x/db",
    f"postgresql+nosuchdriver://u:{SECRET}@h/db",
    f"postgresql://u:{SECRET}@h:5432x/app.db",
]


def _all_text(exc: BaseException) -> str:
    """The message, the chained causes and the formatted traceback of ``exc``."""
    return "".join(traceback.format_exception(exc)) + str(exc)


@pytest.mark.parametrize("url", BAD_URLS)
def test_bad_url_never_echoes_its_password(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for attempt in (
        lambda: make_engine(url),
        lambda: connect(url),
        lambda: execute(url, "SELECT 1", timeout_s=3),
        lambda: Asker(url, audit=False),
    ):
        with pytest.raises(ConnectionConfigError) as info:
            attempt()
        text = _all_text(info.value)
        assert SECRET not in text, text
        assert "***" in str(info.value) or "password hidden" in str(info.value)
    assert SECRET not in caplog.text


@pytest.mark.parametrize("url", BAD_URLS)
def test_other_entry_points_never_echo_the_password(url: str) -> None:
    import grid_sql
    from grid_sql.audit.store import AuditStore
    from grid_sql.errors import AuditError
    from grid_sql.front.sqlalchemy import engine_for_url

    attempts = [lambda: grid_sql.connect(url, audit=False), lambda: engine_for_url(url)]
    if "://" in url:  # the audit store takes a URL or a file path
        attempts.append(lambda: AuditStore(url))
    for attempt in attempts:
        with pytest.raises((ConnectionConfigError, AuditError)) as info:
            attempt()
        assert SECRET not in _all_text(info.value)


@pytest.mark.parametrize("url", BAD_URLS[:4])
def test_cli_bad_url_never_echoes_its_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from grid_sql.cli import main

    for argv in (
        ["ask", "how many items?", "--db", url, "--no-audit"],
        ["ask", "how many items?", "--db", url, "--no-audit", "--json"],
        ["policy", "explain", "--db", url],
    ):
        rc = main(argv)
        out = capsys.readouterr()
        assert rc != 0
        assert SECRET not in out.out + out.err
        assert "ConnectionConfigError" in out.out + out.err or "URL" in out.out + out.err


# ---------------------------------------------------------------- typed input errors
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0, -1, None, "3"])
def test_non_finite_or_bad_timeouts_are_typed(chinook_copy: Path, bad: object) -> None:
    with pytest.raises(OptionError):
        Asker(chinook_copy, audit=False, timeout_s=bad)  # type: ignore[arg-type]
    asker = Asker(chinook_copy, audit=False)
    with pytest.raises(OptionError):
        asker.run_sql("SELECT 1", timeout_s=bad)
    with pytest.raises(OptionError):
        execute(asker.bind, "SELECT 1", timeout_s=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("question", [None, "how many \ud800 tracks?", "\udfff", 42])
def test_none_and_lone_surrogate_questions_are_typed(chinook_copy: Path, question: object) -> None:
    with pytest.raises(QuestionError):
        check_question(question)
    asker = Asker(chinook_copy, audit=False)  # no model: the question is refused before one
    with pytest.raises(QuestionError):
        asker.ask(question)  # type: ignore[arg-type]
    with pytest.raises(QuestionError):
        asker.messages(question)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.yaml", b"\xff\xfe\x00tables: {}"),
        ("bad.json", b'{"tables": "\xc3\x28"}'),
        ("empty.yaml", b""),
        ("blank.toml", b"  \n\n"),
        ("comments.yaml", b"# nothing here\n"),
        ("noroles.yaml", b"roles:\n"),
        ("emptyroles.yaml", b"roles: {}\n"),
        ("emptyroles.json", b'{"roles": {}}'),
    ],
)
def test_bad_policy_files_are_typed(
    chinook_copy: Path, tmp_path: Path, name: str, content: bytes
) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(PolicyError):
        Asker(chinook_copy, audit=False, policy=p)


def test_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    for target in (
        tmp_path / "missing.sqlite",
        str(tmp_path / "missing.sqlite"),
        f"sqlite:///{tmp_path / 'missing.sqlite'}",
        f"sqlite:///{tmp_path / 'other.data'}",
        f"sqlite:///file:{tmp_path / 'uri.sqlite'}?mode=ro&uri=true",
    ):
        with pytest.raises(ConnectionConfigError, match="not found"):
            Asker(target, audit=False)
    with pytest.raises(ConnectionConfigError):
        execute(f"sqlite:///{tmp_path / 'exec.sqlite'}", "SELECT 1")
    with pytest.raises(ConnectionConfigError):
        make_engine(f"sqlite:///{tmp_path / 'engine.sqlite'}")
    assert list(tmp_path.iterdir()) == []
    # what must keep working: memory databases and an existing file
    assert execute("sqlite://", "SELECT 1").rows == [(1,)]
    sqlite3.connect(tmp_path / "there.sqlite").close()
    assert execute(f"sqlite:///{tmp_path / 'there.sqlite'}", "SELECT 2").rows == [(2,)]


# ---------------------------------------------------------------- servers that never answer
@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 whose server accepts every connection and never sends a byte."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except (TimeoutError, OSError):
                continue
            held.append(c)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield lsock.getsockname()[1]
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    lsock.close()


@pytest.mark.parametrize("driver", ["postgresql+psycopg", "mysql+pymysql"])
def test_silent_server_is_a_typed_error_within_the_bound(silent_server: int, driver: str) -> None:
    url = f"{driver}://u:{SECRET}@127.0.0.1:{silent_server}/db"
    timeout = 3.0
    for attempt in (
        lambda: Asker(url, audit=False, timeout_s=timeout),
        lambda: execute(url, "SELECT 1", timeout_s=timeout),
    ):
        t0 = time.monotonic()
        with pytest.raises(ConnectionConfigError) as info:
            attempt()
        took = time.monotonic() - t0
        assert took < timeout + SLACK_S + 1.0, took
        assert SECRET not in _all_text(info.value)


class Relay:
    """A TCP relay on 127.0.0.1 to a real server that can be frozen: while frozen it still
    accepts and holds connections but relays nothing (a server that stopped answering)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.frozen = threading.Event()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        self.stop = threading.Event()
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except (TimeoutError, OSError):
                continue
            self.socks.append(c)
            if self.frozen.is_set():
                continue
            up = socket.create_connection(self.target)
            self.socks.append(up)
            for a, b in ((c, up), (up, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while self.frozen.is_set() and not self.stop.is_set():
                    time.sleep(0.05)
                if self.stop.is_set():
                    break
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.lsock.close()


@pytest.mark.parametrize("server", ["pg", "my"])
def test_server_that_stops_answering_does_not_hang_run_sql(
    server: str,
    pg_front: Callable[[str], sa.URL],
    my_front: Callable[[str], sa.URL],
) -> None:
    url = (pg_front if server == "pg" else my_front)("gs_front_ro")
    relay = Relay(url.host or "127.0.0.1", int(url.port or 0))
    try:
        asker = Asker(url.set(host="127.0.0.1", port=relay.port), audit=False, timeout_s=3)
        assert asker.run_sql("SELECT count(*) FROM item").rows == [(25,)]
        relay.frozen.set()
        t0 = time.monotonic()
        with pytest.raises(ConnectionConfigError) as info:  # ConnectionLostError is one
            asker.run_sql("SELECT count(*) FROM item", timeout_s=3)
        took = time.monotonic() - t0
        assert not isinstance(info.value, ExecutionError)
        # pre-ping cut at SLACK_S, then a reconnect under the 3 s connect timeout
        assert took < 3 + SLACK_S + 1.0, took
    finally:
        relay.close()


# ---------------------------------------------------------------- stale / lost connections
def _terminate(server: str, pid: int) -> None:
    admin = server_engine("GRID_SQL_PG_URL" if server == "pg" else "GRID_SQL_MYSQL_URL")
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if server == "pg":
                assert conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
                for _ in range(50):  # until the backend is really gone
                    gone = not conn.execute(
                        sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}
                    ).scalar()
                    if gone:
                        break
                    time.sleep(0.05)
            else:
                conn.exec_driver_sql(f"KILL CONNECTION {int(pid)}")
    finally:
        admin.dispose()


_PID = {"pg": "SELECT pg_backend_pid()", "my": "SELECT CONNECTION_ID()"}


@pytest.fixture(params=["pg", "my"])
def server_url(
    request: pytest.FixtureRequest,
    pg_front: Callable[[str], sa.URL],
    my_front: Callable[[str], sa.URL],
) -> tuple[str, sa.URL]:
    server = request.param
    return server, (pg_front if server == "pg" else my_front)("gs_front_ro")


def test_stale_pooled_connection_is_pre_pinged(server_url: tuple[str, sa.URL]) -> None:
    """The Asker's pooled connection is killed by an admin; the next run_sql pings it, finds
    it dead, reconnects, and answers correctly."""
    server, url = server_url
    asker = Asker(url, audit=False)
    assert asker.run_sql("SELECT count(*) FROM item").rows == [(25,)]
    pid = execute(asker.bind, _PID[server]).rows[0][0]  # the one pooled connection
    _terminate(server, pid)
    res = asker.run_sql("SELECT count(*) FROM item")
    assert res.rows == [(25,)]
    assert execute(asker.bind, _PID[server]).rows[0][0] != pid


def test_stale_connection_without_pre_ping_is_retried_once(server_url: tuple[str, sa.URL]) -> None:
    """An engine the caller built without pre-ping: the read that meets the dead connection
    is tried once more on a fresh one, never reported as a refused statement."""
    server, url = server_url
    engine = sa.create_engine(url, pool_size=1, max_overflow=0)
    try:
        pid = execute(engine, _PID[server]).rows[0][0]
        _terminate(server, pid)
        res = execute(engine, "SELECT count(*) FROM item")
        assert res.rows == [(25,)]
    finally:
        engine.dispose()


def test_lost_connection_is_a_typed_error_not_a_refusal(server_url: tuple[str, sa.URL]) -> None:
    """A caller's own Connection whose backend is killed: nothing to retry on, so the call
    fails as ConnectionLostError (never ExecutionError, which the repair round would take)."""
    server, url = server_url
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            asker = Asker(conn, audit=False)
            conn.rollback()
            pid = conn.exec_driver_sql(_PID[server]).scalar()
            conn.rollback()
            _terminate(server, int(pid or 0))
            with pytest.raises(ConnectionLostError) as info:
                asker.run_sql("SELECT count(*) FROM item")
            assert not isinstance(info.value, ExecutionError)
            assert isinstance(info.value, GridSQLError)
    finally:
        engine.dispose()


def test_lost_connection_never_reaches_the_repair_round(
    server_url: tuple[str, sa.URL], smollm2: object
) -> None:
    """ask() on a connection killed between generation and execution: the typed error comes
    out and no second (repair) generation runs."""
    server, url = server_url
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            asker = Asker(conn, model=smollm2, audit=False, max_tokens=24)  # type: ignore[arg-type]
            conn.rollback()
            pid = int(conn.exec_driver_sql(_PID[server]).scalar() or 0)
            conn.rollback()
            calls: list[int] = []
            original = asker.generate_sql

            def counting(question: str, **options: object) -> object:
                calls.append(1)
                out = original(question, **options)
                _terminate(server, pid)  # the statement will meet a dead connection
                return out

            asker.generate_sql = counting  # type: ignore[method-assign]
            with pytest.raises(ConnectionLostError):
                asker.ask("How many items are there?")
            assert calls == [1]
    finally:
        engine.dispose()


@pytest.mark.parametrize("server", ["pg", "my"])
def test_server_that_stops_answering_mid_statement_is_cut_at_the_bound(
    server: str,
    pg_front: Callable[[str], sa.URL],
    my_front: Callable[[str], sa.URL],
) -> None:
    """A connection already checked out (no pre-ping to save it): the statement's answer
    never comes, the socket is cut at timeout_s + SLACK_S, ConnectionLostError."""
    url = (pg_front if server == "pg" else my_front)("gs_front_ro")
    relay = Relay(url.host or "127.0.0.1", int(url.port or 0))
    engine = sa.create_engine(url.set(host="127.0.0.1", port=relay.port))
    try:
        with engine.connect() as conn:
            assert execute(conn, "SELECT count(*) FROM item", timeout_s=2).rows == [(25,)]
            relay.frozen.set()
            t0 = time.monotonic()
            with pytest.raises(ConnectionLostError, match="did not answer"):
                execute(conn, "SELECT count(*) FROM item", timeout_s=2)
            took = time.monotonic() - t0
            assert 2 <= took < 2 + SLACK_S + 1.0, took
    finally:
        relay.close()
        engine.dispose()


# ---------------------------------------------------------------- byte cap
def test_results_are_capped_by_bytes_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "big.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "é" * 500) for i in range(100)])
    con.commit()
    con.close()
    res = execute(f"sqlite:///{db}", "SELECT body FROM t ORDER BY id", byte_limit=10_000)
    assert len(res.rows) == 10 and res.truncated  # 1000 UTF-8 bytes a row
    res = execute(f"sqlite:///{db}", "SELECT body FROM t ORDER BY id", byte_limit=10**6)
    assert len(res.rows) == 100 and not res.truncated
    res = execute(f"sqlite:///{db}", "SELECT body FROM t", row_limit=5, byte_limit=10**6)
    assert len(res.rows) == 5 and res.truncated
    for bad in (-1, 1.5, None, True):
        with pytest.raises(OptionError):
            execute(f"sqlite:///{db}", "SELECT 1", byte_limit=bad)  # type: ignore[arg-type]


def test_results_are_capped_by_bytes_on_servers(server_url: tuple[str, sa.URL]) -> None:
    _server, url = server_url
    engine = make_engine(url)
    try:
        # names 'item 1'..'item 25': 6 or 7 bytes, ids 1 or 2 characters
        res = execute(engine, "SELECT id, name FROM item ORDER BY id", byte_limit=70)
        assert [r[0] for r in res.rows] == list(range(1, 10)) and res.truncated
        full = execute(engine, "SELECT id, name FROM item ORDER BY id")
        assert len(full.rows) == 25 and not full.truncated
    finally:
        engine.dispose()


def test_mariadb_stops_reading_at_the_cap(my_front: Callable[[str], sa.URL]) -> None:
    """An unbuffered MariaDB result is no longer drained to its end past a cap (4 M rows of
    the SEQUENCE engine took seconds to drain; killed, it ends at once), and the pooled
    connection stays usable."""
    engine = make_engine(my_front("gs_front_ro"))
    big = "SELECT a.seq, REPEAT('x', 100) FROM seq_1_to_4000000 a"
    try:
        for kw in ({"row_limit": 10}, {"byte_limit": 2000}):
            t0 = time.monotonic()
            res = execute(engine, big, timeout_s=60, **kw)  # type: ignore[arg-type]
            took = time.monotonic() - t0
            assert res.truncated and 0 < len(res.rows) <= 20  # ~105 bytes a row
            assert res.rows[0][0] == 1
            assert took < 1.0, took
            assert execute(engine, "SELECT count(*) FROM item").rows == [(25,)]
    finally:
        engine.dispose()


# ---------------------------------------------------------------- session-state functions
SESSION_STATE = {
    "pg": [
        "pg_advisory_lock(424242)",
        "pg_advisory_lock_shared(424242)",
        "pg_try_advisory_lock(424242)",
        "pg_advisory_xact_lock(424242)",
        "pg_try_advisory_xact_lock_shared(424242)",
        "pg_advisory_unlock(424242)",
        "pg_advisory_unlock_all()",
        "set_config('work_mem', '1MB', false)",
        "pg_sleep(0)",
        "nextval('item_id_seq')",
    ],
    "my": [
        "GET_LOCK('gs424242', 0)",
        "RELEASE_LOCK('gs424242')",
        "RELEASE_ALL_LOCKS()",
        "IS_FREE_LOCK('gs424242')",
        "IS_USED_LOCK('gs424242')",
        "SLEEP(0)",
        "LAST_INSERT_ID(5)",
    ],
}


def test_lock_and_session_state_functions_are_outside_the_allow_list(
    server_url: tuple[str, sa.URL],
) -> None:
    from grid_sql.errors import PolicyViolation

    server, url = server_url
    asker = Asker(url, audit=False)
    for call in SESSION_STATE[server]:
        for sql in (f"SELECT {call}", f"SELECT id FROM item WHERE id = 1 AND {call} IS NOT NULL"):
            with pytest.raises(PolicyViolation):
                asker.run_sql(sql)


@pytest.mark.parametrize("server", ["pg", "my"])
def test_asker_on_a_server_gone_silent_after_connecting_is_bounded(
    server: str,
    pg_front: Callable[[str], sa.URL],
    my_front: Callable[[str], sa.URL],
) -> None:
    """The catalog reads of Asker() on a connection whose server stops answering are cut at
    timeout_s + SLACK_S: a typed error, not a hang."""
    url = (pg_front if server == "pg" else my_front)("gs_front_ro")
    relay = Relay(url.host or "127.0.0.1", int(url.port or 0))
    engine = sa.create_engine(url.set(host="127.0.0.1", port=relay.port))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1").all()
            conn.rollback()
            relay.frozen.set()
            t0 = time.monotonic()
            with pytest.raises(GridSQLError) as info:
                Asker(conn, audit=False, timeout_s=2)
            took = time.monotonic() - t0
            assert isinstance(info.value, ConnectionLostError), repr(info.value)
            assert 2 <= took < 2 + SLACK_S + 1.0, took
    finally:
        relay.close()
        engine.dispose()


def test_sqlite_lock_wait_is_bounded_by_timeout(chinook_copy: Path) -> None:
    """Another process's write lock: the read waits at most timeout_s (busy timeout), then
    StatementTimeout, which the repair round never takes; the busy timeout is restored."""
    from grid_sql.errors import StatementTimeout

    asker = Asker(chinook_copy, audit=False)
    holder = sqlite3.connect(chinook_copy, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with pytest.raises(StatementTimeout):
            asker.run_sql("SELECT count(*) FROM Album", timeout_s=1)
        assert time.monotonic() - t0 < 1 + SLACK_S
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert asker.run_sql("SELECT count(*) FROM Album").rows == [(347,)]
