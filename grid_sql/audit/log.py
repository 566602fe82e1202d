"""The audit chain (paper §6.4): per-token records chained with BLAKE2b, then sealed.

Every decoding decision — sampled tokens, each interior token of a forced span, the reserve
completion and the EOS tail — is one :class:`~grid_sql.decode.records.StepRecord`. The log
links them:

    link₀ = GENESIS,   linkᵢ₊₁ = BLAKE2b-256(linkᵢ ‖ encode(recordᵢ))

so editing, dropping, inserting or reordering any record changes every later link and the
head. :meth:`AuditLog.seal` binds the head to what the generation was *about* (question,
user, final SQL, stop reason, the fingerprints of every artifact the masks were computed
from, mode flags, timestamps); the seal's own hash is the ``audit_id``.

Encodings are canonical and versioned (``FORMAT_VERSION``): records are fixed-layout
little-endian binary, seals are sorted-key JSON with integers and strings only — floats
are rejected, because a float that prints differently on another platform would make a
genuine record look tampered with.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..decode.records import StepKind, StepRecord, StopReason
from ..errors import AuditError
from .schemes import ENTRY_SCHEME, engine_name

FORMAT_VERSION = 1
GENESIS: bytes = hashlib.blake2b(
    b"grid-sql audit chain genesis", digest_size=32, person=b"grid-sql-audit"
).digest()

MODES = ("loop", "processor")  # paper: mode 1 (GRID-owned loop), mode 2 (logits processor)
_STEP_TAG = b"GSAstep" + bytes([FORMAT_VERSION])
_U64 = (1 << 64) - 1


# ---------------------------------------------------------------------------- encodings


def encode_step(rec: StepRecord) -> bytes:
    """The canonical byte encoding of one record (what the chain hashes)."""
    if not 0 <= rec.config_hash <= _U64:
        raise AuditError(f"step {rec.step}: config_hash {rec.config_hash} is not a u64")
    for name in ("step", "token", "allowed", "blocked"):
        v = getattr(rec, name)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 32:
            raise AuditError(f"step {rec.step}: {name}={v!r} is not a u32")
    try:
        digest = bytes.fromhex(rec.mask_digest)
        entries = [bytes.fromhex(e) for e in rec.entry_ids]
    except (ValueError, TypeError) as e:
        raise AuditError(f"step {rec.step}: digest/entry ids must be hex: {e}") from e
    kind = StepKind(rec.kind).value.encode()
    parts = [
        _STEP_TAG,
        struct.pack("<IQI", rec.step, rec.config_hash, len(entries)),
        *(struct.pack("<B", len(e)) + e for e in entries),
        struct.pack("<B", len(digest)),
        digest,
        struct.pack("<III", rec.token, rec.allowed, rec.blocked),
        struct.pack("<B", len(kind)),
        kind,
    ]
    return b"".join(parts)


def chain_link(prev: bytes, rec: StepRecord) -> bytes:
    """``BLAKE2b-256(prev ‖ encode(rec))``."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-audit")
    h.update(prev)
    h.update(encode_step(rec))
    return h.digest()


def _check_json(value: Any, where: str) -> None:
    if isinstance(value, float):
        raise AuditError(f"{where}: floats are not allowed in hashed audit fields ({value!r})")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise AuditError(f"{where}: keys must be strings, got {k!r}")
            _check_json(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
    elif not (value is None or isinstance(value, str | int | bool)):
        raise AuditError(f"{where}: {type(value).__name__} is not a canonical JSON value")


def canonical_json(obj: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8, integers/strings/bools/null/lists/objects only."""
    _check_json(dict(obj), "seal")
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def seal_hash(seal: Mapping[str, Any]) -> str:
    """The ``audit_id``: BLAKE2b-256 of the canonical seal (which contains the chain head)."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-seal")
    h.update(canonical_json(seal))
    return h.hexdigest()


def chain_links(records: Iterable[StepRecord]) -> list[bytes]:
    """All links after GENESIS (``links[i]`` covers records ``0..i``)."""
    out: list[bytes] = []
    prev = GENESIS
    for r in records:
        prev = chain_link(prev, r)
        out.append(prev)
    return out


# ---------------------------------------------------------------------------- values


@dataclass(frozen=True)
class ArtifactRefs:
    """Fingerprints of everything the masks were computed from.

    ``grammar`` and ``tokenizer`` are enough to rebuild the exact guide (their payloads are
    archived in the store); ``policy`` and ``schema`` name the inputs the grammar was
    compiled from; ``model_id`` names the model (path, hub id or file digest).
    """

    grammar: str
    tokenizer: str
    policy: str | None = None
    schema: str | None = None
    model_id: str | None = None
    l1_grammar: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "grammar": self.grammar,
            "l1_grammar": self.l1_grammar,
            "model_id": self.model_id,
            "policy": self.policy,
            "schema": self.schema,
            "tokenizer": self.tokenizer,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArtifactRefs:
        try:
            return cls(
                grammar=str(d["grammar"]),
                tokenizer=str(d["tokenizer"]),
                policy=d.get("policy"),
                schema=d.get("schema"),
                model_id=d.get("model_id"),
                l1_grammar=d.get("l1_grammar"),
            )
        except KeyError as e:
            raise AuditError(f"seal artifacts lack {e.args[0]!r}") from e


@dataclass(frozen=True)
class AuditRecord:
    """A sealed generation: the seal (hashed), the records, and the per-record links."""

    audit_id: str
    seal: Mapping[str, Any]
    steps: tuple[StepRecord, ...]
    links: tuple[str, ...] = field(default=())

    @property
    def kind(self) -> str:
        """``"generation"`` (decoded under masks, the default) or ``"statement"`` (a
        hand-written ``run_sql`` statement: no steps, a checker verdict instead)."""
        return str(self.seal.get("kind", "generation"))

    @property
    def artifacts(self) -> ArtifactRefs:
        return ArtifactRefs.from_dict(self.seal["artifacts"])

    @property
    def stop_reason(self) -> StopReason:
        return StopReason(self.seal["stop_reason"])

    @property
    def final_sql(self) -> str:
        return str(self.seal["final_sql"])

    @property
    def question(self) -> str:
        return str(self.seal["question"])

    @property
    def user(self) -> str:
        return str(self.seal["user"])

    @property
    def previous(self) -> str | None:
        """The audit id of the previous conversation turn (None outside a conversation)."""
        prev = self.seal.get("previous")
        return None if prev is None else str(prev)

    def summary(self) -> str:
        """One line for listings and result footers."""
        when = time.strftime(
            "%Y-%m-%d %H:%M:%S", time.gmtime(int(self.seal["sealed_at_ns"]) // 1_000_000_000)
        )
        what = self.seal.get("stop_reason") if self.kind == "generation" else self.kind
        return (
            f"{self.audit_id[:16]}  {when}Z  {self.user or '-'}  {len(self.steps)} steps  "
            f"{what}  {self.final_sql[:60]!r}"
        )


# ---------------------------------------------------------------------------- the log


class AuditLog:
    """An open audit chain for one generation; append records, then :meth:`seal` once.

    The log checks shape as records arrive (contiguous step numbers, nothing after EOS) so
    a buggy producer fails at the step that broke the contract, not at verification time.
    """

    def __init__(self, *, started_at_ns: int | None = None) -> None:
        self._steps: list[StepRecord] = []
        self._links: list[bytes] = []
        self._head = GENESIS
        self._sealed: AuditRecord | None = None
        self.started_at_ns = time.time_ns() if started_at_ns is None else int(started_at_ns)

    @property
    def head(self) -> str:
        return self._head.hex()

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        return tuple(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def append(self, rec: StepRecord) -> str:
        """Chain one record; returns the new head (hex)."""
        if self._sealed is not None:
            raise AuditError("the audit log is sealed; start a new log for a new generation")
        if not isinstance(rec, StepRecord):
            raise AuditError(f"expected a StepRecord, got {type(rec).__name__}")
        if rec.step != len(self._steps):
            raise AuditError(f"record step {rec.step} out of order (expected {len(self._steps)})")
        if self._steps and self._steps[-1].kind == StepKind.EOS:
            raise AuditError("no record may follow the EOS record")
        self._head = chain_link(self._head, rec)
        self._steps.append(rec)
        self._links.append(self._head)
        return self._head.hex()

    def extend(self, recs: Iterable[StepRecord]) -> str:
        for r in recs:
            self.append(r)
        return self.head

    def seal(
        self,
        *,
        stop_reason: StopReason | str,
        artifacts: ArtifactRefs,
        final_sql: str,
        question: str = "",
        user: str = "",
        mode: str = "loop",
        flags: Iterable[str] = (),
        dialect: str = "",
        sealed_at_ns: int | None = None,
        autofix: Mapping[str, Any] | None = None,
        previous: str | None = None,
    ) -> AuditRecord:
        """Close the chain: hash the seal (head included) into the ``audit_id``.

        ``mode`` is ``"loop"`` (paper mode 1) or ``"processor"`` (mode 2, where termination
        weakens to EOS-only-at-ACCEPT); ``flags`` records further downgrades or options
        (e.g. ``"truncation-possible"``), stored sorted.

        ``autofix`` (``{"generated_sql": ..., "edits": [[start, end, old, new, kind], ...]}``)
        when the checker's deterministic fixes turned the generated statement into
        ``final_sql`` (grid_sql/policy/autofix.py): the tokens then spell ``generated_sql``,
        and ``verify`` re-derives ``final_sql`` from it. Absent otherwise, so seals of
        unfixed generations are unchanged.

        ``previous``: the audit id of the previous turn of a conversation
        (:mod:`grid_sql.ask.conversation`), whose question and SQL were in this
        generation's prompt; an auditor follows the thread back through it. Absent outside
        conversations, so other seals are unchanged. It does not affect replay (the masks
        never depend on the prompt).
        """
        if self._sealed is not None:
            raise AuditError("the audit log is already sealed")
        if mode not in MODES:
            raise AuditError(f"unknown mode {mode!r}; expected one of {MODES}")
        try:
            reason = StopReason(stop_reason)
        except ValueError as e:
            raise AuditError(f"unknown stop reason {stop_reason!r}") from e
        if reason == StopReason.TRUNCATED and mode != "processor":
            raise AuditError("a truncated stop is only possible in processor mode (paper §5)")
        if reason == StopReason.EOS and (not self._steps or self._steps[-1].kind != StepKind.EOS):
            raise AuditError("stop reason 'eos' but the last record is not the EOS record")
        seal: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "chain_head": self._head.hex(),
            "n_steps": len(self._steps),
            "stop_reason": reason.value,
            "artifacts": artifacts.as_dict(),
            "mode": mode,
            "flags": sorted(set(flags)),
            "dialect": dialect,
            "question": question,
            "user": user,
            "final_sql": final_sql,
            "started_at_ns": self.started_at_ns,
            "sealed_at_ns": time.time_ns() if sealed_at_ns is None else int(sealed_at_ns),
            # which engine computed the masks and how it hashed entry ids: a verifier of a
            # later version replays under this scheme, or says it cannot (never "tampered")
            "engine": engine_name(),
            "entry_scheme": ENTRY_SCHEME,
        }
        if autofix is not None:
            edits = autofix.get("edits")
            if not isinstance(autofix.get("generated_sql"), str) or not edits:
                raise AuditError("an autofix seal needs the generated SQL and its edits")
            seal["autofix"] = {
                "generated_sql": str(autofix["generated_sql"]),
                "edits": [list(e) for e in edits],
            }
        if previous is not None:
            if not isinstance(previous, str) or not previous:
                raise AuditError("previous must be the audit id (hex) of the previous turn")
            seal["previous"] = previous
        rec = AuditRecord(
            audit_id=seal_hash(seal),
            seal=seal,
            steps=tuple(self._steps),
            links=tuple(x.hex() for x in self._links),
        )
        self._sealed = rec
        return rec


def seal_statement(
    sql: str,
    *,
    policy: str,
    schema: str,
    violations: Iterable[str] = (),
    user: str = "",
    dialect: str = "",
    allow_writes: bool = False,
    started_at_ns: int | None = None,
    sealed_at_ns: int | None = None,
) -> AuditRecord:
    """Seal a hand-written statement (``Asker.run_sql``): what was checked, by whom, and the
    checker's verdict, before anything runs.

    Nothing was decoded, so there are no steps (the record's chain head is GENESIS); what
    an auditor needs is that the statement, the policy and schema it was checked against
    (their fingerprints; the store archives both) and the verdict are sealed and chained
    like every generation, and that its outcome follows in the store chain. ``verify``
    re-runs the checker on the archived schema and policy.
    """
    listed = [str(v) for v in violations]
    now = time.time_ns()
    seal: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "kind": "statement",
        "chain_head": GENESIS.hex(),
        "n_steps": 0,
        "artifacts": {"policy": policy, "schema": schema},
        "checker": {"passed": not listed, "violations": listed},
        "allow_writes": bool(allow_writes),
        "dialect": dialect,
        "question": "",
        "user": user,
        "final_sql": sql,
        "started_at_ns": now if started_at_ns is None else int(started_at_ns),
        "sealed_at_ns": now if sealed_at_ns is None else int(sealed_at_ns),
        "engine": engine_name(),
        "entry_scheme": ENTRY_SCHEME,
    }
    return AuditRecord(audit_id=seal_hash(seal), seal=seal, steps=(), links=())
