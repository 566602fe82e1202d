"""Function names per dialect: the ``FUNCTION_NAME`` lexicon of role grammars (docs/scope.md).

A called name is its own identifier category (``func_name: FUNCTION_NAME | COLUMN_NAME`` in
``dialects/common.lark``), so under a role grammar the model can only call a function the
dialect has, instead of spelling a blocked column as a call (``Channel_id (``).

* SQLite: exactly what the linked library provides (``PRAGMA function_list``): the library
  that runs the statement is the authority (math/JSON functions are build options).
* PostgreSQL: the callable ``pg_catalog`` functions of PostgreSQL 15 (``pg_proc``: kinds f/a/w,
  no ``internal``/``cstring`` arguments or results, no operator, index-support, aggregate-state,
  type I/O or selectivity implementations), without the ``pg_*`` administration family, large
  objects, upgrade/index internals and ``set_config``; plus the names the parser turns into
  expressions rather than calls (``coalesce``, ``greatest``, ``trim``, ``rollup``, ...).
  ``tests/policy/test_functions.py`` checks every name against a live server's ``pg_proc``.
* MySQL/MariaDB: the built-in functions of MySQL 8.0's function reference and MariaDB 10.11
  (the catalogs do not list built-ins); ``tests/policy/test_functions.py`` calls every name
  on the MariaDB test server (only the MySQL-8-only ones are missing there).

Every list holds every function used by the Spider dev gold (and its transpilations), the
defog sql-eval gold and the grammar fixtures of its dialect (``test_functions.py``), and none
of the conformance checker's deny-listed foreign functions. User-defined functions are not
admitted: a deployment that needs them passes ``extra_functions`` to ``role_grammar``.
"""

from __future__ import annotations

from ..errors import LexiconError
from .conformance import sqlite_functions

_PG_CATALOG = """
    abbrev abs acos acosd acosh age area array_agg array_dims array_fill array_length
    array_lower array_ndims array_position array_positions array_remove array_replace
    array_to_json array_to_string array_to_tsvector array_upper ascii asin asind asinh atan
    atan2 atan2d atand atanh avg bit bit_and bit_count bit_length bit_or bit_xor bool
    bool_and bool_or box bpchar broadcast btrim cardinality cash_words cbrt ceil ceiling
    center char char_length character_length chr cidr circle clock_timestamp col_description
    concat concat_ws convert convert_from convert_to corr cos cosd cosh cot cotd count
    covar_pop covar_samp cume_dist current_database current_query current_schema
    current_schemas current_setting current_user currval cursor_to_xml cursor_to_xmlschema
    database_to_xml database_to_xml_and_xmlschema database_to_xmlschema date date_bin
    date_part date_trunc datemultirange daterange decode degrees dense_rank diagonal
    diameter div encode enum_first enum_last enum_range every exp extract factorial family
    first_value float4 float8 floor format format_type gcd gen_random_uuid generate_series
    generate_subscripts get_bit get_byte get_current_ts_config getdatabaseencoding
    getpgusername has_any_column_privilege has_column_privilege has_database_privilege
    has_foreign_data_wrapper_privilege has_function_privilege has_language_privilege
    has_parameter_privilege has_schema_privilege has_sequence_privilege has_server_privilege
    has_table_privilege has_tablespace_privilege has_type_privilege height host hostmask
    inet_client_addr inet_client_port inet_server_addr inet_server_port initcap int2 int4
    int4multirange int4range int8 int8multirange int8range interval is_normalized isclosed
    isempty isfinite ishorizontal isopen isparallel isperp isvertical json_agg
    json_array_elements json_array_elements_text json_array_length json_build_array
    json_build_object json_each json_each_text json_object json_object_agg json_object_keys
    json_populate_record json_populate_recordset json_strip_nulls json_to_record
    json_to_recordset json_to_tsvector json_typeof jsonb_agg jsonb_array_elements
    jsonb_array_elements_text jsonb_array_length jsonb_build_array jsonb_build_object
    jsonb_each jsonb_each_text jsonb_insert jsonb_object jsonb_object_agg jsonb_object_keys
    jsonb_path_exists jsonb_path_exists_tz jsonb_path_match jsonb_path_match_tz
    jsonb_path_query jsonb_path_query_array jsonb_path_query_array_tz jsonb_path_query_first
    jsonb_path_query_first_tz jsonb_path_query_tz jsonb_populate_record
    jsonb_populate_recordset jsonb_pretty jsonb_set jsonb_set_lax jsonb_strip_nulls
    jsonb_to_record jsonb_to_recordset jsonb_to_tsvector jsonb_typeof justify_days
    justify_hours justify_interval lag last_value lastval lcm lead left length like line ln
    log log10 lower lower_inc lower_inf lpad lseg ltrim macaddr macaddr8 macaddr8_set7bit
    make_date make_interval make_time make_timestamp make_timestamptz masklen max md5 min
    min_scale mod mode money multirange name netmask network nextval normalize now npoints
    nth_value ntile num_nonnulls num_nulls numeric nummultirange numnode numrange
    obj_description octet_length oid oidvectortypes overlaps overlay parse_ident path pclose
    percent_rank percentile_cont percentile_disc pg_column_size pg_size_pretty pg_typeof
    phraseto_tsquery pi plainto_tsquery point polygon popen position pow power query_to_xml
    query_to_xml_and_xmlschema query_to_xmlschema querytree quote_ident quote_literal
    quote_nullable radians radius random range_agg range_intersect_agg range_merge rank
    regclass regexp_count regexp_instr regexp_like regexp_match regexp_matches
    regexp_replace regexp_split_to_array regexp_split_to_table regexp_substr regr_avgx
    regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy repeat
    replace reverse right round row_number row_to_json rpad rtrim scale schema_to_xml
    schema_to_xml_and_xmlschema schema_to_xmlschema session_user set_bit set_byte
    set_masklen setseed setval setweight sha224 sha256 sha384 sha512 shobj_description sign
    sin sind sinh slope split_part sqrt statement_timestamp stddev stddev_pop stddev_samp
    string_agg string_to_array string_to_table strip strpos substr substring sum
    table_to_xml table_to_xml_and_xmlschema table_to_xmlschema tan tand tanh text time
    timeofday timestamp timestamptz timetz timezone to_ascii to_char to_date to_hex to_json
    to_jsonb to_number to_regclass to_regcollation to_regnamespace to_regoper to_regoperator
    to_regproc to_regprocedure to_regrole to_regtype to_timestamp to_tsquery to_tsvector
    transaction_timestamp translate trim_array trim_scale trunc ts_delete ts_filter
    ts_headline ts_lexize ts_parse ts_rank ts_rank_cd ts_rewrite ts_stat ts_token_type
    tsmultirange tsquery_phrase tsrange tstzmultirange tstzrange tsvector_to_array unistr
    unnest upper upper_inc upper_inf var_pop var_samp varbit varchar variance version
    websearch_to_tsquery width width_bucket xid xml xml_is_well_formed
    xml_is_well_formed_content xml_is_well_formed_document xmlagg xmlcomment xmlexists
    xmlvalidate xpath xpath_exists
"""

# Parsed as expressions, not looked up in pg_proc (PostgreSQL's gram.y "func_expr_common_subexpr").
_PG_SYNTAX = """
    coalesce nullif greatest least trim rollup cube grouping xmlconcat xmlelement xmlforest
    xmlparse xmlpi xmlroot xmlserialize xmlattributes
"""

_MYSQL = """
    abs acos adddate addtime aes_decrypt aes_encrypt any_value ascii asin atan atan2 avg
    benchmark bin bin_to_uuid bit_and bit_count bit_length bit_or bit_xor ceil ceiling char
    char_length character_length charset chr coalesce coercibility collation compress concat
    concat_ws connection_id conv convert convert_tz cos cot count crc32 crc32c cume_dist
    curdate current_date current_role current_time current_timestamp current_user curtime
    database date date_add date_format date_sub datediff day dayname dayofmonth dayofweek
    dayofyear decode default degrees dense_rank elt encode exp export_set extract
    extractvalue field find_in_set first_value floor format format_bytes format_pico_time
    found_rows from_base64 from_days from_unixtime get_format get_lock greatest group_concat
    grouping hex hour if ifnull inet6_aton inet6_ntoa inet_aton inet_ntoa insert instr
    interval is_free_lock is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6 is_used_lock is_uuid
    isnull json_array json_array_append json_array_insert json_arrayagg json_compact
    json_contains json_contains_path json_depth json_detailed json_equals json_exists
    json_extract json_insert json_keys json_length json_loose json_merge json_merge_patch
    json_merge_preserve json_normalize json_object json_objectagg json_overlaps json_pretty
    json_query json_quote json_remove json_replace json_schema_valid
    json_schema_validation_report json_search json_set json_storage_free json_storage_size
    json_table json_type json_unquote json_valid json_value lag last_day last_insert_id
    last_value lcase lead least left length lengthb ln load_file localtime localtimestamp
    locate log log10 log2 lower lpad ltrim make_set makedate maketime master_pos_wait max
    md5 median microsecond mid min minute mod month monthname name_const now nth_value ntile
    nullif nvl nvl2 oct octet_length ord percent_rank percentile_cont percentile_disc
    period_add period_diff pi position pow power quarter quote radians rand random_bytes
    rank regexp_instr regexp_like regexp_replace regexp_substr release_all_locks
    release_lock repeat replace reverse right roles_graphml round row_count row_number
    rownum rpad rtrim schema sec_to_time second session_user sformat sha sha1 sha2 sign sin
    sleep soundex space sqrt st_area st_astext st_buffer st_contains st_distance
    st_distance_sphere st_geomfromtext st_intersects st_length st_point st_within st_x st_y
    statement_digest statement_digest_text std stddev stddev_pop stddev_samp str_to_date
    strcmp subdate substr substring substring_index subtime sum sys_guid sysdate system_user
    tan time time_format time_to_sec timediff timestamp timestampadd timestampdiff to_base64
    to_char to_days to_seconds trim truncate ucase uncompress uncompressed_length unhex
    unix_timestamp updatexml upper user utc_date utc_time utc_timestamp uuid uuid_short
    uuid_to_bin validate_password_strength values var_pop var_samp variance version
    wait_for_executed_gtid_set week weekday weekofyear weight_string year yearweek
"""


def _words(block: str) -> frozenset[str]:
    return frozenset(block.split())


POSTGRESQL_FUNCTIONS: frozenset[str] = _words(_PG_CATALOG) | _words(_PG_SYNTAX)
MYSQL_FUNCTIONS: frozenset[str] = _words(_MYSQL)


def dialect_function_names(dialect: str) -> frozenset[str]:
    """The function names a statement of ``dialect`` may call (lower case)."""
    if dialect == "sqlite":
        return sqlite_functions()
    if dialect == "postgresql":
        return POSTGRESQL_FUNCTIONS
    if dialect == "mysql":
        return MYSQL_FUNCTIONS
    raise LexiconError(f"no function list for dialect {dialect!r}")
