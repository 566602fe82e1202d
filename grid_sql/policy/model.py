"""The Policy model: what the connected role may do, and where each right came from.

A Policy is the *effective* policy: the rights the database grants the role, narrowed by the
application policy (which can only take rights away). It is a frozen, fingerprinted value
because it is an input of the constrained language (paper §2) and of the post-parse checker:
two sessions with equal policies must get byte-identical grammars and verdicts.

Granularity follows the engines: table privileges (SELECT, INSERT, UPDATE, DELETE, TRUNCATE,
REFERENCES, TRIGGER) and column privileges (SELECT, INSERT, UPDATE, REFERENCES). Column rights
are stored *effective*: a table-level SELECT grant shows up as SELECT on every column, so a
checker asks one question per column. Statement verbs (select/insert/.../create/drop/grant) say
which statement kinds the grammar keeps at all (RoleProjection); banned functions and clauses
are dropped from the grammar where it has them and flagged by the checker everywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from grid_sql.schema.model import TableKind

TABLE_PRIVILEGES: tuple[str, ...] = (
    "select",
    "insert",
    "update",
    "delete",
    "truncate",
    "references",
    "trigger",
)
"""Table privileges, named as PostgreSQL names them (MySQL maps onto the same words)."""

COLUMN_PRIVILEGES: tuple[str, ...] = ("select", "insert", "update", "references")
"""Privileges that exist per column in both PostgreSQL and MySQL."""

STATEMENT_VERBS: tuple[str, ...] = (
    "select",
    "insert",
    "update",
    "delete",
    "merge",
    "truncate",
    "create",
    "drop",
    "alter",
    "grant",
    "revoke",
)
"""Statement kinds a policy can allow. Anything else (COPY, PRAGMA, ATTACH, SET, CALL, ...)
is never allowed: the checker reports it as ``statement_not_allowed``."""

DML_VERBS: frozenset[str] = frozenset({"select", "insert", "update", "delete", "merge", "truncate"})

EXPLICIT_VERBS: frozenset[str] = frozenset(
    {"truncate", "create", "drop", "alter", "grant", "revoke"}
)
"""Statement verbs the effective policy keeps only when the application policy names them in
``verbs`` (:func:`grid_sql.policy.config.narrow`), whatever the grants say. Why: "writes" reads
as INSERT/UPDATE/DELETE/MERGE to a user who passes ``allow_writes``; a generated ``DROP
TABLE`` or ``TRUNCATE`` must not run because the role happens to own the table (PostgreSQL)
or because SQLite has no privileges at all."""

DEFAULT_BANNED_FUNCTIONS: frozenset[str] = frozenset(
    {
        # PostgreSQL: server file system, large objects, sleeping, other sessions, side doors
        # that run arbitrary SQL (query_to_xml, dblink) or change settings.
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "pg_ls_logdir",
        "pg_ls_waldir",
        "pg_ls_tmpdir",
        "pg_file_write",
        "lo_import",
        "lo_export",
        "lo_unlink",
        "pg_sleep",
        "pg_sleep_for",
        "pg_sleep_until",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "set_config",
        "dblink",
        "dblink_exec",
        "query_to_xml",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        # MySQL/MariaDB
        "sleep",
        "benchmark",
        "load_file",
        "get_lock",
        "release_lock",
        "master_pos_wait",
        "sys_exec",
        "sys_eval",
        # SQLite
        "load_extension",
        "readfile",
        "writefile",
        "edit",
        "fts3_tokenizer",
    }
)

BANNED_CLAUSES: tuple[str, ...] = (
    "into_outfile",
    "into_dumpfile",
    "select_into",
    "copy",
    "load_data",
    "attach",
    "detach",
    "pragma_write",
)
"""Clause kinds the checker knows how to detect (names match the grammar's rule names)."""

DEFAULT_BANNED_CLAUSES: frozenset[str] = frozenset(BANNED_CLAUSES)

Source = Literal["grant", "app", "config", "default"]


@dataclass(frozen=True)
class Provenance:
    """One line of the story ``Policy.explain`` tells: who granted or removed what, and why."""

    target: str
    right: str
    source: Source
    effect: Literal["allow", "deny"]
    detail: str


@dataclass(frozen=True)
class TablePolicy:
    """Effective rights on one table or view.

    ``verbs``: privileges held on the whole table. ``columns``: (column, effective privileges)
    in catalog order; a table-level SELECT/INSERT/UPDATE/REFERENCES appears on every column.
    """

    schema: str
    name: str
    kind: TableKind = "table"
    verbs: frozenset[str] = frozenset()
    columns: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def column_verbs(self, column: str) -> frozenset[str]:
        """Privileges on ``column`` (exact name, then unique case-insensitive match)."""
        for name, verbs in self.columns:
            if name == column:
                return verbs
        folded = [v for n, v in self.columns if n.lower() == column.lower()]
        return folded[0] if len(folded) == 1 else frozenset()

    def allows(self, verb: str) -> bool:
        """Whether the table may appear in a statement needing ``verb`` at all.

        For column privileges, one column is enough (PostgreSQL lets ``SELECT count(*)`` run
        with SELECT on any single column; MySQL likewise).
        """
        if verb in self.verbs:
            return True
        return verb in COLUMN_PRIVILEGES and any(verb in v for _, v in self.columns)

    def column_allows(self, column: str, verb: str) -> bool:
        return verb in self.column_verbs(column)

    def readable(self, column: str) -> bool:
        return self.column_allows(column, "select")

    def insertable(self, column: str) -> bool:
        return self.column_allows(column, "insert")

    def updatable(self, column: str) -> bool:
        return self.column_allows(column, "update")

    @property
    def any_right(self) -> bool:
        return bool(self.verbs) or any(v for _, v in self.columns)


@dataclass(frozen=True)
class Policy:
    """The effective policy of one role on one database.

    ``tables`` holds every table of the snapshot the role can see, including ones it has no
    right on (with empty rights), so "not allowed" and "does not exist" stay distinguishable.
    """

    dialect: str
    role: str
    default_schema: str | None
    tables: tuple[TablePolicy, ...]
    statement_verbs: frozenset[str]
    banned_functions: frozenset[str] = DEFAULT_BANNED_FUNCTIONS
    banned_clauses: frozenset[str] = DEFAULT_BANNED_CLAUSES
    provenance: tuple[Provenance, ...] = field(default=(), compare=False)
    # Functions an application policy added by name to the dialect's allow-list
    # (``functions.allow``); never filled implicitly.
    functions_allow: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tables", tuple(sorted(self.tables, key=lambda t: (t.schema, t.name)))
        )
        object.__setattr__(
            self, "banned_functions", frozenset(f.lower() for f in self.banned_functions)
        )
        object.__setattr__(
            self, "functions_allow", frozenset(f.lower() for f in self.functions_allow)
        )

    # -- lookups -------------------------------------------------------------------------
    def table(self, name: str, schema: str | None = None) -> TablePolicy | None:
        """Rights on ``schema.name`` (default schema when None); exact, then case-insensitive."""
        target_schema = self.default_schema if schema is None else schema
        cands = [t for t in self.tables if t.name == name and t.schema == target_schema]
        if cands:
            return cands[0]
        folded = [
            t
            for t in self.tables
            if t.name.lower() == name.lower()
            and (target_schema is None or t.schema.lower() == target_schema.lower())
        ]
        return folded[0] if len(folded) == 1 else None

    def allows(self, verb: str, table: str, schema: str | None = None) -> bool:
        """May ``verb`` touch ``table``? (False for unknown tables.)"""
        t = self.table(table, schema)
        return t is not None and t.allows(verb)

    def column_allows(self, verb: str, table: str, column: str, schema: str | None = None) -> bool:
        t = self.table(table, schema)
        return t is not None and t.column_allows(column, verb)

    def tables_for(self, verb: str) -> Iterator[TablePolicy]:
        """Tables usable with ``verb`` (what the grammar's table lexicon should offer)."""
        return (t for t in self.tables if t.allows(verb))

    @cached_property
    def allowed_functions(self) -> frozenset[str]:
        """The functions a statement may call: the dialect's curated allow-list
        (grid_sql/policy/functions.py) plus what the application policy added by name, minus
        the banned ones (defaults, no EXECUTE privilege, the application's bans)."""
        from grid_sql.policy.functions import dialect_function_names

        base = dialect_function_names(self.dialect)
        return (base | self.functions_allow) - self.banned_functions

    @property
    def read_only(self) -> bool:
        """True when nothing but SELECT is allowed (SQLite then opens the file read-only)."""
        return self.statement_verbs <= {"select"}

    # -- identity ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        """Canonical plain data (provenance excluded: it explains, it does not decide)."""
        return {
            "dialect": self.dialect,
            "role": self.role,
            "default_schema": self.default_schema,
            "statement_verbs": sorted(self.statement_verbs),
            "banned_functions": sorted(self.banned_functions),
            "banned_clauses": sorted(self.banned_clauses),
            # only when set, so policies without additions keep their fingerprints
            **({"functions_allow": sorted(self.functions_allow)} if self.functions_allow else {}),
            "tables": [
                {
                    "schema": t.schema,
                    "name": t.name,
                    "kind": t.kind,
                    "verbs": sorted(t.verbs),
                    "columns": [[c, sorted(v)] for c, v in t.columns],
                }
                for t in self.tables
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Inverse of :meth:`to_dict` (provenance is not part of the canonical form). Raises
        KeyError/TypeError/ValueError on malformed data; callers type the error."""
        return cls(
            dialect=d["dialect"],
            role=d["role"],
            default_schema=d["default_schema"],
            tables=tuple(
                TablePolicy(
                    schema=t["schema"],
                    name=t["name"],
                    kind=t["kind"],
                    verbs=frozenset(t["verbs"]),
                    columns=tuple((c, frozenset(v)) for c, v in t["columns"]),
                )
                for t in d["tables"]
            ),
            statement_verbs=frozenset(d["statement_verbs"]),
            banned_functions=frozenset(d["banned_functions"]),
            banned_clauses=frozenset(d["banned_clauses"]),
            functions_allow=frozenset(d.get("functions_allow", ())),
        )

    @cached_property
    def fingerprint(self) -> str:
        """Hex BLAKE2b-256 of the canonical JSON of :meth:`to_dict`."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.blake2b(text.encode("utf-8"), digest_size=32).hexdigest()

    def explain(self) -> str:
        """Readable text of the effective policy and where each right came from."""
        lines = [
            f"Effective policy for role {self.role!r} on {self.dialect}"
            f" (default schema {self.default_schema!r}), fingerprint {self.fingerprint[:16]}",
            "Statement verbs: " + (", ".join(sorted(self.statement_verbs)) or "(none)"),
            "Banned clauses: " + (", ".join(sorted(self.banned_clauses)) or "(none)"),
            "Banned functions: " + (", ".join(sorted(self.banned_functions)) or "(none)"),
            "Tables:",
        ]
        if self.functions_allow:
            lines.insert(
                -1, "Functions added to the allow-list: " + ", ".join(sorted(self.functions_allow))
            )
        for t in self.tables:
            if not t.any_right:
                lines.append(f"  {t.qualified} ({t.kind}): no rights")
                continue
            lines.append(
                f"  {t.qualified} ({t.kind}): table privileges "
                + (", ".join(p.upper() for p in TABLE_PRIVILEGES if p in t.verbs) or "none")
            )
            for verb in COLUMN_PRIVILEGES:
                if verb in t.verbs or not t.allows(verb):
                    continue
                cols = [c for c, v in t.columns if verb in v]
                lines.append(f"    {verb.upper()} only on columns: {', '.join(cols)}")
        if self.provenance:
            lines.append("Where the rights come from:")
            for p in self.provenance:
                sign = "+" if p.effect == "allow" else "-"
                lines.append(f"  {sign} {p.target}: {p.right} [{p.source}] {p.detail}")
        return "\n".join(lines)
