"""bench/e2e.py: the guard-share measurement (instrumentation, report, one real run)."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("bench_e2e", REPO / "bench/e2e.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_e2e"] = mod
    spec.loader.exec_module(mod)
    return mod


e2e = _load()


def test_instrumentation_is_removed_after_the_block() -> None:
    from grid_sql.mask.guide import Guide, Matcher

    before = (Guide.fill_bitmask, Matcher.accept_token, Matcher.forced_tokens)
    probe = e2e.Probe()
    with e2e.instrumented(probe):
        assert Guide.fill_bitmask is not before[0]
    assert (Guide.fill_bitmask, Matcher.accept_token, Matcher.forced_tokens) == before


def _rec(arm: str, tokens: int, decode: float, model: float, guard: float) -> dict[str, object]:
    r: dict[str, object] = {
        "backend": "llama.cpp",
        "pass": "warm",
        "arm": arm,
        "qid": 0,
        "tokens": tokens,
        "decode_s": decode,
        "model_s": model,
        "guard_s": guard,
        "load_s": 1.0,
        "guide_s": 2.0,
    }
    if arm == "constrained":
        r.update(
            fill_s=guard / 2, apply_pick_s=guard / 4, reserve_s=0.0, advance_s=guard / 8,
            forced_s=0.0, fills=tokens,
        )  # fmt: skip
    return r


def test_report_shares_and_split() -> None:
    recs = [_rec("unconstrained", 20, 2.0, 2.0, 0.0), _rec("constrained", 20, 2.0, 1.8, 0.2)]
    text = e2e.report(recs)
    assert "| llama.cpp | warm | unconstrained | 1 | 20 | 2.00 | 10.0 | 2.00 | 0.000 | – |" in text
    con = "| llama.cpp | warm | constrained | 1 | 20 | 2.00 | 10.0 | 1.80 | 0.200 | 10.00% |"
    assert con in text
    # fill 50%, apply+pick 25%, advance 12.5%, rest 12.5%; 10 ms of guard per token
    assert "| 100 ms (50%) | 50 ms (25%) | 0 ms (0%) | 25 ms (12%) | 0 ms (0%) | 25 ms (12%) |" in (
        text
    )
    assert "| 1.00 | 10.00 |" in text
    assert "median 10.00%" in text


@pytest.mark.slow  # one Chinook question with SmolLM2-135M: guide compile + 2 short decodes
def test_measure_one_question_end_to_end(tmp_path: Path) -> None:
    from grid_sql.mask.vocab import VocabularyIncompleteWarning

    qs = e2e.load_chinook_questions()[:1]
    out = tmp_path / "e2e.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        recs = e2e.measure(
            qs, backend_name="llama.cpp", model="smollm2-135m", max_tokens=16, warm=False, out=out
        )
    assert [r["arm"] for r in recs] == ["unconstrained", "constrained"]
    assert len(out.read_text().splitlines()) == 2
    u, c = recs
    assert u["guard_s"] == 0.0 and u["decode_s"] >= u["model_s"] > 0
    assert 1 <= c["tokens"] <= 16 and c["fills"] >= 1
    assert c["decode_s"] >= c["model_s"] and c["guard_s"] > 0
    parts = c["fill_s"] + c["apply_pick_s"] + c["reserve_s"] + c["advance_s"] + c["forced_s"]
    assert parts <= c["guard_s"] * 1.05 + 1e-3  # the split never exceeds the guard's time
    assert c["sql"].upper().startswith("SELECT")
    assert "guard share of decode" in e2e.report(recs)
