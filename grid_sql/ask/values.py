"""Example values of the role's short text columns, for the prompt (opt-in).

Why: a schema says ``IsOfficial TEXT``; only the data says it holds ``'T'`` and ``'F'``, not
``'Yes'``. Small models write the value the question suggests, and the statement then runs
and answers nothing (Spider ``world_1``: ``IsOfficial = 'Yes'``; ``car_1``: ``Country =
'France'`` where ``Country`` is a key into ``countries``). A few distinct values per column,
shown as a comment in the column's CREATE TABLE line, are the cheapest cure (Rajkumar et al.
2022 found sample rows to help Codex; values per column cost fewer prompt tokens than rows).

What is read, and why it is opt-in (``Asker(example_values=k)``):

* only columns the role may read (the policy), but no foreign-key column (its values are
  those of the key it references, shown there), through the role's own connection, with
  ``SELECT DISTINCT c FROM t WHERE c IS NOT NULL LIMIT k + 1`` (the engine stops after k + 1
  distinct values; ``k + 1`` tells whether the k shown are all of them);
* only text values up to ``max_len`` characters, on one line, without comment delimiters; a
  column with a longer or non-text value among them is left out (free text, numbers, dates:
  little to match and more tokens);
* values are data, and data written by a third party is a prompt-injection channel. The
  grammar and the checker bound what any prompt can make the model write (the role's
  language, the policy), but a value can still steer *which* allowed statement is written,
  so the caller decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..policy.model import Policy
from ..schema.introspect import Bind, connect
from ..schema.model import SchemaSnapshot

DEFAULT_MAX_LEN = 32


@dataclass(frozen=True)
class ColumnValues:
    """Distinct values of one column; ``complete``: they are all of its non-NULL values."""

    values: tuple[str, ...]
    complete: bool

    def comment(self) -> str:
        """The CREATE TABLE comment, e.g. ``/* one of 'T', 'F' */``."""
        quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in self.values)
        return f"/* {'one of' if self.complete else 'e.g.'} {quoted} */"


TableValues = dict[str, ColumnValues]


def _usable(v: object, max_len: int) -> bool:
    return (
        isinstance(v, str)
        and 0 < len(v) <= max_len
        and v.isprintable()
        and "*/" not in v
        and "/*" not in v
    )


def column_values(
    bind: Bind,
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    per_column: int = 3,
    max_len: int = DEFAULT_MAX_LEN,
) -> dict[tuple[str, str], TableValues]:
    """``{(schema, table): {column: ColumnValues}}`` for the role's readable short text
    columns (see the module doc). A column whose query fails is left out; on a connection
    the caller owns, the first failure ends the collection (its transaction is the
    caller's to roll back)."""
    if per_column <= 0:
        return {}
    out: dict[tuple[str, str], TableValues] = {}
    conn, owned = connect(bind)
    try:
        for schema, info in snapshot.iter_tables():
            tp = policy.table(info.name, schema)
            if tp is None:
                continue
            table_vals: TableValues = {}
            # a foreign key's values are its target's, shown at the target
            fk_cols = {c for fk in info.foreign_keys for c in fk.columns}
            for col in info.columns:
                if not tp.readable(col.name) or col.name in fk_cols:
                    continue
                c: sa.ColumnClause[Any] = sa.column(col.name)
                t = sa.table(
                    info.name, c, schema=None if schema == snapshot.default_schema else schema
                )
                stmt = sa.select(c).select_from(t).where(c.is_not(None)).distinct()
                try:
                    rows = conn.execute(stmt.limit(per_column + 1)).fetchall()
                except sa.exc.DBAPIError:
                    if not owned:
                        break
                    conn.rollback()
                    continue
                vals = [r[0] for r in rows]
                if not vals or not all(_usable(v, max_len) for v in vals):
                    continue
                table_vals[col.name] = ColumnValues(
                    tuple(vals[:per_column]), complete=len(vals) <= per_column
                )
            if table_vals:
                out[(schema, info.name)] = table_vals
        if owned:
            conn.rollback()
    finally:
        if owned:
            conn.close()
    return out
