"""The shared result object: JSON-ready, a DataFrame with provenance, safe HTML."""

from __future__ import annotations

import datetime as dt
import decimal
import json

from grid_sql.ask.result import AskResult, GeneratedSQL, Repair


def _result(**kw):
    base = dict(
        question="q",
        sql="SELECT a, b FROM t WHERE x = '<script>'",
        columns=["a", "b"],
        rows=[(decimal.Decimal("1.10"), dt.date(2024, 1, 2)), (None, b"\x01")],
        truncated=True,
        rowcount=2,
        stop_reason="eos",
        audit_id="ab" * 32,
        repairs=[Repair("SELECT c FROM t", ["column c is not readable"], 0)],
        timings={"generation": 0.5, "mask": 0.01, "execution": 0.002, "total": 0.6},
    )
    base.update(kw)
    return AskResult(**base)


def test_to_dict_is_json_ready():
    d = _result().to_dict()
    back = json.loads(json.dumps(d))
    assert back["rows"] == [["1.10", "2024-01-02"], [None, "01"]]
    assert back["error"] is None and back["audit_id"] == "ab" * 32
    assert back["repairs"][0]["violations"] == ["column c is not readable"]
    assert {"sql", "columns", "rows", "audit_id", "error"} <= set(back)


def test_to_dataframe_carries_sql_and_audit_id():
    df = _result().to_dataframe()
    assert list(df.columns) == ["a", "b"] and len(df) == 2
    assert df.attrs["sql"].startswith("SELECT a, b") and df.attrs["audit_id"] == "ab" * 32
    assert df.attrs["truncated"] is True


def test_html_escapes_sql_and_values():
    html = _result(rows=[("<b>x</b>", 1)])._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>SELECT</b>" in html  # keywords highlighted
    assert "audit abab" in html and "truncated" in html


def test_generated_sql_to_dict():
    g = GeneratedSQL("q", "SELECT 1", "eos", audit_id="x", audit_ids=["w", "x"])
    assert json.loads(json.dumps(g.to_dict()))["audit_ids"] == ["w", "x"]
