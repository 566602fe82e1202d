"""grid-sql: grammar-constrained SQL decoding with exact viable-prefix token masks.

The public API is collected here as the layers land (see ``__all__``). Importing this
package must stay cheap: no torch, transformers, vllm, llama_cpp, pandas or IPython, and
no eager import of the compiled ``grid_sql._kernels`` extension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from . import errors
from .grammar import Grammar, RoleProjection, SchemaLexicon
from .mask.guide import Guide, Matcher
from .mask.vocab import Vocabulary
from .parser import IncrementalParser

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas

    from .front.dbapi import Connection


def connect(target: Any, **asker_opts: Any) -> Connection:
    """PEP 249 connection with ``cursor().nl_execute(question)`` (see ``grid_sql.front.dbapi``)."""
    from .front.dbapi import connect as _connect

    return _connect(target, **asker_opts)


def read_sql_nl(question: str, con: Any, **options: Any) -> pandas.DataFrame:
    """Answer ``question`` on ``con`` as a DataFrame (see ``grid_sql.front.pandas``)."""
    from .front.pandas import read_sql_nl as _read_sql_nl

    return _read_sql_nl(question, con, **options)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext grid_sql``: registers ``%grid_connect`` and ``%ask``/``%%ask``."""
    from .front.jupyter import load_ipython_extension as _load

    _load(ipython)


__all__: list[str] = [
    "Grammar",
    "Guide",
    "IncrementalParser",
    "Matcher",
    "RoleProjection",
    "SchemaLexicon",
    "Vocabulary",
    "__version__",
    "connect",
    "errors",
    "load_ipython_extension",
    "read_sql_nl",
]
