"""Big catalogs (issue #25 §2): the prompt fits the context window, the linker finds the
tables a question needs among 2,000 distractors, catalog comments reach the prompt, and SQLite
bulk reflection returns what SQLAlchemy's per-table reflection does.

The catalog is Chinook plus 2,000 generated distractor tables (``bench/big_catalog.py``),
about one in eight a near-namesake of a Chinook table (``invoice_archive_2019``,
``customer_notes``). Before the budget, the first question on it failed with "context window
of 4096 tokens exceeded" (the prompt listed every table by name)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

import pytest

from grid_sql.ask import budget as budget_mod
from grid_sql.ask.asker import Asker
from grid_sql.ask.budget import by_bytes, fit_repair, limits
from grid_sql.ask.prompt import build_messages, describe_table, visible_tables
from grid_sql.data import chinook_path
from grid_sql.errors import ContextOverflowError, OptionError
from grid_sql.policy.grants import sqlite_baseline
from grid_sql.schema.introspect import introspect
from grid_sql.schema.linking import Linker, link_words, stem
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo

REPO = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    name = "bench_big_catalog"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "big_catalog.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def big_chinook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chinook + 2,000 distractor tables (2,011 tables)."""
    return _bench().big_copy("chinook", 2000, tmp_path_factory.mktemp("big"))


@pytest.fixture(scope="module")
def big_asker(big_chinook: Path) -> Asker:
    return Asker(big_chinook, audit=False)


def _qwen_tokenizer():  # the test model's own tokenizer, no weights
    from grid_sql.decode.models import cached_path

    path = cached_path("qwen2.5-coder-0.5b")
    if not path.is_file():
        pytest.skip("qwen2.5-coder-0.5b is not cached (make models)")
    from llama_cpp import Llama

    return Llama(model_path=str(path), vocab_only=True, verbose=False)


# ----------------------------------------------------------------------------- linking


def _table(name: str, *cols: str) -> TableInfo:
    """A catalog table of text columns (the linker reads names, not types)."""
    return TableInfo(name, columns=tuple(ColumnInfo(c, "text") for c in cols))


def _visible(schema: str, tables: tuple[TableInfo, ...]) -> list:
    """What the linker indexes of a one-schema PostgreSQL catalog (every table readable)."""
    snap = SchemaSnapshot("postgresql", "public", (SchemaInfo(schema, tables),))
    return visible_tables(snap, sqlite_baseline(snap))


def test_words_are_split_and_stemmed():
    assert link_words("InvoiceLine") == ["invoice", "line"]
    assert link_words("invoice_archive_2019") == ["invoice", "archive", "2019"]
    assert link_words("How many invoices per countries?") == [
        "how", "many", "invoice", "per", "country",
    ]  # fmt: skip
    assert [stem(w) for w in ("boxes", "classes", "status", "sales", "tracks")] == [
        "box", "class", "status", "sale", "track",
    ]  # fmt: skip


def test_the_real_table_beats_its_namesakes(big_asker: Asker):
    pol = big_asker._mode(False).policy
    linker = budget_mod.linker_for(big_asker.snapshot, pol)
    top = [t.name for t in linker.rank("How many invoices are there?")[:3]]
    assert top[0] == "Invoice", top
    # a join table between two mentioned tables rises with them (foreign-key neighbours)
    top = [t.name for t in linker.rank("Which tracks are on each playlist?")[:4]]
    assert {"Track", "Playlist", "PlaylistTrack"} <= set(top), top


def test_recall_of_gold_tables_among_2000_distractors(big_asker: Asker):
    """The alias-question gold (bench/alias_questions.json, Chinook) with 2,000 distractors:
    every table the gold reads is among the linker's top 16 for at least 90 % of the gold
    tables (bench/big_catalog.py recall reports the exact figures per k)."""
    import json

    bench = _bench()
    pol = big_asker._mode(False).policy
    linker = budget_mod.linker_for(big_asker.snapshot, pol)
    hit = total = 0
    for item in json.loads((REPO / "bench" / "alias_questions.json").read_text())["chinook"]:
        gold = bench.gold_tables(item["gold"])
        ranked = {t.name.lower() for t in linker.rank(item["q"])[:16]}
        hit += len(gold & ranked)
        total += len(gold)
    assert hit / total >= 0.9, (hit, total)


def test_comments_are_indexed_and_shown():
    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo(
                "public",
                tuple(
                    [
                        TableInfo(
                            "t_x91",
                            columns=(
                                ColumnInfo("k", "integer"),
                                ColumnInfo("amt", "numeric", comment="revenue in EUR */ x"),
                            ),
                            primary_key=("k",),
                            comment="Monthly revenue per store",
                        )
                    ]
                    + [
                        TableInfo(f"other_{i}", columns=(ColumnInfo("id", "integer"),))
                        for i in range(100)
                    ]
                ),
            ),
        ),
    )
    pol = sqlite_baseline(snap)
    tables = visible_tables(snap, pol)
    assert Linker(tables).rank("What is the revenue of each store?")[0].name == "t_x91"
    t = next(t for t in tables if t.name == "t_x91")
    text = describe_table(t, {("public", "t_x91")}, False)
    assert "amt numeric /* revenue in EUR * / x */" in text
    assert text.endswith("; -- Monthly revenue per store")


def test_one_schema_wins_over_namesakes_in_others():
    """A catalog that keeps applications in schemas (defog's big catalog): the question's
    strongest schema keeps its tables ahead of same-named tables elsewhere, so the prompt does
    not show ``scholar.author`` beside ``academic.publication`` (the model joined them)."""

    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (
            SchemaInfo(
                "archive", (_table("author", "authorid", "authorname"), _table("paper", "paperid"))
            ),
            SchemaInfo(
                "library",
                (
                    _table("author", "aid", "name"),
                    _table("publication", "pid", "title", "citation_num"),
                ),
            ),
        ),
    )  # (catalog order puts archive.author first among the two equal `author` matches)
    tables = visible_tables(snap, sqlite_baseline(snap))
    ranked = Linker(tables).rank("How many citations does each author's publication have?")
    assert [(x.schema, x.name) for x in ranked[:2]] == [
        ("library", "publication"),
        ("library", "author"),
    ]
    # one schema: nothing changes
    one_snap = SchemaSnapshot("postgresql", "public", snap.schemas[1:])
    one = visible_tables(one_snap, sqlite_baseline(one_snap))
    assert Linker(one).rank("publication author")[0].name in {"publication", "author"}


def test_run_together_names_and_irregular_verbs_reach_their_tables():
    """defog's scholar and academic join tables (``paperkeyphrase``, ``writes``): PostgreSQL
    folds ``PaperKeyphrase`` to one word and the questions say "written"; both were missing
    from the big catalog's prompts (``bench/defog_big_recall.py``)."""
    from grid_sql.schema.linking import split_compounds

    assert stem("written") == stem("wrote") == stem("writes") == "write"
    vocabulary = {"paper", "keyphrase", "dataset", "phrase", "restaurant"}
    assert split_compounds(
        [{"paperkeyphrase"}, {"keyphrase"}, {"restaurant"}, {"paperdataset"}], vocabulary
    ) == [{"paper", "keyphrase"}, {"keyphrase"}, {"restaurant"}, {"paper", "dataset"}]

    real = (
        _table("paper", "paperid", "title", "year"),
        _table("keyphrase", "keyphraseid", "keyphrasename"),
        _table("paperkeyphrase", "paperid", "keyphraseid"),
        _table("writes", "paperid", "authorid"),
        _table("author", "authorid", "authorname"),
    )
    noise = tuple(_table(f"paper_{w}_log", "id", "title") for w in ("archive", "staging", "tmp"))
    tables = _visible("scholar", real + noise)
    top = [x.name for x in Linker(tables).rank("Which keyphrases appear in papers from 2020?")]
    assert "paperkeyphrase" in top[:3]
    top = [x.name for x in Linker(tables).rank("How many papers has each author written?")]
    assert "writes" in top[:3]


def test_hyphenated_question_words_reach_run_together_names():
    """defog yelp's "check-ins" (table ``checkin``): neither ``check`` nor ``ins`` is the
    table's word, so the big catalog's prompts described ``atis.days`` and not
    ``yelp.checkin``; the compound run together is."""

    real = (
        _table("checkin", "business_id", "count", "day"),
        _table("business", "business_id", "name"),
    )
    noise = tuple(_table(f"days_{i}", "days_code", "day_name", "check_flag") for i in range(30))
    tables = _visible("yelp", real + noise)
    q = "What is the total number of check-ins on the 2 days before Saturday?"
    assert [x.name for x in Linker(tables).rank(q)][0] == "checkin"


def test_folded_run_together_names_match_at_their_ends():
    """defog broker's tables (``CREATE TABLE sbCustomer``, unquoted: PostgreSQL folds it to
    ``sbcustomer``): the camelCase split has nothing to cut and ``sb`` is no word, so no
    broker table reached the big catalog's prompts; a question word that begins or ends
    such a name, two letters or more left over, now counts half a name match. A word inside
    a longer one with a single letter left (``border``: "order") does not."""

    real = (
        _table("sbcustomer", "sbcustid", "sbcustname"),
        _table("sbtransaction", "sbtxid", "sbtxcustid", "sbtxamount"),
        _table("sbdailyprice", "sbdptickerid", "sbdpclose"),
        _table("border", "state_name", "border"),
    )
    noise = tuple(_table(f"crm_customer_{w}", "id", "notes") for w in ("log", "tmp", "staging"))
    tables = _visible("broker", real + noise)
    top = [x.name for x in Linker(tables).rank("How many transactions did each customer make?")]
    assert set(top[:2]) == {"sbtransaction", "sbcustomer"}
    top = [x.name for x in Linker(tables).rank("What was the highest closing price?")]
    assert top[0] == "sbdailyprice"
    scores = Linker(tables).scores("List the orders")
    assert not any(tables[i].name == "border" for i in scores)


def test_tables_that_share_a_rare_column_rise_together():
    """A catalog with no declared foreign keys (defog's geography): the tables that share a
    rare column name with the question's table (``state_name``) are its join partners and
    rise above tables that only match the question's generic words (``city``, ``country``
    columns of hundreds of distractors). Only the question's strongest schema reaches out:
    the partners of a namesake in another schema (``travel.city``) stay behind."""

    geo = (
        _table("city", "city_name", "population", "country_name", "state_name"),
        _table("lake", "lake_name", "area", "state_name"),
        _table("border_info", "state_name", "border"),
    )
    noise = tuple(_table(f"stg_{i}", f"stg_{i}_id", "city", "country", "notes") for i in range(40))
    travel = (
        _table("city", "city_code", "city_name"),
        _table("ground_service", "city_code", "fare"),
    )
    snap = SchemaSnapshot(
        "postgresql",
        "public",
        (SchemaInfo("geo", geo + noise), SchemaInfo("travel", travel)),
    )
    tables = visible_tables(snap, sqlite_baseline(snap))
    q = "What is the total population of cities in each country?"
    top = [(x.schema, x.name) for x in Linker(tables).rank(q)]
    assert top[0] == ("geo", "city")
    assert set(top[1:3]) == {("geo", "lake"), ("geo", "border_info")}
    assert top.index(("travel", "ground_service")) > top.index(("geo", "stg_0"))
    # a column name most tables carry joins nothing: with it the partners stay behind
    common = tuple(_table(f"x_{i}", "state_name", "country", "city") for i in range(40))
    snap2 = SchemaSnapshot("postgresql", "public", (SchemaInfo("geo", geo + common),))
    top2 = [x.name for x in Linker(visible_tables(snap2, sqlite_baseline(snap2))).rank(q)]
    assert top2[0] == "city" and "lake" not in top2[:3]


def test_fingerprints_do_not_move_without_comments():
    """A comment-less catalog keeps the fingerprint it had before comments were read (its
    canonical JSON has no comment keys); a comment is part of it and round-trips."""
    t = TableInfo("a", columns=(ColumnInfo("x", "INTEGER"),))
    snap = SchemaSnapshot("sqlite", "main", (SchemaInfo("main", (t,)),))
    assert "comment" not in snap.canonical_json()
    commented = SchemaSnapshot(
        "sqlite",
        "main",
        (SchemaInfo("main", (TableInfo("a", columns=t.columns, comment="hello"),)),),
    )
    assert commented.fingerprint != snap.fingerprint
    import json

    assert SchemaSnapshot.from_dict(json.loads(commented.canonical_json())) == commented


# ----------------------------------------------------------------------------- budget


def test_small_catalog_prompt_is_unchanged_by_the_budget():
    """Chinook fits with room to spare: the budgeted prompt is the one measured before."""
    a = Asker(chinook_path(), audit=False)
    pol = a._mode(False).policy
    q = "Which 5 customers spent the most?"
    assert a.messages(q) == build_messages(q, a.snapshot, pol)


def test_big_catalog_prompt_fits_and_the_unbounded_one_did_not(big_asker: Asker):
    llm = _qwen_tokenizer()
    pol = big_asker._mode(False).policy
    q = "How many customers are there?"

    def tokens(msgs: list[dict[str, str]]) -> int:
        text = "\n".join(m["content"] for m in msgs)
        return len(llm.tokenize(text.encode(), add_bos=False, special=False))

    # the unbounded listing (every table by name) is what overflowed 4096 tokens
    from grid_sql.ask.budget import render_schema

    unbounded = render_schema(
        q, big_asker.snapshot, pol, max_tables=16, max_chars=6000, values=None,
        room=None, count=len, max_names=10**6,
    )  # fmt: skip
    assert len(llm.tokenize(unbounded.encode(), add_bos=False)) > 4096
    budget = by_bytes(4096, 256, True)
    new = big_asker.messages(q)
    assert budget.count_messages(new) <= budget.first
    assert tokens(new) <= budget.first
    assert "CREATE TABLE Customer (" in new[0]["content"]


def test_byte_count_bounds_the_tokenizer(big_asker: Asker):
    """The byte bound used without a local model is never below the real token count
    (Qwen2.5's byte-level BPE) on the prompts it budgets: Chinook, the big catalog, Sakila."""
    llm = _qwen_tokenizer()
    sakila = Asker(_bench().source_db("sakila"), audit=False)
    chinook = Asker(chinook_path(), audit=False)
    for a in (chinook, big_asker, sakila):
        for q in ("How many customers are there?", "Top 5 films by rentals in 2005?"):
            for m in a.messages(q):
                text = m["content"]
                assert len(llm.tokenize(text.encode(), add_bos=False)) <= len(text.encode())


def test_wide_tables_are_narrowed_before_they_are_dropped(tmp_path: Path):
    db = tmp_path / "wide.sqlite"
    con = sqlite3.connect(db)
    cols = ", ".join(f"measure_{i} REAL" for i in range(300))
    con.execute(f"CREATE TABLE readings (reading_id INTEGER PRIMARY KEY, station TEXT, {cols})")
    con.close()
    a = Asker(db, audit=False)
    budget = by_bytes(1400, 128, False)
    msgs = a.messages("Average measure_7 per station?", budget=budget)
    text = msgs[0]["content"]
    assert budget.count_messages(msgs) <= budget.first
    assert "CREATE TABLE readings (reading_id INTEGER PRIMARY KEY, station TEXT" in text
    assert "measure_7 REAL" in text and "more columns" in text


def test_overflow_and_bad_budgets_are_typed(big_asker: Asker):
    with pytest.raises(OptionError, match="leaves"):
        limits(1024, 1000, False)
    budget = by_bytes(900, 64, False)
    with pytest.raises(ContextOverflowError):
        big_asker.messages("x " * 1000, budget=budget)


def test_a_repair_prompt_sheds_table_lines_to_fit():
    budget = by_bytes(2048, 64, False)
    lines = "\n".join(f"CREATE TABLE t{i} ({'c INTEGER, ' * 20}d TEXT);" for i in range(20))
    msgs = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "Question: q"},
        {"role": "assistant", "content": "SELECT 1"},
        {"role": "user", "content": f"That SQL is wrong:\n1. x\n\nThe tables involved:\n{lines}"},
    ]
    out = fit_repair(msgs, budget)
    assert budget.fits(out, budget.total)
    assert out[-1]["content"].startswith("That SQL is wrong:\n1. x")
    assert "CREATE TABLE t0 (" in out[-1]["content"]
    assert "CREATE TABLE t19 (" not in out[-1]["content"]
    huge = [*msgs[:-1], {"role": "user", "content": "y" * 5000}]
    with pytest.raises(ContextOverflowError):
        fit_repair(huge, budget)


# ----------------------------------------------------------------------------- reflection


def test_sqlite_bulk_reflection_matches_the_dialects_own(
    big_chinook: Path, tmp_path: Path, monkeypatch
):
    """One query for every CREATE statement (the fix of the quadratic reflection) gives
    the snapshot SQLAlchemy's per-table lookups give, constraint names parsed from the SQL
    included."""
    import sqlalchemy as sa

    small = tmp_path / "named.sqlite"
    con = sqlite3.connect(small)
    con.executescript(
        "CREATE TABLE a (id INTEGER, CONSTRAINT pk_a PRIMARY KEY (id));"
        "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER,"
        " CONSTRAINT fk_b_a FOREIGN KEY (a_id) REFERENCES a (id));"
    )
    con.close()
    from grid_sql.dialect import SQLite

    engines = [sa.create_engine(f"sqlite:///{p}") for p in (big_chinook, small)]
    fast = [introspect(e) for e in engines]
    monkeypatch.setattr(SQLite, "reflection_context", lambda *a, **k: contextlib.nullcontext())
    slow = [introspect(e) for e in engines]
    assert fast == slow and [s.fingerprint for s in fast] == [s.fingerprint for s in slow]
    b_table = fast[1].table("b")
    assert b_table is not None and b_table.foreign_keys[0].name == "fk_b_a"


# ----------------------------------------------------------------------------- model


@pytest.mark.slow  # catalog + Asker + 0.5B model + one generation: about a minute
def test_big_catalog_answers_without_overflow(big_chinook: Path, qwen):
    """The issue's done-when on the 0.5B model: the 2,011-table catalog answers a simple
    question (its wall time is reported by bench/big_catalog.py answer, not asserted)."""
    a = Asker(big_chinook, model=qwen, audit=False)
    msgs = a.messages("How many customers are there?")
    assert len(qwen.chat_prompt(msgs)) + a.max_tokens <= qwen.n_ctx
    res = a.ask("How many customers are there?")
    assert res.rows == [(59,)], res.sql


def test_a_generation_that_would_overflow_is_refused_before_the_model(qwen):
    """The last guard (a hand-built prompt): prompt + max_tokens over the backend's context
    is a ContextOverflowError before any model call, not llama.cpp's failure mid-prefill."""
    from grid_sql.ask.budget import check_room

    check_room(qwen, qwen.n_ctx - 256, 256)
    with pytest.raises(ContextOverflowError, match="exceeds the context window"):
        check_room(qwen, qwen.n_ctx - 255, 256)


def test_bind_on_close_takes_the_linkers_table_on_a_big_catalog(big_asker: Asker):
    """Where the prompt cannot show the catalog whole, bind on close takes, among tables
    of equal standing, the one the linker ranks highest for the question (here the real
    ``InvoiceLine`` over ``album_log``, a distractor that carries ``Quantity`` and sorts
    first by name); without a question it keeps the name order, as on small catalogs."""
    from grid_sql.ask.generation import GenerationRequest
    from grid_sql.ask.local import LocalGeneration
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.vocab import Vocabulary, greedy_token_ids

    mode = big_asker._mode(False)
    vocab = Vocabulary.from_gguf(REPO.parent / "shared/data/tokenizers/ggml-vocab-qwen2.gguf")
    guide = Guide(mode.grammar, vocab)
    text = b"SELECT Quantity FROM Genre"
    where = greedy_token_ids(vocab, b" WHERE")[0]
    got = {}
    for question in ("", "quantity of each invoice line"):
        request = GenerationRequest([], 64, mode, big_asker.snapshot, question=question)
        binder = LocalGeneration(big_asker)._binder(guide, request)
        assert binder is not None
        m = guide.matcher()
        m.accept_tokens(greedy_token_ids(vocab, text))
        got[question] = binder.span(m.config, lambda: text, where)
    assert got == {
        "": b" JOIN album_log ON",
        "quantity of each invoice line": b" JOIN invoiceline ON",
    }
