"""Serving: guides compiled per content fingerprint, batch-level masks for model servers
(paper §6.3). ``grid_sql.serve.vllm`` (the vLLM logits processor) is imported only by vLLM or
on request: importing this package pulls in neither vllm nor torch."""

from grid_sql.serve.batch import BatchFill, BatchMasker, MaskerStats
from grid_sql.serve.registry import (
    GRID_ARG,
    GuideRegistry,
    GuideSpec,
    GuideStore,
    grid_args,
    parse_grid_args,
)

__all__ = [
    "GRID_ARG",
    "BatchFill",
    "BatchMasker",
    "GuideRegistry",
    "GuideSpec",
    "GuideStore",
    "MaskerStats",
    "grid_args",
    "parse_grid_args",
]
