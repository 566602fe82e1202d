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

from collections.abc import Callable

__all__ = ["TYPE_HINTS", "type_hint"]

# PostgreSQL SQLSTATEs of type trouble: undefined_function (an operator or function for these
# argument types: `date ~~ unknown`), datatype_mismatch, cannot_coerce,
# invalid_datetime_format, datetime_field_overflow, invalid_text_representation.
_PG_TYPE_STATES = frozenset({"42883", "42804", "42846", "22007", "22008", "22P02"})
# MySQL/MariaDB: truncated incorrect value (1292), incorrect datetime value for a
# function (1411), incorrect value for a column (1366).
_MYSQL_TYPE_ERRNOS = frozenset({1292, 1411, 1366})

# Which driver codes are type errors, per dialect (the driver's own code: SQLSTATE for
# psycopg, the error number for PyMySQL).
_TYPE_ERROR: dict[str, Callable[[str | None, int | None], bool]] = {
    "postgresql": lambda state, errno: state in _PG_TYPE_STATES,
    "mysql": lambda state, errno: errno in _MYSQL_TYPE_ERRNOS,
}

TYPE_HINTS: dict[str, str] = {
    "postgresql": (
        "PostgreSQL is strict about types: LIKE and text functions need text "
        "(CAST(col AS TEXT) LIKE '2020%'); compare a date or timestamp with a date literal "
        "(col >= DATE '2020-01-01'); take date parts with EXTRACT(YEAR FROM col) or "
        "DATE_TRUNC('month', col); date arithmetic uses intervals "
        "(CURRENT_DATE - INTERVAL '30 days')."
    ),
    "mysql": (
        "MySQL dates: YEAR(col), MONTH(col), DATE_FORMAT(col, '%Y-%m'), "
        "DATE_SUB(CURDATE(), INTERVAL 30 DAY), DATEDIFF(a, b); casts: CAST(x AS DATE), "
        "CAST(x AS CHAR)."
    ),
}


def _code(exc: BaseException) -> tuple[str | None, int | None]:
    """(SQLSTATE, MySQL errno) of the driver error behind an ExecutionError, if any."""
    cause = exc.__cause__
    orig = getattr(cause, "orig", None) or cause
    state = getattr(orig, "sqlstate", None)  # psycopg 3
    args = getattr(orig, "args", ())
    errno = args[0] if args and isinstance(args[0], int) else None  # PyMySQL
    return (state if isinstance(state, str) else None), errno


def type_hint(dialect: str, exc: BaseException) -> str | None:
    """The hint for a database refusal that is a type error in ``dialect``, else None."""
    state, errno = _code(exc)
    is_type_error = _TYPE_ERROR.get(dialect)
    if is_type_error is None or not is_type_error(state, errno):
        return None
    return TYPE_HINTS[dialect]
