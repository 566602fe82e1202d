"""SQLite: an embedded library, so the library itself answers what exists.

Names compare case-insensitively whether quoted or not (and ``"``, backticks and ``[..]`` all
quote); no privilege system (the baseline is "everything", narrowed by configuration); a read
is made read-only with ``PRAGMA query_only`` and bounded by a progress handler, since SQLite
has no statement timeout; the function and aggregate lists are asked of the linked library
(``pragma_function_list``), because math and JSON functions are build options.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Inspector

from .base import COMMON_AGG, MATH, WINDOW, Dialect, words

_FUNCTIONS = f"""
    {MATH} {WINDOW} {COMMON_AGG}
    acosh asinh atanh cosh sinh tanh log2 trunc
    char coalesce concat concat_ws format glob group_concat hex ifnull iif instr length like
    likelihood likely lower ltrim nullif octet_length printf quote replace rtrim soundex
    string_agg substr substring trim typeof unhex unicode unlikely upper zeroblob random
    randomblob total
    date datetime julianday strftime time timediff unixepoch
    json json_array json_array_length json_extract json_group_array json_group_object
    json_insert json_object json_patch json_quote json_remove json_replace json_set json_type
    json_valid
"""


def _library_names(pragma: str) -> frozenset[str]:
    """The lower-case names a ``pragma_*`` listing of the linked library holds."""
    con = sqlite3.connect(":memory:")
    try:
        return frozenset(r[0].lower() for r in con.execute(f"SELECT name FROM {pragma}"))
    finally:
        con.close()


@functools.lru_cache(maxsize=1)
def library_functions() -> frozenset[str]:
    """Every function the linked SQLite library provides (``PRAGMA function_list``)."""
    return _library_names("pragma_function_list")


@functools.lru_cache(maxsize=1)
def library_modules() -> frozenset[str]:
    """The virtual-table modules of the linked SQLite library (``PRAGMA module_list``)."""
    return _library_names("pragma_module_list")


@functools.lru_cache(maxsize=1)
def library_aggregates() -> frozenset[tuple[str, int]]:
    """(name, argument count) of the linked SQLite's aggregate functions; count -1 = any.
    Window-only functions (``rank``, ``lag``, ...) are listed as window functions but are no
    aggregates: left out."""
    con = sqlite3.connect(":memory:")
    try:
        rows = con.execute(
            "SELECT name, narg FROM pragma_function_list WHERE type IN ('a', 'w')"
        ).fetchall()
    finally:
        con.close()
    window_only = words(WINDOW)
    return frozenset((str(n).lower(), int(k)) for n, k in rows if n.lower() not in window_only)


class SQLite(Dialect):
    name = "sqlite"
    aliases = ("sqlite3",)
    label = "SQLite"
    sqlglot = "sqlite"

    identifier_quotes = ('"', "`", "[")
    unquoted_names_case_insensitive = True
    # any word sequence is a SQLite type (affinity by substring); these are the ones that
    # name what they convert to
    cast_types = frozenset(
        "integer int bigint smallint tinyint real float double numeric decimal text varchar "
        "char character boolean date datetime blob".split()
    )
    unknown_quoted_names_are_strings = True
    output_alias_clauses = ("where", "group", "having", "order")
    bare_names_search_every_schema = True  # temp, main, then attached databases
    declared_types_are_affinities = True
    # min/max with two or more arguments are scalar functions here
    mask_aggregates = frozenset({"avg", "count", "group_concat", "sum", "total"})
    fresh_aliases = True
    group_order_see_own_select_only = True
    table_comments = False
    implicit_schemas = frozenset({"main", "temp"})
    embedded = True
    aggregate_needs_grouping = True
    functions: ClassVar[frozenset[str]] = words(_FUNCTIONS)
    # zero-argument functions (``PRAGMA function_list``: narg 0 only)
    niladic_functions: ClassVar[frozenset[str]] = frozenset(
        {"cume_dist", "dense_rank", "percent_rank", "pi", "random", "rank", "row_number"}
    )
    # the JSON table-valued functions (virtual-table modules of the linked library; never
    # dbstat or the pragma_* tables, which read the database's own structure)
    table_functions: ClassVar[dict[str, tuple[str, ...]]] = {
        name: ("key", "value", "type", "atom", "id", "parent", "fullkey", "path", "json", "root")
        for name in ("json_each", "json_tree")
    }
    # What to write instead of a function the library lacks (the library decides what is
    # missing: :meth:`linked_functions`).
    function_replacements: ClassVar[dict[str, str]] = {
        "year": "strftime('%Y', x)",
        "month": "strftime('%m', x)",
        "day": "strftime('%d', x)",
        "hour": "strftime('%H', x)",
        "date_format": "strftime('%Y-%m-%d', x)",
        "to_char": "strftime('%Y-%m-%d', x)",
        "date_trunc": "strftime('%Y-%m-01', x)",
        "extract": "strftime('%Y', x)",
        "datediff": "julianday(x) - julianday(y)",
        "timestampdiff": "julianday(x) - julianday(y)",
        "now": "datetime('now')",
        "getdate": "datetime('now')",
        "curdate": "date('now')",
        "concat": "a || b",
        "left": "substr(s, 1, n)",
        "right": "substr(s, -n)",
        "len": "length(s)",
        "char_length": "length(s)",
        "isnull": "ifnull(x, y)",
        "nvl": "ifnull(x, y)",
        "if": "iif(c, a, b) or CASE WHEN c THEN a ELSE b END",
        "string_agg": "group_concat(x, ',')",
        "locate": "instr(s, sub)",
        "charindex": "instr(s, sub)",
        "position": "instr(s, sub)",
        "to_date": "date(x)",
        "str_to_date": "date(x)",
    }
    foreign_function_hints: ClassVar[dict[str, str]] = {
        "dateadd": "date(x, '+n days')",
        "datepart": "strftime('%Y', x)",
        "isnull": "ifnull(x, y)",
        "sysdate": "datetime('now')",
        "getutcdate": "datetime('now')",
    }
    date_idioms: ClassVar[tuple[tuple[frozenset[str], str], ...]] = (
        (frozenset(), "dates are text 'YYYY-MM-DD'"),
        (frozenset({"strftime"}), "strftime('%Y', col)"),
        (frozenset({"date"}), "date('now', '-30 days')"),
        (frozenset({"julianday"}), "julianday(a) - julianday(b)"),
        (frozenset(), "casts: CAST(x AS INTEGER)"),
    )
    grant_source = "none"
    audit_store = True
    sync_drivers: ClassVar[dict[str, str]] = {"aiosqlite": "pysqlite"}

    def linked_functions(self) -> frozenset[str]:
        return library_functions()

    def table_function_names(
        self, allowed: frozenset[str], banned: frozenset[str]
    ) -> frozenset[str]:
        """The JSON table-valued functions the linked library has (``PRAGMA module_list``):
        they are modules, not functions, so the function allow-list does not list them; an
        application policy that bans one by name still removes it."""
        return (frozenset(self.table_functions) & library_modules()) - banned

    def linked_aggregates(self) -> frozenset[tuple[str, int]]:
        return library_aggregates()

    def reflection_context(
        self, insp: Inspector, schema: str, names: Sequence[str]
    ) -> contextlib.AbstractContextManager[None]:
        return _table_sql(insp, schema, names)

    # ------------------------------------------------------------------ connecting
    def missing_database_file(self, url: URL) -> Path | None:
        db = url.database or ""
        uri = str(url.query.get("uri", "")).lower() in ("true", "1")
        if uri:
            mode = str(url.query.get("mode", ""))
            if mode in ("memory", "rwc") or not db.startswith("file:"):
                return None
            db = db[len("file:") :]
        if not db or db == ":memory:":
            return None
        p = Path(db).expanduser()
        return None if p.exists() else p

    def engine_options(self, url: URL, timeout_s: float, opts: dict[str, Any]) -> dict[str, Any]:
        return dict(opts)  # a file, no connection to lose or server to wait for

    # ------------------------------------------------------------------ execution
    @contextlib.contextmanager
    def guard(self, conn: Connection, *, writes: bool, timeout_s: float) -> Iterator[None]:
        """``query_only`` for reads, and a progress handler that interrupts past the
        deadline; waiting for another writer's lock counts against the same deadline."""
        deadline = time.monotonic() + timeout_s
        read_only = not writes
        raw: Any = conn.connection.dbapi_connection
        prev_qo = raw.execute("PRAGMA query_only").fetchone()[0]
        prev_busy = raw.execute("PRAGMA busy_timeout").fetchone()[0]
        raw.execute(f"PRAGMA busy_timeout = {max(1, int((deadline - time.monotonic()) * 1000))}")
        if read_only:
            raw.execute("PRAGMA query_only = ON")

        def handler() -> int:
            return 1 if time.monotonic() > deadline else 0

        if not read_only and not raw.in_transaction:
            # pysqlite opens a transaction implicitly before INSERT/UPDATE/DELETE only: DDL
            # would run in autocommit and survive the rollback (of a failed write, or a dry run)
            raw.execute("BEGIN")
        raw.set_progress_handler(handler, 1000)
        try:
            yield
        finally:
            raw.set_progress_handler(None, 0)
            raw.execute(f"PRAGMA busy_timeout = {int(prev_busy)}")
            if read_only and not prev_qo:
                raw.execute("PRAGMA query_only = OFF")

    def is_timeout(self, orig: BaseException | None) -> bool:
        # the progress handler, or a lock held past the busy timeout
        text = str(orig).lower()
        return "interrupted" in text or "database is locked" in text

    def fingerprint_queries(self, conn: Connection) -> list[str]:
        return ["PRAGMA schema_version"]  # no grants: only the schema can change

    # ------------------------------------------------------------------ audit store
    def audit_lock(self, conn: Connection, key: str) -> None:
        # the file's write lock from the start, so a reader never has to upgrade and lose
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    def install_audit_guards(
        self,
        conn: Connection,
        prefix: str,
        rows: Sequence[tuple[str, str, str]],
        tables: Sequence[str],
        message: str,
    ) -> None:
        for name, table, op in rows:
            conn.exec_driver_sql(
                f'CREATE TRIGGER IF NOT EXISTS "{name}" BEFORE {op} ON "{table}" '
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )

    def existing_triggers(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        rows = conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        return {str(r[0]) for r in rows}


# ---------------------------------------------------------------------------- reflection
# The CREATE statements of the tables being reflected, read in one query.
_TABLE_SQL: contextvars.ContextVar[dict[tuple[str | None, str], str] | None] = (
    contextvars.ContextVar("grid_sql_sqlite_table_sql", default=None)
)
_PATCHED = False


@contextlib.contextmanager
def _table_sql(insp: Inspector, schema: str, names: Sequence[str]) -> Iterator[None]:
    """Serve SQLAlchemy's per-table ``CREATE`` statement lookups from one query.

    Why: SQLAlchemy's SQLite dialect reads a table's ``CREATE`` statement with one query
    per table, for the primary key and again for the foreign keys, and each query scans
    ``sqlite_master`` (it has no index on names): reflection was quadratic in the table
    count (2,011 tables 1.6 s, 10,011 tables 39 s; profile in bench/RESULTS-big-catalog.md).
    Here the statements are read once; the dialect's lookup is wrapped (once per process)
    to answer from them while this context is active and to call the original otherwise,
    so the result is what the dialect itself would compute."""
    if len(names) < 2:
        yield
        return
    _patch_sqlalchemy()
    bind = insp.bind
    assert isinstance(bind, Connection)
    prep = insp.dialect.identifier_preparer
    prefix = "" if schema in (None, "main") else f"{prep.quote_identifier(schema)}."
    rows = bind.exec_driver_sql(
        f"SELECT name, sql FROM {prefix}sqlite_master WHERE type IN ('table', 'view')"
    )
    wanted = set(names)
    found: dict[tuple[str | None, str], str] = {
        (schema, r[0]): r[1] for r in rows if r[0] in wanted and r[1] is not None
    }
    if schema == "main":  # SQLAlchemy may ask for the default schema as None
        found.update({(None, k[1]): v for k, v in list(found.items())})
    token = _TABLE_SQL.set(found)
    try:
        yield
    finally:
        _TABLE_SQL.reset(token)


def _patch_sqlalchemy() -> None:
    global _PATCHED
    if _PATCHED:
        return
    from sqlalchemy.dialects.sqlite.base import SQLiteDialect

    original = SQLiteDialect._get_table_sql

    def _get_table_sql(
        self: Any, connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> Any:
        pre = _TABLE_SQL.get()
        if pre is not None:
            hit = pre.get((schema, table_name))
            if hit is not None:
                return hit
        return original(self, connection, table_name, schema=schema, **kw)

    SQLiteDialect._get_table_sql = _get_table_sql  # type: ignore[method-assign]
    _PATCHED = True
