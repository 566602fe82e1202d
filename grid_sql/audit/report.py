"""What verifying one audit record found: :class:`Divergence` findings in a
:class:`VerifyReport`.

Split out of :mod:`grid_sql.audit.verify` (which re-exports both) along the seam between the
report and the two verifiers that fill it: the replay of a generation (``verify``) and the
re-check of a hand-written statement (``statement``). With the report in ``verify``, the two
modules imported each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .chain import Outcome

__all__ = ["MAX_FINDINGS", "Divergence", "VerifyReport"]

MAX_FINDINGS = 50


@dataclass(frozen=True)
class Divergence:
    """One finding: where (step or ``None`` for the seal/artifacts), which field, and why."""

    step: int | None
    field: str
    expected: str
    actual: str
    note: str = ""

    def __str__(self) -> str:
        where = "seal" if self.step is None else f"step {self.step}"
        msg = f"{where}: {self.field} recorded {self.expected} but replay gives {self.actual}"
        return f"{msg} ({self.note})" if self.note else msg


@dataclass
class VerifyReport:
    """The outcome of verifying one record.

    Three verdicts: ``ok`` (everything re-derived), ``tampered`` (a finding: something
    differs from what was sealed and chained) and ``not_replayable`` (no finding, but the
    record was sealed under an entry-id scheme this version cannot replay: its seal and
    chains were checked, its masks were not — never reported as tampering)."""

    audit_id: str
    steps: int = 0
    replayed: int = 0
    findings: list[Divergence] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kind: str = "generation"
    # the entry-id scheme the replay used (None: not replayed) and how it was chosen
    scheme: int | None = None
    scheme_note: str = ""
    not_replayable: str = ""
    # the store chain entry that holds the record, and its execution outcomes
    chain_entry: int | None = None
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings and not self.not_replayable

    @property
    def tampered(self) -> bool:
        return bool(self.findings)

    @property
    def first(self) -> Divergence | None:
        return self.findings[0] if self.findings else None

    def add(self, d: Divergence) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(d)

    def describe(self) -> str:
        head = f"audit {self.audit_id[:16]}: "
        if self.findings:
            out = head + f"TAMPERED or DIVERGENT — {len(self.findings)} finding(s); first: "
            out += str(self.findings[0])
            out += "".join(f"\n  - {d}" for d in self.findings[1:])
        elif self.not_replayable:
            out = head + "NOT REPLAYABLE — " + self.not_replayable
        elif self.kind == "statement":
            out = head + "OK — hand-written statement; seal intact, checker verdict re-derived"
        else:
            out = head + f"OK — {self.replayed}/{self.steps} steps replay bit-identically"
            if self.scheme is not None:
                out += f" (entry-id scheme {self.scheme})"
        if self.scheme_note:
            out += f"\n  note: {self.scheme_note}"
        if self.chain_entry is not None:
            out += f"\n  chained at store entry {self.chain_entry}"
        out += "".join(f"\n  outcome: {o.describe()}" for o in self.outcomes)
        return out + "".join(f"\n  warning: {w}" for w in self.warnings)
