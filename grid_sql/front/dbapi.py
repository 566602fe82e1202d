"""PEP 249 front: a driver connection that also answers questions.

``grid_sql.connect(target)`` wraps a real DB-API connection (sqlite3, psycopg, PyMySQL) or
opens one from a URL. Its cursors are the driver's cursors with one method more:
``nl_execute(question)`` asks the bound :class:`~grid_sql.ask.asker.Asker` and exposes the
answer through the standard cursor surface (``description``, ``rowcount``, ``fetch*``,
iteration), plus ``last_sql``, ``audit_id`` and ``result``. Everything else is delegated,
so existing DB-API code keeps working unchanged.

Why one physical connection: the question runs on the same driver connection the caller's
cursors use (an SQLAlchemy engine whose pool hands out exactly that connection), so it sees the
same session settings, temporary tables and committed data. The Asker runs each statement in
its own READ ONLY transaction (rolled back) and needs a clean transaction state for that, so
``nl_execute`` refuses to start while the caller has uncommitted work instead of silently
committing or discarding it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.pool import StaticPool

from ..ask.result import AskResult
from ..errors import ConnectionConfigError, ConnectionStateError
from ..schema.faults import redact
from ..schema.introspect import make_engine

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..ask.asker import Asker

__all__ = ["Connection", "Cursor", "connect"]

# Driver connection class (module, name) -> SQLAlchemy URL that selects the matching dialect.
_DRIVER_URLS: dict[tuple[str, str], str] = {
    ("sqlite3", "Connection"): "sqlite://",
    ("psycopg", "Connection"): "postgresql+psycopg://",
    ("pymysql.connections", "Connection"): "mysql+pymysql://",
}


def _driver_url(raw: Any) -> str:
    """The dialect URL for a driver connection (its class or a base class is registered)."""
    for klass in type(raw).__mro__:
        url = _DRIVER_URLS.get((klass.__module__, klass.__name__))
        if url is not None:
            return url
    known = ", ".join(f"{m}.{n}" for m, n in _DRIVER_URLS)
    raise ConnectionConfigError(
        f"grid_sql.connect() cannot wrap a {type(raw).__module__}.{type(raw).__qualname__}: "
        f"pass a database URL or one of: {known}"
    )


def _in_transaction(raw: Any) -> bool:
    """Whether the driver connection has uncommitted work (each driver says it differently)."""
    if hasattr(raw, "in_transaction") and not callable(raw.in_transaction):  # sqlite3
        return bool(raw.in_transaction)
    info = getattr(raw, "info", None)
    status = getattr(info, "transaction_status", None)
    if status is not None:  # psycopg: IDLE == 0
        return int(status) != 0
    server_status = getattr(raw, "server_status", None)
    if server_status is not None:  # PyMySQL: SERVER_STATUS_IN_TRANS == 1
        return bool(int(server_status) & 1)
    return False


def _engine_for(target: Any) -> tuple[sa.Engine, bool]:
    """An engine whose single pooled connection is the caller's (or a new) driver connection.

    Returns the engine and whether grid-sql opened the driver connection. The pool never resets
    the connection on return: rolling back there would throw away the caller's work.
    """
    if isinstance(target, str | os.PathLike):
        text = os.fspath(target)
        if "://" not in text:
            path = Path(text)
            if not path.is_file():
                raise ConnectionConfigError(
                    f"{redact(text, text)!r} is neither a database URL nor an existing SQLite file"
                )
            text = f"sqlite:///{path.resolve()}"
        return make_engine(text, poolclass=StaticPool, pool_reset_on_return=None), True
    if _in_transaction(target):
        raise ConnectionStateError(
            "the connection has an open transaction; commit() or rollback() before "
            "grid_sql.connect() wraps it (SQLAlchemy's first-connect set-up ends the transaction)"
        )
    url = _driver_url(target)
    engine = sa.create_engine(
        url, creator=lambda: target, poolclass=StaticPool, pool_reset_on_return=None
    )
    return engine, False


class Connection:
    """A PEP 249 connection: the driver's, plus :meth:`ask` and cursors with ``nl_execute``.

    ``asker_opts`` are :class:`~grid_sql.ask.asker.Asker` keyword arguments (``model``,
    ``policy``, ``audit``, ``row_limit``, ...). The Asker (model load, introspection, grammar
    compilation) is built on the first question, so plain SQL through this connection costs
    nothing extra. Attributes the wrapper does not define are read from the driver connection.
    """

    def __init__(self, engine: sa.Engine, *, owned: bool, asker_opts: dict[str, Any]) -> None:
        self._engine = engine
        self._owned = owned
        self._asker_opts = dict(asker_opts)
        self._asker: Asker | None = None
        try:
            fairy = engine.raw_connection()  # raises the driver's own errors, unwrapped
        except (sa.exc.DBAPIError, engine.dialect.loaded_dbapi.Error) as exc:
            shown = engine.url.render_as_string(hide_password=True)
            orig = getattr(exc, "orig", None) or exc
            reason = str(orig).strip().splitlines()[0]
            raise ConnectionConfigError(f"cannot connect to {shown}: {reason}") from exc
        self._raw: Any = fairy.driver_connection
        fairy.close()  # back to the static pool; the driver connection stays open
        self._closed = False

    @property
    def driver_connection(self) -> Any:
        """The underlying DB-API connection."""
        return self._raw

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine the Asker runs on (its one connection is this one)."""
        return self._engine

    @property
    def asker(self) -> Asker:
        """The :class:`~grid_sql.ask.asker.Asker` bound to this connection, built on first use."""
        self._check_open()
        if self._asker is None:
            from ..ask.asker import Asker

            self._asker = Asker(self._engine, **self._asker_opts)
        return self._asker

    def ask(self, question: str, **options: Any) -> AskResult:
        """Answer ``question`` on this connection (see :meth:`Cursor.nl_execute`)."""
        self._check_open()
        if _in_transaction(self._raw):
            raise ConnectionStateError(
                "the connection has uncommitted work; commit() or rollback() before asking: "
                "grid-sql runs the generated statement in its own READ ONLY transaction"
            )
        asker = self.asker
        # psycopg in autocommit mode would ignore SET TRANSACTION READ ONLY: turn it off while
        # the question runs so the server enforces read-only, then restore the caller's mode.
        autocommit = getattr(self._raw, "autocommit", None)
        psycopg_autocommit = autocommit is True and hasattr(self._raw, "info")
        if psycopg_autocommit:
            self._raw.autocommit = False
        try:
            return asker.ask(question, **options)
        finally:
            if psycopg_autocommit:
                self._raw.rollback()  # nothing of ours is pending; allows switching back
                self._raw.autocommit = True

    def cursor(self, *args: Any, **kwargs: Any) -> Cursor:
        self._check_open()
        return Cursor(self, self._raw.cursor(*args, **kwargs))

    def commit(self) -> None:
        self._check_open()
        self._raw.commit()

    def rollback(self) -> None:
        self._check_open()
        self._raw.rollback()

    def close(self) -> None:
        """Close the driver connection (as the driver's ``close()`` would); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._asker = None
        try:
            self._raw.close()
        finally:
            if self._owned:
                self._engine.dispose()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionStateError("the grid-sql connection is closed")

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # PEP 249 leaves it open; we follow sqlite3/psycopg: commit on success, roll back on error
        if self._closed:
            return
        if exc_type is None:
            self._raw.commit()
        else:
            self._raw.rollback()
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._raw, name)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<grid_sql.Connection {state} {self._engine.url!s} over {type(self._raw).__name__}>"


class Cursor:
    """The driver's cursor plus :meth:`nl_execute`; after a question the standard API reads the
    answer (``description``, ``rowcount``, ``fetchone``/``fetchmany``/``fetchall``, iteration)
    until the next ``execute``."""

    def __init__(self, connection: Connection, raw: Any) -> None:
        self.connection = connection
        self._raw = raw
        self._result: AskResult | None = None
        self._pos = 0
        self.last_sql: str | None = None
        self.audit_id: str | None = None

    # -- the question ---------------------------------------------------------------------
    def nl_execute(self, question: str, **options: Any) -> Cursor:
        """Answer ``question``: generate under the role's grammar, check, execute, and make the
        rows readable through this cursor. Options go to :meth:`Asker.ask`.

        Raises the Asker's typed errors (nothing is executed then); the cursor's previous
        result is discarded either way.
        """
        self._result = None
        self._pos = 0
        result = self.connection.ask(question, **options)
        self._result = result
        self.last_sql = result.sql
        self.audit_id = result.audit_id
        return self

    @property
    def result(self) -> AskResult | None:
        """The :class:`AskResult` of the last ``nl_execute`` (None after a plain ``execute``)."""
        return self._result

    # -- PEP 249 ----------------------------------------------------------------------------
    @property
    def description(self) -> tuple[tuple[Any, ...], ...] | None:
        if self._result is not None:
            if not self._result.columns:
                return None
            return tuple((c, None, None, None, None, None, None) for c in self._result.columns)
        desc = self._raw.description
        return None if desc is None else tuple(tuple(d) for d in desc)

    @property
    def rowcount(self) -> int:
        if self._result is not None:
            return self._result.rowcount
        return int(self._raw.rowcount)

    @property
    def arraysize(self) -> int:
        return int(self._raw.arraysize)

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._raw.arraysize = value

    def execute(self, operation: Any, parameters: Any = None) -> Cursor:
        self._result = None
        if parameters is None:
            self._raw.execute(operation)
        else:
            self._raw.execute(operation, parameters)
        return self

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Cursor:
        self._result = None
        self._raw.executemany(operation, seq_of_parameters)
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._result is None:
            row = self._raw.fetchone()
            return None if row is None else tuple(row)
        if self._pos >= len(self._result.rows):
            return None
        row = self._result.rows[self._pos]
        self._pos += 1
        return tuple(row)

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        n = self.arraysize if size is None else size
        if self._result is None:
            return [tuple(r) for r in self._raw.fetchmany(n)]
        rows = self._result.rows[self._pos : self._pos + n]
        self._pos += len(rows)
        return [tuple(r) for r in rows]

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._result is None:
            return [tuple(r) for r in self._raw.fetchall()]
        rows = self._result.rows[self._pos :]
        self._pos = len(self._result.rows)
        return [tuple(r) for r in rows]

    def close(self) -> None:
        self._result = None
        self._raw.close()

    def setinputsizes(self, sizes: Sequence[Any]) -> None:
        """PEP 249 allows a no-op; the drivers wrapped here ignore it too."""

    def setoutputsize(self, size: int, column: int | None = None) -> None:
        """PEP 249 allows a no-op."""

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._raw, name)


def connect(target: Any, **asker_opts: Any) -> Connection:
    """Wrap a DB-API connection, or open one from a URL (or SQLite file path).

    ``target``: a ``sqlite3.Connection``, ``psycopg.Connection``,
    ``pymysql.connections.Connection``, an SQLAlchemy URL string
    (``postgresql+psycopg://user@host/db``, ``mysql+pymysql://...``, ``sqlite:///file``) or the
    path of an SQLite file. ``asker_opts`` configure the Asker (``model=``, ``policy=``,
    ``audit=``, ``row_limit=``, ``timeout_s=``, ...). Raises :class:`ConnectionConfigError` for a
    bad URL, an unreachable server or an unsupported object.
    """
    engine, owned = _engine_for(target)
    return Connection(engine, owned=owned, asker_opts=asker_opts)
