"""What happens after the database refuses a statement the checker passed (``Asker.ask``).

Why a module of its own: a refusal at execution has three outcomes, each with its own audit
and typing rules, and they read best in one place:

1. **a deterministic fix** (grid_sql/ask/typefix.py): a PostgreSQL type error or division by
   zero with one reading; the fixed statement must be in the role's language and pass the
   checker, is sealed like a ``run_sql`` statement and runs instead (``Repair(kind="typefix")``);
2. **the repair round**: the database's message (and the dialect's type hint) goes back to
   the model, if the round is unused, the statement read-only and not a time-out; a repair
   that writes the same statement again is not run twice, and a repair the database
   refuses in turn gets the deterministic fixes of 1. once;
3. **the refusal itself**, typed (:class:`ExecutionError` naming the statement and its audit
   records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..dialect import Dialect
from ..errors import ExecutionError, StatementTimeout
from ..parser.incremental import accepts
from .result import AskResult, GeneratedSQL, Repair
from .retry import same_statement
from .typefix import cardinality_fix, group_by_fix, type_fix, zero_division_fix
from .typehints import error_codes, type_hint

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .asker import Asker

__all__ = ["ExecutionRepair"]

Run = Callable[[str, "str | None"], Any]  # (statement, audit id whose outcome it is) -> result


class ExecutionRepair:
    """The Asker's steps after a database refusal (module doc); mixed into ``Asker``."""

    def _answer_refused(  # type: ignore[misc]  # self: the Asker
        self: Asker,
        question: str,
        gen: GeneratedSQL,
        exc: ExecutionError,
        *,
        allow_writes: bool,
        options: dict[str, Any],
        run: Run,
        on_sql: Callable[[GeneratedSQL], None],
        t_start: float,
    ) -> AskResult:
        """The answer after the database refused ``gen``'s statement, or the typed error."""
        fixed = self._type_fixed(gen, exc, allow_writes, options)
        if fixed is not None:  # a type error with one reading: fixed without the model
            sql, audit_id, repair = fixed
            try:
                res = run(sql, audit_id)
            except ExecutionError:
                pass  # the fix did not help: the model's repair round, with the first error
            else:
                gen.repairs = [*gen.repairs, repair]
                gen.audit_ids = [*gen.audit_ids, *filter(None, [audit_id])]
                gen.sql, gen.audit_id = sql, audit_id or gen.audit_id
                on_sql(gen)
                return AskResult.answered(gen, res, t_start)
        if not self._may_repair_execution(gen, exc, allow_writes, options):
            raise exc.about(gen.sql, gen.audit_ids, gen.repairs) from exc.__cause__
        # the database refused a statement the checker passed (`count(DISTINCT a, b)`, a
        # parser stack overflow): its message goes back for the unused repair round
        again = self.generate_sql(
            question,
            allow_writes=allow_writes,
            refused=(gen.sql, [str(exc), *filter(None, [type_hint(self.dialect, exc)])]),
            **dict(options),
        )
        if same_statement(again.sql, gen.sql, self.dialect):  # nothing new to try
            same = ExecutionError(
                f"{exc} (the repair round wrote the same statement again; not run twice)"
            )  # names the statement the database refused; the retry was not run
            raise same.about(gen.sql, [*gen.audit_ids, *again.audit_ids], gen.repairs) from exc
        again.repairs = [*gen.repairs, *again.repairs]
        again.audit_ids = [*gen.audit_ids, *again.audit_ids]
        for k, v in gen.timings.items():
            if k != "total":
                again.timings[k] = again.timings.get(k, 0.0) + v
        again.tokens += gen.tokens
        on_sql(again)
        try:
            res = run(again.sql, again.audit_id)
        except ExecutionError as exc2:
            # the repair round's statement gets the same deterministic fixes (defog q155: the
            # model added the GROUP BY the first statement lacked, but not its sort key)
            fixed = self._type_fixed(again, exc2, allow_writes, options)
            if fixed is None:
                raise exc2.about(again.sql, again.audit_ids, again.repairs) from exc2.__cause__
            sql, audit_id, repair = fixed
            try:
                res = run(sql, audit_id)
            except ExecutionError:
                raise exc2.about(again.sql, again.audit_ids, again.repairs) from exc2.__cause__
            again.repairs = [*again.repairs, repair]
            again.audit_ids = [*again.audit_ids, *filter(None, [audit_id])]
            again.sql, again.audit_id = sql, audit_id or again.audit_id
            on_sql(again)
        return AskResult.answered(again, res, t_start)

    def _type_fixed(  # type: ignore[misc]  # self: the Asker
        self: Asker,
        gen: GeneratedSQL,
        exc: ExecutionError,
        allow_writes: bool,
        options: dict[str, Any],
    ) -> tuple[str, str | None, Repair] | None:
        """The deterministic fix of a type error, a division by zero, an ungrouped column or
        a several-row subquery compared with ``=`` the database reported
        (grid_sql/ask/typefix.py) as (fixed statement, its audit id, its repair entry), or
        None: not such an error, autofix off, a write, no certain fix, or the fixed
        statement is outside the role's language or refused by the checker. The fixed
        statement is sealed like a ``run_sql`` statement (text, checker verdict, policy and
        schema) before it runs."""
        state, errno = error_codes(exc)
        d = Dialect.lookup(self.dialect)
        if allow_writes or not bool(options.get("autofix", self.autofix)):
            return None
        if d.is_type_error(state, errno):
            fix = type_fix(gen.sql, self.snapshot, d)
        elif d.is_division_by_zero(state, errno):
            fix = zero_division_fix(gen.sql, d)
        elif d.is_grouping_error(state, errno):
            fix = group_by_fix(gen.sql, str(exc), d)
        elif d.is_cardinality_error(state, errno):
            fix = cardinality_fix(gen.sql, d)
        else:
            return None
        if fix is None:
            return None
        mode = self._mode(allow_writes)
        if not accepts(mode.grammar, fix.sql.encode()) or mode.checker.check(fix.sql):
            return None
        edits = [
            {"start": a, "end": b, "old": old, "new": new, "kind": "typefix", "reason": why}
            for a, b, old, new, why in fix.edits
        ]
        repair = Repair(gen.sql, [str(exc)], 0, kind="typefix", edits=edits)
        return fix.sql, self._seal_statement(fix.sql, [], allow_writes), repair

    def _may_repair_execution(  # type: ignore[misc]  # self: the Asker
        self: Asker,
        gen: GeneratedSQL,
        exc: ExecutionError,
        allow_writes: bool,
        options: dict[str, Any],
    ) -> bool:
        """Whether a statement the database refused gets the repair round: repair on, the
        round not spent on the checker's violations, read-only (the refused statement
        changed nothing: its read-only transaction was rolled back), and not a time-out (a
        slow statement is not a wrong one)."""
        if isinstance(exc, StatementTimeout) or allow_writes:
            return False
        if not bool(options.get("repair", self.repair)):
            return False
        return not any(r.kind in ("checker", "execution", "idiom") for r in gen.repairs)
