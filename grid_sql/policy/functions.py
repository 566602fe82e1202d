"""Function allow-lists per dialect: the ``FUNCTION_NAME`` lexicon of role grammars and the
only functions the post-parse checker lets through (docs/scope.md, docs/policy.md).

Why an allow-list: a function is code the server runs with the role's rights, and some
built-ins read relations *by name* (PostgreSQL ``table_to_xml('employee', ...)``,
``query_to_xml``, ``ts_stat``), run SQL text, touch files or the network (``pg_read_file``,
``lo_import``, ``LOAD_FILE``), take locks or change session state (``pg_advisory_lock``,
``set_config``, ``GET_LOCK``, ``SLEEP``). A table or column policy means nothing if such a
function can be called, and catalogs grow with every server release and extension, so a
deny-list is always one name short. Each list (the ``functions`` of each class in
``grid_sql/dialect/``) is therefore curated and reviewed by hand: ordinary scalar,
aggregate, window, string, date/time, math and JSON functions of the dialect, each of which
computes only from its arguments (or the clock / a random source).

What is deliberately *not* on any list (and why): functions that take a relation, query,
cursor, sequence, file, large object, lock key, setting or role by name; catalog and
privilege introspection (``has_*_privilege``, ``pg_*``, ``obj_description``, ``to_regclass``,
``format_type``, ``version()``, ``current_setting``, ``DATABASE()``, ``USER()``); session
state (``setseed``, ``nextval``/``currval``/``setval``, ``LAST_INSERT_ID``, ``FOUND_ROWS``);
sleeping and benchmarking; XML (``xpath`` and the ``*_to_xml`` family); extension hooks
(``load_extension``, ``fts3_tokenizer``, ``readfile``).

* SQLite: the curated list intersected with what the linked library provides (``PRAGMA
  function_list``): math and JSON functions are build options, and the library that runs the
  statement is the authority on what exists.
* PostgreSQL: every name is a ``pg_catalog`` function of PostgreSQL 15 or one its parser turns
  into an expression (``coalesce``, ``greatest``, ``trim``, ``rollup``, ...);
  ``tests/policy/test_functions.py`` checks them against a live ``pg_proc``. Where the server
  is known, ``read_grants`` also drops names the role lacks EXECUTE on
  (``has_function_privilege``, grid_sql/policy/grants.py).
* MySQL/MariaDB: built-ins of MySQL 8.0 and MariaDB 10.11, probed on the MariaDB server.

Every list holds every function the Spider dev gold (and its transpilations) and the defog
sql-eval gold of its dialect call (``test_functions.py``), and none of the conformance
checker's deny-listed foreign functions. An application policy adds functions only by naming
them (``functions.allow``, grid_sql/policy/config.py), never implicitly.
"""

from __future__ import annotations

from ..dialect import Dialect, UnknownDialectError
from ..dialect.postgresql import PARSER_FUNCTIONS as _PG_SYNTAX  # noqa: F401 - tests read it
from ..errors import LexiconError

# The curated lists live with their dialects (``grid_sql/dialect/<name>.py``, attribute
# ``functions``); the names below are kept for callers and tests.
SQLITE_ALLOWED: frozenset[str] = Dialect.get("sqlite").functions
"""The curated SQLite list, before intersecting with the linked library."""
POSTGRESQL_FUNCTIONS: frozenset[str] = Dialect.get("postgresql").functions
MYSQL_FUNCTIONS: frozenset[str] = Dialect.get("mysql").functions


def _words(block: str) -> frozenset[str]:
    return frozenset(block.split())


# Names that must never be on any list, whatever a future edit adds: the issue-23 findings and
# their families (tests/policy/test_functions.py asserts the lists avoid them).
NEVER_ALLOWED: frozenset[str] = _words(
    """
    table_to_xml table_to_xml_and_xmlschema table_to_xmlschema query_to_xml
    query_to_xml_and_xmlschema query_to_xmlschema cursor_to_xml cursor_to_xmlschema
    database_to_xml database_to_xml_and_xmlschema database_to_xmlschema schema_to_xml
    schema_to_xml_and_xmlschema schema_to_xmlschema ts_stat ts_rewrite pg_read_file
    pg_read_binary_file pg_ls_dir pg_stat_file lo_import lo_export lo_get lo_put lo_from_bytea
    lo_open lo_unlink dblink dblink_exec current_setting set_config pg_advisory_lock
    pg_advisory_xact_lock pg_try_advisory_lock pg_sleep pg_sleep_for pg_sleep_until
    txid_current txid_current_if_assigned pg_current_xact_id nextval currval setval lastval
    setseed current_query current_user session_user current_database current_schema version
    has_table_privilege has_column_privilege to_regclass regclass xpath xml
    sleep benchmark load_file get_lock release_lock release_all_locks is_free_lock
    is_used_lock master_pos_wait database schema user system_user connection_id
    last_insert_id found_rows row_count extractvalue updatexml
    load_extension readfile writefile edit fts3_tokenizer sqlite_version changes
    total_changes last_insert_rowid
    """
)


def dialect_function_names(dialect: str) -> frozenset[str]:
    """The function names a statement of ``dialect`` may call (lower case): the curated
    allow-list (for SQLite, only those the linked library has)."""
    try:
        return Dialect.get(dialect).function_names()
    except UnknownDialectError:
        raise LexiconError(f"no function list for dialect {dialect!r}") from None
