"""Walk arm (small): random walks through the exact masks never dead-end and stay in L.

Tokens are sampled uniformly among the allowed ids (EOS taken with probability 1/2 when
legal). Every step must have a non-empty mask (an empty one raises MaskError), every sampled
token must be accepted, every walk's output must be a viable prefix according to the
independent spec, and every walk that stopped on EOS must be a sentence of L (spec and
lark-table parse). The issue's 10,000-walk arm needs the Rust hot path; this is its
Python-path smoke version.
"""

from __future__ import annotations

import json
import random

import pytest

from grid_sql.grammar import Grammar, RoleProjection, SchemaLexicon
from grid_sql.mask.cache import MaskCache
from grid_sql.mask.guide import Guide
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle

from .helpers import vocab

LEX = SchemaLexicon(
    {
        "TABLE_NAME": [b"Artist", b"Album", b'"Track"'],
        "COLUMN_NAME": [b"Name", b"ArtistId", b"Title"],
        "SCHEMA_NAME": [b"main"],
    },
    fold_bare_case=True,
)


@pytest.mark.parametrize("seed", range(4))
def test_random_walks_sound_and_dead_end_free(seed: int) -> None:
    g = (
        Grammar.dialect("sqlite")
        .project(
            RoleProjection(
                keep_statements=frozenset({"select_stmt"}),
                drop=frozenset({"cte_ref", "table_function"}),
            )
        )
        .with_lexicon(LEX)
    )
    v = vocab("llama-spm")
    guide = Guide(g, v, cache=MaskCache())
    spec = SpecOracle(to_spec(g))
    rng = random.Random(seed)
    ended = 0  # walks that stopped on EOS (each checked as a sentence below)
    for _ in range(3):
        m = guide.matcher()
        for _ in range(30):
            ids = m.allowed_token_ids().tolist()
            assert ids, "empty mask"
            if v.eos_token_id in ids and rng.random() < 0.5:
                m.accept_token(v.eos_token_id)
                break
            choices = [i for i in ids if i != v.eos_token_id]
            m.accept_token(rng.choice(choices))
        text = m.text()
        assert spec.is_viable_prefix(text), text
        if m.is_terminated():
            ended += 1
            assert spec.accepts(text), text


# ---- bench/walk_arm.py (the measurement) on a few walks ---------------------------------
def _walk_arm_module():  # type: ignore[no-untyped-def]
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "walk_arm.py"
    spec = importlib.util.spec_from_file_location("bench_walk_arm", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_walk_arm"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bench_walk_arm_records_and_resumes(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two walks of the lexicon arm (GPT-2, kernels on, reserve with a 24-token budget): no
    dead end, no overrun, lark parses the text; a second run finds them done and adds none;
    the report counts them."""
    from grid_sql.mask.walk import kernels_enabled

    if not kernels_enabled():
        pytest.skip("grid_sql._kernels not built (make ext)")
    wa = _walk_arm_module()
    monkeypatch.setattr(wa, "OUT_DIR", tmp_path)
    assert wa.run(["sqlite+lex"], 2, 24, (0, 1), deadline=float("inf")) == 2
    recs = [json.loads(x) for x in (tmp_path / "sqlite+lex.jsonl").read_text().splitlines()]
    assert [r["walk"] for r in recs] == [0, 1]
    for r in recs:
        assert not r["dead_end"] and not r["overrun"], r
        assert r["tokens"] <= 24 and r["stop"] in ("eos", "reserve")
        assert r["lark"] or r["spec"], r
    assert wa.run(["sqlite+lex"], 2, 24, (0, 1), deadline=float("inf")) == 0
    assert "| sqlite+lex | 2 | 0 | 0 |" in wa.report(tmp_path / "r.md", ["cmd"])
    # a walk is reproducible in another process (the reserve's ties do not follow hashing),
    # and a record that does not match its walk is reported
    assert wa.replay(2, 24) == (2, [])
    path = tmp_path / "sqlite+lex.jsonl"
    lines = path.read_text().splitlines()
    forged = json.loads(lines[1])
    forged["text"] += " "
    path.write_text(lines[0] + "\n" + json.dumps(forged) + "\n")
    assert wa.replay(2, 24) == (2, [("sqlite+lex", 1)])


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
def test_lark_munch_lexes_by_the_languages_rule(dialect: str) -> None:
    """lark's contextual lexer cuts a keyword off an identifier (`inhabx` -> IN + habx); the
    report's second lark check lexes by maximal munch (foundation.md §2) and parses it, while a
    text outside the language stays refused by both."""
    wa = _walk_arm_module()
    cut = b"SELECT a inhabx"
    assert not wa.lark_parses(dialect, cut)
    assert wa.lark_munch_parses(dialect, cut)
    for bad in (b"SELECT a FROM", b"SELECT a FROM t WHERE", b"SELECT (1"):
        assert not wa.lark_parses(dialect, bad) and not wa.lark_munch_parses(dialect, bad)
    for ok in (
        b"SELECT count(*) FROM t WHERE x IN (1, 2) -- c",
        b"SELECT 'it''s' /* x */ , 1.5e3 AS n FROM t ORDER BY 1 DESC LIMIT 3",
    ):
        assert wa.lark_parses(dialect, ok) and wa.lark_munch_parses(dialect, ok)


def test_walks_that_found_the_introducer_dead_end() -> None:
    """mysql+lex walks 2338, 7417, 8203 ended in `MaskError: no way to finish the pending
    lexeme b'_'` (MySQL's `_charset'…'` introducer or an identifier, under a lexicon with no
    `_` word): the reserve's search keyed every `_x` apart and hit its node cap. Replayed, they
    end through the reserve with a sentence lark parses."""
    from grid_sql.mask.walk import kernels_enabled

    if not kernels_enabled():
        pytest.skip("grid_sql._kernels not built (make ext)")
    wa = _walk_arm_module()
    arm = wa.Arm("mysql+lex")
    for k in (2338, 7417, 8203):
        r = arm.walk(k, 48)
        assert not r["dead_end"] and not r["overrun"] and r["stop"] == "reserve", r
        assert r["lark"] or r["spec"], r
        assert wa.lark_munch_parses("mysql", wa._text(r)), r


@pytest.mark.parametrize(
    "arm",
    [
        "sqlite+scope",
        pytest.param("postgresql+scope", marks=pytest.mark.db),
        pytest.param("mysql+scope", marks=pytest.mark.db),
    ],
)
def test_scoped_role_grammar_walks_never_dead_end(arm: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The CI sample of the scoped walk arm (issue #29; the full arm's 20,000 walks per
    dialect are in bench/RESULTS-walk-arm.md): the Asker's scoped role grammar of Chinook with
    denied tables and hidden columns, structured walks through sort keys, aliases and
    qualified columns. No dead end, no overrun, every text parses; the walks reach ORDER BY."""
    import os

    from grid_sql.mask.walk import kernels_enabled

    from ..servers import unavailable

    if not kernels_enabled():
        pytest.skip("grid_sql._kernels not built (make ext)")
    dialect = arm.partition("+")[0]
    wa = _walk_arm_module()
    if dialect != "sqlite" and not os.environ.get(wa.SCOPE_DB[dialect][0]):
        unavailable(f"{wa.SCOPE_DB[dialect][0]} is not set")
    monkeypatch.setattr(wa, "OUT_DIR", tmp_path)
    n = 80  # (60 reached ORDER BY only twice on PostgreSQL once TYPE_NAME changed the walks)
    assert wa.run([arm], n, 48, (0, 1), deadline=float("inf")) == n
    recs = [json.loads(x) for x in (tmp_path / f"{arm}.jsonl").read_text().splitlines()]
    for r in recs:
        assert not r["dead_end"] and not r["overrun"], r
        assert r["lark"] or r["spec"], r
    assert sum("ORDER" in r["text"].upper() for r in recs) >= 3
