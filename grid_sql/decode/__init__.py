"""Decoding under exact masks: model backends, the GRID-owned decode loop, termination."""

from grid_sql.decode.backend import Backend, LlamaCppBackend, TransformersBackend, load_backend
from grid_sql.decode.loop import Generation, Timings, generate
from grid_sql.decode.models import DEFAULT_MODEL, REGISTRY, fetch_model, resolve_model
from grid_sql.decode.processor import GridLogitsProcessor
from grid_sql.decode.records import StepKind, StepRecord, StopReason, mask_digest

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
