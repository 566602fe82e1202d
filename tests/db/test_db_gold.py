"""Differential check of the post-parse checker against PostgreSQL on real gold SQL.

Whatever the server executes as a superuser, the checker must accept under the superuser's
policy (no false positives in the PostgreSQL dialect): defog sql-eval gold queries on the
``defog_*`` databases and Spider dev gold queries on the ``spider_*`` dumps (those that run on
PostgreSQL at all; the rest are SQLite-only SQL).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from grid_sql.policy import Checker, read_policy
from grid_sql.schema import introspect

pytestmark = pytest.mark.db

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFOG = DATA / "defog_sql_eval" / "questions"
SPIDER = DATA / "spider"


def _defog_gold() -> list[tuple[str, str]]:
    """(database, first accepted query with every {a, b} choice filled with all columns)."""
    out = []
    for name in ("questions_gen", "instruct_basic", "instruct_advanced"):
        with (DEFOG / f"{name}_postgres.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                out.append((row["db_name"], _fill_braces(row["query"]).split(";")[0]))
    return out


def _fill_braces(query: str) -> str:
    """sql-eval's ``{a, b}``: any non-empty subset (take all); ``{}`` repeats the last set."""
    last = ""

    def fill(m: re.Match[str]) -> str:
        nonlocal last
        if m.group(1).strip():
            last = m.group(1)
        return last

    return re.sub(r"\{([^{}]*)\}", fill, query)


def _spider_gold() -> list[tuple[str, str]]:
    dev = json.loads((SPIDER / "dev.json").read_text())
    present = {p.name for p in (SPIDER / "database").iterdir()}
    return [(e["db_id"].lower(), e["query"]) for e in dev if e["db_id"] in present]


def _differential(
    admin: Engine, prefix: str, gold: list[tuple[str, str]]
) -> tuple[int, list[object]]:
    checkers: dict[str, tuple[Engine, Checker]] = {}
    executed = 0
    false_positives: list[object] = []
    for db, sql in gold:
        if db not in checkers:
            engine = sa.create_engine(admin.url.set(database=f"{prefix}{db}"))
            checkers[db] = (engine, Checker(introspect(engine), read_policy(engine)))
        engine, checker = checkers[db]
        with engine.connect() as conn:
            tx = conn.begin()
            try:
                conn.exec_driver_sql("SET LOCAL statement_timeout = '5s'")
                conn.exec_driver_sql(sql.replace("%", "%%"))
            except sa.exc.DBAPIError:
                continue  # not PostgreSQL SQL (Spider's SQLite dialect): no verdict to compare
            finally:
                tx.rollback()
        executed += 1
        found = checker.check(sql)
        if found:
            false_positives.append((db, sql, [v.message for v in found]))
    for engine, _ in checkers.values():
        engine.dispose()
    return executed, false_positives


@pytest.mark.skipif(not DEFOG.exists(), reason="shared defog data not present")
def test_defog_gold_no_false_positives(pg_admin: Engine) -> None:
    gold = _defog_gold()
    assert len(gold) == 314
    executed, fps = _differential(pg_admin, "defog_", gold)
    assert executed == 314
    assert fps == []


@pytest.mark.skipif(not SPIDER.exists(), reason="shared Spider data not present")
def test_spider_gold_on_postgres_no_false_positives(pg_admin: Engine) -> None:
    executed, fps = _differential(pg_admin, "spider_", _spider_gold())
    assert executed > 600  # README: 662 of the 972 run unmodified on PostgreSQL
    assert fps == []
