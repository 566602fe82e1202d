"""Table names by schema against the real servers (issue #25 §2, docs/scope.md).

The Asker's role language admits a bare table name only for the default schema's tables and
``s.t`` only for a table of ``s``: exactly the names the server resolves (PostgreSQL's
search_path is ``public`` here; MariaDB's current database) and the checker accepts. Each
statement: admitted by the language ⇔ the server runs it ⇔ the checker finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import role_grammar_for
from grid_sql.parser import ParserRuntime
from grid_sql.policy import Checker, read_policy
from grid_sql.schema import introspect

pytestmark = pytest.mark.db

PG = [
    ("SELECT id FROM customer", True),
    ("SELECT id FROM public.customer", True),
    ('SELECT id FROM "Sales"."Order Items"', True),
    ('SELECT i.id FROM "Sales"."Order Items" AS i JOIN orders AS o ON o.id = i.order_id', True),
    ('SELECT id FROM "Order Items"', False),
    ('SELECT id FROM "Sales".customer', False),
    ('SELECT id FROM public."Order Items"', False),
]
MY = [
    ("SELECT id FROM customer", True),
    ("SELECT id FROM grid_sql_test.customer", True),
    ("SELECT v FROM grid_sql_test2.other", True),
    ("SELECT v FROM other", False),
    ("SELECT id FROM grid_sql_test2.customer", False),
]


def _agree(url: sa.URL, cases: list[tuple[str, bool]]) -> None:
    engine = sa.create_engine(url)
    snap, policy = introspect(engine), read_policy(engine)
    g = role_grammar_for(snap, policy, scopes=True, bind_select_list=True)
    assert g.scopes is not None and g.scopes.table_schemas is not None
    rt = ParserRuntime.for_grammar(g)
    checker = Checker(snap, policy)
    with engine.connect() as conn:
        for sql, ok in cases:
            cfg = rt.advance(rt.initial, sql.encode())
            admitted = cfg is not None and rt.eos_allowed(cfg)
            tx = conn.begin()
            try:
                conn.exec_driver_sql(sql)
                ran = True
            except sa.exc.DBAPIError:
                ran = False
            finally:
                tx.rollback()
            assert (admitted, ran, not checker.check(sql)) == (ok, ok, ok), sql
    engine.dispose()


def test_postgres_names_resolve_as_the_server_does(pg_role_url: Callable[..., sa.URL]) -> None:
    _agree(pg_role_url("gs_reader"), PG)


def test_mariadb_names_resolve_as_the_server_does(my_user_url: Callable[..., sa.URL]) -> None:
    _agree(my_user_url("gs_global"), MY)
