"""The dialect registry: shipped L1 grammars for SQLite, PostgreSQL and MySQL/MariaDB.

Grammars live as lark files in ``dialects/`` (repo root in a development checkout, and
``grid_sql/dialects`` inside a wheel). The loader itself is in :mod:`grid_sql.grammar.ir`
(beside ``Grammar.dialect``, so the two modules do not import each other); this module names
the dialects and re-exports it.
"""

from __future__ import annotations

from ..dialect import Dialect
from .ir import canonical_dialect, dialects_dir, load_dialect

__all__ = ["DIALECTS", "canonical_dialect", "dialects_dir", "load_dialect"]

DIALECTS = Dialect.names()  # one grammar file per registered dialect
