"""SQL dialects as objects: one class per dialect declaring its differences (docs/dialects.md).

``Dialect.get("postgres")`` returns the shared :class:`PostgreSQL` instance; callers ask it
(``d.fold(name)``, ``d.guard(conn, ...)``, ``d.system_schemas``) instead of branching on a
dialect's name.
"""

from __future__ import annotations

from .base import Dialect, UnknownDialectError
from .mysql import MySQL
from .postgresql import PostgreSQL
from .sqlite import SQLite

__all__ = ["Dialect", "MySQL", "PostgreSQL", "SQLite", "UnknownDialectError", "get_dialect"]


def get_dialect(name: str | Dialect) -> Dialect:
    """:meth:`Dialect.get`: the dialect called ``name`` (or an alias); raises
    :class:`UnknownDialectError`."""
    return Dialect.get(name)
