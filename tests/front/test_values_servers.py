"""Example values on the real servers: read through the select-only login's own connection
(PostgreSQL and MariaDB quoting and LIMIT), and shown in the prompt of an Asker built on it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from grid_sql.ask.asker import Asker
from grid_sql.ask.values import ColumnValues


@pytest.mark.db
@pytest.mark.parametrize("which", ["pg_url", "my_url"])
def test_values_through_the_role_login(which: str, request: pytest.FixtureRequest) -> None:
    url: sa.URL = request.getfixturevalue(which)
    asker = Asker(url.render_as_string(hide_password=False), audit=False, example_values=2)
    try:
        text = asker.messages("Which albums came out in 1959?")[0]["content"]
        values = asker._column_values()
    finally:
        if isinstance(asker.bind, sa.Engine):
            asker.bind.dispose()
    assert values is not None
    (table,) = values.values()
    title = table["title"]
    assert not title.complete and len(title.values) == 2
    assert set(title.values) <= {"Blue Train", "Kind of Blue", "A Love Supreme", "Mingus Ah Um"}
    assert "year" not in table  # an integer column: no values shown
    assert f"title VARCHAR(60) {ColumnValues(title.values, False).comment()}" in text.replace(
        "CHARACTER VARYING", "VARCHAR"
    )
