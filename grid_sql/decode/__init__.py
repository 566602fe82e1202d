"""Decoding under exact masks: model backends, the GRID-owned decode loop, termination.

Names are resolved lazily (PEP 562): ``python -m grid_sql.decode.models_cli`` then runs the
module once, not after the package already imported it, and ``import grid_sql.decode``
stays as light as ``records``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grid_sql.decode.backend import (
        Backend,
        LlamaCppBackend,
        TransformersBackend,
        load_backend,
    )
    from grid_sql.decode.loop import Generation, Timings, generate
    from grid_sql.decode.models import DEFAULT_MODEL, REGISTRY, fetch_model, resolve_model
    from grid_sql.decode.processor import GridLogitsProcessor
    from grid_sql.decode.records import StepKind, StepRecord, StopReason, mask_digest

_WHERE = {
    "Backend": "backend",
    "LlamaCppBackend": "backend",
    "TransformersBackend": "backend",
    "load_backend": "backend",
    "Generation": "loop",
    "Timings": "loop",
    "generate": "loop",
    "DEFAULT_MODEL": "models",
    "REGISTRY": "models",
    "fetch_model": "models",
    "resolve_model": "models",
    "GridLogitsProcessor": "processor",
    "StepKind": "records",
    "StepRecord": "records",
    "StopReason": "records",
    "mask_digest": "records",
}

__all__ = [
    "DEFAULT_MODEL",
    "REGISTRY",
    "Backend",
    "Generation",
    "GridLogitsProcessor",
    "LlamaCppBackend",
    "StepKind",
    "StepRecord",
    "StopReason",
    "Timings",
    "TransformersBackend",
    "fetch_model",
    "generate",
    "load_backend",
    "mask_digest",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'grid_sql.decode' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grid_sql.decode.{mod}"), name)
    globals()[name] = value
    return value
