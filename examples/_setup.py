"""What every example shares: the model, the role's policy and few-shot pairs.

``GRID_SQL_MODEL`` picks the model (a registry name such as ``qwen2.5-coder-0.5b``, the
default, or ``smollm2-135m``; or a GGUF path). Fetch registry models once with
``python -m grid_sql.decode.models fetch``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grid_sql.ask.prompt import Example

HERE = Path(__file__).resolve().parent
MODEL = os.environ.get("GRID_SQL_MODEL", "qwen2.5-coder-0.5b")
POLICY = HERE / "catalog_role.toml"  # read-only, four catalog tables
EXAMPLES = [
    Example(d["question"], d["sql"]) for d in json.loads((HERE / "few_shot.json").read_text())
]


def refused(exc: Exception) -> str:
    """One line for a typed failure: nothing was executed, the attempts are still audited."""
    ids = getattr(exc, "audit_ids", None) or []
    first = str(exc).splitlines()[0]
    return (
        f"refused ({type(exc).__name__}): {first} [audit {', '.join(i[:12] for i in ids) or '-'}]"
    )
