"""Real-server fixtures: a scratch database per engine with roles of known grants.

The servers come from ``scripts/services.sh`` (URLs in GRID_SQL_PG_URL / GRID_SQL_MYSQL_URL,
superuser credentials). Locally a missing server skips these tests; with ``CI=true`` it fails
them, because a green CI run that silently skipped the database layer would be a lie.

Setup is idempotent and versioned: roles and the scratch databases are (re)built only when the
marker table holds an older SETUP_VERSION, under a server-side lock so parallel pytest workers
do not race.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.servers import server_engine

SETUP_VERSION = 5
PASSWORD = "gs-test-pw"
PG_DB = "grid_sql_test"
PG_NOCATALOG_DB = "grid_sql_test_nocatalog"
MY_DB = "grid_sql_test"
MY_DB2 = "grid_sql_test2"

PG_ROLES = (
    "gs_reader",
    "gs_colonly",
    "gs_inserter",
    "gs_group",
    "gs_member",
    "gs_noinherit",
    "gs_owner",
)
MY_USERS = ("gs_reader", "gs_colonly", "gs_inserter", "gs_member", "gs_nondefault", "gs_global")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "db: needs the real PostgreSQL/MariaDB test servers")


# ------------------------------------------------------------------ PostgreSQL
PG_SETUP = """
DROP SCHEMA IF EXISTS public CASCADE;
CREATE SCHEMA public;
DROP SCHEMA IF EXISTS "Sales" CASCADE;
DROP SCHEMA IF EXISTS hidden CASCADE;
CREATE TABLE public.customer (id serial PRIMARY KEY, name text NOT NULL, email text,
                              "Phone" text);
CREATE TABLE public.orders (id serial PRIMARY KEY,
                            customer_id int REFERENCES public.customer(id), total numeric(8,2));
CREATE TABLE public.audit_log (id serial PRIMARY KEY, msg text);
CREATE TABLE public."select" (id int PRIMARY KEY, "order" int, "from" text);
CREATE TABLE public.public_notes (id int PRIMARY KEY, body text);
CREATE VIEW public.customer_names AS SELECT id, name FROM public.customer;
CREATE SCHEMA "Sales";
CREATE TABLE "Sales"."Order Items" (id int PRIMARY KEY, "Official_ratings_(millions)" text,
                                    "CamelCol" int,
                                    order_id int REFERENCES public.orders(id));
CREATE TABLE "Sales".secret (id int PRIMARY KEY, v text);
CREATE SCHEMA hidden;
CREATE TABLE hidden.t (id int PRIMARY KEY);
INSERT INTO public.customer (name, email, "Phone") VALUES ('Ann', 'a@x', '1'), ('Bob', 'b@x', '2');
INSERT INTO public.orders (customer_id, total) VALUES (1, 10), (2, 20);

REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO PUBLIC;
GRANT SELECT ON public.public_notes TO PUBLIC;

GRANT SELECT ON public.customer, public.orders, public.customer_names TO gs_reader;
GRANT USAGE ON SCHEMA "Sales" TO gs_reader;
GRANT SELECT ON "Sales"."Order Items" TO gs_reader;
GRANT SELECT ON hidden.t TO gs_reader;  -- no USAGE on hidden: unusable

GRANT SELECT (id, name), UPDATE (name) ON public.customer TO gs_colonly;

GRANT INSERT ON public.audit_log TO gs_inserter;
GRANT USAGE ON SEQUENCE public.audit_log_id_seq TO gs_inserter;

GRANT SELECT, UPDATE, DELETE ON public.orders TO gs_group;
GRANT TRUNCATE ON public.audit_log TO gs_group;
GRANT SELECT ("id", "order") ON public."select" TO gs_group;

ALTER TABLE public.audit_log OWNER TO gs_owner;  -- owner: every privilege, DDL verbs
GRANT CREATE ON SCHEMA "Sales" TO gs_owner;      -- CREATE without USAGE
"""


def _pg_roles_sql() -> list[str]:
    stmts = []
    for role in PG_ROLES:
        login = "NOLOGIN" if role == "gs_group" else f"LOGIN PASSWORD '{PASSWORD}'"
        inherit = "NOINHERIT" if role == "gs_noinherit" else "INHERIT"
        stmts.append(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') "
            f"THEN CREATE ROLE {role}; END IF; END $$"
        )
        stmts.append(f"ALTER ROLE {role} {login} {inherit}")
    stmts.append("GRANT gs_group TO gs_member, gs_noinherit")
    return stmts


@pytest.fixture(scope="session")
def pg_admin() -> Engine:
    """Superuser engine on the ``postgres`` database."""
    return server_engine("GRID_SQL_PG_URL")


def _pg_db_url(admin: Engine, db: str, user: str | None = None) -> sa.URL:
    url = admin.url.set(database=db)
    if user is not None:
        url = url.set(username=user, password=PASSWORD)
    return url


@pytest.fixture(scope="session")
def pg_setup(pg_admin: Engine) -> Engine:
    """Build (once per SETUP_VERSION) the scratch database and roles; superuser engine on it."""
    with pg_admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(7317001)"))
        try:
            current = conn.execute(
                sa.text(
                    "SELECT shobj_description(oid, 'pg_database') FROM pg_database"
                    " WHERE datname = :db"
                ),
                {"db": PG_DB},
            ).scalar()
            if current != f"grid-sql-test v{SETUP_VERSION}":
                for stmt in _pg_roles_sql():
                    conn.execute(sa.text(stmt))
                for db in (PG_DB, PG_NOCATALOG_DB):
                    conn.execute(sa.text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                    conn.execute(sa.text(f"CREATE DATABASE {db}"))
                db_engine = sa.create_engine(_pg_db_url(pg_admin, PG_DB))
                with db_engine.begin() as dconn:
                    dconn.exec_driver_sql(PG_SETUP)
                db_engine.dispose()
                nocat = sa.create_engine(_pg_db_url(pg_admin, PG_NOCATALOG_DB))
                with nocat.begin() as dconn:
                    dconn.exec_driver_sql(
                        "CREATE TABLE t (id int); GRANT SELECT ON t TO gs_reader;"
                        "REVOKE SELECT ON pg_catalog.pg_namespace FROM PUBLIC;"
                        "REVOKE SELECT ON pg_catalog.pg_class FROM PUBLIC;"
                    )
                nocat.dispose()
                conn.execute(
                    sa.text(f"COMMENT ON DATABASE {PG_DB} IS 'grid-sql-test v{SETUP_VERSION}'")
                )
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(7317001)"))
    return sa.create_engine(_pg_db_url(pg_admin, PG_DB))


@pytest.fixture(scope="session")
def pg_role_url(pg_admin: Engine, pg_setup: Engine) -> Callable[..., sa.URL]:
    """``pg_role_url(role, db=PG_DB)`` → URL connecting as that test role."""

    def make(role: str, db: str = PG_DB) -> sa.URL:
        return _pg_db_url(pg_admin, db, role)

    return make


# ------------------------------------------------------------------ MariaDB
MY_SETUP = f"""
DROP DATABASE IF EXISTS {MY_DB};
DROP DATABASE IF EXISTS {MY_DB2};
CREATE DATABASE {MY_DB};
CREATE DATABASE {MY_DB2};
CREATE TABLE {MY_DB}.customer (id int PRIMARY KEY, name varchar(50) NOT NULL, email varchar(50),
                               Phone varchar(20));
CREATE TABLE {MY_DB}.orders (id int PRIMARY KEY, customer_id int, total decimal(8,2),
                             FOREIGN KEY (customer_id) REFERENCES {MY_DB}.customer(id));
CREATE TABLE {MY_DB}.audit_log (id int PRIMARY KEY AUTO_INCREMENT, msg text);
CREATE TABLE {MY_DB}.`select` (id int PRIMARY KEY, `order` int, `from` text);
CREATE TABLE {MY_DB}.public_notes (id int PRIMARY KEY, body text);
CREATE TABLE {MY_DB}.`Order Items` (id int PRIMARY KEY, `Official_ratings_(millions)` text,
                                     CamelCol int);
CREATE VIEW {MY_DB}.customer_names AS SELECT id, name FROM {MY_DB}.customer;
CREATE TABLE {MY_DB2}.other (id int PRIMARY KEY, v text);
"""


def _my_users_sql() -> list[str]:
    stmts = [f"DROP USER IF EXISTS '{u}'@'%'" for u in MY_USERS]
    stmts += ["DROP ROLE IF EXISTS gs_group"]
    stmts += [f"CREATE USER '{u}'@'%' IDENTIFIED BY '{PASSWORD}'" for u in MY_USERS]
    stmts += [
        "CREATE ROLE gs_group",
        f"GRANT SELECT ON {MY_DB}.customer TO 'gs_reader'@'%'",
        f"GRANT SELECT ON {MY_DB}.orders TO 'gs_reader'@'%'",
        f"GRANT SELECT ON {MY_DB}.customer_names TO 'gs_reader'@'%'",
        f"GRANT SELECT ON {MY_DB}.`Order Items` TO 'gs_reader'@'%'",
        "GRANT SELECT ON `grid\\_sql\\_test2`.* TO 'gs_reader'@'%'",
        f"GRANT SELECT (id, name), UPDATE (name) ON {MY_DB}.customer TO 'gs_colonly'@'%'",
        f"GRANT INSERT ON {MY_DB}.audit_log TO 'gs_inserter'@'%'",
        f"GRANT SELECT, UPDATE, DELETE ON {MY_DB}.orders TO gs_group",
        f"GRANT DROP ON {MY_DB}.audit_log TO gs_group",
        f"GRANT SELECT (id, `order`) ON {MY_DB}.`select` TO gs_group",
        "GRANT gs_group TO 'gs_member'@'%'",
        "SET DEFAULT ROLE gs_group FOR 'gs_member'@'%'",
        "GRANT gs_group TO 'gs_nondefault'@'%'",
        "GRANT SELECT ON *.* TO 'gs_global'@'%'",
        f"GRANT SELECT ON {MY_DB}.public_notes TO PUBLIC",
    ]
    return stmts


@pytest.fixture(scope="session")
def my_admin() -> Engine:
    return server_engine("GRID_SQL_MYSQL_URL")


@pytest.fixture(scope="session")
def my_setup(my_admin: Engine) -> Engine:
    with my_admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("SELECT GET_LOCK('grid_sql_test_setup', 120)"))
        try:
            conn.execute(sa.text(f"CREATE DATABASE IF NOT EXISTS {MY_DB}"))
            conn.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {MY_DB}.setup_marker (v int)"))
            current = conn.execute(sa.text(f"SELECT max(v) FROM {MY_DB}.setup_marker")).scalar()
            if current != SETUP_VERSION:
                for stmt in MY_SETUP.split(";"):
                    if stmt.strip():
                        conn.exec_driver_sql(stmt)
                for stmt in _my_users_sql():
                    conn.exec_driver_sql(stmt.replace("%", "%%"))  # pymysql's paramstyle
                conn.execute(sa.text(f"CREATE TABLE {MY_DB}.setup_marker (v int)"))
                conn.execute(sa.text(f"INSERT INTO {MY_DB}.setup_marker VALUES ({SETUP_VERSION})"))
        finally:
            conn.execute(sa.text("SELECT RELEASE_LOCK('grid_sql_test_setup')"))
    return sa.create_engine(my_admin.url.set(database=MY_DB))


@pytest.fixture(scope="session")
def my_user_url(my_admin: Engine, my_setup: Engine) -> Callable[..., sa.URL]:
    def make(user: str, db: str = MY_DB) -> sa.URL:
        return my_admin.url.set(username=user, password=PASSWORD, database=db)

    return make
