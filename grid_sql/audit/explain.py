"""Explanations of single steps of a stored record (paper §6.4): what the model was allowed
to say at step t, and why a token was blocked — telling apart a syntax error, a verb the
role's projection removed and a name outside the role's schema lexicon. Everything is
recomputed from the archived artifacts, through the :class:`Verifier`'s guides.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import AuditError
from ..grammar.ir import Grammar, RoleProjection
from ..mask.guide import Guide
from ..parser.incremental import EMPTY_SCAN, Configuration, ParserRuntime
from .artifacts import l1_grammar_of
from .log import AuditRecord
from .store import AuditStore
from .verify import Verifier, _spell

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
