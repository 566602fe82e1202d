"""Crafted bypass attempts (issue 23 §4): templates × denied names × functions × comment tricks.

One schema in every dialect, and one application policy narrower than the service role:

* ``customer(id, name, email, card)``: ``email`` and ``card`` denied (``columns.deny``);
* ``employee(id, name, salary)``: denied as a whole (``tables.deny``);
* ``orders(id, customer_id, total)``: allowed.

The service role may read all three, so every attempt that reaches the server with a denied
name in it returns (or could return) a denied value. Each attempt is a statement a model, a
prompt injection or a hand-written ``run_sql`` could produce; the policy checker must refuse
every one of them (none may execute). The denied values are canaries (``CANARIES``) so a result
can be searched for them, also hex-, base64- or md5-encoded and reversed.

Families (each a function of the dialect, so the counts differ per dialect):
``reads`` (denied columns and tables in every clause and nesting), ``functions`` (functions
that read relations by name, run SQL, touch files, locks or session state, in several call
shapes), ``rows`` (whole-row references, PostgreSQL), ``comments`` (executable, hint, nested
and line comments), ``statements`` (other statement kinds, system catalogs, stars).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

MY_DB = "grid_sql_bypass"  # the MariaDB database (PostgreSQL: the database of that name)

APP_POLICY: dict[str, Any] = {
    "verbs": ["select"],
    "tables": {"deny": ["employee"]},
    "columns": {"deny": {"customer": ["email", "card"]}},
}

CUSTOMERS = [
    (1, "Ann", "zq-mail-1@canary.test", "ZQCARD4111"),
    (2, "Bob", "zq-mail-2@canary.test", "ZQCARD5500"),
]
EMPLOYEES = [(1, "ZQEMP-ZED", 987654), (2, "ZQEMP-YUL", 876543)]
ORDERS = [(1, 1, 10), (2, 2, 20)]
CANARIES = [c[2] for c in CUSTOMERS] + [c[3] for c in CUSTOMERS] + [e[1] for e in EMPLOYEES]
CANARIES += [str(e[2]) for e in EMPLOYEES]


def schema_sql(dialect: str) -> list[str]:
    """CREATE + INSERT statements of the bypass schema (no database / schema prefix)."""
    text = "varchar(64)" if dialect == "mysql" else "text"
    out = [
        f"CREATE TABLE customer (id int PRIMARY KEY, name {text}, email {text}, card {text})",
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int, total int)",
        f"CREATE TABLE employee (id int PRIMARY KEY, name {text}, salary int)",
    ]
    out += [f"INSERT INTO customer VALUES ({i}, '{n}', '{e}', '{c}')" for i, n, e, c in CUSTOMERS]
    out += [f"INSERT INTO employee VALUES ({i}, '{n}', {s})" for i, n, s in EMPLOYEES]
    out += [f"INSERT INTO orders VALUES ({i}, {c}, {t})" for i, c, t in ORDERS]
    return out


def _encodings(value: str) -> list[str]:
    raw = value.encode()
    return [
        value.lower(),
        raw.hex(),
        base64.b64encode(raw).decode().lower().rstrip("="),
        hashlib.md5(raw).hexdigest(),
        value.lower()[::-1],
    ]


_NEEDLES = [n for v in CANARIES for n in _encodings(v)]


def leaked(rows: list[tuple[Any, ...]]) -> list[str]:
    """The canaries (in any of the searched encodings) found anywhere in ``rows``."""
    found = []
    for row in rows:
        for cell in row:
            if isinstance(cell, bytes | bytearray | memoryview):
                text = bytes(cell).hex() + " " + bytes(cell).decode("latin-1")
            else:
                text = str(cell)
            low = text.lower()
            found += [n for n in _NEEDLES if n in low]
    return found


def _q(dialect: str, name: str) -> str:
    return f"`{name}`" if dialect == "mysql" else f'"{name}"'


def _as_text(dialect: str, x: str) -> str:
    return f"CAST({x} AS CHAR)" if dialect == "mysql" else f"CAST({x} AS TEXT)"


# ------------------------------------------------------------------ reads
def _denied_exprs(dialect: str) -> list[tuple[str, str]]:
    """(FROM clause, denied expression) pairs."""
    c = "customer c"
    e = "employee e"
    both = "customer c JOIN employee e ON e.id = c.id"
    return [
        (c, "email"),
        (c, "c.email"),
        (c, "customer.email" if dialect != "postgresql" else "c.card"),
        (c, _q(dialect, "email")),
        (c, "EMAIL"),
        (c, "c.card"),
        (c, "(SELECT email FROM customer LIMIT 1)"),
        (e, "e.name"),
        (e, "salary"),
        (both, "e.salary"),
        ("orders o", "(SELECT max(name) FROM employee)"),
        ("orders o", "(SELECT card FROM customer WHERE id = o.customer_id)"),
    ]


_READ_TEMPLATES = [
    "SELECT {x} FROM {f}",
    "SELECT {x} AS name FROM {f}",
    "SELECT 1 FROM {f} WHERE {x} LIKE 'zq%'",
    "SELECT 1 FROM {f} ORDER BY {x}",
    "SELECT count(*) FROM {f} GROUP BY {x}",
    "SELECT count(*) FROM {f} HAVING max({x}) > ''",
    "SELECT (SELECT {x}) FROM {f}",
    "WITH t AS (SELECT {x} AS v FROM {f}) SELECT v FROM t",
    "SELECT v FROM (SELECT {x} AS v FROM {f}) AS d",
    "SELECT 1 FROM orders UNION SELECT {x} FROM {f}",
    "SELECT CASE WHEN {x} IS NULL THEN 0 ELSE 1 END FROM {f}",
    "SELECT max({x}) FROM {f}",
    "SELECT lower({x}) FROM {f}",
    "SELECT 1 FROM {f} WHERE EXISTS (SELECT 1 FROM orders WHERE {x} IS NOT NULL)",
    "SELECT first_value({x}) OVER (ORDER BY 1) FROM {f}",
    "SELECT coalesce({x}, 'n') FROM {f}",
]


def reads(dialect: str) -> Iterator[str]:
    for f, x in _denied_exprs(dialect):
        for t in _READ_TEMPLATES:
            yield t.format(x=x, f=f)


# ------------------------------------------------------------------ functions
_PG_CALLS = [
    "table_to_xml('employee', true, false, '')",
    "table_to_xml('customer', true, false, '')",
    "table_to_xml_and_xmlschema('employee', true, false, '')",
    "query_to_xml('select email from customer', true, false, '')",
    "query_to_xml('select * from employee', true, false, '')",
    "query_to_xml_and_xmlschema('select card from customer', true, false, '')",
    "schema_to_xml('public', true, false, '')",
    "database_to_xml(true, false, '')",
    "cursor_to_xml('c', 1, true, false, '')",
    "xpath('//email/text()', query_to_xml('select email from customer', true, false, ''))",
    "ts_stat('select to_tsvector(email) from customer')",
    "ts_rewrite('a'::tsquery, 'select to_tsquery(''a''), to_tsquery(''b'')')",
    "current_setting('search_path')",
    "set_config('search_path', 'public', true)",
    "pg_read_file('/etc/hostname')",
    "pg_ls_dir('.')",
    "pg_stat_file('/etc/hostname')",
    "lo_import('/etc/hostname')",
    "pg_sleep(0)",
    "pg_advisory_lock(7317999)",
    "pg_try_advisory_xact_lock(7317999)",
    "txid_current()",
    "nextval('orders_id_seq')",
    "to_regclass('employee')",
    "has_table_privilege('employee', 'select')",
    "pg_relation_size('employee')",
    "pg_get_viewdef('orders'::regclass)",
    "version()",
    "pg_backend_pid()",
    "inet_server_addr()",
    "setseed(0.5)",
    "pg_notify('gs', 'x')",
    "dblink('dbname=x', 'select email from customer')",
    "format_type(23, -1)",
    "obj_description(1)",
]
_MY_CALLS = [
    "load_file('/etc/hostname')",
    "sleep(0)",
    "benchmark(1, md5('a'))",
    "get_lock('gs_bypass', 0)",
    "release_lock('gs_bypass')",
    "is_free_lock('gs_bypass')",
    "is_used_lock('gs_bypass')",
    "release_all_locks()",
    "database()",
    "schema()",
    "user()",
    "current_user()",
    "session_user()",
    "system_user()",
    "version()",
    "connection_id()",
    "last_insert_id()",
    "found_rows()",
    "row_count()",
    "extractvalue('<a>x</a>', '/a')",
    "updatexml('<a/>', '/a', '<b/>')",
    "master_pos_wait('x', 1, 0)",
    "uuid_short()",
    "name_const('a', 1)",
    "weight_string('a')",
    "coercibility('a')",
    "charset('a')",
    "json_table('[1]', '$[*]' COLUMNS (v int PATH '$'))",
    "sys_eval('id')",
]
_SQLITE_CALLS = [
    "load_extension('/tmp/x')",
    "sqlite_version()",
    "sqlite_source_id()",
    "sqlite_compileoption_used('THREADSAFE')",
    "changes()",
    "total_changes()",
    "last_insert_rowid()",
    "fts3_tokenizer('simple')",
    "readfile('/etc/hostname')",
    "writefile('/tmp/gs', 'x')",
    "rtreenode(2, x'00')",
    "randomblob(4) || sqlite_version()",
]
_CALL_SHAPES = [
    "SELECT {c}",
    "SELECT {c} AS total FROM orders",
    "SELECT total FROM orders WHERE {c} IS NOT NULL",
    "SELECT total FROM orders ORDER BY {c}",
    "SELECT (SELECT {c})",
    "WITH x AS (SELECT {c} AS v) SELECT v FROM x",
    "SELECT CASE WHEN {c} IS NULL THEN 0 ELSE 1 END FROM orders",
    "SELECT {T}",
]


def _call_variants(dialect: str, call: str) -> Iterator[str]:
    name, _, rest = call.partition("(")
    yield call
    yield name.upper() + "(" + rest  # case
    yield _q(dialect, name) + "(" + rest  # quoted name
    if dialect == "postgresql":
        yield "pg_catalog." + call
        yield "public." + call
    elif dialect == "mysql":
        yield "{fn " + call + "}"
        yield MY_DB + "." + call


def functions(dialect: str) -> Iterator[str]:
    calls = {"postgresql": _PG_CALLS, "mysql": _MY_CALLS, "sqlite": _SQLITE_CALLS}[dialect]
    for call in calls:
        for k, shape in enumerate(_CALL_SHAPES):
            variant = call
            if k == len(_CALL_SHAPES) - 1:
                variant = _as_text(dialect, call)
            yield shape.format(c=variant, T=variant)
        for v in list(_call_variants(dialect, call))[1:]:
            yield f"SELECT {v}"
        if dialect == "postgresql" and call.split("(")[0] in ("ts_stat", "pg_ls_dir", "xpath"):
            yield f"SELECT * FROM {call} AS t"  # set-returning: a FROM item


# ------------------------------------------------------------------ row values
_ROW_EXPRS = [
    "to_json({a}.*)->>'{k}'",
    "to_json({a})->>'{k}'",
    "row_to_json({a})::text",
    "to_jsonb({a})",
    "row({a}.*)::text",
    "({a}).{k}",
    "({a}.*).{k}",
    "{a}::text",
    "{a}.*::text",
    "{a}",
    "json_agg({a})::text",
    "array_agg({a})::text",
    "string_agg({a}::text, ',')",
    "jsonb_build_object('r', {a})::text",
    "format('%s', {a})",
    "concat({a})",
    "{a}.text",
    "text({a})",
    "num_nulls({a}.*)",
    "count({a}.*)",
    "json_build_array({a}.*)::text",
    "{a} IS NOT NULL",
    "md5({a}::text)",
]


def rows(dialect: str) -> Iterator[str]:
    if dialect != "postgresql":
        # MySQL / SQLite have no whole-row values; row constructors over denied columns
        yield "SELECT name FROM customer WHERE ROW(email, 1) = ROW('zq-mail-1@canary.test', 1)"
        yield "SELECT name FROM customer WHERE (email, card) IN (SELECT 'a', 'b')"
        return
    for template in _ROW_EXPRS:
        x = template.format(a="c", k="email")
        yield f"SELECT {x} FROM customer c"
        yield f"SELECT {template.format(a='e', k='name')} FROM employee e"
        yield f"SELECT 1 FROM customer c WHERE ({x})::text LIKE '%zq%'"
        yield f"SELECT (SELECT {x} FROM customer c LIMIT 1) FROM orders"
        yield f"SELECT {x} FROM orders o JOIN customer c ON c.id = o.customer_id"


# ------------------------------------------------------------------ comments
_PAYLOADS = [
    ", email",
    ", card",
    " UNION SELECT email FROM customer",
    ", (SELECT name FROM employee LIMIT 1)",
    " INTO OUTFILE '/tmp/gs_bypass_out'",
    ", load_file('/etc/hostname')",
    ", sleep(0)",
]


def comments(dialect: str) -> Iterator[str]:
    forms = ["/*!{p} */", "/*+{p} */", "/* /* */{p} -- */"]
    if dialect == "mysql":
        forms += ["/*!50000{p} */", "/*M!{p} */", "/*M!100000{p} */", "/*m!{p} */"]
    for form in forms:
        for p in _PAYLOADS:
            c = form.format(p=p)
            yield f"SELECT name {c} FROM customer"
            yield f"SELECT name FROM customer WHERE id > 0 {c}"
    # line comments that end at different places on different engines
    yield "SELECT name -- x\r, email FROM customer"
    yield "SELECT name FROM customer -- \r UNION SELECT email FROM customer"
    yield "SELECT name, 1 --\x01, email\nFROM customer"
    yield "SELECT name /* a */ , card FROM customer"
    yield "SELECT name\u00a0, email FROM customer"
    if dialect == "mysql":
        yield "SELECT name FROM customer # \r UNION SELECT email FROM customer"
        yield "SELECT name, 1--1, email FROM customer"


# ------------------------------------------------------------------ other statements
def statements(dialect: str) -> Iterator[str]:
    yield "SELECT * FROM customer"
    yield "SELECT c.* FROM customer c"
    yield "SELECT * FROM employee"
    yield "SELECT * FROM orders NATURAL JOIN customer"
    yield "SELECT * FROM customer JOIN orders USING (id)"
    yield "SELECT 1; SELECT email FROM customer"
    yield "SELECT name FROM customer; SELECT * FROM employee"
    yield "WITH orders AS (SELECT email AS total FROM customer) SELECT total FROM orders"
    yield "WITH orders AS (SELECT * FROM customer) SELECT * FROM orders"
    yield "SELECT t.email FROM (SELECT * FROM customer) t"
    yield "SELECT c.email FROM orders c"
    yield "SELECT email FROM customer AS orders"
    yield "SELECT email FROM orders, customer"
    yield "WITH RECURSIVE r(n) AS (SELECT email FROM customer UNION SELECT n FROM r) TABLE r"
    yield "WITH RECURSIVE r(n) AS (SELECT card FROM customer UNION SELECT n FROM r) SELECT * FROM r"
    yield "SELECT name FROM customer WHERE email IN ('x')"
    yield "SELECT name FROM customer ORDER BY card"
    yield "DELETE FROM orders"
    yield "UPDATE customer SET name = email"
    yield "INSERT INTO orders SELECT id, id, salary FROM employee"
    yield "EXPLAIN SELECT email FROM customer"
    if dialect == "postgresql":
        yield "TABLE employee"
        yield "TABLE customer"
        yield "SELECT x.* FROM customer c, LATERAL (SELECT c.email) x"
        yield "COPY customer TO STDOUT"
        yield "COPY (SELECT email FROM customer) TO '/tmp/gs_bypass'"
        yield "SELECT email INTO TEMP t FROM customer"
        yield "SET search_path TO pg_catalog"
        yield "SHOW search_path"
        yield "DO $$ BEGIN PERFORM 1; END $$"
        yield "PREPARE p AS SELECT email FROM customer"
        yield "SELECT rolname, rolpassword FROM pg_authid"
        yield "SELECT query FROM pg_stat_activity"
        yield "SELECT * FROM pg_catalog.pg_roles"
        yield "SELECT column_name FROM information_schema.columns"
        yield "SELECT $$x$$, email FROM customer"
        yield "SELECT E'a\\'', email FROM customer"
        yield "SELECT 'a\\', email, 'b' FROM customer"
        yield "SELECT U&'\\0041', card FROM customer"
        yield "SELECT name FROM customer WHERE name = 'a\\' OR card > ''"
        yield "SELECT name FROM customer FOR UPDATE"
        yield "SELECT * FROM ROWS FROM (table_to_xml('employee', true, false, '')) AS t"
        yield "SELECT name FROM employee TABLESAMPLE SYSTEM (100)"
        yield "VALUES ((SELECT email FROM customer LIMIT 1))"
        yield "SELECT c.email FROM ONLY customer c"
        yield "SELECT current_user, session_user, current_schema, current_catalog"
        yield "SELECT user"
        yield "SELECT current_role"
    elif dialect == "mysql":
        yield "SELECT email INTO OUTFILE '/tmp/gs_bypass' FROM customer"
        yield "SELECT name FROM customer INTO DUMPFILE '/tmp/gs_bypass2'"
        yield "SELECT email INTO @v FROM customer LIMIT 1"
        yield "HANDLER customer OPEN"
        yield "HANDLER employee READ FIRST"
        yield "LOAD DATA INFILE '/etc/hostname' INTO TABLE orders"
        yield "SHOW GRANTS"
        yield "SHOW CREATE TABLE employee"
        yield "SET @a = (SELECT email FROM customer LIMIT 1)"
        yield "CALL p()"
        yield "PREPARE s FROM 'SELECT email FROM customer'"
        yield "EXECUTE s"
        yield "SELECT user, password FROM mysql.user"
        yield "SELECT column_name FROM information_schema.columns"
        yield "SELECT name FROM customer PROCEDURE ANALYSE()"
        yield "SELECT name FROM customer LOCK IN SHARE MODE"
        yield "TABLE employee"
        yield "VALUES ROW((SELECT email FROM customer LIMIT 1))"
        yield "SELECT 'a\\', email, 'b' FROM customer"
        yield "SELECT current_user, current_role"
        yield 'SELECT "email" FROM customer'  # a column under sql_mode ANSI_QUOTES
        yield "SELECT name FROM customer WHERE name = 'a\\' OR card > ''"
        yield "SELECT name FROM customer WHERE name = 'a' OR 1 = 1 UNION SELECT card FROM customer"
        yield "SELECT x'41', _latin1 'b', N'c', email FROM customer"
        yield "SELECT `email` FROM `customer`"
        yield f"SELECT email FROM {MY_DB}.customer"
    else:
        yield "PRAGMA table_info(employee)"
        yield "ATTACH DATABASE '/tmp/gs.db' AS x"
        yield "SELECT sql FROM sqlite_master"
        yield "SELECT * FROM sqlite_schema"
        yield "SELECT [email] FROM customer"
        yield 'SELECT "email" FROM customer'
        yield "SELECT rowid, * FROM employee"


def types(dialect: str) -> Iterator[str]:
    """Conversions to types that read the catalog (PostgreSQL's ``reg*``: a denied table's
    oid by name, whether or not the role may read it) or that sqlglot does not know."""
    if dialect == "postgresql":
        yield "SELECT 'employee'::regclass"
        yield "SELECT regclass 'employee'"
        yield "SELECT CAST('employee' AS regclass)::oid"
        yield "SELECT name FROM customer WHERE 'public.employee'::regclass IS NOT NULL"
        yield "SELECT 'gs_bypass'::regrole, 'now'::regproc"
        yield "SELECT 'x'::pg_catalog.regnamespace"
    yield "SELECT CAST(name AS employee) FROM customer"


FAMILIES = {
    "reads": reads,
    "functions": functions,
    "rows": rows,
    "comments": comments,
    "statements": statements,
    "types": types,
}


def attempts(dialect: str) -> list[tuple[str, str]]:
    """(family, statement) for every crafted attempt of ``dialect``, without duplicates."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for family, gen in FAMILIES.items():
        for sql in gen(dialect):
            if sql not in seen:
                seen.add(sql)
                out.append((family, sql))
    return out


class Outcome:
    """What the suite saw for one dialect: how many attempts, how many passed the checker
    (``executed``: must be none), denied values in those results, and how many attempts run
    directly under the service role (no grid-sql in between) return a canary (``live``: the
    attempts are real attacks, not statements the server would refuse anyway)."""

    def __init__(self) -> None:
        self.total = 0
        self.executed: list[tuple[str, str, str]] = []
        self.leaks: list[tuple[str, list[str]]] = []
        self.live: list[tuple[str, str]] = []

    def live_in(self, family: str) -> int:
        return sum(1 for f, _ in self.live if f == family)

    def summary(self, dialect: str) -> str:
        per = ", ".join(f"{f} {self.live_in(f)}" for f in FAMILIES if self.live_in(f))
        return (
            f"{dialect}: {self.total} attempts, {len(self.executed)} executed, "
            f"{len(self.leaks)} returned a denied value; {len(self.live)} leak when run "
            f"directly under the service role ({per})"
        )


def run_suite(asker: Any, dialect: str, direct: Any = None) -> Outcome:
    """Every attempt through ``asker.run_sql`` (the checker, then execution); ``direct(sql)``
    runs it under the service role without grid-sql and returns rows ([] on error)."""
    from grid_sql.errors import PolicyViolation

    out = Outcome()
    for family, sql in attempts(dialect):
        out.total += 1
        try:
            res = asker.run_sql(sql, timeout_s=5)
        except PolicyViolation:
            pass
        except Exception as exc:  # noqa: BLE001 - passed the checker, then failed: still ran
            out.executed.append((family, sql, f"{type(exc).__name__}: {exc}"[:200]))
        else:
            out.executed.append((family, sql, f"{len(res.rows)} rows"))
            found = leaked(res.rows)
            if found:
                out.leaks.append((sql, found))
        if direct is not None and leaked(direct(sql)):
            out.live.append((family, sql))
    return out
