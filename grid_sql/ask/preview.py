"""Previewed writes (``dry_run=True``): what a statement would change, with nothing changed.

The statement runs for real inside the transaction :mod:`grid_sql.ask.execute` opens for
it, under the same timeout and guards, and the transaction is rolled back instead of
committed; the database itself counts the rows it would change (``rowcount``), so the count is
exact for this moment, triggers and constraints included. For UPDATE and DELETE a capped
sample of the rows *before* the change is read first, in the same transaction, with the
statement's own table and WHERE clause (only the columns the role may read, so a preview never
shows more than a SELECT could).

Where a rollback would not undo the statement, the preview is refused rather than run: on
MySQL/MariaDB, DDL (and TRUNCATE) commits implicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlglot import exp

from ..dialect import Dialect
from ..errors import OptionError
from ..policy.checker import sqlglot_read
from ..policy.model import EXPLICIT_VERBS, Policy
from ..policy.sqlparse import parse_one as guarded_parse_one

DEFAULT_SAMPLE_ROWS = 10


@dataclass
class WritePreview:
    """What a dry run found: ``rowcount`` rows would change; for UPDATE/DELETE,
    ``columns``/``rows`` sample them as they are now (at most ``DEFAULT_SAMPLE_ROWS``;
    ``sampled`` is False where no sample could be taken: a joined UPDATE, no readable
    column, or the sample query failed)."""

    verb: str
    rowcount: int
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    sampled: bool = False

    def to_dict(self) -> dict[str, Any]:
        from .result import _jsonable

        return {
            "verb": self.verb,
            "rowcount": self.rowcount,
            "columns": list(self.columns),
            "rows": [[_jsonable(v) for v in r] for r in self.rows],
            "sampled": self.sampled,
        }


def check_previewable(verb: str, dialect: str) -> None:
    """Refuse a preview that a rollback could not undo."""
    d = Dialect.find(dialect)
    if d is not None and d.ddl_commits_implicitly and verb in EXPLICIT_VERBS:
        raise OptionError(
            f"a {verb.upper()} cannot be previewed on {d.label}: it commits implicitly, "
            "so a dry run would change the database (nothing was run)"
        )


def sample_query(sql: str, dialect: str, policy: Policy | None, limit: int) -> str | None:
    """``SELECT <readable columns> FROM <target> WHERE <the statement's condition> LIMIT n``
    for a single-table UPDATE or DELETE; None where the rows cannot be told that simply."""
    read = sqlglot_read(dialect)
    try:
        stmt = guarded_parse_one(sql, read)
    except Exception:  # noqa: BLE001 - no sample is the safe answer to anything unparsable
        return None
    if not isinstance(stmt, exp.Update | exp.Delete):
        return None
    if any(stmt.args.get(k) for k in ("from", "from_", "joins", "using", "tables")):
        return None  # several tables: which rows change is not one table's WHERE
    target = stmt.this
    if not isinstance(target, exp.Table) or target.args.get("joins"):
        return None
    cols: list[exp.Expr] = [exp.Star()]
    if policy is not None:
        tp = policy.table(target.name, target.db or None)
        if tp is None:
            return None
        readable = [c for c, verbs in tp.columns if "select" in verbs]
        if not readable:
            return None
        cols = [exp.column(c, quoted=True) for c in readable]
    query = exp.select(*cols).from_(target.copy()).limit(limit)
    where = stmt.args.get("where")
    if where is not None:
        query = query.where(where.this.copy())
    return query.sql(read)


def take_sample(
    conn: Connection, sql: str, dialect: str, verb: str, policy: Policy | None
) -> WritePreview:
    """The before-image sample, read inside the statement's transaction (in a savepoint: a
    failed sample must not abort the transaction the statement runs in)."""
    preview = WritePreview(verb=verb, rowcount=0)
    query = sample_query(sql, dialect, policy, DEFAULT_SAMPLE_ROWS)
    if query is None:
        return preview
    sp = conn.begin_nested()
    try:
        res = conn.exec_driver_sql(query, execution_options={"no_parameters": True})
        preview.columns = list(res.keys())
        preview.rows = [tuple(r) for r in res.fetchmany(DEFAULT_SAMPLE_ROWS)]
        res.close()
        preview.sampled = True
        sp.commit()
    except sa.exc.DBAPIError:
        sp.rollback()
    return preview
