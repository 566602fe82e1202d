"""defog sql-eval (``bench/defog.py``): answers asked again with the checkout's code.

Split out of ``defog.py`` (each run appends its own arm to the same records, which
``defog.py --report`` reads): ``--rerun-refused`` (the constrained answers the database
refused), ``--again`` (the big-catalog arm with its own-database pair, at one commit) and
``--rerun-big`` (the answers ``--again`` saw fail, once more after later changes) and
``--whole`` (all the questions asked again on their own databases at one commit).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from defog import (
    DATA,
    DISTRACTORS,
    ROLE,
    _commit,
    _conninfo,
    admin_url,
    ensure_role,
    load_questions,
    open_records,
    out_path,
    read_records,
    reader_url,
    run_asker,
    run_free,
    stratified,
    write_record,
)

__all__ = [
    "ask_again",
    "ask_whole",
    "bind_reach_qids",
    "carry_over",
    "led_alias_qids",
    "rerun_big",
    "rerun_refused",
]


def led_alias_qids(records: dict[int, dict[str, Any]]) -> list[int]:
    """The questions whose answer in ``records`` (one arm) refusing keyword-led aliases
    (docs/scope.md) can change: it went through a repair or autofix round (the records
    keep only the last round's statement), or a table alias written without ``AS`` begins
    with a reserved keyword. The others are unchanged by construction: greedy decoding
    picks the same token wherever the mask still admits it, and the rule only removes
    tokens that begin such an alias."""
    import re

    from grid_sql.grammar.ir import RESERVED_WORDS

    kw = "|".join(sorted(RESERVED_WORDS, key=len, reverse=True))
    led = re.compile(rf"(?:FROM|JOIN|,)\s+[\w.\"]+\s+(?!AS\b)((?:{kw})\w+)", re.I)
    out = []
    for q, r in sorted(records.items()):
        text = f"{r.get('sql') or ''} {r.get('error') or ''}"
        words = [m.group(1) for m in led.finditer(text)]
        if r.get("repairs") or any(w.upper() not in RESERVED_WORDS for w in words):
            out.append(q)
    return out


def bind_reach_qids(records: dict[int, dict[str, Any]], grammar_of: Any) -> list[int]:
    """The questions whose answer in ``records`` (one arm) a change to what bind on close
    writes (``grid_sql/decode/bind.py``) can change: a repair or autofix round, no
    statement, or a statement the role grammar (``grammar_of(db)``) refuses, or one with a
    prefix at which a select-list obligation blocks closing the FROM clause. Bind on close
    acts only at such a prefix (it writes where the model's first choice would close
    there), so greedy decoding of any other statement picks the same tokens."""
    from grid_sql.parser import ParserRuntime
    from grid_sql.parser.incremental import Configuration

    out = []
    for q, r in sorted(records.items()):
        sql = (r.get("sql") or "").encode()
        if r.get("repairs") or not sql:
            out.append(q)
            continue
        rt = ParserRuntime.for_grammar(grammar_of(r["db"]))
        cfg: Configuration | None = rt.initial
        for i in range(len(sql) + 1):
            node = None if cfg is None else rt.finalize(cfg)
            if cfg is None or (node is not None and rt.blocked_closers(node)):
                out.append(q)
                break
            if i < len(sql):
                cfg = rt.advance(cfg, sql[i : i + 1])
    return out


# What a partial pass (``--whole --over B --reach led_alias|bind``) asks again: the answers
# of ``B`` the change can reach; each pass's records list them (``reach``, with the rule in
# ``rule``), so the report needs no database. Records without the list are ``led_alias``
# passes (they came first).


def carry_over(by: dict[str, dict[int, dict[str, Any]]]) -> None:
    """Complete each partial pass (``--whole --over B``) with the answers of ``B`` it did
    not ask again (in place; those keep their own commit, so the report's commit lists
    show the mix). A pass that has not yet asked every question it reaches is left out;
    a pass over a partial pass is completed after it."""

    def complete(arm: str, seen: frozenset[str] = frozenset()) -> None:
        rs = by.get(arm)
        base = next((r["over"] for r in (rs or {}).values() if r.get("over")), None)
        if rs is None or not base or arm in seen or any(r.get("carried") for r in rs.values()):
            return
        complete(base, seen | {arm})
        if base not in by:  # its base is unfinished
            del by[arm]
            return
        listed = next((r["reach"] for r in rs.values() if "reach" in r), None)
        reach = set(led_alias_qids(by[base]) if listed is None else listed)
        if reach <= set(rs):
            for q, r in by[base].items():
                rs.setdefault(q, {**r, "carried": True})
        else:  # not every question asked yet: no pass to report (the run resumes)
            del by[arm]

    for arm in list(by):
        complete(arm)


def rerun_refused(model: str, max_tokens: int, until: float) -> None:
    """The constrained answers the database refused (``ExecutionError``), asked again with
    the checkout's code: arm ``rerun``, with the commit of the first answer. Shows what a
    change to the execution-repair path (``grid_sql/ask/typefix.py``) does to exactly those
    questions; the headline keeps each question's first answer."""
    from grid_sql.ask.asker import Asker, load_backend

    path = out_path(model)
    open_records(path)
    recs = read_records(path)
    done = {r["qid"] for r in recs if r["arm"] == "rerun"}
    first = {r["qid"]: r for r in recs if r["arm"] == "constrained"}
    todo = [r for q, r in sorted(first.items()) if r.get("error_type") == "ExecutionError"]
    qs = {q.qid: q for q in load_questions()}
    backend = load_backend(model)
    commit = _commit()
    for r in todo:
        if r["qid"] in done:
            continue
        if time.time() > until:
            return
        q = qs[r["qid"]]
        asker = Asker(
            reader_url(q.db), model=backend, audit=False, max_tokens=max_tokens, date_help=True
        )
        write_record(
            path, q, "rerun", model, commit, {"first_commit": r["commit"], **run_asker(asker, q)}
        )


def ask_again(
    model: str, max_tokens: int, until: float, tag: str = "", own: bool = True, shard: str = "0/1"
) -> None:
    """The big-catalog arm's questions asked again with the checkout's code, together with
    their own-database pair: arms ``big_again`` and ``constrained_again``, one question at a
    time (big, then own), so each pair comes from one commit. Shows what a change does to
    the big arm (issue #25 §2: table names by schema) without overwriting the first answers,
    which stay in the headline; resumable like the run. ``tag``: a later pass at another
    commit (arms ``big_again<tag>`` ...); ``own=False`` asks the big catalog only (its pairs
    are then the untagged own-database answers, at their own commit). Questions go in the
    run's stratified order, so a pass cut short is still a sample of every category;
    ``shard`` ``K/N`` asks every N-th of them from the K-th (two processes on two cores)."""
    from defog_big import BIG, ensure_big

    from grid_sql.ask.asker import Asker, load_backend

    path = out_path(model)
    open_records(path)
    recs = read_records(path)
    done = {(r["qid"], r["arm"]) for r in recs}
    asked = {r["qid"] for r in recs if r["arm"] == "big"}
    k, n = (int(x) for x in shard.split("/"))
    todo = [q.qid for q in stratified(load_questions(), None) if q.qid in asked][k::n]
    qs = {q.qid: q for q in load_questions()}
    ensure_role(sorted({q.db for q in qs.values()}))
    ensure_big(
        lambda d: _conninfo(admin_url(), d),
        DATA,
        sorted({q.db for q in qs.values()}),
        DISTRACTORS,
        ROLE,
    )
    backend = load_backend(model)
    commit = _commit()
    backend = load_backend(model)
    askers: dict[str, Any] = {}

    def asker_for(db: str) -> Any:
        if db not in askers:
            askers[db] = Asker(
                reader_url(db), model=backend, audit=False, max_tokens=max_tokens, date_help=True
            )
        return askers[db]

    for qid in todo:
        q = qs[qid]
        arms = [("big_again" + tag, BIG)] + ([("constrained_again" + tag, q.db)] if own else [])
        for arm, db in arms:
            if (qid, arm) in done:
                continue
            if time.time() > until:
                print("time is up: stopping (the run resumes from here)", file=sys.stderr)
                return
            answer = run_asker(asker_for(db), q, where=BIG if db == BIG else None)
            write_record(path, q, arm, model, commit, answer)


def rerun_big(model: str, max_tokens: int, until: float) -> None:
    """The big-catalog answers asked again (``big_again``) that did not execute, asked once
    more on the big catalog with the checkout's code: arm ``big_rerun``. Shows what the
    changes after that run do to exactly those questions; the tables keep the answers of
    ``--again``."""
    from defog_big import BIG

    from grid_sql.ask.asker import Asker, load_backend

    path = out_path(model)
    open_records(path)
    recs = read_records(path)
    done = {r["qid"] for r in recs if r["arm"] == "big_rerun"}
    todo = sorted({r["qid"] for r in recs if r["arm"] == "big_again" and not r["executes"]})
    qs = {q.qid: q for q in load_questions()}
    backend = load_backend(model)
    commit = _commit()
    asker = None
    for qid in todo:
        if qid in done:
            continue
        if time.time() > until:
            return
        if asker is None:
            asker = Asker(
                reader_url(BIG), model=backend, audit=False, max_tokens=max_tokens, date_help=True
            )
        q = qs[qid]
        write_record(path, q, "big_rerun", model, commit, run_asker(asker, q, where=BIG))


def ask_whole(until: float, opts: Any) -> None:
    """Every question asked again on its own database with the checkout's code: arm
    ``whole<tag>`` (``free``: the unconstrained arm ``whole_free<tag>``); ``opts`` are
    ``defog.py``'s options (``model``, ``max_tokens``, ``tag``, ``free``, ``shard``, ``big``,
    ``over``, ``reach``, ``also``). The headline's
    answers come from several commits (the run went on across sessions); a whole pass gives
    the constrained arm's figures at one commit, and two passes paired show what the changes
    between them did. ``shard`` ``K/N`` asks every N-th question from the K-th (two
    processes on two cores); the records say the commit, so a pass split over commits shows.
    ``big``: every question on the big catalog instead (arm ``bigwhole<tag>``), to pair with
    ``whole<tag>`` asked at the same commit (issue #25 §5: the big arm on all questions).
    ``over`` ``B``: a partial pass, only the questions of arm ``whole<B>`` (``bigwhole<B>``)
    that the change can reach (``reach``: :func:`led_alias_qids`, :func:`bind_reach_qids`),
    and those of ``also`` (``Q,Q,...``: the questions whose prompt changed since their answer
    in ``B``, by ``bench/defog_prompts.py`` in both checkouts); the report carries the
    others over (:func:`carry_over`)."""
    model, max_tokens, tag, free, big = opts.model, opts.max_tokens, opts.tag, opts.free, opts.big
    shard, over, reach = opts.shard, opts.over, opts.reach
    from defog_big import BIG, ensure_big

    from grid_sql.ask.asker import Asker, load_backend

    k, n = (int(x) for x in shard.split("/"))
    path = out_path(model)
    open_records(path)
    arm = ("bigwhole" if big else "whole_free" if free else "whole") + tag
    done = {r["qid"] for r in read_records(path) if r["arm"] == arm}
    questions = stratified(load_questions(), None)[k::n]
    base = ("bigwhole" if big else "whole") + over
    dbs = sorted({q.db for q in load_questions()})
    ensure_role(dbs)
    if big:
        ensure_big(lambda d: _conninfo(admin_url(), d), DATA, dbs, DISTRACTORS, ROLE)
    backend = load_backend(model)
    askers: dict[str, Any] = {}

    def asker_for(db: str) -> Any:
        if db not in askers:
            askers[db] = Asker(
                reader_url(db), model=backend, audit=False, max_tokens=max_tokens, date_help=True
            )
        return askers[db]

    reached: list[int] = []
    if over:
        by: dict[str, dict[int, dict[str, Any]]] = {}
        for r in read_records(path):
            by.setdefault(r["arm"], {})[r["qid"]] = r
        carry_over(by)  # a base that is itself partial, completed
        if base not in by:
            raise SystemExit(f"--over {over}: {base} is not a finished pass")
        if reach == "bind":
            reached = bind_reach_qids(by[base], lambda d: asker_for(BIG if big else d).grammar)
        else:
            reached = led_alias_qids(by[base])
        reached = sorted(set(reached) | {int(x) for x in opts.also.split(",") if x})
        questions = [q for q in questions if q.qid in set(reached)]
        print(f"{len(reached)} answers of {base} reached ({reach})", file=sys.stderr)
    commit = _commit()
    for q in questions:
        if q.qid in done:
            continue
        if time.time() > until:
            print("time is up: stopping (the run resumes from here)", file=sys.stderr)
            return
        asker = asker_for(BIG if big else q.db)
        if free:
            answer = run_free(backend, asker, q, max_tokens)
        else:
            answer = run_asker(asker, q, where=BIG if big else None)
        part = {"over": base, "reach": reached, "rule": reach} if over else {}
        write_record(path, q, arm, model, commit, {**answer, **part})


def whole_section(by: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """The ``--whole`` passes (every question on its own database at one commit each): per
    pass executes, EX and dead ends, paired EX against the unconstrained arm and against the
    previous pass, and the answers that did not execute (``defog.py --report``)."""
    from defog import _pct, paired_bootstrap

    tags = sorted(a[len("whole") :] for a in by if a.startswith("whole") and "free" not in a)
    out: list[str] = []
    notes: list[str] = []
    prev: str | None = None
    for tag in tags:
        arm = "whole" + tag
        rs = by[arm]
        if not rs:
            continue
        ids = sorted(rs)
        commits = sorted({r["commit"] for r in rs.values()})
        ex = sum(bool(rs[i]["executes"]) for i in ids)
        ok = sum(bool(rs[i]["correct"]) for i in ids)
        dead = sum(bool(rs[i].get("dead_end")) for i in ids)
        if not out:
            out += [
                "",
                "## All questions asked again at one commit (`--whole`)",
                "",
                "The headline's constrained answers come from several commits; each pass below "
                "asks every question on its own database with one checkout's code "
                "(`python bench/defog.py --whole --tag T`).",
                "",
                "| pass | commit(s) | n | executes [95% Wilson] | EX [95% Wilson] | dead ends |",
                "|---|---|---|---|---|---|",
            ]
        out.append(
            f"| {arm} | {', '.join(commits)} | {len(ids)} | {_pct(ex, len(ids))} "
            f"| {_pct(ok, len(ids))} | {dead} |"
        )
        pairs = [("unconstrained", by["unconstrained"])]
        if prev is not None:
            pairs.append((prev, by[prev]))
        for name, other in pairs:
            both = [i for i in ids if i in other]
            if not both:
                continue
            a = [bool(rs[i]["correct"]) for i in both]
            b = [bool(other[i]["correct"]) for i in both]
            lo, hi = paired_bootstrap(a, b)
            d = (sum(a) - sum(b)) / len(both)
            e = sum(bool(rs[i]["executes"]) for i in both) - sum(
                bool(other[i]["executes"]) for i in both
            )
            notes.append(
                f"{arm} − {name} on {len(both)} paired: EX {100 * d:+.1f} points "
                f"[{100 * lo:+.1f}, {100 * hi:+.1f}], executes {e:+d} answers"
            )
        prev = arm
    out += ["", *(f"- {n}" for n in notes), ""] if notes else []
    if prev is not None:
        last = by[prev]
        bad = [last[i] for i in sorted(last) if not last[i]["executes"]]
        out += [f"Not executed in {prev} ({len(bad)}):", ""]
        for r in bad:
            err = (r.get("error") or "")[:150].replace("\n", " ")
            out.append(f"- q{r['qid']} ({r['category']}): {r.get('error_type')}: {err}")
    return out


def _own_pair(by: dict[str, dict[int, dict[str, Any]]], arm: str) -> str:
    """The own-database pass paired with big pass ``arm``: ``whole<tag>``, else (a partial
    pass whose change cannot reach a one-schema catalog, ``--reach bind``) the pair of the
    pass it is partial over."""
    own = "whole" + arm[len("bigwhole") :]
    rs = by.get(arm, {})
    base = next((r["over"] for r in rs.values() if r.get("over")), None)
    reach_bind = any(r.get("rule") == "bind" for r in rs.values())
    if own in by or base is None or not reach_bind:
        return own
    return _own_pair(by, base)


def _rule(rs: dict[int, dict[str, Any]]) -> str:
    """The reach rule of a partial pass (records before the ``rule`` field: ``led_alias``)."""
    return next((r["rule"] for r in rs.values() if r.get("rule")), "led_alias")


def big_whole_section(by: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """The big catalog on every question (``--whole --big --tag T``) against the same
    questions on their own databases (``--whole --tag T``), each pair from one commit."""
    from defog import _pct, paired_bootstrap

    out: list[str] = []
    for arm in sorted(a for a in by if a.startswith("bigwhole") and by[a]):
        own_arm = _own_pair(by, arm)
        own = by.get(own_arm, {})
        both = sorted(i for i in by[arm] if i in own)
        if not both:
            continue
        pair = {"own database": own, "big catalog": by[arm]}
        carried = {n: sum(bool(rs[i].get("carried")) for i in both) for n, rs in pair.items()}
        commits = {name: sorted({rs[i]["commit"] for i in both}) for name, rs in pair.items()}
        out += [
            "",
            f"## Big catalog on every question: `{arm}` against `{own_arm}`",
            "",
            f"{len(both)} questions asked on `defog_big` (`--whole --big`) and on their own "
            "database (`--whole`), same options; commits: "
            + "; ".join(f"{name} {', '.join(c)}" for name, c in commits.items())
            + "."
            + "".join(
                f" {name}: {c} answers carried over from the pass this one is partial over "
                f"(`--over`: answers the change cannot reach, `--reach {_rule(pair[name])}`)."
                for name, c in carried.items()
                if c
            )
            + (
                ""
                if own_arm == "whole" + arm[len("bigwhole") :]
                else f" No own-database pass at this tag: `{own_arm}` is the pair of the pass "
                "this one is partial over (a `--reach bind` pass asks the own databases nothing)."
            ),
            "",
            "| catalog | executes [95% Wilson] | EX [95% Wilson] | dead ends |",
            "|---|---|---|---|",
        ]
        for name, rs in pair.items():
            ex = sum(bool(rs[i]["executes"]) for i in both)
            ok = sum(bool(rs[i]["correct"]) for i in both)
            dead = sum(bool(rs[i].get("dead_end")) for i in both)
            out.append(f"| {name} | {_pct(ex, len(both))} | {_pct(ok, len(both))} | {dead} |")
        a = [bool(by[arm][i]["correct"]) for i in both]
        b = [bool(own[i]["correct"]) for i in both]
        lo, hi = paired_bootstrap(a, b)
        d = (sum(a) - sum(b)) / len(both)
        only_big = sum(x and not y for x, y in zip(a, b, strict=True))
        only_own = sum(y and not x for x, y in zip(a, b, strict=True))
        out += [
            "",
            f"EX big − own: **{100 * d:+.1f} points** (95% paired bootstrap "
            f"[{100 * lo:+.1f}, {100 * hi:+.1f}]; {only_big} right only on the big catalog, "
            f"{only_own} only on the own database).",
        ]
    return out
