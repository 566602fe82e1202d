"""No hijacked names (issue #30 §3): a table alias may not spell a table or column name of
the catalog (denied ones included) or a keyword of a supported dialect or T-SQL, on all three
dialects; ordinary aliases and output aliases named like columns are unaffected.

What it prevents, from the report: ``SELECT BirthDate . CustomerId FROM Customer JOIN invoice
AS BirthDate`` (Employee.BirthDate denied: the blocked column came back as an alias) and
``... JOIN invoiceline AS TOP`` (T-SQL's ``TOP 5`` turned into an alias)."""

from __future__ import annotations

import pytest

from grid_sql.grammar.ir import Grammar
from grid_sql.parser import ParserRuntime
from grid_sql.policy import open_sqlite
from grid_sql.schema import introspect
from grid_sql.spec.bridge import to_spec
from grid_sql.spec.oracle import SpecOracle

from .helpers import CHINOOK
from .test_no_dead_ends import _server_grammar, asker_grammar

HIJACKED = {
    "pascal": [
        "SELECT BirthDate.CustomerId FROM Customer JOIN Invoice AS BirthDate ON 1 = 1",
        "SELECT * FROM Invoice JOIN InvoiceLine AS TOP ON 1 = 1",
        "SELECT * FROM Invoice JOIN InvoiceLine AS top ON 1 = 1",
        'SELECT * FROM Invoice JOIN InvoiceLine AS "Top" ON 1 = 1',
        "SELECT * FROM Invoice AS Employee",
        "SELECT * FROM Invoice AS email",
        "SELECT * FROM Invoice i JOIN InvoiceLine Total ON 1 = 1",
        "SELECT * FROM Invoice AS Customer",
        "SELECT * FROM Track AS ISNULL",
    ],
    "snake": [
        "SELECT birth_date.customer_id FROM customer JOIN invoice AS birth_date ON 1 = 1",
        "SELECT * FROM invoice JOIN invoice_line AS top ON 1 = 1",
        "SELECT * FROM invoice AS employee",
        "SELECT * FROM invoice AS email",
        "SELECT * FROM invoice i JOIN invoice_line total ON 1 = 1",
        "SELECT * FROM track AS isnull",
    ],
}
ORDINARY = {
    "pascal": [
        "SELECT * FROM Invoice AS T1 JOIN Customer AS T2 ON T1.CustomerId = T2.CustomerId",
        "SELECT il.Quantity FROM Invoice i JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId",
        "SELECT SUM(Total) AS Total FROM Invoice",
        "SELECT BillingCountry AS Country, COUNT(*) AS Invoices FROM Invoice "
        "GROUP BY BillingCountry ORDER BY Invoices DESC",
        "SELECT * FROM Invoice AS TopX",
        "SELECT * FROM Invoice AS inv",
    ],
    "snake": [
        "SELECT * FROM invoice AS t1 JOIN customer AS t2 ON t1.customer_id = t2.customer_id",
        "SELECT il.quantity FROM invoice i JOIN invoice_line il ON il.invoice_id = i.invoice_id",
        "SELECT SUM(total) AS total FROM invoice",
        "SELECT * FROM invoice AS top_x",
    ],
}


def admits(g: Grammar, sql: str) -> bool:
    rt = ParserRuntime.for_grammar(g)
    cfg = rt.advance(rt.initial, sql.encode())
    return cfg is not None and rt.eos_allowed(cfg)


@pytest.fixture(scope="module")
def sqlite_grammar() -> Grammar:
    return asker_grammar(introspect(open_sqlite(CHINOOK)), "sqlite")


@pytest.mark.parametrize("sql", HIJACKED["pascal"])
def test_sqlite_hijacked_aliases_are_unwritable(sqlite_grammar: Grammar, sql: str) -> None:
    assert not admits(sqlite_grammar, sql)


@pytest.mark.parametrize("sql", ORDINARY["pascal"])
def test_sqlite_ordinary_aliases_stay(sqlite_grammar: Grammar, sql: str) -> None:
    assert admits(sqlite_grammar, sql)


def test_spec_agrees(sqlite_grammar: Grammar) -> None:
    """The executable specification refuses and admits the same statements."""
    spec = SpecOracle(to_spec(sqlite_grammar))
    for sql in HIJACKED["pascal"][:4]:
        assert not spec.accepts(sql.encode()), sql
    for sql in ORDINARY["pascal"][:3]:
        assert spec.accepts(sql.encode()), sql


def test_without_it_the_aliases_were_writable() -> None:
    """The same role grammar with ``hijack_free=False``: the report's statements parse."""
    from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
    from grid_sql.policy.grammar import role_grammar
    from grid_sql.policy.scopes import role_scopes

    from .test_no_dead_ends import POLICY

    snap = introspect(open_sqlite(CHINOOK))
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(POLICY["sqlite"]), snap)
    g = role_grammar(Grammar.dialect("sqlite"), snap, pol).with_scopes(
        role_scopes(snap, bind_select_list=True, hijack_free=False)
    )
    assert admits(g, HIJACKED["pascal"][0]) and admits(g, HIJACKED["pascal"][1])


@pytest.fixture(scope="module")
def pg_grammar() -> Grammar:
    return _server_grammar("GRID_SQL_PG_URL", "postgresql")


@pytest.fixture(scope="module")
def my_grammar() -> Grammar:
    return _server_grammar("GRID_SQL_MYSQL_URL", "mysql")


@pytest.mark.db
def test_postgresql(pg_grammar: Grammar) -> None:
    for sql in HIJACKED["snake"]:
        assert not admits(pg_grammar, sql), sql
    for sql in ORDINARY["snake"]:
        assert admits(pg_grammar, sql), sql


@pytest.mark.db
def test_mariadb(my_grammar: Grammar) -> None:
    for sql in [*HIJACKED["pascal"], "SELECT * FROM Invoice JOIN InvoiceLine AS `TOP` ON 1 = 1"]:
        if sql.count('"'):
            continue  # a double-quoted alias is a string in MySQL's grammar
        assert not admits(my_grammar, sql), sql
    for sql in ORDINARY["pascal"]:
        assert admits(my_grammar, sql), sql


# Output aliases (issue #30 §3): no select-list alias may spell a name the role may not read
# (denied tables and columns that name nothing readable); readable names stay fine.
OUTPUT_DENIED = {
    "pascal": [
        "SELECT Total AS BirthDate FROM Invoice",
        "SELECT Total AS birthdate FROM Invoice",
        'SELECT Total AS "Email" FROM Invoice',
        "SELECT Total Email FROM Invoice",
        "SELECT COUNT(*) AS Employee FROM Invoice",
        "SELECT Total AS Phone, BillingCity FROM Invoice",
    ],
    "snake": [
        "SELECT total AS birth_date FROM invoice",
        'SELECT total AS "email" FROM invoice',
        "SELECT total phone FROM invoice",
        "SELECT COUNT(*) AS employee FROM invoice",
    ],
}
OUTPUT_ORDINARY = {
    "pascal": [
        "SELECT SUM(Total) AS Total FROM Invoice",
        "SELECT Title AS Title FROM Album",  # Employee.Title is denied, Album.Title is not
        "SELECT Total AS BirthDateX FROM Invoice",
        "SELECT Total AS Emails FROM Invoice ORDER BY Emails",
        "SELECT BillingCountry AS Country FROM Invoice",
    ],
    "snake": [
        "SELECT SUM(total) AS total FROM invoice",
        "SELECT title AS title FROM album",
        "SELECT total AS emails FROM invoice ORDER BY emails",
    ],
}


@pytest.mark.parametrize("sql", OUTPUT_DENIED["pascal"])
def test_sqlite_output_alias_may_not_spell_a_denied_name(sqlite_grammar: Grammar, sql: str) -> None:
    assert not admits(sqlite_grammar, sql)


@pytest.mark.parametrize("sql", OUTPUT_ORDINARY["pascal"])
def test_sqlite_ordinary_output_aliases_stay(sqlite_grammar: Grammar, sql: str) -> None:
    assert admits(sqlite_grammar, sql)


def test_spec_agrees_on_output_aliases(sqlite_grammar: Grammar) -> None:
    spec = SpecOracle(to_spec(sqlite_grammar))
    for sql in OUTPUT_DENIED["pascal"]:
        assert not spec.accepts(sql.encode()), sql
    for sql in OUTPUT_ORDINARY["pascal"]:
        assert spec.accepts(sql.encode()), sql


def test_output_aliases_without_a_policy_are_free() -> None:
    """``role_scopes`` without the policy (what callers outside the Asker get): no output
    alias is refused, the table-alias rule alone applies."""
    from grid_sql.policy import AppPolicy, narrow, sqlite_baseline
    from grid_sql.policy.grammar import role_grammar
    from grid_sql.policy.scopes import role_scopes

    from .test_no_dead_ends import POLICY

    snap = introspect(open_sqlite(CHINOOK))
    pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(POLICY["sqlite"]), snap)
    g = role_grammar(Grammar.dialect("sqlite"), snap, pol).with_scopes(
        role_scopes(snap, bind_select_list=True)
    )
    assert admits(g, OUTPUT_DENIED["pascal"][0])


@pytest.mark.db
def test_postgresql_output_aliases(pg_grammar: Grammar) -> None:
    for sql in OUTPUT_DENIED["snake"]:
        assert not admits(pg_grammar, sql), sql
    for sql in OUTPUT_ORDINARY["snake"]:
        assert admits(pg_grammar, sql), sql
    spec = SpecOracle(to_spec(pg_grammar))
    assert not spec.accepts(OUTPUT_DENIED["snake"][0].encode())


@pytest.mark.db
def test_mariadb_output_aliases(my_grammar: Grammar) -> None:
    # the server's other databases have readable `email`/`phone` columns (sakila, ...): only
    # names that are denied everywhere the role looks are refused there
    for sql in [
        "SELECT Total AS BirthDate FROM Invoice",
        "SELECT Total AS `hiredate` FROM Invoice",
        "SELECT Total ReportsTo FROM Invoice",
        "SELECT COUNT(*) AS PlaylistTrack FROM Invoice",
    ]:
        assert not admits(my_grammar, sql), sql
    for sql in OUTPUT_ORDINARY["pascal"]:
        assert admits(my_grammar, sql), sql


def test_fast_path_equals_spec_on_output_aliases(sqlite_grammar: Grammar) -> None:
    """Viability, EOS and allowed terminals agree at every prefix (the differential harness
    that binds the fast path to the executable specification)."""
    from ..differential.harness import Differential

    d = Differential(sqlite_grammar)
    for sql in [*OUTPUT_DENIED["pascal"], *OUTPUT_ORDINARY["pascal"], *HIJACKED["pascal"][:3]]:
        w = sql.encode()
        for i in range(len(w) + 1):
            d.check(w[:i])
    assert d.checked > 300
