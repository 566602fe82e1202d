"""grid-sql: grammar-constrained SQL decoding with exact viable-prefix token masks.

The public API is collected here as the layers land (see ``__all__``). Importing this
package must stay cheap: no torch, transformers, vllm, llama_cpp, pandas or IPython, and
no eager import of the compiled ``grid_sql._kernels`` extension.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import errors
from .grammar import Grammar, RoleProjection, SchemaLexicon
from .mask.guide import Guide, Matcher
from .mask.vocab import Vocabulary
from .parser import IncrementalParser

__all__: list[str] = [
    "Grammar",
    "Guide",
    "IncrementalParser",
    "Matcher",
    "RoleProjection",
    "SchemaLexicon",
    "Vocabulary",
    "__version__",
    "errors",
]
