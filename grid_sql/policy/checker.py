"""The post-parse checker: what a left-to-right grammar mask cannot enforce.

Paper Proposition 11: column-level rights cannot be judged while decoding, because the SELECT
list comes before FROM and alias binding is context-sensitive. So once a statement is complete
we parse it with sqlglot, resolve every alias, CTE and subquery scope against the schema
snapshot (a query: the one resolver of ``policy/resolve.py``, shared with schema conformance;
DML: ``optimizer.qualify``), expand ``*`` and ``t.*``, and compare each table and column
reference with the effective :class:`Policy`.

Every finding is structured data (:class:`Violation`) with a one-sentence ``message`` that a
repair prompt can quote back to the model; nothing here executes SQL.

The checker is deliberately fail-closed: a statement it cannot parse or resolve is reported
(``parse_error``), never waved through. It re-checks verb, table and function bans the grammar
already enforces, because a statement may come from somewhere other than the masked decoder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema
from sqlglot.tokenizer_core import Token, TokenType

from grid_sql.dialect import Dialect
from grid_sql.errors import PolicyViolation
from grid_sql.policy.aggregates import aggregate_misuse
from grid_sql.policy.conformance import (
    Finding,
    Resolver,
    SchemaView,
    apply_edits,
    check_query,
    dialect_functions,
    top_clause,
)
from grid_sql.policy.edges import comment_findings, edge_findings
from grid_sql.policy.model import Policy
from grid_sql.policy.sqlparse import parse as guarded_parse
from grid_sql.policy.sqlparse import too_deep
from grid_sql.schema.model import SchemaSnapshot

from .dml import DmlRules
from .refs import (
    _Ref,
    _violation,
)
from .scope_walk import ScopeRules
from .violation import Violation, ViolationKind

# Statement node → statement verb (policy.STATEMENT_VERBS), or a name that no policy allows.
_STATEMENT_KIND: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Insert, "insert"),
    (exp.Update, "update"),
    (exp.Delete, "delete"),
    (exp.Merge, "merge"),
    (exp.TruncateTable, "truncate"),
    (exp.Create, "create"),
    (exp.Drop, "drop"),
    (exp.Alter, "alter"),
    (exp.Grant, "grant"),
    (exp.Revoke, "revoke"),
    (exp.Copy, "copy"),
    (exp.Pragma, "pragma"),
    (exp.Attach, "attach"),
    (exp.Detach, "detach"),
    (exp.Query, "select"),
)


def sqlglot_read(dialect: str) -> str:
    """sqlglot's ``read=`` for one of our dialects (``Dialect.sqlglot_read``; unknown names
    passed through)."""
    found = Dialect.find(dialect)
    return dialect if found is None else found.sqlglot_read


def statement_verb(stmt: exp.Expr) -> str:
    """The verb of a parsed statement (``select``, ``insert``, ..., ``pragma``); a raw
    command is named by its first word, any other node kind after its sqlglot class — never
    ``select``, so callers that treat unknown kinds as writes (the executor) fail closed."""
    if isinstance(stmt, exp.Command):
        return str(stmt.this).split()[0].lower() if stmt.this else "command"
    for cls, name in _STATEMENT_KIND:
        if isinstance(stmt, cls):
            return name
    return type(stmt).__name__.lower()


# Token sequences (upper-cased keywords, outside strings and quoted names) that mark clauses
# sqlglot may not parse at all (MySQL's INTO OUTFILE, LOAD DATA).
_CLAUSE_TOKENS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("INTO", "OUTFILE"), "into_outfile"),
    (("INTO", "DUMPFILE"), "into_dumpfile"),
    (("LOAD", "DATA"), "load_data"),
    (("LOAD", "XML"), "load_data"),
)
_OPAQUE_TOKENS = frozenset(
    {
        TokenType.STRING,
        TokenType.IDENTIFIER,
        TokenType.NATIONAL_STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.BYTE_STRING,
    }
)
# SQLite pragmas that only read, even when given an argument (`PRAGMA table_info(t)`).
_READ_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_info",
        "index_xinfo",
        "index_list",
        "foreign_key_list",
        "foreign_key_check",
        "integrity_check",
        "quick_check",
        "database_list",
        "function_list",
        "module_list",
        "pragma_list",
        "collation_list",
        "compile_options",
    }
)


class Checker:
    """Checks finished statements against one (snapshot, policy) pair.

    Build once per session: the sqlglot schema mapping is derived from the snapshot here.
    """

    def __init__(
        self, snapshot: SchemaSnapshot, policy: Policy, dialect: str | None = None
    ) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.dialect = dialect or snapshot.dialect
        found = Dialect.find(self.dialect)
        if found is None:
            raise ValueError(f"unsupported dialect {self.dialect!r}")
        self.d = found
        self.dialect = found.name  # an alias ("postgres") means the same dialect
        self._read = found.sqlglot_read
        # PostgreSQL: keep catalog names exact and let sqlglot fold unquoted query identifiers
        # to lower case, as the server does. SQLite/MySQL: compare case-insensitively.
        exact = found.quoted_names_exact

        def key(name: str) -> str:
            return name if exact else name.lower()

        mapping: dict[str, object] = {
            key(s.name): {
                key(t.name): {key(c.name): "UNKNOWN" for c in t.columns} for t in s.tables
            }
            for s in snapshot.schemas
        }
        # Names are pre-folded above; sqlglot folds the query's identifiers the same way.
        self._schema = MappingSchema(mapping, dialect=self._read, normalize=False)
        self._all_columns = {c.name.lower() for _, t in snapshot.iter_tables() for c in t.columns}
        self._view = SchemaView(snapshot, policy, self.dialect)

    # ------------------------------------------------------------------ public API
    @property
    def schema_view(self) -> SchemaView:
        """What the role may read, as the conformance pass resolves names against it."""
        return self._view

    def parse_query(self, sql: str) -> exp.Expr | None:
        """The single query of ``sql`` as this checker reads it (its sqlglot dialect; SQLite's
        double-quoted-string fallback applied), or None when ``sql`` is not exactly one query
        that parses. For passes that must see the statement exactly as the checker did
        (grid_sql/policy/autofix.py). sqlglot errors, including RecursionError, give None."""
        try:
            stmts = [s for s in guarded_parse(sql, self._read) if s]
        except (ParseError, TokenError, RecursionError):
            return None
        if len(stmts) != 1 or not isinstance(stmts[0], exp.Query):
            return None
        if self.d.unknown_quoted_names_are_strings:
            return _Run(self, sql)._quoted_string_fallback(stmts[0])
        return stmts[0]

    def check(self, sql: str) -> list[Violation]:
        """Every violation in ``sql`` (empty list: the statement is allowed)."""
        run = _Run(self, sql)
        try:
            return run.execute()
        except RecursionError:
            # sqlglot's recursive-descent parser and tree walks give up on deeply nested
            # statements (a degenerate generation: `f(SELECT (SELECT (SELECT ...`); such a
            # statement is refused with a quotable reason, never waved through or crashed on
            return [
                Violation(
                    "parse_error",
                    "The statement is nested too deeply to be analysed (sqlglot exceeded "
                    "Python's recursion limit); write it without the deep nesting.",
                )
            ]

    def enforce(self, sql: str) -> None:
        """Raise :class:`PolicyViolation` listing every violation, if there is any."""
        found = self.check(sql)
        if found:
            raise PolicyViolation(format_violations(found), list(found))


def check(
    sql: str, snapshot: SchemaSnapshot, policy: Policy, dialect: str | None = None
) -> list[Violation]:
    """One-shot form of :meth:`Checker.check`."""
    return Checker(snapshot, policy, dialect).check(sql)


def proposed_fix(sql: str, violations: Iterable[Violation]) -> str | None:
    """``sql`` with the mechanical fix of every violation applied, or None when some
    violation has none (the statement would still be wrong) or the edits collide.

    The result is only a proposal for the repair prompt: it is checked again by the caller
    and, if used, generated again under the guide like any other statement.
    """
    found = list(violations)
    if not found or any(not v.edits for v in found):
        return None
    return apply_edits(sql, (e for v in found for e in v.edits))


def format_violations(violations: Iterable[Violation]) -> str:
    """The messages as a numbered list, ready to quote in a repair prompt."""
    return "\n".join(f"{i}. {v.message}" for i, v in enumerate(violations, 1))


class _Run(ScopeRules, DmlRules):
    """State of one check: the SQL text, the findings, de-duplication."""

    def __init__(self, checker: Checker, sql: str) -> None:
        self.c = checker
        self.policy = checker.policy
        self.sql = sql
        self.out: list[Violation] = []
        self._seen: set[tuple[Any, ...]] = set()
        self._ctes: set[str] = set()  # CTE names bound at the level of a DML statement
        self.tokens: list[Token] = []

    # -------------------------------------------------------------- reporting
    def add(self, v: Violation) -> None:
        key: tuple[Any, ...] = (v.kind, v.table, v.column, v.verb, v.position, v.snippet)
        if v.kind == "table_not_allowed":
            key = (v.kind, v.table, v.verb)  # one finding per table and verb is enough
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(v)

    def where(self, node: exp.Expr | None) -> tuple[int | None, str | None]:
        """Character offset and source text of ``node`` when sqlglot kept its position."""
        if node is None:
            return None, None
        for cand in (node, node.args.get("this")):
            meta = getattr(cand, "meta", None) if isinstance(cand, exp.Expr) else None
            if meta and "start" in meta and "end" in meta:
                start, end = int(meta["start"]), int(meta["end"])
                if isinstance(node, exp.Column) and node.args.get("table") is not None:
                    tmeta = node.args["table"].meta
                    if "start" in tmeta:
                        start = int(tmeta["start"])
                return start, self.sql[start : end + 1]
        return None, None

    # -------------------------------------------------------------- driver
    def execute(self) -> list[Violation]:
        logger = logging.getLogger("sqlglot")
        level = logger.level
        logger.setLevel(logging.ERROR)  # "falling back to Command" warnings are our business
        try:
            tokens = self._scan_tokens()
            why = too_deep(self.sql, self.c._read, tokens)
            if why is not None:
                self.add(
                    Violation(
                        "parse_error",
                        f"The statement could not be analysed: {why}. Write it without the "
                        "deep nesting.",
                        why="the checker cannot verify what it cannot parse (fail closed)",
                    )
                )
                return self.out
            try:
                # (guarded just above, on the tokens already scanned)
                statements = [s for s in sqlglot.parse(self.sql, read=self.c._read) if s]
            except (ParseError, TokenError) as exc:
                msg = str(exc).splitlines()[0]
                top = top_clause(self.sql, self.c.dialect)
                if top is not None:
                    self.add(_violation(top))
                self.add(
                    Violation(
                        "parse_error",
                        f"The statement could not be parsed as {self.c.dialect} SQL: {msg}",
                        why="the checker cannot verify what it cannot parse (fail closed)",
                    )
                )
                return self.out
            if not statements:
                self.add(Violation("parse_error", "The input contains no SQL statement."))
                return self.out
            if len(statements) > 1:
                self.add(
                    Violation(
                        "multiple_statements",
                        f"Exactly one SQL statement is allowed, got {len(statements)}; "
                        "remove everything after the first statement.",
                        snippet=statements[1].sql(dialect=self.c._read)[:80],
                        why="one statement per request",
                    )
                )
            for stmt in statements:
                if self.c.snapshot.exact_names:
                    self._exact_table_names(stmt)
                self._statement(stmt)
        finally:
            logger.setLevel(level)
        return self.out

    def _scan_tokens(self) -> list[Token] | None:
        """Banned clauses by token sequence; the tokens (None if ``sql`` does not tokenize)."""
        try:
            tokens = self.tokens = sqlglot.Dialect.get_or_raise(self.c._read).tokenize(self.sql)
        except TokenError:
            return None  # reported by the parse step
        for v in comment_findings(self.sql, tokens, self.c.dialect):
            self.add(v)
        words = [(t.text.upper(), t.start) for t in tokens if t.token_type not in _OPAQUE_TOKENS]
        for i in range(len(words)):
            for seq, clause in _CLAUSE_TOKENS:
                if tuple(w for w, _ in words[i : i + len(seq)]) == seq:
                    self._banned_clause(clause, words[i][1], " ".join(seq))
        return tokens

    def _banned_clause(self, clause: str, position: int | None, snippet: str | None) -> None:
        if clause in self.policy.banned_clauses:
            self.add(
                Violation(
                    "banned_clause",
                    f"The clause {snippet or clause} is not allowed by policy ({clause}).",
                    position=position,
                    snippet=snippet,
                    why=f"banned clause {clause}",
                )
            )

    # -------------------------------------------------------------- one statement
    def _statement(self, stmt: exp.Expr) -> None:
        if not isinstance(stmt, exp.Command) and not any(
            isinstance(stmt, cls) for cls, _ in _STATEMENT_KIND
        ):
            # e.g. "SELEC x" parses as the expression `SELEC AS x`: not a statement at all.
            self.add(
                Violation(
                    "parse_error",
                    f"The input is not a SQL statement: {stmt.sql(dialect=self.c._read)[:80]}",
                    snippet=self.sql[:80],
                    why="the checker cannot verify what it cannot parse (fail closed)",
                )
            )
            return
        verb = self._verb(stmt)
        self._clauses(stmt)
        self._functions(stmt)
        if verb not in self.policy.statement_verbs:
            pos, snip = self._locate(verb)
            self.add(
                Violation(
                    "statement_not_allowed",
                    f"{verb.upper()} statements are not allowed for role {self.policy.role!r}; "
                    f"allowed: {', '.join(sorted(self.policy.statement_verbs)) or 'none'}.",
                    verb=verb,
                    position=pos,
                    snippet=snip,
                    why="statement verb not in the policy",
                )
            )
        # Data-modifying statements nested in CTEs (PostgreSQL) need their own verbs.
        for node in stmt.find_all(exp.Insert, exp.Update, exp.Delete, exp.Merge):
            if node is stmt:
                continue
            nverb = self._verb(node)
            if nverb not in self.policy.statement_verbs:
                self.add(
                    Violation(
                        "statement_not_allowed",
                        f"A nested {nverb.upper()} is not allowed for role {self.policy.role!r}.",
                        verb=nverb,
                        snippet=node.sql(dialect=self.c._read)[:80],
                        why="statement verb not in the policy",
                    )
                )
        if isinstance(stmt, exp.Command | exp.Pragma | exp.Attach | exp.Detach | exp.Copy):
            return  # nothing resolvable inside; the verb check above already failed it
        if isinstance(stmt, exp.Drop | exp.Alter | exp.Grant | exp.Revoke):
            return  # DDL: verb-level only (the grants of the server decide object ownership)
        resolver = self._conformance(stmt)
        self._resolve(stmt, resolver)

    def _conformance(self, stmt: exp.Expr) -> Resolver | None:
        """Schema conformance of a query and the dialect's functions. For a query, the
        resolver whose bindings conformance judged names by: the rights walk reads the same
        ones (None when the query's scopes could not be built: reported, fail closed)."""
        found: list[Finding] = dialect_functions(stmt, self.sql, self.c.dialect)
        resolver: Resolver | None = None
        if isinstance(stmt, exp.Query):
            if self.c.d.unknown_quoted_names_are_strings:
                stmt = self._quoted_string_fallback(stmt)
            try:
                resolver = Resolver(stmt, self.sql, self.c._view)
                found += check_query(stmt, self.sql, self.c._view, resolver)
                found += aggregate_misuse(stmt, self.sql, self.c.dialect)
            except OptimizeError as exc:  # e.g. a set operation over a bare literal
                self.add(
                    Violation(
                        "parse_error",
                        f"The statement's query scopes could not be built: {exc}",
                        why="the checker cannot verify what it cannot resolve (fail closed)",
                    )
                )
                resolver = None
        for f in found:
            self.add(_violation(f))
        return resolver

    def _verb(self, stmt: exp.Expr) -> str:
        return statement_verb(stmt)

    def _clauses(self, stmt: exp.Expr) -> None:
        for node in stmt.walk():
            if isinstance(node, exp.Into):
                self._banned_clause("select_into", *self._locate("into"))
            elif isinstance(node, exp.Copy):
                self._banned_clause("copy", *self._locate("copy"))
            elif isinstance(node, exp.Attach):
                self._banned_clause("attach", *self._locate("attach"))
            elif isinstance(node, exp.Detach):
                self._banned_clause("detach", *self._locate("detach"))
            elif isinstance(node, exp.Pragma) and self._pragma_writes(node):
                self._banned_clause("pragma_write", *self._locate("pragma"))

    def _pragma_writes(self, node: exp.Pragma) -> bool:
        """``PRAGMA x = v`` and ``PRAGMA x(v)`` (sqlglot parses both as EQ) set a value,
        except for the introspection pragmas that take an argument and only read."""
        body = node.this
        if not isinstance(body, exp.EQ):
            return False
        target = body.this
        name = target.expression.name if isinstance(target, exp.Dot) else target.name
        return name.lower() not in _READ_PRAGMAS

    def _functions(self, stmt: exp.Expr) -> None:
        """Function allow-list, session keywords, locks, whole-row reads (policy/edges.py)."""
        for v in edge_findings(self, stmt):
            self.add(v)

    def _locate(self, word: str) -> tuple[int | None, str | None]:
        """First occurrence of keyword ``word`` in the source as (offset, source text)."""
        m = re.search(rf"(?<![\w$]){re.escape(word)}(?![\w$])", self.sql, re.IGNORECASE)
        if m is None:
            return None, None
        return m.start(), m.group(0)

    # -------------------------------------------------------------- resolution
    def _qualified(self, stmt: exp.Expr) -> exp.Expr | None:
        if self.c.d.unknown_quoted_names_are_strings:
            stmt = self._quoted_string_fallback(stmt)
        try:
            return qualify(
                stmt,
                dialect=self.c._read,
                schema=self.c._schema,
                db=self.policy.default_schema or self.c.snapshot.default_schema,
                validate_qualify_columns=False,
                quote_identifiers=False,
                identify=False,
            )
        except (OptimizeError, ValueError, KeyError, AssertionError) as exc:
            m = re.match(r"Unknown column: (.+)", str(exc))
            if isinstance(exc, OptimizeError) and m is not None:
                pos, snip = self._locate(m.group(1))
                self.add(
                    Violation(
                        "unknown_column",
                        f"Column {m.group(1)} does not exist in the table it is qualified with.",
                        column=m.group(1),
                        position=pos,
                        snippet=snip,
                        why="schema conformance",
                    )
                )
                return None
            self.add(
                Violation(
                    "parse_error",
                    f"The statement's names could not be resolved: {exc}",
                    why="the checker cannot verify what it cannot resolve (fail closed)",
                )
            )
            return None

    def _quoted_string_fallback(self, stmt: exp.Expr) -> exp.Expr:
        """SQLite reads a double-quoted word that names no column as a string literal
        (``Dialect.unknown_quoted_names_are_strings``).

        Spider's gold SQL relies on it (``WHERE name = "Aruba"``). Mirror the rule: a bare,
        double-quoted, unqualified column name matching no column of any table becomes a
        string, so it is neither an unknown column nor a policy question.
        """
        stmt = stmt.copy()
        aliases = {a.alias.lower() for a in stmt.find_all(exp.Alias)}
        for col in list(stmt.find_all(exp.Column)):
            ident = col.this
            if (
                not col.table
                and isinstance(ident, exp.Identifier)
                and ident.quoted
                and ident.name.lower() not in self.c._all_columns
                and ident.name.lower() not in aliases
            ):
                col.replace(exp.Literal.string(ident.name))
        return stmt

    def _lookup(self, table: exp.Table) -> _Ref | None:
        schema = table.db or self.policy.default_schema or self.c.snapshot.default_schema
        # a qualified name in its schema only: ``sales.t`` is no name of ``public.t``
        info = self.c.snapshot.table(table.name, schema)
        if info is None and not table.db and self.c.d.bare_names_search_every_schema:
            # SQLite: a bare name reaches attached databases too (one match, else refused)
            hits = [
                (sc.name, t)
                for sc in self.c.snapshot.schemas
                for t in sc.tables
                if t.name.lower() == table.name.lower()
            ]
            if len(hits) == 1:
                schema, info = hits[0]
        if info is None:
            return None
        sinfo = self.c.snapshot.schema(schema)
        sname = sinfo.name if sinfo is not None else (schema or "")
        return _Ref(sname, info, self.policy.table(info.name, sname))

    def _is_dual(self, source: object) -> bool:
        """MySQL's ``FROM DUAL`` names no table (qualify may have prefixed the schema)."""
        return (
            isinstance(source, exp.Table)
            and source.name.lower() == "dual"
            and self._lookup(source) is None
        )

    def _unknown_table(self, table: exp.Table) -> None:
        pos, snip = self.where(table)
        name = table.sql(dialect=self.c._read).split(" AS ")[0]
        self.add(
            Violation(
                "unknown_table",
                f"Table {name} does not exist (or is not visible to role "
                f"{self.policy.role!r}); use one of: {self._table_names()}.",
                table=name,
                position=pos,
                snippet=snip,
                why="schema conformance",
            )
        )

    def _exact_table_names(self, stmt: exp.Expr) -> None:
        """On a server that compares table and schema names byte for byte (MySQL/MariaDB with
        ``lower_case_table_names = 0``) a name written in another case names no table, yet
        the resolution below folds names as sqlglot does. Checked here on the names as
        written; the mechanical fix (the catalog's spelling) lets autofix repair it."""
        ctes = {c.alias_or_name for c in stmt.find_all(exp.CTE)}
        snap = self.c.snapshot
        for t in stmt.find_all(exp.Table):
            if not isinstance(t.this, exp.Identifier) or (not t.db and t.name in ctes):
                continue
            db = t.db or None
            if snap.table(t.name, db, exact=True) is not None:
                continue
            info = snap.table(t.name, db)
            sinfo = snap.schema(db)
            if info is None or sinfo is None:
                continue  # no table in any case: the resolution below reports it
            pos, snip = self.where(t)
            right = f"{sinfo.name}.{info.name}" if db else info.name
            written = f"{t.db}.{t.name}" if db else t.name
            edits: tuple[tuple[int, int, str], ...] = ()
            if pos is not None:  # `where` points at the table's own name
                start = pos - (len(written) - len(t.name))
                if start >= 0 and self.sql[start : pos + len(t.name)] == written:
                    edits = ((start, pos + len(t.name), right),)
            self.add(
                Violation(
                    "unknown_table",
                    f"Table {t.sql(dialect=self.c._read).split(' AS ')[0]} does not exist: "
                    f"this server compares table names case-sensitively; write {right}.",
                    table=right,
                    position=pos,
                    snippet=snip,
                    why="schema conformance (lower_case_table_names = 0)",
                    fix=f"replace `{written}` with `{right}`",
                    edits=edits,
                )
            )

    def _shown(self, schema: str, name: str) -> str:
        """A table as a statement names it: bare in the default schema, else qualified."""
        default = self.policy.default_schema or self.c.snapshot.default_schema
        return name if schema == default else f"{schema}.{name}"

    def _table_names(self) -> str:
        """The tables the role has some right on (never one the policy hides), as named."""
        names = [
            self._shown(s, t.name)
            for s, t in self.c.snapshot.iter_tables()
            if (tp := self.policy.table(t.name, s)) is not None and tp.any_right
        ]
        return ", ".join(names[:40]) + (" ..." if len(names) > 40 else "")

    def _need_table(self, ref: _Ref, verb: str, node: exp.Expr | None) -> bool:
        if ref.rights is not None and ref.rights.allows(verb):
            return True
        pos, snip = self.where(node)
        allowed = sorted(self._shown(t.schema, t.name) for t in self.policy.tables_for(verb))
        self.add(
            Violation(
                "table_not_allowed",
                f"Role {self.policy.role!r} may not {verb.upper()} table {ref.info.name}; "
                f"tables allowed for {verb.upper()}: {', '.join(allowed) or 'none'}.",
                table=ref.qualified,
                verb=verb,
                position=pos,
                snippet=snip or ref.info.name,
                why=f"no {verb.upper()} privilege on the table",
            )
        )
        return False

    def _need_column(self, ref: _Ref, column: str, verb: str, node: exp.Expr | None) -> None:
        col = ref.info.column(column)
        pos, snip = self.where(node)
        if col is None:
            self.add(
                Violation(
                    "unknown_column",
                    f"Column {column} does not exist in table {ref.info.name}; its columns "
                    f"are: {', '.join(ref.info.column_names)}.",
                    table=ref.qualified,
                    column=column,
                    position=pos,
                    snippet=snip,
                    why="schema conformance",
                )
            )
            return
        if ref.rights is not None and ref.rights.column_allows(col.name, verb):
            return
        if not (ref.rights is not None and ref.rights.allows(verb)):
            # The whole table is off limits for this verb: one table-level finding is enough.
            self._need_table(ref, verb, None)
            return
        ok = [c for c, v in ref.rights.columns if verb in v]
        kind: ViolationKind = "column_not_readable" if verb == "select" else "column_not_writable"
        what = {"select": "readable", "insert": "insertable", "update": "updatable"}.get(
            verb, f"usable for {verb.upper()}"
        )
        via = "" if pos is not None else " (reached through *)"
        self.add(
            Violation(
                kind,
                f"Column {ref.info.name}.{col.name}{via} is not {what} by role "
                f"{self.policy.role!r}; {what} columns of {ref.info.name}: {', '.join(ok)}.",
                table=ref.qualified,
                column=col.name,
                verb=verb,
                position=pos,
                snippet=snip or f"{ref.info.name}.{col.name}",
                why=f"no {verb.upper()} privilege on the column",
            )
        )
