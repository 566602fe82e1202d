"""Function allow-lists per dialect: the ``FUNCTION_NAME`` lexicon of role grammars and the
only functions the post-parse checker lets through (docs/scope.md, docs/policy.md).

Why an allow-list: a function is code the server runs with the role's rights, and some
built-ins read relations *by name* (PostgreSQL ``table_to_xml('employee', ...)``,
``query_to_xml``, ``ts_stat``), run SQL text, touch files or the network (``pg_read_file``,
``lo_import``, ``LOAD_FILE``), take locks or change session state (``pg_advisory_lock``,
``set_config``, ``GET_LOCK``, ``SLEEP``). A table or column policy means nothing if such a
function can be called, and catalogs grow with every server release and extension, so a
deny-list is always one name short. Each list below is therefore curated and reviewed by
hand: ordinary scalar, aggregate, window, string, date/time, math and JSON functions of the
dialect, each of which computes only from its arguments (or the clock / a random source).

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

from ..errors import LexiconError
from .dialect_calls import sqlite_functions

_MATH = """
    abs acos asin atan atan2 ceil ceiling cos cot degrees exp floor ln log log10 mod pi pow
    power radians round sign sin sqrt tan
"""
_WINDOW = """
    cume_dist dense_rank first_value lag last_value lead nth_value ntile percent_rank rank
    row_number
"""
_COMMON_AGG = "avg count max min sum"

_SQLITE = f"""
    {_MATH} {_WINDOW} {_COMMON_AGG}
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

_POSTGRESQL_CATALOG = f"""
    {_MATH} {_WINDOW} {_COMMON_AGG}
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

# Parsed as expressions, not looked up in pg_proc (PostgreSQL's gram.y "func_expr_common_subexpr").
_PG_SYNTAX = "coalesce nullif greatest least trim rollup cube grouping"

_MYSQL = f"""
    {_MATH} {_WINDOW} {_COMMON_AGG}
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


def _words(block: str) -> frozenset[str]:
    return frozenset(block.split())


SQLITE_ALLOWED: frozenset[str] = _words(_SQLITE)
"""The curated SQLite list, before intersecting with the linked library."""
POSTGRESQL_FUNCTIONS: frozenset[str] = _words(_POSTGRESQL_CATALOG) | _words(_PG_SYNTAX)
MYSQL_FUNCTIONS: frozenset[str] = _words(_MYSQL)

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
    if dialect == "sqlite":
        return SQLITE_ALLOWED & sqlite_functions()
    if dialect == "postgresql":
        return POSTGRESQL_FUNCTIONS
    if dialect == "mysql":
        return MYSQL_FUNCTIONS
    raise LexiconError(f"no function list for dialect {dialect!r}")
