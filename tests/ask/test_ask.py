"""Asker: typed errors before anything runs, the checker gate, and (with the real SmolLM2 model
through llama.cpp) the whole path: generation under the guide, check, audit, safe execution.

The model is weak at SQL, so model-driven tests assert the pipeline's invariants (whatever it
generates is in the role's language, passes the checker or is refused, is audited, and
executes only when it passed), not answer accuracy.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import Asker
from grid_sql.ask.live import MARK as LIVE_MARK
from grid_sql.errors import (
    ConnectionConfigError,
    ModelError,
    OptionError,
    PolicyError,
    PolicyViolation,
    QuestionError,
    StatementError,
)
from grid_sql.policy import open_sqlite

DENY = {
    "verbs": ["select"],
    "tables": {"deny": ["Employee"]},
    "columns": {"deny": {"Customer": ["Phone", "Email"]}},
}


def _statements(engine) -> list[str]:
    """Every statement the engine sends from now on (to prove nothing ran)."""
    seen: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _record(conn, cursor, statement, parameters, context, executemany):
        if not statement.startswith(LIVE_MARK):  # the catalog fingerprint (front/live)
            seen.append(statement)

    return seen


# ------------------------------------------------------------------ no model needed
def test_bad_urls_are_typed():
    with pytest.raises(ConnectionConfigError):
        Asker("notadialect://x", audit=False)
    with pytest.raises(ConnectionConfigError):
        Asker("postgresql+psycopg://nobody:pw@127.0.0.1:1/none", audit=False)
    with pytest.raises(ConnectionConfigError):
        Asker("/no/such/dir/chinook.sqlite", audit=False)


def test_questions_are_checked_before_any_model(chinook_copy):
    asker = Asker(chinook_copy, model="/no/such/model.gguf", audit=False)
    for q in ["", "   ", "x" * 5000]:
        with pytest.raises(QuestionError):
            asker.ask(q)
    with pytest.raises(ModelError):  # a real question reaches the (missing) model
        asker.ask("How many albums?")


def test_option_errors_are_typed(chinook_copy):
    with pytest.raises(OptionError):
        Asker(chinook_copy, row_limit=-1, audit=False)
    asker = Asker(chinook_copy, audit=False)
    with pytest.raises(OptionError):
        asker.run_sql("SELECT 1", row_limit=-5)
    with pytest.raises(OptionError):
        asker.run_sql("SELECT 1", no_such_option=True)
    with pytest.raises(OptionError):
        asker.generate_sql("How many albums?", max_tokens=0)


def test_policy_errors_are_typed(chinook_copy):
    with pytest.raises(PolicyError, match="Employe"):
        Asker(chinook_copy, policy={"tables": {"deny": ["Employe"]}}, audit=False)


def test_explain_policy(chinook_copy):
    text = Asker(chinook_copy, policy=DENY, audit=False).explain_policy()
    assert "The model can write these statements: SELECT." in text
    assert "main.Employee" in text  # listed with no rights
    admitted = text.split("Tables the grammar admits")[1]
    assert "main.Customer" in admitted and "Employee" not in admitted


def test_run_sql_refuses_forbidden_statements_without_running_them(chinook_copy):
    asker = Asker(chinook_copy, policy=DENY, audit=False)
    seen = _statements(asker.bind)
    for sql in (
        "SELECT Phone FROM Customer",
        "SELECT * FROM Employee",
        "DELETE FROM Invoice",
        "SELECT c.FirstName, e.LastName FROM Customer c JOIN Employee e ON 1 = 1",
    ):
        with pytest.raises(PolicyViolation) as info:
            asker.run_sql(sql)
        assert info.value.sql == sql and info.value.violations
    assert seen == []
    ok = asker.run_sql("SELECT FirstName FROM Customer ORDER BY CustomerId", row_limit=3)
    assert ok.columns == ["FirstName"] and len(ok.rows) == 3 and ok.truncated
    with pytest.raises(StatementError):
        asker.run_sql("SELECT FirstName FROM Customer WHERE CustomerId = :id")


def test_writes_need_the_opt_in_even_in_the_language(chinook_copy):
    """Without allow_writes the role's language is narrowed to SELECT: no write is generated,
    and a hand-written one is refused by the checker before execution is even considered."""
    asker = Asker(chinook_copy, audit=False)  # the file allows everything
    assert asker.checker.policy.statement_verbs == {"select"}
    with pytest.raises(PolicyViolation):
        asker.run_sql("UPDATE Genre SET Name = 'x' WHERE GenreId = 1")
    res = asker.run_sql("UPDATE Genre SET Name = 'x' WHERE GenreId = 1", allow_writes=True)
    assert res.rowcount == 1
    assert asker.run_sql("SELECT Name FROM Genre WHERE GenreId = 1").rows == [("x",)]


def test_select_only_file_is_opened_read_only(chinook_copy):
    asker = Asker(chinook_copy, policy={"verbs": ["select"]}, audit=False)
    assert "mode=ro" in str(asker.bind.url)
    writer = Asker(chinook_copy, audit=False)
    assert "mode=rw" in str(writer.bind.url)


# ------------------------------------------------------------------ the real model
SHOP = """
CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, phone TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id),
                     total NUMERIC NOT NULL);
CREATE TABLE staff (id INTEGER PRIMARY KEY, name TEXT, phone TEXT);
INSERT INTO customer VALUES (1, 'Ann', 'Oslo', '1'), (2, 'Bob', 'Rome', '2'),
                            (3, 'Cy', 'Oslo', '3');
INSERT INTO orders VALUES (1, 1, 10), (2, 1, 20), (3, 2, 5), (4, 3, 7);
INSERT INTO staff VALUES (1, 'Dee', '9');
"""
SHOP_POLICY = {
    "verbs": ["select"],
    "tables": {"deny": ["staff"]},
    "columns": {"deny": {"customer": ["phone"]}},
}


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory):
    """A small real SQLite database: a short prompt keeps CPU prefill to seconds."""
    import sqlite3

    path = tmp_path_factory.mktemp("shop") / "shop.sqlite"
    con = sqlite3.connect(path)
    con.executescript(SHOP)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def audit_store(tmp_path_factory):
    from grid_sql.audit import AuditStore

    return AuditStore(tmp_path_factory.mktemp("audit") / "audit.sqlite")


@pytest.fixture(scope="module")
def shop_asker(shop_db, smollm2, audit_store):
    return Asker(shop_db, model=smollm2, policy=SHOP_POLICY, audit=audit_store, max_tokens=40)


@pytest.mark.parametrize(
    "question",
    ["How many customers are there?", "What is the total of all orders per city?"],
)
def test_ask_end_to_end_with_smollm2(shop_asker, audit_store, question):
    from grid_sql.decode import StopReason

    seen = _statements(shop_asker.bind)
    try:
        res = shop_asker.ask(question, row_limit=2)
    except (PolicyViolation, StatementError) as exc:
        # refused after the repair round: nothing ran, and both attempts were audited
        assert seen == [] and exc.sql
        assert len(exc.audit_ids) == 2
        for aid in exc.audit_ids:
            assert audit_store.get(aid).question == question
        return
    assert StopReason(res.stop_reason) in set(StopReason)
    assert shop_asker.checker.check(res.sql) == []
    assert res.audit_id is not None
    record = audit_store.get(res.audit_id)
    assert record.final_sql == res.sql and record.question == question
    assert record.artifacts.policy == shop_asker.policy.fingerprint
    assert len(res.rows) <= 2 and res.timings["generation"] > 0
    assert any(res.sql.rstrip(";").strip() in s for s in seen)  # what ran is what was checked
    for rep in res.repairs:  # every refused attempt kept, with its violations
        assert rep.violations and rep.sql != res.sql


def test_grammar_keeps_denied_names_out_of_generation(shop_asker):
    """Asked for what the role may not see, the model cannot even spell it."""
    try:
        gen = shop_asker.generate_sql("List the names and phone numbers of all staff.")
    except (PolicyViolation, StatementError) as exc:
        assert "staff" not in (exc.sql or "").lower()
        return
    assert "staff" not in gen.sql.lower()
    assert shop_asker.checker.check(gen.sql) == []


def test_write_request_under_select_only_role_cannot_write(shop_db, shop_asker):
    try:
        res = shop_asker.ask("Delete all orders.", allow_writes=True)
        assert res.sql.lstrip().upper().startswith(("SELECT", "WITH", "VALUES", "("))
    except (PolicyViolation, StatementError):
        pass
    engine = open_sqlite(shop_db)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM orders").scalar() == 4
    engine.dispose()


# ------------------------------------------------------------------ real servers
@pytest.mark.db
@pytest.mark.slow  # grammar + guide per server dialect, then a generation: ~40 s on a busy host
@pytest.mark.parametrize("server", ["pg_front", "my_front"])
def test_asker_on_real_servers(server, request, smollm2):
    url = request.getfixturevalue(server)("gs_front_ro")
    asker = Asker(url, model=smollm2, audit=False, max_tokens=40)
    assert asker.policy.read_only and asker.dialect in ("postgresql", "mysql")
    ok = asker.run_sql("SELECT name FROM item ORDER BY id", row_limit=3)
    assert ok.rows == [("item 1",), ("item 2",), ("item 3",)] and ok.truncated
    with pytest.raises(PolicyViolation):
        asker.run_sql("UPDATE item SET price = 0", allow_writes=True)
    try:
        res = asker.ask("How many items cost more than 100?")
    except (PolicyViolation, StatementError) as exc:
        assert exc.sql
        return
    assert asker.checker.check(res.sql) == []
    assert res.sql.lstrip().upper().startswith(("SELECT", "WITH", "("))
