"""The big-catalog database of the defog benchmark (issue #25 §5): all 11 defog databases in
one PostgreSQL database, one schema each, plus 2,000 distractor tables spread over them.

Why one database with schemas: a company's warehouse is one catalog with many schemas; a
question about flights must find ``atis.flight`` among ``scholar.*``, ``yelp.*`` and thousands
of near-namesakes (``bi_flight_archive_2019``), where the per-database arm sees only the eleven
to twenty-four tables of its own database. The data are the same rows (each database's dump is
loaded into its schema: ``public.`` becomes ``<db>.``, unqualified names land there by
``search_path``; ewallet keeps its own ``consumer_div`` schema), so the gold statements, run
on the per-database copies, score the big arm's answers too.

Distractors (``bench/big_catalog.py``'s generator, words of the defog tables mixed in): empty
tables of 3 to 12 columns, some with foreign keys, each in one of the defog schemas or in
``warehouse``. The reader (``grid_defog_reader``) gets CONNECT, USAGE on every schema and
SELECT on every table, nothing else, as in the per-database arm.

The database is rebuilt only when its recorded layout (a comment on the database) differs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from big_catalog import distractor_ddl, distractor_names

BIG = "big"  # the defog "database" name of the big catalog: PostgreSQL database defog_big
LAYOUT = "grid-sql defog big catalog v1"


def _dump(data: Path, db: str) -> tuple[str, str]:
    """(schema, script) of database ``db``'s dump, loaded into its own schema."""
    text = (data / "databases" / db / f"{db}.sql").read_text(encoding="utf-8")
    own = re.search(r"CREATE SCHEMA IF NOT EXISTS (\w+);", text)
    if own:  # ewallet: its tables are already qualified with their own schema
        return own.group(1), text
    return db, f"CREATE SCHEMA {db};\nSET search_path = {db};\n" + text.replace("public.", f"{db}.")


def ensure_big(
    conninfo_of: Callable[[str], str],
    data: Path,
    dbs: Sequence[str],
    n_distractors: int,
    role: str,
    database: str = f"defog_{BIG}",
) -> list[str]:
    """Build ``database`` unless it already has this layout; grant ``role`` read access.
    ``conninfo_of(dbname)`` gives the superuser's connection string. Returns the schemas."""
    import psycopg
    from psycopg import sql as psql

    layout = f"{LAYOUT}; dbs={','.join(dbs)}; distractors={n_distractors}"
    name = psql.Identifier(database)
    with psycopg.connect(conninfo_of("postgres"), autocommit=True) as con:
        row = con.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (database,),
        ).fetchone()
        fresh = row is None or row[0] != layout
        if fresh and row is not None and row[0] and not row[0].startswith(LAYOUT):
            raise SystemExit(f"database {database} exists and is not a big catalog: not dropped")
        if fresh:
            con.execute(psql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            con.execute(psql.SQL("CREATE DATABASE {}").format(name))
    schemas: list[str] = []
    with psycopg.connect(conninfo_of(database)) as con:
        for db in dbs:
            schema, script = _dump(data, db)
            schemas.append(schema)
            if fresh:
                con.execute(script.encode())  # no parameters: a multi-statement script
                con.execute("RESET search_path")
        if fresh:
            con.execute("CREATE SCHEMA warehouse")
            real = {
                r[0].lower()
                for r in con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ANY(%s)",
                    (schemas,),
                )
            }
            words = sorted({w for t in real for w in (t, *t.split("_")) if len(w) > 3})
            names = [x for x in distractor_names(n_distractors, words) if x.lower() not in real]
            rng = random.Random(2025)
            home = {x: rng.choice([*schemas, "warehouse"]) for x in names}
            for i, stmt in enumerate(distractor_ddl(names, lambda x: f"{home[x]}.{x}")):
                con.execute(stmt.encode())
                if i % 500 == 499:  # one transaction would hold a lock per table: more than a
                    con.commit()  # default server's lock table (the layout comment comes last)
            con.execute(psql.SQL("COMMENT ON DATABASE {} IS {}").format(name, psql.Literal(layout)))
        con.commit()
    with psycopg.connect(conninfo_of(database), autocommit=True) as con:
        r = psql.Identifier(role)
        con.execute(psql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(name))
        con.execute(psql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(name, r))
        con.execute(psql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(name, r))
        for schema in [*schemas, "warehouse"]:
            s = psql.Identifier(schema)
            con.execute(psql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, r))
            con.execute(psql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(s, r))
    return schemas
