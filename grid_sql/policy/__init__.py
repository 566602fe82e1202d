"""Policy layer: grants read from the database, application narrowing, the post-parse checker.

``grid_sql/policy/grammar.py`` (policy → specialised Grammar) lives here too but is written
separately; nothing in this package imports it.
"""

from grid_sql.policy.checker import Checker, Violation, ViolationKind, check, format_violations
from grid_sql.policy.config import AppPolicy, AppRules, narrow
from grid_sql.policy.grants import (
    no_grants_baseline,
    parse_mysql_grant,
    read_grants,
    sqlite_baseline,
)
from grid_sql.policy.model import (
    BANNED_CLAUSES,
    COLUMN_PRIVILEGES,
    DEFAULT_BANNED_CLAUSES,
    DEFAULT_BANNED_FUNCTIONS,
    STATEMENT_VERBS,
    TABLE_PRIVILEGES,
    Policy,
    Provenance,
    TablePolicy,
)
from grid_sql.policy.session import as_app_policy, open_sqlite, read_policy, sqlite_url

__all__ = [
    "BANNED_CLAUSES",
    "COLUMN_PRIVILEGES",
    "DEFAULT_BANNED_CLAUSES",
    "DEFAULT_BANNED_FUNCTIONS",
    "STATEMENT_VERBS",
    "TABLE_PRIVILEGES",
    "AppPolicy",
    "AppRules",
    "Checker",
    "Policy",
    "Provenance",
    "TablePolicy",
    "Violation",
    "ViolationKind",
    "as_app_policy",
    "check",
    "format_violations",
    "narrow",
    "no_grants_baseline",
    "open_sqlite",
    "parse_mysql_grant",
    "read_grants",
    "read_policy",
    "sqlite_baseline",
    "sqlite_url",
]
