"""MySQL's unit keywords inside function arguments (``Dialect.keyword_arguments``).

``TIMESTAMPDIFF(MONTH, a, b)`` is MySQL's date difference, and its MySQL replacement hint for
``age()``; the grammar reads ``MONTH`` there as a column reference, so a role whose column
lexicon lacked the word could not write the call (defog MySQL gold: 3 statements). A role's
lexicon now gets each unit word that names no column of the catalog, bare only: such a word
can never read a column, a denied one included.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from grid_sql.dialect import Dialect
from grid_sql.grammar import Grammar
from grid_sql.policy import AppPolicy, Checker, narrow
from grid_sql.policy.grammar import role_grammar
from grid_sql.policy.grants import no_grants_baseline
from grid_sql.schema.model import ColumnInfo, SchemaInfo, SchemaSnapshot, TableInfo
from tests.policy.helpers import admits as _admits


def _role(dialect: str, hidden: str = "pw") -> tuple[SchemaSnapshot, Grammar]:
    """SELECT on ``t(id, d1, d2)``; ``secret(<hidden>)`` denied."""
    sch = {"mysql": "db", "postgresql": "public", "sqlite": "main"}[dialect]
    cols = (ColumnInfo("id", "int"), ColumnInfo("d1", "date"), ColumnInfo("d2", "date"))
    snap = SchemaSnapshot(
        dialect,
        sch,
        (
            SchemaInfo(
                sch,
                (
                    TableInfo("t", columns=cols),
                    TableInfo("secret", columns=(ColumnInfo(hidden, "int"),)),
                ),
            ),
        ),
    )
    app = AppPolicy.from_mapping({"verbs": ["select"], "tables": {"deny": ["secret"]}})
    pol = narrow(no_grants_baseline(snap, Dialect.get(dialect)), app, snap)
    return snap, role_grammar(Grammar.dialect(dialect), snap, pol)


def _columns(g: Grammar) -> set[bytes]:
    assert g.lexicon is not None
    return set(g.lexicon["COLUMN_NAME"].words)


def test_mysql_roles_write_timestampdiff_units() -> None:
    _, g = _role("mysql")
    admits = _admits(g)
    assert admits("SELECT TIMESTAMPDIFF(MONTH, d1, d2) FROM t")
    assert admits("SELECT TIMESTAMPADD(quarter, 1, d1) AS q FROM t ORDER BY q")
    units = Dialect.get("mysql").keyword_arguments
    words = _columns(g)
    assert {u.encode() for u in units} <= words
    assert not any(w.startswith((b"`month", b'"month')) for w in words)  # bare only


def test_a_unit_word_that_names_a_column_is_left_out() -> None:
    """A denied column called ``month`` keeps the word out: it could read that column."""
    _, g = _role("mysql", hidden="month")
    assert b"month" not in _columns(g) and b"year" in _columns(g)
    # the price, stated: that role cannot write the MONTH unit
    assert not _admits(g)("SELECT TIMESTAMPDIFF(MONTH, d1, d2) FROM t")
    assert _admits(g)("SELECT TIMESTAMPDIFF(YEAR, d1, d2) FROM t")


def test_other_dialects_get_none() -> None:
    for dialect in ("postgresql", "sqlite"):
        assert Dialect.get(dialect).keyword_arguments == frozenset()
        assert b"month" not in _columns(_role(dialect)[1])


def test_it_runs_on_mariadb_and_the_checker_passes_it(
    server_engine: Callable[[str], sa.Engine],
) -> None:
    snap, g = _role("mysql")
    sql = "SELECT TIMESTAMPDIFF(MONTH, '2024-01-15', '2024-04-20') AS m"
    assert _admits(g)(sql)
    pol = narrow(
        no_grants_baseline(snap, Dialect.get("mysql")),
        AppPolicy.from_mapping({"verbs": ["select"], "tables": {"deny": ["secret"]}}),
        snap,
    )
    assert Checker(snap, pol).check(sql) == []
    with server_engine("GRID_SQL_MYSQL_URL").connect() as conn:
        assert conn.exec_driver_sql(sql).all() == [(3,)]
