"""The spec's table-names-by-schema rule (``docs/scope.md``, "Table names by schema"), read
off the parse forest.

Written independently of ``grammar/scope.py`` / ``parser/tables.py`` (which read the
qualifier off the stack's synthesized values and the LALR action rows by id): here the
qualifier is the ``schema_qualifier`` subtree before the ``.`` and the reductions are read
from lark's parse table by name; the differential tests (``tests/scope/test_table_schemas.py``)
bind the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lark.parsers.lalr_analysis import Shift

if TYPE_CHECKING:
    from .oracle import SpecOracle, Stack

END = "$END"


def _unquote(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    if len(s) >= 2 and s[0] == s[-1] and s[0] in '"`':
        s = s[1:-1].replace(s[0] + s[0], s[0])
    elif len(s) >= 2 and s[0] == "[" and s[-1] == "]":
        s = s[1:-1]
    return s.lower()


def table_words(
    oracle: SpecOracle,
    stack: Stack,
    forest: tuple[Any, ...],
    default_schema: str,
    by_schema: Mapping[str, frozenset[str]],
) -> tuple[frozenset[bytes], Any] | None:
    """The ``TABLE_NAME`` lexicon entry where a table name can only complete a
    ``table_name`` (or, with nothing before it, a ``schema_qualifier``): the default
    schema's tables (plus schema names where it may be a qualifier), after ``s.`` the tables
    of ``s``; None where the rule does not restrict (another position, an unknown schema, a
    restriction that keeps every word or none)."""
    t = "TABLE_NAME"
    if t not in oracle.lexicon or t not in oracle.allowed(stack):
        return None
    after = oracle.shift(stack, t)
    if not isinstance(after, tuple):
        return None
    row = oracle.table[after[-1]]
    acts = [row[x] for x in row if x in oracle.rx or x == END]
    if not acts or any(kind is Shift for kind, _ in acts):
        return None
    becomes = {arg.origin.name for _, arg in acts}
    if "table_name" not in becomes or not becomes <= {"table_name", "schema_qualifier"}:
        return None
    last = forest[-1] if forest else None
    prev = forest[-2] if len(forest) >= 2 else None
    if (
        last is not None
        and last[0] == "DOT"
        and prev is not None
        and prev[0] == "schema_qualifier"
        and not isinstance(prev[1], bytes)
    ):
        names = by_schema.get(_unquote(prev[1][0][1]))
        if names is None:
            return None
    else:
        names = by_schema.get(default_schema, frozenset())
        if "schema_qualifier" in becomes:
            names = names | frozenset(by_schema)
    words, fold = oracle.lexicon[t]
    kept = frozenset(w for w in words if _unquote(w) in names)
    if not kept or kept == words:
        return None
    return kept, fold


def schema_only(
    oracle: SpecOracle,
    stack: Stack,
    forest: tuple[Any, ...],
    default_schema: str,
    by_schema: Mapping[str, frozenset[str]],
) -> bool:
    """The forest ends with a ``TABLE_NAME`` word that starts a FROM item (the table may
    reduce it to ``table_name`` or ``schema_qualifier`` only), names no table of the default
    schema and is a schema name: it may only go on with ``.``."""
    if not forest or forest[-1][0] != "TABLE_NAME" or not isinstance(forest[-1][1], bytes):
        return False
    if len(forest) >= 2 and forest[-2][0] == "DOT":
        return False
    row = oracle.table[stack[-1]]
    acts = [row[x] for x in row if x in oracle.rx or x == END]
    if any(kind is Shift for kind, _ in acts):
        return False
    if {arg.origin.name for _, arg in acts} != {"table_name", "schema_qualifier"}:
        return False
    word = _unquote(forest[-1][1])
    return word not in by_schema.get(default_schema, frozenset()) and word in by_schema
