"""A one-line dialect hint for the repair round after a type error (issue #25 §3).

Why: on defog's PostgreSQL questions the statements the database refused were type errors
(``LIKE`` on a date, text compared with a timestamp); quoting the message back alone made the
model write the same statement again. The message says *what* is wrong; a small model also
needs *how* this dialect spells the fix (casts, date parts, date arithmetic). The hint is
chosen by the error's code from the driver (PostgreSQL SQLSTATE, MySQL/MariaDB error
number), never by matching message text, and every function a hint names is in the
dialect's function allow-list (``grid_sql/policy/functions.py``; a test holds that).
SQLite has no type errors to react to (dynamic typing): it gets no hint.
"""

from __future__ import annotations

from ..dialect import Dialect

__all__ = ["TYPE_HINTS", "error_codes", "type_hint"]

# The codes and the hint text are the dialect's (``Dialect.is_type_error``,
# ``Dialect.type_error_hint``); this table is kept for callers and tests.
TYPE_HINTS: dict[str, str] = {
    d.name: d.type_error_hint
    for d in map(Dialect.get, Dialect.names())
    if d.type_error_hint is not None
}


def error_codes(exc: BaseException) -> tuple[str | None, int | None]:
    """(SQLSTATE, MySQL errno) of the driver error behind an ExecutionError, if any."""
    cause = exc.__cause__
    orig = getattr(cause, "orig", None) or cause
    state = getattr(orig, "sqlstate", None)  # psycopg 3
    args = getattr(orig, "args", ())
    errno = args[0] if args and isinstance(args[0], int) else None  # PyMySQL
    return (state if isinstance(state, str) else None), errno


def type_hint(dialect: str, exc: BaseException) -> str | None:
    """The hint for a database refusal that is a type error in ``dialect``, else None."""
    d = Dialect.lookup(dialect)
    if d.type_error_hint is None:
        return None
    state, errno = error_codes(exc)
    return d.type_error_hint if d.is_type_error(state, errno) else None
