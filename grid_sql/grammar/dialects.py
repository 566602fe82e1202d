"""The dialect registry: shipped L1 grammars for SQLite, PostgreSQL and MySQL/MariaDB.

Grammars live as lark files in ``dialects/`` (repo root in a development checkout, and
``grid_sql/dialects`` inside a wheel). Loading builds the LALR(1) tables, so each dialect is
loaded once per process and shared: every role projection derives from the same L1 object.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..dialect import Dialect
from ..errors import GrammarError
from .ir import Grammar

DIALECTS = Dialect.names()  # one grammar file per registered dialect

_LOADED: dict[str, Grammar] = {}
_LOCK = threading.Lock()


def dialects_dir() -> Path:
    """Where the dialect grammar files are (wheel layout first, then the source tree)."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "dialects", here.parent / "dialects"):
        if (cand / "common.lark").is_file():
            return cand
    raise GrammarError(f"dialect grammars not found next to {here}")


def canonical_dialect(name: str) -> str:
    """The registered dialect's name for ``name`` or an alias (``postgres`` → ``postgresql``);
    raises :class:`grid_sql.dialect.UnknownDialectError` (a :class:`GrammarError`)."""
    return Dialect.get(name).name


def load_dialect(name: str) -> Grammar:
    """The L1 grammar of dialect ``name`` (cached per process)."""
    key = canonical_dialect(name)
    with _LOCK:
        g = _LOADED.get(key)
        if g is None:
            d = dialects_dir()
            path = d / f"{key}.lark"
            g = Grammar.from_lark(
                path.read_text(), "start", import_paths=[d], source_path=path, name=key
            )
            _LOADED[key] = g
    return g
