"""Entry points: read the effective policy of a connection; open SQLite honouring a policy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from grid_sql.errors import ConnectionConfigError
from grid_sql.policy.config import AppPolicy, narrow
from grid_sql.policy.grants import read_grants
from grid_sql.policy.model import Policy
from grid_sql.schema.introspect import Bind, connect, introspect, make_engine
from grid_sql.schema.model import SchemaSnapshot

AppPolicyLike = AppPolicy | Mapping[str, Any] | str | Path | None


def as_app_policy(app: AppPolicyLike) -> AppPolicy | None:
    """Accept a parsed policy, a plain dict, or a path to a YAML/TOML/JSON file."""
    if app is None or isinstance(app, AppPolicy):
        return app
    if isinstance(app, str | Path):
        return AppPolicy.load(app)
    return AppPolicy.from_mapping(app)


def read_policy(
    bind: Bind,
    snapshot: SchemaSnapshot | None = None,
    app: AppPolicyLike = None,
) -> Policy:
    """The effective policy of the connected role: server grants narrowed by ``app``.

    ``snapshot`` defaults to a fresh :func:`introspect` on the same connection, so the policy
    covers exactly the tables the role can see.
    """
    app_policy = as_app_policy(app)
    conn, owned = connect(bind)
    try:
        snap = snapshot if snapshot is not None else introspect(conn)
        return narrow(read_grants(conn, snap), app_policy, snap)
    finally:
        if owned:
            conn.close()


def sqlite_url(path: str | Path, policy: Policy | None = None) -> str:
    """A SQLAlchemy URL for the SQLite file; read-only (``mode=ro``) for a select-only policy.

    Why at the connection: configuration is SQLite's only policy source, so the engine itself
    should refuse writes when the policy allows none; ``mode=ro`` makes the file handle
    read-only, which also stops writes through PRAGMA or ATTACH side doors.
    """
    p = Path(path).resolve()
    if not p.exists():
        raise ConnectionConfigError(f"SQLite database file not found: {p}")
    mode = "ro" if policy is not None and policy.read_only else "rw"
    return f"sqlite:///file:{p}?mode={mode}&uri=true"


def open_sqlite(path: str | Path, policy: Policy | None = None, **kwargs: Any) -> Engine:
    """An Engine on a SQLite file, opened read-only when ``policy`` allows only SELECT."""
    engine = make_engine(sqlite_url(path, policy), **kwargs)
    if policy is not None and policy.read_only:

        @sa.event.listens_for(engine, "connect")
        def _query_only(dbapi_conn: Any, _record: Any) -> None:
            # Belt and braces: query_only also covers temp tables, which mode=ro does not.
            dbapi_conn.execute("PRAGMA query_only = ON")

    return engine
