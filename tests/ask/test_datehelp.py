"""The date and cast line of the prompt (issue #25 §4): when it is shown, what it names."""

from __future__ import annotations

import pytest

from grid_sql.ask.datehelp import date_line, is_date_type, needs_dates
from grid_sql.ask.prompt import build_messages
from grid_sql.dialect import Dialect
from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo


def _snapshot(dialect: str, default: str, shipped_type: str = "TIMESTAMP") -> SchemaSnapshot:
    orders = TableInfo(
        "orders",
        columns=(
            ColumnInfo("id", "BIGINT"),
            ColumnInfo("customer", "TEXT"),
            ColumnInfo("shipped_at", shipped_type),
            ColumnInfo("amount", "NUMERIC"),
        ),
    )
    return SchemaSnapshot(dialect, default, (SchemaInfo(default, (orders,)),))


def _policy(snap: SchemaSnapshot, rules: dict | None = None):
    base = sqlite_baseline(snap)
    base = type(base)(
        dialect=snap.dialect,
        role="reader",
        default_schema=base.default_schema,
        tables=base.tables,
        statement_verbs=base.statement_verbs,
    )
    return narrow(base, AppPolicy.from_mapping({"verbs": ["select"], **(rules or {})}), snap)


@pytest.fixture
def pg():
    snap = _snapshot("postgresql", "public")
    return snap, _policy(snap)


@pytest.mark.parametrize(
    "question",
    [
        "How many orders were placed each month?",
        "Total amount of orders in 2021",
        "Which customers ordered in the last 30 days?",
        "What is the earliest order?",
        "When was order 7 shipped?",
    ],
)
def test_date_questions_get_the_line(pg, question):
    snap, pol = pg
    assert needs_dates(question, snap, pol)
    line = date_line(question, snap, pol)
    assert line is not None and line.startswith("PostgreSQL dates and casts:")
    assert "DATE_TRUNC('month', col)" in line and "x::date" in line


def test_a_date_typed_column_the_question_names(pg):
    snap, pol = pg
    # no date word, but "shipped" names the timestamp column shipped_at
    assert needs_dates("Which orders are shipped?", snap, pol)
    assert not needs_dates("Which customer spent the most?", snap, pol)
    assert date_line("Which customer spent the most?", snap, pol) is None


def test_no_line_where_no_column_holds_dates():
    snap = _snapshot("postgresql", "public", shipped_type="BIGINT")  # epoch seconds
    pol = _policy(snap)
    assert not needs_dates("How many orders were shipped each month?", snap, pol)
    assert date_line("Orders in 2021?", snap, pol) is None


def test_the_prompt_carries_it_only_for_date_questions(pg):
    snap, pol = pg
    q = "How many orders per year?"
    with_line = build_messages(q, snap, pol, date_help=True)[0]["content"]
    without = build_messages(q, snap, pol, date_help=False)[0]["content"]
    assert "PostgreSQL dates and casts:" in with_line
    assert "dates and casts" not in without
    assert with_line.replace(" " + date_line(q, snap, pol), "") == without
    other = "Which customer spent the most?"
    assert build_messages(other, snap, pol, date_help=True) == build_messages(
        other, snap, pol, date_help=False
    )


def test_only_functions_the_role_may_call(pg):
    snap, _ = pg
    pol = _policy(snap, {"banned_functions": ["date_trunc", "to_char"]})
    line = date_line("orders per month", snap, pol)
    assert line is not None
    assert "DATE_TRUNC" not in line and "TO_CHAR" not in line
    assert "EXTRACT(YEAR FROM col)" in line


@pytest.mark.parametrize("name", ["postgresql", "mysql", "sqlite"])
def test_every_idiom_is_on_the_dialect_allow_list(name):
    d = Dialect.get(name)
    assert d.date_idioms
    for names, text in d.date_idioms:
        assert names <= d.function_names(), (name, text)
    assert d.date_prompt_line(frozenset()) is not None  # the cast idioms need no function
    full = d.date_prompt_line(d.function_names())
    assert full is not None and all(text in full for _, text in d.date_idioms)


def test_date_types():
    for t in ("DATE", "timestamp with time zone", "DATETIME", "interval", "TIME"):
        assert is_date_type(t)
    for t in ("TEXT", "BIGINT", "NUMERIC(10,2)", "varchar"):
        assert not is_date_type(t)
