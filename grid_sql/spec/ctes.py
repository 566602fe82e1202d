"""The spec's CTE-name rule (``docs/scope.md``, "CTE names"), read off the parse forest.

Written independently of ``grammar/scope.py`` / ``parser/ctes.py`` (which carry the bound
names as synthesized stack values): here they are collected by walking the forest, and the
differential tests (``tests/scope/test_ctes.py``) bind the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lark.parsers.lalr_analysis import Shift

if TYPE_CHECKING:
    from .oracle import SpecOracle, Stack

END = "$END"


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
    bound: list[bytes] = []
    frames: list[bool] = []  # per WITH still being written: is it RECURSIVE?
    for k, x in enumerate(forest):
        prev = forest[k - 1] if k else None
        if _tok(x, "WITH"):
            frames.append(False)
        elif _tok(x, "RECURSIVE") and prev is not None and _tok(prev, "WITH"):
            frames[-1] = True
        elif not _tok(x) and (x[0] == "with_clause" or _cte_list(x)):
            bound += _cte_names(x)
        elif _tok(x, "IDENT") and frames and frames[-1] and prev is not None:
            if _tok(prev, "RECURSIVE") or (
                _tok(prev, "COMMA") and k >= 2 and _cte_list(forest[k - 2])
            ):
                bound.append(x[1])  # the CTE being written: its own body may read it
    return frozenset(bound)
