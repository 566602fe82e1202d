"""bench/defog.py and its sql-eval correctness rule (bench/sqleval_rule.py).

The rule tests are model-free: hand-made results for each convention, then real defog gold
rows read from the local PostgreSQL (``db``). The harness run itself needs the 1.5B model
and hours of CPU: it is the benchmark (bench/RESULTS-defog.md), not a test.
"""

from __future__ import annotations

import importlib.util
import os
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


rule = _load("sqleval_rule")
R = rule.Result.of


def test_minimal_queries_expand_alternatives_and_column_subsets():
    q = "SELECT {a.x, a.y}, COUNT(*) FROM a GROUP BY {};SELECT b.z FROM b;"
    assert rule.minimal_queries(q) == [
        "SELECT a.x, COUNT(*) FROM a GROUP BY a.x",
        "SELECT a.y, COUNT(*) FROM a GROUP BY a.y",
        "SELECT a.x, a.y, COUNT(*) FROM a GROUP BY a.x, a.y",
        "SELECT b.z FROM b",
    ]


def test_equal_sets_rows_any_order_duplicates_ignored():
    gold = R(["n", "c"], [("a", 1), ("b", 2)])
    assert rule.correct([gold], R(["n", "c"], [("b", 2), ("a", 1), ("a", 1)]), "group_by", "q?")
    assert not rule.correct([gold], R(["n", "c"], [("a", 1)]), "group_by", "q?")
    assert not rule.correct([gold], R(["n", "c"], [("a", 1), ("b", 3)]), "group_by", "q?")


def test_extra_columns_are_allowed_missing_ones_are_not():
    gold = R(["name"], [("a",), ("b",)])
    assert rule.correct([gold], R(["id", "nm"], [(1, "a"), (2, "b")]), "table_join", "q")
    assert not rule.correct([R(["n", "c"], [("a", 1)])], R(["n"], [("a",)]), "ratio", "q")


def test_numbers_decimal_and_tolerance():
    import decimal

    gold = R(["r"], [(decimal.Decimal("0.3333333"),)])
    assert rule.correct([gold], R(["ratio"], [(1 / 3,)]), "ratio", "q")
    assert not rule.correct([gold], R(["ratio"], [(0.34,)]), "ratio", "q")


def test_row_order_counts_only_for_ordering_questions():
    gold = R(["name", "total"], [("b", 9), ("a", 5), ("c", 1)])  # ORDER BY total DESC
    flipped = R(["name", "total"], [("c", 1), ("a", 5), ("b", 9)])  # ascending instead
    assert rule.correct([gold], flipped, "group_by", "Total per name?")
    assert not rule.correct([gold], flipped, "order_by", "Total per name?")
    assert not rule.correct([gold], flipped, "group_by", "Sort names by total")
    assert rule.correct([gold], gold, "order_by", "q")


def test_empty_results_and_duplicate_names():
    assert rule.correct([R(["a"], [])], R(["b"], []), "ratio", "q")  # same shape, no rows
    assert not rule.correct([R(["a"], [])], R(["a", "b"], []), "ratio", "q")
    dup = R(["name", "name"], [("x", "y"), ("z", "w")])
    assert not rule.correct([R(["name"], [("x",), ("z",)])], dup, "table_join", "q")


def test_any_alternative_counts():
    a, b = R(["x"], [(1,)]), R(["x"], [(2,)])
    assert rule.correct([a, b], R(["x"], [(2,)]), "ratio", "q")


@pytest.mark.db
def test_the_rule_on_real_defog_gold_rows():
    """Every question's gold (first alternative, braces filled) is correct against its own
    accepted alternatives; the gold with a row dropped or a column's values changed is not."""
    import re

    if not os.environ.get("GRID_SQL_PG_URL"):
        pytest.skip("GRID_SQL_PG_URL not set (scripts/services.sh)")
    defog = _load("defog")
    questions = defog.load_questions()
    defog.ensure_role(sorted({q.db for q in questions}))
    dropped = changed = 0
    for q in questions:
        golds, failed = defog.gold_results(q)
        assert golds and failed == 0, q.qid
        last = ""

        def fill(m: re.Match[str]) -> str:
            nonlocal last
            last = m.group(1) if m.group(1).strip() else last
            return last

        full = defog.run_sql(q.db, re.sub(r"\{([^{}]*)\}", fill, q.gold.split(";")[0]))
        assert rule.correct(golds, full, q.category, q.question), q.qid
        if len(golds) == 1 and len(set(golds[0].rows)) > 1:
            g = golds[0]
            cut = rule.Result(g.columns, tuple(dict.fromkeys(g.rows))[:-1])
            assert not rule.correct(golds, cut, q.category, q.question), q.qid
            dropped += 1
            bumped = rule.Result(g.columns, tuple(("~", *r[1:]) for r in g.rows))
            if bumped.rows != g.rows and all(len(set(c)) > 1 for c in zip(*g.rows, strict=True)):
                assert not rule.correct(golds, bumped, q.category, q.question), q.qid
                changed += 1
    assert dropped > 50 and changed > 10


def test_stratified_order_covers_every_category_first():
    defog = _load("defog")
    qs = defog.load_questions()
    first = defog.stratified(qs, 2)
    assert len(first) == 12
    assert [q.category for q in first[:6]] == list(defog.CATEGORIES)
    full = defog.stratified(qs, None)
    assert sorted(q.qid for q in full) == list(range(len(qs)))
    assert [q.qid for q in full[:12]] == [q.qid for q in first]


def test_a_run_on_a_fresh_clone_goes_on_from_the_committed_records(tmp_path: Path) -> None:
    import gzip
    import json

    defog = _load("defog")
    path = tmp_path / "defog-m.jsonl"
    old = [{"qid": 0, "arm": "constrained"}, {"qid": 0, "arm": "unconstrained"}]
    packed = "".join(json.dumps(r) + "\n" for r in old).encode()
    path.with_suffix(".jsonl.gz").write_bytes(gzip.compress(packed))
    assert defog.read_records(path) == old
    defog.open_records(path)
    with path.open("a") as fh:  # what a run appends
        fh.write(json.dumps({"qid": 1, "arm": "constrained"}) + "\n")
    assert [r["qid"] for r in defog.read_records(path)] == [0, 0, 1]
    defog.open_records(path)  # an existing .jsonl is never overwritten
    assert len(defog.read_records(path)) == 3


@pytest.mark.db
def test_the_reader_role_can_only_read():
    if not os.environ.get("GRID_SQL_PG_URL"):
        pytest.skip("GRID_SQL_PG_URL not set (scripts/services.sh)")
    defog = _load("defog")
    defog.ensure_role(["academic", "ewallet"])
    assert defog.run_sql("ewallet", "SELECT count(*) AS n FROM consumer_div.users").rows
    for sql in (
        "CREATE TEMP TABLE t (x int)",
        "CREATE TABLE t (x int)",
        "DELETE FROM author",
        "SELECT pg_read_file('/etc/passwd')",
    ):
        with pytest.raises(defog.ExecError):
            defog.run_sql("academic", sql)


@pytest.mark.db
def test_the_big_catalog_holds_every_database_in_its_schema_and_the_distractors():
    """bench/defog_big.py on a small layout (2 databases, 60 distractors, its own database
    name): each database's rows in its schema (ewallet keeps consumer_div), the distractors
    spread over the schemas, the reader may read and nothing more, and a second call with
    the same layout keeps the database instead of rebuilding it."""
    if not os.environ.get("GRID_SQL_PG_URL"):
        pytest.skip("GRID_SQL_PG_URL not set (scripts/services.sh)")
    import psycopg

    defog = _load("defog")
    big = _load("defog_big")
    dbs = ["academic", "ewallet"]
    defog.ensure_role(dbs)

    def conninfo(d: str) -> str:
        return str(defog._conninfo(defog.admin_url(), d))

    name = "defog_big_test"
    schemas = big.ensure_big(conninfo, defog.DATA, dbs, 60, defog.ROLE, database=name)
    assert schemas == ["academic", "consumer_div"]
    with psycopg.connect(conninfo(name)) as con:
        oid = con.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
        counts = dict(
            con.execute(
                "SELECT table_schema, count(*) FROM information_schema.tables "
                "WHERE table_schema = ANY(%s) GROUP BY 1",
                ([*schemas, "warehouse"],),
            ).fetchall()
        )
    assert sum(counts.values()) == 15 + 9 + 60 and set(counts) == {*schemas, "warehouse"}
    per_db = defog.run_sql("academic", "SELECT count(*) AS n FROM author").rows
    with psycopg.connect(
        defog._conninfo(defog.admin_url(), name, defog.ROLE, defog.ROLE_PASSWORD), autocommit=True
    ) as con:
        assert tuple(con.execute("SELECT count(*) FROM academic.author").fetchall()) == per_db
        assert con.execute("SELECT count(*) FROM consumer_div.users").fetchone()[0] > 0
        for sql in ("CREATE TABLE academic.t (x int)", "DELETE FROM academic.author"):
            with pytest.raises(psycopg.Error):
                con.execute(sql)
    big.ensure_big(conninfo, defog.DATA, dbs, 60, defog.ROLE, database=name)
    with psycopg.connect(conninfo(name)) as con:  # same layout: kept, not rebuilt
        again = con.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert again == oid


def test_a_partial_pass_reaches_the_led_aliases_and_carries_the_rest_once_complete():
    """``--whole --over B``: the questions keyword-led aliases can change are the ones with
    a repair or autofix round (earlier rounds are not recorded) or an alias without ``AS``
    that begins with a reserved keyword; the report completes the pass from ``B`` once it
    has asked all of them, and leaves it out before."""
    again = _load("defog_again")
    base = {
        0: {"sql": "SELECT a FROM t GROUPBY (a)", "correct": False},
        1: {"sql": "SELECT a FROM t AS groupie", "correct": True},  # after AS: not reached
        2: {"sql": "SELECT a FROM t", "repairs": ["checker"], "correct": False},
        3: {"sql": "SELECT a FROM t JOIN u ON t.a = u.a WHERE a > 1", "correct": True},
        4: {"sql": "SELECT a FROM t orders", "correct": True},  # ORDER is reserved
        5: {"sql": "SELECT a FROM s.t", "error": "...FROM s.t WHERE_x ...", "correct": False},
    }
    assert again.led_alias_qids(base) == [0, 2, 4, 5]
    part = {0: {"correct": True, "over": "bigwhole6"}, 2: {"correct": False, "over": "bigwhole6"}}
    by = {"bigwhole6": dict(base), "bigwhole7": dict(part)}
    again.carry_over(by)
    assert "bigwhole7" not in by  # 4 and 5 not asked yet: no pass to report
    part |= {4: {"correct": True, "over": "bigwhole6"}, 5: {"correct": False, "over": "bigwhole6"}}
    by = {"bigwhole6": dict(base), "bigwhole7": dict(part)}
    again.carry_over(by)
    assert sorted(by["bigwhole7"]) == [0, 1, 2, 3, 4, 5]
    assert by["bigwhole7"][0]["correct"] and by["bigwhole7"][1].get("carried")
    assert not by["bigwhole7"][0].get("carried")


def test_bind_reach_is_where_an_obligation_blocks_the_close():
    """``--reach bind``: bind on close acts only at a prefix where a select-list obligation
    keeps the FROM clause open, so the answers it can change are those with such a prefix
    (or a repair round, or no statement, or one the grammar refuses)."""
    from ..scope.helpers import scoped

    again = _load("defog_again")
    g = scoped("world_1")
    recs = {
        0: {"db": "world_1", "sql": "SELECT T2.Name FROM city AS T1 JOIN country AS T2"},
        1: {"db": "world_1", "sql": "SELECT Name FROM country WHERE Population > 1"},
        2: {"db": "world_1", "sql": "SELECT Name FROM country", "repairs": ["checker"]},
        3: {"db": "world_1", "sql": ""},
        4: {"db": "world_1", "sql": "SELECT FROM country"},
        5: {"db": "world_1", "sql": "SELECT Name FROM country WHERE Code IN (SELECT T.x FROM t)"},
        6: {
            "db": "world_1",
            "sql": "SELECT Name FROM country WHERE Code IN (SELECT Code FROM city)",
        },
    }
    assert again.bind_reach_qids(recs, lambda db: g) == [0, 2, 3, 4, 5]


def test_a_pass_over_a_partial_pass_carries_through_both():
    """A pass lists the answers it reaches (``reach``); over a partial pass it is completed
    once that pass is, from the answers that pass carried in turn; a ``bind`` pass is
    paired with the own-database pass of the pass it is partial over."""
    again = _load("defog_again")
    base = {q: {"sql": "SELECT a FROM t", "correct": False} for q in range(4)}
    seven = {0: {"sql": "SELECT a FROM t GROUPBY (a)", "correct": True, "over": "bigwhole6"}}
    nine = {1: {"correct": True, "over": "bigwhole7", "reach": [1, 2]}}
    by = {"bigwhole6": dict(base), "bigwhole7": dict(seven), "bigwhole9": dict(nine)}
    again.carry_over(by)
    assert "bigwhole9" not in by and sorted(by["bigwhole7"]) == [0, 1, 2, 3]
    nine[2] = {"correct": True, "over": "bigwhole7", "reach": [1, 2]}
    by = {"bigwhole9": dict(nine), "bigwhole7": dict(seven), "bigwhole6": dict(base)}
    again.carry_over(by)
    got = by["bigwhole9"]
    assert sorted(got) == [0, 1, 2, 3] and [got[q]["correct"] for q in range(4)] == [
        True,
        True,
        True,
        False,
    ]
    assert got[0].get("carried") and not got[1].get("carried")
    # a bind pass reaches no one-schema catalog: paired with its base's own-database pass
    by["whole7"] = {}
    assert again._own_pair(by, "bigwhole9") == "whole9"  # the led-alias pass: its own tag
    by["bigwhole9"][1]["rule"] = "bind"
    assert again._own_pair(by, "bigwhole9") == "whole7"
