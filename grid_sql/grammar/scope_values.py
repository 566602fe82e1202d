"""The semantic values of the scope rule (``grammar/scope.py``) and the values of FROM items.

Split out of :mod:`grid_sql.grammar.scope` (which re-exports every name here): the values are
plain data, and a FROM item's value (a table, an alias with its column list, a CTE, a derived
table, a table function, MySQL's ``DUAL``) is a function of its rule's right-hand side and its
children's values only, while ``scope.py`` keeps the rule that folds them over a parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .scope_table import MAX_REFS, WILDCARD, ScopeTable, norm_name

# ---------------------------------------------------------------------------- values
# Semantic values on stack nodes (hashable: they are part of the interning key).
#   bytes                           the lexeme of an identifier terminal
#   ("t", name, schema | None)      table_name
#   ("a", alias, renames_columns, names)  table_alias (names: its column list, normalized)
#   ("n", names)                    a column list (``ident_list``)
#   Bag                             everything else that carries scope information
#   Ref (in Bag.refs)               a column reference of a select list before its FROM


@dataclass(frozen=True, slots=True)
class Item:
    """A FROM item: the names that bind it, its table (normalized) or None, and whether its
    columns are unknown (derived table, function, CTE, renamed columns, unknown table)."""

    names: tuple[str, ...]
    table: str | None
    opaque: bool
    schema: str | None = None  # the schema qualifier written in FROM (``x`` of ``x.t``)
    # the output aliases of a derived table's query (``cte_names``): columns it defines
    outs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ref:
    """A column reference written in a select list before its FROM: ``q.c`` (``qualifier``
    normalized, ``spelled`` as written) or a bare ``c`` (qualifier None); ``column`` is
    ``*`` for ``q.*``. Equal by (qualifier, column) only: the spelling is what the
    termination reserve writes as an alias, never part of the rule."""

    qualifier: str | None
    column: str
    spelled: bytes = field(default=b"", compare=False)


@dataclass(frozen=True, slots=True)
class Bag:
    """The scope-relevant content of a subtree: FROM items, output aliases, CTE names, and
    the select list's column references (None: more than ``MAX_REFS``, not tracked)."""

    items: tuple[Item, ...] = ()
    aliases: tuple[str, ...] = ()
    ctes: tuple[str, ...] = ()
    refs: tuple[Ref, ...] | None = ()
    cte_words: tuple[bytes, ...] = ()  # the CTE names as written (``cte_names``)
    cte_outs: tuple[str, ...] = ()  # the output aliases of those CTEs' queries


def merge_refs(parts: list[tuple[Ref, ...] | None]) -> tuple[Ref, ...] | None:
    out: dict[Ref, None] = {}
    for p in parts:
        if p is None:
            return None
        for r in p:
            out.setdefault(r, None)
    if len(out) > MAX_REFS:
        return None
    return tuple(out)


EMPTY_BAG = Bag()


def from_item_value(
    kind: str, rhs: tuple[str, ...], children: list[Any], cte_names: bool, table: ScopeTable
) -> Any:
    """The value of a FROM-item rule (``kind``: ``cte``, ``names``, ``table_function``,
    ``table_name``, ``table_alias``, else ``table_primary``) from its children's values;
    ``cte_names``: the columns CTEs, derived tables and table functions define are kept
    (``ScopeRules.cte_names``)."""
    if kind == "cte":
        v = children[0]
        if not isinstance(v, bytes):
            return Bag(ctes=(WILDCARD,))
        q = children[rhs.index("query")] if "query" in rhs else None
        if "ident_list" in rhs:  # the column list names the CTE's columns
            cl = children[rhs.index("ident_list")]
            c_outs = cl[1] if isinstance(cl, tuple) and cte_names else ()
        else:
            c_outs = q[1] if isinstance(q, tuple) else ()
        return Bag(ctes=(norm_name(v),), cte_words=(v,), cte_outs=c_outs)
    if kind == "names":  # a column list: its names, in order
        listed: list[str] = []
        for c in children:
            if isinstance(c, bytes):
                listed.append(norm_name(c))
            elif isinstance(c, tuple) and c[0] == "n":
                listed.extend(c[1])
        return ("n", tuple(listed))
    if kind == "table_function":  # the function's name (its arguments bind nothing)
        v = children[0]
        return ("f", norm_name(v)) if isinstance(v, bytes) else None
    if kind == "table_name":
        v = children[-1]
        sq = children[0] if len(children) == 3 else None
        schema = norm_name(sq) if isinstance(sq, bytes) else None
        return ("t", norm_name(v), schema) if isinstance(v, bytes) else None
    if kind == "table_alias":
        ident = children[1] if rhs[0] == "AS" else children[0]
        renames = "ident_list" in rhs
        cl = children[rhs.index("ident_list")] if renames else None
        cols = cl[1] if isinstance(cl, tuple) else ()
        return ("a", norm_name(ident), renames, cols) if isinstance(ident, bytes) else None
    # table_primary
    alias = children[-1] if rhs[-1] == "table_alias" else None
    a_name = alias[1] if isinstance(alias, tuple) else None
    if rhs[0] == "table_name":
        tn = children[0]
        if not isinstance(tn, tuple):
            return Bag((Item((WILDCARD,), None, True),))
        names = (tn[1],) if a_name is None else (a_name, tn[1])
        renames = bool(alias[2]) if isinstance(alias, tuple) else False
        cols = alias[3] if renames and isinstance(alias, tuple) and cte_names else ()
        return Bag((Item(names, tn[1], renames, tn[2], cols),))
    if rhs == ("DUAL",):  # MySQL's FROM DUAL: no columns, no name to qualify
        return Bag()
    if rhs[0] == "LPAR" and len(rhs) >= 2 and rhs[1] == "table_ref" and alias is None:
        inner = children[1]
        return inner if isinstance(inner, Bag) else None
    if rhs[0] == "cte_ref" and a_name is None:
        v = children[0]
        names = (norm_name(v),) if isinstance(v, bytes) else (WILDCARD,)
        return Bag((Item(names, None, True),))
    outs: tuple[str, ...] = ()
    renamed = isinstance(alias, tuple) and bool(alias[2])
    if renamed and isinstance(alias, tuple) and cte_names:
        outs = alias[3]  # a column list names the item's columns
    elif rhs[0] == "LPAR" and len(rhs) >= 2 and rhs[1] == "query":
        q = children[1]
        outs = q[1] if isinstance(q, tuple) and not renamed else ()
    elif "table_function" in rhs and not renamed:
        f = children[rhs.index("table_function")]
        if isinstance(f, tuple) and cte_names:
            outs = table.function_outs(f[1], a_name)
    return Bag((Item((a_name,) if a_name is not None else (WILDCARD,), None, True, None, outs),))
