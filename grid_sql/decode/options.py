"""Backend options: context size, CPU threads and GPU placement, from arguments or the
environment (issue #28 §4).

Why one place: the same three knobs reach a model through the Asker, the CLI (``--n-ctx``,
``--threads``, ``--n-gpu-layers``, ``--device``) and the environment (``GRID_SQL_N_CTX``,
``GRID_SQL_N_THREADS``, ``GRID_SQL_N_GPU_LAYERS``, ``GRID_SQL_DEVICE``), and each must be
checked the same way: a bad value is an :class:`OptionError` naming where it came from, never
a crash inside llama.cpp or torch.

What each means per backend:

* ``n_ctx``: llama.cpp's context (KV positions) and, for both backends, the window the
  prompt budget is derived from (``grid_sql.ask.budget``); transformers has no fixed
  context, so it bounds the budget and is checked against the model's
  ``max_position_embeddings``.
* ``n_threads``: llama.cpp's decode and batch threads; for transformers, torch's intra-op
  threads (``torch.set_num_threads``, process-wide).
* ``n_gpu_layers``: llama.cpp's layer offload (``-1``: all layers); refused when the installed
  llama-cpp-python build cannot offload (a silent CPU fallback would misreport speed).
  Not a transformers option: there the model goes where ``device`` says.
* ``device``: transformers only (``cpu``, ``cuda``, ``cuda:1``, ``mps``).

An argument given explicitly for a backend it does not apply to is refused; an environment
variable for the other backend is ignored (the environment configures whichever loads).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import OptionError

__all__ = ["DEFAULT_N_CTX", "ENV", "BackendOptions", "default_threads"]

DEFAULT_N_CTX = 4096
MIN_N_CTX = 256
MAX_N_CTX = 1 << 20
ENV = {
    "n_ctx": "GRID_SQL_N_CTX",
    "n_threads": "GRID_SQL_N_THREADS",
    "n_gpu_layers": "GRID_SQL_N_GPU_LAYERS",
    "device": "GRID_SQL_DEVICE",
}
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:\d+)?")


def default_threads() -> int:
    """CPU threads when none are asked for: the machine's CPUs, at most 8 (llama.cpp's
    decode stops scaling around there, and a shared host keeps the rest)."""
    return max(1, min(os.cpu_count() or 2, 8))


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise OptionError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise OptionError(f"{what} must be an integer, got {value!r}") from None
    if not isinstance(value, int):
        raise OptionError(f"{what} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise OptionError(f"{what} must be in [{lo}, {hi}], got {value}")
    return value


@dataclass(frozen=True)
class BackendOptions:
    """Resolved backend options (None: the backend's default). ``explicit`` names the
    options given as arguments (not from the environment)."""

    n_ctx: int | None = None
    n_threads: int | None = None
    n_gpu_layers: int | None = None
    device: str | None = None
    explicit: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def resolve(
        cls,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        device: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> BackendOptions:
        """Arguments first, then ``GRID_SQL_*`` variables; every value checked."""
        env = os.environ if env is None else env
        given: dict[str, int | str | None] = {
            "n_ctx": n_ctx,
            "n_threads": n_threads,
            "n_gpu_layers": n_gpu_layers,
            "device": device,
        }
        explicit = frozenset(k for k, v in given.items() if v is not None)
        vals: dict[str, Any] = {}
        for key, value in given.items():
            what = key
            if value is None and env.get(ENV[key], "").strip():
                value, what = env[ENV[key]], f"{ENV[key]} (environment)"
            if value is None:
                vals[key] = None
            elif key == "n_ctx":
                vals[key] = _int(value, what, MIN_N_CTX, MAX_N_CTX)
            elif key == "n_threads":
                vals[key] = _int(value, what, 1, 1024)
            elif key == "n_gpu_layers":
                vals[key] = _int(value, what, -1, 100_000)
            else:
                text = str(value).strip()
                if not _DEVICE.fullmatch(text):
                    raise OptionError(
                        f"{what} must be a torch device (cpu, cuda, cuda:N, mps, xpu), "
                        f"got {value!r}"
                    )
                vals[key] = text
        return cls(**vals, explicit=explicit)

    def llama_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~grid_sql.decode.backend.LlamaCppBackend`."""
        if "device" in self.explicit:
            raise OptionError(
                "device= applies to the transformers backend; llama.cpp places layers with "
                "n_gpu_layers="
            )
        kw: dict[str, Any] = {}
        if self.n_ctx is not None:
            kw["n_ctx"] = self.n_ctx
        if self.n_threads is not None:
            kw["n_threads"] = self.n_threads
        if self.n_gpu_layers is not None:
            kw["n_gpu_layers"] = self.n_gpu_layers
        return kw

    def transformers_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~grid_sql.decode.backend.TransformersBackend`."""
        if "n_gpu_layers" in self.explicit:
            raise OptionError(
                "n_gpu_layers= applies to llama.cpp; the transformers backend places the "
                "whole model with device= (e.g. 'cuda')"
            )
        kw: dict[str, Any] = {}
        if self.n_ctx is not None:
            kw["n_ctx"] = self.n_ctx
        if self.n_threads is not None:
            kw["n_threads"] = self.n_threads
        if self.device is not None:
            kw["device"] = self.device
        return kw
