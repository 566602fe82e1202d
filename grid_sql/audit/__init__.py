"""The audit trail (paper §6.4): hash-chained per-token records, seals, store, replay.

``AuditLog`` chains the decode loop's :class:`~grid_sql.decode.records.StepRecord` values and
seals them into an :class:`AuditRecord`; :class:`AuditStore` keeps records and the artifacts
a replay needs, append-only; :func:`verify` replays a record to bit-identical masks and names
the first divergence; :func:`explain` says what was allowed at a step and why a token was not.
"""

from .artifacts import (
    Artifact,
    grammar_artifact,
    rebuild_grammar,
    rebuild_vocab,
    refs_for,
    vocab_artifact,
)
from .cli import audit_main
from .explain import Explainer, explain
from .log import GENESIS, ArtifactRefs, AuditLog, AuditRecord, chain_link, encode_step, seal_hash
from .store import AuditStore, default_path
from .verify import Divergence, Verifier, VerifyReport, verify, verify_all

__all__ = [
    "GENESIS",
    "Artifact",
    "ArtifactRefs",
    "AuditLog",
    "AuditRecord",
    "AuditStore",
    "Divergence",
    "Explainer",
    "Verifier",
    "VerifyReport",
    "audit_main",
    "chain_link",
    "default_path",
    "encode_step",
    "explain",
    "grammar_artifact",
    "rebuild_grammar",
    "rebuild_vocab",
    "refs_for",
    "seal_hash",
    "verify",
    "verify_all",
    "vocab_artifact",
]
