"""The dialect registry and the settings every caller relies on (no server needed)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import sqlglot

from grid_sql.dialect import Dialect, MySQL, PostgreSQL, SQLite, UnknownDialectError, get_dialect
from grid_sql.errors import GrammarError, LexiconError
from grid_sql.grammar.dialects import DIALECTS, canonical_dialect, dialects_dir
from grid_sql.policy.functions import NEVER_ALLOWED, dialect_function_names


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("sqlite", SQLite),
        ("SQLite3", SQLite),
        ("postgresql", PostgreSQL),
        ("Postgres", PostgreSQL),
        ("pg", PostgreSQL),
        ("mysql", MySQL),
        ("MariaDB", MySQL),
    ],
)
def test_names_and_aliases_find_one_shared_object(name: str, cls: type[Dialect]) -> None:
    d = Dialect.get(name)
    assert type(d) is cls
    assert d is get_dialect(cls.name) is Dialect.get(d)
    assert canonical_dialect(name) == cls.name


def test_unknown_dialect_is_a_typed_error() -> None:
    with pytest.raises(UnknownDialectError, match="unknown SQL dialect 'oracle'.*sqlite"):
        Dialect.get("oracle")
    # the grammar registry raised GrammarError before dialects were objects
    with pytest.raises(GrammarError):
        canonical_dialect("oracle")
    assert Dialect.find("oracle") is None
    with pytest.raises(LexiconError):
        dialect_function_names("oracle")


def test_a_name_taken_twice_is_refused_and_registers_nothing() -> None:
    with pytest.raises(TypeError, match="already names"):

        class Imposter(Dialect):  # noqa: F841 - refused at class creation
            name = "duckdb_test_only"
            aliases = ("postgres",)

    assert Dialect.find("duckdb_test_only") is None


def test_every_dialect_has_a_grammar_and_a_sqlglot_dialect() -> None:
    assert DIALECTS == Dialect.names() == ("sqlite", "postgresql", "mysql")
    for name in DIALECTS:
        d = Dialect.get(name)
        assert (dialects_dir() / f"{name}.lark").is_file()
        assert sqlglot.Dialect.get_or_raise(d.sqlglot) is not None
        assert d.label and d.grant_source in ("none", "privilege_functions", "show_grants")


def test_of_reads_the_engine_backend_name() -> None:
    assert Dialect.of(sa.create_engine("sqlite://")) is Dialect.get("sqlite")
    assert Dialect.of(sa.create_engine("mysql+pymysql://u@h/db")) is Dialect.get("mysql")
    assert Dialect.of(sa.create_engine("mariadb+pymysql://u@h/db")) is Dialect.get("mysql")


def test_folding_of_names() -> None:
    pg, my, lite = Dialect.get("postgresql"), Dialect.get("mysql"), Dialect.get("sqlite")
    assert pg.fold("Album") == "album" and pg.fold("Album", quoted=True) == "Album"
    assert my.fold("Album", quoted=True) == lite.fold("Album", quoted=True) == "album"
    # a bare spelling names a mixed-case catalog name only where bare names do not fold
    assert not pg.bare_spelling_names("Album") and pg.bare_spelling_names("album")
    assert my.bare_spelling_names("Album") and lite.bare_spelling_names("Album")


def test_system_schemas() -> None:
    pg, my = Dialect.get("postgresql"), Dialect.get("mysql")
    assert pg.is_system_schema("pg_catalog") and pg.is_system_schema("pg_temp_3")
    assert not pg.is_system_schema("public")
    assert my.is_system_schema("performance_schema") and not my.is_system_schema("shop")
    assert not Dialect.get("sqlite").is_system_schema("main")


def test_function_lists_are_curated_and_sqlite_asks_its_library() -> None:
    for name in DIALECTS:
        d = Dialect.get(name)
        assert not d.functions & NEVER_ALLOWED
        assert dialect_function_names(name) == d.function_names() <= d.functions
    lite = Dialect.get("sqlite")
    linked = lite.linked_functions()
    assert linked is not None and "count" in linked and "sqlite_version" in linked
    assert lite.function_names() == lite.functions & linked
    assert Dialect.get("postgresql").linked_functions() is None


def test_sqlite_aggregates_come_from_the_library_without_window_only_functions() -> None:
    agg = Dialect.get("sqlite").linked_aggregates()
    assert agg is not None and ("group_concat", 1) in agg
    assert not {n for n, _ in agg} & {"rank", "row_number", "lag"}
    assert Dialect.get("mysql").linked_aggregates() is None


def test_quote_writes_a_name_so_it_means_itself() -> None:
    pg, my, lite = Dialect.get("postgresql"), Dialect.get("mysql"), Dialect.get("sqlite")
    assert pg.quote("album") == "album" and pg.quote("Album") == '"Album"'
    assert my.quote("Album") == "Album" and my.quote("a`b c") == "`a``b c`"
    assert lite.quote("Album") == "Album" and lite.quote('x"y') == '"x""y"'
    assert Dialect.lookup("oracle").quote("my col") == '"my col"'  # the standard's defaults


def test_missing_functions_and_their_replacements() -> None:
    pg, lite = Dialect.get("postgresql"), Dialect.get("sqlite")
    assert pg.lacks_function("ifnull") and pg.function_instead("IFNULL") == "COALESCE(x, y)"
    assert not pg.lacks_function("my_udf")  # an extensible catalog: only certain absences
    assert lite.lacks_function("year") and lite.function_instead("year") == "strftime('%Y', x)"
    assert not lite.lacks_function("strftime")  # the linked library decides
    assert not Dialect.lookup("oracle").lacks_function("nvl")


def test_sqlglot_read_settings_and_type_errors() -> None:
    assert Dialect.get("mysql").sqlglot_read.startswith("mysql, normalization_strategy")
    assert Dialect.get("postgresql").sqlglot_read == "postgres"
    pg, my, lite = Dialect.get("postgresql"), Dialect.get("mysql"), Dialect.get("sqlite")
    assert pg.is_type_error("22007", None) and not pg.is_type_error("42703", None)
    assert my.is_type_error(None, 1292) and not my.is_type_error(None, 1054)
    assert lite.type_error_hint is None and not lite.is_type_error("22007", 1292)


def test_engine_options_per_driver() -> None:
    pg = sa.make_url("postgresql+psycopg://u@h/db")
    opts = Dialect.get("postgresql").engine_options(pg, 0.5, {})
    assert opts == {"pool_pre_ping": True, "connect_args": {"connect_timeout": 2}}
    my = sa.make_url("mysql+pymysql://u@h/db")
    got = Dialect.get("mysql").engine_options(my, 3.0, {"connect_args": {"read_timeout": 9}})
    assert got["connect_args"] == {"read_timeout": 9, "connect_timeout": 3.0, "write_timeout": 3.0}
    lite = sa.make_url("sqlite:///nowhere/x.db")
    assert Dialect.get("sqlite").engine_options(lite, 3.0, {"echo": True}) == {"echo": True}
    assert Dialect.get("sqlite").missing_database_file(lite) is not None
    assert Dialect.get("sqlite").missing_database_file(sa.make_url("sqlite://")) is None


def test_audit_payload_types_come_from_the_dialects() -> None:
    """The audit store's payload columns take each dialect's ``audit_long_types`` as the
    variant for its names (MySQL and MariaDB: LONGTEXT/LONGBLOB, whose TEXT/BLOB hold 64 KB),
    the defaults elsewhere; the store itself names no dialect."""
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    from grid_sql.audit.store import _BLOB, _TEXT
    from grid_sql.dialect import Dialect

    assert [d.name for d in Dialect.registered() if d.audit_long_types] == ["mysql"]
    assert (
        str(_TEXT.compile(dialect=mysql.dialect())),
        str(_BLOB.compile(dialect=mysql.dialect())),
    ) == ("LONGTEXT", "LONGBLOB")
    maria = mysql.dialect()
    maria.name = "mariadb"  # what SQLAlchemy's MariaDB connections report
    assert str(_TEXT.compile(dialect=maria)) == "LONGTEXT"
    for other in (postgresql.dialect(), sqlite.dialect()):
        assert str(_TEXT.compile(dialect=other)) == "TEXT"
    assert str(_BLOB.compile(dialect=postgresql.dialect())) == "BYTEA"
