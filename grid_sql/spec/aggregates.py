"""The spec's aggregate rule (``docs/scope.md``, "Aggregates where they run"), read off the
parse forest.

Written independently of ``grammar/scope_aggregates.py`` (which tags the scope context of
stack nodes with query depths): here the forest of the stack is walked left to right with a
list of open query levels, each with two flags, set by the tokens and trees still on the
stack; the differential tests (``tests/scope/test_aggregates.py``) bind the two.
"""

from __future__ import annotations

from typing import Any

from .tables import _unquote as _name  # the spec's name comparison (quotes off, lower)

# clause keywords whose clause cannot call its level's aggregates
KEYWORDS = frozenset({"WHERE", "ON", "GROUP", "LIMIT", "OFFSET", "FETCH"})


def aggregate_banned(forest: tuple[Any, ...], names: frozenset[str], nested: bool) -> bool:
    """Whether a called name at the end of ``forest`` may not be an aggregate: every open
    query level has an open ``WHERE``/join ``ON``/``GROUP``/``LIMIT``/``OFFSET``/``FETCH``
    keyword (``DISTINCT ON`` excepted), or, when ``nested`` is False, the innermost an open
    aggregate call whose arguments are not closed by a ``)`` since."""
    levels: list[list[bool]] = []  # per open level: [clause open, aggregate call open]
    prev: Any = None
    for x in forest:
        token = isinstance(x[1], bytes)
        if (token and x[0] in ("SELECT", "UPDATE", "DELETE")) or (
            not token and x[0] in ("select_core", "query_body", "query_term")
        ):
            levels.append([False, False])
        elif levels and token and x[0] in KEYWORDS:
            if not (x[0] == "ON" and prev is not None and prev[0] == "DISTINCT"):
                levels[-1][0] = True
        elif levels and not nested and not token and x[0] == "func_name":
            kid = x[1][0] if len(x[1]) == 1 else None
            if kid is not None and isinstance(kid[1], bytes) and _name(kid[1]) in names:
                levels[-1][1] = True
        elif (
            levels
            and token
            and x[0] == "RPAR"
            and prev is not None
            and (prev[0] == "func_args" or (prev[0] == "LPAR" and isinstance(prev[1], bytes)))
        ):
            levels[-1][1] = False
        prev = x
    # a clause holds aggregates out only when every enclosing level's clause does too (an
    # aggregate over outer columns belongs to the outer query)
    return bool(levels) and (all(lv[0] for lv in levels) or levels[-1][1])
