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

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..decode.records import StepKind, StepRecord
from ..dialect import Dialect
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
from .chain import STORE_GENESIS, ChainEntry, ChainHead, entry_link
from .log import AuditRecord, canonical_json

ENV_VAR = "GRID_SQL_AUDIT_DB"
APPEND_ONLY_MESSAGE = "grid-sql audit store is append-only"

_T = TypeVar("_T")


def _payload_types() -> tuple[sa.types.TypeEngine[Any], sa.types.TypeEngine[Any]]:
    """The (text, binary) payload column types: the defaults, with each dialect's
    :attr:`~grid_sql.dialect.Dialect.audit_long_types` as the variant for its names (the
    registry keys are SQLAlchemy's dialect names), so the store never names a dialect."""
    text: sa.types.TypeEngine[Any] = sa.Text()
    blob: sa.types.TypeEngine[Any] = sa.LargeBinary()
    for d in Dialect.registered():
        if d.audit_long_types is not None:
            long_text, long_blob = d.audit_long_types
            text = text.with_variant(long_text(), d.name, *d.aliases)
            blob = blob.with_variant(long_blob(), d.name, *d.aliases)
    return text, blob


_TEXT, _BLOB = _payload_types()


def default_path() -> Path:
    """``$GRID_SQL_AUDIT_DB`` if set, else ``~/.local/state/grid-sql/audit.sqlite``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "grid-sql" / "audit.sqlite"


def _engine_for(
    target: str | os.PathLike[str] | Engine | None, *, readonly: bool = False
) -> Engine:
    if isinstance(target, Engine):
        return target
    if target is None:
        target = default_path()
    text = os.fspath(target)
    if "://" in text:
        try:
            return sa.create_engine(text, pool_pre_ping=True)
        except (sa.exc.ArgumentError, ImportError, ValueError) as e:
            from ..schema.faults import redact  # no password in the message (#23 §6)

            shown, why = redact(text, text), redact(str(e), text)
            raise AuditError(f"cannot open audit store {shown!r}: {why}") from None
    path = Path(text).expanduser()
    # A busy timeout well above an append's duration: writers of one file queue on its lock
    # (BEGIN IMMEDIATE) instead of failing with "database is locked".
    args = {"timeout": 30.0}
    if readonly:
        if not path.is_file():
            raise AuditError(f"no audit store at {path}")
        # mode=ro: a verifier cannot change the evidence, not even by re-installing guards
        return sa.create_engine(
            f"sqlite:///file:{path.resolve()}?mode=ro&uri=true", connect_args=args
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AuditError(f"cannot create the audit store directory {path.parent}: {e}") from e
    return sa.create_engine(f"sqlite:///{path}", connect_args=args)


def _retryable(e: sa.exc.DBAPIError) -> bool:
    """A lock or serialization conflict another writer caused: worth trying again."""
    text = str(e.orig).lower()
    return any(
        k in text for k in ("locked", "busy", "deadlock", "serializ", "lock wait", "duplicate")
    ) or isinstance(e, sa.exc.IntegrityError)


class AuditStore:
    """Append-only persistence of :class:`AuditRecord` values, their artifacts, and the
    store chain across them (:mod:`grid_sql.audit.chain`).

    ``readonly=True`` (what ``grid-sql audit verify|show|list|head`` use) opens an existing
    store without creating or repairing anything: a SQLite file is opened ``mode=ro``, and
    missing guards stay missing for the verifier to report.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | Engine | None = None,
        *,
        prefix: str = "grid_sql_audit",
        readonly: bool = False,
    ) -> None:
        self.engine = _engine_for(target, readonly=readonly)
        self.dialect = self.engine.dialect.name
        found = Dialect.find(self.dialect)
        if found is None or not found.audit_store:
            raise AuditError(
                f"append-only enforcement is implemented for SQLite, PostgreSQL and "
                f"MySQL/MariaDB, not {self.dialect}"
            )
        self._d: Dialect = found
        self.prefix = prefix
        self.readonly = readonly
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
        self.chain_table = sa.Table(
            f"{prefix}_chain",
            md,
            sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
            sa.Column("link", sa.String(64), nullable=False, unique=True),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("audit_id", sa.String(64), nullable=True),
            sa.Column("body", _TEXT, nullable=False),
        )
        self.metadata = md
        # Guards a writer found missing on opening (and re-installed, writing a "guards"
        # chain entry so that the evidence stays): the verifier reports them as a failure.
        self.guards_restored: list[str] = []
        try:
            if readonly:
                if not sa.inspect(self.engine).has_table(self.seals.name):
                    raise AuditError(f"no audit store (table {self.seals.name}) in {self!r}")
                self.has_chain = sa.inspect(self.engine).has_table(self.chain_table.name)
            else:
                self._write(self._initialise, "initialise the audit store")
                self.has_chain = True
        except sa.exc.SQLAlchemyError as e:
            raise AuditError(f"cannot initialise the audit store: {e}") from e

    # ------------------------------------------------------------------ serialized writes
    @contextlib.contextmanager
    def _serialized(self) -> Iterator[sa.Connection]:
        """A transaction holding the store's write lock: one writer at a time, across
        processes. SQLite: ``BEGIN IMMEDIATE`` (the file's write lock from the start, so a
        reader never has to upgrade and lose); PostgreSQL: a transaction-scoped advisory
        lock; MySQL/MariaDB: a named lock (DDL commits implicitly there). Appends read the
        chain's last entry and write the next, which must not interleave."""
        with self.engine.connect() as conn:
            self._d.audit_lock(conn, self.prefix)
            try:
                yield conn
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                self._d.audit_unlock(conn, self.prefix)

    def _write(self, fn: Callable[[sa.Connection], _T], what: str) -> _T:
        """Run ``fn`` in a serialized transaction, retrying lock conflicts a few times."""
        if self.readonly:
            raise AuditError(f"cannot {what}: the store was opened read-only")
        delay = 0.02
        for attempt in range(8):
            try:
                with self._serialized() as conn:
                    return fn(conn)
            except sa.exc.DBAPIError as e:
                if attempt == 7 or not _retryable(e):
                    raise AuditError(f"cannot {what}: {e}") from e
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _initialise(self, conn: sa.Connection) -> None:
        """Create what is missing, in one serialized transaction (so processes opening a
        fresh store at once see either nothing or all of it: a half-made store would look
        like one whose guards were removed), and keep the evidence of removed guards."""
        tables = (self.seals, self.steps, self.artifacts, self.chain_table)
        insp = sa.inspect(conn)
        existed = {t.name for t in tables if insp.has_table(t.name)}
        have = self._existing_triggers(conn) if existed else set()
        missing = [name for name, table in self._guards() if table in existed and name not in have]
        self.metadata.create_all(conn, checkfirst=True)
        self._install_triggers(conn)
        if self.chain_table.name not in existed and self.seals.name in existed:
            ids = [
                str(r[0])
                for r in conn.execute(
                    sa.select(self.seals.c.audit_id).order_by(
                        self.seals.c.sealed_at_ns, self.seals.c.audit_id
                    )
                )
            ]
            if ids:  # records sealed before store chaining: committed to as a set
                self._chain_append(conn, {"kind": "adopt", "audit_ids": ids})
        if missing:
            self._chain_append(
                conn, {"kind": "guards", "missing": missing, "at_ns": time.time_ns()}
            )
        self.guards_restored = missing

    # ------------------------------------------------------------------ append-only
    def _tables(self) -> tuple[sa.Table, ...]:
        return (self.seals, self.steps, self.artifacts, self.chain_table)

    def _trigger_names(self) -> list[tuple[str, str, str]]:
        """(trigger name, table, operation) for every guarded row operation."""
        out = []
        for t in self._tables():
            for op in ("UPDATE", "DELETE"):
                out.append((f"{t.name}_no_{op.lower()}", t.name, op))
        return out

    def _guards(self) -> list[tuple[str, str]]:
        """(trigger name, table) of every guard this dialect installs."""
        out = [(n, t) for n, t, _ in self._trigger_names()]
        return out + self._d.audit_extra_guards([t.name for t in self._tables()])

    def _install_triggers(self, conn: sa.Connection) -> None:
        tables = [t.name for t in self._tables()]
        self._d.install_audit_guards(
            conn, self.prefix, self._trigger_names(), tables, APPEND_ONLY_MESSAGE
        )

    def _existing_triggers(self, conn: sa.Connection) -> set[str]:
        return self._d.existing_triggers(conn, [t.name for t in self._tables()])

    def missing_guards(self) -> list[str]:
        """Triggers that should enforce append-only but are gone (empty = enforced).

        Only reads: nothing here (or in ``verify``) re-installs a guard, which would wipe
        the evidence that the store was writable for a while."""
        with self.engine.connect() as conn:
            have = self._existing_triggers(conn)
        return [
            n
            for n, t in self._guards()
            if n not in have and (self.has_chain or t != self.chain_table.name)
        ]

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
        """Persist a sealed record (and, if given, the artifacts it names) and chain it to
        the store's previous entry; returns its id.

        ``schema`` and ``policy`` are archived when given (the Asker gives them for autofixed
        records, whose fix ``verify`` then re-derives, and for ``run_sql`` statement records,
        whose checker verdict it re-derives)."""
        if record.kind == "statement":
            arts = record.seal.get("artifacts") or {}
            named = {"schema": arts.get("schema"), "policy": arts.get("policy")}
        else:
            refs = record.artifacts
            if grammar is not None and vocab is not None:
                if grammar.fingerprint != refs.grammar or vocab.fingerprint != refs.tokenizer:
                    raise AuditError("the grammar/vocabulary given are not the ones the seal names")
                self.archive_guide(grammar, vocab)
            named = {"schema": refs.schema, "policy": refs.policy}
        extra: list[Artifact] = []
        if schema is not None:
            extra.append(schema_artifact(schema))
        if policy is not None:
            extra.append(policy_artifact(policy))
        for art in extra:
            if art.fingerprint != named[art.kind]:
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

        def write(conn: sa.Connection) -> str:
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
            self._chain_append(conn, {"kind": "record", "audit_id": record.audit_id})
            return record.audit_id

        return self._write(write, f"store audit record {record.audit_id[:16]}")

    def append_outcome(
        self,
        audit_id: str,
        *,
        ran: bool,
        rowcount: int | None = None,
        error: str | None = None,
        duration_ns: int = 0,
        at_ns: int | None = None,
        dry_run: bool = False,
    ) -> ChainHead:
        """Chain what happened when a record's statement was executed.

        ``ran``: the statement completed (rows read, or a write committed); ``error``: the
        class of the error that stopped it (``"StatementTimeout"``, ``"PolicyViolation"``
        when the checker refused it, ...). An outcome is a new chain entry naming the
        record, never an update of it: the store stays append-only and the outcome is as
        tamper-evident as the record. ``dry_run``: the statement ran in a transaction that
        was rolled back (a previewed write: ``rowcount`` rows would change); the key is
        absent from other outcomes, so their bodies are unchanged. Returns the new head."""
        full = self.resolve(audit_id)
        if not isinstance(ran, bool):
            raise AuditError(f"ran must be a bool, not {ran!r}")
        for name, v in (("rowcount", rowcount), ("duration_ns", duration_ns)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise AuditError(f"{name} must be an integer, not {v!r}")
        body = {
            "kind": "outcome",
            "audit_id": full,
            "ran": ran,
            "rowcount": rowcount,
            "error": None if error is None else str(error),
            "duration_ns": max(0, int(duration_ns)),
            "at_ns": time.time_ns() if at_ns is None else int(at_ns),
        }
        if dry_run:
            body["dry_run"] = True
        return self._write(
            lambda conn: self._chain_append(conn, body), f"chain the outcome of {full[:16]}"
        )

    def _chain_append(self, conn: sa.Connection, body: Mapping[str, Any]) -> ChainHead:
        """Write the next chain entry (inside :meth:`_serialized`: nobody else appends)."""
        c = self.chain_table.c
        last = conn.execute(sa.select(c.seq, c.link).order_by(c.seq.desc()).limit(1)).first()
        seq = 0 if last is None else int(last[0]) + 1
        full = {**body, "seq": seq, "prev": STORE_GENESIS if last is None else str(last[1])}
        link = entry_link(full)
        conn.execute(
            self.chain_table.insert().values(
                seq=seq,
                link=link,
                kind=str(full["kind"]),
                audit_id=full.get("audit_id"),
                body=canonical_json(full).decode("utf-8"),
            )
        )
        return ChainHead(seq, link)

    def chain(self) -> list[ChainEntry]:
        """Every chain entry as stored, in ``seq`` order (unverified: see ``verify``)."""
        if not self.has_chain:
            return []
        c = self.chain_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.seq, c.kind, c.audit_id, c.body, c.link).order_by(c.seq)
            ).all()
        return [
            ChainEntry(
                int(r[0]), str(r[1]), None if r[2] is None else str(r[2]), str(r[3]), str(r[4])
            )
            for r in rows
        ]

    def head(self) -> ChainHead | None:
        """The chain's last entry (``None``: empty). Export it (``grid-sql audit head``) to
        somewhere the store's writers cannot reach; ``verify --head`` then detects
        truncation and rewriting."""
        if not self.has_chain:
            return None
        c = self.chain_table.c
        with self.engine.connect() as conn:
            last = conn.execute(sa.select(c.seq, c.link).order_by(c.seq.desc()).limit(1)).first()
        return None if last is None else ChainHead(int(last[0]), str(last[1]))

    def seals_by_id(self) -> dict[str, Mapping[str, Any] | None]:
        """Every stored seal by audit id (``None`` where it does not parse)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(self.seals.c.audit_id, self.seals.c.seal)).all()
        out: dict[str, Mapping[str, Any] | None] = {}
        for r in rows:
            try:
                v = json.loads(r[1])
            except ValueError:
                v = None
            out[str(r[0])] = v if isinstance(v, dict) else None
        return out

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
