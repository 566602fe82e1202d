"""The termination reserve (mode 1): from random viable prefixes of real SQL, the completion is
legal token by token under the exact mask, ends at ACCEPT, and its cost is its length."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from grid_sql.grammar import Grammar
from grid_sql.mask.guide import Guide
from grid_sql.mask.reserve import reserve_table
from grid_sql.mask.vocab import Vocabulary, greedy_token_ids
from grid_sql.parser.incremental import accepts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite"
SPIDER = Path(__file__).resolve().parents[3] / "shared" / "data" / "spider" / "database"
CHINOOK_SQL = [
    b"SELECT c.FirstName, c.LastName, SUM(i.Total) AS revenue FROM Customer c JOIN Invoice i "
    b"ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId ORDER BY SUM(i.Total) DESC LIMIT 5;",
    b"SELECT Name FROM Artist WHERE ArtistId IN (SELECT ArtistId FROM Album WHERE Title "
    b"LIKE '%Rock%') ORDER BY Name",
    b"SELECT count(*) FROM Invoice WHERE BillingCountry = 'Brazil' AND Total > 5.5",
    b'SELECT "Title", (SELECT Name FROM Artist a WHERE a.ArtistId = al.ArtistId) FROM Album al',
]


def _statements(grammar: Grammar) -> list[bytes]:
    lines = (FIXTURES / "queries.sql").read_bytes().splitlines()
    out = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(b"--")]
    return [s for s in out if accepts(grammar, s)]


def _check_prefixes(guide: Guide, stmts: list[bytes], n: int, seed: int) -> int:
    """Feed ``n`` random token prefixes, then their reserve completion; returns checks."""
    rng = random.Random(seed)
    table = reserve_table(guide.grammar, guide.vocab)
    checked = 0
    for _ in range(n):
        stmt = rng.choice(stmts)
        toks = greedy_token_ids(guide.vocab, stmt, max_len=16)
        cut = rng.randint(0, len(toks))
        m = guide.matcher()
        m.accept_tokens(toks[:cut])
        comp = table.completion(m.config)
        assert comp.cost == len(comp.tokens) == table.cost(m.config)
        for t in comp.tokens:
            # membership in the exact mask, checked explicitly (accept_token re-checks)
            assert t in set(m.allowed_token_ids().tolist()), (stmt, cut, comp)
            m.accept_token(t)
        assert m.is_accepting(), (m.text(), comp)
        m.accept_token(guide.eos_id)  # EOS is legal: the output is a sentence
        assert accepts(guide.grammar, m.text())
        checked += 1
    return checked


def test_reserve_plain_sqlite_dialect(smollm2_vocab: Vocabulary) -> None:
    g = Grammar.dialect("sqlite")
    stmts = _statements(g)
    assert len(stmts) > 50
    assert _check_prefixes(Guide(g, smollm2_vocab), stmts, n=80, seed=1) == 80


def test_reserve_chinook_role_grammar(chinook_guide: Guide) -> None:
    stmts = [s for s in CHINOOK_SQL if accepts(chinook_guide.grammar, s)]
    assert len(stmts) == len(CHINOOK_SQL)
    assert _check_prefixes(chinook_guide, stmts, n=80, seed=2) == 80


def test_reserve_every_byte_prefix(chinook_guide: Guide) -> None:
    """Byte-level prefixes too (mid-identifier, mid-string, mid-comment): completion closes.

    Role grammars have no comments, so the mid-comment prefixes run on the L1 dialect."""
    for g, stmt in (
        (
            chinook_guide.grammar,
            b"SELECT Name FROM Artist WHERE Name = 'AC/DC' ORDER BY ArtistId;",
        ),
        (
            Grammar.dialect("sqlite"),
            b"SELECT Name /* c */ FROM Artist WHERE Name = 'AC/DC' -- x\n ORDER BY ArtistId;",
        ),
    ):
        _every_byte_prefix(g, stmt, chinook_guide.vocab)


def _every_byte_prefix(g: Grammar, stmt: bytes, vocab: Vocabulary) -> None:
    table = reserve_table(g, vocab)
    rt = table.rt
    assert accepts(g, stmt)
    for i in range(len(stmt) + 1):
        cfg = rt.advance(rt.initial, stmt[:i])
        assert cfg is not None
        comp = table.completion(cfg)
        assert accepts(g, stmt[:i] + comp.data), (stmt[:i], comp.data)
        assert vocab.spell(comp.tokens) == comp.data


def test_reserve_long_case_folded_identifiers(smollm2_vocab: Vocabulary) -> None:
    """Spider's cre_Doc_Template_Mgt: pending ``Ref`` must close to ``Ref_Template_Types``.

    Regression: the completion search keyed pending lexemes by their raw bytes, so under a
    case-folding lexicon it explored every case variant of the identifier and gave up
    (``MaskError: no way to finish the pending lexeme b'Ref'`` on 3 of 72 Spider questions).
    """
    from grid_sql.ask.asker import Asker

    db = SPIDER / "cre_Doc_Template_Mgt" / "cre_Doc_Template_Mgt.sqlite"
    g = Asker(db, audit=False).grammar  # the role grammar the Spider harness generates under
    stmt = (
        b"SELECT Template_Type_Code FROM Ref_Template_Types WHERE "
        b"Template_Type_Description = 'Book'"
    )
    _every_byte_prefix(g, stmt, smollm2_vocab)


def test_reserve_deeply_nested_prefix(chinook_guide: Guide) -> None:
    """120 open parentheses: the completion search must not hit Python's recursion limit.

    Regression: the cheapest-completion solver recursed once per unit-rule goto and raised
    RecursionError (seen in a repair round on Spider flight_2 / student_transcripts_tracking).
    """
    table = reserve_table(chinook_guide.grammar, chinook_guide.vocab)
    prefix = b"SELECT " + b"(" * 120 + b"1"
    cfg = table.rt.advance(table.rt.initial, prefix)
    assert cfg is not None
    comp = table.completion(cfg)
    assert comp.data.count(b")") == 120
    assert accepts(chinook_guide.grammar, prefix + comp.data)


def test_reserve_of_a_complete_statement_is_empty(chinook_guide: Guide) -> None:
    table = reserve_table(chinook_guide.grammar, chinook_guide.vocab)
    m = chinook_guide.matcher()
    m.accept_tokens(greedy_token_ids(chinook_guide.vocab, b"SELECT Name FROM Artist;"))
    assert m.is_accepting()
    assert table.completion(m.config).tokens == ()


@pytest.mark.parametrize("prefix", [b"SELECT Na", b"SELECT 'unterminated", b"SELECT (1 + (2"])
def test_reserve_closes_open_constructs(chinook_guide: Guide, prefix: bytes) -> None:
    table = reserve_table(chinook_guide.grammar, chinook_guide.vocab)
    cfg = table.rt.advance(table.rt.initial, prefix)
    assert cfg is not None
    comp = table.completion(cfg)
    assert accepts(chinook_guide.grammar, prefix + comp.data)


@pytest.mark.slow  # builds two more dialect grammars and their tables (~20-40 s here)
@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_reserve_other_dialects_byte_prefixes(dialect: str, smollm2_vocab: Vocabulary) -> None:
    """Byte-level random prefixes of every fixture statement (queries, DDL, DML)."""
    g = Grammar.dialect(dialect)
    table = reserve_table(g, smollm2_vocab)
    rt = table.rt
    stmts = []
    for f in sorted((FIXTURES.parent / dialect).glob("*.sql")):
        if "invalid" in f.name:
            continue
        for ln in f.read_bytes().splitlines():
            s = ln.strip()
            if s and not s.startswith(b"--") and accepts(g, s):
                stmts.append(s)
    assert len(stmts) > 50
    rng = random.Random(3)
    for _ in range(60):
        s = rng.choice(stmts)
        i = rng.randint(0, len(s))
        cfg = rt.advance(rt.initial, s[:i])
        assert cfg is not None
        comp = table.completion(cfg)
        assert accepts(g, s[:i] + comp.data), (s[:i], comp.data)


_PRINT_COMPLETIONS = """
import sys
from grid_sql.grammar import Grammar
from grid_sql.mask.reserve import reserve_table
from grid_sql.mask.vocab import Vocabulary
v = Vocabulary.from_gguf(sys.argv[1])
for dialect in ("sqlite", "postgresql", "mysql"):
    t = reserve_table(Grammar.dialect(dialect), v)
    for p in (b"CREATE ", b"CREATE -- x", b"ALTER ", b"DROP ", b"SELECT a FROM t ", b"INSERT "):
        cfg = t.rt.advance(t.rt.initial, p)
        if cfg is not None:
            print(dialect, p, t.completion(cfg).data)
"""


def test_reserve_is_the_same_in_every_process() -> None:
    """The completion's ties (`CREATE TABLE A ( A )` against `CREATE VIEW A AS SELECT A`)
    are broken by a total order, not by lark's set iteration, which follows the process's
    string hashing: found by the walk arm, whose walks replayed differently per process."""
    import os
    import subprocess
    import sys

    gguf = SPIDER.parents[1] / "tokenizers" / "ggml-vocab-gpt-2.gguf"
    if not gguf.is_file():
        pytest.skip(f"GPT-2 vocabulary not found at {gguf}")
    outs = set()
    for seed in ("0", "1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run(
            [sys.executable, "-c", _PRINT_COMPLETIONS, str(gguf)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outs.add(r.stdout)
    assert len(outs) == 1, outs
