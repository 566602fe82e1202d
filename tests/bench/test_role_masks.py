"""bench/role_masks.py measures the grammar the Asker generates under: the measured
statements must be inside every grammar it times (a rejected statement would time a dead
prefix), and the role grammar it builds must be the Asker's own."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rm() -> ModuleType:
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("role_masks", REPO / "bench" / "role_masks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_scoped_grammar_is_the_askers(rm: ModuleType) -> None:
    from grid_sql.ask.asker import Asker
    from grid_sql.data import chinook_path

    snap, pol = rm.chinook_role()
    asker = Asker(chinook_path(), audit=False)  # the model loads on the first question
    assert asker.grammar.fingerprint == rm.grammar_for("role+scopes", snap, pol).fingerprint


@pytest.mark.parametrize("kind", ["role+scopes", "role", "dialect"])
def test_chinook_gold_is_inside_every_measured_grammar(rm: ModuleType, kind: str) -> None:
    import grid_sql as gs
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.vocab import greedy_token_ids

    v = gs.Vocabulary.from_gguf(str(rm.TOKENIZERS / "ggml-vocab-gpt-2.gguf"))
    snap, pol = rm.chinook_role()
    eng = rm.GuideEngine(kind, Guide(rm.grammar_for(kind, snap, pol), v, cache=MaskCache()))
    golds = [q["gold"] for q in json.loads(rm.QUESTIONS.read_text())["questions"]]
    stats = {"steps": 0, "rejected": 0}
    lat: list[float] = []
    for sql in golds[:3]:  # a scoped cold fill runs the Python CD path: keep it short
        ids = greedy_token_ids(v, sql.encode(), max_len=32)
        assert rm.run_statement(eng, ids, v.eos_token_id, lat, stats), sql
    assert stats["rejected"] == 0 and len(lat) == stats["steps"] > 10
