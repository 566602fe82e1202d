"""Bind on close (``grid_sql.decode.bind``): where the model's first choice would close a FROM
clause a select-list obligation keeps open, the policy writes the FROM item it needs. Each
case gives the output so far, the model's first choice and the exact bytes written (or None:
the policy stays out), on real Spider schemas with their foreign keys and the Qwen2
vocabulary; every written span is then fed through the exact mask."""

from __future__ import annotations

import functools

import pytest

from grid_sql.decode.bind import BindOnClose, JoinLink
from grid_sql.errors import OptionError
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, greedy_token_ids

from .helpers import DATA, scoped, snapshot

QWEN2 = DATA / "tokenizers" / "ggml-vocab-qwen2.gguf"
EOS = "<eos>"


@functools.cache
def vocab() -> Vocabulary:
    return Vocabulary.from_gguf(QWEN2)


@functools.cache
def guide(db: str, bind: bool = True) -> Guide:
    return Guide(scoped(db, bind), vocab())


def links(db: str) -> list[JoinLink]:
    return [
        JoinLink(t.name, fk.columns, fk.referred_table, fk.referred_columns)
        for s in snapshot(db).schemas
        for t in s.tables
        for fk in t.foreign_keys
    ]


@functools.cache
def binder(db: str) -> BindOnClose:
    return BindOnClose(guide(db), links(db))


def top_id(word: str) -> int:
    if word == EOS:
        return guide("world_1").eos_id
    ids = greedy_token_ids(vocab(), word.encode())
    assert len(ids) == 1, f"{word!r} is {len(ids)} Qwen2 tokens"
    return ids[0]


T2_COUNTRY = b" JOIN country AS T2 ON T2.Code = T1.CountryCode"
CASES = [
    # the model forgot the join: a foreign key gives the table and the condition
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " ORDER", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " WHERE", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " GROUP", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " LIMIT", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", ";", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", EOS, T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1 ", "ORDER", T2_COUNTRY[1:]),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " order", T2_COUNTRY),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " OR", T2_COUNTRY),
    # a bare column no FROM table has (q740's `SELECT Name FROM countrylanguage ORDERBY...`)
    (
        "world_1",
        "SELECT Name FROM countrylanguage",
        " ORDER",
        b" JOIN country ON country.Code = countrylanguage.CountryCode",
    ),
    (
        "world_1",
        "SELECT country.Name FROM city",
        " WHERE",
        b" JOIN country ON country.Code = city.CountryCode",
    ),
    # no foreign key to a FROM table: the model writes the condition
    ("world_1", "SELECT Language FROM city", " WHERE", b" JOIN countrylanguage ON"),
    ("concert_singer", "SELECT T2.Name FROM singer AS T1", " ORDER", b" JOIN stadium AS T2 ON"),
    # the alias as the model spelled it
    (
        "world_1",
        "SELECT t2.Name FROM countrylanguage AS t1",
        " WHERE",
        b" JOIN country AS t2 ON t2.Code = t1.CountryCode",
    ),
    # the policy stays out: the model is joining, or starting a keyword the grammar admits
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " JOIN", None),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " INNER", None),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " LEFT", None),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", ",", None),
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1", " IN", None),  # INNER
    ("world_1", "SELECT T2.Name FROM countrylanguage", " AS", None),
    ("world_1", "SELECT T2.Name FROM countrylanguage", " T", None),  # an alias
    # one letter starts HAVING and the alias the model meant (Spider q904)
    ("network_1", "SELECT H.name FROM Likes L JOIN Highschooler", " H", None),
    (
        "network_1",
        "SELECT H.name FROM Likes L JOIN Highschooler",
        " having",
        b" JOIN highschooler AS H ON H.ID = L.liked_id",
    ),
    # ... or nothing is pending
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T1 JOIN country AS T2", " ORDER", None),
    ("world_1", "SELECT Name FROM country", " ORDER", None),
    ("world_1", "SELECT T2.Name FROM", " WHERE", None),
    # ... or the FROM clause cannot close here anyway
    ("world_1", "SELECT T2.Name FROM countrylanguage AS", " WHERE", None),
    # a word glued to the one before is not a new word
    ("world_1", "SELECT T2.Name FROM countrylanguage AS T", "ORDER", None),
]


@pytest.mark.parametrize(("db", "text", "top", "want"), CASES)
def test_span(db: str, text: str, top: str, want: bytes | None) -> None:
    g = guide(db)
    m = g.matcher()
    m.accept_tokens(greedy_token_ids(vocab(), text.encode()))
    got = binder(db).span(m.config, lambda: text.encode(), top_id(top))
    assert got == want
    if got is not None:
        # the span is inside the exact mask token by token, and it binds the obligation
        m.accept_tokens(binder(db).tokens(got))
        rt = g.runtime
        node = rt.finalize(m.config)
        assert node is not None
        if got.endswith(b" ON"):
            m.accept_tokens(greedy_token_ids(vocab(), b" 1"))
            node = rt.finalize(m.config)
            assert node is not None
        assert rt.blocked_closers(node) == ()
        assert m.is_accepting()


def test_without_obligations_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="select-list obligations"):
        BindOnClose(guide("world_1", bind=False))


def test_blocked_closers_name_the_keywords() -> None:
    g = guide("world_1")
    m = g.matcher()
    m.accept_tokens(greedy_token_ids(vocab(), b"SELECT T2.Name FROM countrylanguage AS T1"))
    rt = g.runtime
    node = rt.finalize(m.config)
    assert node is not None
    names = {
        g.grammar.terminals[t].name if t < rt.end_id else "$END" for t in rt.blocked_closers(node)
    }
    assert {"WHERE", "GROUP", "ORDER", "LIMIT", "SEMI", "$END"} <= names, names
