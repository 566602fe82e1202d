"""Faults that fail closed and honestly (issue #23 §6).

* **No password in a message.** A URL SQLAlchemy cannot parse has no ``hide_password``
  rendering, so :func:`redact` masks its password by hand, in the URL and in the parser's
  own message, and the parser's exception is not chained (a logged traceback would show it).
* **Finite, positive timeouts** (:func:`check_timeout`): ``nan`` compares false with
  everything, so ``timeout_s <= 0`` let it through to ``SET statement_timeout``.
* **Stale pooled connections** are pre-pinged on checkout (``pool_pre_ping``): a connection
  the server dropped (restart, ``pg_terminate_backend``, idle kill) is replaced before a
  statement is judged on it.
* **Connect and read timeouts** on engines grid-sql creates (:func:`engine_options`):
  psycopg ``connect_timeout``, PyMySQL ``connect_timeout``/``read_timeout`` (its handshake
  read has no bound otherwise), so a server that accepts and never answers cannot hang.
* **A lost connection is not a refusal** (:func:`is_connection_lost`): a disconnect, or a
  server that stops answering (:func:`answer_deadline` cuts the socket at the call's bound),
  is a :class:`~grid_sql.errors.ConnectionLostError`, never fed to the repair round.
"""

from __future__ import annotations

import math
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..dialect import Dialect
from ..errors import ConnectionConfigError, OptionError

SLACK_S = 2.0  # what a call may take beyond its timeout_s: connect, SET, rollback round trips
DEFAULT_TIMEOUT_S = 30.0
_PG_LOST_STATES = frozenset({"57P01", "57P02", "57P03"})  # admin/crash shutdown, cannot connect
# CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED, ER_CONNECTION_KILLED,
# ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8), CR_CONN_HOST_ERROR
_MY_LOST_ERRNOS = frozenset({2006, 2013, 2055, 1927, 4031, 2003})
_LOST_MESSAGES = (
    "server closed the connection unexpectedly",
    "consuming input failed",
    "the connection is closed",
    "the connection is lost",
)


def check_timeout(value: object, name: str = "timeout_s") -> float:
    """``value`` as a finite number of seconds > 0, or :class:`OptionError`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionError(f"{name} must be a number of seconds, got {type(value).__name__}")
    out = float(value)
    if not math.isfinite(out):
        raise OptionError(f"{name} must be finite, got {value!r}")
    if out <= 0:
        raise OptionError(f"{name} must be > 0")
    return out


def url_password(text: str) -> str | None:
    """The password part of a (possibly unparseable) URL string, if it has one."""
    body = text.split("://", 1)[1] if "://" in text else text
    if "@" not in body:
        return None
    userinfo = body.rsplit("@", 1)[0]
    if ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1] or None


def redact(message: str, url_text: str) -> str:
    """``message`` with the password of ``url_text`` (as written and percent-decoded, and
    each ``:``/``@``-separated piece of it) replaced by ``***``."""
    pw = url_password(url_text)
    if not pw:
        return message
    secrets = {pw, unquote(pw)}
    for sep in (":", "@", "/"):
        secrets.update(p for s in list(secrets) for p in s.split(sep) if len(p) >= 3)
    for s in sorted(secrets, key=len, reverse=True):
        message = message.replace(s, "***")
    return message


def parse_url(url: str | sa.URL) -> sa.URL:
    """``sa.make_url`` with a parse failure as :class:`ConnectionConfigError` that echoes
    neither the password nor (through ``__cause__``) the parser's unredacted message."""
    if isinstance(url, sa.URL):
        return url
    text = str(url)
    try:
        return sa.make_url(text)
    except (sa.exc.ArgumentError, ValueError) as exc:
        reason = redact(str(exc), text)
        err = ConnectionConfigError(
            f"invalid database URL {redact(text, text)!r}: {reason} (password hidden)"
        )
    raise err from None


def sqlite_missing(url: sa.URL) -> Path | None:
    """The file a URL of an embedded engine (SQLite) names when it does not exist (connecting
    would create it): ``Dialect.missing_database_file``."""
    d = Dialect.find(url.get_backend_name())
    return None if d is None else d.missing_database_file(url)


def engine_options(url: sa.URL, timeout_s: float, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``create_engine`` keyword arguments with pre-ping and the driver's connect and read
    timeouts bounded by ``timeout_s`` (the caller's own settings win):
    ``Dialect.engine_options`` (an unregistered backend gets the base's pre-ping)."""
    return Dialect.lookup(url.get_backend_name()).engine_options(url, timeout_s, kwargs)


def is_connection_lost(exc: BaseException | None) -> bool:
    """Whether a driver error means the connection is gone (not that the server refused)."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and (state.startswith("08") or state in _PG_LOST_STATES):
        return True
    args = tuple(getattr(orig, "args", ()))
    if args and isinstance(args[0], int) and args[0] in _MY_LOST_ERRNOS:
        return True
    text = str(orig).lower()
    return any(m in text for m in _LOST_MESSAGES)


def _driver_socket(raw: Any) -> socket.socket | None:
    """A socket object for the driver connection (a dup for psycopg's libpq fd)."""
    sock = getattr(raw, "_sock", None)  # PyMySQL
    if isinstance(sock, socket.socket):
        return sock
    pgconn = getattr(raw, "pgconn", None)  # psycopg 3
    fd = getattr(pgconn, "socket", None) if pgconn is not None else None
    if isinstance(fd, int) and fd >= 0:
        return socket.socket(fileno=os.dup(fd))
    return None


@contextmanager
def answer_deadline(conn: Connection, seconds: float) -> Iterator[Callable[[], bool]]:
    """Shut the connection's socket down if the block runs past ``seconds``, so a server that
    stops answering cannot hold the call; yields "did the deadline fire?". SQLite (no socket)
    is left alone: its statements are interrupted by the progress handler."""
    raw: Any
    try:
        raw = conn.connection.dbapi_connection
    except sa.exc.DBAPIError:
        raw = None
    with _raw_deadline(raw, seconds) as fired:
        yield fired


def bound_pre_ping(engine: Engine, seconds: float = SLACK_S) -> None:
    """Give the engine's pre-ping (``pool_pre_ping``) an answer deadline of ``seconds``:
    psycopg has no read timeout, so a ping to a server that stopped answering would hang the
    checkout forever. A cut ping is a disconnect: the pool reconnects, under the driver's
    connect timeout."""
    dialect = engine.dialect
    ping = dialect.do_ping

    def do_ping(dbapi_connection: Any) -> bool:
        with _raw_deadline(dbapi_connection, seconds):
            return ping(dbapi_connection)

    dialect.do_ping = do_ping  # type: ignore[method-assign]


@contextmanager
def _raw_deadline(raw: Any, seconds: float) -> Iterator[Callable[[], bool]]:
    fired = threading.Event()
    sock = _driver_socket(raw) if raw is not None else None
    if sock is None:
        yield fired.is_set
        return
    owned = sock is not getattr(raw, "_sock", None)
    read_timeout = getattr(raw, "_read_timeout", None)
    if read_timeout is not None:  # PyMySQL: its read bound follows this call's
        raw._read_timeout = max(seconds, 0.1)

    def cut() -> None:
        fired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(max(seconds, 0.0), cut)
    timer.daemon = True
    timer.start()
    try:
        yield fired.is_set
    finally:
        timer.cancel()
        if read_timeout is not None:
            raw._read_timeout = read_timeout
        if owned:  # our dup of libpq's descriptor; the connection keeps its own
            sock.close()
