"""MySQL/MariaDB table names on a server with ``lower_case_table_names = 0`` (the Linux
default, and the test server's): ``customer`` is not the table ``Customer`` there. Found by
the 50-question run (bench/RESULTS-alias-questions.md): the role grammar and the checker
folded table names on every dialect, so the model wrote ``FROM customer`` and the server
answered "Table 'Chinook.customer' doesn't exist". Also the Asker's default catalog on MySQL:
the selected database only, not every database the login may see."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import role_grammar_for
from grid_sql.parser import ParserRuntime
from grid_sql.policy import narrow
from grid_sql.policy.checker import Checker
from grid_sql.policy.grants import read_grants
from grid_sql.schema import SchemaSnapshot, introspect
from grid_sql.schema.introspect import connected_schemas
from tests.servers import server_engine

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def chinook() -> sa.Engine:
    engine = server_engine("GRID_SQL_MYSQL_URL")
    url = engine.url.set(database="Chinook")
    engine.dispose()
    eng = sa.create_engine(url)
    yield eng
    eng.dispose()


def _in_language(g: object, sql: str) -> bool:
    rt = ParserRuntime.for_grammar(g)  # type: ignore[arg-type]
    cfg = rt.advance(rt.initial, sql.encode())
    return cfg is not None and rt.eos_allowed(cfg)


def test_server_compares_table_names_exactly(chinook: sa.Engine) -> None:
    with chinook.connect() as conn:
        lctn = conn.execute(sa.text("SELECT @@lower_case_table_names")).scalar()
        snap = introspect(conn, schemas=connected_schemas(conn))
    assert lctn == 0  # the premise: scripts/services.sh runs MariaDB with the Linux default
    assert snap.exact_names
    assert snap.table("Customer") is not None
    assert snap.table("customer", exact=True) is None
    assert snap.schema("chinook", exact=True) is None and snap.schema("Chinook") is not None
    # the flag survives the stored form, and folding snapshots keep their old address
    assert SchemaSnapshot.from_dict(json.loads(snap.canonical_json())) == snap
    folded = SchemaSnapshot(snap.dialect, snap.default_schema, snap.schemas)
    assert "exact_names" not in folded.to_dict()


def test_selected_database_only(chinook: sa.Engine) -> None:
    with chinook.connect() as conn:
        assert connected_schemas(conn) == ["Chinook"]
        snap = introspect(conn, schemas=connected_schemas(conn))
    assert [s.name for s in snap.schemas] == ["Chinook"]
    with server_engine("GRID_SQL_MYSQL_URL").connect() as conn:  # no database selected
        assert connected_schemas(conn) is None


@pytest.mark.parametrize("scopes", [False, True])
def test_role_grammar_spells_table_names_exactly(chinook: sa.Engine, scopes: bool) -> None:
    with chinook.connect() as conn:
        snap = introspect(conn, schemas=connected_schemas(conn))
        pol = narrow(read_grants(conn, snap), None, snap)
    g = role_grammar_for(snap, pol, scopes=scopes)
    assert _in_language(g, "SELECT FirstName FROM Customer")
    assert _in_language(g, "SELECT firstname FROM `Customer`")  # columns still fold
    assert _in_language(g, "SELECT FirstName FROM Chinook.Customer")
    assert not _in_language(g, "SELECT FirstName FROM customer")
    assert not _in_language(g, "SELECT FirstName FROM CUSTOMER")
    assert not _in_language(g, "SELECT FirstName FROM `customer`")
    assert not _in_language(g, "SELECT FirstName FROM chinook.Customer")


def test_checker_refuses_the_wrong_case(chinook: sa.Engine) -> None:
    with chinook.connect() as conn:
        snap = introspect(conn, schemas=connected_schemas(conn))
        pol = narrow(read_grants(conn, snap), None, snap)
        checker = Checker(snap, pol)
        assert checker.check("SELECT FirstName FROM Customer") == []
        assert checker.check("SELECT FirstName FROM customer") != []
        # and the server agrees with both verdicts
        conn.execute(sa.text("SELECT FirstName FROM Customer LIMIT 1"))
        with pytest.raises(sa.exc.ProgrammingError):
            conn.execute(sa.text("SELECT FirstName FROM customer LIMIT 1"))


def test_checker_proposes_the_catalog_spelling(chinook: sa.Engine) -> None:
    from grid_sql.policy.checker import proposed_fix

    with chinook.connect() as conn:
        snap = introspect(conn, schemas=connected_schemas(conn))
        pol = narrow(read_grants(conn, snap), None, snap)
    checker = Checker(snap, pol)
    for wrong, right in [
        ("SELECT c.FirstName FROM customer AS c", "SELECT c.FirstName FROM Customer AS c"),
        ("SELECT FirstName FROM chinook.customer", "SELECT FirstName FROM Chinook.Customer"),
    ]:
        found = checker.check(wrong)
        assert [v.kind for v in found] == ["unknown_table"], found
        assert "case-sensitively" in found[0].message
        assert proposed_fix(wrong, found) == right
        assert checker.check(right) == []
    # a CTE's own name is no catalog table, in whatever case it is written
    assert checker.check("WITH customer AS (SELECT 1 AS x) SELECT x FROM customer") == []
