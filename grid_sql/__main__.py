"""``python -m grid_sql demo``: see :mod:`grid_sql.front.demo`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "demo":
        print("usage: python -m grid_sql demo [--db PATH] [--vocab GGUF]", file=sys.stderr)
        return 2
    from .front.demo import main as demo

    return demo(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
