"""Schema → scope table: the input of scope-aware column lexicons (``docs/scope.md``).

Kept apart from ``policy/grammar.py`` so the role grammar's language is unchanged unless a
caller asks for scopes: ``role_grammar(...).with_scopes(role_scopes(snapshot))``.
"""

from __future__ import annotations

from ..grammar.scope import ScopeTable
from ..schema.model import SchemaSnapshot


def role_scopes(
    snapshot: SchemaSnapshot,
    *,
    bind_select_list: bool = False,
    fresh_aliases: bool | None = None,
) -> ScopeTable:
    """Every table (and view) of the snapshot with all of its columns, plus its schemas.

    Columns are not filtered by the policy here: the scope rule only narrows the role's
    ``COLUMN_NAME`` lexicon (which already holds just the columns the role may name), so the
    words admitted at a position are (columns of the tables in scope) ∩ (role's lexicon).
    Tables of the same name in several schemas are merged (a union only widens).
    ``bind_select_list``: a FROM clause may not close while a select-list reference before
    it is bound nowhere (``docs/scope.md``, select-list obligations).
    ``fresh_aliases`` (default: on for SQLite only, where names compare case-insensitively
    quoted or not): a table's alias may not repeat a name its FROM exposes or be a qualifier
    the select list reads a missing column through (``docs/scope.md``, "Fresh aliases").
    """
    tables: dict[str, list[str]] = {}
    schemas: list[str] = []
    for schema, t in snapshot.iter_tables():
        schemas.append(schema)
        tables.setdefault(t.name, []).extend(t.column_names)
    if fresh_aliases is None:
        fresh_aliases = snapshot.dialect == "sqlite"
    return ScopeTable(
        tables, schemas, bind_select_list=bind_select_list, fresh_aliases=fresh_aliases
    )
