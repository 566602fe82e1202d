"""Foreign idioms in blocked intent (issue #30 §2): the reading of blocked favourites on the
real Qwen2 vocabulary against each dialect's grammar (what is foreign is derived from the
target, so the same favourite is an idiom on one dialect and fine on another), and the repair
round with its hint through a real Qwen2.5-Coder-0.5B on Chinook."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid_sql.ask.asker import Asker
from grid_sql.ask.idioms import foreign_idioms, idiom_flags
from grid_sql.audit.store import AuditStore
from grid_sql.decode.loop import BlockedIntent
from grid_sql.grammar import Grammar

from ..mask.helpers import greedy_tokens, vocab


def _idioms(dialect: str, prefix: bytes, fav: bytes, prob: float = 0.9) -> dict[str, str]:
    v = vocab("qwen2")
    ids = greedy_tokens("qwen2", prefix) if prefix else []
    tok = v.token_bytes.index(fav)
    found = foreign_idioms(
        ids,
        [BlockedIntent(len(ids), tok, prob, 0.9)],
        v,
        Grammar.dialect(dialect),
        dialect,
        frozenset({"invoice", "invoicedate", "name", "track"}),
    )
    return {f.idiom: f.hint for f in found}


def test_top_is_foreign_where_the_grammar_has_no_top() -> None:
    for d in ("sqlite", "postgresql", "mysql"):
        got = _idioms(d, b"SELECT", b" TOP")
        assert list(got) == ["TOP"], d
        assert "has no TOP" in got["TOP"] and "LIMIT" in got["TOP"]


def test_function_calls_foreign_by_the_allow_list() -> None:
    got = _idioms("sqlite", b"SELECT T1.InvoiceDate - GETDATE", b"()")
    assert got == {"GETDATE(": "SQLite has no GETDATE(); use datetime('now')."}
    got = _idioms("sqlite", b"SELECT Name FROM Track WHERE LEN", b"(Name")
    assert got == {"LEN(": "SQLite has no LEN(); use length(s)."}
    # ISNULL( is T-SQL; MySQL has ISNULL(x) of its own, so it is foreign only elsewhere
    assert "COALESCE" in _idioms("postgresql", b"SELECT ISNULL", b"(")["ISNULL("]
    assert "ifnull" in _idioms("sqlite", b"SELECT ISNULL", b"(")["ISNULL("]
    assert _idioms("mysql", b"SELECT ISNULL", b"(") == {}
    # IFNULL: MySQL's and SQLite's, not PostgreSQL's
    assert list(_idioms("postgresql", b"SELECT IFNULL", b"(")) == ["IFNULL("]
    assert _idioms("sqlite", b"SELECT IFNULL", b"(") == {}
    assert _idioms("mysql", b"SELECT IFNULL", b"(") == {}
    assert "DATE_ADD" in _idioms("mysql", b"SELECT DATEADD", b"(")["DATEADD("]


def test_functions_the_dialect_has_are_never_idioms() -> None:
    for d, name in (("sqlite", b"length"), ("postgresql", b"strpos"), ("mysql", b"locate")):
        assert _idioms(d, b"SELECT " + name, b"(") == {}, d


def test_quoting_foreign_by_the_identifier_terminal() -> None:
    assert "double quotes" in _idioms("postgresql", b"SELECT", b" `")["`"]
    assert _idioms("sqlite", b"SELECT", b" `") == {}  # SQLite lexes `x` and [x]
    assert _idioms("mysql", b"SELECT", b" `") == {}
    assert "backticks" in _idioms("mysql", b"SELECT", b" [")["["]
    assert _idioms("sqlite", b"SELECT", b" [") == {}


def test_ilike_foreign_only_without_the_keyword() -> None:
    # the tokenizer splits ` ILIKE` as ` IL` + `IKE`: the blocked favourite is ` IL`
    assert list(_idioms("sqlite", b"SELECT * FROM Track WHERE Name", b" IL")) == ["ILIKE"]
    assert list(_idioms("mysql", b"SELECT * FROM Track WHERE Name", b" IL")) == ["ILIKE"]
    assert _idioms("postgresql", b"SELECT * FROM Track WHERE Name", b" IL") == {}
    # ` TO` starts a keyword the target has (TO): no evidence of TOP
    assert _idioms("sqlite", b"SELECT", b" TO") == {}


def test_unsure_favourites_and_names_are_no_evidence() -> None:
    assert _idioms("sqlite", b"SELECT", b" TOP", prob=0.1) == {}
    assert _idioms("sqlite", b"SELECT", b" Name") == {}


def test_flags() -> None:
    v = vocab("qwen2")
    ids = greedy_tokens("qwen2", b"SELECT ISNULL")
    found = foreign_idioms(
        ids,
        [BlockedIntent(len(ids), v.token_bytes.index(b"("), 0.9, 0.9)],
        v,
        Grammar.dialect("sqlite"),
        "sqlite",
    )
    assert idiom_flags(found) == ("foreign-idiom:ISNULL",)


def test_a_foreign_idiom_gets_the_repair_round_with_its_hint(
    chinook_copy: Path, qwen: object, tmp_path: Path
) -> None:
    store = AuditStore(tmp_path / "audit.sqlite")
    # date_help off: with the date line the model writes datetime('now') at once, and this
    # test is about the repair round a foreign idiom gets (the line: tests/ask/test_datehelp.py)
    asker = Asker(chinook_copy, model=qwen, audit=store, date_help=False)  # type: ignore[arg-type]
    gen = asker.generate_sql("How many days ago was each invoice issued? Use GETDATE().")
    idiom = [r for r in gen.repairs if r.kind == "idiom"]
    assert len(idiom) == 1, gen.repairs
    assert "SQLite has no GETDATE(); use datetime('now')." in idiom[0].violations
    assert "GETDATE" in idiom[0].sql.upper()  # the blocked call glued into an alias
    assert "datetime('now')" in gen.sql and "GETDATE(" not in gen.sql.upper()
    first = store.get(gen.audit_ids[0])
    assert "foreign-idiom:GETDATE" in first.seal["flags"]


@pytest.fixture
def no_repair(chinook_copy: Path, qwen: object) -> Asker:
    return Asker(chinook_copy, model=qwen, audit=False, repair=False, date_help=False)  # type: ignore[arg-type]


def test_without_a_repair_round_the_statement_stands(no_repair: Asker) -> None:
    gen = no_repair.generate_sql("How many days ago was each invoice issued? Use GETDATE().")
    assert not gen.repairs  # nothing to spend the hint on: the valid statement is returned
