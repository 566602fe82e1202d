"""Rust parser runtime ≡ Python parser runtime, step by step, on the real grammars.

``_kernels.ParserKernel`` (``kernels/core/src/runtime.rs``) against ``ParserRuntime``
(the reference) for grammars without scope rules: the three dialect grammars on their
fixture corpora (valid and invalid statements), the Spider gold sample, and the Chinook
role grammar with its schema lexicon. Both are fed the same chunks (single bytes, GPT-2
tokens, whole statements) and must agree at every step on viability, the LALR states,
the configuration hash, the allowed-terminal set, the scan state and the EOS verdict. A
seeded byte fuzz adds inputs no corpus has (random bytes where most are refused).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from grid_sql.grammar import Grammar
from grid_sql.mask.walk import kernels_enabled, parser_kernel
from grid_sql.parser import Configuration
from grid_sql.parser.incremental import ParserRuntime

from ..mask.helpers import greedy_tokens, vocab
from .helpers import CHINOOK_SQL, grammar, spider_statements

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CHINOOK_QUESTIONS = Path(__file__).resolve().parents[2] / "bench" / "chinook_questions.json"

pytestmark = pytest.mark.skipif(
    not kernels_enabled(), reason="grid_sql._kernels not built (run `make ext`)"
)


def _grammar(name: str) -> Grammar:
    return grammar(name) if name == "chinook" else Grammar.dialect(name)


def _corpus(name: str) -> list[bytes]:
    if name == "chinook":
        # the business set's gold queries (those on Employee are refused: the role denies it)
        gold = [q["gold"].encode() for q in json.loads(CHINOOK_QUESTIONS.read_text())["questions"]]
        return list(CHINOOK_SQL) + gold
    out = []
    for f in ("queries.sql", "dml.sql", "ddl.sql", "privileged.sql", "syntax_invalid.sql"):
        for line in (FIXTURES / name / f).read_text().splitlines():
            if line.strip() and not line.startswith("--"):
                out.append(line.encode())
    if name == "sqlite":
        out.extend(spider_statements(20))
    return out


class Lockstep:
    """The two runtimes fed the same chunks, compared after each."""

    def __init__(self, rt: ParserRuntime, k: object) -> None:
        self.rt, self.k = rt, k
        self.steps = 0

    def check(self, cfg: Configuration | None, kcfg: tuple | None, what: str) -> None:
        rt, k = self.rt, self.k
        assert (cfg is None) == (kcfg is None), what
        self.steps += 1
        if cfg is None or kcfg is None:
            return
        node, scan = kcfg
        s = cfg.scan
        assert (s.dfa, s.rem, s.la_len, s.la_state) == scan, what
        assert k.states(node) == cfg.stack.states(), what  # type: ignore[attr-defined]
        assert k.config_hash(node) == cfg.stack.hash, what  # type: ignore[attr-defined]
        allowed = int.from_bytes(k.allowed(node), "little")  # type: ignore[attr-defined]
        assert allowed == rt._lalr_mask(cfg.stack), what
        assert k.eos_allowed(node, scan) == rt.eos_allowed(cfg), what  # type: ignore[attr-defined]

    def feed(self, chunks: list[bytes], what: str) -> bool:
        """Feed ``chunks`` in order; False once both refuse."""
        cfg: Configuration | None = self.rt.initial
        kcfg: tuple | None = (0, (1, b"", -1, 0))
        self.check(cfg, kcfg, what)
        for i, c in enumerate(chunks):
            assert cfg is not None and kcfg is not None
            cfg = self.rt.advance(cfg, c)
            kcfg = self.k.advance(kcfg[0], kcfg[1], c)  # type: ignore[attr-defined]
            self.check(cfg, kcfg, f"{what} chunk {i} {c!r}")
            if cfg is None:
                return False
        return True


GRAMMARS = ["sqlite", "postgresql", "mysql", "chinook"]


@pytest.mark.parametrize("name", GRAMMARS)
def test_corpus_in_lockstep(name: str) -> None:
    g = _grammar(name)
    rt = ParserRuntime.for_grammar(g)
    assert rt.sem is None
    ls = Lockstep(rt, parser_kernel(rt))
    corpus = _corpus(name)
    tb = vocab("gpt-2").token_bytes
    accepted = 0
    for sql in corpus:
        ls.feed([sql], f"{name} whole {sql!r}")
        ls.feed([sql[i : i + 1] for i in range(len(sql))], f"{name} bytes {sql!r}")
        toks = greedy_tokens("gpt-2", sql)
        accepted += ls.feed([tb[t] for t in toks], f"{name} tokens {sql!r}")
    assert accepted >= len(corpus) // 2, (accepted, len(corpus))
    assert ls.steps > 1000


@pytest.mark.parametrize("name", GRAMMARS)
def test_byte_fuzz_in_lockstep(name: str) -> None:
    """Random continuations of corpus prefixes: a byte drawn from the statement's own
    bytes, SQL punctuation or anywhere in 0..255; refused bytes are dropped and redrawn."""
    g = _grammar(name)
    rt = ParserRuntime.for_grammar(g)
    ls = Lockstep(rt, parser_kernel(rt))
    rng = random.Random(f"parser-kernel-{name}")
    corpus = _corpus(name)
    refused = 0
    for seed in range(40):
        sql = corpus[rng.randrange(len(corpus))]
        cut = rng.randrange(len(sql) + 1)
        cfg = rt.advance(rt.initial, sql[:cut])
        kcfg = ls.k.advance(0, (1, b"", -1, 0), sql[:cut])  # type: ignore[attr-defined]
        ls.check(cfg, kcfg, f"{name} seed {seed} prefix")
        if cfg is None:
            continue
        for _ in range(60):
            r = rng.random()
            if r < 0.5:
                b = bytes([sql[rng.randrange(len(sql))]])
            elif r < 0.8:
                b = bytes([rng.choice(b" (),.;*='\"`[]-+<>0123456789abcxyzSFW\n")])
            else:
                b = bytes([rng.randrange(256)])
            nxt = rt.advance(cfg, b)
            knxt = ls.k.advance(kcfg[0], kcfg[1], b)  # type: ignore[attr-defined,index]
            ls.check(nxt, knxt, f"{name} seed {seed} byte {b!r} after {cfg.stack!r}")
            if nxt is None:
                refused += 1
                continue
            cfg, kcfg = nxt, knxt
    assert refused > 100 and ls.steps > 1500, (refused, ls.steps)


def test_interning_and_errors() -> None:
    rt = ParserRuntime.for_grammar(Grammar.dialect("sqlite"))
    k = parser_kernel(rt)
    a = k.advance(0, (1, b"", -1, 0), b"SELECT a FROM t WHERE ")
    n = k.n_nodes
    assert k.advance(0, (1, b"", -1, 0), b"SELECT a FROM t WHERE ") == a
    assert k.n_nodes == n  # equal stacks are one node
    with pytest.raises(ValueError, match="out of range"):
        k.states(10**6)
    with pytest.raises(ValueError, match="not shiftable"):
        k.shift(0, rt.end_id - 1 if rt.end_id > 1 else 0)
    from grid_sql.ask.asker import role_grammar_for
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.schema import introspect

    from .helpers import CHINOOK

    snap = introspect(open_sqlite(CHINOOK))
    policy = narrow(
        sqlite_baseline(snap), AppPolicy.from_mapping({"verbs": ["select"]}, origin="test"), snap
    )
    scoped = ParserRuntime.for_grammar(role_grammar_for(snap, policy, scopes=True))
    assert scoped.sem is not None
    with pytest.raises(ValueError, match="scope rules"):
        parser_kernel(scoped)
