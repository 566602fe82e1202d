"""Engines on the real PostgreSQL/MariaDB test servers, for fixtures and tests alike.

One rule everywhere: without the server the test skips locally and *fails* under
``CI=true``, because CI starts the servers itself (``.ci/run``) and a missing server there is
a broken set-up, never a reason to skip silently.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest
import sqlalchemy as sa


def unavailable(what: str) -> NoReturn:
    """Skip (locally) or fail (under ``CI=true``) because a test server is missing."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (CI=true: the database tests must run; start scripts/services.sh)")
    pytest.skip(f"{what}; run scripts/services.sh start and eval its env")


def server_engine(var: str, *, ping: bool = True) -> sa.Engine:
    """An engine on the server whose URL is in ``$var`` (``GRID_SQL_PG_URL``,
    ``GRID_SQL_MYSQL_URL``), checked with ``SELECT 1`` unless ``ping`` is false."""
    url = os.environ.get(var)
    if not url:
        unavailable(f"{var} is not set")
    engine = sa.create_engine(url, pool_pre_ping=True)
    if ping:
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except sa.exc.DBAPIError as exc:
            engine.dispose()
            unavailable(f"server at {var} is unreachable: {exc.orig}")
    return engine
