"""The one on-disk store (grid_sql/store.py): layout, atomic writes, framed entries that
read as absent when damaged, and the kinds that use it (grammars, lexers, tries, the
serving registry's artifacts) all landing under one root."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from grid_sql import store

MAGIC = b"GRIDSQL-TEST\x00"
PERSON = b"grid-sql-test"
PARTS = (b"alpha", b"", b"\x00\x01\x02" * 100)


def test_layout_and_disabled(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(store.ENV, str(tmp_path))
    assert store.cache_root() == tmp_path
    p = store.entry_path("tries", 3, "abcdef", ".bin")
    assert p == tmp_path / "tries" / "v3" / "ab" / "abcdef.bin"
    assert store.sharded(Path("/x"), "0123", ".json") == Path("/x/01/0123.json")
    for off in ("off", "0", "none", ""):
        monkeypatch.setenv(store.ENV, off)
        assert store.cache_root() is None and store.entry_path("tries", 1, "ab", ".bin") is None


def test_framed_round_trip(tmp_path) -> None:
    p = tmp_path / "e.bin"
    assert store.write_framed(p, MAGIC, {"format": 1, "key": "k"}, PARTS, PERSON)
    head, parts = store.read_framed(p, MAGIC, 3, PERSON)  # type: ignore[misc]
    assert parts == list(PARTS)
    assert head["key"] == "k" and head["lengths"] == [5, 0, 300]
    assert head["digest"] == store.parts_digest(PARTS, PERSON)
    assert [x.name for x in tmp_path.iterdir()] == ["e.bin"]  # no temporary file left


@pytest.mark.parametrize(
    "damage", ["truncated", "extended", "flipped", "magic", "person", "n_parts", "head"]
)
def test_damaged_framed_entry_reads_as_absent(tmp_path, damage) -> None:
    p = tmp_path / "e.bin"
    store.write_framed(p, MAGIC, {"format": 1}, PARTS, PERSON)
    data = bytearray(p.read_bytes())
    magic, person, n_parts = MAGIC, PERSON, 3
    if damage == "truncated":
        data = data[:-1]
    elif damage == "extended":
        data += b"x"
    elif damage == "flipped":
        data[-1] ^= 1
    elif damage == "magic":
        magic = b"GRIDSQL-TRIE\x00"
    elif damage == "person":
        person = b"grid-sql-trie"
    elif damage == "n_parts":
        n_parts = 2
    else:
        (n,) = struct.unpack_from("<I", data, len(MAGIC))
        data[len(MAGIC) + 4 : len(MAGIC) + 4 + n] = b"{" * n
    p.write_bytes(bytes(data))
    assert store.read_framed(p, magic, n_parts, person) is None
    assert store.read_framed(tmp_path / "absent.bin", MAGIC, 3, PERSON) is None


def test_write_atomic_refused_is_false_and_leaves_nothing(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    assert not store.write_atomic(blocker / "sub" / "e.bin", b"data")
    p = tmp_path / "d" / "e.bin"
    assert store.write_atomic(p, b"one") and store.write_atomic(p, b"two")
    assert p.read_bytes() == b"two" and [x.name for x in p.parent.iterdir()] == ["e.bin"]


def test_every_kind_lands_under_the_one_root(tmp_path, monkeypatch) -> None:
    """A cold start with an empty store root writes the grammar, lexer and trie entries
    under it, in the store's layout: the kinds share the store instead of keeping their own."""
    from grid_sql.grammar import Grammar, LexerTables
    from grid_sql.grammar import lexer as lexer_mod
    from grid_sql.mask.trie import get_token_trie
    from grid_sql.mask.vocab import Vocabulary

    monkeypatch.setenv(store.ENV, str(tmp_path))
    text = f'start: "SELECT" NUMBER\nNUMBER: /[0-9]+/\n// {tmp_path.name}\n%ignore " "\n'
    g = Grammar.from_lark(text, "start")
    monkeypatch.setattr(lexer_mod, "_CACHE", {})  # past the in-process cache, to the disk
    LexerTables.build(g.terminals)
    tokens = [b"SELECT", b" 1", b" ", b"1", tmp_path.name.encode(), b"<eos>"]
    get_token_trie(Vocabulary.from_token_bytes(tokens, eos_token_id=5, warn_incomplete=False))
    entries = sorted(str(p.relative_to(tmp_path).parent.parent) for p in tmp_path.rglob("*.*"))
    assert entries == ["grammars/v1", "lexers/v1", "tries/v1"], entries
