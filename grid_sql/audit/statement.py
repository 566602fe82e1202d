"""Hand-written statements and execution outcomes in the audit trail.

``Asker.run_sql`` runs SQL nobody generated: there are no masks to replay, but an auditor
still needs to know that the statement was checked, against which policy and schema, with
what verdict, by whom — and whether it then ran. :func:`seal_run_sql` seals and chains that
before anything runs; :func:`execution_outcome` wraps an execution (of a generated or a
hand-written statement) and chains what happened — ran or not, row count, error class,
duration — as its own store-chain entry linked to the record. :func:`verify_statement` is
the verifier's part for statement records: the checker is run again on the archived schema
and policy.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import AuditError
from .log import GENESIS, AuditRecord, seal_statement

if TYPE_CHECKING:
    from ..policy.model import Policy
    from ..schema.model import SchemaSnapshot
    from .report import VerifyReport
    from .store import AuditStore

__all__ = ["ExecutionOutcome", "execution_outcome", "seal_run_sql", "verify_statement"]


def seal_run_sql(
    store: AuditStore,
    sql: str,
    *,
    violations: Iterable[str],
    policy: Policy,
    schema: SchemaSnapshot,
    user: str = "",
    dialect: str = "",
    allow_writes: bool = False,
    started_at_ns: int | None = None,
) -> str:
    """Seal a hand-written statement with the checker's verdict, archive the schema and the
    policy it was checked against (so ``verify`` can check it again), chain it; returns the
    audit id. Called before execution, so a refused or failing statement is on record too."""
    rec = seal_statement(
        sql,
        policy=policy.fingerprint,
        schema=schema.fingerprint,
        violations=violations,
        user=user,
        dialect=dialect,
        allow_writes=allow_writes,
        started_at_ns=started_at_ns,
    )
    return store.append(rec, schema=schema, policy=policy)


@dataclass
class ExecutionOutcome:
    """Filled in by the code inside :func:`execution_outcome`: the row count, once known."""

    rowcount: int | None = None
    dry_run: bool = False  # the statement was previewed: its transaction was rolled back


@contextlib.contextmanager
def execution_outcome(store: AuditStore | None, audit_id: str | None) -> Iterator[ExecutionOutcome]:
    """Chain the outcome of the execution inside the ``with`` block to record ``audit_id``.

    Normal exit: ``ran`` with the row count set on the yielded object; an exception: not
    ``ran``, with the exception's class name, and the exception propagates unchanged (if
    the outcome itself cannot be written, a note on the exception says so — the caller's
    error stays the one it gets). If the outcome of a statement that *completed* cannot be
    chained, :class:`AuditError` is raised: the audit trail is not optional once enabled,
    even though the statement ran (a write is committed). With no store or no record this
    does nothing.
    """
    box = ExecutionOutcome()
    t0 = time.perf_counter_ns()
    try:
        yield box
    except BaseException as exc:
        if store is not None and audit_id is not None:
            try:
                store.append_outcome(
                    audit_id,
                    ran=False,
                    error=type(exc).__name__,
                    duration_ns=time.perf_counter_ns() - t0,
                )
            except AuditError as audit_exc:
                exc.add_note(f"the audit outcome could not be chained: {audit_exc}")
        raise
    if store is not None and audit_id is not None:
        store.append_outcome(
            audit_id,
            ran=True,
            rowcount=box.rowcount,
            duration_ns=time.perf_counter_ns() - t0,
            dry_run=box.dry_run,
        )


def record_refusal(store: AuditStore | None, audit_id: str | None, error: str) -> None:
    """Chain that record ``audit_id``'s statement was refused before execution (``error``:
    the refusing error's class, e.g. ``"PolicyViolation"``): it did not run."""
    if store is not None and audit_id is not None:
        store.append_outcome(audit_id, ran=False, error=error, duration_ns=0)


def verify_statement(store: AuditStore, rec: AuditRecord, rep: VerifyReport) -> None:
    """The verifier's checks of a statement record (its seal hash and store chain membership
    are checked by the caller): no steps, and the checker, run again on the archived schema
    and policy, gives the sealed verdict.

    A different verdict is a warning, not a finding: the checker is code that changes
    between versions (a function added to an allow-list, say), and the seal — which is what
    could be forged — is already bound by its hash and the store chain."""
    from ..policy.checker import Checker
    from .artifacts import rebuild_policy, rebuild_schema
    from .report import Divergence

    seal = rec.seal
    rep.kind = "statement"
    if rec.steps or seal.get("n_steps") != 0 or seal.get("chain_head") != GENESIS.hex():
        rep.add(
            Divergence(None, "n_steps", "no steps (a hand-written statement)", str(len(rec.steps)))
        )
    arts = seal.get("artifacts")
    verdict = seal.get("checker")
    if not isinstance(arts, dict) or not isinstance(verdict, dict):
        rep.add(Divergence(None, "seal", "artifacts and checker objects", "missing"))
        return
    try:
        fps = (str(arts["schema"]), str(arts["policy"]))
        loaded = []
        for fp in fps:
            art = store.artifact(fp)
            if store.artifact_content_hash(fp) != art.content_hash:
                raise AuditError(f"artifact {fp[:16]}: payload does not match its hash")
            loaded.append(art)
        snap = rebuild_schema(loaded[0])
        pol = rebuild_policy(loaded[1])
    except (AuditError, KeyError) as e:
        rep.add(Divergence(None, "artifacts", "archived schema and policy", str(e)))
        return
    again = [v.message for v in Checker(snap, pol).check(str(seal.get("final_sql", "")))]
    sealed = [str(v) for v in verdict.get("violations") or []]
    if bool(verdict.get("passed")) != (not sealed):
        rep.add(Divergence(None, "checker", "passed iff no violations", repr(verdict)))
    elif again != sealed:
        rep.warnings.append(
            "this version's checker, on the archived schema and policy, gives "
            + ("no violation" if not again else "; ".join(again))
            + " where the seal says "
            + ("none" if not sealed else "; ".join(sealed))
            + f" (sealed by {seal.get('engine') or 'an unnamed engine'})"
        )
