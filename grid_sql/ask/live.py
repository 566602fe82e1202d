"""Live grants: the Asker notices a changed catalog or changed rights without a restart.

Why: an Asker compiles the role's grammar once, from the rights it read when it was built. A
``REVOKE`` on a live server must take effect on the next question (a revoked table must not
stay nameable at mask level until someone restarts the service), and a new table should
become askable. So before a question (at most once per ``live_grants`` seconds) the Asker
reads a cheap fingerprint of what its policy was derived from:

* PostgreSQL: every user relation's name, owner and ACL, every column's name, type and ACL,
  schema ACLs, role memberships, and the current user (catalog tables only; one query);
* MariaDB/MySQL: ``SHOW GRANTS`` and the visible columns (``information_schema.COLUMNS``);
* SQLite: ``PRAGMA schema_version`` (no grants: only the schema can change).

When it differs from the one taken with the policy, the catalog and grants are read again,
narrowed by the same application policy, and the grammar is specialized anew (compiled
grammars are cached per (schema, policy) fingerprint, so going back to an earlier state is
free); later seals carry the new policy fingerprint. The fingerprint is taken *before* the
re-read, so a change racing the re-read is noticed at the next check, never lost.

Only an Asker that owns its connections (built from a URL, a path or an Engine) checks: on a
caller's Connection the query would run inside the caller's transaction (and on MySQL open
one), so there the policy stays as read at construction.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..dialect import Dialect
from ..schema.faults import SLACK_S, answer_deadline
from ..schema.introspect import connect, dialect_name
from .idioms import catalog_names

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..policy.config import AppPolicy
    from .asker import Asker

_LOG = logging.getLogger("grid_sql")
MARK = "/* grid-sql: catalog fingerprint */ "  # tells these reads apart in statement logs


def catalog_fingerprint(conn: Connection) -> str:
    """A digest of what the connected role's policy is derived from (module docstring)."""
    found = Dialect.find(dialect_name(conn))
    h = hashlib.blake2b(digest_size=16, person=b"grid-sql-live")

    def q(sql: str) -> list[tuple[object, ...]]:
        opts = {"no_parameters": True}  # '%' in the text is a LIKE pattern, not a placeholder
        return [tuple(r) for r in conn.exec_driver_sql(sql, execution_options=opts)]

    queries = [] if found is None else found.fingerprint_queries(conn)
    if not queries:  # pragma: no cover - no other dialect has a grants reader either
        return ""
    rows = [r for sql in queries for r in q(MARK + sql)]
    for r in rows:
        h.update(repr(r).encode("utf-8", "backslashreplace"))
        h.update(b"\n")
    if conn.in_transaction():
        conn.rollback()  # our own connection: nothing to keep, no snapshot held open
    return h.hexdigest()


class LiveGrantsMixin:
    """``live_grants`` of :class:`Asker` (see the module docstring)."""

    live_grants: float | None
    refreshes: int
    _app: AppPolicy | None
    _catalog_fp: str | None
    _catalog_at: float

    def _start_live(self, app: AppPolicy | None, live_grants: float | None) -> None:
        """Remember how the policy was derived and take the first fingerprint."""
        asker: Asker = self  # type: ignore[assignment]
        if live_grants is not None and live_grants < 0:
            from ..errors import OptionError

            raise OptionError("live_grants must be >= 0 seconds, or None (off)")
        self.live_grants = live_grants
        self.refreshes = 0
        self._app = app
        self._catalog_fp = None
        self._catalog_at = time.monotonic()
        if live_grants is not None and isinstance(asker.bind, Engine):
            self._catalog_fp = self._fingerprint()

    def _fingerprint(self) -> str:
        asker: Asker = self  # type: ignore[assignment]
        conn, owned = connect(asker.bind, timeout_s=asker.timeout_s)
        try:
            with answer_deadline(conn, asker.timeout_s + SLACK_S):
                return catalog_fingerprint(conn)
        finally:
            if owned:
                conn.close()

    def refresh_grants(self, *, force: bool = False) -> bool:
        """Re-read the catalog and the role's rights if their fingerprint changed (at most
        once per ``live_grants`` seconds unless ``force``); True when the policy was
        re-read. Called before every question and every ``run_sql``."""
        asker: Asker = self  # type: ignore[assignment]
        if self._catalog_fp is None:
            return False
        now = time.monotonic()
        with asker._lock:
            if not force and now - self._catalog_at < (self.live_grants or 0.0):
                return False
            self._catalog_at = now
            try:
                fp = self._fingerprint()
            except sa.exc.DBAPIError as exc:  # the question itself will report the server
                _LOG.warning("grid-sql: catalog fingerprint failed (%s); policy kept", exc)
                return False
            if fp == self._catalog_fp:
                return False
            old = asker.policy.fingerprint
            asker.snapshot, asker.policy = asker._read_policy(self._app)
            asker._names = catalog_names(asker.snapshot)  # the idiom check's catalog words
            asker._modes.clear()
            asker.generation.forget()  # bind-on-close policies, request caches
            asker._values = None
            self._catalog_fp = fp
            self.refreshes += 1
            _LOG.info(
                "grid-sql: the catalog or the rights of %r changed; policy %s -> %s",
                asker.policy.role,
                old[:12],
                asker.policy.fingerprint[:12],
            )
            return True
