"""Safe execution of one generated statement: one statement, read-only by default, bounded.

Why the database enforces it again: the grammar and the post-parse checker decide what may be
*generated*; this module makes the server itself refuse anything else at run time, so a
statement handed in from elsewhere (or a checker gap) still cannot write. Concretely:

* exactly one statement (sqlglot-parsed; several, or none, is a :class:`StatementError` and
  nothing runs);
* a statement that does not write runs inside a READ ONLY transaction (PostgreSQL
  ``SET TRANSACTION READ ONLY``, MySQL/MariaDB ``START TRANSACTION READ ONLY``, SQLite
  ``PRAGMA query_only = ON``) that is rolled back afterwards;
* a writing statement runs only when the role's policy has its verb *and* the caller opted in
  (``allow_writes=True``), inside a transaction committed only on success;
* a statement timeout (PostgreSQL ``statement_timeout``, MariaDB ``max_statement_time``, MySQL
  ``max_execution_time``, SQLite a progress handler that interrupts the VM);
* ``dry_run=True``: a writing statement runs in its transaction and is rolled back, with
  what it would change reported (:mod:`grid_sql.ask.preview`);
* a row cap: at most ``row_limit + 1`` rows are fetched (server-side cursor where the driver has
  one) and ``truncated`` says whether more existed; a byte cap (``byte_limit``, default 16 MiB,
  :mod:`grid_sql.ask.caps`) likewise.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..dialect import Dialect
from ..errors import (
    ConnectionLostError,
    ConnectionStateError,
    ExecutionError,
    OptionError,
    StatementError,
    StatementTimeout,
    WriteRefused,
)
from ..policy.checker import sqlglot_read
from ..policy.checker import statement_verb as node_verb
from ..policy.model import Policy
from ..policy.sqlparse import parse as guarded_parse
from ..schema.faults import SLACK_S, answer_deadline, check_timeout, is_connection_lost
from ..schema.introspect import connect, dialect_name
from .caps import DEFAULT_BYTE_LIMIT, check_byte_limit, close_result, fetch_capped
from .preview import WritePreview, check_previewable, take_sample


@dataclass
class Execution:
    """What one statement returned: capped rows, whether more existed, and how long it took."""

    sql: str
    verb: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    rowcount: int
    seconds: float
    wrote: bool
    preview: WritePreview | None = None  # dry_run: what the rolled-back write would change


def statement_verb(sql: str, dialect: str) -> str:
    """The verb of the single statement in ``sql`` (``select``, ``insert``, ..., ``write_cte``;
    ``policy.checker.statement_verb``).

    Raises :class:`StatementError` for an empty text, several statements, or SQL sqlglot
    cannot parse: execution is fail-closed, so a statement whose kind we cannot tell never runs.
    """
    if not sql or not sql.strip():
        raise StatementError("no SQL statement to execute (empty text)")
    try:
        parsed = [s for s in guarded_parse(sql, sqlglot_read(dialect)) if s]
    except (ParseError, TokenError) as exc:
        raise StatementError(f"cannot parse the SQL to execute ({dialect}): {exc}") from exc
    if len(parsed) != 1:
        raise StatementError(
            f"exactly one SQL statement may be executed, got {len(parsed)}: nothing was run"
        )
    stmt = parsed[0]
    params = _parameters(stmt, dialect)
    if params:
        raise StatementError(
            f"the statement has bind parameter(s) {', '.join(params)} and no values to bind: "
            "nothing was run"
        )
    verb = node_verb(stmt)
    if verb == "select" and _writes_in_query(stmt):
        return "write_cte"
    return verb


def _parameters(stmt: exp.Expr, dialect: str) -> list[str]:
    """Bind parameters (``?``, ``:name``, ``$1``, ``%s``; SQLite ``@x``) in the statement.

    Why refuse them: generated SQL comes with no values to bind, so a parameter is either an
    error at the driver or, worse, silently bound to something the caller did not intend.
    MySQL's ``@x`` is a user variable, not a parameter, and is left alone.
    """
    d = Dialect.find(dialect)
    kinds: tuple[type[exp.Expr], ...] = (
        (exp.Placeholder,)
        if d is not None and d.user_variables
        else (exp.Placeholder, exp.Parameter)
    )
    return sorted({node.sql() for node in stmt.find_all(*kinds)})


def bind_parameters(sql: str, dialect: str) -> list[str]:
    """The bind parameters of ``sql`` (empty when it has none or does not parse)."""
    try:
        parsed = [s for s in guarded_parse(sql, sqlglot_read(dialect)) if s]
    except (ParseError, TokenError):
        return []
    return sorted({p for stmt in parsed for p in _parameters(stmt, dialect)})


def _writes_in_query(stmt: exp.Expr) -> bool:
    """A query with a data-modifying CTE or SELECT ... INTO writes."""
    if stmt.find(exp.Insert, exp.Update, exp.Delete, exp.Merge) is not None:
        return True
    return bool(stmt.args.get("into"))


def _strip(sql: str) -> str:
    """The statement without trailing whitespace and semicolons (drivers take one statement)."""
    return sql.strip().rstrip(";").rstrip()


def _is_timeout(dialect: str, exc: sa.exc.DBAPIError) -> bool:
    found = Dialect.find(dialect)
    return found is not None and found.is_timeout(exc.orig)


def execute(
    bind: Engine | Connection | str | sa.URL,
    sql: str,
    *,
    policy: Policy | None = None,
    allow_writes: bool = False,
    row_limit: int = 1000,
    timeout_s: float = 30.0,
    byte_limit: int = DEFAULT_BYTE_LIMIT,
    dry_run: bool = False,
) -> Execution:
    """Run exactly one statement under the rules in the module docstring.

    ``policy`` is the role's effective policy; without one only non-writing statements run.
    Raises :class:`StatementError` (not one statement), :class:`WriteRefused` (a write the
    grants or the caller do not allow), :class:`StatementTimeout`, :class:`ExecutionError`.
    """
    if row_limit < 0:
        raise OptionError("row_limit must be >= 0")
    timeout_s = check_timeout(timeout_s)
    byte_limit = check_byte_limit(byte_limit)
    deadline = time.monotonic() + timeout_s + SLACK_S
    conn, owned = connect(bind, timeout_s=timeout_s)
    try:
        dialect = dialect_name(conn)
        verb = statement_verb(sql, dialect)
        writes = verb != "select"
        if writes:
            _authorize_write(verb, sql, policy, allow_writes)
            if dry_run:
                check_previewable(verb, dialect)
        preview = _Preview(policy) if dry_run and writes else None
        args = (dialect, _strip(sql), verb, writes, row_limit, timeout_s, byte_limit, preview)
        try:
            return _bounded(conn, deadline, *args)
        except _Lost as lost:
            if writes or not owned or lost.deadline_hit or time.monotonic() >= deadline:
                raise lost.error from lost.error.__cause__
            # a stale connection the pool handed out (a bind without pre-ping): a read that
            # changed nothing is tried once more on a fresh connection before it is judged
            conn.close()
            conn, owned = connect(bind, timeout_s=timeout_s)
            try:
                return _bounded(conn, deadline, *args)
            except _Lost as again:
                raise again.error from again.error.__cause__
    finally:
        if owned:
            conn.close()


@dataclass(frozen=True)
class _Preview:
    """Internal: a dry run was asked for (with the policy the sample's columns obey)."""

    policy: Policy | None


class _Lost(Exception):
    """Internal: the connection was lost (``error`` is what the caller sees)."""

    def __init__(self, error: ConnectionLostError, deadline_hit: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.deadline_hit = deadline_hit


def _bounded(
    conn: Connection,
    deadline: float,
    dialect: str,
    sql: str,
    verb: str,
    writes: bool,
    row_limit: int,
    timeout_s: float,
    byte_limit: int,
    preview: _Preview | None,
) -> Execution:
    """:func:`_run` cut off at ``deadline`` (a server that stops answering), with a lost
    connection told apart from a statement the database refused (grid_sql/schema/faults)."""
    with answer_deadline(conn, deadline - time.monotonic()) as fired:
        try:
            return _run(conn, dialect, sql, verb, writes, row_limit, timeout_s, byte_limit, preview)
        except ExecutionError as exc:
            cause = exc.__cause__
            if not (fired() or is_connection_lost(cause)):
                raise
            try:
                conn.invalidate()
            except sa.exc.SQLAlchemyError:  # pragma: no cover - already invalidated
                pass
            if fired():
                why = (
                    f"the server did not answer within {timeout_s:g}s + {SLACK_S:g}s slack; "
                    "the connection was closed"
                )
            else:
                why = f"the connection to the server was lost: {str(exc).split(': ', 1)[-1]}"
            err = ConnectionLostError(f"{why} (not a refusal of the statement)")
            err.__cause__ = cause
            raise _Lost(err, fired()) from cause


def _authorize_write(verb: str, sql: str, policy: Policy | None, allow_writes: bool) -> None:
    if policy is None or verb not in policy.statement_verbs:
        who = f"role {policy.role!r}" if policy is not None else "an unknown role"
        raise WriteRefused(
            f"{verb.upper()} is not allowed: the grants of {who} do not include it "
            "(nothing was run)",
            [f"statement verb {verb!r} is not granted"],
            sql=sql,
        )
    if not allow_writes:
        raise WriteRefused(
            f"{verb.upper()} writes to the database; pass allow_writes=True (CLI: "
            "--allow-writes) to run writing statements the role is granted (nothing was run)",
            [f"statement verb {verb!r} needs allow_writes=True"],
            sql=sql,
        )


def _run(
    conn: Connection,
    dialect: str,
    sql: str,
    verb: str,
    writes: bool,
    row_limit: int,
    timeout_s: float,
    byte_limit: int,
    preview: _Preview | None = None,
) -> Execution:
    d = Dialect.find(dialect)
    if conn.in_transaction() and d is not None and d.explicit_begin:
        # START TRANSACTION would silently commit the caller's open transaction.
        raise ConnectionStateError(
            f"the {d.label} connection has an open transaction; grid-sql runs each "
            "statement in its own (READ ONLY) transaction, so commit or roll back first"
        )
    outer = conn.in_transaction()
    t0 = time.perf_counter()
    trans = conn.begin_nested() if outer else conn.begin()
    try:
        with _guard(conn, dialect, writes, timeout_s):
            # A server-side cursor bounds what a huge result costs; PostgreSQL only declares
            # cursors over queries, so writes (RETURNING) use the ordinary cursor.
            before = (
                None if preview is None else take_sample(conn, sql, dialect, verb, preview.policy)
            )
            opts: dict[str, Any] = {"no_parameters": True}
            if not writes:
                opts.update(stream_results=True, max_row_buffer=row_limit + 1)
            result = conn.exec_driver_sql(sql, execution_options=opts)
            if result.returns_rows:
                columns = list(result.keys())
                rows, truncated = fetch_capped(result, row_limit, byte_limit)
                close_result(conn, result, dialect, truncated and not writes)
                rowcount = len(rows) if not writes else max(result.rowcount, len(rows))
            else:
                columns, rows, truncated = [], [], False
                rowcount = max(result.rowcount, 0)
        if writes and before is None:
            trans.commit()
        elif before is not None:  # a previewed write: counted, then undone
            before.rowcount = rowcount
            trans.rollback()
        else:
            trans.rollback()  # nothing to keep; also drops SET LOCAL / READ ONLY state
    except sa.exc.DBAPIError as exc:
        _rollback(trans)
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        if _is_timeout(dialect, exc):
            raise StatementTimeout(
                f"statement cancelled after the {timeout_s:g}s time limit: {reason}"
            ) from exc
        raise ExecutionError(f"the database rejected the statement: {reason}") from exc
    except BaseException:
        _rollback(trans)
        raise
    return Execution(
        sql=sql,
        verb=verb,
        columns=columns,
        rows=rows,
        truncated=truncated,
        rowcount=rowcount,
        seconds=time.perf_counter() - t0,
        wrote=writes and before is None,
        preview=before,
    )


def _rollback(trans: sa.engine.Transaction) -> None:
    if trans.is_active:
        try:
            trans.rollback()
        except sa.exc.DBAPIError:  # pragma: no cover - connection lost mid-rollback
            pass


@contextmanager
def _guard(conn: Connection, dialect: str, writes: bool, timeout_s: float) -> Iterator[None]:
    """Transaction mode and timeout, set inside the transaction just begun (the dialect's
    :meth:`~grid_sql.dialect.Dialect.guard`)."""
    found = Dialect.find(dialect)
    if found is None:
        raise ExecutionError(f"no safe execution mode for dialect {dialect!r}")
    with found.guard(conn, writes=writes, timeout_s=timeout_s):
        yield
