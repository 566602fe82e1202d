"""The :class:`Dialect` base class and the registry of dialects.

Why objects instead of ``if dialect == "postgresql"`` branches: a dialect's differences
(how it folds names, which schemas are the engine's, how a read is made read-only and bounded
in time, how the audit store locks and guards its tables, ...) were spread over a dozen
modules, so a new dialect had no home and a reader could not see one dialect whole. Here each
dialect is one small class declaring those differences as settings and methods, in sqlglot's
habit (``sqlglot/dialects/*.py``); callers look a dialect up once (:meth:`Dialect.get`) and ask
it. The defaults below are the SQL standard's answer (or "the feature is absent"), so a
subclass states only where it departs.

Layering: this package sits with ``grammar`` and ``schema`` (``docs/dialects.md``). It imports
``sqlalchemy``, ``sqlglot`` and :mod:`grid_sql.errors` only; the grant readers that need policy
types stay in :mod:`grid_sql.policy.grants`, keyed by :attr:`Dialect.grant_source`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy.engine import URL, Connection, Engine, Inspector

from ..errors import GrammarError


class UnknownDialectError(GrammarError, ValueError):
    """A dialect name (or alias) no registered :class:`Dialect` answers to.

    A :class:`GrammarError` because that is what the grammar registry raised for an unknown
    dialect before dialects were objects (callers catching it keep working)."""


class Dialect:
    """One SQL dialect's differences, declared as settings (class attributes) and methods.

    Subclasses register themselves under :attr:`name` and :attr:`aliases`; one instance per
    dialect is shared (:meth:`get`). Every method that takes a connection runs statements of
    this dialect only; none opens or closes connections (the caller owns their lifetime)."""

    # ------------------------------------------------------------------ naming
    name: ClassVar[str] = ""
    """Our key for the dialect: the grammar file is ``grid_sql/dialects/<name>.lark``."""
    aliases: ClassVar[tuple[str, ...]] = ()
    """Other names the dialect answers to (SQLAlchemy backend names included)."""
    label: ClassVar[str] = ""
    """How messages and prompts name the dialect."""
    sqlglot: ClassVar[str] = ""
    """sqlglot's name for the dialect (``read=`` / ``Dialect.get_or_raise``)."""
    sqlglot_settings: ClassVar[str] = ""
    """Settings appended to :attr:`sqlglot` when statements are read for checking
    (:attr:`sqlglot_read`), where sqlglot's default for the dialect differs from the
    server's (MySQL compares column names case-insensitively)."""

    # ------------------------------------------------------------------ identifiers
    identifier_quotes: ClassVar[tuple[str, ...]] = ('"',)
    """Opening quote characters of a quoted identifier (``[`` closes with ``]``)."""
    bare_names_fold_lower: ClassVar[bool] = False
    """The server folds an unquoted name to lower case before comparing it exactly, so a
    bare spelling can only name a lower-case catalog name (PostgreSQL)."""
    quoted_names_exact: ClassVar[bool] = False
    """A quoted name is compared byte for byte (PostgreSQL ``"COUNT"`` is not ``count``);
    elsewhere names compare case-insensitively, quoted or not."""
    session_words: ClassVar[frozenset[str]] = frozenset()
    """Bare words the dialect reads as session functions, never as a column
    (PostgreSQL ``user``, ``current_role``, ...), lower case."""
    bare_table_row_values: ClassVar[bool] = False
    """A bare FROM-item name used as a value means the whole row (PostgreSQL ``SELECT t
    FROM t``)."""
    unquoted_names_case_insensitive: ClassVar[bool] = False
    """Every unquoted name (tables included) compares case-insensitively, so two statements
    differing only in that case are the same statement (SQLite; PostgreSQL folds them). Not
    MySQL/MariaDB, whose table names may compare exactly (``lower_case_table_names``)."""
    unknown_quoted_names_are_strings: ClassVar[bool] = False
    """A double-quoted word that names no column is read as a string literal (SQLite; Spider's
    gold SQL relies on it: ``WHERE name = "Aruba"``)."""
    dual_table: ClassVar[bool] = False
    """``FROM DUAL`` names no table, it is the one-row dummy (MySQL/MariaDB)."""

    # ------------------------------------------------------------------ catalog
    system_schemas: ClassVar[frozenset[str]] = frozenset()
    """Namespaces that belong to the engine, not to the application."""
    hidden_schema_prefixes: ClassVar[tuple[str, ...]] = ()
    """Prefixes of per-session or internal namespaces, never listed even when system
    schemas are asked for (PostgreSQL ``pg_temp_3``, ``pg_toast_temp_3``)."""
    partial_catalog_reads: ClassVar[bool] = False
    """A catalog read may fail for one table or database the role reaches only partly, and
    ``information_schema`` still lists what it may use (MySQL/MariaDB); elsewhere a failed
    catalog read means the role may not read the catalog at all."""
    failed_read_aborts_transaction: ClassVar[bool] = False
    """A failed statement aborts the whole transaction (PostgreSQL): an error may not be
    swallowed and the next read attempted on the same transaction."""
    table_comments: ClassVar[bool] = True
    """The catalog keeps table comments (SQLite has none)."""
    implicit_schemas: ClassVar[frozenset[str]] = frozenset()
    """Schema names every database answers to though a snapshot need not list them (SQLite
    ``main`` and ``temp``), lower case."""
    catalog_hides_unreadable_columns: ClassVar[bool] = False
    """The catalog lists only the columns the role has a privilege on (MySQL/MariaDB), so a
    snapshot of a column-restricted table is incomplete and ``*`` means more on the server."""

    # ------------------------------------------------------------------ scopes
    output_alias_clauses: ClassVar[tuple[str, ...]] = ()
    """Clauses in which a bare name may resolve to an output alias of the select list
    (``where``, ``group``, ``having``, ``order``)."""
    fresh_aliases: ClassVar[bool] = False
    """Default of ``role_scopes(fresh_aliases=)``: names compare case-insensitively quoted
    or not, so a table alias repeating a name of its FROM is a trap (SQLite)."""
    bare_names_search_every_schema: ClassVar[bool] = False
    """A bare table name is looked up in every schema, not only the default one (SQLite:
    ``temp``, ``main``, then each attached database), so the scope rule's table names by
    schema (``docs/scope.md``) keeps every table for a bare name and restricts ``s.``
    only."""
    group_order_see_own_select_only: ClassVar[bool] = False
    """A name in GROUP BY or ORDER BY resolves against that SELECT alone, never an outer
    query, which also hides the outer levels from subqueries nested there (SQLite
    resolve.c: "The ORDER BY and GROUP BY clauses may not refer to terms in outer
    queries")."""

    # ------------------------------------------------------------------ lexical hazards
    hash_comments: ClassVar[bool] = False
    """``#`` starts a line comment (MySQL/MariaDB)."""
    dash_comment_needs_space: ClassVar[bool] = False
    """``--`` starts a comment only when followed by whitespace (MySQL/MariaDB)."""
    backslash_escapes_vary: ClassVar[bool] = False
    """Whether a backslash in a string literal is an escape depends on a server setting
    (``standard_conforming_strings``, ``NO_BACKSLASH_ESCAPES``)."""
    double_quoted_strings: ClassVar[bool] = False
    """``"x"`` is a string, or an identifier under a server setting (MySQL ``ANSI_QUOTES``)."""
    user_variables: ClassVar[bool] = False
    """``@x`` is a user variable, not a bind parameter (MySQL/MariaDB)."""

    # ------------------------------------------------------------------ types
    cast_types: ClassVar[frozenset[str]] = frozenset()
    """The type words a conversion may name (lower case; ``TYPE_NAME`` in the role grammar's
    lexicon): the dialect's plain value types, each one sqlglot reads as a type of
    ``policy/edges.py``'s ``VALUE_TYPES`` (tests/policy/test_types.py binds the two and runs
    every word on the servers). Never a type that reads the catalog (``regclass``)."""

    # ------------------------------------------------------------------ functions
    functions: ClassVar[frozenset[str]] = frozenset()
    """The curated allow-list of function names (lower case); see policy/functions.py for
    what may be on it and why."""

    niladic_functions: ClassVar[frozenset[str]] = frozenset()
    """Functions of the allow-list that take no arguments in every form the server has
    (``now()``, ``pi()``, ``row_number()``): the role grammar calls them through
    ``NILADIC_NAME`` (``niladic_call: NILADIC_NAME LPAR RPAR``), so
    ``statement_timestamp('2021-01-01')``, a call no server resolves, has no token path.
    Checked on the servers (``tests/policy/test_niladic.py``: PostgreSQL's ``pg_proc``,
    MariaDB's parameter-count errors, SQLite's ``function_list``). Never an aggregate."""

    keyword_arguments: ClassVar[frozenset[str]] = frozenset()
    """Bare words the server reads as keywords in some functions' arguments that the grammar
    scans as a column reference (MySQL's ``TIMESTAMPDIFF(MONTH, a, b)``): a role's column
    lexicon gets each one that names no column of the catalog (so the word can never read
    a column, a denied one included), bare only."""

    table_functions: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Functions a FROM item may call (``FROM generate_series(1, 12) AS m``), lower case,
    with the columns each returns; ``()``: one column, named by the item's alias, else by
    the function (PostgreSQL's rule for a function returning a scalar). Only functions that
    read no relation by name: their arguments are ordinary expressions under the role's
    column policy, so such an item reads nothing a select list could not. The role grammar
    admits them through ``TABLE_FUNCTION_NAME`` (:meth:`table_function_names`); never a
    catalog reader (``pg_ls_dir``, ``pg_stat_*``, SQLite's ``pragma_*`` and ``dbstat``) or
    a remote one (``dblink``)."""

    function_replacements: ClassVar[dict[str, str]] = {}
    """Functions models borrow from other dialects that this one lacks, with what to write
    instead, keyed by lower-case name. Where :meth:`linked_functions` can answer it decides
    what is missing and this only supplies the replacement; elsewhere (extensible server
    catalogs) it is a deny-list of certain absences, never an allow-list."""

    foreign_function_hints: ClassVar[dict[str, str]] = {}
    """Prompt rules: what to write in this dialect instead of another dialect's function
    (T-SQL ``dateadd``, ``isnull``, Oracle ``sysdate``, ...), keyed by its lower-case name;
    the repair round's hint when the mask blocked the model's favourite."""

    date_idioms: ClassVar[tuple[tuple[frozenset[str], str], ...]] = ()
    """Prompt help for questions about dates (issue #25 §4): (the function names an idiom
    calls, how this dialect spells it). A small model writes another dialect's date
    functions, or compares a date with text, unless it is shown this one's; an idiom is shown
    only when the role may call every function it names (:meth:`date_prompt_line`)."""

    # ------------------------------------------------------------------ aggregates
    distinct_takes_one_expression: ClassVar[bool] = True
    """``count(DISTINCT a, b)`` is an error (MySQL/MariaDB accept it)."""
    aggregate_needs_grouping: ClassVar[bool] = False
    """An aggregate in ORDER BY or HAVING needs a GROUP BY or an aggregate in the select list
    (SQLite)."""
    declared_types_are_affinities: ClassVar[bool] = False
    """A declared column type only picks a storage affinity and reads nothing (SQLite): the
    checker does not judge DDL column types there (``policy/edges.py``)."""
    mask_aggregates: ClassVar[frozenset[str]] = frozenset({"avg", "count", "max", "min", "sum"})
    """Function names that call an aggregate whatever their arguments: the role grammars
    hold them out of the clauses where no aggregate runs (``docs/scope.md``, "Aggregates
    where they run"). Only names with no scalar form (SQLite's two-argument ``min``/``max``
    are scalar: not listed there); each is checked against the server
    (``tests/db/test_db_aggregates.py``)."""

    # ------------------------------------------------------------------ errors
    strict_comparison_types: ClassVar[bool] = False
    """Comparing text with a number, or LIKE on a non-text column, is an error rather than an
    implicit conversion (PostgreSQL): such type errors get the deterministic fixes of
    ``grid_sql/ask/typefix.py`` before the repair round."""
    type_error_hint: ClassVar[str | None] = None
    """One line for the repair round after a type error (:meth:`is_type_error`): how this
    dialect spells casts, date parts and date arithmetic; None where there are no type
    errors to react to (SQLite's dynamic typing). Names only allowed functions."""

    # ------------------------------------------------------------------ execution
    grant_source: ClassVar[str] = "none"
    """Which reader in :mod:`grid_sql.policy.grants` asks the server for the role's rights:
    ``privilege_functions`` (``has_*_privilege``), ``show_grants`` or ``none`` (no privilege
    system: everything, narrowed by configuration)."""
    explicit_begin: ClassVar[bool] = False
    """The guard emits the transaction's BEGIN itself (``START TRANSACTION READ ONLY``), so a
    caller's open transaction would be committed implicitly: refuse to run inside one."""
    ddl_commits_implicitly: ClassVar[bool] = False
    """DDL commits the transaction (MySQL/MariaDB): a dry run of it cannot be rolled back."""
    kill_capped_reads: ClassVar[bool] = False
    """Closing an unbuffered result drains it, so a capped read kills its query first
    (``KILL QUERY``, MySQL/MariaDB)."""
    sync_drivers: ClassVar[dict[str, str]] = {}
    """SQLAlchemy async driver name -> the synchronous driver an async bind of this dialect
    is reopened with (``grid_sql.ask.aio``: the Asker needs the DB-API connection itself)."""
    embedded: ClassVar[bool] = False
    """The engine is a library opening a database file, not a server (SQLite): no pool
    pre-ping or network timeouts, and the file is what the caller names."""
    audit_store: ClassVar[bool] = False
    """The audit store can enforce append-only on this dialect (the ``audit_*`` methods)."""
    audit_long_types: ClassVar[tuple[type[Any], type[Any]] | None] = None
    """SQLAlchemy (text, binary) column types for the audit store's payloads where the
    engine's ``Text``/``LargeBinary`` are too small for an archived grammar or vocabulary
    (MySQL's hold 64 KB: LONGTEXT/LONGBLOB); None: the defaults."""

    _registry: ClassVar[dict[str, Dialect]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if not cls.name:
            return
        keys = [k.lower() for k in (cls.name, *cls.aliases)]
        for key in keys:  # all checked first: a refused class registers nothing
            prev = Dialect._registry.get(key)
            if prev is not None and type(prev).__qualname__ != cls.__qualname__:
                raise TypeError(f"dialect name {key!r} already names {type(prev).__name__}")
        inst = cls()
        for key in keys:
            Dialect._registry[key] = inst

    # ------------------------------------------------------------------ registry
    @classmethod
    def get(cls, name: str | Dialect) -> Dialect:
        """The dialect called ``name`` or one of its aliases (any case); a
        :class:`Dialect` is returned as is. Raises :class:`UnknownDialectError`."""
        if isinstance(name, Dialect):
            return name
        _load_builtins()
        found = Dialect._registry.get(str(name).lower())
        if found is None:
            raise UnknownDialectError(
                f"unknown SQL dialect {name!r}; known: {', '.join(cls.names())}"
            )
        return found

    @classmethod
    def find(cls, name: str) -> Dialect | None:
        """Like :meth:`get`, None for an unknown name."""
        try:
            return cls.get(name)
        except UnknownDialectError:
            return None

    @classmethod
    def lookup(cls, name: str | Dialect) -> Dialect:
        """Like :meth:`get`, but an unknown name gets the SQL standard's defaults (this base
        class's settings), for the callers that take a dialect name they do not validate."""
        if isinstance(name, Dialect):
            return name
        found = cls.find(name)
        return STANDARD if found is None else found

    @classmethod
    def of(cls, bind: Engine | Connection | Inspector) -> Dialect:
        """The dialect of a SQLAlchemy engine, connection or inspector (MariaDB is
        ``mysql``)."""
        return cls.get(bind.dialect.name)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every registered dialect's :attr:`name`: the shipped ones first, then the others
        in registration order."""
        _load_builtins()
        return tuple(dict.fromkeys((*_BUILTINS, *(d.name for d in Dialect._registry.values()))))

    @classmethod
    def registered(cls) -> tuple[Dialect, ...]:
        """Every registered dialect once (aliases folded), in :meth:`names` order."""
        return tuple(cls.get(n) for n in cls.names())

    def __repr__(self) -> str:
        return f"<Dialect {self.name}>"

    @property
    def sqlglot_read(self) -> str:
        """sqlglot's ``read=`` for checking statements: :attr:`sqlglot` with
        :attr:`sqlglot_settings`."""
        if not self.sqlglot_settings:
            return self.sqlglot
        return f"{self.sqlglot}, {self.sqlglot_settings}"

    # ------------------------------------------------------------------ identifiers
    def fold(self, name: str, *, quoted: bool = False) -> str:
        """The key under which the server compares the name ``name`` (written quoted or
        not): exact where :attr:`quoted_names_exact` and quoted, else lower case."""
        return name if quoted and self.quoted_names_exact else name.lower()

    def bare_spelling_names(self, name: str) -> bool:
        """Whether the catalog name ``name`` can be written without quotes and still mean
        itself (a folding server reads a bare ``Album`` as ``album``)."""
        return not self.bare_names_fold_lower or name == name.lower()

    def quote(self, name: str) -> str:
        """``name`` as it must be written to mean itself: bare where
        :meth:`bare_spelling_names` holds and it is a plain word, else in this dialect's
        first identifier quote (the quote character doubled inside)."""
        plain = r"[A-Za-z_][A-Za-z0-9_$]*"
        if re.fullmatch(plain, name) and self.bare_spelling_names(name):
            return name
        q = self.identifier_quotes[0]
        close = "]" if q == "[" else q
        return q + name.replace(close, close * 2) + close

    def is_system_schema(self, schema: str) -> bool:
        """``schema`` belongs to the engine (listed, or a per-session/internal prefix)."""
        return schema in self.system_schemas or schema.startswith(self.hidden_schema_prefixes)

    # ------------------------------------------------------------------ catalog
    def extra_schema_names(self, conn: Connection) -> list[str]:
        """Namespaces the role may use that SQLAlchemy's ``get_schema_names`` misses."""
        return []

    def visible_relations(self, conn: Connection) -> set[tuple[str, str]] | None:
        """(schema, relation) pairs the role may touch where the catalog lists every
        relation to everyone; None where the catalog already hides the others."""
        return None

    def exact_names(self, conn: Connection) -> bool:
        """The server compares table names byte for byte on this connection."""
        return False

    def selected_schemas(self, conn: Connection) -> list[str] | None:
        """The namespaces "the connected database" means when the login sees several;
        None for every visible schema."""
        return None

    def reflection_context(
        self, insp: Inspector, schema: str, names: Sequence[str]
    ) -> contextlib.AbstractContextManager[None]:
        """A context in which SQLAlchemy reflects ``names`` of ``schema`` (a dialect may
        prefetch what SQLAlchemy would read per table)."""
        return contextlib.nullcontext()

    def linked_functions(self) -> frozenset[str] | None:
        """Every function the engine that runs the statement has, when it can be asked
        without a server (an embedded library); None where only curated lists know."""
        return None

    def linked_aggregates(self) -> frozenset[tuple[str, int]] | None:
        """(name, argument count; -1 any) of aggregates sqlglot does not know as such,
        read from an embedded library; None where sqlglot's node types are the authority."""
        return None

    def lacks_function(self, name: str) -> bool:
        """The function ``name`` (lower case) certainly does not exist here: not in the
        linked library where :meth:`linked_functions` can say, else on the
        :attr:`function_replacements` deny-list."""
        linked = self.linked_functions()
        return name not in linked if linked is not None else name in self.function_replacements

    def function_instead(self, name: str) -> str | None:
        """What to write here instead of function ``name``, where a replacement is known."""
        return self.function_replacements.get(name.lower())

    def function_names(self) -> frozenset[str]:
        """The function names a statement may call: :attr:`functions`, narrowed to what
        :meth:`linked_functions` says exists where it can say."""
        linked = self.linked_functions()
        return self.functions if linked is None else self.functions & linked

    def table_function_names(
        self, allowed: frozenset[str], banned: frozenset[str]
    ) -> frozenset[str]:
        """:attr:`table_functions` that a FROM item may call for a role whose function
        allow-list is ``allowed`` and whose bans are ``banned`` (``Policy.allowed_functions``,
        ``Policy.banned_functions``)."""
        return (frozenset(self.table_functions) & allowed) - banned

    def date_prompt_line(self, allowed: frozenset[str]) -> str | None:
        """One prompt line of this dialect's date functions and cast syntax, naming only
        functions in ``allowed`` (the role's allow-list); None when no idiom is left."""
        shown = [text for names, text in self.date_idioms if names <= allowed]
        if not shown:
            return None
        return f"{self.label} dates and casts: " + "; ".join(shown) + "."

    # ------------------------------------------------------------------ execution
    @contextlib.contextmanager
    def guard(self, conn: Connection, *, writes: bool, timeout_s: float) -> Iterator[None]:
        """Make the transaction just begun on ``conn`` read-only (unless ``writes``) and
        bound each statement in it by ``timeout_s``; restore session state on leaving."""
        from ..errors import ExecutionError

        raise ExecutionError(f"no safe execution mode for dialect {self.name!r}")
        yield  # pragma: no cover - makes this a generator

    def is_timeout(self, orig: BaseException | None) -> bool:
        """The driver error ``orig`` is the guard's timeout (or lock wait) firing."""
        return False

    def fingerprint_queries(self, conn: Connection) -> list[str]:
        """Catalog reads whose rows change when the role's rights or the schema change
        (the live-grants fingerprint, :mod:`grid_sql.ask.live`); empty: nothing to watch."""
        return []

    # ------------------------------------------------------------------ errors
    def is_type_error(self, sqlstate: str | None, errno: int | None) -> bool:
        """The driver's error code (SQLSTATE, or a MySQL-style error number) says the server
        refused a statement for its types (:attr:`type_error_hint` then applies)."""
        return False

    def is_division_by_zero(self, sqlstate: str | None, errno: int | None) -> bool:
        """The server refused a statement because a denominator was zero (PostgreSQL's 22012;
        SQLite and MySQL return NULL instead), which ``grid_sql/ask/typefix.py`` fixes."""
        return False

    def is_cardinality_error(self, sqlstate: str | None, errno: int | None) -> bool:
        """The server refused a scalar subquery that returned several rows (PostgreSQL's
        21000, MySQL's 1242; SQLite takes the first row), which ``grid_sql/ask/typefix.py``
        fixes where it was compared with ``=``."""
        return False

    def is_grouping_error(self, sqlstate: str | None, errno: int | None) -> bool:
        """The server refused a column that is neither grouped nor aggregated (PostgreSQL's
        42803; SQLite and MariaDB's defaults run it), which ``grid_sql/ask/typefix.py``
        fixes from the column the message names (:meth:`ungrouped_column`)."""
        return False

    def ungrouped_column(self, message: str) -> str | None:
        """The column a grouping error's ``message`` names, as ``qualifier.column`` (the
        qualifier as the server reports it, possibly empty); None if it names none."""
        return None

    # ------------------------------------------------------------------ connecting
    def missing_database_file(self, url: URL) -> Path | None:
        """The file ``url`` names when it does not exist and connecting would create it;
        None for a server, or a file that exists."""
        return None

    def engine_options(self, url: URL, timeout_s: float, opts: dict[str, Any]) -> dict[str, Any]:
        """``create_engine`` keyword arguments ``opts`` with pre-ping (a connection the server
        dropped is replaced before a statement is judged on it) and
        :meth:`connect_timeouts`; the caller's own settings win."""
        opts = dict(opts)
        opts.setdefault("pool_pre_ping", True)
        args = dict(opts.get("connect_args") or {})
        for k, v in self.connect_timeouts(url.get_driver_name(), timeout_s).items():
            args.setdefault(k, v)
        opts["connect_args"] = args
        return opts

    def connect_timeouts(self, driver: str, timeout_s: float) -> dict[str, Any]:
        """The driver's connect (and read) timeout arguments bounded by ``timeout_s``, so a
        server that accepts and never answers cannot hang; empty for an unknown driver."""
        return {}

    # ------------------------------------------------------------------ audit store
    def audit_lock(self, conn: Connection, key: str) -> None:
        """Take the audit store's write lock named ``key`` in the transaction on ``conn``."""
        raise NotImplementedError(f"{self.label or self.name}: no audit store")

    def audit_unlock(self, conn: Connection, key: str) -> None:
        """Release a lock :meth:`audit_lock` took that outlives the transaction."""

    def audit_extra_guards(self, tables: Sequence[str]) -> list[tuple[str, str]]:
        """(trigger, table) guards beyond the per-row UPDATE/DELETE ones."""
        return []

    def install_audit_guards(
        self,
        conn: Connection,
        prefix: str,
        rows: Sequence[tuple[str, str, str]],
        tables: Sequence[str],
        message: str,
    ) -> None:
        """Install the append-only triggers ``rows`` ((name, table, UPDATE|DELETE)) and
        :meth:`audit_extra_guards` that are missing, each raising ``message``."""
        raise NotImplementedError(f"{self.label or self.name}: no audit store")

    def existing_triggers(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        """Names of the triggers on ``tables`` that exist now."""
        raise NotImplementedError(f"{self.label or self.name}: no audit store")


STANDARD = Dialect()
"""The base settings (the SQL standard's answer), for an unregistered name
(:meth:`Dialect.lookup`)."""

_BUILTINS = ("sqlite", "postgresql", "mysql")  # listed first by Dialect.names()
_LOADED = False


def _load_builtins() -> None:
    """Register every dialect module of this package (each imports this one, so not at the
    top): a new dialect is a new module here, with no list to extend."""
    global _LOADED
    if _LOADED:
        return
    import importlib
    import pkgutil

    here = __package__ or "grid_sql.dialect"
    found = [m.name for m in pkgutil.iter_modules(importlib.import_module(here).__path__)]
    for mod in sorted(found, key=lambda m: (m not in _BUILTINS, m)):
        if mod != "base" and not mod.startswith("_"):
            importlib.import_module(f"{here}.{mod}")
    _LOADED = True


def words(block: str) -> frozenset[str]:
    """The whitespace-separated words of ``block``."""
    return frozenset(block.split())


# Pieces of the curated function allow-lists every dialect shares (policy/functions.py says
# what may be on a list and why).
MATH = """
    abs acos asin atan atan2 ceil ceiling cos cot degrees exp floor ln log log10 mod pi pow
    power radians round sign sin sqrt tan
"""
WINDOW = """
    cume_dist dense_rank first_value lag last_value lead nth_value ntile percent_rank rank
    row_number
"""
COMMON_AGG = "avg count max min sum"
