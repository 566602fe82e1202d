"""Exact masks: walk ≡ brute-force trial parse ≡ spec, cache soundness, identifier rule."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from grid_sql.errors import MaskError, TokenRejected
from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon
from grid_sql.mask.cache import KIND_GENERIC, MaskCache, MaskKey
from grid_sql.mask.guide import Guide, bitmask_to_ids
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle

from ..grammar.toy_grammars import CRUD
from .helpers import brute_force_ids, greedy_tokens, vocab

BASE = Grammar.from_lark(CRUD, name="crud")
LEX = SchemaLexicon(
    {
        "TABLE_NAME": [b"employees", b"orders", b"t", b'"Odd (name)"'],
        "COLUMN_NAME": [b"a", b"b", b"name", b"count"],
    },
    fold_bare_case=True,
)
GRAMMARS = {
    "l1": BASE,
    "select_only+lexicon": BASE.project(RoleProjection.select_only()).with_lexicon(LEX),
}
SENTENCES = [
    b"select a, b from employees where a <= 10 and b = 'x''y';",
    b'select count(*) from "Odd (name)" e -- done\n',
    b"SELECT name FROM orders WHERE (a<1e3 OR b=2)",
]


def _steps(vname: str, gname: str, sentence: bytes, cache: MaskCache | None = None):
    g = GRAMMARS[gname]
    guide = Guide(g, vocab(vname), cache=cache or MaskCache())
    m = guide.matcher()
    buf = m.allocate_bitmask()
    for t in greedy_tokens(vname, sentence):
        yield guide, m, buf
        m.accept_token(t)
    yield guide, m, buf


@pytest.mark.parametrize(
    ("vname", "gname"),
    [
        pytest.param("gpt-2", "select_only+lexicon", marks=pytest.mark.slow),
        ("llama-spm", "select_only+lexicon"),
        ("llama-spm", "l1"),
        pytest.param("qwen2", "select_only+lexicon", marks=pytest.mark.slow),
    ],
)
def test_walk_equals_brute_force_and_spec(vname: str, gname: str) -> None:
    spec = SpecOracle(to_spec(GRAMMARS[gname]))
    rng = random.Random(11)
    steps = 0
    for s_i, sentence in enumerate(SENTENCES):
        for guide, m, buf in _steps(vname, gname, sentence):
            if steps % (4 if gname == "l1" else 2):  # quota the slow brute force
                steps += 1
                continue
            steps += 1
            n = m.fill_next_token_bitmask(buf)
            ids = bitmask_to_ids(buf)
            brute = brute_force_ids(guide, m.config)
            eos_ok = m.is_accepting()
            expect = np.union1d(brute, [guide.eos_id]) if eos_ok else brute
            assert np.array_equal(ids, expect), (m.text(), np.setxor1d(ids, expect)[:10])
            assert n == len(expect) and n > 0
            # the spec on a sample of admitted and rejected tokens
            w = m.text()
            assert spec.accepts(w) == eos_ok
            admitted = [int(i) for i in brute]
            adm = set(admitted)
            rejected = [i for i in rng.sample(range(guide.vocab.size), 60) if i not in adm]
            for t in rng.sample(admitted, min(25, len(admitted))) + rejected[:25]:
                if t in guide.special:
                    continue
                tb = guide.token_bytes[t]
                assert spec.is_viable_prefix(w + tb) == (t in adm), (w, tb)
        assert m.is_accepting(), (s_i, m.text())
    assert steps > 20


def test_cache_on_equals_cache_off_with_cross_role_hits() -> None:
    shared = MaskCache()
    off = MaskCache()
    off.enabled = False
    v = vocab("llama-spm")
    roles = [
        BASE.project(RoleProjection.select_only()),
        GRAMMARS["select_only+lexicon"],
        BASE.project(RoleProjection.select_only()).with_lexicon(
            SchemaLexicon({"TABLE_NAME": [b"employees", b"t"]})
        ),
    ]
    rng = random.Random(5)
    for _ in range(2):
        for g in rng.sample(roles, len(roles)):
            for sentence in SENTENCES[1:2]:
                on_g, off_g = Guide(g, v, cache=shared), Guide(g, v, cache=off)
                a, b = on_g.matcher(), off_g.matcher()
                try:
                    toks = greedy_tokens("llama-spm", sentence)
                    for t in toks:
                        ia, ea, _ = on_g.allowed_ids(a.config)
                        ib, eb, _ = off_g.allowed_ids(b.config)
                        assert np.array_equal(ia, ib) and ea == eb
                        if t not in set(ia.tolist()):
                            break
                        a.accept_token(t)
                        b.accept_token(t)
                except TokenRejected:  # pragma: no cover - the mask said no first
                    raise
    assert shared.stats.hits > 0
    # roles over one L1 share entries: generic keys carry no projection
    assert len(shared) > 0


def test_racing_publishes_are_idempotent() -> None:
    cache = MaskCache()
    v = vocab("gpt-2")
    g = GRAMMARS["select_only+lexicon"]
    results: list[list[str]] = []

    def run() -> None:
        guide = Guide(g, v, cache=cache)
        m = guide.matcher()
        out = []
        for t in greedy_tokens("gpt-2", SENTENCES[0]):
            _, _, eids = guide.allowed_ids(m.config)
            out.extend(eids)
            m.accept_token(t)
        results.append(out)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 4 and all(r == results[0] for r in results)


def test_divergent_publish_and_identifier_rule_raise() -> None:
    cache = MaskCache()
    v = vocab("gpt-2")
    g = GRAMMARS["select_only+lexicon"]
    guide = Guide(g, v, cache=cache)
    m = guide.matcher()
    m.accept_tokens(greedy_tokens("gpt-2", b"select a from "))
    key = guide.key_for(m.config, 0)
    assert key.kind == "ident" and key.schema_fp == LEX.fingerprint
    entry = guide.entry_for(m.config)
    # a different payload for the same key is a soundness bug
    from grid_sql.mask.cache import MaskEntry

    bad = MaskEntry.make(key, np.array([1, 2, 3], dtype=np.int32), ())
    with pytest.raises(MaskError, match="OBL-KEY1"):
        cache.publish(guide.namespace, bad)
    # injecting a generic entry at an identifier position must raise (Proposition 6)
    generic_key = MaskKey(KIND_GENERIC, 0, key.remainder, key.allowed, None)
    generic = MaskEntry.make(generic_key, entry.ci_ids, entry.residue)
    cache._inject(guide.namespace, key, generic)
    with pytest.raises(MaskError, match="identifier composition rule"):
        guide.allowed_ids(m.config)


def test_matcher_api_rollback_forced_and_rejection() -> None:
    v = vocab("gpt-2")
    g = GRAMMARS["select_only+lexicon"]
    guide = Guide(g, v, cache=MaskCache())
    m = guide.matcher()
    with pytest.raises(TokenRejected):
        m.accept_token(greedy_tokens("gpt-2", b"delete")[0])
    with pytest.raises(TokenRejected):
        m.accept_token(v.eos_token_id)
    toks = greedy_tokens("gpt-2", b"select a from employees")
    m.accept_tokens(toks)
    assert m.is_accepting()
    h = m.config_hash
    m.accept_token(v.eos_token_id)
    assert m.is_terminated()
    m.rollback(1)
    assert m.config_hash == h and not m.is_terminated()
    m.rollback(len(toks))
    assert m.tokens == []
    # forced span (jump-forward): with a vocabulary where only one token fits at a time
    tiny = Grammar.from_lark('start: "f" "(" "*" ")"\n', name="tiny")
    from grid_sql.mask.vocab import Vocabulary

    tv = Vocabulary.from_token_bytes(
        [b"f", b"(", b"*", b")", b"(*", b"</s>"],
        eos_token_id=5,
        special_ids={5},
        warn_incomplete=False,
    )
    tm = Guide(tiny, tv, cache=MaskCache()).matcher()
    tm.accept_token(0)
    assert sorted(tm.allowed_token_ids().tolist()) == [1, 4]
    tm.accept_token(1)
    assert tm.forced_tokens() == [2, 3]
    tm.accept_tokens([2, 3])
    assert tm.allowed_token_ids().tolist() == [5] and tm.forced_tokens() == []


def test_dropping_comments_keeps_the_lexer_but_not_the_cache_namespace() -> None:
    """A role projection that drops comments keeps the lexer (same automaton) but stops
    ignoring them. Mask entries of the dialect grammar (comments admitted after whitespace)
    must never answer for the role's guide: regression for a CI failure where a shared cache
    made the role's mask admit ``--``/``/*`` tokens after a space (OBL-KEY1)."""
    dialect = Grammar.dialect("sqlite")
    role = dialect.project(RoleProjection(drop=frozenset({"LINE_COMMENT", "BLOCK_COMMENT"})))
    assert role.lexer.fingerprint == dialect.lexer.fingerprint
    assert role.scan_fingerprint != dialect.scan_fingerprint
    v = vocab("gpt-2")
    prefix = greedy_tokens("gpt-2", b"SELECT a FROM t ")
    shared = MaskCache()
    masks = []
    for g, cache in ((dialect, shared), (role, shared), (role, MaskCache())):
        guide = Guide(g, v, cache=cache)
        m = guide.matcher()
        m.accept_tokens(prefix)
        masks.append(m.allowed_token_ids())
    comment = [t for t in range(v.size) if v.token_bytes[t].lstrip(b" ").startswith((b"--", b"/*"))]
    assert comment and np.isin(comment, masks[0]).any()  # the dialect admits comments here
    np.testing.assert_array_equal(masks[1], masks[2])  # shared cache == fresh cache
    assert not np.isin(comment, masks[1]).any()  # the role's language has no comments


def test_digest_and_reserve_cost_from_the_warm_records() -> None:
    """``Guide.fill_bitmask_digest`` gives the digest of exactly the mask it wrote, warm or
    cold, and after an epoch change; ``Matcher.cost_after`` is the reserve cost an accept
    would reach, without advancing (None where the token leaves the language)."""
    from grid_sql.decode.records import mask_digest
    from grid_sql.mask.reserve import reserve_table

    v = vocab("gpt-2")
    g = GRAMMARS["select_only+lexicon"]
    cache = MaskCache()
    guide = Guide(g, v, cache=cache)
    res = reserve_table(g, v)
    ref = Guide(g, v, cache=MaskCache(), trie=guide.trie)
    ref.cache.enabled = False  # every fill computed afresh
    toks = greedy_tokens("gpt-2", SENTENCES[0])
    for rnd in range(3):  # cold, warm, and warm after every record's epoch went stale
        if rnd == 2:
            cache.epoch += 1
        m = guide.matcher()
        buf = m.allocate_bitmask()
        want = m.allocate_bitmask()
        for t in toks:
            n, ids, digest = guide.fill_bitmask_digest(m.config, buf)
            assert ref.fill_bitmask(m.config, want) == (n, ids)
            assert digest == mask_digest(buf) == mask_digest(want)
            assert m.forced_tokens() == [] or n == 1
            cost = m.cost_after(t, res)
            cfg0 = m.config
            m.accept_token(t)
            assert cost == res.cost(m.config)
            m.rollback(1)
            assert m.config is cfg0
            m.accept_token(t)
        assert m.cost_after(greedy_tokens("gpt-2", b"delete")[0], res) is None
        assert m.cost_after(v.eos_token_id, res) is None
    wide = np.zeros(guide.n_words + 3, dtype=np.int32)  # a wider buffer: hashed as written
    n, _, digest = guide.fill_bitmask_digest(guide.matcher().config, wide)
    assert n and digest == mask_digest(wide)
