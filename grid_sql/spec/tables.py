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


# The spec's own copy: table category -> (the rule its name completes, its qualifier's rule)
TARGETS = {
    "TABLE_NAME": ("table_name", "schema_qualifier"),
    "INSERT_TABLE_NAME": ("insert_target", "insert_qualifier"),
    "UPDATE_TABLE_NAME": ("update_target", "update_qualifier"),
    "DELETE_TABLE_NAME": ("delete_target", "delete_qualifier"),
    "TRUNCATE_TABLE_NAME": ("truncate_target", "truncate_qualifier"),
}


def table_words(
    oracle: SpecOracle,
    stack: Stack,
    forest: tuple[Any, ...],
    default_schema: str,
    by_schema: Mapping[str, Mapping[str, frozenset[str]]],
    bare_all: bool = False,
) -> dict[str, tuple[frozenset[bytes], Any]]:
    """The lexicon entries of the table categories the rule restricts here: where a table
    word can only complete its target (``table_name``, ``insert_target``, ...) or, with
    nothing before it, its qualifier, the default schema's tables (plus schema names where
    it may be a qualifier), after ``s.`` the tables of ``s``. A category is left out where
    the rule does not restrict it (another position, an unknown schema, a restriction that
    keeps every word or none)."""
    out: dict[str, tuple[frozenset[bytes], Any]] = {}
    for t, (target, qual) in TARGETS.items():
        if t not in oracle.lexicon or t not in oracle.allowed(stack):
            continue
        after = oracle.shift(stack, t)
        if not isinstance(after, tuple):
            continue
        becomes = _reduced_to(oracle, after[-1])
        if becomes is None or target not in becomes or not becomes <= {target, qual}:
            continue
        last = forest[-1] if forest else None
        prev = forest[-2] if len(forest) >= 2 else None
        if (
            last is not None
            and last[0] == "DOT"
            and prev is not None
            and prev[0] == qual
            and not isinstance(prev[1], bytes)
        ):
            tables = by_schema.get(_unquote(prev[1][0][1]))
            if tables is None:
                continue
            names = frozenset(tables)
        else:
            names = _bare(by_schema, default_schema, bare_all)
            if qual in becomes:
                names = names | frozenset(by_schema)
        words, fold = oracle.lexicon[t]
        kept = frozenset(w for w in words if _unquote(w) in names)
        # a bare name reaching no table may admit none where a schema name can start it
        bare_start = not (last is not None and last[0] == "DOT")
        may_empty = (
            bare_start
            and bool(oracle.lexicon.get("SCHEMA_NAME", (frozenset(), False))[0])
            and "SCHEMA_NAME" in oracle.allowed(stack)
        )
        if (kept or may_empty) and kept != words:
            out[t] = (kept, fold)
    return out


def schema_only(
    oracle: SpecOracle,
    stack: Stack,
    forest: tuple[Any, ...],
    default_schema: str,
    by_schema: Mapping[str, Mapping[str, frozenset[str]]],
    bare_all: bool = False,
) -> bool:
    """The forest ends with a table word that starts a table name (the table may reduce it
    to its target or its qualifier only), names no table of the default schema and is a
    schema name: it may only go on with ``.``."""
    if not forest or forest[-1][0] not in TARGETS or not isinstance(forest[-1][1], bytes):
        return False
    if len(forest) >= 2 and forest[-2][0] == "DOT":
        return False
    if _reduced_to(oracle, stack[-1]) != set(TARGETS[forest[-1][0]]):
        return False
    word = _unquote(forest[-1][1])
    return word not in _bare(by_schema, default_schema, bare_all) and word in by_schema


def _reduced_to(oracle: SpecOracle, state: int) -> set[str] | None:
    """The rules the table may reduce by in ``state`` (None: it may shift, or does nothing:
    the name is not complete there)."""
    row = oracle.table[state]
    acts = [row[x] for x in row if x in oracle.rx or x == END]
    if not acts or any(kind is Shift for kind, _ in acts):
        return None
    return {arg.origin.name for _, arg in acts}


def _bare(
    by_schema: Mapping[str, Mapping[str, frozenset[str]]], default_schema: str, bare_all: bool
) -> frozenset[str]:
    """The tables a bare name reaches: the default schema's, or every schema's (SQLite)."""
    if bare_all:
        return frozenset(t for ts in by_schema.values() for t in ts)
    return frozenset(by_schema.get(default_schema, {}))
