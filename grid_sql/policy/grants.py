"""Read the connected role's rights from the database itself.

Why from the server and not from configuration: the database is the authority that will
execute the statement. Asking it what the role may do (instead of re-deriving privilege
semantics from raw ACLs) keeps the grammar and the server in agreement; the application policy
(:mod:`grid_sql.policy.config`) can then only narrow that. docs/policy.md explains the choice
of source per engine.

- PostgreSQL: ``has_table_privilege`` / ``has_column_privilege`` / ``has_schema_privilege`` per
  relation and column. They evaluate ownership, superuser, PUBLIC and *inherited* membership
  exactly as the executor does. ACL rows (``aclexplode``) are read only to explain provenance.
- MySQL/MariaDB: ``SHOW GRANTS FOR CURRENT_USER()`` plus ``SHOW GRANTS FOR <role>`` for every
  role in ``information_schema.ENABLED_ROLES`` (MariaDB's ``*_PRIVILEGES`` views list the user's
  own grants only, never those reached through a role), folded over global, database (with
  LIKE wildcards), table and column levels.
- SQLite: no privilege system; the baseline is "everything" and configuration narrows it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from grid_sql.dialect import Dialect
from grid_sql.errors import PolicyError, SchemaError
from grid_sql.policy.functions import POSTGRESQL_FUNCTIONS
from grid_sql.policy.model import (
    COLUMN_PRIVILEGES,
    DEFAULT_BANNED_FUNCTIONS,
    DML_VERBS,
    STATEMENT_VERBS,
    TABLE_PRIVILEGES,
    Policy,
    Provenance,
    TablePolicy,
)
from grid_sql.schema.introspect import dialect_name
from grid_sql.schema.model import SchemaSnapshot


def read_grants(conn: Connection, snapshot: SchemaSnapshot) -> Policy:
    """The policy the server grants the connected role over the tables of ``snapshot``,
    read by the reader the connection's dialect names (:attr:`Dialect.grant_source`)."""
    d = Dialect.find(conn.dialect.name)
    if d is None:
        raise PolicyError(f"no grants reader for dialect {dialect_name(conn)!r}")
    if d.grant_source == "none":
        return no_grants_baseline(snapshot, d)
    reader = _READERS.get(d.grant_source)
    if reader is None:
        raise PolicyError(f"no grants reader {d.grant_source!r} (dialect {d.name!r})")
    try:
        return reader(conn, snapshot)
    except sa.exc.DBAPIError as exc:
        raise SchemaError(f"cannot read the privileges of the connected role: {exc.orig}") from exc


def _statement_verbs(tables: Iterable[TablePolicy], extra: Iterable[str]) -> frozenset[str]:
    tables = list(tables)
    verbs = {v for v in DML_VERBS if v != "merge" and any(t.allows(v) for t in tables)}
    return frozenset(verbs | set(extra))


# ---------------------------------------------------------------------- PostgreSQL
_PG_TABLE_SQL = """
SELECT n.nspname, c.relname, has_schema_privilege(n.oid, 'USAGE') AS usage,
       pg_has_role(c.relowner, 'USAGE') AS owns,
       {checks}
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY(:schemas)
"""
_PG_COLUMN_SQL = """
SELECT n.nspname, c.relname, a.attname, {checks}
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY(:schemas)
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY n.nspname, c.relname, a.attnum
"""
# Which ACL entries reach the current role (directly, through PUBLIC, or by inheritance):
# only used to explain where a right came from.
_PG_ACL_SQL = """
SELECT n.nspname, c.relname, NULL::text AS attname, x.privilege_type,
       CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(x.grantee) END
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
     LATERAL aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) x
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY(:schemas)
  AND (x.grantee = 0 OR pg_has_role(x.grantee, 'USAGE'))
UNION ALL
SELECT n.nspname, c.relname, a.attname, x.privilege_type,
       CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(x.grantee) END
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
     LATERAL aclexplode(a.attacl) x
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY(:schemas)
  AND a.attacl IS NOT NULL AND (x.grantee = 0 OR pg_has_role(x.grantee, 'USAGE'))
"""


def _pg_policy(conn: Connection, snapshot: SchemaSnapshot) -> Policy:
    schemas = [s.name for s in snapshot.schemas]
    role, is_super, can_create_schema = conn.execute(
        sa.text(
            "SELECT current_user, rolsuper, has_database_privilege(current_database(), 'CREATE')"
            " FROM pg_catalog.pg_roles WHERE rolname = current_user"
        )
    ).one()
    tchecks = ", ".join(
        f"has_table_privilege(c.oid, '{p.upper()}') AS {p}" for p in TABLE_PRIVILEGES
    )
    trows = conn.execute(sa.text(_PG_TABLE_SQL.format(checks=tchecks)), {"schemas": schemas})
    table_rights: dict[tuple[str, str], frozenset[str]] = {}
    owned: set[tuple[str, str]] = set()
    for row in trows:
        key = (row[0], row[1])
        usage = bool(row[2])
        if row[3]:
            owned.add(key)
        # Without USAGE on the schema no privilege on its tables can be exercised.
        table_rights[key] = frozenset(
            p for p, ok in zip(TABLE_PRIVILEGES, row[4:], strict=True) if ok and usage
        )
    cchecks = ", ".join(
        f"has_column_privilege(c.oid, a.attnum, '{p.upper()}') AS {p}" for p in COLUMN_PRIVILEGES
    )
    crows = conn.execute(sa.text(_PG_COLUMN_SQL.format(checks=cchecks)), {"schemas": schemas})
    col_rights: dict[tuple[str, str], dict[str, frozenset[str]]] = defaultdict(dict)
    usage_of = {
        r[0]: bool(r[1])
        for r in conn.execute(
            sa.text(
                "SELECT nspname, has_schema_privilege(oid, 'USAGE') FROM pg_catalog.pg_namespace"
                " WHERE nspname = ANY(:schemas)"
            ),
            {"schemas": schemas},
        )
    }
    for row in crows:
        ok = usage_of.get(row[0], False)
        col_rights[(row[0], row[1])][row[2]] = frozenset(
            p for p, granted in zip(COLUMN_PRIVILEGES, row[3:], strict=True) if granted and ok
        )
    provenance: list[Provenance] = []
    via: dict[tuple[str, str, str | None, str], set[str]] = defaultdict(set)
    for nsp, rel, att, priv, grantee in conn.execute(sa.text(_PG_ACL_SQL), {"schemas": schemas}):
        via[(nsp, rel, att, priv.lower())].add(grantee)

    tables = []
    for sname, t in snapshot.iter_tables():
        key = (sname, t.name)
        verbs = table_rights.get(key, frozenset())
        cols = col_rights.get(key, {})
        columns = tuple((c.name, cols.get(c.name, frozenset())) for c in t.columns)
        tp = TablePolicy(sname, t.name, t.kind, verbs, columns)
        tables.append(tp)
        provenance.extend(_pg_provenance(tp, via, is_super, key in owned))
    extra: set[str] = set()
    if is_super:
        extra |= {"create", "drop", "alter", "grant", "revoke"}
    else:
        # Any application schema counts, including empty ones the snapshot leaves out.
        creatable = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_catalog.pg_namespace"
                " WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'"
                " AND has_schema_privilege(oid, 'CREATE')"
            )
        ).scalar_one()
        if creatable or can_create_schema:
            extra.add("create")
        if owned:  # owners may alter, drop and grant on what they own
            extra |= {"drop", "alter", "grant", "revoke"}
    verbs = _statement_verbs(tables, extra)
    if verbs & {"insert", "update", "delete"}:
        verbs = verbs | {"merge"}
    no_execute = _pg_no_execute(conn)
    provenance.extend(
        Provenance(f + "()", "EXECUTE", "grant", "deny", "no EXECUTE privilege on any overload")
        for f in sorted(no_execute)
    )
    return Policy(
        dialect="postgresql",
        role=str(role),
        default_schema=snapshot.default_schema,
        tables=tuple(tables),
        statement_verbs=verbs,
        banned_functions=DEFAULT_BANNED_FUNCTIONS | no_execute,
        provenance=tuple(provenance),
    )


def _pg_no_execute(conn: Connection) -> frozenset[str]:
    """Allow-listed functions the role may not EXECUTE (``has_function_privilege`` false for
    every ``pg_catalog`` overload): the grammar must not offer a call the server refuses.
    Normally empty (PUBLIC holds EXECUTE on the built-ins), so a policy's fingerprint only
    changes where an administrator revoked one."""
    names = sorted(POSTGRESQL_FUNCTIONS)
    rows = conn.execute(
        sa.text(
            "SELECT p.proname FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY(:names)"
            " GROUP BY p.proname HAVING NOT bool_or(has_function_privilege(p.oid, 'EXECUTE'))"
        ),
        {"names": names},
    )
    return frozenset(str(r[0]) for r in rows)


def _pg_provenance(
    tp: TablePolicy,
    via: dict[tuple[str, str, str | None, str], set[str]],
    is_super: bool,
    owns: bool,
) -> list[Provenance]:
    out = []
    for verb in sorted(tp.verbs):
        if is_super:
            how = "superuser"
        elif owns:
            how = "owner (or member of the owning role)"
        else:
            names = sorted(via.get((tp.schema, tp.name, None, verb), set()))
            how = "granted to " + ", ".join(names) if names else "server-evaluated"
        out.append(Provenance(tp.qualified, verb.upper(), "grant", "allow", how))
    for verb in COLUMN_PRIVILEGES:
        if verb in tp.verbs:
            continue
        cols = [c for c, v in tp.columns if verb in v]
        if not cols:
            continue
        names = sorted({g for c in cols for g in via.get((tp.schema, tp.name, c, verb), set())})
        how = "column grant to " + ", ".join(names) if names else "column grant"
        out.append(
            Provenance(f"{tp.qualified}({', '.join(cols)})", verb.upper(), "grant", "allow", how)
        )
    return out


# ---------------------------------------------------------------------- MySQL / MariaDB
_MYSQL_VERB = {
    "SELECT": ("select",),
    "INSERT": ("insert",),
    "UPDATE": ("update",),
    "DELETE": ("delete",),
    "REFERENCES": ("references",),
    "TRIGGER": ("trigger",),
    # TRUNCATE TABLE needs the DROP privilege in MySQL and MariaDB.
    "DROP": ("truncate",),
}
_MYSQL_STATEMENT = {"CREATE": "create", "DROP": "drop", "ALTER": "alter"}
_ALL_PRIVS = (
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "REFERENCES",
    "TRIGGER",
    "DROP",
    "CREATE",
    "ALTER",
)


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside backquotes and parentheses."""
    parts, depth, quoted, cur = [], 0, False, []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":
                cur.append("``")
                i += 2
                continue
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if not quoted and depth == 0 and text.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unquote(ident: str) -> str:
    ident = ident.strip()
    if ident.startswith("`") and ident.endswith("`"):
        return ident[1:-1].replace("``", "`")
    return ident


_GRANT_HEAD = re.compile(r"^GRANT\s+", re.IGNORECASE)
_PRIV_COLS = re.compile(r"^(?P<priv>[A-Z ]+?)\s*(?:\((?P<cols>.*)\))?$", re.IGNORECASE | re.DOTALL)


def parse_mysql_grant(
    line: str,
) -> tuple[list[tuple[str, list[str] | None]], str, str, bool] | None:
    """Parse one ``SHOW GRANTS`` line into (privileges with columns, db, table, grant option).

    Returns None for lines that grant no object privileges (role grants, proxy grants,
    routine grants). ``db``/``table`` are ``*`` for wildcards; a database name keeps its
    LIKE escapes (``grid\\_sql``), since database-level grants match by pattern.
    """
    if not _GRANT_HEAD.match(line):
        return None
    body = line[_GRANT_HEAD.match(line).end() :]  # type: ignore[union-attr]
    pieces = _split_top(body, " ON ")
    if len(pieces) < 2:
        return None  # GRANT role TO user
    privs_text, rest = pieces[0], " ON ".join(pieces[1:])
    obj_and_to = _split_top(rest, " TO ")
    obj = obj_and_to[0].strip()
    if re.match(r"^(FUNCTION|PROCEDURE|PACKAGE)\b", obj, re.IGNORECASE):
        return None
    if obj.upper().startswith("TABLE "):
        obj = obj[6:].strip()
    grant_option = bool(re.search(r"WITH\s+GRANT\s+OPTION\s*$", line, re.IGNORECASE))
    dotted = _split_top(obj, ".")
    if len(dotted) == 1:
        db, table = "*", _unquote(dotted[0])  # `*` alone = current database; treated as all
    else:
        db, table = _unquote(dotted[0]), _unquote(dotted[1])
    privs: list[tuple[str, list[str] | None]] = []
    for item in _split_top(privs_text, ","):
        m = _PRIV_COLS.match(item.strip())
        if not m:
            continue
        name = " ".join(m.group("priv").upper().split())
        cols = None
        if m.group("cols") is not None:
            cols = [_unquote(c) for c in _split_top(m.group("cols"), ",")]
        privs.append((name, cols))
    return privs, db, table, grant_option


def _like_match(pattern: str, value: str) -> bool:
    """MySQL LIKE with ``\\`` escapes, as used by database-level grants (``grid\\_sql``)."""
    rx = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            rx.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        rx.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(rx), value, re.DOTALL) is not None


def _mysql_policy(conn: Connection, snapshot: SchemaSnapshot) -> Policy:
    user = str(conn.execute(sa.text("SELECT CURRENT_USER()")).scalar_one())
    # MariaDB returns one NULL row when no role is active.
    enabled = conn.execute(sa.text("SELECT ROLE_NAME FROM information_schema.ENABLED_ROLES"))
    roles = [str(r[0]) for r in enabled if r[0] is not None]
    lines: list[tuple[str, str]] = []  # (grantee label, grant line)
    for row in conn.execute(sa.text("SHOW GRANTS FOR CURRENT_USER()")):
        lines.append((user, str(row[0])))
    for role in roles:
        quoted = "`" + role.replace("`", "``") + "`"
        for row in conn.execute(sa.text(f"SHOW GRANTS FOR {quoted}")):
            lines.append((f"role {role}", str(row[0])))
    # MariaDB >= 10.11 has grants TO PUBLIC, listed by neither of the above.
    try:  # a failed SHOW does not abort a MySQL transaction, so no savepoint is needed
        public = [str(r[0]) for r in conn.execute(sa.text("SHOW GRANTS FOR PUBLIC"))]
    except sa.exc.DBAPIError:
        public = []  # MySQL, older MariaDB: no PUBLIC pseudo-role
    lines.extend(("PUBLIC", line) for line in public)

    # level → list of (grantee, db, table, privs-with-columns, grant option)
    global_privs: dict[str, set[str]] = defaultdict(set)  # priv → grantees
    db_privs: list[tuple[str, str, str]] = []  # (grantee, db pattern, priv)
    tbl_privs: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    col_privs: dict[tuple[str, str, str], dict[str, set[str]]] = defaultdict(
        lambda: defaultdict(set)
    )
    grant_option = False
    for grantee, line in lines:
        parsed = parse_mysql_grant(line)
        if parsed is None:
            continue
        privs, db, table, gopt = parsed
        grant_option = grant_option or gopt
        expanded: list[tuple[str, list[str] | None]] = []
        for name, cols in privs:
            if name in ("ALL", "ALL PRIVILEGES"):
                expanded.extend((p, None) for p in _ALL_PRIVS)
            else:
                expanded.append((name, cols))
        for name, cols in expanded:
            if db == "*":
                global_privs[name].add(f"{grantee} ON *.*")
            elif table == "*":
                db_privs.append((grantee, db, name))
            elif cols is None:
                tbl_privs[(db, table)][name].add(grantee)
            else:
                for col in cols:
                    col_privs[(db, table, col.lower())][name].add(grantee)

    tables: list[TablePolicy] = []
    provenance: list[Provenance] = []
    statement_extra: set[str] = set()
    for name, stmt in _MYSQL_STATEMENT.items():
        if global_privs.get(name) or any(p == name for _, _, p in db_privs):
            statement_extra.add(stmt)
    if grant_option:
        statement_extra |= {"grant", "revoke"}
    for sname, t in snapshot.iter_tables():
        held: dict[str, set[str]] = defaultdict(set)  # MySQL priv → sources
        for priv, who in global_privs.items():
            held[priv] |= who
        for grantee, pattern, priv in db_privs:
            if _like_match(pattern, sname):
                held[priv].add(f"{grantee} ON {pattern}.*")
        for priv, who in tbl_privs.get((sname, t.name), {}).items():
            held[priv] |= {f"{g} ON {sname}.{t.name}" for g in who}
        verbs = frozenset(v for priv in held for v in _MYSQL_VERB.get(priv, ()))
        if "DROP" in held or "ALTER" in held:
            statement_extra |= {"drop"} if "DROP" in held else set()
            statement_extra |= {"alter"} if "ALTER" in held else set()
        columns = []
        for c in t.columns:
            cverbs = {v for v in verbs if v in COLUMN_PRIVILEGES}
            for priv, who in col_privs.get((sname, t.name, c.name.lower()), {}).items():
                cverbs |= set(_MYSQL_VERB.get(priv, ()))
                for v in _MYSQL_VERB.get(priv, ()):
                    provenance.append(
                        Provenance(
                            f"{sname}.{t.name}({c.name})",
                            v.upper(),
                            "grant",
                            "allow",
                            "column grant to " + ", ".join(sorted(who)),
                        )
                    )
            columns.append((c.name, frozenset(cverbs & set(COLUMN_PRIVILEGES))))
        tp = TablePolicy(sname, t.name, t.kind, verbs, tuple(columns))
        tables.append(tp)
        for priv, who in sorted(held.items()):
            for v in _MYSQL_VERB.get(priv, ()):
                provenance.append(
                    Provenance(
                        tp.qualified,
                        v.upper() + (" (via DROP)" if priv == "DROP" else ""),
                        "grant",
                        "allow",
                        "; ".join(sorted(who)),
                    )
                )
    return Policy(
        dialect="mysql",
        role=user,
        default_schema=snapshot.default_schema,
        tables=tuple(tables),
        statement_verbs=_statement_verbs(tables, statement_extra),
        provenance=tuple(provenance),
    )


# Grant readers by :attr:`Dialect.grant_source` ("none": :func:`no_grants_baseline`).
_READERS: dict[str, Callable[[Connection, SchemaSnapshot], Policy]] = {
    "privilege_functions": _pg_policy,
    "show_grants": _mysql_policy,
}


# ---------------------------------------------------------------------- no privileges
def sqlite_baseline(snapshot: SchemaSnapshot) -> Policy:
    """:func:`no_grants_baseline` for SQLite, whatever dialect ``snapshot`` names: the
    "everything, narrowed by configuration" role the Asker gives a SQLite file, which
    benchmarks and tests also use as an unrestricted role."""
    return no_grants_baseline(snapshot, Dialect.get("sqlite"))


def no_grants_baseline(snapshot: SchemaSnapshot, dialect: Dialect) -> Policy:
    """A dialect with no privilege system (``grant_source = "none"``): whoever can open the
    database can do anything; configuration narrows it.

    Views are read-only there (SQLite: without INSTEAD OF triggers), so they get SELECT only.
    """
    tables = []
    for sname, t in snapshot.iter_tables():
        if t.kind == "table":
            verbs = frozenset({"select", "insert", "update", "delete", "references", "trigger"})
        else:
            verbs = frozenset({"select"})
        cols = tuple((c.name, verbs & frozenset(COLUMN_PRIVILEGES)) for c in t.columns)
        tables.append(TablePolicy(sname, t.name, t.kind, verbs, cols))
    verbs_all = frozenset(STATEMENT_VERBS) - {"grant", "revoke", "truncate", "merge"}
    label = dialect.label or dialect.name
    return Policy(
        dialect=dialect.name,
        role=f"({dialect.name} file)" if dialect.embedded else f"({dialect.name})",
        default_schema=snapshot.default_schema,
        tables=tuple(tables),
        statement_verbs=verbs_all,
        provenance=(
            Provenance("*", "ALL", "default", "allow", f"{label} has no privilege system"),
        ),
    )
