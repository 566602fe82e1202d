"""Deterministic fixes for the type errors PostgreSQL reports (grid_sql/ask/typefix.py, issue
#25 §3): text compared with a number, LIKE on a non-text column. Pure cases first, then on the
real server with defog's yelp database (``review.business_id`` is text, ``business.bid`` a
bigint: the join defog's questions ask for), then the whole ``ask`` path with a real model."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from grid_sql.ask.typefix import type_fix
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo


def _t(name: str, *cols: tuple[str, str]) -> TableInfo:
    return TableInfo(name, columns=tuple(ColumnInfo(c, t) for c, t in cols))


SNAP = SchemaSnapshot(
    dialect="postgresql",
    default_schema="public",
    schemas=(
        SchemaInfo(
            "public",
            (
                _t("review", ("rid", "bigint"), ("business_id", "text"), ("year", "bigint")),
                _t("business", ("bid", "bigint"), ("state", "text"), ("zip", "text")),
                _t("orders", ("order_date", "date"), ("total", "numeric")),
            ),
        ),
    ),
)

FIXED = [
    (
        "SELECT COUNT(*) FROM review AS T1 JOIN business AS T2 ON T1.business_id = T2.bid",
        "SELECT COUNT(*) FROM review AS T1 JOIN business AS T2 ON T1.business_id = "
        "CAST(T2.bid AS TEXT)",
    ),
    (
        "SELECT COUNT(*) FROM review WHERE business_id IN (SELECT bid FROM business) AND year = 2",
        "SELECT COUNT(*) FROM review WHERE business_id IN (SELECT CAST(bid AS TEXT) FROM business)"
        " AND year = 2",
    ),
    (
        "SELECT state FROM business WHERE zip = 94110 OR zip IN (1, 2)",
        "SELECT state FROM business WHERE zip = '94110' OR zip IN ('1', '2')",
    ),
    (
        "SELECT total FROM orders WHERE order_date LIKE '2020%'",
        "SELECT total FROM orders WHERE CAST(order_date AS TEXT) LIKE '2020%'",
    ),
    (  # a quoted identifier keeps its quotes inside the cast; the other side's order kept
        'SELECT 1 FROM review r, business b WHERE b.bid <> r."business_id" AND 7 = b.zip',
        'SELECT 1 FROM review r, business b WHERE CAST(b.bid AS TEXT) <> r."business_id" '
        "AND '7' = b.zip",
    ),
]


@pytest.mark.parametrize(("sql", "fixed"), FIXED)
def test_certain_mismatches_are_written_as_text(sql: str, fixed: str) -> None:
    fix = type_fix(sql, SNAP, "postgresql")
    assert fix is not None and fix.sql == fixed
    for start, end, old, _new, reason in fix.edits:
        assert sql[start:end] == old and reason.startswith(old)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT state FROM business WHERE zip > 5",  # ordering text vs number: not certain
        "SELECT state FROM business WHERE bid = 5",  # no mismatch
        "SELECT state FROM business WHERE zip = '5'",
        "SELECT state FROM business WHERE zip = -5",  # not a plain literal: left to the model
        "SELECT total FROM orders WHERE CAST(order_date AS TEXT) LIKE '2020%'",
        "SELECT nonsense FROM",  # does not parse
    ],
)
def test_nothing_uncertain_is_touched(sql: str) -> None:
    assert type_fix(sql, SNAP, "postgresql") is None


def test_dialects_that_convert_get_no_fix() -> None:
    sql = "SELECT state FROM business WHERE zip = 94110"
    assert type_fix(sql, SNAP, "mysql") is None and type_fix(sql, SNAP, "sqlite") is None


def _yelp_url() -> str:
    url = os.environ.get("GRID_SQL_PG_URL")
    if not url:
        pytest.skip("GRID_SQL_PG_URL not set (scripts/services.sh)")
    return sa.make_url(url).set(database="defog_yelp").render_as_string(hide_password=False)


JOIN = (
    "SELECT COUNT(*) FROM review AS T1 INNER JOIN business AS T2 ON T1.business_id = T2.bid "
    "WHERE T2.state = 'CA'"
)
IN_SUB = "SELECT rid FROM review WHERE business_id IN (SELECT bid FROM business WHERE bid = 3)"


def test_the_fixed_statements_run_on_postgresql() -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typehints import type_hint
    from grid_sql.errors import ExecutionError
    from grid_sql.schema.introspect import introspect

    engine = sa.create_engine(_yelp_url())
    try:
        with engine.connect() as conn:
            snap = introspect(conn)
        for sql in (
            JOIN,
            "SELECT COUNT(*) FROM review WHERE business_id IN (SELECT bid FROM business)",
        ):
            with pytest.raises(ExecutionError) as err:
                execute(engine, sql)
            assert type_hint("postgresql", err.value) is not None  # 42883, a type error
            fix = type_fix(sql, snap, "postgresql")
            assert fix is not None, sql
            execute(engine, fix.sql)  # runs now
    finally:
        engine.dispose()


def test_ask_runs_the_fixed_statement_and_audits_it(tmp_path, smollm2) -> None:
    """The whole path: the model copies its few-shot example (a join of text with bigint),
    PostgreSQL refuses it with a type error, the fix runs instead of a repair round, and the
    fixed statement is sealed (checker verdict, policy, schema) and its outcome chained."""
    from grid_sql.ask.asker import Asker
    from grid_sql.ask.prompt import Example
    from grid_sql.audit import AuditStore

    question = "Which reviews mention the business with id 3?"
    store = AuditStore(tmp_path / "audit.sqlite")
    asker = Asker(
        _yelp_url(), model=smollm2, audit=store, max_tokens=64, examples=[Example(question, IN_SUB)]
    )
    res = asker.ask(question)
    fixed = type_fix(IN_SUB, asker.snapshot, "postgresql")
    assert fixed is not None
    first = res.repairs[0]
    assert first.sql.rstrip(";") == IN_SUB, "the model did not copy its example"
    assert first.kind == "typefix" and "operator does not exist" in first.violations[0]
    assert [e["old"] for e in first.edits] == ["bid"]
    assert res.sql == fixed.sql and res.columns == ["rid"]
    generated, statement = store.ids()  # the generation (its refusal chained), then the fix
    assert res.audit_id == statement
    assert fixed.sql in str(store.get(statement)) and IN_SUB in str(store.get(generated))
    outcomes = {e.audit_id: e.body() for e in store.chain() if e.kind == "outcome"}
    assert outcomes[generated]["ran"] is False and outcomes[statement]["ran"] is True


@pytest.mark.parametrize(
    ("sql", "fixed"),
    [
        (
            "SELECT CAST(SUM(CASE WHEN x > 4 THEN 1 ELSE 0 END) AS REAL) / COUNT(*) FROM t",
            "SELECT CAST(SUM(CASE WHEN x > 4 THEN 1 ELSE 0 END) AS REAL) / NULLIF(COUNT(*), 0) "
            "FROM t",
        ),
        ("SELECT a / 2, b / (c - d), e / NULLIF(f, 0) FROM t",
         "SELECT a / 2, b / NULLIF((c - d), 0), e / NULLIF(f, 0) FROM t"),
        ("SELECT a / 0 FROM t", "SELECT a / NULLIF(0, 0) FROM t"),
    ],
)  # fmt: skip
def test_denominators_are_guarded(sql: str, fixed: str) -> None:
    from grid_sql.ask.typefix import zero_division_fix

    fix = zero_division_fix(sql, "postgresql")
    assert fix is not None and fix.sql == fixed
    assert fix.edits[0][:3] == (0, len(sql), sql)  # one edit: the regenerated statement


def test_nothing_to_guard() -> None:
    from grid_sql.ask.typefix import zero_division_fix

    assert zero_division_fix("SELECT a / 2, b / NULLIF(c, 0) FROM t", "postgresql") is None
    assert zero_division_fix("SELECT FROM WHERE", "postgresql") is None


RATIO_QUESTION = "What is the ratio of reviews to businesses in the state XX?"
RATIO = "SELECT COUNT(*) / (SELECT COUNT(*) FROM business WHERE state = 'XX') FROM review"


def test_a_ratio_over_nothing_is_null_not_an_error(smollm2) -> None:
    """PostgreSQL refuses the division by zero (22012); the guarded statement runs and says
    there is no ratio (NULL), as SQLite and MySQL would have answered at once."""
    from grid_sql.ask.asker import Asker
    from grid_sql.ask.prompt import Example

    asker = Asker(
        _yelp_url(),
        model=smollm2,
        audit=False,
        max_tokens=64,
        examples=[Example(RATIO_QUESTION, RATIO)],
    )
    res = asker.ask(RATIO_QUESTION)
    first = res.repairs[0]
    assert first.sql.rstrip(";").startswith("SELECT COUNT(*) / (SELECT COUNT(*) FROM business")
    assert first.kind == "typefix" and "division by zero" in first.violations[0]
    assert "NULLIF((SELECT COUNT(*) FROM business WHERE state = 'XX'), 0)" in res.sql
    assert res.rows == [(None,)]


def test_days_between_two_dates_drop_the_extract() -> None:
    """``EXTRACT(DAY FROM d1 - d2)`` on two DATE columns is ``extract(unknown, integer)`` on
    PostgreSQL (a date difference is already days): the EXTRACT goes, everywhere it occurs,
    with the other fixes in the same (regenerated) statement; a timestamp operand is left."""
    snap = SchemaSnapshot(
        dialect="postgresql",
        default_schema="public",
        schemas=(
            SchemaInfo(
                "public",
                (_t("staff", ("name", "text"), ("hired", "date"), ("left_on", "date"),
                    ("seen", "timestamp"), ("zip", "text")),),
            ),
        ),
    )  # fmt: skip
    sql = (
        "SELECT name, EXTRACT(DAY FROM left_on - hired) AS days FROM staff WHERE zip = 5 "
        "ORDER BY EXTRACT(DAY FROM left_on - hired)"
    )
    fix = type_fix(sql, snap, "postgresql")
    assert fix is not None
    assert fix.sql == (
        "SELECT name, (left_on - hired) AS days FROM staff WHERE zip = '5' "
        "ORDER BY (left_on - hired)"
    )
    assert len(fix.edits) == 1 and "already days" in fix.edits[0][4]
    assert type_fix("SELECT EXTRACT(DAY FROM seen - hired) FROM staff", snap, "postgresql") is None
    # today minus a date is days too (defog q28: EXTRACT(DAY FROM CURRENT_DATE - admit_term))
    for sql, fixed in (
        (
            "SELECT EXTRACT(DAY FROM CURRENT_DATE - hired) FROM staff",
            "SELECT (CURRENT_DATE - hired) FROM staff",
        ),
        (
            "SELECT EXTRACT(DAY FROM staff.left_on - CURRENT_DATE) FROM staff",
            "SELECT (staff.left_on - CURRENT_DATE) FROM staff",
        ),
    ):
        fix = type_fix(sql, snap, "postgresql")
        assert fix is not None and fix.sql == fixed
    assert (
        type_fix("SELECT EXTRACT(DAY FROM CURRENT_DATE - seen) FROM staff", snap, "postgresql")
        is None
    )
    assert (
        type_fix("SELECT EXTRACT(DAY FROM CURRENT_DATE - CURRENT_DATE)", snap, "postgresql") is None
    )


def test_the_extract_fix_runs_on_postgresql() -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.errors import ExecutionError
    from grid_sql.schema.introspect import introspect

    url = sa.make_url(_yelp_url()).set(database="defog_car_dealership")
    engine = sa.create_engine(url)
    sqls = (
        "SELECT first_name, EXTRACT(DAY FROM termination_date - hire_date) AS days "
        "FROM salespersons WHERE termination_date IS NOT NULL",
        "SELECT first_name, EXTRACT(DAY FROM CURRENT_DATE - hire_date) AS days FROM salespersons",
    )
    try:
        with engine.connect() as conn:
            snap = introspect(conn)
        for sql in sqls:
            with pytest.raises(ExecutionError, match="extract"):
                execute(engine, sql)
            fix = type_fix(sql, snap, "postgresql")
            assert fix is not None
            rows = execute(engine, fix.sql).rows
            assert rows and all(isinstance(days, int) for _, days in rows)
    finally:
        engine.dispose()


UNGROUPED = (
    'column "t2.name" must appear in the GROUP BY clause or be used in an aggregate function'
)


@pytest.mark.parametrize(
    ("sql", "fixed"),
    [
        (
            "SELECT T2.name, COUNT(T1.aid) AS n FROM writes AS T1 JOIN author AS T2 "
            "ON T1.aid = T2.aid GROUP BY T1.aid ORDER BY n DESC",
            "SELECT T2.name, COUNT(T1.aid) AS n FROM writes AS T1 JOIN author AS T2 "
            "ON T1.aid = T2.aid GROUP BY T1.aid, T2.name ORDER BY n DESC",
        ),
        (  # every bare column of the list (the next refusal otherwise), none twice
            "SELECT T2.name, T2.x, SUM(T2.y) FROM t AS T2 GROUP BY T2.id, T2.x",
            "SELECT T2.name, T2.x, SUM(T2.y) FROM t AS T2 GROUP BY T2.id, T2.x, T2.name",
        ),
        (  # PostgreSQL names a bare column with its table; only its own SELECT changes
            "SELECT a FROM u WHERE a IN (SELECT name FROM t2 GROUP BY k)",
            "SELECT a FROM u WHERE a IN (SELECT name FROM t2 GROUP BY k, name)",
        ),
    ],
)
def test_ungrouped_columns_are_grouped(sql: str, fixed: str) -> None:
    from grid_sql.ask.typefix import group_by_fix

    fix = group_by_fix(sql, UNGROUPED, "postgresql")
    assert fix is not None and fix.sql == fixed
    assert "added to GROUP BY" in fix.edits[0][4]


@pytest.mark.parametrize(
    ("sql", "fixed"),
    [
        (  # defog q155: the sort key is neither grouped nor aggregated; only it is added
            "SELECT T1.venuename, COUNT(T2.paperid) FROM venue AS T1 JOIN paper AS T2 "
            "ON T1.venueid = T2.venueid GROUP BY T1.venuename ORDER BY T2.venueid",
            "SELECT T1.venuename, COUNT(T2.paperid) FROM venue AS T1 JOIN paper AS T2 "
            "ON T1.venueid = T2.venueid GROUP BY T1.venuename, T2.venueid ORDER BY T2.venueid",
        ),
        (  # HAVING likewise; an output alias of the same name is no column to group by
            "SELECT T2.x AS venueid FROM paper AS T2 GROUP BY T2.x HAVING T2.venueid > 1",
            "SELECT T2.x AS venueid FROM paper AS T2 GROUP BY T2.x, T2.venueid "
            "HAVING T2.venueid > 1",
        ),
    ],
)
def test_ungrouped_sort_keys_are_grouped(sql: str, fixed: str) -> None:
    from grid_sql.ask.typefix import group_by_fix

    msg = 'column "t2.venueid" must appear in the GROUP BY clause'
    fix = group_by_fix(sql, msg, "postgresql")
    assert fix is not None and fix.sql == fixed
    # a sort key inside an aggregate, or the name of an output alias, is not the column
    assert (
        group_by_fix(
            "SELECT COUNT(*) AS venueid FROM paper GROUP BY x ORDER BY venueid", msg, "postgresql"
        )
        is None
    )


@pytest.mark.parametrize(
    "message",
    [
        "(1055, \"'defog.T2.name' isn't in GROUP BY\")",  # MariaDB
        '(1055, "Expression #1 of SELECT list is not in GROUP BY clause and contains '
        "nonaggregated column 'defog.T2.name' which is not functionally dependent on columns "
        'in GROUP BY clause; this is incompatible with sql_mode=only_full_group_by")',  # MySQL
    ],
)
def test_mysql_names_the_ungrouped_column(message: str) -> None:
    from grid_sql.ask.typefix import group_by_fix
    from grid_sql.dialect import Dialect

    d = Dialect.get("mysql")
    assert d.is_grouping_error(None, 1055) and not d.is_grouping_error(None, 1140)
    assert d.ungrouped_column(message) == "T2.name"
    fix = group_by_fix("SELECT T2.name, COUNT(*) FROM t AS T2 GROUP BY T2.id", message, d)
    assert fix is not None and fix.sql.endswith("GROUP BY T2.id, T2.name")


def test_the_grouping_fix_runs_on_mariadb_only_full_group_by(server_engine) -> None:
    """MariaDB under ``ONLY_FULL_GROUP_BY`` (MySQL's default mode) refuses an ungrouped
    column with 1055; the fix reads the column from that message and the statement runs."""
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typefix import group_by_fix
    from grid_sql.ask.typehints import error_codes
    from grid_sql.dialect import Dialect
    from grid_sql.errors import ExecutionError

    admin = server_engine("GRID_SQL_MYSQL_URL")
    db = "gs_typefix_group"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {db}")
        conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {db}.t (id int, name text, v int)")
        conn.exec_driver_sql(f"DELETE FROM {db}.t")
        conn.exec_driver_sql(f"INSERT INTO {db}.t VALUES (1, 'a', 2), (1, 'a', 3), (2, 'b', 4)")
    url = admin.url.set(database=db)
    engine = sa.create_engine(
        url, connect_args={"init_command": "SET sql_mode='ONLY_FULL_GROUP_BY'"}
    )
    sql = "SELECT T2.name, SUM(T2.v) FROM t AS T2 GROUP BY T2.id ORDER BY T2.name"
    try:
        with pytest.raises(ExecutionError) as err:
            execute(engine, sql)
        d = Dialect.get("mysql")
        assert d.is_grouping_error(*error_codes(err.value))
        fix = group_by_fix(sql, str(err.value), d)
        assert fix is not None
        assert sorted(execute(engine, fix.sql).rows) == [("a", 5), ("b", 4)]
    finally:
        engine.dispose()
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {db}")


def test_no_group_by_no_guess() -> None:
    """Without a GROUP BY the statement asked for one aggregate over every row: adding one
    would answer another question, so it is left to the model's repair round; likewise a
    message naming no column of the list, or another error."""
    from grid_sql.ask.typefix import group_by_fix

    assert group_by_fix("SELECT T2.name, COUNT(*) FROM t AS T2", UNGROUPED, "postgresql") is None
    assert group_by_fix("SELECT COUNT(*) FROM t AS T2 GROUP BY x", UNGROUPED, "postgresql") is None
    assert (
        group_by_fix("SELECT T2.name FROM t AS T2 GROUP BY x", "syntax error", "postgresql") is None
    )


def test_the_grouping_fix_runs_on_postgresql() -> None:
    """defog's big-catalog arm: ``column "t2.name" must appear in the GROUP BY clause``
    (42803) on academic's tables; the fixed statement runs and returns the grouped rows."""
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typefix import group_by_fix
    from grid_sql.ask.typehints import error_codes
    from grid_sql.dialect import Dialect
    from grid_sql.errors import ExecutionError

    url = sa.make_url(_yelp_url()).set(database="defog_academic")
    engine = sa.create_engine(url)
    sql = (
        "SELECT T2.name, COUNT(T1.pid) AS n FROM writes AS T1 JOIN author AS T2 "
        "ON T1.aid = T2.aid GROUP BY T1.aid ORDER BY n DESC"
    )
    try:
        with pytest.raises(ExecutionError) as err:
            execute(engine, sql)
        assert Dialect.get("postgresql").is_grouping_error(*error_codes(err.value))
        fix = group_by_fix(sql, str(err.value), "postgresql")
        assert fix is not None
        rows = execute(engine, fix.sql).rows
        assert rows and all(isinstance(n, int) for _, n in rows)
    finally:
        engine.dispose()


GROUP_QUESTION = "How many papers has each author written?"
UNGROUPED_SQL = (
    "SELECT T2.name, COUNT(T1.pid) AS n FROM writes AS T1 JOIN author AS T2 "
    "ON T1.aid = T2.aid GROUP BY T1.aid ORDER BY n DESC"
)


def test_ask_groups_the_column_postgresql_named(smollm2) -> None:
    """The whole path: the model copies its example (an ungrouped name), PostgreSQL refuses
    it (42803), and the Asker runs the grouped statement, recorded as a typefix repair."""
    from grid_sql.ask.asker import Asker
    from grid_sql.ask.prompt import Example

    url = sa.make_url(_yelp_url()).set(database="defog_academic")
    asker = Asker(
        url,
        model=smollm2,
        audit=False,
        max_tokens=96,
        examples=[Example(GROUP_QUESTION, UNGROUPED_SQL)],
    )
    res = asker.ask(GROUP_QUESTION)
    first = res.repairs[0]
    assert first.sql.rstrip(";") == UNGROUPED_SQL
    assert first.kind == "typefix" and "GROUP BY" in first.violations[0]
    assert "GROUP BY T1.aid, T2.name" in res.sql
    assert res.rows and all(isinstance(n, int) for _, n in res.rows)


def test_the_year_of_an_integer_year_is_the_column() -> None:
    """``EXTRACT(YEAR FROM year)`` on an integer ``year`` (defog scholar/yelp, big-catalog
    q135, q136, q185: ``extract(unknown, bigint)``): the column is the year already; an
    integer column named otherwise, or another unit, is left alone."""
    snap = SchemaSnapshot(
        dialect="postgresql",
        default_schema="public",
        schemas=(
            SchemaInfo(
                "public",
                (_t("paper", ("paperid", "bigint"), ("year", "bigint"), ("numcitedby", "bigint")),),
            ),
        ),
    )
    sql = (
        "SELECT EXTRACT(YEAR FROM year) AS year, COUNT(*) FROM paper "
        "GROUP BY EXTRACT(YEAR FROM year)"
    )
    fix = type_fix(sql, snap, "postgresql")
    assert fix is not None
    assert fix.sql == "SELECT year AS year, COUNT(*) FROM paper GROUP BY year"
    assert "already is the year" in fix.edits[0][4]
    assert type_fix("SELECT EXTRACT(YEAR FROM numcitedby) FROM paper", snap, "postgresql") is None
    assert type_fix("SELECT EXTRACT(MONTH FROM year) FROM paper", snap, "postgresql") is None


def test_the_year_fix_runs_on_postgresql() -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.errors import ExecutionError
    from grid_sql.schema.introspect import introspect

    url = sa.make_url(_yelp_url()).set(database="defog_scholar")
    engine = sa.create_engine(url)
    sql = (
        "SELECT EXTRACT(YEAR FROM year) AS y, COUNT(*) FROM paper GROUP BY EXTRACT(YEAR FROM year)"
    )
    try:
        with engine.connect() as conn:
            snap = introspect(conn)
        with pytest.raises(ExecutionError, match="extract"):
            execute(engine, sql)
        fix = type_fix(sql, snap, "postgresql")
        assert fix is not None
        assert execute(engine, fix.sql).rows
    finally:
        engine.dispose()


CARDINALITY = (  # defog q23: the conference subquery returns several rows
    "SELECT T1.title FROM publication AS T1 INNER JOIN domain_conference AS T5 "
    "ON T1.cid = T5.cid WHERE T5.cid = (SELECT cid FROM conference)"
)


def test_equality_with_several_rows_is_membership() -> None:
    from grid_sql.ask.typefix import cardinality_fix

    fix = cardinality_fix(CARDINALITY, "postgresql")
    assert fix is not None
    assert fix.sql.endswith("WHERE T5.cid IN (SELECT cid FROM conference)")
    fix = cardinality_fix("SELECT a FROM t WHERE (SELECT b FROM u) <> a", "postgresql")
    assert fix is not None and fix.sql == "SELECT a FROM t WHERE NOT a IN (SELECT b FROM u)"
    # single-row by shape, or an ordering comparison: nothing to change
    for sql in (
        "SELECT a FROM t WHERE a = (SELECT MAX(b) FROM u)",
        "SELECT a FROM t WHERE a = (SELECT b FROM u LIMIT 1)",
        "SELECT a FROM t WHERE a < (SELECT b FROM u)",
        "SELECT (SELECT b FROM u) FROM t",
    ):
        assert cardinality_fix(sql, "postgresql") is None, sql


def test_the_cardinality_fix_runs_on_postgresql() -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typefix import cardinality_fix
    from grid_sql.ask.typehints import error_codes
    from grid_sql.dialect import Dialect
    from grid_sql.errors import ExecutionError

    url = sa.make_url(_yelp_url()).set(database="defog_academic")
    engine = sa.create_engine(url)
    try:
        with pytest.raises(ExecutionError) as err:
            execute(engine, CARDINALITY)
        assert Dialect.get("postgresql").is_cardinality_error(*error_codes(err.value))
        fix = cardinality_fix(CARDINALITY, "postgresql")
        assert fix is not None
        execute(engine, fix.sql)
    finally:
        engine.dispose()


def test_the_cardinality_error_on_mariadb(server_engine) -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typehints import error_codes
    from grid_sql.dialect import Dialect
    from grid_sql.errors import ExecutionError

    engine = server_engine("GRID_SQL_MYSQL_URL")
    sql = "SELECT 1 FROM (SELECT 1 AS a) AS t WHERE a = (SELECT 1 UNION ALL SELECT 2)"
    with pytest.raises(ExecutionError) as err:
        execute(engine, sql)
    assert Dialect.get("mysql").is_cardinality_error(*error_codes(err.value))


TEXT_DATES = (  # defog q198: concomitant_meds keeps its dates as text
    "SELECT t.treatment_id FROM treatments t JOIN concomitant_meds cm "
    "ON t.treatment_id = cm.treatment_id WHERE cm.start_dt >= t.start_dt - INTERVAL '14 days' "
    "AND cm.start_dt <= t.start_dt + INTERVAL '14 days'"
)


def _derm() -> SchemaSnapshot:
    return SchemaSnapshot(
        dialect="postgresql",
        default_schema="public",
        schemas=(
            SchemaInfo(
                "public",
                (
                    _t("treatments", ("treatment_id", "integer"), ("start_dt", "date")),
                    _t("concomitant_meds", ("treatment_id", "integer"), ("start_dt", "text")),
                ),
            ),
        ),
    )


def test_a_text_column_used_as_a_date_is_cast() -> None:
    fix = type_fix(TEXT_DATES, _derm(), "postgresql")
    assert fix is not None
    assert fix.sql == TEXT_DATES.replace(
        "cm.start_dt >=", "CAST(cm.start_dt AS TIMESTAMP) >="
    ).replace("cm.start_dt <=", "CAST(cm.start_dt AS TIMESTAMP) <=")
    assert all("compared with a date or time" in e[4] for e in fix.edits)
    fix = type_fix(
        "SELECT COUNT(*) FROM concomitant_meds WHERE EXTRACT(YEAR FROM start_dt) = 2022 "
        "AND start_dt < CURRENT_DATE",
        _derm(),
        "postgresql",
    )
    assert fix is not None and fix.sql == (
        "SELECT COUNT(*) FROM concomitant_meds WHERE EXTRACT(YEAR FROM CAST(start_dt AS "
        "TIMESTAMP)) = 2022 AND CAST(start_dt AS DATE) < CURRENT_DATE"
    )
    # text against text, or a date column against a date: nothing to change
    assert (
        type_fix("SELECT 1 FROM concomitant_meds WHERE start_dt > 'x'", _derm(), "postgresql")
        is None
    )
    assert (
        type_fix("SELECT 1 FROM treatments WHERE start_dt > CURRENT_DATE", _derm(), "postgresql")
        is None
    )


def test_the_text_date_fix_runs_on_postgresql() -> None:
    from grid_sql.ask.execute import execute
    from grid_sql.ask.typehints import error_codes
    from grid_sql.dialect import Dialect
    from grid_sql.errors import ExecutionError

    url = sa.make_url(_yelp_url()).set(database="defog_derm_treatment")
    engine = sa.create_engine(url)
    try:
        with pytest.raises(ExecutionError) as err:
            execute(engine, TEXT_DATES)
        assert Dialect.get("postgresql").is_type_error(*error_codes(err.value))
        fix = type_fix(TEXT_DATES, _derm(), "postgresql")
        assert fix is not None
        execute(engine, fix.sql)
    finally:
        engine.dispose()
