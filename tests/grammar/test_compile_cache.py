"""The on-disk grammar store (``grid_sql/grammar/cache.py``): a warm start skips lark's
loader, and an entry is trusted only when it rebuilds to its recorded fingerprint — corrupt,
truncated, tampered or stale entries are rebuilt and rewritten, never used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grid_sql import _kernels
from grid_sql.errors import GrammarError
from grid_sql.grammar import Grammar, LexerTables
from grid_sql.grammar import cache as store
from grid_sql.grammar import lexer as lexer_mod
from grid_sql.grammar.dialects import dialects_dir
from grid_sql.mask import trie as trie_mod
from grid_sql.mask.trie import TokenTrie
from grid_sql.mask.vocab import Vocabulary
from grid_sql.store import ENV

from .toy_grammars import CRUD


@pytest.fixture
def gstore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV, str(tmp_path))
    root = store.store_dir()
    assert root is not None and root.is_relative_to(tmp_path)
    return root


def stats() -> dict[str, int]:
    return dict(store.STATS.__dict__)


def delta(before: dict[str, int]) -> dict[str, int]:
    now = stats()
    return {k: now[k] - before[k] for k in now if now[k] != before[k]}


def no_lark_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("lark's grammar loader ran on a store hit")

    monkeypatch.setattr("lark.load_grammar.load_grammar", boom)


def only_entry(root: Path) -> Path:
    entries = list(root.glob("*/*.json"))
    assert len(entries) == 1
    return entries[0]


def test_dialect_round_trip_skips_the_loader(gstore: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = dialects_dir()
    path = d / "sqlite.lark"

    def load() -> Grammar:
        return Grammar.from_lark(
            path.read_text(), "start", import_paths=[d], source_path=path, name="sqlite"
        )

    s0 = stats()
    cold = load()
    assert delta(s0) == {"misses": 1, "writes": 1}
    no_lark_loader(monkeypatch)
    s1 = stats()
    warm = load()
    assert delta(s1) == {"hits": 1}
    assert warm.fingerprint == cold.fingerprint == Grammar.dialect("sqlite").fingerprint
    assert warm.l1_fingerprint == cold.l1_fingerprint
    assert warm.terminals == cold.terminals and warm.rules == cold.rules
    assert np.array_equal(warm.tables.action, cold.tables.action)
    assert warm.tables.fingerprint == cold.tables.fingerprint


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "empty", "tampered_rule", "tampered_terminal", "format", "key"],
)
def test_damaged_entry_is_rebuilt_not_trusted(gstore: Path, damage: str) -> None:
    ref = Grammar.from_lark(CRUD, "start")
    entry = only_entry(gstore)
    raw = entry.read_text()
    doc = json.loads(raw)
    if damage == "garbage":
        entry.write_bytes(b"\x00\xffnot json")
    elif damage == "truncated":
        entry.write_text(raw[: len(raw) // 2])
    elif damage == "empty":
        entry.write_text("")
    else:
        if damage == "tampered_rule":  # drop one production, keep the recorded fingerprint
            doc["rules"] = doc["rules"][1:]
        elif damage == "tampered_terminal":  # widen a regex
            doc["terminals"][0][1] = ".*"
        elif damage == "format":
            doc["format"] = store.STORE_FORMAT + 1
        else:
            doc["key"] = "0" * 64
        entry.write_text(json.dumps(doc))
    s0 = stats()
    again = Grammar.from_lark(CRUD, "start")
    assert delta(s0) == {"rejected": 1, "writes": 1}
    assert again.fingerprint == ref.fingerprint and again.rules == ref.rules
    # the rewritten entry is good again
    s1 = stats()
    assert Grammar.from_lark(CRUD, "start").fingerprint == ref.fingerprint
    assert delta(s1) == {"hits": 1}


def test_changed_source_or_import_is_a_different_entry(gstore: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "words.lark").write_text("NAME: /[a-z]+/\n")
    text = "%import words.NAME\nstart: NAME\n"
    g1 = Grammar.from_lark(text, "start", import_paths=[lib])
    (lib / "words.lark").write_text("NAME: /[a-z0-9]+/\n")
    s0 = stats()
    g2 = Grammar.from_lark(text, "start", import_paths=[lib])
    assert delta(s0) == {"misses": 1, "writes": 1}
    assert g1.terminals[0].pattern != g2.terminals[0].pattern
    s1 = stats()
    g3 = Grammar.from_lark(text + "\n", "start", import_paths=[lib])
    assert delta(s1) == {"misses": 1, "writes": 1}
    assert g3.fingerprint == g2.fingerprint


def test_failed_load_is_not_stored(gstore: Path) -> None:
    with pytest.raises(GrammarError):
        Grammar.from_lark("start: UNDEFINED_THING\n", "start")
    assert not list(gstore.glob("*/*.json"))


def test_disabled_and_unwritable_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "off")
    assert store.store_dir() is None
    s0 = stats()
    Grammar.from_lark(CRUD, "start")
    assert delta(s0) == {}
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(ENV, str(blocker))
    s1 = stats()
    g = Grammar.from_lark(CRUD, "start")  # cannot write: still a correct grammar
    d1 = delta(s1)
    assert d1.get("writes", 0) == 0 and d1.get("hits", 0) == 0
    assert g.fingerprint == Grammar.from_lark(CRUD, "start").fingerprint


# ---------------------------------------------------------------- lexer automaton store
def fresh_lexer(g: Grammar) -> LexerTables:
    """``g``'s lexer built past the in-memory cache (store or kernel). The cache is put back
    afterwards: grammars built later in the session must keep sharing one LexerTables
    object per lexer (tests/kernels/test_walk_parity.py relies on it)."""
    with lexer_mod._CACHE_LOCK:
        saved = dict(lexer_mod._CACHE)
        lexer_mod._CACHE.clear()
    try:
        return LexerTables.build(g.terminals)
    finally:
        with lexer_mod._CACHE_LOCK:
            lexer_mod._CACHE.clear()
            lexer_mod._CACHE.update(saved)


def same_lexer(a: LexerTables, b: LexerTables) -> None:
    assert a.trans_bytes == b.trans_bytes and a.n_states == b.n_states
    assert a.accept_masks == b.accept_masks and a.live_masks == b.live_masks
    assert a.accept_candidates == b.accept_candidates and a.fingerprint == b.fingerprint


def lexer_entry(root: Path) -> Path:
    entries = list((root.parent.parent / "lexers").glob("v*/*/*.bin"))
    assert len(entries) == 1
    return entries[0]


def test_lexer_round_trip_skips_the_build(gstore: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = Grammar.from_lark(CRUD, "start")
    built = fresh_lexer(g)
    assert lexer_entry(gstore).is_file()

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the union DFA was rebuilt on a store hit")

    monkeypatch.setattr(_kernels, "build_union_dfa", boom)
    same_lexer(fresh_lexer(g), built)


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "kernel_version", "key"])
def test_damaged_lexer_entry_is_rebuilt(gstore: Path, damage: str) -> None:
    g = Grammar.from_lark(CRUD, "start")
    built = fresh_lexer(g)
    entry = lexer_entry(gstore)
    data = bytearray(entry.read_bytes())
    if damage == "flip":
        data[-1] ^= 0x01
    elif damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "magic":
        data[0] ^= 0xFF
    else:
        n = int.from_bytes(data[14:18], "little")
        head = json.loads(bytes(data[18 : 18 + n]))
        if damage == "kernel_version":
            head["kernels"] = "0.0.0-other"
        else:
            head["key"] = "f" * 64
        new = json.dumps(head, sort_keys=True).encode()
        data = data[:14] + len(new).to_bytes(4, "little") + new + data[18 + n :]
    entry.write_bytes(bytes(data))
    calls = []
    real = _kernels.build_union_dfa

    def counting(*a: object, **k: object) -> object:
        calls.append(1)
        return real(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_kernels, "build_union_dfa", counting)
        same_lexer(fresh_lexer(g), built)
        assert calls == [1], "a damaged entry was trusted"
        same_lexer(fresh_lexer(g), built)  # rewritten: a hit again
        assert calls == [1]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_lexer_tables_match_the_per_state_reference(dialect: str) -> None:
    # the vectorised decoding of the kernel's bitsets == the per-state, per-terminal rule
    terms = Grammar.dialect(dialect).terminals
    lx = LexerTables.build(terms)
    trans, acc, live, n_states, n_words = _kernels.build_union_dfa([t.pattern for t in terms])
    assert lx.trans_bytes == bytes(trans) and lx.n_states == n_states

    def ints(buf: bytes) -> tuple[int, ...]:
        w = np.frombuffer(buf, dtype="<u8").reshape(n_states, n_words)
        return tuple(int.from_bytes(w[s].tobytes(), "little") for s in range(n_states))

    assert lx.accept_masks == ints(acc) and lx.live_masks == ints(live)
    order = sorted(range(len(terms)), key=lambda i: terms[i].resolution_key)
    ref = tuple(tuple(i for i in order if (m >> i) & 1) for m in lx.accept_masks)
    assert lx.accept_candidates == ref


# ---------------------------------------------------------------- token trie store
GPT2 = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tokenizers"


@pytest.fixture(scope="module")
def gpt2() -> Vocabulary:
    path = GPT2 / "ggml-vocab-gpt-2.gguf"
    if not path.is_file():
        pytest.skip(f"{path} missing (shared data)")
    return Vocabulary.from_gguf(path)


def same_trie(a: TokenTrie, b: TokenTrie) -> None:
    assert a.nodes.tobytes() == b.nodes.tobytes()
    assert np.array_equal(a.alias_offsets, b.alias_offsets)
    assert np.array_equal(a.alias_ids, b.alias_ids)
    assert a.alias_ids.dtype == b.alias_ids.dtype and a.fingerprint == b.fingerprint


def fresh_trie(v: Vocabulary) -> TokenTrie:
    with trie_mod._cache_lock:
        trie_mod._cache.clear()
    return trie_mod.get_token_trie(v)


def trie_entry(root: Path) -> Path:
    entries = list((root.parent.parent / "tries").glob("v*/*/*.bin"))
    assert len(entries) == 1
    return entries[0]


def test_trie_round_trip_skips_the_build(
    gstore: Path, gpt2: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = fresh_trie(gpt2)
    same_trie(built, TokenTrie.build(gpt2))
    assert trie_entry(gstore).is_file()

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the trie was rebuilt on a store hit")

    monkeypatch.setattr(TokenTrie, "build", boom)
    loaded = fresh_trie(gpt2)
    same_trie(loaded, built)
    assert loaded.lookup(b" the") == built.lookup(b" the")


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "vocab"])
def test_damaged_trie_entry_is_rebuilt(gstore: Path, gpt2: Vocabulary, damage: str) -> None:
    built = fresh_trie(gpt2)
    entry = trie_entry(gstore)
    data = bytearray(entry.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
    elif damage == "truncate":
        data = data[:-4]
    elif damage == "magic":
        data[0] ^= 0xFF
    else:
        n = int.from_bytes(data[13:17], "little")
        head = json.loads(bytes(data[17 : 17 + n]))
        head["vocab"] = "0" * 64
        new = json.dumps(head, sort_keys=True).encode()
        data = data[:13] + len(new).to_bytes(4, "little") + new + data[17 + n :]
    entry.write_bytes(bytes(data))
    calls = []
    real = TokenTrie.build

    def counting(v: Vocabulary) -> TokenTrie:
        calls.append(1)
        return real(v)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TokenTrie, "build", counting)
        same_trie(fresh_trie(gpt2), built)
        assert calls == [1], "a damaged entry was trusted"
        same_trie(fresh_trie(gpt2), built)  # rewritten: a hit again
        assert calls == [1]
