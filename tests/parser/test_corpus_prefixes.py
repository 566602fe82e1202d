"""Every prefix of every corpus statement is viable, and every statement is a sentence.

The fast incremental parser is fed byte by byte (each step from the previous
configuration), so this checks viability of all ~O(total bytes) prefixes of the Spider dev
gold (SQLite; sqlglot-transpiled for PostgreSQL and MySQL) and the defog sql-eval gold of
each dialect, plus EOS at the end. The slower executable spec checks samples of the same
corpora in ``tests/differential``.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from grid_sql.grammar import Grammar
from grid_sql.parser import ParserRuntime

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


@cache
def coverage_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "grammar_coverage", ROOT / "scripts/grammar_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def corpus(dialect: str) -> list[str]:
    cov = coverage_script()
    gold = cov.spider_gold(DATA)
    qs = list(gold) if dialect == "sqlite" else [q for _, q in cov.transpiled(gold, dialect)]
    qs += [q for _, q in cov.defog_gold(DATA, dialect)]
    return qs


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_all_prefixes_viable_and_sentences_accept(dialect: str) -> None:
    rt = ParserRuntime.for_grammar(Grammar.dialect(dialect))
    qs = corpus(dialect)
    assert len(qs) > 1350
    for q in qs:
        data = q.encode()
        cfg = rt.initial
        for i in range(len(data)):
            nxt = rt.advance(cfg, data[i : i + 1])
            assert nxt is not None, f"{dialect}: prefix {data[: i + 1]!r} not viable"
            cfg = nxt
        assert rt.eos_allowed(cfg), f"{dialect}: {q!r} is not a complete sentence"
