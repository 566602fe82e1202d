"""bench/ex_failures.py (why running statements answer wrong) and pool_report's --failures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ef = _load("ex_failures")
pr = _load("pool_report")

GOLD = [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize(
    ("pred", "ordered", "cls"),
    [
        ([("a", 1), ("b", 2), ("c", 3)], False, "column order"),
        ([(1, "a", 9), (2, "b", 9), (3, "c", 9)], False, "extra columns"),
        ([("a",), ("b",), ("c",)], False, "missing columns"),
        ([("x",), ("y",), ("z",)], False, "other columns"),
        ([(3, "c"), (2, "b"), (1, "a")], True, "row order"),
        ([(1, "a"), (1, "a"), (2, "b"), (3, "c")], False, "duplicates"),
        ([], False, "empty"),
        ([(1, "a")], False, "too few rows"),
        ([(1, "a"), (2, "b"), (3, "c"), (4, "d")], False, "too many rows"),
        ([(1, "a"), (2, "b"), (4, "d")], False, "same row count, other values"),
        ([(1, "a"), (5, "e")], False, "other rows"),
    ],
)
def test_result_classes(pred: list[tuple[object, ...]], ordered: bool, cls: str) -> None:
    assert ef.result_class(GOLD, pred, ordered) == cls


def test_structure_compares_the_tables_read() -> None:
    gold = "SELECT a.x FROM a JOIN b ON a.id = b.id"
    assert ef.structure_class(gold, "SELECT x FROM a") == "fewer tables (a join missing)"
    assert ef.structure_class(gold, "SELECT x FROM b JOIN a ON 1 JOIN c ON 1") == "more tables"
    assert ef.structure_class(gold, "SELECT x FROM A JOIN B ON 1") == "same tables"
    assert ef.structure_class(gold, "SELECT x FROM c") == "other tables"
    assert ef.structure_class(gold, "WITH b AS (SELECT 1) SELECT x FROM a, b") == (
        "fewer tables (a join missing)"
    )


def test_labels_must_match_the_wrong_statements() -> None:
    rows = [{"qid": 1, "result": "empty", "structure": "same tables"}]
    out = ef.label_table(rows, {1: ("logic", "why")})
    assert "| logic | 1 | q1 |" in out
    with pytest.raises(SystemExit, match="unlabelled \\[1\\]"):
        ef.label_table(rows, {})
    with pytest.raises(SystemExit, match="not wrong \\[2\\]"):
        ef.label_table(rows, {1: ("logic", ""), 2: ("logic", "")})


def test_committed_labels_parse() -> None:
    labels = ef.read_labels(
        REPO / "bench/results/ex-failures-qwen2.5-coder-1.5b-spider150-labels.tsv"
    )
    assert len(labels) == 52 and all(label and why for label, why in labels.values())


def test_pool_report_failure_reasons() -> None:
    recs = [
        {"qid": 1, "arm": "a", "executes": False, "truncated": True, "refused": True},
        {
            "qid": 2,
            "arm": "a",
            "executes": False,
            "refused": True,
            "violation_kinds": ["unknown_column", "unknown_column"],
        },
        {"qid": 3, "arm": "a", "executes": False, "exec_error": "OperationalError: boom"},
        {"qid": 4, "arm": "a", "executes": True},
        {"qid": 5, "arm": "b", "executes": False, "truncated": True},
    ]
    out = pr.failures(recs, "a")
    assert "a: 3 statements did not run" in out
    assert "| truncated at the token budget | 1 | q1 |" in out
    assert "| refused: unknown_column | 1 | q2 |" in out
    assert "| database error: OperationalError | 1 | q3 |" in out
