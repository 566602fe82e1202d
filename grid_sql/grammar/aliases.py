"""Output-alias clauses of the scope rule (``docs/scope.md``, "Output aliases").

Kept apart from ``scope.py`` (which reads them when it compiles ``ScopeTable.alias_clauses``
against a grammar's terminal ids) so that module stays small.
"""

from __future__ import annotations

# Clauses whose keyword opens a position where some dialect reads a bare name as an output
# alias of the select list (ScopeTable.alias_clauses), and the tokens that end the search
# for the clause a position is in (another clause or construct of the same level, or a
# nested query's start).
ALIAS_CLAUSES = {"WHERE": "where", "GROUP": "group", "HAVING": "having", "ORDER": "order"}
ALIAS_STOPS = frozenset(
    {
        "SELECT",
        "FROM",
        "JOIN",
        "ON",
        "USING",
        "LIMIT",
        "OFFSET",
        "WINDOW",
        "WITH",
        "SET",
        "VALUES",
        "RETURNING",
        "UPDATE",
        "DELETE",
        "INSERT",
    }
)
