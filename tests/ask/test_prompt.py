"""The prompt shows exactly the role's view of the schema, ranks large schemas, quotes repairs."""

from __future__ import annotations

import pytest

from grid_sql.ask.prompt import (
    Example,
    build_messages,
    rank_tables,
    repair_messages,
    schema_text,
    visible_tables,
    words,
)
from grid_sql.data import chinook_path
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.schema import introspect


@pytest.fixture(scope="module")
def chinook():
    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    engine.dispose()
    return snap


def _policy(snap, rules):
    return narrow(sqlite_baseline(snap), AppPolicy.from_mapping(rules), snap)


def test_only_what_the_role_may_see(chinook):
    pol = _policy(
        chinook,
        {
            "verbs": ["select"],
            "tables": {"deny": ["Employee"]},
            "columns": {"deny": {"Customer": ["Email", "Phone"]}},
        },
    )
    names = [t.name for t in visible_tables(chinook, pol)]
    assert "Employee" not in names and "Customer" in names
    text = schema_text("anything", chinook, pol)
    assert "Employee" not in text  # neither the table nor the FK Customer.SupportRepId -> it
    assert "CREATE TABLE Customer (CustomerId INTEGER PRIMARY KEY, FirstName NVARCHAR(40)," in text
    customer = text[text.index("CREATE TABLE Customer") :].split(");")[0]
    assert "Email" not in customer and "Phone" not in customer
    assert "CustomerId INTEGER REFERENCES Customer(CustomerId)" in text  # in Invoice
    system = build_messages("q", chinook, pol)[0]["content"]
    assert "SQLite" in system and "only SELECT" in system
    assert "single quotes ('Paris')" in system  # "x" is an identifier in every role grammar


def test_no_sample_rows_unless_asked(chinook):
    pol = _policy(chinook, {"verbs": ["select"]})
    plain = build_messages("top customers", chinook, pol)
    assert "sample rows" not in plain[0]["content"]
    assert "Luís" not in plain[0]["content"]  # a customer's first name
    withrows = build_messages("top customers", chinook, pol, samples={"Customer": [(1, "Luís")]})
    assert "sample rows of Customer" in withrows[0]["content"]


def test_ranking_and_truncation_keep_every_table_named(chinook):
    pol = _policy(chinook, {"verbs": ["select"]})
    tables = visible_tables(chinook, pol)
    ranked = [t.name for t in rank_tables("tracks on each playlist", tables)]
    assert ranked[:3] == ["PlaylistTrack", "Playlist", "Track"]
    ranked = [t.name for t in rank_tables("top customers by invoice total", tables)]
    assert set(ranked[:2]) == {"Customer", "Invoice"}
    text = schema_text("top customers by invoice total", chinook, pol, max_tables=2)
    assert text.count("CREATE TABLE") == 2
    listed = text.split("Other tables you may also query (columns not shown):")[1]
    for t in tables:
        if t.name not in ("Customer", "Invoice"):
            assert t.name in listed


def test_words_split_identifiers():
    assert {"invoice", "line"} <= words("InvoiceLine")
    assert {"customer", "id"} <= words("customer_id")
    assert "customer" in words("Which customers?")


def test_few_shot_and_repair_messages(chinook):
    pol = _policy(chinook, {"verbs": ["select"]})
    ex = [Example("How many albums?", "SELECT count(*) FROM Album")]
    msgs = build_messages("How many artists?", chinook, pol, examples=ex)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == "SELECT count(*) FROM Album"
    assert msgs[-1]["content"].endswith("How many artists?")
    fixed = repair_messages(msgs, "SELECT Phone FROM Customer", ["column Phone is not readable"])
    assert fixed[-2] == {"role": "assistant", "content": "SELECT Phone FROM Customer"}
    assert "1. column Phone is not readable" in fixed[-1]["content"]
    assert msgs == fixed[: len(msgs)]


def test_alias_hints_name_reused_output_aliases(chinook):
    from grid_sql.ask.prompt import alias_hints

    bad = (
        "SELECT c.FirstName, SUM(i.Total) AS total_revenue FROM Customer c JOIN Invoice i "
        "ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId HAVING total_revenue > 40"
    )
    (hint,) = alias_hints(bad, chinook)
    # a bare ORDER BY item may name the alias: the grammar admits it there
    assert alias_hints(bad.split(" HAVING")[0] + " ORDER BY total_revenue DESC", chinook) == []
    assert "total_revenue" in hint and "repeat its expression" in hint
    assert alias_hints("SELECT COUNT(*) AS n FROM Album", chinook) == []
    assert alias_hints("SELECT Name AS Name FROM Artist ORDER BY Name", chinook) == []
