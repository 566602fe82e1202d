"""Shared pytest fixtures. Kept minimal; layer-specific fixtures live next to their tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


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
