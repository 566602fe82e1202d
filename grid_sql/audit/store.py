"""The append-only audit store: sealed records, their steps, and the artifact archive.

Default: a SQLite file at ``$GRID_SQL_AUDIT_DB`` or ``~/.local/state/grid-sql/audit.sqlite``.
Optionally any SQLAlchemy URL or Engine (PostgreSQL and MySQL/MariaDB are tested), so an
organisation can keep the trail in the database it audits.

Append-only is enforced *in the database*, not just by this class: triggers reject every
UPDATE and DELETE (and TRUNCATE on PostgreSQL) on the three tables. That stops accidents and
ordinary clients; it cannot stop someone who may drop triggers or edit the file, which is
why the chain and seal exist — :mod:`grid_sql.audit.verify` detects any edit that gets past
the store. Keep the ``audit_id`` (it is in every result) somewhere the store's writers
cannot reach if you need to detect a wholesale re-sealing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Engine

from ..decode.records import StepKind, StepRecord
from ..errors import AuditError
from ..grammar.ir import Grammar
from ..mask.vocab import Vocabulary
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot
from .artifacts import (
    Artifact,
    grammar_artifact,
    l1_grammar_of,
    policy_artifact,
    schema_artifact,
    vocab_artifact,
)
from .log import AuditRecord

ENV_VAR = "GRID_SQL_AUDIT_DB"
APPEND_ONLY_MESSAGE = "grid-sql audit store is append-only"

_BLOB = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")
_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def default_path() -> Path:
    """``$GRID_SQL_AUDIT_DB`` if set, else ``~/.local/state/grid-sql/audit.sqlite``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "grid-sql" / "audit.sqlite"


def _engine_for(target: str | os.PathLike[str] | Engine | None) -> Engine:
    if isinstance(target, Engine):
        return target
    if target is None:
        target = default_path()
    text = os.fspath(target)
    if "://" in text:
        try:
            return sa.create_engine(text, pool_pre_ping=True)
        except (sa.exc.ArgumentError, ImportError) as e:
            raise AuditError(f"cannot open audit store {text!r}: {e}") from e
    path = Path(text).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AuditError(f"cannot create the audit store directory {path.parent}: {e}") from e
    return sa.create_engine(f"sqlite:///{path}")


class AuditStore:
    """Append-only persistence of :class:`AuditRecord` values and their artifacts."""

    def __init__(
        self,
        target: str | os.PathLike[str] | Engine | None = None,
        *,
        prefix: str = "grid_sql_audit",
    ) -> None:
        self.engine = _engine_for(target)
        self.dialect = self.engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql", "mysql", "mariadb"):
            raise AuditError(
                f"append-only enforcement is implemented for SQLite, PostgreSQL and "
                f"MySQL/MariaDB, not {self.dialect}"
            )
        self.prefix = prefix
        md = sa.MetaData()
        self.seals = sa.Table(
            f"{prefix}_seal",
            md,
            sa.Column("audit_id", sa.String(64), primary_key=True),
            sa.Column("format", sa.Integer, nullable=False),
            sa.Column("sealed_at_ns", sa.BigInteger, nullable=False),
            sa.Column("user_name", sa.String(255), nullable=False),
            sa.Column("seal", _TEXT, nullable=False),
        )
        self.steps = sa.Table(
            f"{prefix}_step",
            md,
            sa.Column("audit_id", sa.String(64), primary_key=True),
            sa.Column("step", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("config_hash", sa.String(16), nullable=False),
            sa.Column("entry_ids", _TEXT, nullable=False),
            sa.Column("mask_digest", sa.String(64), nullable=False),
            sa.Column("token", sa.Integer, nullable=False),
            sa.Column("allowed", sa.Integer, nullable=False),
            sa.Column("blocked", sa.Integer, nullable=False),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("link", sa.String(64), nullable=False),
        )
        self.artifacts = sa.Table(
            f"{prefix}_artifact",
            md,
            sa.Column("fingerprint", sa.String(64), primary_key=True),
            sa.Column("kind", sa.String(32), nullable=False),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("payload", _BLOB, nullable=False),
        )
        self.metadata = md
        # Guards found missing on an existing store are re-installed, and remembered: a
        # verifier reports that the store was not append-only for some time.
        self.guards_restored: list[str] = []
        try:
            existed = sa.inspect(self.engine).has_table(self.seals.name)
            md.create_all(self.engine, checkfirst=True)
            if existed:
                self.guards_restored = self.missing_guards()
            try:
                self._install_triggers()
            except sa.exc.DBAPIError:
                # Another process installing the same guards at the same moment is fine.
                if self.missing_guards():
                    raise
        except sa.exc.SQLAlchemyError as e:
            raise AuditError(f"cannot initialise the audit store: {e}") from e

    # ------------------------------------------------------------------ append-only
    def _trigger_names(self) -> list[tuple[str, str, str]]:
        """(trigger name, table, operation) for every guarded operation."""
        out = []
        for t in (self.seals, self.steps, self.artifacts):
            for op in ("UPDATE", "DELETE"):
                out.append((f"{t.name}_no_{op.lower()}", t.name, op))
        return out

    def _install_triggers(self) -> None:
        with self.engine.begin() as conn:
            if self.dialect == "sqlite":
                for name, table, op in self._trigger_names():
                    conn.exec_driver_sql(
                        f'CREATE TRIGGER IF NOT EXISTS "{name}" BEFORE {op} ON "{table}" '
                        f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
                    )
            elif self.dialect == "postgresql":
                fn = f"{self.prefix}_append_only"
                conn.execute(  # sa.text escapes the '%' placeholders for the driver
                    sa.text(
                        f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql "
                        f"AS $$ BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE} (% on %)', TG_OP, "
                        "TG_TABLE_NAME; END $$"
                    )
                )
                have = self._existing_triggers(conn)
                for name, table, op in self._trigger_names():
                    if name not in have:
                        conn.exec_driver_sql(
                            f'CREATE TRIGGER "{name}" BEFORE {op} ON "{table}" '
                            f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
                        )
                for t in (self.seals, self.steps, self.artifacts):
                    name = f"{t.name}_no_truncate"
                    if name not in have:
                        conn.exec_driver_sql(
                            f'CREATE TRIGGER "{name}" BEFORE TRUNCATE ON "{t.name}" '
                            f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
                        )
            else:  # mysql / mariadb
                have = self._existing_triggers(conn)
                for name, table, op in self._trigger_names():
                    if name not in have:
                        conn.exec_driver_sql(
                            f"CREATE TRIGGER `{name}` BEFORE {op} ON `{table}` FOR EACH ROW "
                            f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{APPEND_ONLY_MESSAGE}'"
                        )

    def _existing_triggers(self, conn: sa.Connection) -> set[str]:
        tables = [t.name for t in (self.seals, self.steps, self.artifacts)]
        if self.dialect == "sqlite":
            rows = conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        elif self.dialect == "postgresql":
            rows = conn.execute(
                sa.text(
                    "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                    "WHERE NOT t.tgisinternal AND c.relname = ANY(:tables) "
                    "AND pg_table_is_visible(c.oid)"
                ),
                {"tables": tables},
            )
        else:
            rows = conn.execute(
                sa.text(
                    "SELECT trigger_name FROM information_schema.triggers "
                    "WHERE trigger_schema = DATABASE() AND event_object_table IN :tables"
                ).bindparams(sa.bindparam("tables", expanding=True)),
                {"tables": tables},
            )
        return {str(r[0]) for r in rows}

    def missing_guards(self) -> list[str]:
        """Triggers that should enforce append-only but are gone (empty = enforced)."""
        with self.engine.connect() as conn:
            have = self._existing_triggers(conn)
        want = [n for n, _, _ in self._trigger_names()]
        if self.dialect == "postgresql":
            want += [f"{t.name}_no_truncate" for t in (self.seals, self.steps, self.artifacts)]
        return [n for n in want if n not in have]

    # ------------------------------------------------------------------ artifacts
    def archive(self, art: Artifact) -> None:
        """Store an artifact once; the first write of a fingerprint wins (append-only)."""
        if self.has_artifact(art.fingerprint):
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    self.artifacts.insert().values(
                        fingerprint=art.fingerprint,
                        kind=art.kind,
                        content_hash=art.content_hash,
                        payload=art.payload,
                    )
                )
        except sa.exc.IntegrityError as e:
            if not self.has_artifact(art.fingerprint):  # not a concurrent writer: a real error
                raise AuditError(f"cannot archive artifact {art.fingerprint[:16]}: {e}") from e

    def has_artifact(self, fingerprint: str) -> bool:
        with self.engine.connect() as conn:
            return (
                conn.execute(
                    sa.select(sa.literal(1)).where(self.artifacts.c.fingerprint == fingerprint)
                ).first()
                is not None
            )

    def archive_guide(self, grammar: Grammar, vocab: Vocabulary) -> str | None:
        """Archive what replay needs for (grammar, vocab); returns the L1 fingerprint if any."""
        if not self.has_artifact(grammar.fingerprint):
            self.archive(grammar_artifact(grammar))
        if not self.has_artifact(vocab.fingerprint):
            self.archive(vocab_artifact(vocab))
        l1 = l1_grammar_of(grammar)
        if l1 is None:
            return None
        if l1.fingerprint != grammar.fingerprint and not self.has_artifact(l1.fingerprint):
            self.archive(grammar_artifact(l1))
        return l1.fingerprint

    def artifact(self, fingerprint: str) -> Artifact:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(self.artifacts).where(self.artifacts.c.fingerprint == fingerprint)
            ).first()
        if row is None:
            raise AuditError(f"artifact {fingerprint[:16]} is not in the archive")
        return Artifact(row.fingerprint, row.kind, bytes(row.payload))

    def artifact_content_hash(self, fingerprint: str) -> str | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(self.artifacts.c.content_hash).where(
                    self.artifacts.c.fingerprint == fingerprint
                )
            ).first()
        return None if row is None else str(row[0])

    # ------------------------------------------------------------------ records
    def append(
        self,
        record: AuditRecord,
        *,
        grammar: Grammar | None = None,
        vocab: Vocabulary | None = None,
        schema: SchemaSnapshot | None = None,
        policy: Policy | None = None,
    ) -> str:
        """Persist a sealed record (and, if given, the artifacts it names); returns its id.

        ``schema`` and ``policy`` are archived when given (the Asker gives them for autofixed
        records, whose fix ``verify`` then re-derives)."""
        refs = record.artifacts
        if grammar is not None and vocab is not None:
            if grammar.fingerprint != refs.grammar or vocab.fingerprint != refs.tokenizer:
                raise AuditError("the grammar/vocabulary given are not the ones the seal names")
            self.archive_guide(grammar, vocab)
        extra: list[tuple[Artifact, str | None]] = []
        if schema is not None:
            extra.append((schema_artifact(schema), refs.schema))
        if policy is not None:
            extra.append((policy_artifact(policy), refs.policy))
        for art, named in extra:
            if art.fingerprint != named:
                raise AuditError(f"the {art.kind} given is not the one the seal names")
            if not self.has_artifact(art.fingerprint):
                self.archive(art)
        links = record.links
        if len(links) != len(record.steps):
            raise AuditError("a record to append must carry one link per step")
        step_rows = [
            {
                "audit_id": record.audit_id,
                "step": s.step,
                "config_hash": f"{s.config_hash:016x}",
                "entry_ids": " ".join(s.entry_ids),
                "mask_digest": s.mask_digest,
                "token": s.token,
                "allowed": s.allowed,
                "blocked": s.blocked,
                "kind": StepKind(s.kind).value,
                "link": link,
            }
            for s, link in zip(record.steps, links, strict=True)
        ]
        seal_text = json.dumps(record.seal, sort_keys=True, separators=(",", ":"))
        try:
            with self.engine.begin() as conn:
                exists = conn.execute(
                    sa.select(sa.literal(1)).where(self.seals.c.audit_id == record.audit_id)
                ).first()
                if exists is not None:
                    raise AuditError(f"audit record {record.audit_id[:16]} is already stored")
                if step_rows:
                    conn.execute(self.steps.insert(), step_rows)
                conn.execute(
                    self.seals.insert().values(
                        audit_id=record.audit_id,
                        format=int(record.seal["format"]),
                        sealed_at_ns=int(record.seal["sealed_at_ns"]),
                        user_name=str(record.seal.get("user", ""))[:255],
                        seal=seal_text,
                    )
                )
        except sa.exc.SQLAlchemyError as e:
            raise AuditError(f"cannot store audit record {record.audit_id[:16]}: {e}") from e
        return record.audit_id

    def resolve(self, audit_id: str) -> str:
        """The full id of ``audit_id`` or of a unique prefix of at least 6 hex digits."""
        key = audit_id.strip().lower()
        if len(key) < 6:
            raise AuditError(f"audit id {audit_id!r} is too short (give at least 6 hex digits)")
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(self.seals.c.audit_id)
                .where(self.seals.c.audit_id.like(key + "%"))
                .limit(2)
            ).all()
        if not rows:
            raise AuditError(f"no audit record {audit_id!r} in the store")
        if len(rows) > 1:
            raise AuditError(f"audit id prefix {audit_id!r} is ambiguous")
        return str(rows[0][0])

    def get(self, audit_id: str) -> AuditRecord:
        """Load a record as stored (no verification: see :func:`verify`)."""
        full = self.resolve(audit_id)
        with self.engine.connect() as conn:
            seal_row = conn.execute(
                sa.select(self.seals.c.seal).where(self.seals.c.audit_id == full)
            ).one()
            rows = conn.execute(
                sa.select(self.steps)
                .where(self.steps.c.audit_id == full)
                .order_by(self.steps.c.step)
            ).all()
        try:
            seal: Mapping[str, Any] = json.loads(seal_row[0])
            steps = tuple(
                StepRecord(
                    step=int(r.step),
                    config_hash=int(r.config_hash, 16),
                    entry_ids=tuple(r.entry_ids.split()) if r.entry_ids else (),
                    mask_digest=str(r.mask_digest),
                    token=int(r.token),
                    allowed=int(r.allowed),
                    blocked=int(r.blocked),
                    kind=StepKind(r.kind),
                )
                for r in rows
            )
        except (ValueError, TypeError) as e:
            raise AuditError(f"audit record {full[:16]} is malformed in the store: {e}") from e
        return AuditRecord(full, seal, steps, tuple(str(r.link) for r in rows))

    def ids(self) -> list[str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(self.seals.c.audit_id).order_by(
                    self.seals.c.sealed_at_ns, self.seals.c.audit_id
                )
            ).all()
        return [str(r[0]) for r in rows]

    def iter_seals(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """(audit id, seal) in sealing order, without the steps."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(self.seals.c.audit_id, self.seals.c.seal).order_by(
                    self.seals.c.sealed_at_ns, self.seals.c.audit_id
                )
            ).all()
        for r in rows:
            yield str(r[0]), json.loads(r[1])

    def close(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"AuditStore({self.engine.url.render_as_string(hide_password=True)})"
