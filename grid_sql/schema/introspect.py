"""Build a :class:`SchemaSnapshot` from a live database with SQLAlchemy's Inspector.

Why the Inspector and ``get_multi_*``: one adapter covers SQLite, PostgreSQL and MySQL/MariaDB,
and the bulk calls read a whole schema in a handful of catalog queries instead of several per
table (PostgreSQL implements them natively; elsewhere SQLAlchemy falls back to a loop).

Least privilege: the snapshot holds what the connected role can see. On PostgreSQL the catalog
lists every relation to everyone, so we keep only relations in schemas the role has USAGE on and
on which it holds some table or column privilege; MySQL/MariaDB already hide what the user has
no privilege on, but refuse ``SHOW CREATE TABLE`` to column-only users and ``SHOW TABLES`` for
databases reached only through PUBLIC, so those fall back to ``information_schema``; a MySQL
table that still cannot be read is left out rather than failing the whole reflection. Elsewhere
a catalog read error means the role may not read the catalog at all: :class:`SchemaError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Inspector
from sqlalchemy.engine.reflection import ObjectKind, ObjectScope

from grid_sql.dialect import Dialect
from grid_sql.errors import ConnectionConfigError, ConnectionLostError, SchemaError
from grid_sql.schema.faults import (
    DEFAULT_TIMEOUT_S,
    bound_pre_ping,
    check_timeout,
    engine_options,
    is_connection_lost,
    parse_url,
    sqlite_missing,
)
from grid_sql.schema.model import (
    ColumnInfo,
    ForeignKeyInfo,
    SchemaInfo,
    SchemaSnapshot,
    TableInfo,
    TableKind,
)

Bind = Engine | Connection | str | sa.URL


def dialect_name(bind: Engine | Connection) -> str:
    """Our dialect key: ``postgresql``, ``mysql`` (MariaDB included) or ``sqlite``; an
    engine no :class:`Dialect` answers to keeps SQLAlchemy's name."""
    found = Dialect.find(bind.dialect.name)
    return bind.dialect.name if found is None else found.name


def make_engine(url: str | sa.URL, *, timeout_s: float | None = None, **kwargs: Any) -> Engine:
    """``create_engine`` with configuration mistakes mapped to :class:`ConnectionConfigError`.

    Why: a bad URL or a missing driver is a setup error the caller should see by type and with
    the URL (password masked, even when the URL does not parse) in the message, not a bare
    SQLAlchemy ArgumentError. A SQLite file that does not exist is refused rather than
    created. Server engines pre-ping pooled connections and bound connecting and reading by
    ``timeout_s`` (default 30 s; :mod:`grid_sql.schema.faults`).
    """
    parsed = parse_url(url)
    missing = sqlite_missing(parsed)
    if missing is not None:
        raise ConnectionConfigError(f"SQLite database file not found: {missing} (not created)")
    bound = check_timeout(DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
    try:
        opts = engine_options(parsed, bound, kwargs)
        engine = sa.create_engine(parsed, **opts)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        shown = parsed.render_as_string(hide_password=True)
        raise ConnectionConfigError(f"cannot use database URL {shown!r}: {exc}") from exc
    if opts.get("pool_pre_ping"):
        bound_pre_ping(engine)
    return engine


def connect(bind: Bind, *, timeout_s: float | None = None) -> tuple[Connection, bool]:
    """A connection for ``bind`` and whether we opened it (so we close only what we opened).
    ``timeout_s`` bounds connecting when ``bind`` is a URL (see :func:`make_engine`)."""
    if isinstance(bind, Connection):
        return bind, False
    engine = bind if isinstance(bind, Engine) else make_engine(bind, timeout_s=timeout_s)
    try:
        return engine.connect(), True
    except sa.exc.OperationalError as exc:
        shown = engine.url.render_as_string(hide_password=True)
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise ConnectionConfigError(
            f"cannot connect to {shown}: {reason} (is the server running and reachable?)"
        ) from exc
    except sa.exc.DBAPIError as exc:
        shown = engine.url.render_as_string(hide_password=True)
        raise ConnectionConfigError(f"cannot connect to {shown}: {exc.orig}") from exc


def introspect(
    bind: Bind,
    *,
    schemas: Sequence[str] | None = None,
    include_system: bool = False,
) -> SchemaSnapshot:
    """Reflect the catalog visible to the connected role.

    ``schemas``: namespaces to read (default: every non-system schema the role can see; on
    MySQL that is every database it has a privilege in).
    """
    conn, owned = connect(bind)
    try:
        return _introspect(conn, schemas, include_system)
    except sa.exc.DBAPIError as exc:
        if is_connection_lost(exc):
            raise ConnectionLostError(
                f"the connection was lost while reading the database catalog: {exc.orig}"
            ) from exc
        raise SchemaError(f"cannot read the database catalog: {exc.orig}") from exc
    finally:
        if owned:
            conn.close()


def connected_schemas(bind: Bind) -> list[str] | None:
    """The namespaces a question about "the connected database" is about: on MySQL/MariaDB
    the database the connection selected (a login often sees many databases, and an
    unqualified name resolves in the selected one only, so offering the others' tables to the
    model invites statements the server refuses), None (every visible schema) elsewhere or
    when no database is selected."""
    conn, owned = connect(bind)
    try:
        return Dialect.of(conn).selected_schemas(conn)
    except sa.exc.DBAPIError as exc:
        # Same typing as introspect(): a server that went silent is a lost connection (the
        # caller's deadline and "never repair a lost connection" rules key on the type).
        if is_connection_lost(exc):
            raise ConnectionLostError(
                f"the connection was lost while reading the selected database: {exc.orig}"
            ) from exc
        raise SchemaError(f"cannot read the selected database: {exc.orig}") from exc
    finally:
        if owned:
            conn.close()


def _introspect(
    conn: Connection, schemas: Sequence[str] | None, include_system: bool
) -> SchemaSnapshot:
    d = Dialect.of(conn)
    insp = sa.inspect(conn)
    default = insp.default_schema_name
    if schemas is None:
        found = list(insp.get_schema_names())
        found += [s for s in dict.fromkeys(d.extra_schema_names(conn)) if s not in found]
        names = [
            s
            for s in found
            if (include_system or s not in d.system_schemas)
            and not s.startswith(d.hidden_schema_prefixes)
        ]
    else:
        names = list(schemas)
    visible = d.visible_relations(conn)
    out = []
    for schema in names:
        tables = _reflect_schema(insp, schema, visible)
        if tables or schema == default or schemas is not None:
            out.append(SchemaInfo(schema, tuple(tables)))
    return SchemaSnapshot(
        dialect=d.name,
        default_schema=default,
        schemas=tuple(out),
        exact_names=d.exact_names(conn),
    )


def _kind_names(insp: Inspector, schema: str) -> dict[str, TableKind]:
    try:
        return _inspector_kinds(insp, schema)
    except sa.exc.DBAPIError:
        if not Dialect.of(insp).partial_catalog_reads:
            raise
    # MariaDB refuses SHOW TABLES in a database reachable only through grants TO PUBLIC,
    # yet information_schema.TABLES lists those tables.
    bind = insp.bind
    assert isinstance(bind, Connection)
    rows = bind.execute(
        sa.text(
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = :s"
        ),
        {"s": schema},
    )
    return {r[0]: ("view" if r[1] == "VIEW" else "table") for r in rows}


def _inspector_kinds(insp: Inspector, schema: str) -> dict[str, TableKind]:
    kinds: dict[str, TableKind] = {}
    for name in insp.get_table_names(schema=schema):
        kinds[name] = "table"
    for name in insp.get_view_names(schema=schema):
        kinds[name] = "view"
    try:
        for name in insp.get_materialized_view_names(schema=schema):
            kinds[name] = "materialized_view"
    except NotImplementedError:
        pass
    return kinds


def _reflect_schema(
    insp: Inspector, schema: str, visible: set[tuple[str, str]] | None
) -> list[TableInfo]:
    kinds = _kind_names(insp, schema)
    if visible is not None:
        kinds = {n: k for n, k in kinds.items() if (schema, n) in visible}
    if not kinds:
        return []
    names = sorted(kinds)
    try:
        cols, pks, fks = _bulk(insp, schema, names)
    except (sa.exc.DBAPIError, sa.exc.NoSuchTableError):
        if not Dialect.of(insp).partial_catalog_reads:
            # PostgreSQL/SQLite catalog reads do not fail per table; a failure here is a
            # catalog the role may not read at all (and PostgreSQL has aborted the
            # transaction), so report it instead of returning a silently empty snapshot.
            raise
        # MySQL: one table the user may not SHOW must not sink the others.
        cols, pks, fks = {}, {}, {}
        for name in names:
            try:
                c, p, f = _bulk(insp, schema, [name])
            except (sa.exc.DBAPIError, sa.exc.NoSuchTableError):
                # MySQL reflection runs SHOW CREATE TABLE, which needs more than a column
                # privilege (and SHOW VIEW for views); information_schema.COLUMNS lists exactly
                # the columns the user has a privilege on. Keys are then unknown: left empty.
                c = _mysql_columns(insp, schema, name)
                if not c:
                    continue
                p, f = {}, {}
            cols.update(c)
            pks.update(p)
            fks.update(f)
    dialect = insp.dialect
    comments = _table_comments(insp, schema, names)
    tables = []
    for name in names:
        key = (schema, name)
        if key not in cols:
            continue
        columns = tuple(
            ColumnInfo(
                name=c["name"],
                type=_type_string(c["type"], dialect),
                nullable=bool(c.get("nullable", True)),
                default=None if c.get("default") is None else str(c.get("default")),
                comment=c.get("comment") or None,
            )
            for c in cols[key]
        )
        pk = pks.get(key) or {}
        foreign = tuple(
            ForeignKeyInfo(
                columns=tuple(fk["constrained_columns"]),
                referred_table=fk["referred_table"],
                referred_columns=tuple(fk["referred_columns"]),
                # SQLAlchemy leaves the schema out when it is the connection's default; the
                # snapshot spells it out so a reference means the same thing everywhere.
                referred_schema=fk.get("referred_schema") or insp.default_schema_name or schema,
                name=fk.get("name"),
            )
            for fk in fks.get(key, [])
        )
        tables.append(
            TableInfo(
                name=name,
                kind=kinds[name],
                columns=columns,
                primary_key=tuple(pk.get("constrained_columns") or ()),
                foreign_keys=foreign,
                comment=comments.get(key) or None,
            )
        )
    return tables


def _bulk(
    insp: Inspector, schema: str, names: Iterable[str]
) -> tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]:
    """Columns, primary keys and foreign keys of ``names`` in three bulk catalog calls."""
    filt = list(names)
    common: dict[str, Any] = {
        "schema": schema,
        "filter_names": filt,
        "kind": ObjectKind.ANY,
        "scope": ObjectScope.ANY,
    }
    with Dialect.of(insp).reflection_context(insp, schema, filt):
        cols = dict(insp.get_multi_columns(**common))
        pks = dict(insp.get_multi_pk_constraint(**common))
        fks = dict(insp.get_multi_foreign_keys(**common))
    return cols, pks, fks


def _table_comments(insp: Inspector, schema: str, names: Sequence[str]) -> dict[Any, Any]:
    """Table comments (``COMMENT ON TABLE``, MariaDB ``COMMENT '...'``) of ``names``, in one
    bulk call; empty where the dialect has none (SQLite) or the role may not read them.

    Why they are read: a warehouse's descriptions are often the only place that says what a
    cryptically named table holds, and the prompt's schema linking uses them."""
    d = Dialect.of(insp)
    if not d.table_comments:
        return {}
    try:
        got = insp.get_multi_table_comment(
            schema=schema, filter_names=list(names), kind=ObjectKind.ANY, scope=ObjectScope.ANY
        )
    except (NotImplementedError, sa.exc.DBAPIError):
        if d.failed_read_aborts_transaction:
            raise  # a failed PostgreSQL read aborts the transaction: not silently ignorable
        return {}
    return {k: (v or {}).get("text") for k, v in dict(got).items()}


def _mysql_columns(insp: Inspector, schema: str, name: str) -> dict[Any, Any]:
    bind = insp.bind
    assert isinstance(bind, Connection)
    rows = bind.execute(
        sa.text(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT"
            " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = :s AND TABLE_NAME = :t"
            " ORDER BY ORDINAL_POSITION"
        ),
        {"s": schema, "t": name},
    ).all()
    if not rows:
        return {}
    cols = [
        {
            "name": r[0],
            "type": _RawType(str(r[1]).upper()),
            "nullable": r[2] == "YES",
            "default": r[3],
        }
        for r in rows
    ]
    return {(schema, name): cols}


class _RawType:
    """A type known only by its catalog spelling (information_schema fallback)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def compile(self, dialect: sa.Dialect | None = None) -> str:
        return self.text


def _type_string(typ: Any, dialect: sa.Dialect) -> str:
    """The type as the dialect spells it; falls back to the class name for odd types."""
    try:
        return str(typ.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - any compile failure: an exotic type, still a column
        return type(typ).__name__
