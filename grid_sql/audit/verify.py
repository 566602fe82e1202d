"""Replay and verification of audit records, and explanations of single steps (paper §6.4).

:func:`verify` re-derives everything a record claims from the archived artifacts alone:

1. the seal hashes to the ``audit_id`` (nothing in the seal was edited);
2. the steps are numbered 0..n-1 and re-chain from GENESIS to the sealed head, link by link
   (so the first edited, dropped, inserted or reordered record is named);
3. the grammar and the vocabulary rebuild from the archive to the sealed fingerprints;
4. a fresh guide (its own mask cache, nothing shared with the producer) replays the tokens:
   every step's configuration hash, mask-entry ids, mask digest, allowed and blocked counts
   and kind must come out bit-identical, and every token must be inside its mask;
5. the replayed output is the sealed SQL, and the stop reason is consistent with the chain.

Each finding is a :class:`Divergence` that says in words where and what (step, field,
recorded vs recomputed). :func:`explain` answers "what was the model allowed to say at step
t, and why was X blocked", telling apart a syntax error, a verb the role's projection removed
and a name outside the role's schema lexicon.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..decode.records import StepKind, StopReason, mask_digest
from ..errors import AuditError, TokenRejected
from ..grammar.ir import Grammar
from ..mask.cache import MaskCache
from ..mask.guide import Guide, Matcher
from ..mask.vocab import Vocabulary
from ..parser.incremental import Configuration
from .artifacts import rebuild_grammar, rebuild_vocab
from .chain import ChainHead, ChainReport, Outcome, check_chain
from .log import FORMAT_VERSION, GENESIS, AuditRecord, chain_link, seal_hash
from .report import MAX_FINDINGS, Divergence, VerifyReport  # noqa: F401 - re-exported
from .schemes import ENTRY_SCHEME, REPLAYABLE, SCHEME_NAMES, engine_name, entry_id_under
from .store import AuditStore


def _short(x: object) -> str:
    s = str(x)
    return s if len(s) <= 24 else s[:20] + "…"


class Verifier:
    """Verifies records of one store, rebuilding each (grammar, vocabulary) guide once.

    The guides use a mask cache of their own, so a replay recomputes every mask rather than
    reading back what the producing process cached.
    """

    def __init__(self, store: AuditStore, *, cache: MaskCache | None = None) -> None:
        self.store = store
        self.cache = cache if cache is not None else MaskCache()
        self._grammars: dict[str, Grammar] = {}
        self._vocabs: dict[str, Vocabulary] = {}
        self._guides: dict[tuple[str, str], Guide] = {}
        self._index: tuple[dict[str, int], dict[str, list[Outcome]]] | None = None

    # ---------------------------------------------------------------- artifacts
    def grammar(self, fp: str) -> Grammar:
        g = self._grammars.get(fp)
        if g is None:
            art = self.store.artifact(fp)
            stored = self.store.artifact_content_hash(fp)
            if stored != art.content_hash:
                raise AuditError(f"grammar artifact {fp[:16]}: payload does not match its hash")
            g = rebuild_grammar(art)
            self._grammars[fp] = g
        return g

    def vocab(self, fp: str) -> Vocabulary:
        v = self._vocabs.get(fp)
        if v is None:
            art = self.store.artifact(fp)
            if self.store.artifact_content_hash(fp) != art.content_hash:
                raise AuditError(f"tokenizer artifact {fp[:16]}: payload does not match its hash")
            v = rebuild_vocab(art)
            self._vocabs[fp] = v
        return v

    def guide(self, grammar_fp: str, vocab_fp: str) -> Guide:
        key = (grammar_fp, vocab_fp)
        g = self._guides.get(key)
        if g is None:
            g = Guide(self.grammar(grammar_fp), self.vocab(vocab_fp), cache=self.cache)
            self._guides[key] = g
        return g

    # ---------------------------------------------------------------- verification
    def verify(self, audit_id: str, *, first_only: bool = False) -> VerifyReport:
        """Verify a stored record; an unknown id raises, an unreadable record is a finding."""
        full = self.store.resolve(audit_id)
        try:
            rec = self.store.get(full)
        except AuditError as e:
            rep = VerifyReport(full)
            rep.add(Divergence(None, "record", "a well-formed stored record", str(e)))
            return rep
        rep = self.verify_record(rec, first_only=first_only)
        self._check_membership(full, rep)
        return rep

    def _chain_index(
        self, refresh: bool = False
    ) -> tuple[dict[str, int], dict[str, list[Outcome]]]:
        """Which chain entry holds each record, and each record's outcomes, read from the
        entries as stored (their links are :meth:`verify_store`'s business)."""
        if self._index is None or refresh:
            members: dict[str, int] = {}
            outcomes: dict[str, list[Outcome]] = {}
            for e in self.store.chain():
                try:
                    body = e.body()
                except AuditError:
                    continue
                if e.kind == "record":
                    members.setdefault(str(body.get("audit_id")), e.seq)
                elif e.kind == "adopt":
                    for aid in body.get("audit_ids") or []:
                        members.setdefault(str(aid), e.seq)
                elif e.kind == "outcome":
                    try:
                        o = Outcome(
                            str(body["audit_id"]),
                            bool(body["ran"]),
                            None if body.get("rowcount") is None else int(body["rowcount"]),
                            None if body.get("error") is None else str(body["error"]),
                            int(body["duration_ns"]),
                            int(body["at_ns"]),
                            e.seq,
                            bool(body.get("dry_run", False)),
                        )
                    except (KeyError, TypeError, ValueError):
                        continue
                    outcomes.setdefault(o.audit_id, []).append(o)
            self._index = (members, outcomes)
        return self._index

    def _check_membership(self, audit_id: str, rep: VerifyReport) -> None:
        if not self.store.has_chain:
            rep.warnings.append(
                "the store has no chain (written before store chaining): whole records "
                "deleted, inserted or reordered cannot be detected"
            )
            return
        members, outcomes = self._chain_index()
        if audit_id not in members:
            members, outcomes = self._chain_index(refresh=True)
        rep.chain_entry = members.get(audit_id)
        rep.outcomes = list(outcomes.get(audit_id, ()))
        if rep.chain_entry is None:
            rep.add(
                Divergence(
                    None,
                    "store chain",
                    "an entry chaining this record",
                    "none",
                    "inserted beside the store chain, or its chain entry was deleted",
                )
            )

    def verify_store(self, head: ChainHead | str | None = None) -> ChainReport:
        """Check the store chain (:func:`grid_sql.audit.chain.check_chain`) and the guards:
        deleted, inserted or reordered records and entries, removed guards (now, or found
        and repaired by a writer earlier), and, given the ``head`` an auditor kept,
        truncation. Reads only: a missing guard stays missing."""
        kept = ChainHead.parse(head) if isinstance(head, str) else head
        if not self.store.has_chain:
            rep = check_chain([], {}, missing_guards=self.store.missing_guards(), head=kept)
            rep.warnings.append(
                "the store has no chain (written before store chaining): whole records "
                "deleted, inserted or reordered cannot be detected"
            )
            return rep
        self._index = None
        return check_chain(
            self.store.chain(),
            self.store.seals_by_id(),
            missing_guards=self.store.missing_guards(),
            head=kept,
        )

    def verify_record(self, rec: AuditRecord, *, first_only: bool = False) -> VerifyReport:
        """Verify one record; ``first_only`` stops the replay at the first divergence."""
        rep = VerifyReport(rec.audit_id, steps=len(rec.steps))
        seal = rec.seal
        try:
            again = seal_hash(seal)
        except AuditError as e:
            rep.add(Divergence(None, "seal", "a canonical seal", str(e)))
            return rep
        if again != rec.audit_id:
            rep.add(
                Divergence(
                    None,
                    "audit_id",
                    _short(rec.audit_id),
                    _short(again),
                    "the seal was edited after sealing",
                )
            )
        if seal.get("format") != FORMAT_VERSION:
            rep.add(Divergence(None, "format", str(seal.get("format")), str(FORMAT_VERSION)))
            return rep
        rep.kind = rec.kind
        self._check_chain(rec, rep)
        self._check_previous(rec, rep)
        missing = self.store.missing_guards()
        if missing:
            rep.warnings.append(
                "the store is not append-only (missing triggers: "
                + ", ".join(missing)
                + "): see the store chain verdict"
            )
        if rec.kind == "statement":
            from .statement import verify_statement

            verify_statement(self.store, rec, rep)
            return rep
        if rec.kind != "generation":
            rep.add(Divergence(None, "kind", rec.kind, "generation or statement"))
            return rep
        scheme = seal.get("entry_scheme")
        if scheme is None:
            rep.warnings.append(
                "sealed before seals named their engine and entry-id scheme: the scheme is "
                "inferred from the recorded ids"
            )
        elif not isinstance(scheme, int) or isinstance(scheme, bool) or scheme not in REPLAYABLE:
            by = seal.get("engine") or "an unnamed engine"
            rep.not_replayable = (
                f"sealed under scheme {scheme}, not replayable by this version (entry-id "
                f"scheme {scheme}, sealed by {by}; {engine_name()} replays schemes "
                f"{', '.join(map(str, REPLAYABLE))}); its seal and step chain were checked"
            )
            return rep
        try:
            refs = rec.artifacts
            guide = self.guide(refs.grammar, refs.tokenizer)
        except AuditError as e:
            rep.add(Divergence(None, "artifacts", "archived grammar and tokenizer", str(e)))
            return rep
        if first_only and rep.findings:
            return rep
        self._replay(rec, guide, rep, first_only)
        return rep

    def _check_previous(self, rec: AuditRecord, rep: VerifyReport) -> None:
        """A conversation turn names its previous turn (``previous``): that record must be
        in this store and sealed before it, or the thread an auditor follows is broken."""
        prev = rec.seal.get("previous")
        if prev is None:
            return
        try:
            before = self.store.get(str(prev))
        except AuditError as e:
            rep.add(Divergence(None, "previous", _short(str(prev)), "no such record", str(e)))
            return
        if before.audit_id != prev or int(before.seal["sealed_at_ns"]) > int(
            rec.seal["started_at_ns"]
        ):
            rep.add(
                Divergence(
                    None,
                    "previous",
                    _short(str(prev)),
                    _short(before.audit_id),
                    "the previous turn must be a full id sealed before this generation began",
                )
            )

    def _check_chain(self, rec: AuditRecord, rep: VerifyReport) -> None:
        seal = rec.seal
        for pos, s in enumerate(rec.steps):
            if s.step != pos:
                rep.add(
                    Divergence(
                        pos,
                        "step number",
                        str(s.step),
                        str(pos),
                        "a record was deleted, inserted or reordered",
                    )
                )
                break
        prev = GENESIS
        stored = rec.links
        for pos, s in enumerate(rec.steps):
            try:
                prev = chain_link(prev, s)
            except AuditError as e:
                rep.add(Divergence(pos, "record", "a well-formed record", str(e)))
                return
            if pos < len(stored) and stored[pos] != prev.hex():
                rep.add(
                    Divergence(
                        s.step,
                        "chain link",
                        _short(stored[pos]),
                        _short(prev.hex()),
                        "this record differs from the one that was chained",
                    )
                )
                break
        if prev.hex() != seal.get("chain_head"):
            rep.add(
                Divergence(
                    None,
                    "chain_head",
                    _short(seal.get("chain_head")),
                    _short(prev.hex()),
                    "the records are not the ones that were sealed",
                )
            )
        if seal.get("n_steps") != len(rec.steps):
            rep.add(Divergence(None, "n_steps", str(seal.get("n_steps")), str(len(rec.steps))))

    def _replay(
        self, rec: AuditRecord, guide: Guide, rep: VerifyReport, first_only: bool = False
    ) -> None:
        vocab = guide.vocab
        m = guide.matcher()
        buf = m.allocate_bitmask()
        eos = vocab.eos_token_id
        ids = _SchemeIds(rec.seal.get("entry_scheme"))
        for pos, s in enumerate(rec.steps):
            step = s.step
            if m.is_terminated():
                rep.add(Divergence(step, "kind", s.kind, "nothing", "a record after EOS"))
                return
            cfg = m.config
            if cfg.config_hash != s.config_hash:
                rep.add(
                    Divergence(
                        step,
                        "config_hash",
                        f"{s.config_hash:016x}",
                        f"{cfg.config_hash:016x}",
                        "the parser trajectory differs",
                    )
                )
            if s.kind == StepKind.CHECKED or (s.kind == StepKind.EOS and not s.mask_digest):
                # a step decided without a mask (decode/loop.py, check_first): the model's
                # favourite checked against the language, or the EOS tail checked at ACCEPT.
                # The record names no mask, and the token must be one the parser accepts
                # here (EOS only as the EOS tail: a favourite EOS ends the loop)
                if s.entry_ids or s.mask_digest or s.allowed or s.blocked:
                    rep.add(Divergence(step, "kind", str(s.kind), "a step that names a mask"))
                if s.kind == StepKind.EOS and s.token != eos:
                    rep.add(Divergence(step, "kind", str(s.kind), "sampled/checked"))
                try:
                    if s.kind == StepKind.CHECKED and s.token == eos:
                        raise TokenRejected("EOS is never a checked step")
                    m.accept_token(s.token)
                except TokenRejected:
                    rep.add(
                        Divergence(
                            step,
                            "token",
                            f"{s.token} ({_spell(vocab, s.token)})",
                            "outside the language",
                            "this token was not allowed at this step",
                        )
                    )
                    return
                if first_only and rep.findings:
                    return
                rep.replayed = pos + 1
                continue
            try:
                n, entries = guide.fill_bitmask(cfg, buf)
            except Exception as e:  # an empty mask is a bug, reported as a finding
                rep.add(Divergence(step, "mask", "a mask", f"{type(e).__name__}: {e}"))
                return
            digest = mask_digest(buf)
            got = ids.compare(guide, cfg, tuple(entries), tuple(s.entry_ids))
            if got is not None:
                rep.add(
                    Divergence(
                        step,
                        "entry_ids",
                        ",".join(x[:12] for x in s.entry_ids),
                        ",".join(x[:12] for x in got),
                        ids.note,
                    )
                )
            if digest != s.mask_digest:
                rep.add(Divergence(step, "mask_digest", s.mask_digest, digest))
            if n != s.allowed:
                rep.add(Divergence(step, "allowed", str(s.allowed), str(n)))
            if vocab.size - n != s.blocked:
                rep.add(Divergence(step, "blocked", str(s.blocked), str(vocab.size - n)))
            tok = s.token
            inside = 0 <= tok < vocab.size and bool(
                (int(buf.view(np.uint32)[tok >> 5]) >> (tok & 31)) & 1
            )
            if not inside:
                rep.add(
                    Divergence(
                        step,
                        "token",
                        f"{tok} ({_spell(vocab, tok)})",
                        "outside the mask",
                        "this token was not allowed at this step",
                    )
                )
                return
            kind_ok = {
                StepKind.EOS: tok == eos,
                StepKind.FORCED: n == 1 and tok != eos,
                StepKind.SAMPLED: tok != eos,
                StepKind.RESERVE: True,
                # written for a select-list obligation: one must be pending (decode/bind.py)
                StepKind.BIND: tok != eos and guide.runtime.pending_refs(m.config.stack),
            }.get(StepKind(s.kind), False)
            if tok == eos and s.kind != StepKind.EOS:
                kind_ok = False
            if not kind_ok:
                expect = "eos" if tok == eos else ("forced" if n == 1 else "sampled/reserve")
                if s.kind == StepKind.BIND and tok != eos:
                    expect = "no select-list obligation pending: not a bind step"
                rep.add(Divergence(step, "kind", str(s.kind), expect))
            if first_only and rep.findings:
                return
            m.accept_token(tok)
            rep.replayed = pos + 1
        rep.scheme, rep.scheme_note = ids.result()
        self._check_end(rec, m, rep, guide.grammar)

    def _check_autofix(self, rec: AuditRecord, grammar: Grammar, rep: VerifyReport) -> str:
        """The generated SQL an autofixed seal claims (what the tokens must spell), after
        checking that the sealed edits turn it into the sealed final SQL, that the result is
        in the role grammar, and — when the schema and policy are archived — that autofix
        re-derives exactly these edits from the generated SQL."""
        from ..parser.incremental import accepts
        from ..policy.autofix import autofix, replay_edits

        seal = rec.seal
        fix = seal.get("autofix")
        final = str(seal.get("final_sql", ""))
        if not isinstance(fix, dict):
            rep.add(Divergence(None, "autofix", "an object", type(fix).__name__))
            return final
        generated = str(fix.get("generated_sql", ""))
        edits = fix.get("edits")
        derived = replay_edits(generated, edits) if isinstance(edits, list) else None
        if derived is None or derived != final:
            rep.add(
                Divergence(
                    None,
                    "final_sql",
                    repr(final[:80]),
                    repr((derived or "(edits do not apply)")[:80]),
                    "the sealed SQL is not the generated SQL with the sealed autofix edits",
                )
            )
            return generated
        if not accepts(grammar, final.encode("utf-8")):
            rep.add(
                Divergence(
                    None,
                    "final_sql",
                    "a sentence of the role grammar",
                    "outside it",
                    "an autofixed statement must stay in the language the mask enforced",
                )
            )
        refs = rec.artifacts
        if (
            refs.schema
            and refs.policy
            and self.store.has_artifact(refs.schema)
            and (self.store.has_artifact(refs.policy))
        ):
            from ..policy.checker import Checker
            from .artifacts import rebuild_policy, rebuild_schema

            try:
                snap = rebuild_schema(self.store.artifact(refs.schema))
                pol = rebuild_policy(self.store.artifact(refs.policy))
            except AuditError as e:
                rep.add(Divergence(None, "artifacts", "archived schema and policy", str(e)))
                return generated
            again = autofix(generated, Checker(snap, pol), grammar, partial=False)
            want = [e.as_list() for e in again.edits]
            if not again.complete or again.fixed != final or want != [list(e) for e in edits or []]:
                rep.add(
                    Divergence(
                        None,
                        "autofix",
                        repr(final[:80]),
                        repr((again.fixed or f"no fix ({again.dropped})")[:80]),
                        "autofix on the generated SQL with the archived schema and policy "
                        "does not give the sealed edits",
                    )
                )
        else:
            rep.warnings.append(
                "the autofix edits were replayed but not re-derived (schema or policy not archived)"
            )
        return generated

    def _check_end(self, rec: AuditRecord, m: Matcher, rep: VerifyReport, grammar: Grammar) -> None:
        seal = rec.seal
        text = m.text().decode("utf-8", errors="replace")
        final = str(seal.get("final_sql", ""))
        if "autofix" in seal:
            final = self._check_autofix(rec, grammar, rep)
        if final != text and _norm(final) != _norm(text):
            rep.add(
                Divergence(
                    None,
                    "final_sql",
                    repr(final[:80]),
                    repr(text[:80]),
                    "the sealed SQL is not what the tokens spell",
                )
            )
        try:
            reason = StopReason(str(seal.get("stop_reason")))
        except ValueError:
            rep.add(Divergence(None, "stop_reason", str(seal.get("stop_reason")), "a StopReason"))
            return
        ended = m.is_terminated()
        if reason == StopReason.EOS and not ended:
            rep.add(Divergence(None, "stop_reason", "eos", "no EOS record at the end"))
        elif reason == StopReason.TRUNCATED:
            if seal.get("mode") != "processor":
                rep.add(
                    Divergence(
                        None,
                        "mode",
                        str(seal.get("mode")),
                        "processor",
                        "truncation is only possible in processor mode",
                    )
                )
        elif not ended and not m.is_accepting():
            rep.add(
                Divergence(
                    None,
                    "stop_reason",
                    reason.value,
                    "an incomplete statement",
                    "every non-truncated stop must leave a complete statement",
                )
            )


class _SchemeIds:
    """Compares replayed entry ids with recorded ones under the record's entry-id scheme.

    The guide computes current-scheme ids; a record sealed under another replayable
    scheme gets the same entries' ids re-hashed under its own (:func:`entry_id_under`,
    from the entries the Python path collects). An unversioned seal (before seals named a
    scheme) may be under any of them: every step must match one and the same scheme."""

    def __init__(self, sealed: object) -> None:
        self.sealed = sealed if isinstance(sealed, int) else None
        self.possible = set(REPLAYABLE) if self.sealed is None else {self.sealed}
        self.note = ""

    def _under(
        self, scheme: int, guide: Guide, cfg: Configuration, got: tuple[str, ...]
    ) -> tuple[str, ...]:
        if scheme == ENTRY_SCHEME:
            return got
        entries, _ = guide.collect(cfg)
        table = {e.entry_id: entry_id_under(scheme, e) for e in entries}
        return tuple(table.get(x, "?" * 32) for x in got)

    def compare(
        self, guide: Guide, cfg: Configuration, got: tuple[str, ...], recorded: tuple[str, ...]
    ) -> tuple[str, ...] | None:
        """``None`` if ``recorded`` is what the replay gives, else the replayed ids."""
        if self.possible == {ENTRY_SCHEME} and got == recorded:
            return None
        still = {s for s in self.possible if self._under(s, guide, cfg, got) == recorded}
        if still:
            self.possible = still
            return None
        if self.sealed is None:
            self.note = (
                "unversioned seal: no entry-id scheme this version knows ("
                + ", ".join(map(str, REPLAYABLE))
                + ") gives the recorded ids"
            )
        best = min(self.possible) if self.sealed is None else self.sealed
        return self._under(best, guide, cfg, got)

    def result(self) -> tuple[int | None, str]:
        if self.sealed is not None:
            return self.sealed, ""
        if len(self.possible) == 1:
            (s,) = self.possible
            return s, (
                f"unversioned seal: replayed under entry-id scheme {s} ({SCHEME_NAMES[s]}), "
                "inferred from its ids"
            )
        return None, (
            "unversioned seal: its ids are the same under entry-id schemes "
            + ", ".join(map(str, sorted(self.possible)))
        )


def _norm(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


def _spell(vocab: Vocabulary, tok: int) -> str:
    if not 0 <= tok < vocab.size:
        return "out of range"
    if tok == vocab.eos_token_id:
        return "EOS"
    return repr(vocab.token_bytes[tok])


def verify(store: AuditStore, audit_id: str) -> VerifyReport:
    """Verify one stored record (see the module docstring for what is checked)."""
    return Verifier(store).verify(audit_id)


def verify_store(store: AuditStore, head: ChainHead | str | None = None) -> ChainReport:
    """Check the store chain and the guards (see :meth:`Verifier.verify_store`)."""
    return Verifier(store).verify_store(head)


def verify_all(store: AuditStore, ids: Iterable[str] | None = None) -> list[VerifyReport]:
    v = Verifier(store)
    return [v.verify(i) for i in (store.ids() if ids is None else ids)]
