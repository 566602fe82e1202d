"""Serving benchmark on CPU (issue #7 §3, paper §8.5 protocol): the test server, a local model.

    nice -n 10 .venv/bin/python bench/serving.py [--model smollm2-135m] [--batches 1 8 32]
        [--max-tokens 32] [--cold-batch 8] [--out bench/results/serving-cpu.json]

What runs: :class:`grid_sql.serve.server.GridServer` in this process (one llama.cpp context,
continuous batching, one batch mask fill per round through the ``BatchMasker``), driven over
HTTP by the same streaming client a vLLM host uses (:mod:`bench/serving_vllm.py` imports this
module's protocol), so every latency below is what a client sees.

Guides: four distinct role grammars on the packaged Chinook (four application policies:
different table sets, so four content fingerprints), plus a fifth, never-seen one for the
cold arm. Requests: a short fixed prompt per question (the protocol measures decoding, not a
long prefill), greedy, ``max_tokens`` fixed, request ``i`` uses guide ``i % 4``.

Protocol (warm-through):

1. warm-up: every request of the largest batch is run once with its guide (compiles the four
   guides, warms their mask caches on exactly the configurations the measured legs reach);
2. for each batch size B: B concurrent requests, arm ``unconstrained`` (no ``vllm_xargs``)
   then arm ``grid`` (the four guides), ``--legs`` times each; per request TTFT (arrival of
   the first streamed chunk) and TPOT ((last - first chunk) / (chunks - 1)); per arm the
   median TPOT over requests and legs, the aggregate output tokens/s, and the overhead
   ``grid / unconstrained - 1`` of the median TPOT;
3. cold-guide injection: ``--cold-batch`` warm grid requests (``2 * max_tokens`` budget)
   start; once each has streamed 4 chunks a request with the never-seen guide joins. Over the
   fresh request's cold window (injection to its first chunk) the co-tenants' worst
   inter-chunk gap and their TPOT degradation against a baseline leg (same co-tenants, no
   injection) are reported, with the fresh request's TTFT and the rounds it was deferred.

Output: a JSON document (``--out``) and a Markdown table on stdout (RESULTS-serving.md holds
the committed run with its host, load and command). Engine-side round times (the test
server's, not visible on vLLM) are added as ``engine_max_step_ms``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from grid_sql.serve.client import ServerClient  # noqa: E402

QUESTIONS = [
    "How many rows are there in the first table?",
    "List every name.",
    "What is the largest id?",
    "Show ten rows ordered by id.",
    "Count the rows per id.",
    "Which ids appear more than once?",
    "Show the first five rows.",
    "What is the smallest id?",
]

#: four warm guides and the cold one: application policies on Chinook
POLICIES: list[dict[str, Any]] = [
    {"verbs": ["select"]},
    {"verbs": ["select"], "tables": {"deny": ["Employee", "Customer"]}},
    {"verbs": ["select"], "tables": {"allow": ["Album", "Artist", "Track"]}},
    {"verbs": ["select"], "tables": {"allow": ["Invoice", "InvoiceLine", "Customer"]}},
]
COLD_POLICY: dict[str, Any] = {"verbs": ["select"], "tables": {"allow": ["Genre", "MediaType"]}}
#: never-seen guides for the cold-mask A/B (``--cold-ab``): one per injected leg
COLD_AB_POLICIES: list[dict[str, Any]] = [
    {"verbs": ["select"], "tables": {"allow": t}}
    for t in (
        ["Genre", "Track"],
        ["Playlist", "PlaylistTrack"],
        ["MediaType", "Track"],
        ["Employee", "Customer"],
        ["Genre", "MediaType", "Album"],
        ["Playlist", "Track"],
        ["Employee", "Invoice"],
        ["Artist", "Genre"],
    )
]


# ----------------------------------------------------------------------------- protocol


@dataclass
class Guide:
    """One guide as the client sends it: its request fields and the tables it names."""

    name: str
    fields: dict[str, Any]
    tables: list[str]


@dataclass
class Sample:
    """One streamed request as the client saw it (perf_counter seconds)."""

    guide: str
    t_start: float
    chunk_times: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: str = ""
    extension: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.t_start if self.chunk_times else None

    @property
    def tpot(self) -> float | None:
        c = self.chunk_times
        return (c[-1] - c[0]) / (len(c) - 1) if len(c) > 1 else None

    def gaps(self, lo: float = float("-inf"), hi: float = float("inf")) -> list[float]:
        c = self.chunk_times
        return [b - a for a, b in zip(c, c[1:], strict=False) if lo <= b and a <= hi]


def chinook_guides(policies: Sequence[dict[str, Any]], vocabulary: str) -> list[Guide]:
    """Guides for ``policies`` on the packaged Chinook (client-side: spec in vllm_xargs)."""
    from grid_sql.data import chinook_path
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.schema import introspect
    from grid_sql.serve.client import processor_args

    engine = open_sqlite(chinook_path())
    snap = introspect(engine)
    out = []
    for i, p in enumerate(policies):
        pol = narrow(sqlite_baseline(snap), AppPolicy.from_mapping(p, origin=f"bench {i}"), snap)
        xargs, fp = processor_args(snap, pol, vocabulary)
        tables = [t.name for t in pol.tables if t.any_right]
        out.append(Guide(f"g{i}:{(fp or '')[:8]}", {"vllm_xargs": xargs}, tables))
    engine.dispose()
    return out


def messages(guide: Guide | None, question: str, dialect: str = "SQLite") -> list[dict[str, str]]:
    tables = ", ".join(guide.tables) if guide is not None else "the Chinook tables"
    return [
        {
            "role": "system",
            "content": f"Write one {dialect} SELECT statement answering the question. "
            f"Tables: {tables}. Output only the SQL.",
        },
        {"role": "user", "content": question},
    ]


def stream_one(
    client: ServerClient,
    msgs: list[dict[str, str]],
    extra: dict[str, Any],
    max_tokens: int,
    sample: Sample,
    on_chunk: Callable[[Sample], None] | None = None,
) -> None:
    body = {"messages": msgs, "max_tokens": max_tokens, "temperature": 0.0, **extra}
    try:
        for t, chunk in client.stream("/chat/completions", body):
            ch = chunk["choices"][0]
            delta = (ch.get("delta") or {}).get("content") or ""
            if delta:
                sample.chunk_times.append(t)
                sample.text += delta
                if on_chunk is not None:
                    on_chunk(sample)
            if ch.get("finish_reason"):
                sample.finish_reason = ch["finish_reason"]
                sample.extension = chunk.get("grid_sql") or {}
    except Exception as e:  # noqa: BLE001 - a failed request is a result, recorded
        sample.error = f"{type(e).__name__}: {e}"


def run_batch(
    client: ServerClient,
    guides: Sequence[Guide | None],
    n: int,
    max_tokens: int,
    *,
    unconstrained: bool = False,
) -> list[Sample]:
    """``n`` concurrent streaming requests; request ``i`` uses ``guides[i % len(guides)]``."""
    samples: list[Sample] = []
    threads = []
    for i in range(n):
        g = guides[i % len(guides)]
        extra = {} if unconstrained or g is None else g.fields
        s = Sample(guide="none" if unconstrained or g is None else g.name, t_start=0.0)
        samples.append(s)
        msgs = messages(g, QUESTIONS[i % len(QUESTIONS)])
        th = threading.Thread(target=_timed, args=(client, msgs, extra, max_tokens, s))
        threads.append(th)
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return samples


def _timed(client: ServerClient, msgs: Any, extra: Any, max_tokens: int, s: Sample) -> None:
    s.t_start = time.perf_counter()
    stream_one(client, msgs, extra, max_tokens, s)


def summarize(samples: Sequence[Sample]) -> dict[str, Any]:
    ok = [s for s in samples if not s.error]
    tpots = [s.tpot for s in ok if s.tpot is not None]
    ttfts = [s.ttft for s in ok if s.ttft is not None]
    t0 = min((s.t_start for s in ok), default=0.0)
    t1 = max((s.chunk_times[-1] for s in ok if s.chunk_times), default=t0)
    chunks = sum(len(s.chunk_times) for s in ok)
    return {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "error_examples": sorted({s.error for s in samples if s.error})[:3],
        "tpot_ms_median": 1e3 * statistics.median(tpots) if tpots else None,
        "tpot_ms_p90": 1e3 * _q(tpots, 0.9) if tpots else None,
        "ttft_ms_median": 1e3 * statistics.median(ttfts) if ttfts else None,
        "chunks_mean": chunks / len(ok) if ok else 0.0,
        "tokens_per_s": chunks / (t1 - t0) if t1 > t0 else None,
        "deferred_rounds": sum(int(s.extension.get("deferred_rounds") or 0) for s in ok),
    }


def _merge(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    """Engine-side numbers of several legs: the max of maxima, the sums of the rest."""
    out: dict[str, float] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = max(out.get(k, v), v) if k.startswith("max") else out.get(k, 0.0) + v
    return out


def _q(xs: Sequence[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def cold_injection(
    client: ServerClient,
    warm: Sequence[Guide],
    cold: Guide | None,
    n: int,
    max_tokens: int,
    after_chunks: int = 4,
    fresh_tokens: int = 8,
    to_fresh_end: bool = False,
) -> dict[str, Any]:
    """``n`` warm co-tenants; once each streamed ``after_chunks`` chunks, ``cold`` joins
    (``None``: the baseline leg, nothing joins) for ``fresh_tokens`` tokens. Co-tenant gaps
    inside the cold window: injection to the fresh request's first chunk, or with
    ``to_fresh_end`` to its last (its masks after the first are cold walks too); the
    baseline's window: from the same point to the end of the leg."""
    samples = [Sample(guide=warm[i % len(warm)].name, t_start=0.0) for i in range(n)]
    started = threading.Barrier(n + 1)
    lock = threading.Lock()
    ready = threading.Event()
    counted: set[int] = set()

    def on_chunk(s: Sample) -> None:
        if len(s.chunk_times) >= after_chunks:
            with lock:
                counted.add(id(s))
                if len(counted) == n:
                    ready.set()

    def co_tenant(i: int) -> None:
        g = warm[i % len(warm)]
        started.wait()
        samples[i].t_start = time.perf_counter()
        stream_one(
            client,
            messages(g, QUESTIONS[i % len(QUESTIONS)]),
            g.fields,
            max_tokens,
            samples[i],
            on_chunk,
        )
        with lock:  # a co-tenant that ended early must not hold the injection back
            counted.add(id(samples[i]))
            if len(counted) == n:
                ready.set()

    threads = [threading.Thread(target=co_tenant, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    started.wait()
    ready.wait(timeout=600)
    t_inject = time.perf_counter()
    fresh = Sample(guide=cold.name if cold else "-", t_start=t_inject)
    if cold is not None:
        stream_one(client, messages(cold, QUESTIONS[0]), cold.fields, fresh_tokens, fresh)
    for th in threads:
        th.join()
    if cold is not None:
        at = -1 if to_fresh_end else 0
        t_end = fresh.chunk_times[at] if fresh.chunk_times else time.perf_counter()
    else:  # the baseline's window: the rest of the leg, as long as any cold window
        t_end = max((s.chunk_times[-1] for s in samples if s.chunk_times), default=t_inject)
    window = [g for s in samples for g in s.gaps(t_inject, t_end)]
    tp = [s.tpot for s in samples if s.tpot is not None]
    return {
        "co_tenants": n,
        "cold_window_ms": 1e3 * (t_end - t_inject),
        "co_tenant_worst_gap_ms": 1e3 * max(window) if window else None,
        "co_tenant_window_gaps": len(window),
        "co_tenant_gap_p50_ms": 1e3 * _q(window, 0.5) if window else None,
        "co_tenant_gap_p90_ms": 1e3 * _q(window, 0.9) if window else None,
        "co_tenant_tpot_ms_median": 1e3 * statistics.median(tp) if tp else None,
        "fresh_ttft_ms": 1e3 * fresh.ttft if fresh.ttft is not None else None,
        "fresh_deferred_rounds": fresh.extension.get("deferred_rounds"),
        "fresh_cold_deferred_rounds": fresh.extension.get("cold_deferred_rounds"),
        "fresh_tokens": len(fresh.extension.get("token_ids") or []),
        "fresh_tpot_ms": 1e3 * fresh.tpot if fresh.tpot is not None else None,
        "fresh_error": fresh.error,
        "errors": sum(1 for s in samples if s.error),
        "error_examples": sorted({s.error for s in samples if s.error})[:3],
    }


def protocol(
    client: ServerClient,
    guides: Sequence[Guide],
    cold: Guide,
    *,
    batches: Sequence[int],
    max_tokens: int,
    legs: int,
    cold_batch: int,
    cold_only: bool = False,
    log: Callable[[str], None] = print,
    step_probe: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """The whole protocol against one server; the result document (without host data)."""
    out: dict[str, Any] = {"batches": {}, "cold": {}}
    t0 = time.perf_counter()
    warm = run_batch(client, guides, max(batches), max_tokens)
    log(f"warm-up: {summarize(warm)} in {time.perf_counter() - t0:.1f}s")
    for b in batches if not cold_only else ():
        got: dict[str, list[Sample]] = {"unconstrained": [], "grid": []}
        engine: dict[str, list[Any]] = {"unconstrained": [], "grid": []}
        for _ in range(legs):  # arms alternate leg by leg: load drifts hit both alike
            for arm in ("unconstrained", "grid"):
                probe0 = step_probe() if step_probe else None
                got[arm] += run_batch(client, guides, b, max_tokens, unconstrained=arm != "grid")
                if step_probe is not None:
                    engine[arm].append(step_probe(probe0))
        arms: dict[str, Any] = {}
        for arm, samples in got.items():
            arms[arm] = summarize(samples)
            if engine[arm]:
                arms[arm]["engine"] = _merge(engine[arm])
            log(f"batch {b} {arm}: {arms[arm]}")
        u, g = arms["unconstrained"]["tpot_ms_median"], arms["grid"]["tpot_ms_median"]
        arms["tpot_overhead_pct"] = 100.0 * (g / u - 1.0) if u and g else None
        out["batches"][str(b)] = arms
    probe0 = step_probe() if step_probe else None
    base = cold_injection(client, guides, None, cold_batch, 2 * max_tokens)
    if step_probe is not None:
        base["engine"] = step_probe(probe0)
    log(f"cold baseline: {base}")
    probe0 = step_probe() if step_probe else None
    inj = cold_injection(client, guides, cold, cold_batch, 2 * max_tokens)
    if step_probe is not None:
        inj["engine"] = step_probe(probe0)
    log(f"cold injection: {inj}")
    b_tp, i_tp = base["co_tenant_tpot_ms_median"], inj["co_tenant_tpot_ms_median"]
    inj["co_tenant_tpot_degradation_pct"] = 100.0 * (i_tp / b_tp - 1.0) if b_tp and i_tp else None
    out["cold"] = {"baseline": base, "injected": inj}
    return out


def cold_ab(
    client: ServerClient,
    guides: Sequence[Guide],
    colds: Sequence[Guide],
    *,
    n: int,
    max_tokens: int,
    set_defer: Callable[[bool], None],
    step_probe: Callable[..., Any],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Cold masks on vs off the critical path, same server, arms alternating leg by leg.

    A baseline leg (nothing joins), then one leg per guide of ``colds`` (each never seen:
    its first mask comes with the build, every later one is a cold walk): arm ``in-round``
    (``max_defer_rounds`` 0: the walk runs inside the round's fill, stalling every
    co-tenant) and arm ``deferred`` (the walk on the masker's worker, the request deferred)
    alternate. The window runs from the injection to the fresh request's last chunk."""
    legs: list[dict[str, Any]] = []
    p0 = step_probe()
    base = cold_injection(client, guides, None, n, max_tokens)
    base["engine"] = step_probe(p0)
    base["arm"] = "baseline"
    log(f"cold-ab baseline: {base}")
    legs.append(base)
    for k, cold in enumerate(colds):
        arm = ("in-round", "deferred")[k % 2]
        set_defer(arm == "deferred")
        p0 = step_probe()
        r = cold_injection(client, guides, cold, n, max_tokens, fresh_tokens=24, to_fresh_end=True)
        r["engine"] = step_probe(p0)
        r["arm"] = arm
        r["guide"] = cold.name
        log(f"cold-ab {arm}: {r}")
        legs.append(r)
    set_defer(True)
    return {"legs": legs}


def host_info() -> dict[str, Any]:
    def run(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return ""

    from hostinfo import cpu_model

    cpu = cpu_model("")
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "commit": run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "python": platform.python_version(),
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = (
        []
        if not doc["batches"]
        else [
            "| batch | arm | TPOT p50 ms | TPOT p90 ms | TTFT p50 ms | tok/s | chunks/req "
            "| deferred | errors |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
    )

    def f(x: Any, nd: int = 1) -> str:
        return "—" if x is None else f"{x:.{nd}f}"

    for b, arms in doc["batches"].items():
        for arm in ("unconstrained", "grid", "server-grammar"):
            if arm not in arms:
                continue
            a = arms[arm]
            lines.append(
                f"| {b} | {arm} | {f(a['tpot_ms_median'])} | {f(a['tpot_ms_p90'])} | "
                f"{f(a['ttft_ms_median'])} | {f(a['tokens_per_s'])} | {f(a['chunks_mean'])} | "
                f"{a['deferred_rounds']} | {a['errors']} |"
            )
        lines.append(f"| {b} | overhead | {f(arms['tpot_overhead_pct'])} % | | | | | | |")
    eng = [
        (b, arm, arms[arm]["engine"])
        for b, arms in doc["batches"].items()
        for arm in ("unconstrained", "grid")
        if "engine" in arms.get(arm, {})
    ]
    if eng:
        lines += [
            "",
            "| batch | arm | engine rounds | max step ms | decode s | mask fill s | fill share |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for b, arm, e in eng:
            share = e["fill_s"] / (e["fill_s"] + e["decode_s"]) if e["decode_s"] else None
            lines.append(
                f"| {b} | {arm} | {e['rounds']:.0f} | {f(e['max_step_ms'])} | "
                f"{f(e['decode_s'], 2)} | {f(e['fill_s'], 3)} | "
                f"{'—' if share is None else f'{100 * share:.1f} %'} |"
            )
    if doc.get("cold_ab"):
        lines += ["", *cold_ab_markdown(doc["cold_ab"], f)]
    c = doc["cold"]
    if not c:
        return "\n".join(lines)
    base, inj = c["baseline"], c["injected"]
    lines += [
        "",
        "| cold-guide injection | baseline (no injection) | injected |",
        "|---|---:|---:|",
        f"| co-tenants | {base['co_tenants']} | {inj['co_tenants']} |",
        f"| co-tenant worst gap in window, ms | {f(base['co_tenant_worst_gap_ms'])} | "
        f"{f(inj['co_tenant_worst_gap_ms'])} |",
        f"| co-tenant TPOT p50, ms | {f(base['co_tenant_tpot_ms_median'])} | "
        f"{f(inj['co_tenant_tpot_ms_median'])} |",
        f"| co-tenant TPOT degradation | | {f(inj.get('co_tenant_tpot_degradation_pct'))} % |",
        f"| cold window (injection → fresh first chunk), ms | {f(base['cold_window_ms'])} | "
        f"{f(inj['cold_window_ms'])} |",
        f"| fresh request TTFT, ms | | {f(inj['fresh_ttft_ms'])} |",
        f"| fresh request deferred rounds | | {inj['fresh_deferred_rounds']} |",
    ]
    if "engine" in inj:
        be, ie = base["engine"], inj["engine"]
        lines += [
            f"| engine max step over the leg, ms | {f(be['max_step_ms'])} | "
            f"{f(ie['max_step_ms'])} |",
            f"| engine mask fill / decode over the leg, s | {f(be['fill_s'], 3)} / "
            f"{f(be['decode_s'], 2)} | {f(ie['fill_s'], 3)} / {f(ie['decode_s'], 2)} |",
        ]
    return "\n".join(lines)


def cold_ab_markdown(ab: dict[str, Any], f: Callable[..., str]) -> list[str]:
    out = [
        "| leg | arm | co-tenant worst gap in window ms | gap p50 / p90 ms | co-tenant TPOT p50 ms "
        "| engine max step ms | max round fill ms | fill s / decode s | fresh tokens "
        "| fresh cold-deferred rounds | fresh TTFT ms | fresh TPOT ms | window ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, leg in enumerate(ab["legs"]):
        e = leg["engine"]
        out.append(
            f"| {i} | {leg['arm']} | {f(leg['co_tenant_worst_gap_ms'])} | "
            f"{f(leg.get('co_tenant_gap_p50_ms'))} / {f(leg.get('co_tenant_gap_p90_ms'))} | "
            f"{f(leg['co_tenant_tpot_ms_median'])} | {f(e['max_step_ms'])} | "
            f"{f(e['max_fill_ms'], 2)} | {f(e['fill_s'], 3)} / {f(e['decode_s'], 1)} | "
            f"{leg.get('fresh_tokens', '—')} | {leg.get('fresh_cold_deferred_rounds', '—')} | "
            f"{f(leg.get('fresh_ttft_ms'))} | {f(leg.get('fresh_tpot_ms'))} | "
            f"{f(leg['cold_window_ms'])} |"
        )
    return out


# ----------------------------------------------------------------------------- CPU main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--legs", type=int, default=1)
    ap.add_argument("--cold-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cold-only", action="store_true", help="warm-up and the cold arm only")
    ap.add_argument(
        "--cold-ab",
        type=int,
        default=0,
        metavar="PAIRS",
        help="only the cold-mask A/B after the warm-up: PAIRS x (in-round, deferred) legs",
    )
    ap.add_argument(
        "--max-batched-tokens",
        type=int,
        default=64,
        help="tokens per engine round (chunked prefill; vLLM's max_num_batched_tokens)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "serving-cpu.json")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from grid_sql.serve.server import GridServer

    host = host_info()
    batch = max(max(a.batches), a.cold_batch + 1)
    n_ctx = batch * (160 + 2 * a.max_tokens) + 512
    srv = GridServer(
        a.model,
        max_batch=batch,
        n_ctx=n_ctx,
        n_threads=a.threads,
        max_batched_tokens=a.max_batched_tokens,
    )
    vocab = srv.backend.vocab.fingerprint
    guides = chinook_guides(POLICIES, vocab)
    (cold,) = chinook_guides([COLD_POLICY], vocab)
    cold.name = "cold:" + cold.name.split(":", 1)[1]

    def probe(since: Any = None) -> Any:
        st = srv.stats
        now = (
            len(st.steps),
            st.fill_seconds,
            st.decode_seconds,
            st.deferred,
            len(st.fill_steps),
            st.deferred_cold,
            asdict(srv.masker.stats),
        )
        if since is None:
            return now
        steps = st.steps[since[0] :]
        fills = st.fill_steps[since[4] :]
        return {
            "masker": {k: v - since[6][k] for k, v in now[6].items()},
            "max_step_ms": 1e3 * max((x[1] for x in steps), default=0.0),
            "max_fill_ms": 1e3 * max(fills, default=0.0),
            "deferred_cold": float(now[5] - since[5]),
            "rounds": float(len(steps)),
            "fill_s": now[1] - since[1],
            "decode_s": now[2] - since[2],
            "deferred": float(now[3] - since[3]),
        }

    t0 = time.perf_counter()
    default_defer = srv.masker.max_defer_rounds

    def set_defer(on: bool) -> None:
        srv.masker.max_defer_rounds = default_defer if on else 0

    with srv:
        client = ServerClient(srv.url, timeout_s=3600)
        if a.cold_ab:
            colds = chinook_guides(COLD_AB_POLICIES[: 2 * a.cold_ab], vocab)
            for g in colds:
                g.name = "cold:" + g.name.split(":", 1)[1]
            w0 = time.perf_counter()
            warm = run_batch(client, guides, batch, a.max_tokens)
            print(f"warm-up: {summarize(warm)} in {time.perf_counter() - w0:.1f}s")
            doc: dict[str, Any] = {"batches": {}, "cold": {}}
            doc["cold_ab"] = cold_ab(
                client,
                guides,
                colds,
                n=a.cold_batch,
                max_tokens=2 * a.max_tokens,
                set_defer=set_defer,
                step_probe=probe,
            )
            doc["cold_ab"]["max_defer_rounds"] = default_defer
        else:
            doc = protocol(
                client,
                guides,
                cold,
                batches=a.batches,
                max_tokens=a.max_tokens,
                legs=a.legs,
                cold_batch=a.cold_batch,
                cold_only=a.cold_only,
                step_probe=probe,
            )
    host["loadavg_end"] = os.getloadavg()
    doc.update(
        host=host,
        model=srv.model_name,
        command=" ".join([Path(sys.executable).name, *sys.argv]),
        max_tokens=a.max_tokens,
        max_batched_tokens=a.max_batched_tokens,
        legs=a.legs,
        seconds=time.perf_counter() - t0,
        guides=[asdict(g) | {"fields": "…"} for g in guides],
    )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2, default=str))
    print(markdown(doc))
    print(
        f"\nwritten {a.out} ({doc['seconds']:.0f}s, load {host['loadavg_start']} -> "
        f"{host['loadavg_end']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
