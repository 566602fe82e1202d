"""PostgreSQL: folds bare names to lower case, compares quoted names exactly, lists every
relation to everyone in its catalog (so visibility is asked with ``has_*_privilege``), and
aborts a transaction at its first error.

Read-only and time bounds are transaction-local (``SET TRANSACTION READ ONLY``, ``SET LOCAL
statement_timeout``), so the rollback that ends every read also drops them.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .base import COMMON_AGG, MATH, WINDOW, Dialect, words

_CATALOG = f"""
    {MATH} {WINDOW} {COMMON_AGG}
    acosd acosh asind asinh atan2d atand atanh cbrt cosd cosh cotd div factorial gcd lcm
    min_scale random scale sind sinh tand tanh trim_scale trunc width_bucket
    ascii bit_length btrim char_length character_length chr concat concat_ws convert
    convert_from convert_to decode encode format initcap is_normalized left length like lower
    lpad ltrim md5 normalize octet_length overlay position quote_ident quote_literal
    quote_nullable regexp_count regexp_instr regexp_like regexp_match regexp_matches
    regexp_replace regexp_split_to_array regexp_split_to_table regexp_substr repeat replace
    reverse right rpad rtrim sha224 sha256 sha384 sha512 split_part starts_with
    string_to_array string_to_table strpos substr substring to_ascii to_hex translate unistr
    upper
    age clock_timestamp date_bin date_part date_trunc extract isfinite justify_days
    justify_hours justify_interval make_date make_interval make_time make_timestamp
    make_timestamptz now overlaps statement_timestamp timeofday timezone to_char to_date
    to_number to_timestamp transaction_timestamp
    bool bpchar char date float4 float8 int2 int4 int8 interval numeric text time timestamp
    timestamptz timetz varchar
    array_agg bit_and bit_or bit_xor bool_and bool_or corr covar_pop covar_samp every
    json_agg json_object_agg jsonb_agg jsonb_object_agg mode percentile_cont percentile_disc
    regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy
    regr_syy stddev stddev_pop stddev_samp string_agg var_pop var_samp variance
    array_append array_cat array_dims array_fill array_length array_lower array_ndims
    array_position array_positions array_prepend array_remove array_replace array_to_string
    array_upper cardinality generate_series generate_subscripts trim_array unnest
    array_to_json json_array_elements json_array_elements_text json_array_length
    json_build_array json_build_object json_each json_each_text json_extract_path
    json_extract_path_text json_object json_object_keys json_strip_nulls json_typeof
    jsonb_array_elements jsonb_array_elements_text jsonb_array_length jsonb_build_array
    jsonb_build_object jsonb_each jsonb_each_text jsonb_extract_path jsonb_extract_path_text
    jsonb_insert jsonb_object jsonb_object_keys jsonb_path_exists jsonb_path_match
    jsonb_path_query jsonb_path_query_array jsonb_path_query_first jsonb_pretty jsonb_set
    jsonb_set_lax jsonb_strip_nulls jsonb_typeof row_to_json to_json to_jsonb
    to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank
    ts_rank_cd ts_headline setweight strip numnode tsvector_to_array array_to_tsvector
    ts_delete ts_filter tsquery_phrase
    daterange int4range int8range numrange tsrange tstzrange isempty lower_inc lower_inf
    upper_inc upper_inf range_merge range_agg range_intersect_agg
    gen_random_uuid num_nonnulls num_nulls
"""
# Parsed as expressions, not looked up in pg_proc (gram.y "func_expr_common_subexpr").
PARSER_FUNCTIONS = "coalesce nullif greatest least trim rollup cube grouping"

# 42803: ``column "t2.name" must appear in the GROUP BY clause or be used in an aggregate``
_UNGROUPED = re.compile(r'column "([^"]+)" must appear in the GROUP BY clause')
_TIMEOUT_SQLSTATE = "57014"  # query_canceled (statement_timeout)

# Every user relation's name, owner and ACL, every column's name, type and ACL, schema ACLs,
# role memberships and the current user: what the role's policy is derived from.
_FINGERPRINT = """
SELECT x FROM (
  SELECT 'r' || c.oid::text || ':' || n.nspname || '.' || c.relname || ':' || c.relkind::text
         || ':' || c.relowner::text || ':' || coalesce(c.relacl::text, '') AS x
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f')
    AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
  UNION ALL
  SELECT 'a' || a.attrelid::text || '.' || a.attnum::text || ':' || a.attname || ':'
         || a.atttypid::text || ':' || coalesce(a.attacl::text, '')
  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
    AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
  UNION ALL
  SELECT 'n' || n.oid::text || ':' || n.nspname || ':' || coalesce(n.nspacl::text, '')
  FROM pg_catalog.pg_namespace n
  UNION ALL
  SELECT 'm' || roleid::text || '>' || member::text || ':' || inherit_option::text
  FROM pg_catalog.pg_auth_members
  UNION ALL
  SELECT 'u' || current_user
) f ORDER BY x
"""
_FINGERPRINT_OLD = _FINGERPRINT.replace(" || ':' || inherit_option::text", "")  # before 16


class PostgreSQL(Dialect):
    name = "postgresql"
    aliases = ("postgres", "pg")
    label = "PostgreSQL"
    mask_aggregates = frozenset(
        "array_agg avg bool_and bool_or count every max min stddev stddev_pop stddev_samp "
        "string_agg sum var_pop var_samp variance".split()
    )
    sqlglot = "postgres"

    identifier_quotes = ('"',)
    bare_names_fold_lower = True
    quoted_names_exact = True
    session_words = frozenset(
        "user current_user current_role session_user current_catalog current_schema".split()
    )
    bare_table_row_values = True
    unquoted_names_case_insensitive = True  # folded to lower case before comparing
    cast_types = frozenset(
        "smallint integer int int2 int4 int8 bigint numeric decimal real float float4 float8 "
        "double text varchar char character bpchar boolean bool date time timetz timestamp "
        "timestamptz interval json jsonb uuid bytea money".split()
    )  # `double precision`, `character varying`: the second word is a keyword (type_base)

    system_schemas = frozenset({"information_schema", "pg_catalog", "pg_toast"})
    hidden_schema_prefixes = ("pg_temp", "pg_toast")
    failed_read_aborts_transaction = True

    # PostgreSQL reads a bare ORDER BY alias through the grammar's `output_alias`; an alias
    # inside an ORDER BY expression or in HAVING is an error.
    output_alias_clauses = ("group",)
    backslash_escapes_vary = True
    functions: ClassVar[frozenset[str]] = words(_CATALOG) | words(PARSER_FUNCTIONS)
    # every pg_proc overload has no argument (PostgreSQL 15; not random(): 17 adds
    # random(min, max); not rank() and its kin: hypothetical-set aggregates take arguments)
    niladic_functions: ClassVar[frozenset[str]] = frozenset(
        {
            "clock_timestamp",
            "gen_random_uuid",
            "now",
            "pi",
            "row_number",
            "statement_timestamp",
            "timeofday",
            "transaction_timestamp",
        }
    )
    # set-returning functions of pg_catalog that read no relation (tests/policy/
    # test_table_functions.py checks each on the server: proretset, and the columns a FROM
    # item calling it exposes)
    table_functions: ClassVar[dict[str, tuple[str, ...]]] = {
        "generate_series": (),
        "generate_subscripts": (),
        "unnest": (),
        "regexp_split_to_table": (),
        "json_array_elements": ("value",),
        "json_array_elements_text": ("value",),
        "jsonb_array_elements": ("value",),
        "jsonb_array_elements_text": ("value",),
        "json_each": ("key", "value"),
        "json_each_text": ("key", "value"),
        "jsonb_each": ("key", "value"),
        "jsonb_each_text": ("key", "value"),
        "json_object_keys": (),
        "jsonb_object_keys": (),
    }
    # Functions models borrow that PostgreSQL lacks (checked against the server in tests); its
    # catalog is extensible, so this is a deny-list of certain absences.
    function_replacements: ClassVar[dict[str, str]] = {
        "year": "EXTRACT(YEAR FROM x)",
        "month": "EXTRACT(MONTH FROM x)",
        "day": "EXTRACT(DAY FROM x)",
        "date_format": "to_char(x, 'YYYY-MM-DD')",
        "strftime": "to_char(x, 'YYYY-MM-DD')",
        "julianday": "x::date - y::date (a number of days)",
        "datediff": "x::date - y::date (a number of days)",
        "ifnull": "COALESCE(x, y)",
        "nvl": "COALESCE(x, y)",
        "iif": "CASE WHEN c THEN a ELSE b END",
        "if": "CASE WHEN c THEN a ELSE b END",
        "group_concat": "string_agg(x, ',')",
        "instr": "strpos(s, sub)",
        "locate": "strpos(s, sub)",
        "charindex": "strpos(s, sub)",
        "len": "length(s)",
        "getdate": "now()",
        "curdate": "CURRENT_DATE",
    }
    foreign_function_hints: ClassVar[dict[str, str]] = {
        "dateadd": "x + INTERVAL 'n days'",
        "datepart": "EXTRACT(YEAR FROM x)",
        "isnull": "COALESCE(x, y)",
        "sysdate": "now()",
        "getutcdate": "now()",
    }
    date_idioms: ClassVar[tuple[tuple[frozenset[str], str], ...]] = (
        (frozenset({"extract"}), "EXTRACT(YEAR FROM col)"),
        (frozenset({"date_trunc"}), "DATE_TRUNC('month', col)"),
        (frozenset({"to_char"}), "TO_CHAR(col, 'YYYY-MM')"),
        (frozenset(), "CURRENT_DATE - INTERVAL '30 days'"),
        (frozenset(), "compare with DATE '2020-01-01'"),
        (frozenset(), "casts: CAST(x AS DATE) or x::date, x::text before LIKE"),
    )

    grant_source = "privilege_functions"
    audit_store = True
    sync_drivers: ClassVar[dict[str, str]] = {
        "asyncpg": "psycopg",
        "psycopg": "psycopg",  # psycopg 3 is both
        "psycopg_async": "psycopg",
    }

    # SQLSTATEs of type trouble: undefined_function (an operator or function for these
    # argument types: `date ~~ unknown`), datatype_mismatch, cannot_coerce,
    # invalid_datetime_format, datetime_field_overflow, invalid_text_representation.
    type_error_states: ClassVar[frozenset[str]] = frozenset(
        {"42883", "42804", "42846", "22007", "22008", "22P02"}
    )
    strict_comparison_types = True
    type_error_hint = (
        "PostgreSQL is strict about types: LIKE and text functions need text "
        "(CAST(col AS TEXT) LIKE '2020%'); compare a date or timestamp with a date literal "
        "(col >= DATE '2020-01-01'); take date parts with EXTRACT(YEAR FROM col) or "
        "DATE_TRUNC('month', col); date arithmetic uses intervals "
        "(CURRENT_DATE - INTERVAL '30 days')."
    )

    # ------------------------------------------------------------------ catalog
    def visible_relations(self, conn: Connection) -> set[tuple[str, str]]:
        """Relations the role may touch: schema USAGE plus any table or column privilege.

        ``has_*_privilege`` evaluate membership inheritance and PUBLIC exactly (see
        docs/policy.md), so the lexicon never offers a name the role could not use anyway."""
        rows = conn.execute(
            sa.text(
                "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c "
                "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') "
                "AND has_schema_privilege(n.oid, 'USAGE') "
                "AND (has_table_privilege(c.oid, "
                "'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER') "
                "OR has_any_column_privilege(c.oid, 'SELECT,INSERT,UPDATE,REFERENCES'))"
            )
        )
        return {(r[0], r[1]) for r in rows}

    # ------------------------------------------------------------------ connecting
    def connect_timeouts(self, driver: str, timeout_s: float) -> dict[str, Any]:
        if driver in ("psycopg", "psycopg2", "psycopg_async"):
            # libpq takes whole seconds (and treats anything below 2 as 2).
            return {"connect_timeout": max(2, math.ceil(timeout_s))}
        return {}

    # ------------------------------------------------------------------ execution
    @contextlib.contextmanager
    def guard(self, conn: Connection, *, writes: bool, timeout_s: float) -> Iterator[None]:
        if not writes:
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
        yield

    def is_timeout(self, orig: BaseException | None) -> bool:
        return getattr(orig, "sqlstate", None) == _TIMEOUT_SQLSTATE

    def is_type_error(self, sqlstate: str | None, errno: int | None) -> bool:
        return sqlstate in self.type_error_states

    def is_division_by_zero(self, sqlstate: str | None, errno: int | None) -> bool:
        return sqlstate == "22012"

    def is_cardinality_error(self, sqlstate: str | None, errno: int | None) -> bool:
        return sqlstate == "21000"

    def is_grouping_error(self, sqlstate: str | None, errno: int | None) -> bool:
        return sqlstate == "42803"

    def ungrouped_column(self, message: str) -> str | None:
        m = _UNGROUPED.search(message)
        return None if m is None else m.group(1)

    def fingerprint_queries(self, conn: Connection) -> list[str]:
        info = conn.dialect.server_version_info
        version = int(info[0]) if info else 0
        return [_FINGERPRINT if version >= 16 else _FINGERPRINT_OLD]

    # ------------------------------------------------------------------ audit store
    def audit_lock(self, conn: Connection, key: str) -> None:
        """A transaction-scoped advisory lock (released by the commit or rollback)."""
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        k = int.from_bytes(digest, "big", signed=True)
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": k})

    def audit_extra_guards(self, tables: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{t}_no_truncate", t) for t in tables]

    def install_audit_guards(
        self,
        conn: Connection,
        prefix: str,
        rows: Sequence[tuple[str, str, str]],
        tables: Sequence[str],
        message: str,
    ) -> None:
        fn = f"{prefix}_append_only"
        conn.execute(  # sa.text escapes the '%' placeholders for the driver
            sa.text(
                f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql "
                f"AS $$ BEGIN RAISE EXCEPTION '{message} (% on %)', TG_OP, "
                "TG_TABLE_NAME; END $$"
            )
        )
        have = self.existing_triggers(conn, tables)
        for name, table, op in rows:
            if name not in have:
                conn.exec_driver_sql(
                    f'CREATE TRIGGER "{name}" BEFORE {op} ON "{table}" '
                    f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
                )
        for name, table in self.audit_extra_guards(tables):
            if name not in have:
                conn.exec_driver_sql(
                    f'CREATE TRIGGER "{name}" BEFORE TRUNCATE ON "{table}" '
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
                )

    def existing_triggers(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        rows = conn.execute(
            sa.text(
                "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND c.relname = ANY(:tables) "
                "AND pg_table_is_visible(c.oid)"
            ),
            {"tables": list(tables)},
        )
        return {str(r[0]) for r in rows}
