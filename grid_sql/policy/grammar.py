"""Policy → grammar: compile a role's rights into its language (paper §2, L2 + L3).

The role projection keeps exactly the statement productions of the verbs the policy allows
(PRAGMA, ATTACH, COPY and other specials are never kept), and drops the escape hatches a
strict role must not have: a FROM item naming an arbitrary CTE (``cte_ref``) and a table
function named by any word (``free_func_name``), either of which would let a forbidden table
name through as a non-category identifier; a FROM item may call only the dialect's table
functions that read no relation by name (``TABLE_FUNCTION_NAME``,
``Dialect.table_functions``: ``generate_series``, ``unnest``, SQLite's ``json_each``). The
schema lexicons are verb-scoped: FROM/JOIN and every other read position (``TABLE_NAME``)
admit only tables the role may SELECT from; the target of INSERT, UPDATE, DELETE and
TRUNCATE (``INSERT_TABLE_NAME`` ...) admits only the tables holding that privilege.
Columns admit the names readable or writable in at least one table, and schemas only those of
the tables kept. Called names (``FUNCTION_NAME``) admit only the policy's allowed functions
(the curated per-dialect allow-list of ``policy/functions.py``), so the model cannot spell a
function that reads a table by name, runs SQL or touches files, and a column cannot be spelled
as a call of a function that does not exist; a function of no arguments (``NILADIC_NAME``,
``Dialect.niladic_functions``) is called with ``()`` only. A conversion's type (``TYPE_NAME``:
``CAST(x AS t)``, ``x::t``, ``t 'x'``) admits only the dialect's plain value types
(``Dialect.cast_types``), so ``'secret'::regclass`` (a catalog lookup by name) is outside
every role's language.

Current limit, stated rather than hidden: the column lexicon is one list for every column
position, the union over the tables; which columns of which table a statement may touch is
decided exactly by the post-parse checker (Proposition 11). DDL positions (DROP/ALTER/CREATE
INDEX ... ON) use ``TABLE_NAME`` and so are limited to readable tables.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import regex

from ..dialect import Dialect
from ..grammar.ir import Grammar, RoleProjection
from ..grammar.lexicon import SchemaLexicon
from ..schema.model import SchemaSnapshot
from .model import Policy

VERB_RULES: dict[str, tuple[str, ...]] = {
    "select": ("select_stmt",),
    "insert": ("insert_stmt",),
    "update": ("update_stmt",),
    "delete": ("delete_stmt",),
    "truncate": ("truncate_stmt",),
    "create": ("create_table_stmt", "create_view_stmt", "create_index_stmt"),
    "drop": ("drop_table_stmt", "drop_view_stmt", "drop_index_stmt"),
    "alter": ("alter_table_stmt",),
    "grant": ("grant_stmt",),
    "revoke": ("revoke_stmt",),
}
STRICT_DROPS = ("cte_ref", "free_func_name")
# Comments are dropped from generation languages: they carry no meaning for the database, a
# model can burn its whole budget in one, and they are a place to hide text from a reader.
COMMENT_TERMINALS = ("LINE_COMMENT", "BLOCK_COMMENT")
# Banned clause (policy.BANNED_CLAUSES) -> the grammar rules that spell it, where the rule's
# name differs from the clause's (MySQL's one rule covers INTO OUTFILE and INTO DUMPFILE).
CLAUSE_RULES: dict[str, tuple[str, ...]] = {
    "into_outfile": ("into_outfile_clause",),
    "into_dumpfile": ("into_outfile_clause",),
    "load_data": ("load_data_stmt",),
    "copy": ("copy_stmt",),
    "attach": ("attach_stmt",),
    "detach": ("detach_stmt",),
}
# Session functions the dialect grammars spell as keywords (MySQL ``CURRENT_USER[()]``):
# dropped unless the policy allows the function by name.
SESSION_TERMINALS: dict[str, str] = {"CURRENT_USER": "current_user"}
# category terminal -> the table privilege that admits a table there
TABLE_CATEGORIES: dict[str, str] = {
    "TABLE_NAME": "select",
    "INSERT_TABLE_NAME": "insert",
    "UPDATE_TABLE_NAME": "update",
    "DELETE_TABLE_NAME": "delete",
    "TRUNCATE_TABLE_NAME": "truncate",
}


def _quoted(name: str, q: str) -> str:
    if q == "[":
        return f"[{name}]"
    return q + name.replace(q, q + q) + q


@functools.lru_cache(maxsize=64)
def _pattern(pattern: str) -> regex.Pattern[bytes]:
    return regex.compile(pattern.encode())


@functools.lru_cache(maxsize=16)
def _spellings(
    pattern: str, names: frozenset[str], dialect: str, exact: bool = False
) -> tuple[bytes, ...]:
    """Every spelling of each name a terminal with ``pattern`` can scan: bare (if legal) and
    quoted, sorted. Memoized: the function-name set is the same for every role of a dialect,
    and a role re-specialized with the same tables asks again. ``exact``: the server compares
    the bare name byte for byte, so it is listed as the catalog spells it (else lower-cased,
    for a category that folds bare case)."""
    pat = _pattern(pattern)
    d = Dialect.get(dialect)
    out: set[bytes] = set()
    for name in names:
        bare = name.encode()
        # PostgreSQL folds bare names to lower case: a bare spelling only names a lower-case name
        if pat.fullmatch(bare) and d.bare_spelling_names(name):
            out.add(bare if exact else bare.lower())
        for q in d.identifier_quotes:
            if q == "[" and "]" in name:
                continue
            w = _quoted(name, q).encode()
            if pat.fullmatch(w):
                out.add(w)
    return tuple(sorted(out))


def spellings(
    grammar: Grammar, terminal: str, names: Iterable[str], dialect: str, exact: bool = False
) -> list[bytes]:
    """The lexicon words of ``names`` for ``terminal`` of ``grammar``: every bare and quoted
    spelling its pattern scans (what :func:`role_grammar` puts in the lexicon)."""
    pattern = grammar.terminals[grammar.terminal_ids[terminal]].pattern
    return list(_spellings(pattern, frozenset(names), dialect, exact))


def role_grammar(
    grammar: Grammar,
    snapshot: SchemaSnapshot,
    policy: Policy,
    *,
    functions: bool = True,
    extra_functions: Iterable[str] = (),
    ctes: bool = False,
) -> Grammar:
    """The role's projected, lexicon-restricted grammar (raises EmptyLanguageError if none).

    ``functions``: restrict called names (``FUNCTION_NAME``) to the policy's allowed functions
    (:attr:`Policy.allowed_functions`: the dialect's curated allow-list, plus the application
    policy's ``functions.allow``, minus the banned ones) plus ``extra_functions``; False
    leaves them unrestricted, as before the category existed. The checker refuses a call
    outside ``allowed_functions`` either way, so ``extra_functions`` only widens what can be
    generated, not what runs: add a function to the policy to run it.

    ``ctes``: keep ``cte_ref`` (a FROM item naming a CTE), which a strict role otherwise
    drops because it accepts any name. Only sound together with scopes whose
    ``cte_names`` rule holds it to the CTE names the statement binds
    (``role_scopes(..., cte_names=True)``, the default): the caller must add them.
    """
    statements = {r.rhs[0] for r in grammar.rules if r.lhs == "statement" and len(r.rhs) == 1}
    keep = {
        rule
        for verb in policy.statement_verbs
        for rule in VERB_RULES.get(verb, ())
        if rule in statements
    }
    nts = set(grammar.nonterminals)
    drop = {d for d in STRICT_DROPS if d in nts and not (ctes and d == "cte_ref")}
    drop |= {c for c in policy.banned_clauses if c in nts}
    drop |= {r for c in policy.banned_clauses for r in CLAUSE_RULES.get(c, ()) if r in nts}
    drop |= {
        t
        for t, f in SESSION_TERMINALS.items()
        if t in grammar.terminal_ids and f not in policy.allowed_functions
    }
    drop |= {t for t in COMMENT_TERMINALS if t in grammar.terminal_ids}
    g = grammar.project(RoleProjection(drop=frozenset(drop), keep_statements=frozenset(keep)))

    dialect = snapshot.dialect
    tables: dict[str, set[str]] = {term: set() for term in TABLE_CATEGORIES}
    schemas: set[str] = set()
    columns: set[str] = set()
    for tp in policy.tables:
        if not tp.any_right:
            continue
        for term, verb in TABLE_CATEGORIES.items():
            if tp.allows(verb):
                tables[term].add(tp.name)
        if tp.schema:
            schemas.add(tp.schema)
        info = snapshot.table(tp.name, tp.schema)
        for col in info.columns if info is not None else ():
            if tp.readable(col.name) or tp.insertable(col.name) or tp.updatable(col.name):
                columns.add(col.name)
    words: dict[str, list[bytes]] = {}
    names_of: dict[str, set[str]] = {**tables, "COLUMN_NAME": columns, "SCHEMA_NAME": schemas}
    if functions and "FUNCTION_NAME" in g.terminal_ids:
        called = set(policy.allowed_functions) | set(extra_functions)
        # a function of no arguments is called through NILADIC_NAME only (its `()` is the
        # whole argument list); without that category it stays a FUNCTION_NAME
        if "NILADIC_NAME" in g.terminal_ids:
            names_of["NILADIC_NAME"] = called & Dialect.get(dialect).niladic_functions
            called -= names_of["NILADIC_NAME"]
        names_of["FUNCTION_NAME"] = called
    if "TABLE_FUNCTION_NAME" in g.terminal_ids:  # a FROM item's call: Dialect.table_functions
        names_of["TABLE_FUNCTION_NAME"] = (
            set(
                Dialect.get(dialect).table_function_names(
                    policy.allowed_functions, policy.banned_functions
                )
            )
            if functions
            else set()
        )
    if "TYPE_NAME" in g.terminal_ids:  # a conversion names a plain value type only
        names_of["TYPE_NAME"] = set(Dialect.get(dialect).cast_types)
    # Bare names match case-insensitively, as the engines compare them, except table and
    # schema names on a server that compares those byte for byte (MySQL/MariaDB with
    # lower_case_table_names = 0): there `customer` is no spelling of the table `Customer`.
    exact = {*TABLE_CATEGORIES, "SCHEMA_NAME"} if snapshot.exact_names else set()
    for term, names in names_of.items():
        if term in g.terminal_ids:
            words[term] = spellings(g, term, names, dialect, term in exact)
    units = Dialect.get(dialect).keyword_arguments
    if units and "COLUMN_NAME" in words:  # TIMESTAMPDIFF(MONTH, ...): never a catalog column
        catalog = {c.lower() for _, t in snapshot.iter_tables() for c in t.column_names}
        bare = {w.encode() for w in units - catalog}
        words["COLUMN_NAME"] = sorted(set(words["COLUMN_NAME"]) | bare)
    return g.with_lexicon(SchemaLexicon(words, fold_bare_case={t: t not in exact for t in words}))
