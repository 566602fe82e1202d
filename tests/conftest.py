"""Shared pytest fixtures. Kept minimal; layer-specific fixtures live next to their tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import sqlalchemy as sa

REPO_ROOT = Path(__file__).resolve().parent.parent

# Property tests explore new examples on every local run (that is how the checker's
# OptimizeError on `"Ann" UNION SELECT ...` was found); under CI they replay a fixed
# sequence, so a landing is decided by the change, not by the draw.
if os.environ.get("CI") == "true":
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.load_profile("ci")


def _shared_root() -> Path:
    env = os.environ.get("GRID_SQL_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<shared>/data`` (``$GRID_SQL_SHARED`` or ``../shared`` next to the repo)."""
    data = _shared_root() / "data"
    if not data.is_dir():
        pytest.skip(f"shared data not found at {data}")
    return data


@pytest.fixture
def server_engine() -> Iterator[Callable[[str], sa.Engine]]:
    """``server_engine("GRID_SQL_PG_URL")``: an engine on a real test server (skip locally,
    fail under ``CI=true`` without it; ``tests/servers.py``), disposed after the test."""
    from tests.servers import server_engine as make_engine

    engines: list[sa.Engine] = []

    def make(var: str) -> sa.Engine:
        engines.append(make_engine(var))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()
