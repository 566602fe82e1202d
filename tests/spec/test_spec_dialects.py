"""The oracle on the real dialect grammars (skipped until `dialects/<name>.lark` exists)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from grid_sql.spec import SpecOracle

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = ROOT / "dialects"
SPIDER_DEV = Path("/work/shared/data/spider/dev.json")
SPIDER_TABLES = Path("/work/shared/data/spider/tables.json")

# a fixed handful of Spider dev gold queries: count(*), ORDER BY/LIMIT, strings, DISTINCT,
# subqueries, BETWEEN, keyword-spelled columns (YEAR, LOCATION), JOIN ... AS, NOT IN,
# INTERSECT/EXCEPT, LIKE, count(DISTINCT ...), lower-case SQL
SPIDER_IDX = (0, 2, 4, 8, 12, 14, 20, 24, 25, 28, 30, 31, 39, 55)


@cache
def dialect_oracle(name: str) -> SpecOracle:
    path = DIALECTS / f"{name}.lark"
    if not path.is_file():
        pytest.skip(f"{path} not written yet")
    return SpecOracle.from_lark_file(path)


def spider_examples():
    if not SPIDER_DEV.is_file():
        return []
    dev = json.loads(SPIDER_DEV.read_text())
    return [dev[i] for i in SPIDER_IDX]


def categories(name: str) -> list[str]:
    text = (
        (DIALECTS / f"{name}.lark").read_text() + (DIALECTS / "common.lark").read_text()
        if (DIALECTS / "common.lark").is_file()
        else (DIALECTS / f"{name}.lark").read_text()
    )
    return [
        c
        for m in re.finditer(r"^\s*//!\s*category\s+(.*)$", text, re.M)
        for c in m.group(1).split()
    ]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
@pytest.mark.parametrize("ex", spider_examples(), ids=lambda ex: ex["query"][:40])
def test_spider_gold_prefixes_viable(dialect, ex):
    o = dialect_oracle(dialect)
    q = ex["query"].encode()
    assert o.accepts(q), q
    for k in range(len(q) + 1):
        assert o.is_viable_prefix(q[:k]), (q[:k], q)


@pytest.mark.parametrize("ex", spider_examples(), ids=lambda ex: ex["query"][:40])
def test_sqlite_spider_gold_with_schema_lexicon(ex):
    base = dialect_oracle("sqlite")
    cats = categories("sqlite")
    if "TABLE_NAME" not in cats or "COLUMN_NAME" not in cats:
        pytest.skip("sqlite dialect declares no TABLE_NAME/COLUMN_NAME categories")
    db = next(d for d in json.loads(SPIDER_TABLES.read_text()) if d["db_id"] == ex["db_id"])
    tables = {t.lower().encode() for t in db["table_names_original"]}
    columns = {c.lower().encode() for _, c in db["column_names_original"] if c != "*"}
    lex = {"TABLE_NAME": (frozenset(tables), True), "COLUMN_NAME": (frozenset(columns), True)}
    o = base.with_lexicon(lex)
    q = ex["query"].encode()
    assert o.accepts(q), q
    for k in range(0, len(q) + 1, 5):
        assert o.is_viable_prefix(q[:k]), (q[:k], q)


@pytest.mark.parametrize(
    "sql,viable,accepts",
    [
        (b"SELECT count(*) FROM singer", True, True),
        (b"SELECT count(*) FROM", True, False),
        (b"SELECT * FROM t WHERE", True, False),
        (b"SELECT * FROM t WHERE a = 'x''", True, False),
        (b"SELECT * FROM t WHERE a = 'x'''", True, True),
        (b"SELECT * FROM t -- trailing comment", True, True),
        (b"SELECT * FROM t a b ", False, False),
        # where the keyword can't shift, a reserved word resolves to a name (foundation §2):
        # this is "select the column named from" -- real SQLite rejects it
        (b"SELECT FROM", True, True),
        (b"SELECT FROM FROM", True, False),
        (b"FROM t", False, False),
        (b"DELETE FROM t WHERE a <= 1e5", True, True),
    ],
)
def test_sqlite_hand_cases(sql, viable, accepts):
    o = dialect_oracle("sqlite")
    assert o.is_viable_prefix(sql) == viable
    assert o.accepts(sql) == accepts


def test_sqlite_select_only_projection():
    import dataclasses

    base = dialect_oracle("sqlite")
    verbs = {lhs for lhs, _ in base.g.rules if lhs.endswith("_stmt")} - {"select_stmt"}
    rules = tuple(r for r in base.g.rules if r[0] not in verbs)
    o = SpecOracle(dataclasses.replace(base.g, rules=rules))
    assert o.accepts(b"SELECT count(*) FROM singer")
    for verb in (b"DELETE", b"delete from t", b"INSERT", b"UPDATE t", b"DROP", b"PRAGMA"):
        assert base.is_viable_prefix(verb), verb
        assert not o.is_viable_prefix(verb), verb
    assert o.is_viable_prefix(b"SEL")
    assert not o.is_viable_prefix(b"DEL")


def test_sqlite_reserved_word_as_name_needs_lexicon():
    base = dialect_oracle("sqlite")
    assert base.accepts(b"SELECT FROM")
    lex = {"COLUMN_NAME": (frozenset({b"name", b"age"}), True)}
    o = base.with_lexicon(lex)
    assert not o.accepts(b"SELECT FROM")
    assert o.accepts(b"SELECT name FROM singer")
