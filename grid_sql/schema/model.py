"""The schema snapshot: a plain, frozen, fingerprinted picture of a database catalog.

Why plain data: the snapshot is an immutable input of the constrained language (paper §2: "both
the policy bundle and the schema snapshot are fingerprinted, immutable inputs"), so it must be
hashable to a stable content address, picklable, and free of live SQLAlchemy objects that hold
connections or change under our feet. Everything here is tuples of frozen dataclasses.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Literal

TableKind = Literal["table", "view", "materialized_view"]


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the catalog reports it (type is the dialect's own type string)."""

    name: str
    type: str
    nullable: bool = True
    default: str | None = None
    comment: str | None = None  # the catalog's description (COMMENT ON / COMMENT '...')


@dataclass(frozen=True)
class ForeignKeyInfo:
    """A foreign key from ``columns`` to ``referred_table.referred_columns``."""

    columns: tuple[str, ...]
    referred_table: str
    referred_columns: tuple[str, ...]
    referred_schema: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class TableInfo:
    """A table or view: its columns in catalog order, primary key and foreign keys."""

    name: str
    kind: TableKind = "table"
    columns: tuple[ColumnInfo, ...] = ()
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKeyInfo, ...] = ()
    comment: str | None = None  # the catalog's description (COMMENT ON / COMMENT '...')

    def column(self, name: str) -> ColumnInfo | None:
        """The column called ``name``: exact match first, then a unique case-insensitive match.

        Why the fallback: every supported engine compares column names case-insensitively
        when they are written bare (PostgreSQL folds them, MySQL and SQLite ignore case).
        """
        for col in self.columns:
            if col.name == name:
                return col
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class SchemaInfo:
    """One namespace (PostgreSQL schema, MySQL database, SQLite ``main``)."""

    name: str
    tables: tuple[TableInfo, ...] = ()

    def table(self, name: str, *, exact: bool = False) -> TableInfo | None:
        """Exact match first, then (unless ``exact``) a unique case-insensitive match (see
        TableInfo.column; ``exact``: the server compares table names by their bytes)."""
        for t in self.tables:
            if t.name == name:
                return t
        if exact:
            return None
        folded = [t for t in self.tables if t.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None


@dataclass(frozen=True)
class SchemaSnapshot:
    """A database catalog as one role sees it at one moment.

    ``schemas`` is sorted by name and each schema's tables by name, so two snapshots of the
    same catalog compare equal and share a fingerprint whatever order the server listed them.
    """

    dialect: str
    default_schema: str | None
    schemas: tuple[SchemaInfo, ...] = field(default_factory=tuple)
    #: Table and schema names compare byte for byte, bare or quoted: MySQL/MariaDB with
    #: ``lower_case_table_names = 0`` (the Linux default), where ``customer`` is not the table
    #: ``Customer`` (the server answers "Table 'Chinook.customer' doesn't exist"). Column names
    #: and the other engines' table names compare case-insensitively when bare.
    exact_names: bool = False

    def __post_init__(self) -> None:
        ordered = tuple(
            SchemaInfo(s.name, tuple(sorted(s.tables, key=lambda t: t.name)))
            for s in sorted(self.schemas, key=lambda s: s.name)
        )
        object.__setattr__(self, "schemas", ordered)

    # -- lookups -------------------------------------------------------------------------
    def schema(self, name: str | None = None, *, exact: bool = False) -> SchemaInfo | None:
        """The schema called ``name`` (default schema when None); a unique case-insensitive
        match as a fallback unless ``exact``."""
        target = self.default_schema if name is None else name
        if target is None:
            return self.schemas[0] if len(self.schemas) == 1 else None
        for s in self.schemas:
            if s.name == target:
                return s
        if exact:
            return None
        folded = [s for s in self.schemas if s.name.lower() == target.lower()]
        return folded[0] if len(folded) == 1 else None

    def table(
        self, name: str, schema: str | None = None, *, exact: bool = False
    ) -> TableInfo | None:
        """Resolve a (possibly unqualified) table name the way the engine would.

        Unqualified names are looked up in the default schema only: that is what the server
        does with its search path in the common case, and guessing across schemas would let
        the checker approve a name the server resolves differently. ``exact``: schema and
        table names must match byte for byte (how a server with :attr:`exact_names` compares
        them; callers that already folded the query's names leave it off).
        """
        s = self.schema(schema, exact=exact)
        return s.table(name, exact=exact) if s is not None else None

    def iter_tables(self) -> Iterator[tuple[str, TableInfo]]:
        """Every (schema name, table) pair, in canonical order."""
        for s in self.schemas:
            for t in s.tables:
                yield s.name, t

    # -- identity ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready data (the canonical form the fingerprint hashes).

        ``exact_names`` when unset, and a ``comment`` that is None, are left out, so a catalog
        of an engine that folds names and has no comments keeps the fingerprint (and the
        cached grammars, guides and audit archives keyed by it) it had before either existed."""
        data = asdict(self)
        if not self.exact_names:
            del data["exact_names"]
        for s in data["schemas"]:
            for t in s["tables"]:
                if t.get("comment") is None:
                    t.pop("comment", None)
                for c in t["columns"]:
                    if c.get("comment") is None:
                        c.pop("comment", None)
        return data

    def canonical_json(self) -> str:
        """Sorted-key, no-whitespace JSON: byte-identical for equal snapshots."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def fingerprint(self) -> str:
        """Hex BLAKE2b-256 of the canonical JSON: a content address for derived artifacts."""
        return hashlib.blake2b(self.canonical_json().encode("utf-8"), digest_size=32).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SchemaSnapshot:
        """Inverse of :meth:`to_dict` (for snapshots stored as JSON)."""
        schemas: list[SchemaInfo] = []
        raw_schemas = data.get("schemas", [])
        assert isinstance(raw_schemas, list)
        for s in raw_schemas:
            tables = []
            for t in s["tables"]:
                tables.append(
                    TableInfo(
                        name=t["name"],
                        kind=t["kind"],
                        comment=t.get("comment"),
                        columns=tuple(ColumnInfo(**c) for c in t["columns"]),
                        primary_key=tuple(t["primary_key"]),
                        foreign_keys=tuple(
                            ForeignKeyInfo(
                                columns=tuple(fk["columns"]),
                                referred_table=fk["referred_table"],
                                referred_columns=tuple(fk["referred_columns"]),
                                referred_schema=fk["referred_schema"],
                                name=fk["name"],
                            )
                            for fk in t["foreign_keys"]
                        ),
                    )
                )
            schemas.append(SchemaInfo(s["name"], tuple(tables)))
        dialect = data["dialect"]
        default_schema = data.get("default_schema")
        assert isinstance(dialect, str)
        assert default_schema is None or isinstance(default_schema, str)
        return cls(dialect, default_schema, tuple(schemas), bool(data.get("exact_names", False)))
