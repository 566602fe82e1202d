"""The audit trail (paper §6.4): hash-chained per-token records, seals, store, replay.

``AuditLog`` chains the decode loop's :class:`~grid_sql.decode.records.StepRecord` values and
seals them into an :class:`AuditRecord`; :class:`AuditStore` keeps records and the artifacts
a replay needs, append-only, and chains every record and execution outcome to the entry
before it (:mod:`~grid_sql.audit.chain`); :func:`verify` replays a record to bit-identical
masks and names the first divergence; :func:`verify_store` checks the store chain and its
guards; :func:`explain` says what was allowed at a step and why a token was not.
"""

from .artifacts import (
    Artifact,
    grammar_artifact,
    rebuild_grammar,
    rebuild_vocab,
    refs_for,
    vocab_artifact,
)
from .chain import ChainHead, ChainReport, Outcome
from .cli import audit_main
from .explain import Explainer, explain
from .log import GENESIS, ArtifactRefs, AuditLog, AuditRecord, chain_link, encode_step, seal_hash
from .statement import execution_outcome, seal_run_sql
from .store import AuditStore, default_path
from .verify import Divergence, Verifier, VerifyReport, verify, verify_all, verify_store

__all__ = [
    "GENESIS",
    "Artifact",
    "ArtifactRefs",
    "AuditLog",
    "AuditRecord",
    "AuditStore",
    "ChainHead",
    "ChainReport",
    "Divergence",
    "Explainer",
    "Outcome",
    "Verifier",
    "VerifyReport",
    "audit_main",
    "chain_link",
    "default_path",
    "encode_step",
    "execution_outcome",
    "explain",
    "grammar_artifact",
    "rebuild_grammar",
    "rebuild_vocab",
    "refs_for",
    "seal_hash",
    "seal_run_sql",
    "verify",
    "verify_all",
    "verify_store",
    "vocab_artifact",
]
