"""The spec's CTE-name rule (``docs/scope.md``, "CTE names"), read off the parse forest.

Written independently of ``grammar/scope.py`` / ``parser/ctes.py`` (which carry the bound
names as synthesized stack values): here they are collected by walking the forest, and the
differential tests (``tests/scope/test_ctes.py``) bind the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lark.parsers.lalr_analysis import Shift

if TYPE_CHECKING:
    from .oracle import SpecOracle, Stack

END = "$END"
# the set operation after a query body (PostgreSQL's grammar names its UNION/EXCEPT union_op)
SET_OPS = ("set_op", "union_op")
# The spec's own copy of the output-alias clause keywords and search stops (docs/scope.md,
# "Output aliases"; the fast path's are ``grammar/scope.py``'s ALIAS_CLAUSES/ALIAS_STOPS)
ALIAS_CLAUSES = {"WHERE": "where", "GROUP": "group", "HAVING": "having", "ORDER": "order"}
ALIAS_STOPS = frozenset(
    "SELECT FROM JOIN ON USING LIMIT OFFSET WINDOW WITH SET VALUES RETURNING UPDATE DELETE "
    "INSERT".split()
)


def _tok(x: Any, name: str | None = None) -> bool:
    return len(x) == 2 and isinstance(x[1], bytes) and (name is None or x[0] == name)


def _cte_list(x: Any) -> bool:
    """A completed CTE, or a run of them (lark's helper rule of ``(COMMA cte)*``)."""
    return not _tok(x) and (x[0] == "cte" or x[0].startswith("__with_clause"))


def _cte_names(x: Any) -> list[bytes]:
    """The names (as written) of the CTEs in a ``with_clause``/``cte``/helper subtree (not
    looking inside their bodies)."""
    if _tok(x) or x[0] == "query":
        return []
    if x[0] == "cte":
        return [x[1][0][1]]
    return [n for k in x[1] for n in _cte_names(k)]


def cte_words(oracle: SpecOracle, stack: Stack, forest: tuple[Any, ...]) -> frozenset[bytes] | None:
    """Where an IDENT can only reduce to ``cte_ref``: the CTE names bound there, as written
    (None elsewhere). Bound: every CTE of a ``with_clause`` in the forest (it encloses what
    follows it); for each WITH clause still being written, its completed CTEs, and when it
    is ``RECURSIVE`` the name of the CTE being written too."""
    if "IDENT" not in oracle.rx or "IDENT" not in oracle.allowed(stack):
        return None
    after = oracle.shift(stack, "IDENT")
    if not isinstance(after, tuple):
        return None
    row = oracle.table[after[-1]]
    acts = [row[x] for x in row if x in oracle.rx or x == END]
    if not acts or any(kind is Shift for kind, _ in acts):
        return None
    if {arg.origin.name for _, arg in acts} != {"cte_ref"}:
        return None
    return bound_names(forest)


def bound_names(forest: tuple[Any, ...]) -> frozenset[bytes]:
    """The CTE names (as written) a FROM item at the end of ``forest`` may reference: see
    :func:`cte_words`."""
    bound: list[bytes] = []
    for x in forest:
        if not _tok(x) and (x[0] == "with_clause" or _cte_list(x)):
            bound += _cte_names(x)
    # a RECURSIVE clause's CTE being written: its own body may read it
    bound += [forest[k][1] for k in _recursive_names(forest)]
    return frozenset(bound)


def list_names(x: Any) -> list[bytes]:
    """The words (as written) of an ``ident_list`` tree, in order."""
    if _tok(x):
        return [x[1]] if x[0] == "IDENT" else []
    return [w for k in x[1] for w in list_names(k)]


def query_outs(aliases: Callable[[Any], list[str]], query: Any) -> tuple[str, ...]:
    """The output aliases of a ``query`` tree's body (the columns it defines), by the
    spec's own alias walk."""
    for k in query[1]:
        if not _tok(k) and k[0] == "query_body":
            return tuple(aliases(k))
    return ()


def _cte_trees(x: Any) -> list[Any]:
    if _tok(x) or x[0] == "query":
        return []
    if x[0] == "cte":
        return [x]
    return [c for k in x[1] for c in _cte_trees(k)]


def cte_outs(
    aliases: Callable[[Any], list[str]], forest: tuple[Any, ...], norm: Callable[[bytes], str]
) -> set[str]:
    """The columns every completed CTE in the forest defines (of a ``with_clause``, or of a
    WITH clause still being written): its column list, else its query's output aliases."""
    out: set[str] = set()
    for x in forest:
        if _tok(x) or not (x[0] == "with_clause" or _cte_list(x)):
            continue
        for c in _cte_trees(x):
            kids = c[1]
            lists = [k for k in kids if not _tok(k) and k[0] == "ident_list"]
            if lists:
                out.update(norm(w) for w in list_names(lists[0]))
                continue
            for k in kids:
                if not _tok(k) and k[0] == "query":
                    out.update(query_outs(aliases, k))
    out.update(norm(w) for w in _writing_lists(forest))
    out.update(_anchor_outs(aliases, forest))
    return out


def _anchor_outs(aliases: Callable[[Any], list[str]], forest: tuple[Any, ...]) -> list[str]:
    """The output aliases of the anchor member of each RECURSIVE clause's CTE being written
    without a column list, once a set operation follows the anchor (``WITH RECURSIVE r AS
    (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r ...)``): the members after it may read them."""
    out: list[str] = []
    for k in _recursive_names(forest):
        j = k + 1
        if j < len(forest) and _tok(forest[j], "LPAR"):
            continue  # a column list names the columns (_writing_lists)
        if not (j < len(forest) and _tok(forest[j], "AS")):
            continue
        j += 1
        if j < len(forest) and not _tok(forest[j]) and forest[j][0] == "cte_materialized":
            j += 1
        if not (j + 2 < len(forest) and _tok(forest[j], "LPAR")):
            continue
        body, op = forest[j + 1], forest[j + 2]
        if _tok(body) or body[0] != "query_body" or _tok(op) or op[0] not in SET_OPS:
            continue
        out += aliases(body)
    return out


def _writing_lists(forest: tuple[Any, ...]) -> list[bytes]:
    """The column list of each RECURSIVE clause's CTE being written (``WITH RECURSIVE r(n)
    AS (... SELECT n + 1 FROM r ...)``): its own body may read those columns."""
    names: list[bytes] = []
    for k in _recursive_names(forest):
        if (
            k + 2 < len(forest)
            and _tok(forest[k + 1], "LPAR")
            and not _tok(forest[k + 2])
            and forest[k + 2][0] == "ident_list"
        ):
            names += list_names(forest[k + 2])
    return names


def _recursive_names(forest: tuple[Any, ...]) -> list[int]:
    """Positions in ``forest`` of the names of the CTEs of RECURSIVE clauses being written."""
    out: list[int] = []
    frames: list[bool] = []  # per WITH still being written: is it RECURSIVE?
    for k, x in enumerate(forest):
        prev = forest[k - 1] if k else None
        if _tok(x, "WITH"):
            frames.append(False)
        elif _tok(x, "RECURSIVE") and prev is not None and _tok(prev, "WITH"):
            frames[-1] = True
        elif _tok(x, "IDENT") and frames and frames[-1] and prev is not None:
            if _tok(prev, "RECURSIVE") or (
                _tok(prev, "COMMA") and k >= 2 and _cte_list(forest[k - 2])
            ):
                out.append(k)
    return out


def spellings(rx: Any, names: set[str]) -> frozenset[bytes]:
    """Every bare and quoted spelling of the ASCII ``names`` that ``rx`` matches."""
    forms: set[str] = set()
    for q in names:
        if not q.isascii():
            continue
        dq, bq = q.replace('"', '""'), q.replace("`", "``")
        forms |= {q, f'"{dq}"', f"`{bq}`"}
        if "]" not in q:
            forms.add(f"[{q}]")
    return frozenset(w for w in (f.encode() for f in forms) if rx.fullmatch(w))
