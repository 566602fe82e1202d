"""The role's tables as the prompt shows them: the visible part of each table, ranked for a
question, described as one ``CREATE TABLE`` line.

Split out of :mod:`grid_sql.ask.prompt` (which re-exports these names) along the seam between
describing tables and assembling messages: the prompt budget (:mod:`grid_sql.ask.budget`)
renders the schema from these pieces and the prompt calls the budget, so with both in
``prompt`` the two modules imported each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..policy.model import Policy, TablePolicy
from ..schema.model import ColumnInfo, ForeignKeyInfo, SchemaSnapshot, TableInfo
from .values import ColumnValues

__all__ = ["VisibleTable", "describe_table", "rank_tables", "visible_tables", "words"]


@dataclass(frozen=True)
class VisibleTable:
    """A table as the role sees it: only the columns it has some right on."""

    schema: str
    info: TableInfo
    columns: tuple[ColumnInfo, ...]

    @property
    def name(self) -> str:
        return self.info.name


def visible_tables(snapshot: SchemaSnapshot, policy: Policy) -> list[VisibleTable]:
    """Every table the role has some right on, restricted to its usable columns."""
    out: list[VisibleTable] = []
    # exact (schema, name) matches from one index: Policy.table scans every table, which
    # made this quadratic (10,011 tables: about 10 s per call); the rest falls back to it
    exact: dict[tuple[str, str], TablePolicy] = {}
    for p in policy.tables:
        exact.setdefault((p.schema, p.name), p)
    for schema, info in snapshot.iter_tables():
        tp = exact.get((schema, info.name)) or policy.table(info.name, schema)
        if tp is None or not tp.any_right:
            continue
        cols = tuple(
            c
            for c in info.columns
            if tp.readable(c.name) or tp.insertable(c.name) or tp.updatable(c.name)
        )
        out.append(VisibleTable(schema, info, cols))
    return out


_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(text: str) -> set[str]:
    """Lower-case word stems of a question or an identifier (camelCase and snake_case split)."""
    out: set[str] = set()
    for chunk in re.split(r"[^A-Za-z0-9]+", text):
        for w in _CAMEL.findall(chunk) or [chunk]:
            w = w.lower()
            if len(w) < 2:
                continue
            out.add(_stem(w))
    return out


def _stem(w: str) -> str:
    for suffix in ("ies", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def rank_tables(question: str, tables: Sequence[VisibleTable]) -> list[VisibleTable]:
    """Tables ordered by relevance to ``question`` (stable: ties keep catalog order).

    Score: 3 per question word in the table name, 1 per word in a column name, plus half the
    best score among foreign-key neighbours (either direction), so a join table between two
    mentioned tables rises with them.
    """
    q = words(question)
    base: dict[tuple[str, str], float] = {}
    for t in tables:
        name_hits = len(q & words(t.name))
        col_hits = len(q & set().union(*(words(c.name) for c in t.columns))) if t.columns else 0
        base[(t.schema, t.name)] = 3.0 * name_hits + col_hits
    neighbours: dict[tuple[str, str], set[tuple[str, str]]] = {k: set() for k in base}
    for t in tables:
        for fk in t.info.foreign_keys:
            other = (fk.referred_schema or t.schema, fk.referred_table)
            if other in neighbours:
                neighbours[(t.schema, t.name)].add(other)
                neighbours[other].add((t.schema, t.name))
    score = {
        k: v + 0.5 * max((base[n] for n in neighbours[k] if n != k), default=0.0)
        for k, v in base.items()
    }
    order = sorted(range(len(tables)), key=lambda i: -score[(tables[i].schema, tables[i].name)])
    return [tables[i] for i in order]


def _q(name: str) -> str:
    """A name as it should be written in the prompt (quoted when not a plain identifier)."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f'"{name}"'


def describe_table(
    t: VisibleTable,
    visible: set[tuple[str, str]],
    qualify: bool,
    values: Mapping[str, ColumnValues] | None = None,
) -> str:
    """One-line ``CREATE TABLE`` text: columns with types, primary key, visible foreign keys,
    and (``values``, opt-in) a comment of example values after a column.

    Why one line and no NOT NULL: the prompt is prefilled on every question, and on a CPU the
    prefill dominates a small model's latency; this keeps what the model needs to join and
    filter (names, types, keys) at about half the tokens of the multi-line form.
    """
    name = f"{_q(t.schema)}.{_q(t.name)}" if qualify else _q(t.name)
    kind = "VIEW" if t.info.kind != "table" else "TABLE"
    colnames = {c.name for c in t.columns}
    pk = [c for c in t.info.primary_key if c in colnames]
    whole_pk = bool(pk) and len(pk) == len(t.info.primary_key)
    inline: dict[str, str] = {}
    tail: list[str] = []
    for fk in t.info.foreign_keys:
        if not _fk_visible(fk, t, colnames, visible):
            continue
        target = _q(fk.referred_table)
        if qualify:
            target = f"{_q(fk.referred_schema or t.schema)}.{target}"
        refs = ", ".join(_q(c) for c in fk.referred_columns)
        if len(fk.columns) == 1 and fk.columns[0] not in inline:
            inline[fk.columns[0]] = f" REFERENCES {target}({refs})"
        else:
            cols = ", ".join(_q(c) for c in fk.columns)
            tail.append(f"FOREIGN KEY ({cols}) REFERENCES {target}({refs})")
    parts = []
    for c in t.columns:
        key = " PRIMARY KEY" if whole_pk and len(pk) == 1 and c.name == pk[0] else ""
        hint = values.get(c.name) if values else None
        note = f" {hint.comment()}" if hint is not None else ""
        if c.comment:
            note += f" /* {_comment(c.comment)} */"
        parts.append(f"{_q(c.name)} {c.type or 'ANY'}{key}{inline.get(c.name, '')}{note}")
    if whole_pk and len(pk) > 1:
        parts.append(f"PRIMARY KEY ({', '.join(_q(c) for c in pk)})")
    parts.extend(tail)
    about = f" -- {_comment(t.info.comment)}" if t.info.comment else ""
    return f"CREATE {kind} {name} ({', '.join(parts)});{about}"


def _comment(text: str, limit: int = 200) -> str:
    """A catalog comment on one line, without comment delimiters, at most ``limit`` chars."""
    one = " ".join(text.replace("*/", "* /").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _fk_visible(
    fk: ForeignKeyInfo, t: VisibleTable, colnames: set[str], visible: set[tuple[str, str]]
) -> bool:
    return (fk.referred_schema or t.schema, fk.referred_table) in visible and all(
        c in colnames for c in fk.columns
    )
