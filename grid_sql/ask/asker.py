"""``Asker``: a question in, a policy-compliant statement executed safely, evidence out.

One object binds a database, the connected role's effective policy, a model backend and an
audit store. What is expensive is done once per (role, schema, tokenizer): introspection, the
policy (grants narrowed by the application policy), the role grammar (projection + schema
lexicon) and its compiled :class:`~grid_sql.mask.guide.Guide`. Per question:

1. the prompt from the role's view of the schema (:mod:`grid_sql.ask.prompt`);
2. generation under the guide: every token inside the role's language (paper Prop. 7), every
   non-error stop a complete statement (Prop. 9);
3. the post-parse checker for what no left-to-right mask can judge (Prop. 11: column rights,
   alias binding); when every violation has a fix the schema alone decides (a column read
   through the wrong FROM item, :mod:`grid_sql.policy.autofix`), those exact text edits are
   applied and the result checked again, with no model call; otherwise one repair round with
   the violations quoted back; if that fails too, :class:`PolicyViolation` carrying the SQL
   and violations — never an execution;
4. every generation, refused ones included, sealed into the audit store (an autofixed one
   with its generated SQL and edits, which ``grid-sql audit verify`` re-derives);
5. safe execution (:mod:`grid_sql.ask.execute`): one statement, READ ONLY unless the role
   may write *and* the caller opted in, a timeout and a row cap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..decode.options import BackendOptions
from ..errors import (
    ConnectionConfigError,
    EmptyLanguageError,
    ExecutionError,
    OptionError,
    PolicyViolation,
    SchemaError,
    StatementError,
)
from ..grammar import Grammar
from ..mask.guide import Guide
from ..policy.aggregates import nests_aggregates
from ..policy.autofix import AutofixResult, autofix
from ..policy.checker import Checker, Violation, proposed_fix
from ..policy.config import AppPolicy, explicit_verbs_only, narrow
from ..policy.grants import read_grants, sqlite_baseline
from ..policy.model import Policy
from ..policy.session import as_app_policy, open_sqlite
from ..schema.faults import SLACK_S, answer_deadline, check_timeout
from ..schema.introspect import connect, connected_schemas, introspect, make_engine
from ..schema.model import SchemaSnapshot
from .budget import PromptBudget, by_bytes, fit_repair, for_backend
from .components import (  # noqa: F401 - re-exported: grid_sql.ask.asker is their public home
    _GUIDES,
    _GUIDES_LOCK,
    _ROLE_GRAMMARS,
    _SELECT_ONLY,
    DB,
    MAX_QUESTION_CHARS,
    OnStep,
    _sqlite_file,
    check_question,
    guide_for,
    load_backend,
    role_grammar_for,
)
from .execrepair import ExecutionRepair
from .execute import bind_parameters, execute
from .generation import GenerationMode, GenerationStrategy
from .idioms import catalog_names, idiom_flags, idiom_hints
from .intent import intent_flags, question_intents, refusal
from .interactive import InteractiveMixin
from .live import LiveGrantsMixin
from .local import LocalGeneration
from .prompt import (
    Example,
    Message,
    alias_hints,
    build_messages,
    repair_messages,
    repair_tables,
)
from .result import AskResult, GeneratedSQL, Repair
from .steps import GenerationSteps
from .values import TableValues

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..audit.store import AuditStore
    from ..decode.backend import Backend
    from .conversation import TurnContext


def asker_budget(asker: Any, max_tokens: int, repair: bool, *, load: bool) -> PromptBudget:
    """The budget of ``asker``'s prompts: its local backend's tokenizer and context
    (``load``: load the model if it is not loaded yet), else the byte bound under the
    Asker's ``n_ctx`` option (default 4096). An ``n_ctx`` option smaller than a given
    backend's context narrows the budget."""
    backend = asker.generation.prompt_backend(load=load)  # None: a server's model
    wanted = asker.backend_options.n_ctx
    if backend is None:
        from ..decode.options import DEFAULT_N_CTX

        return by_bytes(wanted or DEFAULT_N_CTX, max_tokens, repair)
    n_ctx = min(backend.n_ctx, wanted) if wanted else backend.n_ctx
    return for_backend(backend, n_ctx, max_tokens, repair)


class Asker(InteractiveMixin, LiveGrantsMixin, GenerationSteps, ExecutionRepair):
    """Binds a database, its role policy, a model backend and an audit store."""

    def __init__(
        self,
        db: DB,
        *,
        model: str | Path | Backend | None = None,
        generation: GenerationStrategy | None = None,
        policy: AppPolicy | Mapping[str, Any] | str | Path | None = None,
        audit: AuditStore | str | Path | Literal[False] | None = None,
        user: str | None = None,
        allow_writes: bool = False,
        row_limit: int = 1000,
        timeout_s: float = 30.0,
        max_tokens: int = 256,
        repair: bool = True,
        examples: Sequence[Example] = (),
        scopes: bool = True,
        autofix: bool = True,
        bind_select_list: bool = True,
        bind_on_close: bool = True,
        example_values: int = 0,
        on_denied: Literal["refuse", "answer_allowed_part"] = "refuse",
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        device: str | None = None,
        live_grants: float | None = 5.0,
        date_help: bool = False,
        every_mask: bool = False,
    ) -> None:
        """``scopes``: scope-aware column masks (``docs/scope.md``); ``bind_select_list``:
        with them, a FROM clause cannot close while a column the select list names (``T2.x``,
        or a bare ``x``) is bound by no FROM item; ``bind_on_close``: where the model's first
        choice would close such a FROM clause, the loop writes the join it needs
        (``grid_sql.decode.bind``; foreign keys give the condition). Both on by default:
        measured with Qwen2.5-Coder-0.5B (bench/RESULTS-spider.md §9), Spider first-round EX
        42.0 -> 46.0 % against ``scope`` (6 / 0 questions), executes after repair 80.0 ->
        87.3 %, Chinook unchanged. The obligations alone (``bind_on_close=False``) were not
        worth it (§8): the model glued the blocked keyword into an alias instead
        (``FROM countrylanguage ORDERBYPercentage``). With ``scopes=False`` neither applies.

        ``autofix``: apply the checker's deterministic fixes (requalifying a column read
        through the wrong FROM item; qualifying an ambiguous name whose candidates are joined
        equal) before, and instead of, the LLM repair round when they resolve every
        violation, in every round. On by default because, measured on recorded rounds of
        Qwen2.5-Coder 0.5B/1.5B (Spider, Chinook; bench/RESULTS-autofix.md), every first-round
        statement it fixed is the one the model's own repair round produced (the same outcome
        without a second generation), on the repair round's refusals it only ever adds
        executing statements (Spider 150, 0.5B: 75.3 -> 79.3%), and each edit is sealed and
        re-derived by the audit verifier.

        ``example_values``: show up to this many distinct values of each short text column the
        role may read in the prompt's schema (``grid_sql.ask.values``: read once, through
        the role's connection). Off by default: values are data, a prompt-injection channel
        (the grammar and checker still bound what can be written).

        ``n_ctx``, ``n_threads``, ``n_gpu_layers``, ``device``: backend options, else the
        ``GRID_SQL_*`` environment (``grid_sql.decode.options``); the prompt always fits
        ``n_ctx`` (``grid_sql.ask.budget``).

        ``generation``: who generates the statements (:class:`GenerationStrategy`); default
        the decode loop on ``model`` (:class:`~grid_sql.ask.local.LocalGeneration`). A
        server's strategy is :class:`grid_sql.serve.client.ServerGeneration`
        (``RemoteAsker`` sets it up).

        ``live_grants``: at most every this many seconds, before a question, a cheap catalog
        fingerprint tells whether the rights or the schema changed, and if so the policy and
        grammar are derived anew (``grid_sql.ask.live``); None: never.

        ``date_help``: a question about dates gets one prompt line of the dialect's date
        functions and casts (``grid_sql.ask.datehelp``). Off by default: on defog's
        date_functions questions (Qwen2.5-Coder-1.5B) it lost, EX 2/12 with it against 3/12
        without, executes 9/12 against 11/12 (bench/RESULTS-defog.md).

        ``every_mask``: fill the exact mask at every step, so every audit record names one.
        Off by default: the loop checks the model's greedy favourite first and fills a mask
        only where the favourite is outside the language (same tokens; the cold guard 18.8 ->
        2.2 % of decode time with the 1.5B model, bench/RESULTS-e2e.md)."""
        self.backend_options = BackendOptions.resolve(
            n_ctx=n_ctx, n_threads=n_threads, n_gpu_layers=n_gpu_layers, device=device
        )
        if on_denied not in ("refuse", "answer_allowed_part"):
            raise OptionError("on_denied must be 'refuse' or 'answer_allowed_part'")
        self.on_denied = on_denied
        if example_values < 0:
            raise OptionError("example_values must be >= 0")
        if row_limit < 0:
            raise OptionError("row_limit must be >= 0")
        timeout_s = check_timeout(timeout_s)
        if max_tokens <= 0:
            raise OptionError("max_tokens must be > 0")
        self.allow_writes = allow_writes
        self.row_limit = row_limit
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.repair = repair
        self.autofix = autofix
        self.scopes = scopes  # scope-aware column lexicons (docs/scope.md)
        self.bind_select_list = bind_select_list
        self.bind_on_close = bind_on_close
        self.examples = tuple(examples)
        self.example_values = example_values
        self.date_help = date_help
        self.every_mask = every_mask
        self._values: dict[tuple[str, str], TableValues] | None = None
        self._model_arg = model
        self._backend: Backend | None = None
        self._lock = threading.RLock()
        self.generation: GenerationStrategy = (
            LocalGeneration(self) if generation is None else generation
        )
        app = as_app_policy(policy)
        self.bind: Engine | Connection = self._open(db, app)
        self.snapshot, self.policy = self._read_policy(app)
        self._names = catalog_names(self.snapshot)  # a word that prefixes one is no idiom
        self._start_live(app, live_grants)
        self.user = user if user is not None else self.policy.role
        self._modes: dict[bool | tuple[bool, str], GenerationMode] = {}
        self._mode(allow_writes)  # compile now: a role with no usable language fails here
        self._audit_arg = audit
        self._audit: AuditStore | None = None
        if model is not None and not isinstance(model, str | Path):
            self._backend = model

    # ------------------------------------------------------------------ setup
    def _open(self, db: DB, app: AppPolicy | None) -> Engine | Connection:
        if isinstance(db, Engine | Connection):
            return db
        if isinstance(db, sa.URL):
            return make_engine(db, timeout_s=self.timeout_s)
        from .aio import is_async_bind, sync_target

        if is_async_bind(db):  # an AsyncEngine/Connection/Session: its synchronous twin
            return self._open(sync_target(db), app)
        if not isinstance(db, str | Path):
            raise ConnectionConfigError(
                f"db must be a URL, a SQLite file path, an Engine, a Connection or an "
                f"AsyncEngine, "
                f"not {type(db).__name__}"
            )
        path = _sqlite_file(db)
        if path is None:
            return make_engine(str(db), timeout_s=self.timeout_s)
        # A SQLite file: learn the policy on a read-only handle, then reopen it read-only when
        # the policy allows nothing but SELECT (mode=ro + query_only, see open_sqlite).
        probe = make_engine(f"sqlite:///file:{path.resolve()}?mode=ro&uri=true")
        try:
            snap = introspect(probe)
            pol = narrow(sqlite_baseline(snap), app, snap)
        finally:
            probe.dispose()
        return open_sqlite(path, pol)

    def _read_policy(self, app: AppPolicy | None) -> tuple[SchemaSnapshot, Policy]:
        conn, owned = connect(self.bind)
        try:
            with answer_deadline(conn, self.timeout_s + SLACK_S):  # a server gone silent
                snap = introspect(conn, schemas=connected_schemas(conn))
                grants = read_grants(conn, snap) if any(True for _ in snap.iter_tables()) else None
            if grants is None:
                raise SchemaError(
                    "the connected role sees no tables in this database (nothing to ask about)"
                )
            if app is None:  # no DDL unless a policy names it (EXPLICIT_VERBS)
                return snap, explicit_verbs_only(grants)
            return snap, narrow(grants, app, snap)
        finally:
            if owned:
                conn.close()

    @property
    def dialect(self) -> str:
        return self.snapshot.dialect

    @property
    def backend(self) -> Backend:
        """The model backend, loaded on first use (so policy-only use needs no model)."""
        with self._lock:
            if self._backend is None:
                model = self._model_arg
                assert model is None or isinstance(model, str | Path)
                self._backend = load_backend(model, self.backend_options)
            return self._backend

    @property
    def audit(self) -> AuditStore | None:
        """The audit store (opened on first use); None when auditing was turned off."""
        with self._lock:
            if self._audit is None and self._audit_arg is not False:
                from ..audit.store import AuditStore

                arg = self._audit_arg
                self._audit = arg if isinstance(arg, AuditStore) else AuditStore(arg)
            return self._audit

    def _mode(self, writes: bool) -> GenerationMode:
        """Policy, grammar and checker for generation with or without writes.

        Why two: without the caller's opt-in a write could never run, so generating one would
        only waste the budget and the repair round; the language is narrowed to SELECT.
        """
        with self._lock:
            mode = self._modes.get(writes)
            if mode is not None:
                return mode
            pol = self.policy
            if not writes and not pol.read_only:
                pol = narrow(pol, _SELECT_ONLY, self.snapshot)
            try:
                grammar = role_grammar_for(
                    self.snapshot, pol, scopes=self.scopes, bind_select_list=self.bind_select_list
                )
            except EmptyLanguageError as exc:
                what = "" if writes else " without allow_writes"
                raise PolicyViolation(
                    f"the role {pol.role!r} may not run any statement{what} that the grammar "
                    f"can express on this database: {exc}"
                ) from exc
            mode = GenerationMode(pol, grammar, Checker(self.snapshot, pol))
            self._modes[writes] = mode
            return mode

    def _unnested_mode(self, mode: GenerationMode, writes: bool) -> GenerationMode:
        """``mode`` narrowed so that no aggregate can be called inside an aggregate's
        arguments (``grammar/scope_aggregates.py``): the repair round's language after the
        checker refused a nesting (``SUM(CASE WHEN COUNT(x) > 1 ...)``, which a small model
        otherwise writes again). Same policy and checker; ``mode`` itself where the grammar
        has no scope rule to carry it."""
        if mode.grammar.scopes is None or not mode.grammar.scopes.aggregates:
            return mode
        with self._lock:
            got = self._modes.get((writes, "unnested"))
            if got is None:
                grammar = role_grammar_for(
                    self.snapshot,
                    mode.policy,
                    scopes=True,
                    bind_select_list=self.bind_select_list,
                    nested_aggregates=False,
                )
                got = GenerationMode(mode.policy, grammar, mode.checker)
                self._modes[writes, "unnested"] = got
            return got

    @property
    def grammar(self) -> Grammar:
        """The role grammar generation runs under (SELECT-only unless writes are opted in)."""
        return self._mode(self.allow_writes).grammar

    @property
    def checker(self) -> Checker:
        return self._mode(self.allow_writes).checker

    @property
    def guide(self) -> Guide:
        return guide_for(self.grammar, self.backend)

    # ------------------------------------------------------------------ public API
    def explain_policy(self) -> str:
        """What the role may do, in words: the effective policy and what the grammar admits."""
        lines = [self.policy.explain(), ""]
        verbs = ", ".join(sorted(v.upper() for v in self.policy.statement_verbs)) or "(none)"
        lines.append(f"The model can write these statements: {verbs}.")
        tables = [t.qualified for t in self.policy.tables if t.any_right]
        lines.append(f"Tables the grammar admits ({len(tables)}): " + ", ".join(tables))
        lines.append(
            "Column-level rights are checked after generation (post-parse checker); a statement "
            "that fails them is repaired once or refused, never executed."
        )
        if not self.policy.read_only:
            lines.append(
                "Writing statements run only with allow_writes=True (CLI: --allow-writes)."
            )
        return "\n".join(lines)

    def messages(
        self,
        question: str,
        examples: Sequence[Example] | None = None,
        allow_writes: bool | None = None,
        budget: PromptBudget | None = None,
    ) -> list[Message]:
        """The chat messages the model is given for ``question`` (within ``budget``, by
        default the Asker's: ``grid_sql.ask.budget``)."""
        q = check_question(question)
        ex = self.examples if examples is None else tuple(examples)
        writes = self.allow_writes if allow_writes is None else allow_writes
        policy = self._mode(writes).policy
        budget = budget or asker_budget(self, self.max_tokens, self.repair, load=False)
        values = self._column_values()
        return build_messages(
            q,
            self.snapshot,
            policy,
            examples=ex,
            values=values,
            budget=budget,
            date_help=self.date_help,
        )

    def _column_values(self) -> dict[tuple[str, str], TableValues] | None:
        """The prompt's example values (``example_values``), read once per Asker under the
        role's policy (read rights are the same with and without ``allow_writes``)."""
        if not self.example_values:
            return None
        with self._lock:
            if self._values is None:
                from .values import column_values

                self._values = column_values(
                    self.bind, self.snapshot, self.policy, per_column=self.example_values
                )
            return self._values

    def generate_sql(self, question: str, **options: Any) -> GeneratedSQL:
        """Generate (and check, and if needed repair) the statement; execute nothing.

        Options: ``max_tokens``, ``repair``, ``autofix``, ``examples``, ``on_step`` (called
        with each :class:`StepRecord` as it is emitted, e.g. for a progress bar). An autofixed
        statement is returned with a ``repairs`` entry of kind ``"autofix"`` listing the
        generated SQL, the violations and the edits. ``refused``: ``(sql, problems)``, a
        statement already refused elsewhere (the database, in :meth:`ask`) and why; the
        generation is then that statement's repair round only (one round, the problems quoted
        back, a ``repairs`` entry of kind ``"execution"`` first). Raises
        :class:`QuestionError`, :class:`PolicyViolation` (after the repair round),
        :class:`ModelError`.
        """
        t_start = time.perf_counter()
        q = check_question(question)
        self.refresh_grants()  # a REVOKE or a new table since the last question (front/live)
        max_tokens = int(options.pop("max_tokens", self.max_tokens))
        if max_tokens <= 0:
            raise OptionError("max_tokens must be > 0")
        repair = bool(options.pop("repair", self.repair))
        use_autofix = bool(options.pop("autofix", self.autofix))
        examples = options.pop("examples", None)
        on_step: OnStep | None = options.pop("on_step", None)
        writes = bool(options.pop("allow_writes", self.allow_writes))
        refused: tuple[str, Sequence[str]] | None = options.pop("refused", None)
        context: TurnContext | None = options.pop("context", None)  # a conversation's turn
        previous = None if context is None else context.previous  # its audit thread
        if options:
            raise OptionError(f"unknown option(s) for generate_sql: {sorted(options)}")
        mode = self._mode(writes)
        budget = asker_budget(self, max_tokens, repair or refused is not None, load=True)
        first_msgs = msgs = (
            self.messages(q, examples, writes, budget)
            if context is None
            else context.messages(self, q, examples, writes, budget)
        )
        repairs: list[Repair] = []
        audit_ids: list[str] = []
        timings = {"generation": 0.0, "mask": 0.0, "check": 0.0}
        tokens = 0
        rounds = 2 if repair else 1
        start = 0
        if refused is not None:
            old_sql, problems = refused[0], [str(p) for p in refused[1]]
            if not problems:
                raise OptionError("refused needs at least one problem to quote back")
            msgs = repair_messages(
                first_msgs,
                old_sql,
                problems,
                tables=repair_tables(old_sql, problems, self.snapshot, mode.policy),
                snapshot=self.snapshot,
            )
            msgs = fit_repair(msgs, budget)
            repairs.append(Repair(old_sql, problems, 0, kind="execution"))
            start, rounds = 1, 2
        asked = question_intents(q, self.snapshot, mode.policy)  # names a denied object
        if asked and self.on_denied == "refuse":
            raise refusal(asked, None)  # before generating: nothing to seal or run
        last: tuple[str, list[Violation], list[str]] | None = None
        for rnd in range(start, rounds):
            gen, mode = self._generate_or_fall_back(
                msgs, max_tokens, mode, on_step, repairs, rnd, q
            )
            timings["generation"] += gen.seconds
            timings["mask"] += gen.mask_seconds
            tokens += gen.n_tokens
            t0 = time.perf_counter()
            found = mode.checker.check(gen.sql)
            params = bind_parameters(gen.sql, self.dialect)
            fix: AutofixResult | None = None
            if found and not params and use_autofix:
                fix = autofix(gen.sql, mode.checker, mode.grammar, found, partial=False)
                if not fix.complete or fix.fixed is None:
                    fix = None
            timings["check"] += time.perf_counter() - t0
            gen.fix = fix
            wanted = self._denied_intents(gen, mode, q)
            if wanted:
                gen.flags = (*gen.flags, *intent_flags(wanted))
            idioms = self._foreign_idioms(gen, mode)  # another dialect's construct: repair
            gen.flags = (*gen.flags, *idiom_flags(idioms))
            retry = bool(idioms) and rnd + 1 < rounds
            audit_id = self._seal(gen, q, mode, flags=gen.flags, previous=previous)
            if wanted and self.on_denied == "refuse":
                raise refusal(wanted, gen.sql).about(
                    gen.sql, [*audit_ids, *filter(None, [audit_id])], repairs
                )
            if audit_id is not None:
                audit_ids.append(audit_id)
            if fix is not None and fix.fixed is not None and not retry:
                repairs.append(
                    Repair(
                        gen.sql,
                        [v.message for v in found],
                        rnd,
                        kind="autofix",
                        edits=[e.to_dict() for e in fix.edits],
                    )
                )
            if not retry and ((fix and fix.fixed is not None) or (not found and not params)):
                timings["total"] = time.perf_counter() - t_start
                return GeneratedSQL(
                    question=q,
                    sql=fix.fixed if fix is not None and fix.fixed is not None else gen.sql,
                    stop_reason=gen.stop_reason,
                    audit_id=audit_id,
                    audit_ids=audit_ids,
                    repairs=repairs,
                    timings=timings,
                    tokens=tokens,
                )
            if audit_id is not None:  # refused by the checker: it will not run (audit chain)
                from ..audit.statement import record_refusal

                kind = PolicyViolation if found else StatementError
                record_refusal(self.audit, audit_id, kind.__name__)
            msgs, texts = self._repair_prompt(
                first_msgs, gen.sql, found, params, mode, idiom_hints(idioms)
            )
            msgs = fit_repair(msgs, budget)
            repairs.append(Repair(gen.sql, texts, rnd, kind="idiom" if idioms else "checker"))
            if any(v.kind == "aggregate_misuse" for v in found) and nests_aggregates(
                gen.sql, self.dialect
            ):
                mode = self._unnested_mode(mode, writes)
            last = (gen.sql, found, texts)
        assert last is not None
        sql, found, texts = last
        after = " even after one repair round" if repair else ""
        listed = "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))
        err: PolicyViolation | StatementError
        if found:
            err = PolicyViolation(
                f"the generated statement violates the policy{after} and was not executed:\n"
                f"{sql}\n{listed}",
                list(found),
                sql=sql,
            )
        else:
            err = StatementError(
                f"the generated statement cannot be executed{after} and was not run:\n"
                f"{sql}\n{listed}"
            )
        raise err.about(sql, audit_ids, repairs)

    def repair_messages(
        self, question: str, sql: str, *, allow_writes: bool | None = None
    ) -> list[Message]:
        """The messages of the repair round after ``sql`` was generated for ``question``
        (what :meth:`generate_sql` sends the model when the checker refuses ``sql``)."""
        q = check_question(question)
        writes = self.allow_writes if allow_writes is None else allow_writes
        mode = self._mode(writes)
        found = mode.checker.check(sql)
        params = bind_parameters(sql, self.dialect)
        return self._repair_prompt(self.messages(q, None, writes), sql, found, params, mode)[0]

    def _repair_prompt(
        self,
        first: list[Message],
        sql: str,
        found: list[Violation],
        params: Sequence[str],
        mode: GenerationMode,
        extra: Sequence[str] = (),
    ) -> tuple[list[Message], list[str]]:
        """The repair round's messages and the violation texts they quote.

        The model sees its first prompt, the refused statement, the problems with one
        concrete fix each, the statement with the checker's mechanical fixes applied (only if
        that passes the checker), and the columns of the tables involved.
        """
        hints = alias_hints(sql, self.snapshot)
        texts = [v.message for v in found] + hints + list(extra)
        fixes = [v.fix for v in found if v.fix]
        candidate = None if params or hints or extra else proposed_fix(sql, found)
        if candidate is not None and mode.checker.check(candidate):
            candidate = None
        if params:
            texts.append(
                f"The statement uses bind parameter(s) {', '.join(params)}, which have no "
                "values; write literal values instead."
            )
            fixes.append("replace each parameter with a literal value")
        msgs = repair_messages(
            first,
            sql,
            texts,
            fixes=fixes,
            tables=repair_tables(sql, texts, self.snapshot, mode.policy),
            snapshot=self.snapshot,
            candidate=candidate,
        )
        return msgs, texts

    def ask(self, question: str, **options: Any) -> AskResult:
        """Generate, check and execute. Options: ``row_limit``, ``timeout_s``,
        ``allow_writes``, ``max_tokens``, ``repair``, ``examples``.

        Raises typed errors (see :mod:`grid_sql.errors`) and executes nothing on failure.
        """
        t_start = time.perf_counter()
        row_limit = int(options.pop("row_limit", self.row_limit))
        timeout_s = check_timeout(options.pop("timeout_s", self.timeout_s))
        allow_writes = bool(options.pop("allow_writes", self.allow_writes))
        on_sql: Callable[[GeneratedSQL], None] = options.pop("on_sql", None) or (lambda g: None)
        dry_run = bool(options.pop("dry_run", False))  # a write is run, counted, rolled back
        gen = self.generate_sql(question, allow_writes=allow_writes, **dict(options))
        on_sql(gen)  # the statement that is about to run (streaming shows it: front/stream)

        def run(sql: str) -> Any:  # its outcome is chained to the record of ``gen`` (audit)
            return self._execute(sql, allow_writes, row_limit, timeout_s, gen.audit_id, dry_run)

        try:
            res = run(gen.sql)
        except ExecutionError as exc:  # grid_sql/ask/execrepair.py: a fix, a repair, or this
            return self._answer_refused(
                question,
                gen,
                exc,
                allow_writes=allow_writes,
                options=options,
                run=lambda sql, audit_id: self._execute(
                    sql, allow_writes, row_limit, timeout_s, audit_id, dry_run
                ),
                on_sql=on_sql,
                t_start=t_start,
            )
        return AskResult.answered(gen, res, t_start)

    def _execute(
        self,
        sql: str,
        allow_writes: bool,
        row_limit: int,
        timeout_s: float,
        audit_id: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        """One statement on the Asker's database under the execution rules (front/execute).
        With ``audit_id``, what happened (ran or not, rows, error class, duration) is chained
        to that record in the audit store (grid_sql/audit/statement.py)."""
        from ..audit.statement import execution_outcome

        with execution_outcome(self.audit if audit_id else None, audit_id) as outcome:
            res = execute(
                self.bind,
                sql,
                policy=self.policy,
                allow_writes=allow_writes,
                row_limit=row_limit,
                timeout_s=timeout_s,
                dry_run=dry_run,
            )
            outcome.rowcount, outcome.dry_run = res.rowcount, res.preview is not None
        return res

    def run_sql(self, sql: str, **options: Any) -> AskResult:
        """Run a hand-written statement under the same rules as a generated one.

        The post-parse checker first (a violation raises :class:`PolicyViolation` carrying the
        SQL and violations, and nothing runs), then safe execution. Options: ``row_limit``,
        ``timeout_s``, ``allow_writes``. ``stop_reason`` is ``""``; ``audit_id`` names the
        sealed statement record (statement, checker verdict, policy and schema; its outcome
        is chained after it), None when auditing is off.
        """
        t_start = time.perf_counter()
        row_limit = int(options.pop("row_limit", self.row_limit))
        timeout_s = check_timeout(options.pop("timeout_s", self.timeout_s))
        allow_writes = bool(options.pop("allow_writes", self.allow_writes))
        dry_run = bool(options.pop("dry_run", False))
        if options:
            raise OptionError(f"unknown option(s) for run_sql: {sorted(options)}")
        self.refresh_grants()
        t0 = time.perf_counter()
        found = self._mode(allow_writes).checker.check(sql)
        check_s = time.perf_counter() - t0
        audit_id = self._seal_statement(sql, found, allow_writes)
        if found:
            listed = "\n".join(f"{i}. {v.message}" for i, v in enumerate(found, 1))
            from ..audit.statement import record_refusal

            record_refusal(self.audit, audit_id, PolicyViolation.__name__)
            err = PolicyViolation(
                f"the statement violates the policy and was not executed:\n{sql}\n{listed}",
                list(found),
                sql=sql,
            )
            raise err.about(sql, filter(None, [audit_id]))
        res = self._execute(sql, allow_writes, row_limit, timeout_s, audit_id, dry_run)
        return AskResult(
            question="",
            sql=sql,
            columns=res.columns,
            rows=res.rows,
            truncated=res.truncated,
            rowcount=res.rowcount,
            stop_reason="",
            audit_id=audit_id,
            timings={
                "check": check_s,
                "execution": res.seconds,
                "total": time.perf_counter() - t_start,
            },
            preview=res.preview,
        )
