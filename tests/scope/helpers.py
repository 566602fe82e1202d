"""Shared pieces of the scope tests: Spider role grammars with and without scopes."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from grid_sql.grammar import Grammar
from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
from grid_sql.policy.grammar import role_grammar
from grid_sql.policy.scopes import role_scopes
from grid_sql.schema import SchemaSnapshot, introspect

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SPIDER = DATA / "spider"
CHINOOK = DATA / "chinook" / "Chinook_Sqlite.sqlite"


@functools.cache
def snapshot(db: str) -> SchemaSnapshot:
    """The catalog of a Spider dev database (``chinook``: the Chinook sample)."""
    path = CHINOOK if db == "chinook" else SPIDER / "database" / db / f"{db}.sqlite"
    return introspect(open_sqlite(path))


@functools.cache
def role(db: str, functions: bool = True) -> Grammar:
    """A select-only role over the whole database (schema lexicon, no scopes); with
    ``functions=False`` called names are unrestricted (the language before FUNCTION_NAME)."""
    snap = snapshot(db)
    app = AppPolicy.from_mapping({"verbs": ["select"]}, origin="test")
    return role_grammar(
        Grammar.dialect("sqlite"),
        snap,
        narrow(sqlite_baseline(snap), app, snap),
        functions=functions,
    )


@functools.cache
def scoped(db: str, bind: bool = True) -> Grammar:
    """:func:`role` with scope-aware column lexicons, with select-list obligations unless
    ``bind=False`` (the tests gate the stricter language: every statement it admits, the
    language without obligations admits too)."""
    return role(db).with_scopes(role_scopes(snapshot(db), bind_select_list=bind))


MISSING_DBS = frozenset({"wta_1"})  # never shipped with the data (see its README): 62 questions


@functools.cache
def spider_dev() -> tuple[tuple[str, str], ...]:
    """(db_id, gold query) of every Spider dev question whose database ships (972 of 1034)."""
    rows = json.loads((SPIDER / "dev.json").read_text())
    return tuple((r["db_id"], r["query"]) for r in rows if r["db_id"] not in MISSING_DBS)


DEFOG = DATA / "defog_sql_eval"
DEFOG_SUFFIX = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql"}


@functools.cache
def defog_tables(db: str) -> dict[str, tuple[str, ...]]:
    """table -> columns of a defog sql-eval database (its ``table_metadata``)."""
    meta = json.loads((DEFOG / "databases" / db / f"{db}.json").read_text())["table_metadata"]
    return {t: tuple(c["column_name"] for c in cols) for t, cols in meta.items()}


@functools.cache
def defog_grammar(db: str, dialect: str, scopes: bool, functions: bool = True) -> Grammar:
    """The dialect grammar under the database's table and column lexicons (every spelling
    the terminal can scan, bare names folded) and the dialect's function names (unless
    ``functions=False``), optionally with scope-aware columns."""
    return lexicon_grammar(dialect, tuple(defog_tables(db).items()), scopes, functions)


@functools.cache
def spider_dialect_grammar(db: str, dialect: str, scopes: bool, functions: bool = True) -> Grammar:
    """:func:`defog_grammar` for a Spider database in another dialect (its SQLite catalog)."""
    tables = tuple((t.name, t.column_names) for _, t in snapshot(db).iter_tables())
    return lexicon_grammar(dialect, tables, scopes, functions)


@functools.cache
def lexicon_grammar(
    dialect: str,
    table_columns: tuple[tuple[str, tuple[str, ...]], ...],
    scopes: bool,
    functions: bool = True,
) -> Grammar:
    from grid_sql.grammar.lexicon import SchemaLexicon
    from grid_sql.grammar.scope import ScopeTable
    from grid_sql.policy.functions import dialect_function_names
    from grid_sql.policy.grammar import spellings

    g = Grammar.dialect(dialect)
    tables = dict(table_columns)
    words = {
        "TABLE_NAME": spellings(g, "TABLE_NAME", tables, dialect),
        "COLUMN_NAME": spellings(
            g, "COLUMN_NAME", {c for cs in tables.values() for c in cs}, dialect
        ),
    }
    if functions:
        words["FUNCTION_NAME"] = spellings(
            g, "FUNCTION_NAME", dialect_function_names(dialect), dialect
        )
    g = g.with_lexicon(SchemaLexicon(words, fold_bare_case=True))
    return g.with_scopes(ScopeTable(tables, bind_select_list=True)) if scopes else g


def defog_gold(dialect: str) -> list[tuple[str, str]]:
    """(db_name, gold statement) for every statement of every defog question of a dialect."""
    import csv
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "grammar_coverage", Path(__file__).resolve().parents[2] / "scripts/grammar_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    cov = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cov)
    out = []
    for path in sorted((DEFOG / "questions").glob(f"*_{DEFOG_SUFFIX[dialect]}.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                for q in cov.split_statements(row["query"]):
                    out.append((row["db_name"], cov.fill_braces(q)))
    return out
