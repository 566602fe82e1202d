"""Masks with scope-aware lexicons: Rust walk == Python walk, exact against brute force on
samples, the gold token always admitted, and the cache keys kept apart by scope."""

from __future__ import annotations

import numpy as np
import pytest

from grid_sql.errors import MaskError
from grid_sql.mask.cache import KIND_GENERIC, MaskCache, MaskEntry, MaskKey
from grid_sql.mask.guide import Guide, bitmask_to_ids
from grid_sql.mask.residue import FillMemo
from grid_sql.mask.walk import kernels_enabled

from ..mask.helpers import brute_force_ids, greedy_tokens, vocab
from .helpers import scoped, spider_dev

DB = "concert_singer"
GOLD = [q for d, q in spider_dev() if d == DB]
EXTRA = [
    "SELECT T2.Theme FROM singer AS T1 JOIN singer_in_concert AS T3 ON T1.Singer_ID = "
    "T3.Singer_ID JOIN concert AS T2 ON T3.concert_ID = T2.concert_ID WHERE T1.Age > 30",
    "SELECT Name FROM singer AS T1 WHERE EXISTS (SELECT 1 FROM singer_in_concert AS T3 "
    "WHERE T3.Singer_ID = T1.Singer_ID)",
    # select-list obligations read the names of the select list (CD tokens like `Name,`)
    "SELECT T2.Theme,T1.Name,Age FROM singer AS T1 JOIN concert AS T2 ON "
    "T1.Singer_ID=T2.concert_ID",
]


def pair(vname: str) -> tuple[Guide, Guide]:
    assert kernels_enabled(), "grid_sql._kernels lacks TrieWalker (run `make ext`)"
    g = scoped(DB)
    gk = Guide(g, vocab(vname), cache=MaskCache())
    gp = Guide(g, vocab(vname), cache=MaskCache(), trie=gk.trie)
    gk.walker.use_kernel = True
    gp.walker.use_kernel = False
    return gk, gp


@pytest.mark.slow
@pytest.mark.parametrize(("vname", "n"), [("gpt-2", 2), ("qwen2", 1)])
def test_kernel_equals_python_and_gold_admitted(vname: str, n: int) -> None:
    """Every step of a few gold statements: the Python reference walk is the slow part."""
    gk, gp = pair(vname)
    for q in GOLD[:n] + EXTRA[:n]:
        m = gk.matcher()
        for k, t in enumerate(greedy_tokens(vname, q.encode())):
            bk = np.zeros(gk.n_words, dtype=np.int32)
            bp = np.zeros(gp.n_words, dtype=np.int32)
            _, ek = gk.fill_bitmask(m.config, bk)
            _, ep = gp.fill_bitmask(m.config, bp)
            np.testing.assert_array_equal(bk, bp, err_msg=f"{q!r} token {k}")
            assert ek == ep
            assert (int(bk[t >> 5]) >> (t & 31)) & 1, f"gold token {k} of {q!r} masked out"
            m.accept_token(t)
        assert m.is_accepting()


def test_masks_exact_against_brute_force_on_samples() -> None:
    """Sampled configurations (qualified, unqualified, select list, CD-crossing tokens)."""
    gk, _ = pair("gpt-2")
    prefixes = [
        b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.",
        b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.con",
        b"SELECT * FROM singer WHERE ",
        b"SELECT * FROM singer AS T1 WHERE T1",
        b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.concert_ID WHERE T",
        b"SELECT * FROM singer AS T1 WHERE T1.Age > 1 AND Singer_ID IN (SELECT T",
        b"SELECT T1",
        # select-list obligations: closers and EOS blocked until T2 / Theme are bound
        b"SELECT T2.Name FROM singer AS T1 ",
        b"SELECT T2.Name FROM singer AS T1",
        b"SELECT Theme,Name FROM singer",
        b"SELECT Theme FROM singer AS s ",
        b"SELECT Theme FROM singer ",  # stop bits: no ` WHERE`, nor an alias led by it
        b"SELECT Theme FROM singer G",
        b"SELECT Theme FROM singer\nGROU",
        b"SELECT Theme FROM singer AS G",
        b"SELECT T2.Name FROM concert AS T1 JOIN singer AS T2 ON T2.Singer_ID = T1.concert_ID",
        # fresh aliases: not a name the FROM already exposes (CD: ` T1 ON`, ` T1,`)
        b"SELECT T2.Name FROM singer AS T1 JOIN concert AS ",
        b"SELECT T2.Name FROM singer AS T1 JOIN concert AS T",
        b"SELECT T2.Name FROM singer AS T1 JOIN concert AS T1",
        b'SELECT T2.Name FROM singer AS T1 JOIN concert "T1"',
        b"SELECT * FROM singer JOIN concert singer",
        b"SELECT * FROM singer JOIN concert ",
        b"SELECT Name, T1.Age FROM singer AS T1 WHERE Age IN (SELECT T9.Age FROM concert",
        # a `.` no valid reference can follow: blocked in the CD pass and in the CI walk
        b"SELECT * FROM singer AS T1 WHERE Age",
        b"SELECT * FROM singer AS T1 WHERE Age ",
        b"SELECT * FROM singer AS T1 WHERE T1.Age",
        b"SELECT * FROM singer AS T1 WHERE T1.Age ",
        b'SELECT Age AS Book FROM singer ORDER BY "Book"',
        b"SELECT Age AS Book FROM singer ORDER BY B",
        b"SELECT Age AS x FROM singer AS s ORDER BY s",  # only `.` after it (CD: ` s,`)
        b"SELECT Age AS x FROM singer AS s ORDER BY s ",
        b"SELECT * FROM singer AS T1 WHERE T",  # IDENT held to the qualifier names
        b'SELECT * FROM singer AS T1 WHERE "',
    ]
    for p in prefixes:
        m = gk.matcher()
        m.accept_tokens(greedy_tokens("gpt-2", p))
        ids = m.allowed_token_ids()
        ids = ids[ids != gk.eos_id]
        np.testing.assert_array_equal(ids, brute_force_ids(gk, m.config), err_msg=repr(p))


def test_scoped_masks_exclude_wrong_alias_columns() -> None:
    gk, _ = pair("gpt-2")
    v = vocab("gpt-2")
    m = gk.matcher()
    m.accept_tokens(
        greedy_tokens("gpt-2", b"SELECT * FROM singer AS T1 JOIN concert AS T2 ON T1.Age = T2.")
    )
    ids = set(m.allowed_token_ids().tolist())
    assert v.token_bytes.index(b"Theme") in ids
    assert v.token_bytes.index(b"Age") not in ids and v.token_bytes.index(b"Name") not in ids


def test_scope_is_part_of_the_identifier_key() -> None:
    gk, _ = pair("gpt-2")
    rt = gk.runtime
    a = rt.advance(rt.initial, b"SELECT * FROM singer WHERE ")
    b = rt.advance(rt.initial, b"SELECT * FROM concert WHERE ")
    c = rt.advance(rt.initial, b"SELECT ")
    assert a is not None and b is not None and c is not None
    ka, kb, kc = gk.key_for(a, 0), gk.key_for(b, 0), gk.key_for(c, 0)
    assert ka.allowed == kb.allowed and ka.remainder == kb.remainder
    assert ka.scope is not None and kb.scope is not None and ka != kb
    assert kc.scope is None  # select list: the role's own lexicon
    # the identifier rule still holds: a generic entry at a scoped identifier key raises
    cache = MaskCache()
    gk2 = Guide(scoped(DB), vocab("gpt-2"), cache=cache, trie=gk.trie)
    generic = MaskKey(KIND_GENERIC, 0, b"", ka.allowed, None)
    cache._inject(gk2.namespace, ka, MaskEntry.make(generic, np.zeros(0, np.int32), ()))
    with pytest.raises(MaskError):
        gk2.fill_bitmask(a, np.zeros(gk2.n_words, dtype=np.int32))


def test_fresh_alias_positions_are_identifier_keys() -> None:
    """A table's alias with a name to refuse is keyed by its view (no lexicon terminal is
    allowed there, so without ``fresh_mask`` the key would be generic and two FROMs exposing
    different names would share one entry); an alias position refusing nothing stays
    generic. The mask excludes the exposed names and admits longer ones. (Without the
    hijack rule, which refuses every catalog name at every alias: with it on, the two FROMs
    refuse the same names, and so does an alias position with nothing exposed.)"""
    from grid_sql.policy.scopes import role_scopes

    from .helpers import role, snapshot

    g = role(DB).with_scopes(role_scopes(snapshot(DB), bind_select_list=True, hijack_free=False))
    gk = Guide(g, vocab("gpt-2"), cache=MaskCache())
    gp = Guide(g, vocab("gpt-2"), cache=MaskCache(), trie=gk.trie)
    gk.walker.use_kernel, gp.walker.use_kernel = True, False
    rt, v = gk.runtime, vocab("gpt-2")
    a = rt.advance(rt.initial, b"SELECT * FROM singer JOIN concert AS")
    b = rt.advance(rt.initial, b"SELECT * FROM stadium JOIN concert AS")
    c = rt.advance(rt.initial, b"SELECT * FROM singer AS")
    assert a is not None and b is not None and c is not None
    ka, kb, kc = gk.key_for(a, 0), gk.key_for(b, 0), gk.key_for(c, 0)
    assert ka.kind == kb.kind == "ident" and ka.scope is not None and ka != kb
    assert kc.kind == KIND_GENERIC and kc.scope is None
    np.testing.assert_array_equal(_fill(gk, a), _fill(gp, a))  # Rust complement == Python
    ids = set(bitmask_to_ids(np.asarray(_fill(gk, a))).tolist())
    assert v.token_bytes.index(b" singer") in ids  # may grow into `singer_x`
    assert v.token_bytes.index(b" singers") in ids
    m = gk.matcher()
    m.accept_tokens(greedy_tokens("gpt-2", b"SELECT * FROM singer JOIN concert AS singer"))
    after = set(m.allowed_token_ids().tolist())
    assert v.token_bytes.index(b" ON") not in after and v.token_bytes.index(b",") not in after
    assert v.token_bytes.index(b"_") in after
    np.testing.assert_array_equal(_fill(gk, m.config), _fill(gp, m.config))
    hk, hp = pair("gpt-2")  # the hijack rule on: every alias position is keyed by its view
    c2 = hk.runtime.advance(hk.runtime.initial, b"SELECT * FROM singer AS")
    assert c2 is not None and hk.key_for(c2, 0).kind == "ident"
    np.testing.assert_array_equal(_fill(hk, c2), _fill(hp, c2))


def test_masks_of_unscoped_grammar_unchanged() -> None:
    """Scopes off: keys carry no scope and the CD classes are the plain ones."""
    from .helpers import role

    g = Guide(role(DB), vocab("gpt-2"), cache=MaskCache())
    rt = g.runtime
    cfg = rt.advance(rt.initial, b"SELECT * FROM singer WHERE ")
    assert cfg is not None
    assert g.key_for(cfg, 0).scope is None
    ids = bitmask_to_ids(np.asarray(_fill(g, cfg)))
    assert vocab("gpt-2").token_bytes.index(b"Theme") in set(ids.tolist())


def _fill(g: Guide, cfg: object) -> np.ndarray:
    buf = np.zeros(g.n_words, dtype=np.int32)
    g.fill_bitmask(cfg, buf)  # type: ignore[arg-type]
    return buf


def test_dropping_unread_names_from_cd_classes_keeps_masks() -> None:
    """``Guide._value_read``: a CD class keyed without the emitted name (when the scope rule
    cannot read it) gives the same masks as keying every class by its name."""
    g = scoped(DB)
    fast = Guide(g, vocab("gpt-2"), cache=MaskCache())
    full = Guide(g, vocab("gpt-2"), cache=MaskCache(), trie=fast.trie)
    full._value_read = lambda stack, term, requeue: True  # type: ignore[method-assign]
    for q in GOLD[:2] + EXTRA:
        m = fast.matcher()
        for t in greedy_tokens("gpt-2", q.encode()):
            a = np.zeros(fast.n_words, dtype=np.int32)
            b = np.zeros(full.n_words, dtype=np.int32)
            fast.fill_bitmask(m.config, a)
            full.fill_bitmask(m.config, b)
            np.testing.assert_array_equal(a, b, err_msg=q)
            m.accept_token(t)


def test_no_token_continues_a_dead_qualifier() -> None:
    """After ``WHERE Age`` / ``WHERE T1.Age`` (every FROM known, no schema) no allowed token
    starts the name's ``.``; after a bound qualifier (``T1``) the ``.`` stays."""
    gk, _ = pair("gpt-2")
    tb = gk.token_bytes
    for p, dot_ok in (
        (b"SELECT * FROM singer AS T1 WHERE Age ", False),
        (b"SELECT * FROM singer AS T1 WHERE T1.Age ", False),
        (b"SELECT * FROM singer AS T1 WHERE T1 ", True),
        (b"SELECT T1.Age ", False),  # a select list too: only a schema starts s.t.c
        (b"SELECT main.singer ", True),
    ):
        m = gk.matcher()
        m.accept_tokens(greedy_tokens("gpt-2", p))
        dots = [int(i) for i in m.allowed_token_ids() if tb[int(i)].lstrip().startswith(b".")]
        assert bool(dots) == dot_ok, (p, [tb[i] for i in dots[:5]])


def test_fill_memo_generations() -> None:
    """``FillMemo``: a read finds the current generation, then the old one (copying the
    entry forward); ``age`` drops the old generation; ``clear`` empties the memo in place."""
    m: FillMemo[int, str] = FillMemo()
    m[1] = "a"
    m.age()
    m[2] = "b"
    assert len(m) == 2 and m.get(1) == "a" and 1 in m.new  # promoted on read
    m.age()
    m.age()
    assert m.get(1, "gone") == "gone" and m.get(2) is None and len(m) == 0
    m[3] = "c"
    held = m
    m.clear()
    assert held is m and len(m) == 0


def test_aged_resolution_memo_keeps_masks_and_holds_two_fills() -> None:
    """With scope rules the CD memos are aged at every fill (``mask/residue.py``): masks
    and entry ids equal a guide that resolves every fill with no memo at all (cache off),
    and after a fill the memo holds only that fill's records and what it read."""
    g = scoped(DB)
    aged = Guide(g, vocab("gpt-2"), cache=MaskCache())
    bare = Guide(g, vocab("gpt-2"), cache=MaskCache(), trie=aged.trie)
    bare.cache.enabled = False  # reference: no entry cache, no resolution memo
    kept = 0  # fills after which the old generation held records
    for q in GOLD[:2] + EXTRA:
        for _ in range(2):  # the second pass: warm records, and memo hits where it misses
            m = aged.matcher()
            for t in greedy_tokens("gpt-2", q.encode()):
                a = np.zeros(aged.n_words, dtype=np.int32)
                b = np.zeros(bare.n_words, dtype=np.int32)
                _, ea = aged.fill_bitmask(m.config, a)
                _, eb = bare.fill_bitmask(m.config, b)
                np.testing.assert_array_equal(a, b, err_msg=q)
                assert ea == eb
                m.accept_token(t)
                assert not aged._advanced.new and not aged._subs_at.new
                kept += bool(aged._advanced.old)
    assert kept and bare._n_subs == 0
