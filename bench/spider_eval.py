"""Text-to-SQL accuracy: unconstrained vs constrained vs + scope-aware masks vs + repair.

Issue #6 §6 and issue #8 §3. Two suites: ``spider`` (Spider dev) and ``chinook`` (the business
questions of ``bench/chinook_questions.json`` on the packaged Chinook). Up to five arms on the
same questions, the same model and the same prompt (the Asker's, built from the role's view of
the schema):

* ``unconstrained`` — greedy decoding straight from the backend (``prefill``/``step``, no
  mask), stopping at the first ``;``, at an end-of-generation special token, or at the token
  budget (a *truncation*). A Markdown code fence around the statement is stripped.
* ``constrained`` — the Asker with repair disabled: generation under the role's guide, then
  the post-parse checker; a violation is a *refusal* (nothing runs).
* ``repair`` — the same plus one checker-guided repair round.
* ``scope`` / ``scope+repair`` — the same two with the scope-aware identifier masks on (issue
  #8 §2: after a FROM clause, column positions admit only the columns of the tables in scope).
  The ``constrained`` / ``repair`` arms run with them off, so the difference is the masks alone.

Why ``constrained`` and ``repair`` (likewise ``scope`` and ``scope+repair``) come from one
call: decoding is greedy, so the repair arm's first round *is* the repair-disabled generation
(same prompt, same guide, same argmax). ``generate_sql(repair=True)`` is run once; the first
round (tokens and seconds up to its EOS record, its SQL, and whether the checker refused it)
is the ``constrained`` arm; the final outcome is the ``repair`` arm. This halves the model
time on a loaded machine.

The role is what the Asker gives a SQLite file: ``sqlite_baseline`` of the database narrowed
to SELECT (and the file opened read-only). Every arm's SQL, and the gold SQL, is executed
by the same read-only ``sqlite3`` executor (no row cap) for the comparison.

Metrics per arm: executes % (runs without error), execution accuracy EX (result multiset
equal to the gold query's; a list comparison when the gold query has ORDER BY; floats equal
to 7 significant digits; column order matters), tokens/query, seconds/query (generation
only), truncations and refusals; 95% Wilson intervals; paired wins/losses between arms.
*EX, any column order* (``ex_any_order``) is the same comparison up to a permutation of the
predicted columns, the rule of Spider's official execution evaluation (test-suite-sql-eval's
``result_eq``; its removal of DISTINCT is not copied): ``SELECT LOCATION, count(*)`` answers
``SELECT count(*), LOCATION``. EX stays the headline figure; ``--rescore`` adds the field to
records written before it existed (by executing their SQL again, read-only).

Sample: the dev questions whose database is present (``wta_1`` excluded), shuffled with
``random.Random(seed).shuffle`` (default 2026); ``--n N`` takes the first N, so a larger N
extends a smaller run. (This is not ``random.Random(2026).sample(pool, N)``, which picks a
different set.) The Chinook suite runs every question in file order unless ``--n``/``--ids``.
Results append to a JSONL file, one line per question x arm, each with the git commit it ran
at, so a run resumes where it stopped and arms can be run separately (``--arms``).

    python bench/spider_eval.py --n 150 --arms unconstrained \
        --out bench/results/spider-qwen2.5-coder-0.5b.jsonl
    python bench/spider_eval.py --suite chinook --n 0 \
        --out bench/results/chinook-qwen2.5-coder-0.5b.jsonl
    python bench/spider_eval.py --report --out bench/results/spider-qwen2.5-coder-0.5b.jsonl
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# bench/ is not a package: these modules sit beside this file (on sys.path when a bench
# script runs); the `x as x` names are re-exported for the scripts that read se.x
from spider_common import (
    ARM_PAIRS,
    ARMS,
    AUTOFIX_ARMS,
    DEFAULT_ARMS,
    SCOPE_OPTIONS,
    SPIDER_DIR,
    ExecError,
    Question,
    append_jsonl,
    done_keys,
    extract_sql,
    git_commit,
    gold_is_ordered,
    load_chinook_questions,
    load_questions,
    read_jsonl,
    record_files,
    results_match,
    run_sqlite,
    select_questions,
    write_jsonl,
)
from spider_common import _norm_rows as _norm_rows
from spider_common import wilson as wilson
from spider_report import OUTCOMES as OUTCOMES
from spider_report import _pct as _pct
from spider_report import column_place as column_place
from spider_report import outcome as outcome
from spider_report import paired_difference as paired_difference
from spider_report import record_db as record_db
from spider_report import refusal_places, report, rescore, with_arm_label

if TYPE_CHECKING:  # pragma: no cover - typing only
    from grid_sql.ask.asker import Asker
    from grid_sql.decode.backend import Backend


# --------------------------------------------------------------------------- arms
def _record(q: Question, arm: str, model: str, **fields: Any) -> dict[str, Any]:
    return {"qid": q.qid, "db_id": q.db_id, "arm": arm, "model": model, **fields}


def _score(
    q: Question, db: Path, sql: str | None, gold_rows: list[tuple[Any, ...]]
) -> dict[str, Any]:
    if sql is None:
        return {"executes": False, "ex": False, "ex_any_order": False, "exec_error": None}
    try:
        rows = run_sqlite(db, sql)
    except ExecError as exc:
        return {
            "executes": False,
            "ex": False,
            "ex_any_order": False,
            "exec_error": str(exc)[:300],
        }
    ordered = gold_is_ordered(q.gold)
    ok = results_match(gold_rows, rows, ordered=ordered)
    perm = ok or results_match(gold_rows, rows, ordered=ordered, any_column_order=True)
    return {
        "executes": True,
        "ex": ok,
        "ex_any_order": perm,
        "exec_error": None,
        "n_rows": len(rows),
    }


def run_unconstrained(
    backend: Backend, asker: Asker, q: Question, max_tokens: int
) -> dict[str, Any]:
    """Greedy, no mask, same prompt: stop at ``;``, an end-of-generation token, or the budget."""
    import numpy as np

    t0 = time.perf_counter()
    prompt = backend.chat_prompt(asker.messages(q.question))
    logits = backend.prefill(prompt)
    vocab = backend.vocab
    stops = set(vocab.special_ids) | {vocab.eos_token_id}
    toks: list[int] = []
    stop = "truncated"
    while len(toks) < max_tokens:
        tok = int(np.argmax(logits))
        if tok in stops:
            stop = "eos"
            break
        toks.append(tok)
        text = vocab.spell(toks).decode("utf-8", errors="replace")
        if ";" in extract_sql(text):
            stop = "semicolon"
            break
        logits = backend.step([tok])
    seconds = time.perf_counter() - t0
    raw = vocab.spell(toks).decode("utf-8", errors="replace")
    return {
        "sql": extract_sql(raw),
        "raw": raw,
        "tokens": len(toks),
        "seconds": seconds,
        "stop_reason": stop,
        "truncated": stop == "truncated",
        "refused": False,
    }


def run_constrained(
    asker: Asker, q: Question, max_tokens: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One ``generate_sql(repair=True)`` call → (repair-disabled arm, repair arm)."""
    from grid_sql.decode.records import StepKind
    from grid_sql.errors import GridSQLError, PolicyViolation, StatementError

    rounds: list[dict[str, Any]] = [{"tokens": 0, "reserve": False}]
    t0 = time.perf_counter()

    def on_step(rec: Any) -> None:
        cur = rounds[-1]
        if rec.kind == StepKind.EOS:
            cur["seconds"] = time.perf_counter() - t0
            rounds.append({"tokens": 0, "reserve": False})
            return
        cur["tokens"] += 1
        cur["reserve"] = cur["reserve"] or rec.kind == StepKind.RESERVE

    sql: str | None
    error: str | None = None
    trace: str | None = None
    failed_round: int | None = None
    failed_sql: str | None = None  # the statement an engine error (e.g. the checker) failed on
    repairs: list[Any] = []
    checker_refused = False
    final_kinds: list[str] = []
    try:
        gen = asker.generate_sql(q.question, max_tokens=max_tokens, repair=True, on_step=on_step)
        sql, repairs = gen.sql, list(gen.repairs)
    except (GridSQLError, RecursionError) as exc:  # RecursionError: sqlglot in the checker
        sql, error = None, f"{type(exc).__name__}: {exc}"[:600]
        repairs = list(getattr(exc, "repairs", []))
        checker_refused = isinstance(exc, PolicyViolation | StatementError)
        if not checker_refused:  # an engine error: where it happened, and the lost history
            trace = engine_trace(exc)
            failed_round, history, failed_sql = _failed_round(exc)
            repairs = repairs or history
        final_kinds = sorted({str(getattr(v, "kind", "")) for v in getattr(exc, "violations", [])})
    total = time.perf_counter() - t0
    done = [r for r in rounds if "seconds" in r]
    if not done:  # the model failed before any round finished
        first = {"tokens": rounds[0]["tokens"], "seconds": total, "reserve": False}
    else:
        first = done[0]
    # A round 1 exists only when round 0 was refused. An engine error raises without the
    # repair history; _failed_round reads it (and the failing round) from generate_sql's frame,
    # else tokens generated after round 0's EOS say that round 1 had started. An engine error
    # with round 0 finished and no round 1 (e.g. the checker crashing on round 0's statement)
    # is round 0's own error, not a refusal.
    if failed_round is None:
        failed_round = 1 if len(done) > 1 or (done and rounds[1]["tokens"] > 0) else 0
    r0_refused = (bool(repairs) and repairs[0].round == 0) or (
        bool(done) and error is not None and not checker_refused and failed_round >= 1
    )
    # an engine error after round 0 finished carries no repair history: its SQL is lost
    r0_sql = repairs[0].sql if r0_refused and repairs else (sql if not r0_refused else None)
    kinds: list[str] = []
    if r0_refused and r0_sql:
        try:  # the round-0 verdict's rule kinds (Repair keeps only the messages)
            kinds = sorted({v.kind for v in asker.checker.check(r0_sql)})
        except (GridSQLError, RecursionError):
            kinds = []
    b = {
        "sql": None if r0_refused or (error and not done) else r0_sql,
        "violation_kinds": kinds,
        "generated_sql": r0_sql
        if r0_sql is not None
        else (failed_sql if failed_round == 0 else None),
        "tokens": first["tokens"],
        "seconds": first["seconds"],
        "truncated": first["reserve"],
        "refused": r0_refused,
        "violations": list(repairs[0].violations) if r0_refused and repairs else [],
        "error": error if not r0_refused else None,
        "traceback": trace if not r0_refused else None,
    }
    c = {
        "sql": sql,
        "generated_sql": sql
        if sql is not None
        else (failed_sql or (repairs[-1].sql if repairs else None)),
        "tokens": sum(r["tokens"] for r in done) or first["tokens"],
        "seconds": total,
        "truncated": any(r["reserve"] for r in done),
        "refused": checker_refused,
        "violation_kinds": final_kinds,
        "repaired": r0_refused,
        "error": error,
        "traceback": trace,
    }
    return b, c


def run_autofix_repair(
    asker: Asker, q: Question, first: dict[str, Any], max_tokens: int, *, partial: bool
) -> dict[str, Any]:
    """An autofix arm for ``q`` from its recorded ``scope`` first round (``first``).

    Not refused there: the same statement. Refused: autofix on it (as the Asker does); when
    every violation has a certain fix that is the answer, with no model call; otherwise one
    repair round (``Asker.repair_messages`` on the statement, or with ``partial`` on the
    partly fixed one, generated under the Asker's guide), whose statement gets autofix again
    like any round. Tokens and seconds add the recorded first round's.
    """
    from grid_sql.ask.execute import bind_parameters
    from grid_sql.policy.autofix import autofix

    base: dict[str, Any] = {
        "first_commit": first.get("commit"),
        "generated_sql": first.get("generated_sql"),
        "tokens": first["tokens"],
        "seconds": first["seconds"],
        "truncated": bool(first["truncated"]),
        "error": None,
        "autofix": None,
        "repaired": False,
    }
    sql0 = first.get("generated_sql")
    if not first.get("refused") or not sql0:
        return {
            **base,
            "sql": first["sql"],
            "refused": bool(first.get("refused")),
            "error": first.get("error"),
        }
    mode = asker._mode(False)

    def fixed_or_none(sql: str) -> tuple[str | None, list[Any], Any]:
        found = mode.checker.check(sql)
        if not found and not bind_parameters(sql, asker.dialect):
            return sql, [], None
        if not found:
            return None, [], None
        af = autofix(sql, mode.checker, mode.grammar, found, partial=False)
        if af.complete and af.fixed is not None:
            return af.fixed, [], af
        return None, found, af

    done, found, af = fixed_or_none(sql0)
    if done is not None:
        return {
            **base,
            "sql": done,
            "refused": False,
            "autofix": {"round": 0, "edits": [e.to_dict() for e in af.edits]},
        }
    start = sql0
    if partial and found:
        part = autofix(sql0, mode.checker, mode.grammar, found, partial=True)
        if part.fixed is not None:
            start = part.fixed
            base["autofix"] = {
                "round": 0,
                "partial": True,
                "edits": [e.to_dict() for e in part.edits],
            }
    msgs = asker.repair_messages(q.question, start)
    gen = asker._generate(msgs, max_tokens, mode)
    base["tokens"] += gen.n_tokens
    base["seconds"] += gen.seconds
    base["repaired"] = True
    base["repair_sql"] = gen.sql
    done, found, af = fixed_or_none(gen.sql)
    if af is not None and done is not None:
        base["autofix"] = {"round": 1, "edits": [e.to_dict() for e in af.edits]}
    return {
        **base,
        "sql": done,
        "refused": done is None,
        "violation_kinds": sorted({v.kind for v in found}),
    }


def engine_trace(exc: BaseException) -> str:
    """The grid_sql frames of an engine error's stack, its innermost frame and the error
    (the report quotes it; sqlglot's hundreds of recursive frames are left out)."""
    frames = traceback.extract_tb(exc.__traceback__)
    keep = [f for f in frames if "/grid_sql/" in f.filename]
    if frames and (not keep or keep[-1] is not frames[-1]):
        keep.append(frames[-1])
    body = "".join(traceback.format_list(keep))
    return (body + "".join(traceback.format_exception_only(exc)))[-4000:]


def _failed_round(exc: BaseException) -> tuple[int | None, list[Any], str | None]:
    """(round, repair history, that round's statement if it was generated) from the
    ``generate_sql`` frame an engine error unwound."""
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame
        if f.f_code.co_name == "generate_sql" and isinstance(f.f_locals.get("rnd"), int):
            loc = f.f_locals
            gen_sql = getattr(loc.get("gen"), "sql", None)
            return int(loc["rnd"]), list(loc.get("repairs") or []), gen_sql
        tb = tb.tb_next
    return None, [], None


def scope_option_name() -> str | None:
    """The Asker keyword for the scope-aware masks, if this grid_sql's Asker has one."""
    from grid_sql.ask.asker import Asker

    params = inspect.signature(Asker.__init__).parameters
    return next((o for o in SCOPE_OPTIONS if o in params), None)


def make_asker(
    db: Path,
    backend: Backend,
    max_tokens: int,
    *,
    scopes: bool,
    autofix: bool = False,
    bind: bool = False,
    example_values: int = 0,
) -> Asker:
    """The arm's Asker: audit off, repair available, scope-aware masks ``scopes`` (with
    select-list obligations when ``bind``).

    Through the Asker's own option when it has one; otherwise the role grammar is swapped for
    ``grammar.with_scopes(role_scopes(snapshot))`` (or ``with_scopes(None)``), the public
    switch the scope rule ships with (``grid_sql/policy/scopes.py``), so the ``constrained``
    arm is scope-free and the ``scope`` arm scoped whatever the Asker's default is.
    """
    from grid_sql.ask.asker import Asker

    opt = scope_option_name()
    if opt is not None:
        kw: dict[str, Any] = {opt: scopes}
        # the arms measure the model's repair round: the Asker's deterministic autofix (on by
        # default since it exists) is off here; bench/autofix_offline.py measures it
        params = inspect.signature(Asker.__init__).parameters
        if "autofix" in params:
            kw["autofix"] = autofix
        if "bind_select_list" in params:
            kw["bind_select_list"] = bind
        elif bind:
            raise SystemExit("the bind arms need Asker(bind_select_list=...)")
        if example_values:
            kw["example_values"] = example_values
        return Asker(db, model=backend, audit=False, max_tokens=max_tokens, **kw)
    try:
        from grid_sql.policy.scopes import role_scopes
    except ImportError:
        if scopes:
            raise SystemExit("the scope arms need grid_sql.policy.scopes") from None
        return Asker(db, model=backend, audit=False, max_tokens=max_tokens)
    cls = _arm_asker_class()
    make = role_scopes if scopes else None
    asker: Asker = cls(db, model=backend, audit=False, max_tokens=max_tokens, bench_scopes=make)
    return asker


def _arm_asker_class() -> Any:
    import dataclasses

    from grid_sql.ask.asker import Asker

    class ArmAsker(Asker):
        """An Asker whose generation grammar has the scope table the arm asks for."""

        def __init__(self, *a: Any, bench_scopes: Any = None, **kw: Any) -> None:
            self._bench_scopes = bench_scopes
            super().__init__(*a, **kw)

        def _mode(self, writes: bool) -> Any:
            with self._lock:
                mode = super()._mode(writes)
                make = self._bench_scopes
                want = None if make is None else make(self.snapshot)
                have = mode.grammar.scopes
                same = (have is None and want is None) or (
                    have is not None and want is not None and have.fingerprint == want.fingerprint
                )
                if not same:
                    mode = dataclasses.replace(mode, grammar=mode.grammar.with_scopes(want))
                    self._modes[writes] = mode
                return mode

    return ArmAsker


def evaluate(
    questions: Sequence[Question],
    *,
    model: str,
    out: Path,
    max_tokens: int = 256,
    arms: Sequence[str] = DEFAULT_ARMS,
    spider_dir: Path = SPIDER_DIR,
    log: Any = None,
    label: str | None = None,
    first_round: Path | None = None,
    example_values: int = 0,
) -> int:
    """Run the missing (question, arm) pairs; returns how many records were written.

    ``first_round``: the file whose ``scope`` records the autofix arms start from (default
    ``out``). ``example_values``: the Asker's option of that name (example values of short
    text columns in the prompt; recorded in every record, the unconstrained arm included,
    which uses the same prompt).

    ``model`` is what :func:`load_backend` resolves (registry name or GGUF path); ``label``
    names it in the records (default ``model``).
    """
    from grid_sql.ask.asker import load_backend

    name = label or model
    have = done_keys(read_jsonl(out), name)
    firsts = {
        r["qid"]: r
        for r in read_jsonl(first_round or out)
        if r.get("model") == name and r["arm"] == "scope"
    }
    todo = [q for q in questions if any((q.qid, a) not in have for a in arms)]
    if not todo:
        return 0
    if any(a.startswith("scope") for a in arms) and scope_option_name() is None:
        try:  # fail before the model loads
            from grid_sql.policy.scopes import role_scopes  # noqa: F401
        except ImportError:
            raise SystemExit("the scope arms need grid_sql.policy.scopes") from None
    scoped = {first: mode for first, _final, mode in ARM_PAIRS}
    commit = git_commit()
    backend = load_backend(model)
    askers: dict[tuple[str, str], Asker] = {}
    written = 0
    for i, q in enumerate(todo, 1):
        db = q.db_path(spider_dir)

        def asker_for(first: str, q: Question = q, db: Path = db) -> Asker:
            key = (str(db), first)
            a = askers.get(key)
            if a is None:
                mode = scoped[first]
                a = askers[key] = make_asker(
                    db,
                    backend,
                    max_tokens,
                    scopes=bool(mode),
                    bind=mode == "bind",
                    example_values=example_values,
                )
            return a

        for arm in (a for a in AUTOFIX_ARMS if a in arms and (q.qid, a) not in have):
            first_rec = firsts.get(q.qid)
            if first_rec is None:
                if log is not None:
                    print(f"q{q.qid}: no scope record to start from; {arm} skipped", file=log)
                continue
            r = run_autofix_repair(
                asker_for("scope"), q, first_rec, max_tokens, partial=arm.startswith("partial")
            )
            gold = run_sqlite(db, q.gold)
            rec = _record(q, arm, name, **r, **_score(q, db, r["sql"], gold))
            rec.update(question=q.question, gold=q.gold, commit=commit)
            append_jsonl(out, [rec])
            written += 1
            if log is not None:
                mark = "EX" if rec["ex"] else ("ok" if rec["executes"] else "--")
                print(f"[{i}/{len(todo)}] q{q.qid} {q.db_id}: {arm}:{mark}", file=log, flush=True)
        if not any(a in ARMS for a in arms):
            continue

        gold_rows = run_sqlite(db, q.gold)
        recs: list[dict[str, Any]] = []
        if "unconstrained" in arms and (q.qid, "unconstrained") not in have:
            a = run_unconstrained(backend, asker_for("constrained"), q, max_tokens)
            recs.append(
                _record(q, "unconstrained", name, **a, **_score(q, db, a["sql"], gold_rows))
            )
        for first, final, _on in ARM_PAIRS:
            want = [a for a in (first, final) if a in arms and (q.qid, a) not in have]
            if not want:
                continue
            b, c = run_constrained(asker_for(first), q, max_tokens)
            for arm, r in ((first, b), (final, c)):
                if arm in want:
                    recs.append(_record(q, arm, name, **r, **_score(q, db, r["sql"], gold_rows)))
        for r in recs:
            r["question"] = q.question
            r["gold"] = q.gold
            r["commit"] = commit
            if example_values:
                r["example_values"] = example_values
        append_jsonl(out, recs)
        written += len(recs)
        if log is not None:
            marks = " ".join(
                f"{r['arm']}:{'EX' if r['ex'] else ('ok' if r['executes'] else '--')}" for r in recs
            )
            print(f"[{i}/{len(todo)}] q{q.qid} {q.db_id}: {marks}", file=log, flush=True)
    return written


# --------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("spider", "chinook"), default="spider")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="registry name or GGUF path")
    ap.add_argument("--label", default=None, help="the model's name in the records")
    ap.add_argument("--n", type=int, default=30, help="0: every question of the suite")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--ids", type=int, nargs="*", help="dev.json indices (overrides --n)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--arms", nargs="*", default=list(DEFAULT_ARMS), choices=ARMS + AUTOFIX_ARMS)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--spider-dir", type=Path, default=SPIDER_DIR)
    ap.add_argument("--report", action="store_true", help="render the table from --out")
    ap.add_argument(
        "--example-values",
        type=int,
        default=0,
        help="Asker(example_values=K): K example values per short text column in the prompt",
    )
    ap.add_argument(
        "--rescore",
        type=Path,
        nargs="+",
        default=None,
        help="add `ex_any_order` to these record files' records that lack it, then exit",
    )
    ap.add_argument(
        "--first-round",
        type=Path,
        default=None,
        help="the autofix arms start from this file's scope records (default --out)",
    )
    ap.add_argument(
        "--refusal-places",
        action="store_true",
        help="with --report: where the refused unknown columns sit (SELECT list / after FROM)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="with --report: pair --out's records with this file's (same model label, same "
        "questions), e.g. an earlier run at another commit; its arms are renamed ARM@LABEL",
    )
    ap.add_argument("--baseline-label", default="old", help="suffix for the --baseline file's arms")
    ap.add_argument(
        "--baseline-arms",
        nargs="*",
        choices=ARMS,
        default=None,
        help="the --baseline file's arms to include (default: all)",
    )
    args = ap.parse_args(argv)
    name = args.label or args.model
    out = args.out or Path(f"bench/results/{args.suite}-{name}.jsonl")
    report_arms = args.arms if "--arms" in (argv if argv is not None else sys.argv) else None
    if args.rescore:
        for path in args.rescore:
            files = record_files(path)
            if len(files) != 1:
                raise SystemExit(f"{path}: rescore needs exactly one record file, found {files}")
            recs = read_jsonl(files[0])
            k = rescore(recs, args.spider_dir)
            write_jsonl(files[0], recs)
            sys.stdout.write(f"{path}: {k} of {len(recs)} records rescored\n")
        return 0
    if args.report:
        recs = [r for r in read_jsonl(out) if r.get("model") == name]
        if args.baseline is not None:
            base = with_arm_label(
                [r for r in read_jsonl(args.baseline) if r.get("model") == name],
                args.baseline_label,
                args.baseline_arms,
            )
            if report_arms is None:
                report_arms = [a for a in ARMS if any(r["arm"] == a for r in recs)]
            report_arms = list(report_arms) + sorted(
                {r["arm"] for r in base}, key=lambda a: ARMS.index(a.rsplit("@", 1)[0])
            )
            recs += base
        sys.stdout.write(report(recs, name, report_arms))
        if args.refusal_places:
            for arm in ARMS if report_arms is None else report_arms:
                places = refusal_places(recs, arm, args.spider_dir)
                if places:
                    sys.stdout.write(f"\nRefusals of {arm} by column place: {dict(places)}\n")
        return 0
    n = None if args.n == 0 else args.n
    if args.suite == "chinook":
        pool = load_chinook_questions()
        qs = select_questions(pool, n=None, seed=0, ids=args.ids) if args.ids else pool[:n]
    else:
        qs = select_questions(load_questions(args.spider_dir), n=n, seed=args.seed, ids=args.ids)
    evaluate(
        qs,
        model=args.model,
        out=out,
        max_tokens=args.max_tokens,
        arms=args.arms,
        spider_dir=args.spider_dir,
        log=sys.stderr,
        label=args.label,
        first_round=args.first_round,
        example_values=args.example_values,
    )
    sys.stdout.write(report(read_jsonl(out), name, report_arms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
