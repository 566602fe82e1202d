"""Application policy: narrow what the grants allow, never widen it.

Why narrowing only: the database is the last line of defence and the authority on privileges;
if configuration could add rights, the grammar would offer statements the server rejects (or,
worse, that a misconfigured server accepts). So every rule here is an intersection (verbs,
allow lists) or a subtraction (deny lists, bans), and :func:`narrow` can only shrink a Policy.

Format (a dict, or the same as a YAML/TOML file)::

    verbs: [select]                  # statement verbs kept (intersection with the grants)
    tables:
      allow: [album, public.artist]  # only these tables (others lose every right)
      deny: [employee]               # these lose every right
    table_verbs:                     # per-table privilege limit
      invoice: [select]
    columns:
      allow: {customer: [customer_id, first_name]}   # only these columns keep their rights
      deny: {employee: [birth_date]}                 # these columns lose every right
    banned_functions: [md5]          # added to the defaults
    functions:
      allow: [my_udf]                # added to the dialect's function allow-list, by name only
    banned_clauses: [select_into]    # added to the defaults
    roles:                           # the same keys, applied when the connected role matches
      analyst: {verbs: [select]}

``functions.allow`` is the one rule that adds to the language: a function the curated
allow-list (grid_sql/policy/functions.py) lacks, e.g. a reviewed user-defined one. It is
explicit by design (nothing is ever added implicitly), takes plain names only, and refuses the
names that read relations, run SQL, touch files or take locks (``NEVER_ALLOWED``): those would
defeat the table and column rules. The server still checks EXECUTE when the statement runs.

Every table and column named must exist in the snapshot: a typo in a deny list would otherwise
silently deny nothing, so it is a :class:`PolicyError`.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grid_sql.errors import PolicyError
from grid_sql.policy.model import (
    BANNED_CLAUSES,
    COLUMN_PRIVILEGES,
    EXPLICIT_VERBS,
    STATEMENT_VERBS,
    TABLE_PRIVILEGES,
    Policy,
    Provenance,
    TablePolicy,
)
from grid_sql.schema.model import SchemaSnapshot

_SECTION_KEYS = frozenset(
    {
        "verbs",
        "tables",
        "table_verbs",
        "columns",
        "banned_functions",
        "banned_clauses",
        "functions",
    }
)
_FUNCTION_NAME = re.compile(r"[a-z_][a-z0-9_$]*")


@dataclass(frozen=True)
class AppRules:
    """One section of an application policy (the top level, or one role's section)."""

    verbs: frozenset[str] | None = None
    tables_allow: tuple[str, ...] | None = None
    tables_deny: tuple[str, ...] = ()
    table_verbs: tuple[tuple[str, frozenset[str]], ...] = ()
    columns_allow: tuple[tuple[str, tuple[str, ...]], ...] = ()
    columns_deny: tuple[tuple[str, tuple[str, ...]], ...] = ()
    banned_functions: frozenset[str] = frozenset()
    banned_clauses: frozenset[str] = frozenset()
    functions_allow: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AppPolicy:
    """A parsed application policy: rules for everyone plus per-role sections."""

    rules: AppRules = field(default_factory=AppRules)
    roles: tuple[tuple[str, AppRules], ...] = ()
    origin: str = "app policy"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], origin: str = "app policy") -> AppPolicy:
        if not isinstance(data, Mapping):
            raise PolicyError(f"{origin}: expected a mapping at the top level")
        unknown = set(data) - _SECTION_KEYS - {"roles"}
        if unknown:
            raise PolicyError(f"{origin}: unknown key(s) {sorted(unknown)}")
        roles_raw = data.get("roles", {})
        if "roles" in data and not roles_raw:
            raise PolicyError(f"{origin}: 'roles' names no role (remove it or name one)")
        if not isinstance(roles_raw, Mapping):
            raise PolicyError(f"{origin}: 'roles' must map role names to sections")
        roles = tuple(
            sorted(
                (str(name), _parse_rules(sec, f"{origin}: roles.{name}"))
                for name, sec in roles_raw.items()
            )
        )
        top = {k: v for k, v in data.items() if k != "roles"}
        return cls(_parse_rules(top, origin), roles, origin)

    @classmethod
    def load(cls, path: str | Path) -> AppPolicy:
        """Read a ``.yaml``/``.yml``, ``.toml`` or ``.json`` policy file."""
        p = Path(path)
        if p.suffix not in (".yaml", ".yml", ".toml", ".json"):
            raise PolicyError(f"policy file {p}: unknown format (use .yaml, .toml or .json)")
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"cannot read policy file {p}: {exc}") from exc
        if not text.strip():
            raise PolicyError(f"policy file {p} is empty (a policy must say something)")
        try:
            if p.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            elif p.suffix == ".toml":
                data = tomllib.loads(text)
            elif p.suffix == ".json":
                data = json.loads(text)
            else:
                raise PolicyError(f"policy file {p}: unknown format (use .yaml, .toml or .json)")
        except PolicyError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parser's syntax error, reported as one type
            raise PolicyError(f"policy file {p} is not valid {p.suffix[1:]}: {exc}") from exc
        if data is None:  # YAML with nothing but comments
            raise PolicyError(f"policy file {p} is empty (a policy must say something)")
        return cls.from_mapping(data, origin=f"policy file {p}")

    def sections_for(self, role: str) -> list[tuple[str, AppRules]]:
        """The sections that apply to ``role``: the top level, then its own section if any."""
        out = [(self.origin, self.rules)]
        out.extend((f"{self.origin} [role {name}]", r) for name, r in self.roles if name == role)
        return out


def _names(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where}: expected a list of names, got {value!r}")
    return tuple(value)


def _verbs(value: Any, where: str, allowed: tuple[str, ...]) -> frozenset[str]:
    verbs = frozenset(v.lower() for v in _names(value, where))
    bad = verbs - set(allowed)
    if bad:
        raise PolicyError(f"{where}: unknown verb(s) {sorted(bad)}; known: {list(allowed)}")
    return verbs


def _col_map(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: expected a mapping table -> [columns]")
    return tuple(sorted((str(t), _names(c, f"{where}.{t}")) for t, c in value.items()))


def _functions_allow(value: Any, where: str) -> frozenset[str]:
    """``functions: {allow: [...]}`` → lower-case plain names; unsafe or malformed names are
    a PolicyError (a typo must not silently allow nothing, an unsafe name must not pass)."""
    from grid_sql.policy.functions import NEVER_ALLOWED

    if value is None:
        return frozenset()
    if not isinstance(value, Mapping) or set(value) - {"allow"}:
        raise PolicyError(f"{where}.functions: expected a mapping with 'allow'")
    names = frozenset(n.lower() for n in _names(value.get("allow"), f"{where}.functions.allow"))
    bad = sorted(n for n in names if not _FUNCTION_NAME.fullmatch(n))
    if bad:
        raise PolicyError(f"{where}.functions.allow: not plain function names: {bad}")
    unsafe = sorted(names & NEVER_ALLOWED)
    if unsafe:
        raise PolicyError(
            f"{where}.functions.allow: {unsafe} read relations by name, run SQL, touch files, "
            "locks or session state, and would defeat the table and column rules; they cannot "
            "be allowed"
        )
    return names


def _parse_rules(sec: Any, where: str) -> AppRules:
    if not isinstance(sec, Mapping):
        raise PolicyError(f"{where}: expected a mapping")
    unknown = set(sec) - _SECTION_KEYS
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {sorted(unknown)}")
    tables = sec.get("tables") or {}
    if not isinstance(tables, Mapping) or set(tables) - {"allow", "deny"}:
        raise PolicyError(f"{where}.tables: expected a mapping with 'allow' and/or 'deny'")
    columns = sec.get("columns") or {}
    if not isinstance(columns, Mapping) or set(columns) - {"allow", "deny"}:
        raise PolicyError(f"{where}.columns: expected a mapping with 'allow' and/or 'deny'")
    tv = sec.get("table_verbs") or {}
    if not isinstance(tv, Mapping):
        raise PolicyError(f"{where}.table_verbs: expected a mapping table -> [verbs]")
    clauses = frozenset(c.lower() for c in _names(sec.get("banned_clauses"), where))
    bad = clauses - set(BANNED_CLAUSES)
    if bad:
        raise PolicyError(
            f"{where}.banned_clauses: unknown clause(s) {sorted(bad)}; "
            f"known: {list(BANNED_CLAUSES)}"
        )
    return AppRules(
        verbs=None
        if sec.get("verbs") is None
        else _verbs(sec["verbs"], f"{where}.verbs", STATEMENT_VERBS),
        tables_allow=None
        if tables.get("allow") is None
        else _names(tables["allow"], f"{where}.tables.allow"),
        tables_deny=_names(tables.get("deny"), f"{where}.tables.deny"),
        table_verbs=tuple(
            sorted(
                (str(t), _verbs(v, f"{where}.table_verbs.{t}", TABLE_PRIVILEGES))
                for t, v in tv.items()
            )
        ),
        columns_allow=_col_map(columns.get("allow"), f"{where}.columns.allow"),
        columns_deny=_col_map(columns.get("deny"), f"{where}.columns.deny"),
        banned_functions=frozenset(f.lower() for f in _names(sec.get("banned_functions"), where)),
        banned_clauses=clauses,
        functions_allow=_functions_allow(sec.get("functions"), where),
    )


def _resolve(policy: Policy, snapshot: SchemaSnapshot, name: str, where: str) -> TablePolicy:
    """``table`` or ``schema.table`` → its TablePolicy, or a PolicyError naming what exists."""
    schema, _, table = name.rpartition(".")
    info = snapshot.table(table, schema or None)
    tp = policy.table(info.name, schema or None) if info is not None else None
    if tp is None:
        known = ", ".join(f"{s}.{t.name}" for s, t in snapshot.iter_tables())
        raise PolicyError(
            f"{where} names table {name!r}, which does not exist in the database "
            f"(or is not visible to the role). Known tables: {known or '(none)'}"
        )
    return tp


def _check_columns(tp: TablePolicy, cols: tuple[str, ...], where: str) -> list[str]:
    names = [c for c, _ in tp.columns]
    out = []
    for col in cols:
        match = [n for n in names if n == col] or [n for n in names if n.lower() == col.lower()]
        if len(match) != 1:
            raise PolicyError(
                f"{where} names column {col!r} of {tp.qualified}, which does not exist. "
                f"Columns: {', '.join(names)}"
            )
        out.append(match[0])
    return out


def narrow(policy: Policy, app: AppPolicy | None, snapshot: SchemaSnapshot) -> Policy:
    """Apply ``app`` to ``policy``: the result allows a subset of what ``policy`` allows.

    DDL and the like (:data:`~grid_sql.policy.model.EXPLICIT_VERBS`: TRUNCATE, CREATE, DROP,
    ALTER, GRANT, REVOKE) survive only where a section of ``app`` that applies names them in
    ``verbs``: granted is not enough. Without ``app`` the policy is the server's own (what
    :func:`~grid_sql.policy.session.read_policy` reports); a pipeline that generates
    statements applies :func:`explicit_verbs_only` to it (the Asker does).
    """
    if app is None:
        return policy
    tables = {(t.schema, t.name): t for t in policy.tables}
    verbs = set(policy.statement_verbs)
    banned_f = set(policy.banned_functions)
    banned_c = set(policy.banned_clauses)
    added_f = set(policy.functions_allow)
    notes = list(policy.provenance)

    def strip(key: tuple[str, str], remove: set[str], cols: set[str] | None, why: str) -> None:
        """Remove verbs ``remove`` from the whole table (cols None) or from columns ``cols``,
        and record what was actually lost (nothing is recorded for a no-op)."""
        t = tables[key]
        hit = {c for c, _ in t.columns} if cols is None else cols
        new_cols = tuple((c, v - remove if c in hit else v) for c, v in t.columns)
        lost = {x for c, v in t.columns if c in hit for x in v & remove}
        if cols is None:
            table_wide = t.verbs - remove
            target = t.qualified
        else:
            # Losing a column right also loses the table-wide form of that right.
            table_wide = t.verbs - (remove & set(COLUMN_PRIVILEGES))
            target = f"{t.qualified}({', '.join(sorted(cols))})"
        lost |= t.verbs - table_wide
        tables[key] = replace(t, verbs=table_wide, columns=new_cols)
        if lost:
            right = ", ".join(sorted(v.upper() for v in lost))
            notes.append(Provenance(target, right, "app", "deny", why))

    everything = set(TABLE_PRIVILEGES)
    for origin, rules in app.sections_for(policy.role):
        if rules.verbs is not None:
            dropped = verbs - rules.verbs
            verbs &= rules.verbs
            if dropped:
                notes.append(
                    Provenance("*", ", ".join(sorted(dropped)), "app", "deny", f"verbs ({origin})")
                )
        if rules.tables_allow is not None:
            keep = {
                (tp.schema, tp.name)
                for tp in (
                    _resolve(policy, snapshot, n, f"{origin}: tables.allow")
                    for n in rules.tables_allow
                )
            }
            for key in list(tables):
                if key not in keep:
                    strip(key, everything, None, f"not in tables.allow ({origin})")
        for n in rules.tables_deny:
            tp = _resolve(policy, snapshot, n, f"{origin}: tables.deny")
            strip((tp.schema, tp.name), everything, None, f"tables.deny ({origin})")
        for n, allowed in rules.table_verbs:
            tp = _resolve(policy, snapshot, n, f"{origin}: table_verbs")
            strip((tp.schema, tp.name), everything - allowed, None, f"table_verbs ({origin})")
        for n, cols in rules.columns_allow:
            tp = _resolve(policy, snapshot, n, f"{origin}: columns.allow")
            keep_cols = set(_check_columns(tp, cols, f"{origin}: columns.allow"))
            others = {c for c, _ in tp.columns} - keep_cols
            if others:
                strip((tp.schema, tp.name), everything, others, f"columns.allow ({origin})")
        for n, cols in rules.columns_deny:
            tp = _resolve(policy, snapshot, n, f"{origin}: columns.deny")
            denied = set(_check_columns(tp, cols, f"{origin}: columns.deny"))
            strip((tp.schema, tp.name), everything, denied, f"columns.deny ({origin})")
        banned_f |= rules.banned_functions
        banned_c |= rules.banned_clauses
        for f in sorted(rules.banned_functions):
            notes.append(
                Provenance(f + "()", "CALL", "app", "deny", f"banned_functions ({origin})")
            )
        added_f |= rules.functions_allow
        for f in sorted(rules.functions_allow):
            notes.append(
                Provenance(f + "()", "CALL", "app", "allow", f"functions.allow ({origin})")
            )
        for c in sorted(rules.banned_clauses):
            notes.append(Provenance(c, "USE", "app", "deny", f"banned_clauses ({origin})"))

    named: set[str] = set()
    for _, rules in app.sections_for(policy.role):
        named |= rules.verbs or frozenset()
    dropped = verbs & EXPLICIT_VERBS - named
    if dropped:
        verbs -= dropped
        notes.append(Provenance("*", ", ".join(sorted(dropped)), "app", "deny", _EXPLICIT_WHY))
    new_tables = tuple(tables.values())
    # A DML verb with no table left to act on is gone from the grammar as well.
    for v in ("select", "insert", "update", "delete", "truncate"):
        if v in verbs and not any(t.allows(v) for t in new_tables):
            verbs.discard(v)
    if "merge" in verbs and not verbs & {"insert", "update", "delete"}:
        verbs.discard("merge")
    return replace(
        policy,
        tables=new_tables,
        statement_verbs=frozenset(verbs),
        banned_functions=frozenset(banned_f),
        banned_clauses=frozenset(banned_c),
        functions_allow=frozenset(added_f),
        provenance=tuple(notes),
    )


_EXPLICIT_WHY = "DDL runs only when the application policy names its verb (verbs: [...])"


def explicit_verbs_only(policy: Policy) -> Policy:
    """``policy`` without the verbs no application policy named
    (:data:`~grid_sql.policy.model.EXPLICIT_VERBS`): what a generating pipeline runs under
    when it was given no application policy (``allow_writes`` means INSERT/UPDATE/DELETE/MERGE,
    never DDL the role happens to be granted or SQLite does not restrict)."""
    return _explicit_only(policy, frozenset())


def _explicit_only(policy: Policy, named: frozenset[str]) -> Policy:
    """``policy`` without the explicit-only verbs that ``named`` does not name."""
    dropped = policy.statement_verbs & EXPLICIT_VERBS - named
    if not dropped:
        return policy
    note = Provenance("*", ", ".join(sorted(dropped)), "app", "deny", _EXPLICIT_WHY)
    return replace(
        policy,
        statement_verbs=policy.statement_verbs - dropped,
        provenance=(*policy.provenance, note),
    )
