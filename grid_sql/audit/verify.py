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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..decode.records import StepKind, StopReason, mask_digest
from ..errors import AuditError
from ..grammar.ir import Grammar, RoleProjection
from ..mask.cache import MaskCache
from ..mask.guide import Guide, Matcher
from ..mask.vocab import Vocabulary
from ..parser.incremental import EMPTY_SCAN, Configuration, ParserRuntime
from .artifacts import l1_grammar_of, rebuild_grammar, rebuild_vocab
from .log import FORMAT_VERSION, GENESIS, AuditRecord, chain_link, seal_hash
from .store import AuditStore

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
    """The outcome of verifying one record; ``ok`` iff nothing diverged."""

    audit_id: str
    steps: int = 0
    replayed: int = 0
    findings: list[Divergence] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def first(self) -> Divergence | None:
        return self.findings[0] if self.findings else None

    def add(self, d: Divergence) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(d)

    def describe(self) -> str:
        head = f"audit {self.audit_id[:16]}: "
        if self.ok:
            out = head + f"OK — {self.replayed}/{self.steps} steps replay bit-identically"
        else:
            out = head + f"TAMPERED or DIVERGENT — {len(self.findings)} finding(s); first: "
            out += str(self.findings[0])
            out += "".join(f"\n  - {d}" for d in self.findings[1:])
        return out + "".join(f"\n  warning: {w}" for w in self.warnings)


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
        return self.verify_record(rec, first_only=first_only)

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
        self._check_chain(rec, rep)
        if self.store.guards_restored:
            rep.warnings.append(
                "the store was not append-only when opened (triggers re-installed: "
                + ", ".join(self.store.guards_restored)
                + ")"
            )
        missing = self.store.missing_guards()
        if missing:
            rep.warnings.append(
                "the store is not append-only any more (missing triggers: "
                + ", ".join(missing)
                + ")"
            )
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
            try:
                n, entries = guide.fill_bitmask(cfg, buf)
            except Exception as e:  # an empty mask is a bug, reported as a finding
                rep.add(Divergence(step, "mask", "a mask", f"{type(e).__name__}: {e}"))
                return
            digest = mask_digest(buf)
            if tuple(entries) != tuple(s.entry_ids):
                rep.add(
                    Divergence(
                        step,
                        "entry_ids",
                        ",".join(x[:12] for x in s.entry_ids),
                        ",".join(x[:12] for x in entries),
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


def verify_all(store: AuditStore, ids: Iterable[str] | None = None) -> list[VerifyReport]:
    v = Verifier(store)
    return [v.verify(i) for i in (store.ids() if ids is None else ids)]


# ---------------------------------------------------------------------------- explain

_WORD_RE = re.compile(rb'\s*("[^"]*"?|`[^`]*`?|\[[^\]]*\]?|[A-Za-z_0-9$\x80-\xff]+)')


def _terminals(rt: ParserRuntime, cfg: Configuration) -> list[str]:
    return sorted(rt.allowed_terminals(cfg))


def _next_terminals(rt: ParserRuntime, cfg: Configuration) -> list[str]:
    """Terminals allowed after the pending lexeme (if any) ends."""
    if not cfg.scan.rem:
        return _terminals(rt, cfg)
    done = rt.finalize(cfg)
    return [] if done is None else _terminals(rt, Configuration(done, EMPTY_SCAN))


class Explainer:
    """Answers questions about one step of a stored record, from the archive alone."""

    def __init__(self, store: AuditStore, verifier: Verifier | None = None) -> None:
        self.store = store
        self.verifier = verifier or Verifier(store)
        self._projected: dict[tuple[str, str], Grammar] = {}

    def _state_at(self, rec: AuditRecord, step: int) -> tuple[Guide, Configuration, bytes]:
        if not 0 <= step < len(rec.steps):
            raise AuditError(
                f"audit {rec.audit_id[:16]} has steps 0..{len(rec.steps) - 1}, not {step}"
            )
        refs = rec.artifacts
        guide = self.verifier.guide(refs.grammar, refs.tokenizer)
        m = guide.matcher()
        for s in rec.steps[:step]:
            try:
                m.accept_token(s.token)
            except Exception as e:
                raise AuditError(
                    f"cannot replay to step {step}: step {s.step} does not replay ({e}); "
                    "run `grid-sql audit verify`"
                ) from e
        return guide, m.config, m.text()

    def step(self, audit_id: str, step: int, why: str | int | bytes | None = None) -> str:
        rec = self.store.get(audit_id)
        guide, cfg, prefix = self._state_at(rec, step)
        s = rec.steps[step]
        vocab = guide.vocab
        rt = guide.runtime
        buf = np.zeros(guide.n_words, dtype=np.int32)
        n, _ = guide.fill_bitmask(cfg, buf)
        ids, eos_ok, _ = guide.allowed_ids(cfg)
        lines = [
            f"audit {rec.audit_id[:16]} step {step} ({s.kind}): token {s.token} "
            f"{_spell(vocab, s.token)}",
            f"  output so far: {prefix.decode('utf-8', errors='replace')!r}",
            f"  allowed: {n} of {vocab.size} tokens ({vocab.size - n} blocked); EOS "
            + ("legal (the output is a complete statement)" if eos_ok else "not legal"),
        ]
        terms = _terminals(rt, cfg)
        if cfg.scan.rem:
            lines.append(f"  pending lexeme {cfg.scan.rem!r} (still open: it may grow, or end)")
            done = rt.finalize(cfg)
            if done is not None:
                terms = sorted(rt.allowed_terminals(Configuration(done, EMPTY_SCAN)))
                lines.append(f"  allowed terminals once it ends: {', '.join(terms)}")
        else:
            lines.append(f"  allowed terminals: {', '.join(terms) if terms else '(none)'}")
        lex = guide.grammar.lexicon
        if lex is not None:
            for t in terms:
                if t in lex:
                    words = sorted(lex[t].words)
                    shown = ", ".join(w.decode("utf-8", "replace") for w in words[:12])
                    more = f" … (+{len(words) - 12})" if len(words) > 12 else ""
                    lines.append(f"  {t} is restricted to the role's lexicon: {shown}{more}")
        sample = sorted(ids.tolist(), key=lambda i: (len(vocab.token_bytes[i]), i))[:12]
        lines.append("  e.g. " + " ".join(repr(vocab.token_bytes[i]) for i in sample))
        if why is not None:
            lines.append(self._why(rec, guide, cfg, prefix, buf, why))
        return "\n".join(lines)

    def _why(
        self,
        rec: AuditRecord,
        guide: Guide,
        cfg: Configuration,
        prefix: bytes,
        buf: np.ndarray,
        why: str | int | bytes,
    ) -> str:
        vocab = guide.vocab
        tok: int | None = None
        if isinstance(why, int) or (isinstance(why, str) and why.strip().isdigit()):
            tok = int(why)
            if not 0 <= tok < vocab.size:
                raise AuditError(f"token id {tok} is outside the vocabulary (size {vocab.size})")
            if tok == vocab.eos_token_id:
                if guide.runtime.eos_allowed(cfg):
                    return "why EOS: it was allowed here (the output is a complete statement)"
                return (
                    "why EOS: blocked — EOS is legal only at a complete statement "
                    f"and {prefix.decode('utf-8', 'replace')!r} is not one"
                )
            if tok in vocab.special_ids:
                return f"why {tok}: a special token, permanently masked"
            data = vocab.token_bytes[tok]
        else:
            data = why.encode() if isinstance(why, str) else bytes(why)
            if not data:
                raise AuditError("--why needs a token id or a non-empty text")
        label = f"token {tok} {data!r}" if tok is not None else repr(data)
        if tok is not None and (int(buf.view(np.uint32)[tok >> 5]) >> (tok & 31)) & 1:
            return f"why {label}: it was allowed at this step"
        rt = guide.runtime
        if tok is None and rt.advance(cfg, data) is not None:
            return f"why {label}: these bytes are a legal continuation here (not blocked)"
        return f"why {label}: blocked — " + self._diagnose(rec, guide, cfg, prefix, data)

    def _diagnose(
        self, rec: AuditRecord, guide: Guide, cfg: Configuration, prefix: bytes, data: bytes
    ) -> str:
        role = guide.grammar
        rt = guide.runtime
        good = 0  # longest viable prefix of ``data`` under the role grammar
        for k in range(1, len(data) + 1):
            if rt.advance(cfg, data[:k]) is None:
                break
            good = k
        at = f"after {(prefix + data[:good]).decode('utf-8', 'replace')!r}"
        terms = ", ".join(_next_terminals(rt, cfg)) or "(none)"
        l1_fp = rec.artifacts.l1_grammar
        # Seals without the L1 reference fall back to the shipped dialect, accepted only if it
        # is the one the role grammar was derived from (its L1 fingerprint is hashed into it).
        l1 = self.verifier.grammar(l1_fp) if l1_fp else l1_grammar_of(role)
        if l1 is None:
            return f"the role's grammar cannot continue {at}; allowed terminals here: {terms}"
        l1_rt = ParserRuntime.for_grammar(l1)
        if l1_rt.advance(l1_rt.initial, prefix + data) is None:
            return (
                f"not valid {l1.name or 'SQL'} syntax {at}, with or without any policy; "
                f"allowed terminals here: {terms}"
            )
        reasons: list[str] = []
        proj = role.projection
        if proj is not None:
            key = (l1.fingerprint, repr(proj.describe()))
            unlexed = self._projected.get(key)
            if unlexed is None:
                unlexed = self._projected[key] = l1.project(proj)
            u_rt = ParserRuntime.for_grammar(unlexed)
            if u_rt.advance(u_rt.initial, prefix + data) is not None:
                reasons.append(self._lexicon_reason(role, cfg, data, good))
            else:
                reasons.append(self._projection_reason(proj, data, not prefix.strip()))
        else:
            reasons.append(self._lexicon_reason(role, cfg, data, good))
        return "; ".join(reasons)

    @staticmethod
    def _lexicon_reason(role: Grammar, cfg: Configuration, data: bytes, good: int) -> str:
        import regex

        lex = role.lexicon
        text = cfg.scan.rem + data
        fail = len(cfg.scan.rem) + good
        keywords = [
            regex.compile(t.pattern.encode())
            for t in role.terminals
            if t.is_string and not t.category
        ]
        runs = [(m.start(1), m.group(1)) for m in _WORD_RE.finditer(text)]
        word = next((w for st, w in runs if st <= fail), data.strip())
        for st, w in reversed(runs):
            if st > fail:
                continue
            if any(k.fullmatch(w) for k in keywords):
                continue
            if lex is not None and any(c.admits(w) for c in lex.categories.values()):
                continue
            word = w
            break
        shown = word.decode("utf-8", "replace")
        if lex is None:
            return f"`{shown}` is outside the role's grammar here"
        cats = [n for n, c in lex.categories.items() if not c.admits(word)]
        names = ", ".join(cats) if cats else "its categories"
        return (
            f"`{shown}` is not in the role's lexicon ({names}): the role has no right on a "
            "table or column of that name, so no token may spell it"
        )

    @staticmethod
    def _projection_reason(proj: RoleProjection, data: bytes, at_start: bool) -> str:
        m = _WORD_RE.match(data)
        word = (m.group(1) if m else data.strip()).decode("utf-8", "replace")
        kept = sorted(proj.keep_statements or ())
        verbs = ", ".join(k.removesuffix("_stmt").replace("_", " ").upper() for k in kept)
        dropped = ", ".join(sorted(proj.drop)) or "nothing else"
        if at_start and kept:
            return (
                f"`{word.upper()}` is not in the role's verbs: its grammar keeps only {verbs} "
                f"statements ({', '.join(kept)}) and drops {dropped}"
            )
        return (
            f"`{word}` needs a production the role's projection removes (statements kept: "
            f"{verbs or 'all'}; dropped: {dropped})"
        )


def explain(
    store: AuditStore, audit_id: str, step: int, why: str | int | bytes | None = None
) -> str:
    """In words: what the model was allowed to say at ``step``, and why ``why`` was blocked."""
    return Explainer(store).step(audit_id, step, why)
