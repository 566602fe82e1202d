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
