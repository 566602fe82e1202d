"""Deny by default at the edges of the language: functions, row values and comments.

Why a module of its own: these are the places where what the checker reads and what the
server runs can drift apart (issue 23), and each rule here is an allow-list rather than a ban:

* **Functions.** Every call site in the statement's *tokens* (a word followed by ``(``, quoted
  names included) must name a function on the policy's allow-list
  (:attr:`Policy.allowed_functions`), unless the word is provably not a call (a table, alias or
  window name the parse tree places there, a type with arguments after ``AS`` or ``::``, or a
  keyword of the SQL syntax such as ``IN (`` or ``VALUES (``). Reading call sites from the
  tokens, not only from sqlglot's function nodes, means a function sqlglot maps to another
  name, or parses as syntax, is still judged by the name the server will resolve. Qualified
  calls (``pg_catalog.f(...)``, ``db.f(...)``) are refused: the qualifier can reach a
  user-defined function that shares an allowed name.
* **Types.** Every type a value is converted to (``CAST(x AS t)``, ``x::t``, a typed literal
  ``t 'x'``) must be a plain value type (:data:`VALUE_TYPES`: numbers, text, binary, dates
  and times, booleans, JSON, UUID, arrays of those). A type outside it can read the catalog:
  PostgreSQL's ``'sales.secret'::regclass`` (or ``regclass 'sales.secret'``) looks the name
  up and answers with the table's oid whether or not the role may read it (``regrole``,
  ``regproc``, ``regnamespace`` likewise), and a type sqlglot does not know (a user-defined
  one, ``pg_catalog.x``) is not judged at all. A column a ``CREATE``/``ALTER TABLE`` declares
  converts every value stored in it, so its type must be one of those, an auto-numbered
  integer (``SERIAL``) or an enumeration (MySQL's ``ENUM``/``SET``) (:data:`COLUMN_TYPES`;
  ``CREATE TABLE t (x regclass)`` then ``INSERT ... ('sales.secret')`` would probe a denied
  table's existence). SQLite's declared types only pick an affinity and read nothing: any
  name stays there.
* **Row values.** A whole-row reference (PostgreSQL's bare table alias as a value, ``t.*``
  anywhere but directly in a select list, ``ROW(t.*)``, ``(t).col``, ``to_json(t)``,
  ``RETURNING t.*``) reads every column of the row, so every column of the table must be
  readable. ``qualify`` expands ``t.*`` only where it is a select-list item.
* **Comments.** The checker reads the statement through sqlglot's tokenizer; whatever it skips
  between tokens must be whitespace or a comment that every server treats as a comment.
  MySQL/MariaDB executable comments (``/*! ... */``, ``/*M! ... */``) are code to the server,
  optimizer hints (``/*+ ... */``) steer it, a block comment holding ``/*`` nests on
  PostgreSQL but not on MySQL, and a line comment holding a carriage return or a control
  character ends at different places on different engines: all are refused. So are non-ASCII
  or control characters the tokenizer skipped as whitespace (PostgreSQL reads U+00A0 as part
  of an identifier). Literals whose reading depends on a server setting are refused too: a
  backslash in a plain string (``standard_conforming_strings``, ``NO_BACKSLASH_ESCAPES``) and,
  on MySQL, a double-quoted string (an identifier under ``ANSI_QUOTES``: ``SELECT "email"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType

from grid_sql.dialect import Dialect

if TYPE_CHECKING:  # the checker's run state (grid_sql/policy/checker.py::_Run)
    from grid_sql.policy.violation import Violation

# Keywords that may stand before "(" without calling a function (SQL syntax, not a call).
SYNTAX_BEFORE_PAREN = frozenset(
    """
    all and any array as asc between by case cast try_cast cube desc distinct else end escape
    except exists
    filter from grouping having ilike in intersect into is join lateral like limit not offset
    on or order over partition primary recursive references regexp returning rlike rollup row
    rows select set sets similar some table then union unique using values when where window
    with within xor materialized key check foreign ordinality collate conflict do update group
    matched index use force ignore against match nulls first last stored virtual generated
    constraint default include of exclude
    """.split()
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
_TYPE_TOKENS = frozenset(Parser.TYPE_TOKENS)
_QUOTED = frozenset({TokenType.IDENTIFIER})
_STRINGS = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING})
_DOUBLE_QUOTED = re.compile(r'(?:_[A-Za-z0-9]+\s*|[Nn])?"')


def _call_name(tok: Token, dialect: str) -> str | None:
    """The function name a call site ``tok (`` names, as the server resolves it; None when
    ``tok`` cannot be a function name at all (punctuation, literals)."""
    if tok.token_type in _QUOTED:
        # PostgreSQL quoted names are exact ("COUNT" is not count); elsewhere case-insensitive
        return Dialect.get(dialect).fold(tok.text, quoted=True)
    if tok.token_type in _NAME_TOKENS or _WORD.fullmatch(tok.text):
        return tok.text.lower()
    return None


def _structural_starts(stmts: list[exp.Expr]) -> set[int]:
    """Offsets of names the parse tree places as tables, aliases, CTEs, windows or column
    lists (``INSERT INTO t (a)``, ``WITH x(a) AS``, ``WINDOW w AS (``): a ``(`` after them
    opens a list, not a call."""
    out: set[int] = set()
    for stmt in stmts:
        for ident in stmt.find_all(exp.Identifier):
            if isinstance(ident.parent, exp.Column | exp.Dot | exp.Func):
                continue  # a column, a field, or the (quoted) name of a call itself
            start = ident.meta.get("start")
            if start is not None:
                out.add(int(start))
    return out


def function_findings(
    sql: str,
    tokens: list[Token],
    stmts: list[exp.Expr],
    allowed: frozenset[str],
    dialect: str,
) -> Iterator[Violation]:
    """A finding for every call of a function outside ``allowed`` (see the module doc)."""
    from grid_sql.policy.violation import Violation

    structural = _structural_starts(stmts)
    seen: set[str] = set()
    ddl = any(isinstance(s, exp.Create | exp.Alter) for s in stmts)
    for i in range(len(tokens) - 1):
        tok, nxt = tokens[i], tokens[i + 1]
        if nxt.token_type != TokenType.L_PAREN:
            continue
        name = _call_name(tok, dialect)
        if name is None or tok.start in structural:
            continue
        prev = tokens[i - 1] if i > 0 else None
        qualified = prev is not None and prev.token_type == TokenType.DOT
        if not qualified and tok.token_type not in _QUOTED:
            if name in SYNTAX_BEFORE_PAREN:
                continue  # CAST(, IN (, VALUES (: syntax (some of these tokenize as words)
            if tok.token_type in _TYPE_TOKENS and (
                ddl or (prev is not None and prev.token_type in (TokenType.ALIAS, TokenType.DCOLON))
            ):
                continue  # CAST(x AS varchar(10)), x::numeric(8, 2), a column type in DDL
        missing = tok.token_type not in _QUOTED and _missing(name, dialect)
        if (name in allowed or missing) and not qualified:
            continue
        where = sql[tok.start : nxt.end + 1]
        seen.add(name.lower())
        if qualified:
            why = "qualified function call"
            msg = (
                f"The call {sql[tokens[i - 2].start if i > 1 else tok.start : nxt.end + 1]} names "
                "a function through a schema; call allowed functions by their plain name."
            )
        else:
            why = "function not on the allow-list"
            msg = (
                f"The function {name}() is not allowed: only ordinary scalar, aggregate and "
                "window functions on the policy's allow-list may be called."
            )
        yield Violation("banned_function", msg, position=tok.start, snippet=where, why=why)
    for stmt in stmts:  # sqlglot's own view: an unknown-to-sqlglot call keeps its name
        for node in stmt.find_all(exp.Anonymous):
            name = str(node.name)
            quoted = isinstance(node.this, exp.Identifier) and node.this.quoted
            key = Dialect.get(dialect).fold(name, quoted=quoted)
            if key in allowed or (not quoted and _missing(key, dialect)):
                continue
            if name.lower() not in seen | SYNTAX_BEFORE_PAREN:
                yield Violation(
                    "banned_function",
                    f"The function {name}() is not allowed: only ordinary scalar, aggregate "
                    "and window functions on the policy's allow-list may be called.",
                    snippet=name,
                    why="function not on the allow-list",
                )


# Session functions written as keywords, without parentheses (sqlglot node names): who is
# connected, to what, with which settings. Only the clock keywords stay.
_CLOCK = frozenset({"CurrentDate", "CurrentTime", "CurrentTimestamp", "CurrentDatetime"})


def session_findings(stmt: exp.Expr, dialect: str) -> Iterator[Violation]:
    """Session keywords (``CURRENT_USER``, ``SESSION_USER``, PostgreSQL's bare ``user``) and
    locking reads (``FOR UPDATE``, ``LOCK IN SHARE MODE``): session state and locks."""
    from grid_sql.policy.violation import Violation

    session_words = Dialect.get(dialect).session_words
    for node in stmt.walk():
        name = type(node).__name__
        if isinstance(node, exp.Func) and name.startswith(("Current", "Session")):
            if name in _CLOCK:
                continue
            word = name
        elif (
            isinstance(node, exp.Column)
            and not node.table
            and isinstance(node.this, exp.Identifier)
            and not node.this.quoted
            and node.name.lower() in session_words
        ):
            word = node.name  # reserved words in PostgreSQL: never a column reference
        elif isinstance(node, exp.Lock):
            yield Violation(
                "banned_clause",
                "Locking reads (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) are not allowed.",
                snippet="FOR UPDATE",
                why="locks",
            )
            continue
        else:
            continue
        yield Violation(
            "banned_function",
            f"{word} reads session state, which is not allowed; remove it.",
            snippet=word,
            why="function not on the allow-list",
        )


_T = exp.DataType.Type
# Value types a statement may convert to (module doc, "Types"): each reads no catalog.
VALUE_TYPES: frozenset[object] = frozenset(
    {
        _T.TINYINT, _T.SMALLINT, _T.MEDIUMINT, _T.INT, _T.BIGINT,
        _T.UTINYINT, _T.USMALLINT, _T.UMEDIUMINT, _T.UINT, _T.UBIGINT,
        _T.DECIMAL, _T.UDECIMAL, _T.FLOAT, _T.DOUBLE, _T.UDOUBLE, _T.MONEY, _T.BIT,
        _T.BOOLEAN,
        _T.CHAR, _T.NCHAR, _T.VARCHAR, _T.NVARCHAR, _T.BPCHAR,
        _T.TEXT, _T.TINYTEXT, _T.MEDIUMTEXT, _T.LONGTEXT,
        _T.BINARY, _T.VARBINARY, _T.BLOB, _T.TINYBLOB, _T.MEDIUMBLOB, _T.LONGBLOB,
        _T.DATE, _T.TIME, _T.TIMETZ, _T.TIMESTAMP, _T.TIMESTAMPTZ, _T.TIMESTAMPLTZ,
        _T.TIMESTAMPNTZ, _T.DATETIME, _T.INTERVAL, _T.YEAR,
        _T.JSON, _T.JSONB, _T.UUID, _T.ARRAY,
    }
)  # fmt: skip


# Column types a CREATE/ALTER TABLE may declare: the value types, auto-numbered integers and
# enumerations (module doc, "Types"); a value stored in a column is converted to its type
COLUMN_TYPES: frozenset[object] = VALUE_TYPES | {
    _T.SERIAL, _T.SMALLSERIAL, _T.BIGSERIAL, _T.ENUM, _T.SET,
}  # fmt: skip


def type_findings(stmt: exp.Expr, dialect: str | None = None) -> Iterator[Violation]:
    """Conversions to a type outside :data:`VALUE_TYPES`, and declared column types outside
    :data:`COLUMN_TYPES` (module doc, "Types"; SQLite's declared types are affinities only,
    so any name is kept there)."""
    from grid_sql.dialect import Dialect
    from grid_sql.policy.violation import Violation

    if dialect is None or not Dialect.get(dialect).declared_types_are_affinities:
        for col in stmt.find_all(exp.ColumnDef):
            kind = col.args.get("kind")
            if not isinstance(kind, exp.DataType):
                continue
            bad = next(
                (dt for dt in kind.find_all(exp.DataType) if dt.this not in COLUMN_TYPES), None
            )
            if bad is not None:
                name = bad.sql()
                yield Violation(
                    "banned_type",
                    f"A column of type {name} is not allowed: a declared column type must be a "
                    "plain value type (numbers, text, dates and times, booleans, JSON, UUID), "
                    "an auto-numbered integer or an enumeration.",
                    snippet=name,
                    why="type not on the allow-list",
                )

    for cast in stmt.find_all(exp.Cast):  # TryCast too; `::` and typed literals parse to it
        to = cast.args.get("to")
        if not isinstance(to, exp.DataType):
            continue
        for dt in to.find_all(exp.DataType):
            if dt.this in VALUE_TYPES:
                continue
            name = dt.sql()
            yield Violation(
                "banned_type",
                f"Converting to {name} is not allowed: only plain value types (numbers, text, "
                "dates and times, booleans, JSON, UUID) may be a conversion's target.",
                snippet=name,
                why="type not on the allow-list",
            )
            break


def edge_findings(run: Any, stmt: exp.Expr) -> Iterator[Violation]:
    """All of this module's findings for one statement of a checker run (``_Run``): calls,
    session keywords and locks as findings, whole-row references through the run's own
    column rule (``_need_column``, which reports as it goes)."""
    dialect = run.c.dialect
    allowed = run.policy.allowed_functions
    yield from function_findings(run.sql, run.tokens, [stmt], allowed, dialect)
    yield from session_findings(stmt, dialect)
    yield from type_findings(stmt, dialect)

    def columns_of(table: exp.Table) -> frozenset[str] | None:
        ref = run._lookup(table)
        return None if ref is None else frozenset(c.name.lower() for c in ref.info.columns)

    for col, table in whole_row_refs(stmt, dialect, columns_of):
        ref = run._lookup(table)
        for c in ref.info.columns if ref is not None else ():
            run._need_column(ref, c.name, "select", col)


def _missing(name: str, dialect: str) -> bool:
    """A function the dialect does not have at all: the conformance pass reports it as
    ``unknown_function`` with the dialect's replacement (a better repair hint than "not
    allowed"), and the server could not run it anyway."""
    return Dialect.get(dialect).lacks_function(name)


# ---------------------------------------------------------------------------- comments
_BLOCK = re.compile(r"/\*(.*?)\*/", re.DOTALL)
_LINE = re.compile(r"--([^\n]*)(?:\n|\Z)")
_HASH = re.compile(r"#([^\n]*)(?:\n|\Z)")
_SPACE = re.compile(r"[ \t\r\n]+")
_BAD_IN_COMMENT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _gap_problem(gap: str, dialect: str) -> tuple[int, str] | None:
    """(offset in ``gap``, reason) of the first thing in text the tokenizer skipped that is
    not whitespace or a plain comment every engine reads the same way; None if all is."""
    d = Dialect.get(dialect)
    i = 0
    while i < len(gap):
        m = _SPACE.match(gap, i)
        if m:
            i = m.end()
            continue
        m = _BLOCK.match(gap, i)
        if m:
            body = m.group(1)
            if body.startswith(("!", "M!", "m!")):
                return i, "an executable comment (/*! */, /*M! */: code to MySQL/MariaDB)"
            if body.startswith("+"):
                return i, "an optimizer-hint comment (/*+ */)"
            if "/*" in body:
                return i, "a nested comment (PostgreSQL nests /* */, MySQL does not)"
            if _BAD_IN_COMMENT.search(body):
                return i, "a control character in a comment"
            i = m.end()
            continue
        m = _LINE.match(gap, i)
        if m:
            body = m.group(1)
            if "\r" in body.rstrip("\r") or _BAD_IN_COMMENT.search(body):
                return i, "a line comment holding a carriage return or a control character"
            if d.dash_comment_needs_space and body[:1] not in ("", " ", "\t", "\n", "\r"):
                return i, "a '--' comment MySQL does not read as a comment"
            i = m.end()
            continue
        m = _HASH.match(gap, i) if d.hash_comments else None
        if m:
            if "\r" in m.group(1).rstrip("\r") or _BAD_IN_COMMENT.search(m.group(1)):
                return i, "a line comment holding a carriage return or a control character"
            i = m.end()
            continue
        return i, f"text the checker skipped that is not a comment ({gap[i : i + 12]!r})"
    return None


def comment_findings(sql: str, tokens: list[Token], dialect: str) -> Iterator[Violation]:
    """Refuse every comment form a server might read differently (see the module doc)."""
    from grid_sql.policy.violation import Violation

    d = Dialect.get(dialect)
    end = 0
    for tok in [*tokens, None]:
        start = len(sql) if tok is None else tok.start
        gap = sql[end:start]
        found = _gap_problem(gap, dialect) if gap else None
        if found is not None:
            off, why = found
            yield Violation(
                "banned_clause",
                f"The statement contains {why}; remove it: only plain comments are allowed, "
                "so that the statement checked is the statement the server runs.",
                position=end + off,
                snippet=sql[end + off : end + off + 20],
                why="comment the server may read as code",
            )
            return
        if tok is not None and tok.token_type in _STRINGS and d.backslash_escapes_vary:
            raw = sql[tok.start : tok.end + 1]
            odd: str | None = None
            if "\\" in raw and raw[:1] not in ("E", "e"):
                odd = "a backslash in a string literal (read as an escape or not depending on "
                odd += "standard_conforming_strings / NO_BACKSLASH_ESCAPES)"
            elif d.double_quoted_strings and _DOUBLE_QUOTED.match(raw):
                odd = "a double-quoted string (an identifier under sql_mode ANSI_QUOTES)"
            if odd is not None:
                yield Violation(
                    "banned_clause",
                    f"The statement contains {odd}; write strings in single quotes without "
                    "backslashes, so that every server setting reads them the same way.",
                    position=tok.start,
                    snippet=raw[:20],
                    why="literal the server may read differently",
                )
                return
        if tok is not None and tok.token_type == TokenType.HINT:
            yield Violation(
                "banned_clause",
                "The statement contains an optimizer-hint comment (/*+ */); remove it.",
                position=tok.start,
                snippet=sql[tok.start : tok.end + 1][:20],
                why="comment the server may read as code",
            )
            return
        if tok is not None:
            end = tok.end + 1


# ---------------------------------------------------------------------------- row values
def _from_items(node: exp.Expr) -> dict[str, exp.Table | None]:
    """FROM/JOIN/USING items of one query level or DML statement: alias (lower) → the real
    table, or None for a derived table (whose own reads are checked where they happen)."""
    out: dict[str, exp.Table | None] = {}
    parts: list[Any] = []
    for key in ("from", "from_", "joins", "using", "this"):
        if key == "this" and not isinstance(node, exp.Update | exp.Delete | exp.Insert):
            continue
        val = node.args.get(key)
        parts.extend(val if isinstance(val, list) else [val])
    for part in parts:
        if not isinstance(part, exp.Expr):
            continue
        for src in part.walk():
            if src is not part and isinstance(src, exp.Query):
                continue
            if isinstance(src, exp.Table) and isinstance(src.this, exp.Identifier):
                if _inside(src, part, exp.Query):
                    continue
                out[src.alias_or_name.lower()] = src
                out.setdefault(src.name.lower(), src)
            elif isinstance(src, exp.Subquery) and src.alias:
                out[src.alias.lower()] = None
    return out


def _inside(node: exp.Expr, root: exp.Expr, kind: type[exp.Expr]) -> bool:
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, kind):
            return True
        p = p.parent
    return False


def whole_row_refs(
    stmt: exp.Expr, dialect: str, columns_of: Callable[[exp.Table], frozenset[str] | None]
) -> Iterator[tuple[exp.Column, exp.Table]]:
    """(reference, real table) for every whole-row reference in ``stmt``. ``columns_of``
    gives a real table's column names (lower case), None for a name that is no real table."""
    bare_rows = Dialect.get(dialect).bare_table_row_values
    for col in stmt.find_all(exp.Column):
        star = isinstance(col.this, exp.Star)
        if star:
            if not col.table:
                continue
            if isinstance(col.parent, exp.Select) and col.arg_key == "expressions":
                continue  # a select-list `t.*`: expanded by qualify and checked per column
            alias = col.table.lower()
        elif bare_rows and not col.table:
            alias = col.name.lower()  # a bare name that is no column but a FROM item
        else:
            continue
        level: exp.Expr | None = col
        while level is not None:
            level = level.parent
            if not isinstance(level, exp.Select | exp.Update | exp.Delete | exp.Insert):
                continue
            items = _from_items(level)
            if not star and _names_a_column(alias, items, columns_of):
                break  # PostgreSQL reads a column of that name first: an ordinary column
            if alias not in items:
                continue
            table = items[alias]
            if table is not None and columns_of(table) is not None:
                yield col, table
            break


def _names_a_column(
    name: str,
    items: dict[str, exp.Table | None],
    columns_of: Callable[[exp.Table], frozenset[str] | None],
) -> bool:
    """Whether a bare ``name`` is an ordinary column at this level: some real table among the
    FROM items has a column of that name. Derived tables and CTEs do not count (their columns
    are not known here), so a name they might also hold is judged as a whole-row reference:
    refusing too much, never too little."""
    for table in items.values():
        cols = None if table is None else columns_of(table)
        if cols is not None and name in cols:
            return True
    return False
