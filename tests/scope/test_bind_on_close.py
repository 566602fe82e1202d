"""Bind on close (``grid_sql.decode.bind``): where the model's first choice would close a FROM
clause a select-list obligation keeps open, the policy writes the FROM item it needs. Each
case gives the output so far, the model's first choice and the exact bytes written (or None:
the policy stays out), on real Spider schemas with their foreign keys and the Qwen2
vocabulary; every written span is then fed through the exact mask."""

from __future__ import annotations

import functools

import pytest

from grid_sql.ask.asker import role_grammar_for
from grid_sql.decode.bind import BindOnClose, snapshot_links
from grid_sql.errors import OptionError
from grid_sql.mask.guide import Guide
from grid_sql.mask.vocab import Vocabulary, greedy_token_ids
from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
from grid_sql.schema.model import ColumnInfo, ForeignKeyInfo, SchemaInfo, SchemaSnapshot, TableInfo

from .helpers import DATA, scoped, snapshot

QWEN2 = DATA / "tokenizers" / "ggml-vocab-qwen2.gguf"
EOS = "<eos>"


@functools.cache
def vocab() -> Vocabulary:
    return Vocabulary.from_gguf(QWEN2)


@functools.cache
def guide(db: str, bind: bool = True) -> Guide:
    return Guide(scoped(db, bind), vocab())


@functools.cache
def binder(db: str) -> BindOnClose:
    return BindOnClose(guide(db), snapshot_links(snapshot(db)))


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
    _check_span(guide(db), binder(db), text, top, want)


def _fk(cols: str, table: str, ref: str, schema: str | None = None) -> ForeignKeyInfo:
    return ForeignKeyInfo((cols,), table, (ref,), referred_schema=schema)


def _t(name: str, *cols: str, fks: tuple[ForeignKeyInfo, ...] = ()) -> TableInfo:
    return TableInfo(name, columns=tuple(ColumnInfo(c, "text") for c in cols), foreign_keys=fks)


@functools.cache
def schemas_binder() -> BindOnClose:
    """A PostgreSQL catalog of several schemas (defog's big catalog in small): ``journal``
    in two of them with different columns, ``airline`` only in ``atis``, a table of the
    default schema, foreign keys inside schemas, and a role that may not read one table."""
    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo("public", (_t("memo", "memo_id", "note", "code"),)),
            SchemaInfo(
                "atis",
                (
                    _t("airline", "airline_code", "airline_name"),
                    _t(
                        "flight",
                        "flight_id",
                        "airline_code",
                        fks=(_fk("airline_code", "airline", "airline_code"),),
                    ),
                ),
            ),
            SchemaInfo("academic", (_t("journal", "jid", "name"),)),
            SchemaInfo(
                "scholar",
                (
                    _t("journal", "journalid", "journalname"),
                    _t(
                        "paper",
                        "paperid",
                        "journalid",
                        "title",
                        fks=(_fk("journalid", "journal", "journalid", "scholar"),),
                    ),
                    _t("secret", "journalname", "code"),
                    _t("a_audit", "audit_id", "rating"),
                    _t("review", "review_id", "rating"),
                ),
            ),
        ),
    )
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["scholar.secret"]}}, origin="test"
    )
    pol = narrow(sqlite_baseline(snap), app, snap)
    g = Guide(role_grammar_for(snap, pol, scopes=True, bind_select_list=True), vocab())
    return BindOnClose(g, snapshot_links(snap))


SCHEMA_CASES = [
    # the default schema lacks `airline`: the item is written with its schema (a bare
    # `JOIN airline` is outside the language), along the foreign key inside `atis`
    (
        "SELECT airline_name FROM atis.flight",
        " GROUP",
        b" JOIN atis.airline ON airline.airline_code = flight.airline_code",
    ),
    (
        "SELECT a.airline_name FROM atis.flight AS f",
        " ORDER",
        b" JOIN atis.airline AS a ON a.airline_code = f.airline_code",
    ),
    # namesakes: the key of `scholar.paper` leads to `scholar.journal`, not `academic`'s
    (
        "SELECT j.journalname FROM scholar.paper AS p",
        " WHERE",
        b" JOIN scholar.journal AS j ON j.journalid = p.journalid",
    ),
    # ... but `name` is only `academic.journal`'s (no key: the model writes the condition)
    ("SELECT journal.name FROM scholar.paper", " WHERE", b" JOIN academic.journal ON"),
    # a table of the default schema is written bare
    ("SELECT note FROM atis.flight", ";", b" JOIN memo ON"),
    # a table the role may not read is never written (`scholar.secret` has `code` too, and
    # is of the schema FROM reads)
    ("SELECT code FROM scholar.paper", " WHERE", b" JOIN memo ON"),
]


@pytest.mark.parametrize(("text", "top", "want"), SCHEMA_CASES)
def test_span_on_several_schemas(text: str, top: str, want: bytes | None) -> None:
    b = schemas_binder()
    _check_span(b.guide, b, text, top, want)


def test_ranked_candidates_follow_the_given_order() -> None:
    """Two tables of one schema carry ``rating``, neither linked: by name the first is
    ``a_audit``; ranked (the linker's order for the question, on a catalog the prompt
    cannot show whole) the one ranked higher, and the shared policy keeps its name order."""
    b = schemas_binder()
    text = "SELECT rating FROM scholar.paper"
    _check_span(b.guide, b, text, " WHERE", b" JOIN scholar.a_audit ON")
    ranked = b.ranked([("scholar", "paper"), ("scholar", "review"), ("scholar", "a_audit")])
    _check_span(b.guide, ranked, text, " WHERE", b" JOIN scholar.review ON")
    _check_span(b.guide, b, text, " WHERE", b" JOIN scholar.a_audit ON")
    # tables the order leaves out come after those it names
    _check_span(
        b.guide, b.ranked([("atis", "flight")]), text, " WHERE", b" JOIN scholar.a_audit ON"
    )


def _check_span(g: Guide, b: BindOnClose, text: str, top: str, want: bytes | None) -> None:
    m = g.matcher()
    m.accept_tokens(greedy_token_ids(vocab(), text.encode()))
    got = b.span(m.config, lambda: text.encode(), top_id(top))
    assert got == want
    if got is not None:
        # the span is inside the exact mask token by token, and it binds the obligation
        m.accept_tokens(b.tokens(got))
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
