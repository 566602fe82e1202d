"""``python -m grid_sql ...``: the same commands as the ``grid-sql`` console script."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
