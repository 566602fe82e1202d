"""FROM items the termination reserve writes to bind a select-list reference.

Split out of ``mask/reserve.py`` (the reserve's ``_bind_refs`` tries them in order): a table
having the column, spelled with the role's table lexicon, and where tables are held to their
schemas (``docs/scope.md``, "Table names by schema") the same items written ``s.t``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..grammar.scope import Ref, norm_name

if TYPE_CHECKING:
    from .reserve import ReserveTable

__all__ = ["bind_pieces"]


def bind_pieces(table: ReserveTable, ref: Ref) -> list[bytes]:
    """Candidate FROM items binding ``ref``, best first (tables having its column)."""
    rt = table.rt
    assert rt.sem is not None
    tables = rt.sem.table.columns
    tids = table.grammar.terminal_ids
    comma = table.lexeme.get(tids.get("COMMA", -1), b",")
    as_kw = table.lexeme.get(tids.get("AS", -1), b"AS")
    spelled: dict[str, list[bytes]] = {}
    words = rt.lexicon.get(tids.get("TABLE_NAME", -1))
    for w in words.shortest_first if words is not None else ():
        spelled.setdefault(norm_name(w), []).append(w)
    sep = table.sep

    def spell(t: str) -> list[bytes]:
        return spelled.get(t, []) if words is not None else [t.encode()]

    out: list[bytes] = []
    if ref.qualifier is not None and ref.qualifier in tables:
        out += [sep + comma + sep + w for w in spell(ref.qualifier)]
    having = sorted(t for t, cs in tables.items() if ref.column in cs or ref.column == "*")
    rest = sorted(t for t in tables if t not in having)
    for t in having + rest:
        for w in spell(t)[:1]:
            if ref.qualifier is None:
                out.append(sep + comma + sep + w)
            else:
                out.append(sep + comma + sep + w + sep + as_kw + sep + ref.spelled)
    # with table names by schema (docs/scope.md) a bare word may name no table a bare name
    # reaches: the same items written `s.t` (the table of that schema having the column)
    return out[:64] + _qualified_pieces(table, ref, spell, comma, as_kw)


def _qualified_pieces(
    table: ReserveTable,
    ref: Ref,
    spell: Callable[[str], list[bytes]],
    comma: bytes,
    as_kw: bytes,
) -> list[bytes]:
    """``, s.t`` (``, s.t AS q``) candidates binding ``ref`` where tables are held to their
    schemas, best first (the schema's table has the column), at most 32."""
    rt = table.rt
    assert rt.sem is not None
    sc = rt.sem.schema_columns
    if sc is None:
        return []
    tids = table.grammar.terminal_ids
    swords = rt.lexicon.get(tids.get("SCHEMA_NAME", -1))
    by: dict[str, list[bytes]] = {}
    for w in swords.shortest_first if swords is not None else ():
        by.setdefault(norm_name(w), []).append(w)
    dot = table.lexeme.get(tids.get("DOT", -1), b".")
    sep = table.sep
    pairs = sorted(sc, key=lambda k: (not (ref.column in sc[k] or ref.column == "*"), k))
    if ref.qualifier is not None:
        pairs = [k for k in pairs if k[1] == ref.qualifier] + pairs
    out: list[bytes] = []
    for s_name, t in pairs:
        for sw in by.get(s_name, [])[:1]:
            for tw in spell(t)[:1]:
                item = sep + comma + sep + sw + dot + tw
                if ref.qualifier is not None and t != ref.qualifier:
                    item += sep + as_kw + sep + ref.spelled
                out.append(item)
        if len(out) >= 32:
            break
    return out
