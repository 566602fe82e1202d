"""Package data: the Chinook sample database the demo and the quickstart run on offline.

``Chinook_Sqlite.sqlite`` is Chinook v1.4.5 (lerocha/chinook-database, commit
7f67772503d71ba90f19283c38e93923addb43fa), byte-identical to upstream, sha256
7651ba378ac2fcd0dfc3c66fb101f7a7eed3ba39a612ec642b96e20702061f15; MIT-style licence
(Copyright (c) 2008-2024 Luis Rocha) in ``LICENSE-Chinook.md`` next to it. Why shipped: the
README's second command must work on a fresh machine without a network.
"""

from __future__ import annotations

from pathlib import Path

CHINOOK_SHA256 = "7651ba378ac2fcd0dfc3c66fb101f7a7eed3ba39a612ec642b96e20702061f15"


def chinook_path() -> Path:
    """Path of the packaged Chinook SQLite file (open it read-only: it is package data)."""
    return Path(__file__).with_name("Chinook_Sqlite.sqlite")


def chinook_url() -> str:
    """A read-only SQLAlchemy URL for the packaged Chinook database."""
    return f"sqlite:///file:{chinook_path()}?mode=ro&uri=true"
