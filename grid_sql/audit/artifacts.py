"""Archived artifacts: exactly what a replay needs to rebuild the guide, keyed by fingerprint.

A mask is a function of (grammar, vocabulary) only (paper §6.4: entries are immutable and
content addressed), so the archive holds

* the **grammar**: terminals (name, regex, priority, kind), the reduced rules, the start
  symbol, the L1 fingerprint, the role projection and the schema-lexicon words — rebuilt with
  :class:`~grid_sql.grammar.ir.Grammar` and accepted only if its fingerprint is the archive
  key (so an edited payload cannot pass as the original);
* the unprojected **L1 dialect grammar** the role grammar was derived from, used by
  ``explain`` to tell a syntax error from a policy block;
* the **vocabulary**: every token's byte spelling, EOS and the special ids (its fingerprint
  covers exactly these), plus the source path and the sha256 of the source file for humans.

Payloads are zlib-compressed canonical encodings; lexicon words and spellings are stored as
raw bytes (hex in JSON), never re-decoded, so nothing is lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from ..errors import AuditError, GridSQLError
from ..grammar.ir import Grammar, RoleProjection, Terminal
from ..grammar.lexicon import SchemaLexicon
from ..mask.vocab import Vocabulary
from ..policy.model import Policy
from ..schema.model import SchemaSnapshot
from .log import ArtifactRefs

KIND_GRAMMAR = "grammar"
KIND_VOCAB = "tokenizer"
KIND_SCHEMA = "schema"
KIND_POLICY = "policy"
_VOCAB_MAGIC = b"GSAvocab\x01"


@dataclass(frozen=True)
class Artifact:
    """One archived artifact: its fingerprint (the key), kind and compressed payload."""

    fingerprint: str
    kind: str
    payload: bytes

    @property
    def content_hash(self) -> str:
        return hashlib.blake2b(self.payload, digest_size=32).hexdigest()


# ---------------------------------------------------------------------------- grammars


def grammar_artifact(grammar: Grammar) -> Artifact:
    proj = grammar.projection
    lex = grammar.lexicon
    body: dict[str, Any] = {
        "format": 1,
        "name": grammar.name,
        "start": grammar.start,
        "l1": grammar.l1_fingerprint,
        "terminals": [
            [t.name, t.pattern, t.priority, t.is_string, t.ignored, t.category]
            for t in grammar.terminals
        ],
        "rules": [[r.lhs, list(r.rhs)] for r in grammar.rules],
        "projection": proj.describe() if proj is not None else None,
        "lexicon": None
        if lex is None
        else {
            n: {"fold": c.fold_bare_case, "words": sorted(w.hex() for w in c.words)}
            for n, c in lex.categories.items()
        },
    }
    if grammar.scopes is not None:  # scope-aware column lexicons (grammar/scope.py)
        body["scopes"] = {
            "tables": {t: sorted(c) for t, c in grammar.scopes.columns.items()},
            "schemas": sorted(grammar.scopes.schemas),
        }
        if grammar.scopes.bind_select_list:  # absent in archives written before the rule
            body["scopes"]["bind_select_list"] = True
        if grammar.scopes.fresh_aliases:  # likewise
            body["scopes"]["fresh_aliases"] = True
        if grammar.scopes.alias_refuse:  # likewise
            body["scopes"]["alias_refuse"] = sorted(grammar.scopes.alias_refuse)
        if grammar.scopes.cte_names:  # likewise
            body["scopes"]["cte_names"] = True
        if grammar.scopes.alias_clauses:  # likewise
            body["scopes"]["alias_clauses"] = sorted(grammar.scopes.alias_clauses)
        if grammar.scopes.output_refuse:  # likewise
            body["scopes"]["output_refuse"] = sorted(grammar.scopes.output_refuse)
        if grammar.scopes.schema_columns is not None:  # likewise
            body["scopes"]["table_schemas"] = grammar.scopes.nested_schemas()
            body["scopes"]["default_schema"] = grammar.scopes.default_schema
            if grammar.scopes.bare_reaches_all:
                body["scopes"]["bare_reaches_all"] = True
        if grammar.scopes.aggregates:
            body["scopes"]["aggregates"] = sorted(grammar.scopes.aggregates)
            if not grammar.scopes.nested_aggregates:
                body["scopes"]["nested_aggregates"] = False
        if grammar.scopes.table_functions:
            body["scopes"]["table_functions"] = {
                f: list(cs) for f, cs in grammar.scopes.table_functions.items()
            }
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return Artifact(grammar.fingerprint, KIND_GRAMMAR, zlib.compress(raw, 9))


def rebuild_grammar(art: Artifact) -> Grammar:
    """The exact grammar an artifact describes; raises AuditError if it is not the original."""
    from lark.grammar import NonTerminal
    from lark.grammar import Rule as LarkRule
    from lark.grammar import Terminal as LarkTerminal

    try:
        body = json.loads(zlib.decompress(art.payload))
        terms = [Terminal(i, *t) for i, t in enumerate(body["terminals"])]
        names = {t.name for t in terms}
        rules = [
            LarkRule(
                NonTerminal(lhs),
                [LarkTerminal(s) if s in names else NonTerminal(s) for s in rhs],
            )
            for lhs, rhs in body["rules"]
        ]
        p = body["projection"]
        proj = None
        if p is not None:
            keep = p["keep_statements"]
            proj = RoleProjection(
                drop=frozenset(p["drop"]),
                keep_statements=None if keep is None else frozenset(keep),
                statement_rule=p["statement_rule"],
            )
        lx = body["lexicon"]
        lexicon = None
        if lx is not None:
            lexicon = SchemaLexicon(
                {n: [bytes.fromhex(w) for w in c["words"]] for n, c in lx.items()},
                fold_bare_case={n: bool(c["fold"]) for n, c in lx.items()},
            )
        g = Grammar(
            terms,
            rules,
            body["start"],
            l1_fingerprint=body["l1"],
            projection=proj,
            lexicon=lexicon,
            name=body["name"],
        )
        sc = body.get("scopes")
        if sc is not None:
            from ..grammar.scope import ScopeTable

            g = g.with_scopes(
                ScopeTable(
                    sc["tables"],
                    sc["schemas"],
                    bind_select_list=bool(sc.get("bind_select_list", False)),
                    fresh_aliases=bool(sc.get("fresh_aliases", False)),
                    alias_refuse=sc.get("alias_refuse", ()),
                    cte_names=bool(sc.get("cte_names", False)),
                    alias_clauses=sc.get("alias_clauses", ()),
                    output_refuse=sc.get("output_refuse", ()),
                    table_schemas=sc.get("table_schemas"),
                    default_schema=sc.get("default_schema"),
                    bare_reaches_all=bool(sc.get("bare_reaches_all", False)),
                    aggregates=sc.get("aggregates", ()),
                    nested_aggregates=bool(sc.get("nested_aggregates", True)),
                    table_functions=sc.get("table_functions"),
                )
            )
    except AuditError:
        raise
    except (GridSQLError, ValueError, KeyError, TypeError, IndexError, zlib.error) as e:
        raise AuditError(f"grammar artifact {art.fingerprint[:16]} is unreadable: {e}") from e
    if g.fingerprint != art.fingerprint:
        raise AuditError(
            f"grammar artifact {art.fingerprint[:16]} rebuilds to fingerprint "
            f"{g.fingerprint[:16]}: the archived grammar was altered"
        )
    return g


def l1_grammar_of(grammar: Grammar) -> Grammar | None:
    """The shipped dialect grammar ``grammar`` was derived from, if it is one."""
    from ..grammar.dialects import DIALECTS, load_dialect

    if grammar.name not in DIALECTS:
        return None
    l1 = load_dialect(grammar.name)
    return l1 if l1.l1_fingerprint == grammar.l1_fingerprint else None


# ---------------------------------------------------------------------------- vocabularies


def _file_sha256(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def vocab_artifact(vocab: Vocabulary) -> Artifact:
    src = vocab.source
    path = src.split(" (", 1)[0] if src else ""
    meta = {
        "scheme": vocab.scheme,
        "source": src,
        "source_sha256": _file_sha256(path) if path and os.path.isfile(path) else None,
    }
    mb = json.dumps(meta, sort_keys=True).encode()
    specials = sorted(vocab.special_ids)
    parts = [
        _VOCAB_MAGIC,
        struct.pack("<I", len(mb)),
        mb,
        struct.pack("<III", vocab.size, vocab.eos_token_id, len(specials)),
        struct.pack(f"<{len(specials)}I", *specials),
    ]
    for b in vocab.token_bytes:
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    return Artifact(vocab.fingerprint, KIND_VOCAB, zlib.compress(b"".join(parts), 6))


def vocab_metadata(art: Artifact) -> dict[str, Any]:
    raw = zlib.decompress(art.payload)
    (n,) = struct.unpack_from("<I", raw, len(_VOCAB_MAGIC))
    meta: dict[str, Any] = json.loads(raw[len(_VOCAB_MAGIC) + 4 : len(_VOCAB_MAGIC) + 4 + n])
    return meta


def rebuild_vocab(art: Artifact) -> Vocabulary:
    """The exact vocabulary an artifact describes; raises AuditError if it was altered."""
    try:
        raw = zlib.decompress(art.payload)
        if not raw.startswith(_VOCAB_MAGIC):
            raise ValueError("bad magic")
        off = len(_VOCAB_MAGIC)
        (n,) = struct.unpack_from("<I", raw, off)
        meta = json.loads(raw[off + 4 : off + 4 + n])
        off += 4 + n
        size, eos, n_spec = struct.unpack_from("<III", raw, off)
        off += 12
        specials = struct.unpack_from(f"<{n_spec}I", raw, off)
        off += 4 * n_spec
        tb: list[bytes] = []
        for _ in range(size):
            (ln,) = struct.unpack_from("<I", raw, off)
            off += 4
            tb.append(raw[off : off + ln])
            off += ln
        if off != len(raw):
            raise ValueError("trailing bytes")
        v = Vocabulary(
            tb,
            eos_token_id=eos,
            special_ids=specials,
            scheme=meta.get("scheme", "bytes"),
            source=f"audit archive of {meta.get('source') or 'a vocabulary'}",
            warn_incomplete=False,
        )
    except (GridSQLError, ValueError, struct.error, zlib.error) as e:
        raise AuditError(f"tokenizer artifact {art.fingerprint[:16]} is unreadable: {e}") from e
    if v.fingerprint != art.fingerprint:
        raise AuditError(
            f"tokenizer artifact {art.fingerprint[:16]} rebuilds to fingerprint "
            f"{v.fingerprint[:16]}: the archived vocabulary was altered"
        )
    return v


# ---------------------------------------------------------------------------- schema, policy
# Archived only for records whose SQL was autofixed (grid_sql/policy/autofix.py): the fix is a
# function of (statement, schema snapshot, policy, role grammar), so with both archived a
# verifier re-derives it instead of trusting the sealed edits.


def schema_artifact(snapshot: SchemaSnapshot) -> Artifact:
    raw = snapshot.canonical_json().encode("utf-8")
    return Artifact(snapshot.fingerprint, KIND_SCHEMA, zlib.compress(raw, 9))


def rebuild_schema(art: Artifact) -> SchemaSnapshot:
    """The exact snapshot an artifact describes; raises AuditError if it was altered."""
    try:
        snap = SchemaSnapshot.from_dict(json.loads(zlib.decompress(art.payload)))
    except (ValueError, KeyError, TypeError, AssertionError, zlib.error) as e:
        raise AuditError(f"schema artifact {art.fingerprint[:16]} is unreadable: {e}") from e
    if snap.fingerprint != art.fingerprint:
        raise AuditError(
            f"schema artifact {art.fingerprint[:16]} rebuilds to fingerprint "
            f"{snap.fingerprint[:16]}: the archived schema was altered"
        )
    return snap


def policy_artifact(policy: Policy) -> Artifact:
    raw = json.dumps(policy.to_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
    return Artifact(policy.fingerprint, KIND_POLICY, zlib.compress(raw, 9))


def rebuild_policy(art: Artifact) -> Policy:
    """The exact effective policy an artifact describes (provenance is not archived: it
    explains, it does not decide); raises AuditError if it was altered."""
    try:
        pol = Policy.from_dict(json.loads(zlib.decompress(art.payload)))
    except (ValueError, KeyError, TypeError, zlib.error) as e:
        raise AuditError(f"policy artifact {art.fingerprint[:16]} is unreadable: {e}") from e
    if pol.fingerprint != art.fingerprint:
        raise AuditError(
            f"policy artifact {art.fingerprint[:16]} rebuilds to fingerprint "
            f"{pol.fingerprint[:16]}: the archived policy was altered"
        )
    return pol


def refs_for(
    grammar: Grammar,
    vocab: Vocabulary,
    *,
    policy: str | None = None,
    schema: str | None = None,
    model_id: str | None = None,
) -> ArtifactRefs:
    """The seal's artifact fingerprints for a guide built from ``grammar`` and ``vocab``."""
    l1 = l1_grammar_of(grammar)
    return ArtifactRefs(
        grammar=grammar.fingerprint,
        tokenizer=vocab.fingerprint,
        policy=policy,
        schema=schema,
        model_id=model_id,
        l1_grammar=None if l1 is None else l1.fingerprint,
    )
