"""One exception hierarchy for grid-sql.

Every bad input (grammar, policy, schema, tokenizer, URL, question) surfaces as a typed
subclass of :class:`GridSQLError` whose message names the problem, so callers can tell a
configuration mistake from a model failure and nothing gets executed on error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self


class GridSQLError(Exception):
    """Base class of every error raised by grid-sql."""


class GrammarError(GridSQLError):
    """A grammar is malformed, conflicting (not LALR(1)) or otherwise unusable."""


class GrammarConflictError(GrammarError):
    """The grammar is not LALR(1): lark reported a shift/reduce or reduce/reduce conflict."""


class EmptyLanguageError(GrammarError):
    """A role projection (or lexicon) leaves a grammar that generates no sentence."""


class LexiconError(GrammarError):
    """A schema lexicon is invalid (e.g. a word its terminal's regex cannot scan)."""


class ParseError(GridSQLError):
    """Input bytes left the viable-prefix set of the language."""


class TokenizerError(GridSQLError):
    """A tokenizer/vocabulary could not be loaded or is inconsistent."""


class TokenRejected(GridSQLError):
    """A token outside the current mask was fed to a matcher."""


class MaskError(GridSQLError):
    """Internal invariant broken in mask computation (e.g. empty mask at a viable state).

    ``partial``: the text generated before the invariant broke, when the decode loop knows it
    (a dead end is then reported and sealed with where it happened, issue #29)."""

    partial: str | None = None


class SchemaError(GridSQLError):
    """The database schema could not be introspected or is inconsistent with a request."""


class ConnectionConfigError(GridSQLError):
    """A database URL or connection setting is invalid, or the server is unreachable."""


class ConnectionLostError(ConnectionConfigError):
    """The connection to the server was lost, or the server stopped answering within the
    call's bound (``timeout_s`` plus a small slack), while a statement was being run. Not an
    :class:`ExecutionError`: the database did not refuse the statement, so it never goes to
    the repair round. A read-only statement changed nothing; a write was not committed unless
    the loss came during COMMIT itself."""


class PolicyError(GridSQLError):
    """A policy (grants or application config) is invalid, e.g. names an unknown table."""


class AboutStatement:
    """What an error about a generated statement carries, with one type wherever it is raised
    (a policy refusal, a statement that cannot be run, a database refusal): ``sql`` the
    statement, ``audit_ids`` the audit records of its generation (oldest first), ``repairs``
    the refused earlier attempts (``grid_sql.ask.result.Repair``). A caller shows and audits
    what was refused the same way whichever error it caught; all stay empty where the
    statement was the caller's own (``run_sql``, DB-API ``execute``) or none was written."""

    sql: str | None = None
    audit_ids: tuple[str, ...] = ()
    repairs: tuple[Any, ...] = ()

    def about(
        self, sql: str | None, audit_ids: Iterable[str] = (), repairs: Iterable[Any] = ()
    ) -> Self:
        """This error, naming ``sql``, its audit records and its earlier attempts."""
        self.sql = sql
        self.audit_ids = tuple(audit_ids)
        self.repairs = tuple(repairs)
        return self


class PolicyViolation(AboutStatement, GridSQLError):
    """A statement violates the role's policy (raised by the post-parse checker)."""

    def __init__(
        self, message: str, violations: list[object] | None = None, sql: str | None = None
    ) -> None:
        super().__init__(message)
        self.violations: list[object] = list(violations or [])
        self.sql = sql


class PolicyRefusal(PolicyViolation):
    """The question needs objects the role may not read, so it is refused rather than answered
    with some other, allowed query (issue #30). ``needs``: those objects (``Table`` or
    ``Table.Column``); nothing was executed."""

    def __init__(self, message: str, needs: list[str], sql: str | None = None) -> None:
        super().__init__(message, [], sql=sql)
        self.needs: list[str] = list(needs)

    def plain(self) -> str:
        """The refusal as a person reads it, the reason and then what the question needs (the
        CLI and the notebook magic print this instead of an error class and a traceback)."""
        return f"refused: {self}\nneeds: {', '.join(self.needs)}"


class QuestionError(GridSQLError):
    """A natural-language question is empty or otherwise unusable."""


class ModelError(GridSQLError):
    """A model file is missing, corrupt or cannot be loaded by its backend."""


class StatementError(AboutStatement, GridSQLError):
    """SQL handed to execution is not exactly one parseable statement (nothing was run)."""


class WriteRefused(PolicyViolation):
    """A writing statement was refused: the role's grants lack the verb or the caller did not
    opt in with ``allow_writes=True``. Nothing was run."""


class ExecutionError(AboutStatement, GridSQLError):
    """The database rejected or failed a statement; its transaction was rolled back.

    :meth:`Asker.ask` names the refused statement and its audit records
    (:class:`AboutStatement`), as for a :class:`PolicyViolation`; they stay empty where the
    statement was the caller's own (``run_sql``, DB-API ``execute``)."""


class StatementTimeout(ExecutionError):
    """The statement exceeded its time limit and was cancelled by the database."""


class ConnectionStateError(GridSQLError):
    """A connection is not in the state an operation needs (closed, or a transaction is open)."""


class AuditError(GridSQLError):
    """An audit trail cannot be written, read or replayed (unknown id, missing artifact,
    a store that is not append-only, a malformed record)."""


class ModelFetchError(ModelError):
    """A registry model could not be downloaded or unpacked (offline, unknown wheel, bad
    member); nothing partial is left in the model cache."""


class ModelIntegrityError(ModelError):
    """A fetched model's size or sha256 differs from the registry's; the file was deleted."""


class BudgetError(GridSQLError):
    """A generation's token budget cannot hold even the shortest completion of the
    statement (termination mode 1 would be void), so decoding does not start."""


class OptionError(GridSQLError, ValueError):
    """An option is out of range or of the wrong kind (row limit, timeout, token budget...)."""


class GrammarExportError(GrammarError):
    """A grammar cannot be written in another engine's grammar format (a terminal regex
    construct or a lexicon word that format cannot express)."""


class ServingError(GridSQLError):
    """A model server (vLLM or grid-sql's test server) could not be reached, refused a
    request, or answered with something that is not an OpenAI-compatible completion."""


class GuideSpecError(GridSQLError, ValueError):
    """A guide spec sent to a server (dialect, role policy, schema, tokenizer fingerprint) is
    malformed or inconsistent; also a ValueError, so vLLM's admission check rejects it."""


class GuideUnavailable(GridSQLError):
    """A guide cannot be had: never registered under that fingerprint, compiled for another
    tokenizer than the server's, or its build failed (the cause is chained; the same error is
    given to every waiter and, for a short while, to later requests)."""


class ContextOverflowError(BudgetError):
    """A prompt cannot fit the model's context window (``n_ctx``) with room for the answer:
    the rules, examples and question alone exceed it even with no table described. Raised
    before any model call; raise ``n_ctx`` or lower ``max_tokens``."""


class NoChartError(GridSQLError):
    """A result has no sensible chart (no rows, no numeric column, no category or time axis,
    too many series); the message says which, so ``%%ask --plot`` can show it instead."""
