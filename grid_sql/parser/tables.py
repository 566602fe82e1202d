"""Table names by schema in the parser's lexicon views (issue #25 §2, ``docs/scope.md``).

A role grammar's ``TABLE_NAME`` lexicon is one list: every table the role may read, in any
schema. But a bare name reaches only the tables of the default schema (the checker resolves
it there, and so does PostgreSQL's ``search_path`` / MySQL's current database), so on a
catalog of several schemas a bare ``FROM restaurant`` for ``restaurants.restaurant`` was
generated and then refused (7 of 10 checker refusals of the defog big-catalog arm). With
``ScopeTable.table_schemas`` on, the view at a FROM item's table name admits the default
schema's tables (and the words that are also schema names, which may go on as ``s.``), and
after ``s.`` only the tables of ``s``. Kept out of ``scoping.py``; the spec evaluates the
same rule on its parse forest (``ScopeSpec.table_words``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..grammar.lexicon import CategoryWords
from ..grammar.scope import norm_name

if TYPE_CHECKING:
    from ..grammar.scope import ScopeRules
    from .incremental import ParserRuntime
    from .stack import StackNode


def table_name_words(
    rt: ParserRuntime, node: StackNode, sem: ScopeRules, allowed: int
) -> tuple[tuple[int, CategoryWords], ...]:
    """``((T, words), ...)`` for each table category ``T`` (``TABLE_NAME`` and the DML
    targets' ``INSERT_TABLE_NAME``, ...: ``ScopeRules.table_terms``) whose word shifted at
    ``node`` can only complete its target (``table_name``, ``insert_target``, ...) or, at
    the name's start, its qualifier: the role's words of the tables that name reaches there.

    Bare: the default schema's tables, plus the words that are schema names (a qualifier
    may be spelled as a table word). After ``s.``: the tables of ``s``. Unrestricted when
    the qualifier is no schema of the catalog or the restriction would leave no word, so no
    position becomes a dead end (the checker decides those)."""
    if sem.bare_tables is None or sem.table_schemas is None:
        return ()
    out: list[tuple[int, CategoryWords]] = []
    for tt in sem.table_terms:
        tid = tt[0]
        if (allowed >> tid) & 1:
            out.extend(_words(rt, node, sem, tt, allowed))
    return tuple(out)


def _words(
    rt: ParserRuntime,
    node: StackNode,
    sem: ScopeRules,
    tt: tuple[int, int, int, int],
    allowed: int,
) -> tuple[tuple[int, CategoryWords], ...]:
    tid, nt_target, nt_qual, n_qual = tt
    bare, by_schema = sem.bare_tables, sem.table_schemas
    assert bare is not None and by_schema is not None
    base = rt.lexicon.get(tid)
    if base is None:
        return ()
    kinds = rt._reduced_to(rt.shift(node, tid))
    if kinds is None or nt_target not in kinds or not kinds <= {nt_target, nt_qual}:
        return ()
    p = node.parent
    if node.symbol == sem.t_dot and p is not None and p.symbol == n_qual:
        if not isinstance(p.value, bytes):
            return ()
        names = by_schema.get(norm_name(p.value))
        if names is None:
            return ()
    elif nt_qual in kinds and sem.bare_or_schema is not None:
        names = sem.bare_or_schema
    else:
        names = bare
    # a bare name that reaches no table (a default schema holding none: defog_big's `public`)
    # may admit no word where a schema name can start the name instead (no dead end)
    may_empty = (
        node.symbol != sem.t_dot and sem.schema_words and bool((allowed >> sem.t_schema) & 1)
    )
    key = (tid, names, id(base), bool(may_empty))
    memo = sem.table_words_memo
    got = memo.get(key)
    if got is None:
        kept = frozenset(w for w in base.words if norm_name(w) in names)
        # no word (a default schema holding no readable table, as defog_big's `public`):
        # unrestricted, since the termination reserve spells a FROM item with a bare table
        # word and would find none (docs/scope.md)
        got = (
            ()
            if (not kept and not may_empty) or kept == base.words
            else ((tid, CategoryWords(kept, base.fold_bare_case, base.fold_quoted_case)),)
        )
        memo[key] = got
    return got


def schema_only(rt: ParserRuntime, node: StackNode, sem: ScopeRules) -> bool:
    """Whether the table word on top of ``node`` starts a table name (a FROM item, a DML
    target), names no table a bare name reaches, and is a schema name: admitted by
    :func:`table_name_words` only as the qualifier of ``s.t``, so only ``.`` may follow it
    (``FROM author`` with ``author`` a schema and ``scholar.author`` the table: the word
    cannot end the item)."""
    bare = sem.bare_tables
    w = node.value
    if bare is None or sem.table_schemas is None or not isinstance(w, bytes):
        return False
    tt = sem.table_term_of.get(node.symbol)
    if tt is None or (node.parent is not None and node.parent.symbol == sem.t_dot):
        return False
    kinds = rt._reduced_to(node)
    if kinds is None or kinds != {tt[1], tt[2]}:
        return False
    name = norm_name(w)
    return name not in bare and name in sem.table_schemas


def untyped_literal_head(rt: ParserRuntime, node: StackNode, sem: ScopeRules) -> bool:
    """Whether the name on top of ``node`` would head a typed literal (PostgreSQL's
    ``typed_name STRING``: the state reduces it to ``typed_name`` on ``STRING``) without
    being one of the role's type words: ``statement_timestamp '2023-04-01'`` (a function
    name) is no literal PostgreSQL or sqlglot can read, so ``STRING`` may not follow it
    (defog's constrained arm had two such refusals). Whatever lexed the word (a column,
    function, table or schema name outranks ``TYPE_NAME``), the head must be a type."""
    words = sem.typed_words
    w = node.value
    if words is None or not isinstance(w, bytes):
        return False
    a = rt.action[node.state][sem.t_string]
    if a >= 0 or rt.rule_lhs[-a - 1] != sem.nt_typed_name:
        return False
    return norm_name(w) not in words


def unbound_schema_ref(rt: ParserRuntime, node: StackNode, sem: ScopeRules) -> bool:
    """Whether the ``SCHEMA_NAME`` word on top of ``node`` starts a FROM item where it could
    end it as a CTE reference (``cte_ref: IDENT | SCHEMA_NAME``: a CTE may be named like a
    schema) but names no CTE bound there: then it can only be ``s.`` (or a table function's
    name, ``s(``), so nothing else may follow it. ``FROM consumer_div`` was admitted as a
    CTE reference on a catalog with no WITH at all (defog's ewallet; the checker refused it,
    and the termination reserve wrote it where bare table names reach nothing)."""
    w = node.value
    if not sem.cte_names or node.symbol != sem.t_schema or not isinstance(w, bytes):
        return False
    kinds = rt._reduced_to(node)
    if kinds is None or sem.nt_cte_ref not in kinds:
        return False
    p = node.parent
    return p is None or w not in sem.bound_ctes(rt.ctx_at(p))
