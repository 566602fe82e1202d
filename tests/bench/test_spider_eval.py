"""The Spider-dev harness (bench/spider_eval.py): EX comparator, sampling, JSONL resume, report.

The end-to-end test runs the real harness (SmolLM2-135M through llama.cpp, the real Asker on
real Spider SQLite files) on two questions, then checks that a second run writes nothing.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    if str(REPO / "bench") not in sys.path:  # its spider_common / spider_report
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("spider_eval", REPO / "bench/spider_eval.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["spider_eval"] = mod
    spec.loader.exec_module(mod)
    return mod


se = _load()


@pytest.fixture(scope="module")
def spider(shared_data: Path) -> Path:
    d = shared_data / "spider"
    if not (d / "dev.json").is_file():
        pytest.skip(f"Spider data not found at {d}")
    return d


# ------------------------------------------------------------------ EX comparator
def test_multiset_ignores_row_order_but_not_multiplicity() -> None:
    gold = [(1, "a"), (2, "b"), (2, "b")]
    assert se.results_match(gold, [(2, "b"), (1, "a"), (2, "b")], ordered=False)
    assert not se.results_match(gold, [(2, "b"), (1, "a")], ordered=False)
    assert not se.results_match(gold, [(1, "a"), (1, "a"), (2, "b")], ordered=False)
    assert not se.results_match(gold, [("a", 1), ("b", 2), ("b", 2)], ordered=False)


def test_order_by_makes_order_matter() -> None:
    gold = [(1,), (2,), (3,)]
    assert se.results_match(gold, [(1,), (2,), (3,)], ordered=True)
    assert not se.results_match(gold, [(3,), (2,), (1,)], ordered=True)
    assert se.results_match(gold, [(3,), (2,), (1,)], ordered=False)
    assert se.gold_is_ordered("SELECT a FROM t ORDER  BY a DESC LIMIT 1")
    assert se.gold_is_ordered("select a from t order by a")
    assert not se.gold_is_ordered("SELECT border_id FROM t")


def test_any_column_order_is_a_column_permutation_not_a_cell_shuffle() -> None:
    gold = [(1, "a"), (2, "b"), (2, "b")]
    swapped = [("b", 2), ("a", 1), ("b", 2)]
    assert not se.results_match(gold, swapped, ordered=False)
    assert se.results_match(gold, swapped, ordered=False, any_column_order=True)
    # each row permuted on its own is not a column permutation
    assert not se.results_match(
        [(1, 2), (3, 4)], [(2, 1), (3, 4)], ordered=False, any_column_order=True
    )
    # ORDER BY still binds the rows; equal columns may go to either place
    assert not se.results_match(
        [(1, "x"), (2, "y")], [("y", 2), ("x", 1)], ordered=True, any_column_order=True
    )
    assert se.results_match(
        [(1, "x"), (2, "y")], [("x", 1), ("y", 2)], ordered=True, any_column_order=True
    )
    assert se.results_match([(1, 1), (2, 2)], [(1, 1), (2, 2)], ordered=True, any_column_order=True)
    assert not se.results_match([(1, 2)], [(1, 2, 3)], ordered=False, any_column_order=True)
    assert se.results_match([], [], ordered=False, any_column_order=True)


def test_rescore_adds_the_any_order_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "x.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE shop (location TEXT)")
    con.executemany("INSERT INTO shop VALUES (?)", [("a",), ("a",), ("b",)])
    con.commit()
    con.close()
    base = {"db_id": "x", "gold": "SELECT count(*), location FROM shop GROUP BY location"}
    recs = [
        dict(
            base,
            qid=1,
            sql="SELECT location, count(*) FROM shop GROUP BY location",
            ex=False,
            executes=True,
        ),
        dict(base, qid=2, sql="SELECT location FROM shop", ex=False, executes=True),
        dict(base, qid=3, sql=None, ex=False, executes=False),
        dict(base, qid=4, sql="SELECT 1", ex=False, executes=True, ex_any_order=True),
    ]
    monkeypatch.setattr(se.Question, "db_path", lambda self, spider_dir: db)
    assert se.rescore(recs, tmp_path) == 3
    assert [r["ex_any_order"] for r in recs] == [True, False, False, True]


def test_float_tolerance() -> None:
    assert se.results_match([(0.3,)], [(0.1 + 0.2,)], ordered=False)
    assert se.results_match([(33.333333333333336,)], [(100 / 3,)], ordered=True)
    assert se.results_match([(3,)], [(3.0,)], ordered=False)
    assert not se.results_match([(0.3,)], [(0.31,)], ordered=False)
    assert not se.results_match([(1.5,)], [(None,)], ordered=False)


def test_extract_sql_and_wilson() -> None:
    assert se.extract_sql("```sql\nSELECT 1;\n```") == "SELECT 1;"
    assert se.extract_sql("SELECT a FROM t; SELECT 2") == "SELECT a FROM t;"
    assert se.extract_sql("SELECT a FROM t") == "SELECT a FROM t"
    lo, hi = se.wilson(15, 30)
    assert lo == pytest.approx(0.3315, abs=1e-4) and hi == pytest.approx(0.6685, abs=1e-4)
    assert se.wilson(0, 0) == (0.0, 1.0)
    assert se.wilson(30, 30)[1] == pytest.approx(1.0)


def test_sample_is_a_seeded_prefix_without_wta_1(spider: Path) -> None:
    qs = se.load_questions(spider)
    assert len(qs) == 972 and all(q.db_id != "wta_1" for q in qs)
    small = se.select_questions(qs, n=5, seed=2026, ids=None)
    big = se.select_questions(qs, n=50, seed=2026, ids=None)
    assert [q.qid for q in big[:5]] == [q.qid for q in small]
    assert [q.qid for q in se.select_questions(qs, n=None, seed=1, ids=[7, 3])] == [7, 3]
    with pytest.raises(SystemExit):
        se.select_questions(qs, n=None, seed=1, ids=[10**6])


def test_gold_executes_and_matches_itself(spider: Path) -> None:
    q = next(q for q in se.load_questions(spider) if q.db_id == "concert_singer")
    rows = se.run_sqlite(q.db_path(spider), q.gold)
    assert se.results_match(rows, list(rows), ordered=se.gold_is_ordered(q.gold))
    with pytest.raises(se.ExecError):
        se.run_sqlite(q.db_path(spider), "SELECT no_such_column FROM singer")
    with pytest.raises(se.ExecError):  # read-only handle
        se.run_sqlite(q.db_path(spider), "DELETE FROM singer")


# ------------------------------------------------------------------ report on hand-made records
def _rec(qid: int, arm: str, ex: bool, executes: bool, **kw: object) -> dict[str, object]:
    base = {
        "qid": qid,
        "arm": arm,
        "model": "m",
        "ex": ex,
        "executes": executes,
        "tokens": 10,
        "seconds": 1.0,
        "truncated": False,
        "refused": False,
        "error": None,
    }
    base.update(kw)
    return base


def test_report_pairs_questions_and_counts() -> None:
    recs = [
        _rec(1, "unconstrained", False, False),
        _rec(1, "constrained", False, False, refused=True),
        _rec(1, "repair", True, True),
        _rec(2, "unconstrained", True, True),
        _rec(2, "constrained", True, True),
        _rec(2, "repair", True, True, truncated=True),
        _rec(3, "unconstrained", True, True),  # unpaired: left out
        _rec(4, "unconstrained", True, True, model="other"),
    ]
    text = se.report(recs, "m")
    assert "Paired over 2 questions" in text
    assert (
        "| constrained | 50.0% [9.5, 90.5] (1/2) | 50.0% [9.5, 90.5] (1/2) "
        "| n/a (`--rescore`) | 10.0 | 1.0 | 0 | 1 | 0 |" in text
    )
    assert (
        "| repair | 100.0% [34.2, 100.0] (2/2) | 100.0% [34.2, 100.0] (2/2) "
        "| n/a (`--rescore`) | 10.0 | 1.0 | 1 | 0 | 0 |" in text
    )
    for r in recs:
        r["ex_any_order"] = r["ex"]
    assert "| repair | 100.0% [34.2, 100.0] (2/2) | 100.0% [34.2, 100.0] (2/2) | 100.0%" in (
        se.report(recs, "m")
    )
    assert "| constrained vs repair | 1 | 0 | 1 | 0 |" in text


def test_report_restricts_to_arms_and_gives_paired_differences() -> None:
    recs = [_rec(q, "unconstrained", q < 3, q < 3) for q in range(10)]
    recs += [_rec(q, "constrained", q < 6, True) for q in range(10)]
    recs += [_rec(q, "scope", True, True) for q in range(4)]  # a partial run
    full = se.report(recs, "m")
    assert "Paired over 4 questions" in full and "scope 4" in full
    two = se.report(recs, "m", arms=["unconstrained", "constrained"])
    assert "Paired over 10 questions" in two and "| scope |" not in two
    # 3 both right, 0 only unconstrained, 3 only constrained: +30 points, McNemar p = 2/8
    assert "| unconstrained vs constrained | 3 | 0 | 3 | 4 | +30.0 [+1.6, +58.4] | 0.250 |" in two


def test_outcome_classes_from_kinds_then_messages() -> None:
    def o(**kw: object) -> str:
        return str(se.outcome(_rec(1, "constrained", False, False, **kw)))

    assert se.outcome(_rec(1, "constrained", True, True)) == "EX"
    assert se.outcome(_rec(1, "constrained", False, True)) == "wrong result"
    assert o(exec_error="OperationalError: no such column: T2.name") == "exec: no such column"
    assert o(exec_error="OperationalError: near ...") == "exec: other error"
    kinds = ["ambiguous_column", "unknown_column"]
    assert o(refused=True, violation_kinds=kinds) == "refused: unknown column"
    assert o(refused=True, violation_kinds=["unknown_function"]) == "refused: unknown function"
    assert o(refused=True, violation_kinds=["table_not_allowed"]) == "refused: other"
    # older records carry only messages (both checker wordings)
    msg = "`T2.name`: table `singer` (alias T2) has no column `name`"
    assert o(refused=True, violations=[msg]) == "refused: unknown column"
    assert o(refused=True, violations=["Column x does not exist in table t"]) == (
        "refused: unknown column"
    )
    assert o(refused=True, error="`name` is ambiguous: T1, T2 both ...") == (
        "refused: ambiguous column"
    )
    assert o(error="ModelError: boom") == "engine error"
    assert set(se.OUTCOMES) >= {o(refused=True, violations=["?"])}


def test_column_place_reads_proposition_11() -> None:
    sql = "SELECT T2.name FROM singer AS T1 WHERE T1.x IN (SELECT y FROM t) ORDER BY z"
    assert se.column_place(sql, sql.index("T2.name")) == "select-list"
    assert se.column_place(sql, sql.index("T1.x")) == "after-from"
    assert se.column_place(sql, sql.index("y FROM")) == "select-list"  # the subquery's list
    assert se.column_place(sql, sql.index("z")) == "after-from"


def test_refusal_places_rechecks_the_refused_sql() -> None:
    recs = [
        _rec(0, "constrained", False, False, refused=True, db_id="chinook",
             generated_sql="SELECT Title FROM Artist WHERE ArtistId = 1"),
        _rec(1, "constrained", False, False, refused=True, db_id="chinook",
             generated_sql="SELECT Name FROM Artist WHERE Title = 'x'"),
        _rec(2, "constrained", True, True, db_id="chinook", generated_sql="SELECT 1"),
    ]  # fmt: skip
    assert se.refusal_places(recs, "constrained") == {
        "only select-list": 1,
        "only after-from": 1,
    }


def test_paired_difference_matches_mcnemar_exact() -> None:
    d, lo, hi, p = se.paired_difference(3, 1, 72)
    assert d == pytest.approx(-2 / 72) and lo < d < hi
    assert p == pytest.approx(0.625)  # 2 * (C(4,0) + C(4,1)) / 2**4
    assert se.paired_difference(0, 0, 10) == (0.0, 0.0, 0.0, 1.0)
    assert se.paired_difference(0, 10, 10)[3] == pytest.approx(2 / 1024)


def test_arm_askers_have_the_scopes_the_arm_asks_for() -> None:
    """``constrained`` is scope-free and ``scope`` scoped, whatever the Asker's default."""
    from grid_sql.data import chinook_path

    on = se.make_asker(chinook_path(), None, 64, scopes=True)  # type: ignore[arg-type]
    off = se.make_asker(chinook_path(), None, 64, scopes=False)  # type: ignore[arg-type]
    assert on.grammar.scopes is not None and off.grammar.scopes is None
    assert on.grammar.fingerprint != off.grammar.fingerprint
    assert {"track", "album", "invoiceline"} <= {t.lower() for t in on.grammar.scopes.columns}
    # the same messages (prompt) for both arms: only the mask differs
    assert on.messages("How many tracks?") == off.messages("How many tracks?")


# ------------------------------------------------------------------ Chinook question set
def test_chinook_questions_run_on_the_packaged_database() -> None:
    qs = se.load_chinook_questions()
    assert 40 <= len(qs) <= 50
    assert len({q.qid for q in qs}) == len(qs)
    assert len({q.question for q in qs}) == len(qs)
    for q in qs:
        assert q.db_id == "chinook" and q.db is not None and q.db.is_file()
        rows = se.run_sqlite(q.db_path(Path("/nonexistent")), q.gold)
        assert rows, f"gold of q{q.qid} returns no rows"
        assert se.results_match(rows, list(rows), ordered=se.gold_is_ordered(q.gold))


def test_chinook_ordered_golds_have_no_ties() -> None:
    """EX compares an ORDER BY gold as a list: a tie in its sort key among the rows kept (or
    at a LIMIT k cut) would make EX depend on the engine's tie order. Adjacent sort keys of
    the first k+1 rows (all rows without LIMIT) must differ."""
    import sqlglot

    checked = 0
    for q in se.load_chinook_questions():
        tree = sqlglot.parse_one(q.gold, read="sqlite")
        order = tree.args.get("order")
        if order is None:
            continue
        limit = tree.args.get("limit")
        probe = tree.copy().select(*(o.this.copy() for o in order.expressions), append=False)
        if limit is not None:
            probe = probe.limit(int(limit.expression.name) + 1)
        rows = se.run_sqlite(q.db_path(Path("/nonexistent")), probe.sql(dialect="sqlite"))
        ties = [i for i in range(1, len(rows)) if rows[i] == rows[i - 1]]
        assert not ties, f"q{q.qid}: sort-key ties at rows {ties}: {q.gold}"
        checked += 1
    assert checked >= 10


def test_jsonl_tolerates_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    se.append_jsonl(out, [_rec(1, "repair", True, True)])
    with out.open("a") as f:
        f.write('{"qid": 2, "arm": "rep')  # a run killed mid-write
    recs = se.read_jsonl(out)
    assert len(recs) == 1
    assert se.done_keys(recs, "m") == {(1, "repair")}


# ------------------------------------------------------------------ end to end, real model
@pytest.mark.slow  # 156 s wall under load ~12 (five arms, two role grammars)
def test_harness_runs_resumes_and_reports(spider: Path, tmp_path: Path) -> None:
    from grid_sql.mask.vocab import VocabularyIncompleteWarning

    # two questions on one small database: one role grammar and guide to compile
    qs = se.select_questions(se.load_questions(spider), n=None, seed=0, ids=[0, 1])
    out = tmp_path / "spider-smollm2.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VocabularyIncompleteWarning)
        # First only the constrained arms, then the rest: the second call must add only the
        # missing unconstrained records, and a third call nothing.
        n1 = se.evaluate(
            qs,
            model="smollm2-135m",
            out=out,
            max_tokens=32,
            arms=["constrained", "repair"],
            spider_dir=spider,
        )
        assert n1 == 4
        n2 = se.evaluate(qs, model="smollm2-135m", out=out, max_tokens=32, spider_dir=spider)
        assert n2 == 2
        assert se.evaluate(qs, model="smollm2-135m", out=out, max_tokens=32, spider_dir=spider) == 0
        # the scope arms on one question: a scoped guide, records of their own
        n4 = se.evaluate(
            qs[:1],
            model="smollm2-135m",
            out=out,
            max_tokens=32,
            arms=["scope", "scope+repair"],
            spider_dir=spider,
        )
        assert n4 == 2
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["qid"], r["arm"]) for r in recs) == sorted(
        [(q.qid, a) for q in qs for a in se.DEFAULT_ARMS]
        + [(qs[0].qid, "scope"), (qs[0].qid, "scope+repair")]
    )
    for r in recs:
        assert isinstance(r["executes"], bool) and isinstance(r["ex"], bool)
        assert r["ex"] <= r["executes"]
        assert 0 <= r["tokens"] <= 2 * 32 and r["seconds"] > 0
        if r["arm"] == "constrained":
            rep = next(x for x in recs if x["qid"] == r["qid"] and x["arm"] == "repair")
            # the repair arm's first round is the repair-disabled generation
            assert rep["tokens"] >= r["tokens"]
            if not r["refused"] and not r["error"]:
                assert rep["sql"] == r["sql"] and rep["tokens"] == r["tokens"]
    text = se.report(recs, "smollm2-135m", se.DEFAULT_ARMS)
    assert "Paired over 2 questions" in text
    assert "Paired over 1 questions" in se.report(recs, "smollm2-135m")
    for arm in se.DEFAULT_ARMS:
        assert f"| {arm} |" in text
    assert all(r["commit"] and r["commit"] != "unknown" for r in recs)
    assert se.main(["--report", "--model", "smollm2-135m", "--out", str(out)]) == 0
