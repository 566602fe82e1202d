"""The store chain: every entry of an audit store commits to the entry before it.

A record's own chain (:mod:`grid_sql.audit.log`) makes its *steps* tamper-evident, but on
its own a store of such records lets anyone delete a whole record, insert a forged one or
reorder two, and the rest still verifies. So the store keeps a second chain, across
records, in its ``<prefix>_chain`` table:

    link₀ = BLAKE2b-256(canonical(body₀)),  bodyₙ = {kind, seq: n, prev: linkₙ₋₁, …}

with ``prev`` of entry 0 the store genesis. Entry kinds:

``record``
    a sealed record was stored (``audit_id`` = the seal's hash, which covers its steps);
``outcome``
    what happened when the record's statement was executed (ran or not, row count, error
    class, duration): appended, never an UPDATE of the record, so the store stays
    append-only and the outcome is itself chained;
``guards``
    a writer opened the store and found append-only triggers missing; it re-installed them
    and wrote this entry, so the evidence that the store was not append-only for a while
    outlives the repair (verify reports it as a failure, for ever);
``adopt``
    the chain was started on a store that already held unchained records (sealed before
    store chaining existed): their ids, so deleting one of them later is detected too.

The head ``"<seq>:<link>"`` can be exported (``grid-sql audit head``) and kept where the
store's writers cannot reach; ``verify --head`` then also detects truncation (entries
dropped from the end), which no self-contained log can.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import AuditError
from .log import canonical_json

STORE_GENESIS: str = hashlib.blake2b(
    b"grid-sql audit store chain genesis", digest_size=32, person=b"grid-sql-chain"
).hexdigest()
KINDS = ("record", "outcome", "guards", "adopt")


def entry_link(body: Mapping[str, Any]) -> str:
    """The link of a chain entry: BLAKE2b-256 of its canonical body (which holds ``prev``)."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-chain")
    h.update(canonical_json(body))
    return h.hexdigest()


@dataclass(frozen=True)
class ChainHead:
    """The last entry of a store chain: what an auditor keeps elsewhere."""

    seq: int
    link: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.link}"

    @classmethod
    def parse(cls, text: str) -> ChainHead:
        """``"<seq>:<link>"`` as :meth:`__str__` writes it (``grid-sql audit head``)."""
        seq, sep, link = text.strip().partition(":")
        link = link.lower()
        if (
            not sep
            or not seq.isdigit()
            or len(link) != 64
            or any(c not in "0123456789abcdef" for c in link)
        ):
            raise AuditError(f"a chain head is '<seq>:<64 hex digits>', not {text!r}")
        return cls(int(seq), link)


@dataclass(frozen=True)
class ChainEntry:
    """One stored row of the chain table, as read back (not yet verified)."""

    seq: int
    kind: str
    audit_id: str | None
    body_text: str
    link: str

    def body(self) -> dict[str, Any]:
        try:
            b = json.loads(self.body_text)
        except ValueError as e:
            raise AuditError(f"chain entry {self.seq}: body is not JSON: {e}") from e
        if not isinstance(b, dict):
            raise AuditError(f"chain entry {self.seq}: body is not an object")
        return b


@dataclass(frozen=True)
class Outcome:
    """An execution outcome as the chain records it (integer nanoseconds: no floats)."""

    audit_id: str
    ran: bool
    rowcount: int | None
    error: str | None
    duration_ns: int
    at_ns: int
    seq: int
    dry_run: bool = False  # previewed: ran in a transaction that was rolled back

    def describe(self) -> str:
        if self.ran and self.dry_run:
            rows = "?" if self.rowcount is None else str(self.rowcount)
            what = f"previewed (dry run, rolled back; {rows} row(s) would change)"
        elif self.ran:
            rows = "?" if self.rowcount is None else str(self.rowcount)
            what = f"ran ({rows} row(s))"
        else:
            what = f"did not run ({self.error or 'no error recorded'})"
        return f"{what} in {self.duration_ns / 1e6:.1f} ms (chain entry {self.seq})"


@dataclass(frozen=True)
class ChainFinding:
    """A chain-level failure: where (entry ``seq``, or ``None`` for the store) and what."""

    seq: int | None
    what: str

    def __str__(self) -> str:
        return f"{'store' if self.seq is None else f'chain entry {self.seq}'}: {self.what}"


@dataclass
class ChainReport:
    """The outcome of checking a store's chain (and its guards); ``ok`` iff no finding."""

    entries: int = 0
    head: ChainHead | None = None
    findings: list[ChainFinding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # audit id -> the chain entry that stored it ("record" or "adopt")
    members: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, seq: int | None, what: str) -> None:
        if len(self.findings) < 50:
            self.findings.append(ChainFinding(seq, what))

    def describe(self) -> str:
        head = str(self.head) if self.head else "(empty)"
        if self.ok:
            out = f"store chain: OK — {self.entries} entries, head {head}"
        else:
            out = (
                f"store chain: FAILED — {len(self.findings)} finding(s); first: "
                f"{self.findings[0]}" + "".join(f"\n  - {d}" for d in self.findings[1:])
            )
        return out + "".join(f"\n  warning: {w}" for w in self.warnings)


def check_chain(
    entries: Sequence[ChainEntry],
    seals: Mapping[str, Mapping[str, Any] | None],
    *,
    missing_guards: Iterable[str] = (),
    head: ChainHead | None = None,
) -> ChainReport:
    """Check a store's chain against its seals.

    ``entries`` in ``seq`` order; ``seals`` maps every stored audit id to its parsed seal
    (``None`` if unparsable). Findings: a gap or a duplicate in ``seq`` (an entry deleted or
    inserted), a body that does not hash to its link or names another ``prev`` (edited,
    inserted or reordered), a chained record missing from the store (deleted), a stored
    record that is in no entry (inserted beside the chain), an outcome of an unknown or
    later record, a ``guards`` entry (the store was not append-only for a time), guards
    missing now, and — given an externally kept ``head`` — a chain that no longer reaches
    it (truncated) or reaches another entry there (rewritten).
    """
    rep = ChainReport(entries=len(entries))
    prev = STORE_GENESIS
    for pos, e in enumerate(entries):
        if e.seq != pos:
            rep.add(
                pos,
                f"the entry stored here is numbered {e.seq}: an entry was deleted, inserted "
                "or reordered",
            )
            break
        try:
            body = e.body()
        except AuditError as err:
            rep.add(e.seq, str(err))
            break
        if body.get("prev") != prev:
            rep.add(
                e.seq,
                f"prev is {str(body.get('prev'))[:16]}… but the entry before links "
                f"{prev[:16]}…: an entry was deleted, inserted or reordered before it",
            )
            break
        if body.get("seq") != e.seq or body.get("kind") != e.kind:
            rep.add(e.seq, "the stored seq/kind columns differ from the hashed body")
            break
        try:
            again = entry_link(body)
        except AuditError as err:
            rep.add(e.seq, str(err))
            break
        if again != e.link:
            rep.add(e.seq, f"the body hashes to {again[:16]}… not its link {e.link[:16]}…")
            break
        _check_entry(e, body, seals, rep)
        prev = e.link
    if entries and rep.ok:
        rep.head = ChainHead(entries[-1].seq, entries[-1].link)
    for audit_id in seals:
        if audit_id not in rep.members:
            rep.add(
                None,
                f"record {audit_id[:16]} is in the store but in no chain entry: inserted "
                "beside the chain (or its chain entry was deleted, or it was written by a "
                "grid-sql without store chaining)",
            )
    missing = list(missing_guards)
    if missing:
        rep.add(
            None,
            "the store is not append-only: append-only triggers are missing ("
            + ", ".join(missing)
            + "); left as found (verify never re-installs them)",
        )
    if head is not None:
        if head.seq >= len(entries):
            rep.add(
                None,
                f"the kept head is entry {head.seq} but the chain has {len(entries)} "
                "entries: it was truncated",
            )
        elif entries[head.seq].link != head.link:
            rep.add(
                head.seq,
                f"the kept head links {head.link[:16]}… but this entry links "
                f"{entries[head.seq].link[:16]}…: the chain was rewritten",
            )
    return rep


def _check_entry(
    e: ChainEntry,
    body: Mapping[str, Any],
    seals: Mapping[str, Mapping[str, Any] | None],
    rep: ChainReport,
) -> None:
    """The kind-specific checks of one entry whose link is sound."""
    kind = e.kind
    if kind == "record":
        aid = str(body.get("audit_id"))
        if e.audit_id != aid:
            rep.add(e.seq, "the stored audit_id column differs from the hashed body")
        if aid in rep.members:
            rep.add(e.seq, f"record {aid[:16]} is chained twice")
        rep.members[aid] = e.seq
        if aid not in seals:
            rep.add(e.seq, f"record {aid[:16]} was chained here but is not in the store: deleted")
    elif kind == "adopt":
        ids = body.get("audit_ids")
        if not isinstance(ids, list):
            rep.add(e.seq, "an adopt entry without its list of audit ids")
            return
        for aid in ids:
            rep.members[str(aid)] = e.seq
            if aid not in seals:
                rep.add(
                    e.seq,
                    f"unchained record {str(aid)[:16]} was adopted here but is not in the "
                    "store: deleted",
                )
            elif "entry_scheme" in (seals[aid] or {}):
                # a seal naming its scheme was written by a chaining engine, so it had its
                # own entry: being adopted means the chain was dropped and started over
                rep.add(
                    e.seq,
                    f"record {str(aid)[:16]} was sealed with store chaining but is only "
                    "adopted here: the chain was dropped and restarted",
                )
    elif kind == "outcome":
        aid = str(body.get("audit_id"))
        if aid not in rep.members:
            rep.add(e.seq, f"an outcome of record {aid[:16]}, which no earlier entry chains")
            return
        try:
            out = Outcome(
                audit_id=aid,
                ran=_bool(body["ran"]),
                rowcount=None if body.get("rowcount") is None else int(body["rowcount"]),
                error=None if body.get("error") is None else str(body["error"]),
                duration_ns=int(body["duration_ns"]),
                at_ns=int(body["at_ns"]),
                seq=e.seq,
                dry_run=_bool(body.get("dry_run", False)),
            )
        except (KeyError, TypeError, ValueError) as err:
            rep.add(e.seq, f"a malformed outcome: {err!r}")
            return
        rep.outcomes.setdefault(aid, []).append(out)
    elif kind == "guards":
        rep.add(
            e.seq,
            "the store was not append-only for a time: a writer found the triggers "
            + ", ".join(str(x) for x in body.get("missing") or [])
            + " missing and re-installed them",
        )
    else:
        rep.add(e.seq, f"unknown entry kind {kind!r}")


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"ran must be a bool, not {v!r}")
    return v
