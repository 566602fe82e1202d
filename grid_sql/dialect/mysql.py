"""MySQL and MariaDB: backtick quoting, ``#`` and ``-- `` comments, ``@x`` user variables,
grants read with ``SHOW GRANTS``, DDL that commits implicitly, and a session variable (not a
transaction-local one) for the statement timeout, whose name differs between the two servers.

The catalog already hides what the user has no privilege on, but refuses ``SHOW CREATE
TABLE`` to column-only users and ``SHOW TABLES`` for databases reached only through PUBLIC,
so reflection falls back to ``information_schema`` there (:attr:`partial_catalog_reads`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as sa_mysql
from sqlalchemy.engine import Connection

from ..errors import AuditError
from .base import COMMON_AGG, MATH, WINDOW, Dialect, words

_FUNCTIONS = f"""
    {MATH} {WINDOW} {COMMON_AGG}
    conv crc32 log2 rand truncate
    ascii bin bit_length char char_length character_length chr concat concat_ws elt
    export_set field find_in_set format from_base64 hex insert instr lcase left length lengthb
    locate lower lpad ltrim make_set md5 mid oct octet_length ord position quote
    regexp_instr regexp_like regexp_replace regexp_substr repeat replace reverse right rpad
    rtrim sformat sha sha1 sha2 soundex space strcmp substr substring substring_index
    to_base64 to_char trim ucase unhex upper convert
    adddate addtime convert_tz curdate current_date current_time current_timestamp curtime
    date date_add date_format date_sub datediff day dayname dayofmonth dayofweek dayofyear
    extract from_days from_unixtime get_format hour last_day localtime localtimestamp
    makedate maketime microsecond minute month monthname now period_add period_diff quarter
    sec_to_time second str_to_date subdate subtime sysdate time time_format time_to_sec
    timediff timestamp timestampadd timestampdiff to_days to_seconds unix_timestamp utc_date
    utc_time utc_timestamp week weekday weekofyear year yearweek
    coalesce greatest if ifnull interval isnull least nullif nvl nvl2
    any_value bit_and bit_or bit_xor group_concat grouping json_arrayagg json_objectagg
    median percentile_cont percentile_disc std stddev stddev_pop stddev_samp var_pop
    var_samp variance
    json_array json_array_append json_array_insert json_compact json_contains
    json_contains_path json_depth json_detailed json_equals json_exists json_extract
    json_insert json_keys json_length json_loose json_merge json_merge_patch
    json_merge_preserve json_normalize json_object json_overlaps json_pretty json_query
    json_quote json_remove json_replace json_search json_set json_type json_unquote
    json_valid json_value
    uuid values
"""

# 1055 as MariaDB (``'db.T.name' isn't in GROUP BY``) and MySQL (``... contains
# nonaggregated column 'db.t.name' which is not functionally dependent ...``) write it
_UNGROUPED = re.compile(r"'([^']+)' isn't in GROUP BY|nonaggregated column '([^']+)'")
_TIMEOUT_ERRNOS = frozenset({1969, 3024})  # MariaDB max_statement_time, MySQL max_execution_time
_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")
_COLUMNS = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS"
    f" WHERE TABLE_SCHEMA NOT IN ({', '.join(repr(s) for s in _SYSTEM)})"
    " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
)


class MySQL(Dialect):
    name = "mysql"
    aliases = ("mariadb",)
    label = "MySQL/MariaDB"
    mask_aggregates = frozenset(
        "avg bit_and bit_or bit_xor count group_concat max min std stddev stddev_pop "
        "stddev_samp sum var_pop var_samp variance".split()
    )
    sqlglot = "mysql"
    # MySQL compares column names case-insensitively; sqlglot's default for MySQL is
    # case-sensitive, which would report `Title` vs `title` as an unknown column.
    sqlglot_settings = "normalization_strategy = case_insensitive"

    identifier_quotes = ("`",)
    # CAST/CONVERT targets both MySQL 8 and MariaDB 10.x take (`SIGNED INTEGER`: two words;
    # not JSON or YEAR, which MariaDB does not convert to)
    cast_types = frozenset(
        "signed unsigned integer int char nchar binary decimal double float date datetime "
        "time".split()
    )
    system_schemas = frozenset(_SYSTEM)
    partial_catalog_reads = True
    catalog_hides_unreadable_columns = True
    dual_table = True
    # TIMESTAMPDIFF / TIMESTAMPADD units (the grammar reads them as column references)
    keyword_arguments: ClassVar[frozenset[str]] = frozenset(
        {"microsecond", "second", "minute", "hour", "day", "week", "month", "quarter", "year"}
    )

    output_alias_clauses = ("group", "having", "order")
    hash_comments = True
    dash_comment_needs_space = True
    backslash_escapes_vary = True
    double_quoted_strings = True
    user_variables = True
    functions: ClassVar[frozenset[str]] = words(_FUNCTIONS)
    # an argument is a syntax or parameter-count error (MySQL 8, MariaDB 10.11; not now(),
    # curtime(), rand(): they take a precision or a seed)
    niladic_functions: ClassVar[frozenset[str]] = frozenset(
        {
            "cume_dist",
            "curdate",
            "dense_rank",
            "percent_rank",
            "pi",
            "rank",
            "row_number",
            "utc_date",
            "uuid",
        }
    )
    # Functions models borrow that MySQL/MariaDB lack (checked against the server in tests);
    # the catalog is extensible, so this is a deny-list of certain absences.
    function_replacements: ClassVar[dict[str, str]] = {
        "strftime": "DATE_FORMAT(x, '%Y-%m-%d')",
        "julianday": "TO_DAYS(x)",
        "date_trunc": "DATE_FORMAT(x, '%Y-%m-01')",
        "date_part": "EXTRACT(YEAR FROM x)",
        "string_agg": "GROUP_CONCAT(x SEPARATOR ',')",
        "iif": "IF(c, a, b)",
        "len": "CHAR_LENGTH(s)",
        "getdate": "NOW()",
        "charindex": "LOCATE(sub, s)",
        "generate_series": "a recursive CTE",
        "age": "TIMESTAMPDIFF(YEAR, x, y)",
    }
    foreign_function_hints: ClassVar[dict[str, str]] = {
        "dateadd": "DATE_ADD(x, INTERVAL n DAY)",
        "datepart": "EXTRACT(YEAR FROM x)",
        "getutcdate": "UTC_TIMESTAMP()",
    }
    date_idioms: ClassVar[tuple[tuple[frozenset[str], str], ...]] = (
        (frozenset({"year", "month"}), "YEAR(col), MONTH(col)"),
        (frozenset({"date_format"}), "DATE_FORMAT(col, '%Y-%m')"),
        (frozenset({"date_sub", "curdate"}), "DATE_SUB(CURDATE(), INTERVAL 30 DAY)"),
        (frozenset({"datediff"}), "DATEDIFF(a, b)"),
        (frozenset(), "compare with '2020-01-01'"),
        (frozenset(), "casts: CAST(x AS DATE), CAST(x AS CHAR)"),
    )
    distinct_takes_one_expression = False

    grant_source = "show_grants"
    explicit_begin = True
    ddl_commits_implicitly = True
    kill_capped_reads = True
    audit_store = True
    audit_long_types = (sa_mysql.LONGTEXT, sa_mysql.LONGBLOB)
    sync_drivers: ClassVar[dict[str, str]] = {"aiomysql": "pymysql", "asyncmy": "pymysql"}

    # Truncated incorrect value (1292), incorrect datetime value for a function (1411),
    # incorrect value for a column (1366).
    type_error_errnos: ClassVar[frozenset[int]] = frozenset({1292, 1411, 1366})
    type_error_hint = (
        "MySQL dates: YEAR(col), MONTH(col), DATE_FORMAT(col, '%Y-%m'), "
        "DATE_SUB(CURDATE(), INTERVAL 30 DAY), DATEDIFF(a, b); casts: CAST(x AS DATE), "
        "CAST(x AS CHAR)."
    )

    # ------------------------------------------------------------------ catalog
    def extra_schema_names(self, conn: Connection) -> list[str]:
        """MariaDB's SHOW DATABASES omits databases reachable only through grants TO
        PUBLIC; information_schema.TABLES lists every table the user may use."""
        rows = conn.execute(sa.text("SELECT DISTINCT TABLE_SCHEMA FROM information_schema.TABLES"))
        return [r[0] for r in rows]

    def exact_names(self, conn: Connection) -> bool:
        """Database and table names compare byte for byte when ``lower_case_table_names``
        is 0 (the default on Linux; 1 stores them lower-cased and 2 compares them
        lower-cased, both case-insensitive)."""
        row = conn.execute(sa.text("SELECT @@lower_case_table_names")).first()
        return row is not None and int(row[0]) == 0

    def selected_schemas(self, conn: Connection) -> list[str] | None:
        """The database the connection selected: a login often sees many, and an
        unqualified name resolves in the selected one only."""
        row = conn.execute(sa.text("SELECT DATABASE()")).first()
        return [row[0]] if row is not None and row[0] else None

    # ------------------------------------------------------------------ connecting
    def connect_timeouts(self, driver: str, timeout_s: float) -> dict[str, Any]:
        if driver in ("pymysql", "mysqldb"):
            # PyMySQL reads the server's greeting with no bound unless read_timeout is set; a
            # statement's own bound is set per call (schema/faults.py answer_deadline).
            return {
                "connect_timeout": timeout_s,
                "read_timeout": timeout_s,
                "write_timeout": timeout_s,
            }
        return {}

    # ------------------------------------------------------------------ execution
    @contextlib.contextmanager
    def guard(self, conn: Connection, *, writes: bool, timeout_s: float) -> Iterator[None]:
        # SQLAlchemy's begin() emits nothing for MySQL drivers: the START TRANSACTION here is
        # the transaction it tracks, ended by its commit()/rollback().
        conn.exec_driver_sql("START TRANSACTION READ ONLY" if not writes else "START TRANSACTION")
        with _session_timeout(conn, timeout_s):
            yield

    def is_timeout(self, orig: BaseException | None) -> bool:
        args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
        return bool(args) and args[0] in _TIMEOUT_ERRNOS

    def is_type_error(self, sqlstate: str | None, errno: int | None) -> bool:
        return errno in self.type_error_errnos

    def is_cardinality_error(self, sqlstate: str | None, errno: int | None) -> bool:
        return errno == 1242  # ER_SUBQUERY_NO_1_ROW

    def is_grouping_error(self, sqlstate: str | None, errno: int | None) -> bool:
        # ER_WRONG_FIELD_WITH_GROUP under sql_mode ONLY_FULL_GROUP_BY (MySQL's default since
        # 5.7; MariaDB's only when set); 1140 (no GROUP BY at all) is not fixed: no guess
        return errno == 1055

    def ungrouped_column(self, message: str) -> str | None:
        m = _UNGROUPED.search(message)
        if m is None:
            return None
        # db.table.column, the table as the statement wrote it
        parts = (m.group(1) or m.group(2)).split(".")
        return ".".join(parts[-2:])

    def fingerprint_queries(self, conn: Connection) -> list[str]:
        return ["SHOW GRANTS", _COLUMNS]

    # ------------------------------------------------------------------ audit store
    def audit_lock(self, conn: Connection, key: str) -> None:
        """A named lock (DDL commits implicitly here, so no transaction-scoped one)."""
        got = conn.execute(sa.text("SELECT GET_LOCK(:n, 60)"), {"n": f"{key}_w"[:64]}).scalar()
        if got != 1:
            raise AuditError(f"cannot take the audit store's write lock ({got!r})")

    def audit_unlock(self, conn: Connection, key: str) -> None:
        conn.execute(sa.text("SELECT RELEASE_LOCK(:n)"), {"n": f"{key}_w"[:64]})
        conn.commit()

    def install_audit_guards(
        self,
        conn: Connection,
        prefix: str,
        rows: Sequence[tuple[str, str, str]],
        tables: Sequence[str],
        message: str,
    ) -> None:
        have = self.existing_triggers(conn, tables)
        for name, table, op in rows:
            if name not in have:
                conn.exec_driver_sql(
                    f"CREATE TRIGGER `{name}` BEFORE {op} ON `{table}` FOR EACH ROW "
                    f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{message}'"
                )

    def existing_triggers(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        rows = conn.execute(
            sa.text(
                "SELECT trigger_name FROM information_schema.triggers "
                "WHERE trigger_schema = DATABASE() AND event_object_table IN :tables"
            ).bindparams(sa.bindparam("tables", expanding=True)),
            {"tables": list(tables)},
        )
        return {str(r[0]) for r in rows}


@contextlib.contextmanager
def _session_timeout(conn: Connection, timeout_s: float) -> Iterator[None]:
    """Session timeout for the next statement, restored afterwards (MariaDB or MySQL)."""
    mariadb = bool(getattr(conn.dialect, "is_mariadb", False))
    var = "max_statement_time" if mariadb else "max_execution_time"
    value: float | int = round(timeout_s, 3) if mariadb else max(1, int(timeout_s * 1000))
    prev = conn.exec_driver_sql(f"SELECT @@SESSION.{var}").scalar()
    conn.exec_driver_sql(f"SET SESSION {var} = {value}")
    try:
        yield
    finally:
        try:
            conn.exec_driver_sql(f"SET SESSION {var} = {prev}")
        except sa.exc.DBAPIError:  # pragma: no cover - connection already broken
            conn.invalidate()
