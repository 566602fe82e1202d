"""Per-token mask latency: grid-sql (Rust walk kernel) vs grid-sql (Python walk) vs
llguidance vs XGrammar vs GLRMask, one run, same grammar, same vocabulary, same token ids.

Protocol "unseen": Spider dev gold queries sampled with ``random.Random(2026)``; each engine
warms its caches on the first half of the sample, then every step (a full-vocabulary mask
fill, EOS step included) of the second half is timed ("unseen" pass: cold misses and hits
mixed). The second half is then replayed once more ("warm" pass: for grid-sql every CI
entry is a cache hit). For grid-sql, steps of the unseen pass whose fill walked at least
one trie subtree (a cache miss) are also reported on their own ("cold miss"). The warm pass
also times each engine's accept of the token (the other half of a warm decode step), and for
grid-sql a batched fill (``fill_rows`` over batches of 16 warm rows vs a per-row loop).
All engines get the SAME token ids: greedy longest-match over the GGUF vocabulary's token
spellings (specials excluded). ``grid-py`` is grid-sql with ``GRID_SQL_KERNELS=0``
semantics (the Python reference walk); its masks are compared bit by bit too.

Position slope: one ``SELECT a FROM t WHERE a = 1 AND a = 1 ...`` statement of about
``--slope-tokens`` tokens per engine, every fill timed; least-squares slope of µs against
position and first-half vs second-half p50. Memory: RSS growth over tokenizer load and
compile, the compiled size where the engine reports one (XGrammar), grid-sql's trie and
cache bytes. Compile time proper is bench/compile.py's.

The llguidance, GLRMask and XGrammar grammars are grid-sql's own compiled SQLite grammar
exported by :mod:`grid_sql.grammar.export` (Lark for llguidance and GLRMask, EBNF for
XGrammar), so the language is the same up to the adaptations listed in the report.

    python bench/masks.py --vocab gpt-2 qwen2 --n-statements 8 4 --slope-tokens 16000 \
        --engines grid grid-py llguidance xgrammar glrmask
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata as md
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# bench/ is not a package: the engines sit beside this file (on sys.path when a bench script
# runs); re-exported for the scripts that read M.GridEngine
from mask_engines import GLRMEngine, GridEngine, LLGEngine, XGREngine

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TOKENIZERS = SHARED / "data" / "tokenizers"
SPIDER_DEV = SHARED / "data" / "spider" / "dev.json"


# ----------------------------------------------------------------------------- corpus
def sample_statements(n: int, seed: int = 2026) -> list[str]:
    data = json.loads(SPIDER_DEV.read_text())
    queries = [d["query"].strip() for d in data]
    return random.Random(seed).sample(queries, n)


def bit_set(buf: np.ndarray, tid: int) -> bool:
    w = int(buf.reshape(-1)[tid >> 5]) & 0xFFFFFFFF
    return bool((w >> (tid & 31)) & 1)


def popcount(buf: np.ndarray) -> int:
    return int(np.unpackbits(buf.reshape(-1).view(np.uint8)).sum())


# ----------------------------------------------------------------------------- running
# Per engine and phase (warm-up, unseen, warm replay, slope): stop starting fills after this
# many seconds, so an engine that takes seconds per fill still ends (its step count shows it).
PHASE_CAP_S = 150.0


def run_statement(
    eng, ids, eos, timed, stats, masks=None, key=0, missed=None, deadline=None, acc_timed=None
):
    eng.start()
    for step, tid in enumerate(ids + [eos]):
        if deadline is not None and time.perf_counter() > deadline:
            stats["truncated"] = stats.get("truncated", 0) + 1
            return False
        pre, post = getattr(eng, "pre_fill", None), getattr(eng, "post_fill", None)
        if pre is not None:
            pre()
        t0 = time.perf_counter_ns()
        buf = eng.fill()
        dt = time.perf_counter_ns() - t0
        if post is not None:
            post()
        if timed is not None:
            timed.append(dt / 1000.0)
        if missed is not None:
            missed.append(bool(getattr(eng, "missed", False)))
        stats["steps"] += 1
        if masks is not None:
            masks[(key, step)] = buf.reshape(-1).copy()
        if not bit_set(buf, tid):
            stats["rejected"] += 1
            stats.setdefault("first_rejects", []).append(tid)
            return False
        if tid == eos:
            return True
        t0 = time.perf_counter_ns()
        ok = eng.accept(tid)
        if acc_timed is not None:
            acc_timed.append((time.perf_counter_ns() - t0) / 1000.0)
        if not ok:
            stats["rejected"] += 1
            return False
    return True


BATCH = 16  # rows per batched fill (a serving batch)


def batched_fill(eng, seqs: list[list[int]], reps: int = 20) -> dict:
    """grid-sql only: every configuration of the replayed statements (all warm), filled in
    batches of ``BATCH`` rows by ``fill_rows`` vs a per-row ``fill_bitmask`` loop over the
    same rows; µs per row (median over ``reps`` rounds), and whether the rows agree."""
    from grid_sql.mask.guide import fill_rows

    g = eng.guide
    cfgs = []
    for ids in seqs:
        m = g.matcher()
        for t in ids:
            cfgs.append(m.config)
            m.accept_token(t)
        cfgs.append(m.config)
    cfgs = cfgs[: len(cfgs) // BATCH * BATCH] or cfgs
    chunks = [cfgs[i : i + BATCH] for i in range(0, len(cfgs), BATCH)]
    a = np.zeros((BATCH, g.n_words), dtype=np.int32)
    b = np.zeros_like(a)
    per_batch: list[float] = []
    per_row: list[float] = []
    same = True
    res: list = []

    def batch(ch: list) -> int:
        nonlocal res
        pairs = [(g, c) for c in ch]
        t0 = time.perf_counter_ns()
        res = fill_rows(pairs, a, walk=False)
        return time.perf_counter_ns() - t0

    def loop(ch: list) -> int:
        t0 = time.perf_counter_ns()
        for k, c in enumerate(ch):
            g.fill_bitmask(c, b[k])
        return time.perf_counter_ns() - t0

    for rep in range(reps):
        tb = tr = 0
        for ch in chunks:
            # alternate which goes first: the second finds the same rows already in cache
            if rep % 2:
                tr += loop(ch)
                tb += batch(ch)
            else:
                tb += batch(ch)
                tr += loop(ch)
            same = same and None not in res and bool((a[: len(ch)] == b[: len(ch)]).all())
        per_batch.append(tb / 1000.0 / len(cfgs))
        per_row.append(tr / 1000.0 / len(cfgs))
    return {
        "rows": len(cfgs),
        "batch": BATCH,
        "batched_us_per_row": float(np.median(per_batch)),
        "loop_us_per_row": float(np.median(per_row)),
        "same": same,
    }


def summarize(lat: list[float]) -> dict:
    a = np.array(lat) if lat else np.array([0.0])
    return {
        "n": len(lat),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
        "mean": float(a.mean()),
        "gt1ms": int((a > 1000.0).sum()),
    }


def where_chain(n_tokens: int, tokenize) -> tuple[str, list[int]]:
    """``SELECT a FROM t WHERE a = 1 AND a = 1 AND ...`` of about ``n_tokens`` tokens."""
    head, rep = "SELECT a FROM t WHERE a = 1", " AND a = 1"
    per = len(tokenize(rep.encode()))
    k = max(1, (n_tokens - len(tokenize(head.encode()))) // per)
    text = head + rep * k
    return text, tokenize(text.encode())


def position_slope(eng, ids: list[int], eos: int) -> dict:
    """Per-token fill time against position on one long statement: least-squares slope
    (µs per position) and p50 of the first and second halves."""
    lat: list[float] = []
    stats = {"steps": 0, "rejected": 0}
    ok = run_statement(eng, ids, eos, lat, stats, deadline=time.perf_counter() + PHASE_CAP_S)
    y = np.array(lat)
    x = np.arange(len(y), dtype=np.float64)
    b, a = np.polyfit(x, y, 1) if len(y) > 1 else (0.0, 0.0)
    h = len(y) // 2
    # the same fit without the first 1% of steps (warm-up of every engine's caches)
    w = max(1, len(y) // 100)
    b_warm = float(np.polyfit(x[w:], y[w:], 1)[0]) if len(y) - w > 1 else 0.0
    b_second = float(np.polyfit(x[h:], y[h:], 1)[0]) if len(y) - h > 1 else 0.0
    # standard error of the all-steps slope: is b distinguishable from 0 at this noise?
    se = 0.0
    if len(y) > 2:
        resid = y - (a + b * x)
        se = float(np.sqrt((resid @ resid) / (len(y) - 2) / ((x - x.mean()) @ (x - x.mean()))))
    out = {
        "n": len(y),
        "accepted": bool(ok),
        "truncated": bool(stats.get("truncated")),
        "slope_us_per_pos": float(b),
        "slope_warm_us_per_pos": b_warm,
        "slope_second_half_us_per_pos": b_second,
        "slope_stderr": se,
        "intercept_us": float(a),
        "p50_first": float(np.percentile(y[:h], 50)) if h else 0.0,
        "p50_second": float(np.percentile(y[h:], 50)) if h else 0.0,
        "p99_second": float(np.percentile(y[h:], 99)) if h else 0.0,
        "total_s": float(y.sum() / 1e6),
    }
    if hasattr(eng, "m") and hasattr(eng.m, "config"):  # grid-sql: per-stream state
        out["stack_depth_end"] = int(eng.m.config.stack.depth)
    return out


def bench_vocab(
    vname: str, n_stmts: int, engines: list[str], log, slope_tokens: int = 0, xgr_threads: int = 2
) -> dict:
    path = TOKENIZERS / f"ggml-vocab-{vname}.gguf"
    stmts = sample_statements(n_stmts)
    half = n_stmts // 2
    warm, test = stmts[:half], stmts[half:]
    res: dict = {"vocab": vname, "warm": warm, "test": test, "engines": {}}
    grid = GridEngine(path)  # also provides the vocabulary and grammar for the others
    v = grid.v

    def tokenize(b: bytes) -> list[int]:
        from grid_sql.mask.vocab import greedy_token_ids

        return greedy_token_ids(v, b, max_len=32)  # same spelling for every engine

    res["n_vocab"] = len(v.token_bytes)
    res["test_tokens"] = sum(len(tokenize(s.encode())) + 1 for s in test)
    all_masks: dict[str, dict] = {}
    for name in engines:
        if name == "grid":
            eng = grid
        elif name == "grid-py":
            eng = GridEngine(path, kernels=False)
        elif name in ("llguidance", "llguidance-merged"):
            eng = LLGEngine(v, grid.grammar, tokenize, name == "llguidance-merged")
            res["llg_notes"] = eng.notes
            res["llg_warnings"] = eng.m.get_grammar_warnings()
        elif name in ("xgrammar", "xgrammar-gbnf"):
            eng = XGREngine(v, grid.grammar, xgr_threads, name.removeprefix("xgrammar-"))
            res["xgr_notes"] = res.get("xgr_notes", []) + [f"[{eng.name}] {n}" for n in eng.notes]
        elif name == "glrmask":
            eng = GLRMEngine(v, grid.grammar)
            res["glrm_notes"] = eng.notes
        else:
            log(f"[{vname}] engine {name}: not available, skipped")
            continue
        stats = {"steps": 0, "rejected": 0}
        tw = time.perf_counter()
        dl = tw + PHASE_CAP_S
        for s in warm:
            run_statement(eng, tokenize(s.encode()), v.eos_token_id, None, stats, deadline=dl)
        warm_s = time.perf_counter() - tw
        lat: list[float] = []
        missed: list[bool] = []
        tstats = {"steps": 0, "rejected": 0}
        masks: dict = {}
        all_masks[eng.name] = masks
        dl2 = time.perf_counter() + PHASE_CAP_S
        for k, s in enumerate(test):
            ids = tokenize(s.encode())
            ok = run_statement(eng, ids, v.eos_token_id, lat, tstats, masks, k, missed, dl2)
            if not ok and not tstats.get("truncated"):
                log(f"[{vname}] {eng.name} REJECTED in: {s}")
        hot: list[float] = []
        hot_acc: list[float] = []
        dl3 = time.perf_counter() + PHASE_CAP_S
        hstats = {"steps": 0, "rejected": 0}
        for s in test:  # replay: the warm (hit) pass
            run_statement(
                eng,
                tokenize(s.encode()),
                v.eos_token_id,
                hot,
                hstats,
                deadline=dl3,
                acc_timed=hot_acc,
            )
        summ = summarize(lat)
        wsum = summarize(hot)
        asum = summarize(hot_acc)
        summ.update(warm_p50=wsum["p50"], warm_p99=wsum["p99"], warm_mean=wsum["mean"])
        summ.update(acc_p50=asum["p50"], acc_p99=asum["p99"])
        if name.startswith("grid"):
            # a second replay right after the first: the same fills with the rows still in
            # the CPU caches (the first replay reads each row once since the unseen pass)
            hot2: list[float] = []
            for s in test:
                run_statement(
                    eng,
                    tokenize(s.encode()),
                    v.eos_token_id,
                    hot2,
                    {"steps": 0, "rejected": 0},
                    deadline=time.perf_counter() + PHASE_CAP_S,
                )
            w2 = summarize(hot2)
            summ.update(warm2_p50=w2["p50"], warm2_p99=w2["p99"])
            summ["batched"] = batched_fill(eng, [tokenize(s.encode()) for s in test])
            cold = [x for x, m in zip(lat, missed, strict=True) if m]
            csum = summarize(cold)
            summ.update(
                cold_n=len(cold),
                cold_p50=csum["p50"],
                cold_p99=csum["p99"],
                cache_bytes=eng.cache_bytes(),
                cache_entries=eng.cache_entries(),
                trie_bytes=eng.guide.trie.nbytes,
            )
        summ.update(
            tok_load_s=eng.tok_load_s,
            compile_s=eng.compile_s,
            rss_compile=getattr(eng, "rss_compile", 0),
            grammar_bytes=getattr(eng, "grammar_bytes", None),
            store_load_s=getattr(eng, "load_s", None),
            warm_s=warm_s,
            warm_rejected=stats["rejected"],
            rejected=tstats["rejected"],
            truncated=[bool(x.get("truncated")) for x in (stats, tstats, hstats)],
            steps=tstats["steps"],
        )
        if slope_tokens:
            text, ids = where_chain(slope_tokens, tokenize)
            summ["slope"] = position_slope(eng, ids, v.eos_token_id)
            if name.startswith("grid"):  # the cache after the chain as well
                summ["slope"].update(
                    cache_bytes_after=eng.cache_bytes(),
                    cache_entries_after=eng.cache_entries(),
                )
        res["engines"][eng.name] = summ
        log(f"[{vname}] {eng.name}: {json.dumps(summ)}")
    res["mask_diff"] = compare_masks(all_masks, res["n_vocab"])
    log(f"[{vname}] mask comparison vs grid-sql: {json.dumps(res['mask_diff'])}")
    if "llguidance" in all_masks and "glrmask" in all_masks:
        # same Lark text: is GLRMask exact for the language llguidance computes?
        both = {k: all_masks[k] for k in ("llguidance", "glrmask")}
        res["mask_diff_llg"] = compare_masks(both, res["n_vocab"], "llguidance")
        log(f"[{vname}] glrmask vs llguidance: {json.dumps(res['mask_diff_llg'])}")
    return res


def compare_masks(all_masks: dict[str, dict], n_vocab: int, base_name: str = "grid-sql") -> dict:
    """Per engine: steps whose full-vocabulary mask differs from ``base_name``'s (grid-sql's,
    or llguidance's for the engines that read the same Lark export), and by how much."""
    base = all_masks.get(base_name)
    out: dict = {}
    if base is None:
        return out

    def bits(w: np.ndarray) -> np.ndarray:
        return np.unpackbits(w.astype("<i4").view(np.uint8), bitorder="little")[:n_vocab]

    for name, masks in all_masks.items():
        if name == base_name:
            continue
        common = sorted(set(base) & set(masks))
        differ = only_other = only_grid = 0
        for key in common:
            a, b = bits(base[key]), bits(masks[key])
            if not np.array_equal(a, b):
                differ += 1
                only_grid += int((a & ~b).sum())
                only_other += int((b & ~a).sum())
        out[name] = {
            "mean_allowed_grid": float(np.mean([bits(base[k]).sum() for k in common] or [0])),
            "mean_allowed_other": float(np.mean([bits(masks[k]).sum() for k in common] or [0])),
            "compared": len(common),
            "differ": differ,
            "tokens_only_grid": only_grid,
            "tokens_only_other": only_other,
        }
    return out


def host_info() -> dict:
    from hostinfo import cpu_model

    cpu = cpu_model("?")
    vers = {}
    for p in ("grid-sql", "llguidance", "xgrammar", "glrmask", "numpy", "lark"):
        try:
            vers[p] = md.version(p)
        except md.PackageNotFoundError:
            vers[p] = "not installed"
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "uname": " ".join(platform.uname()),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": vers,
        "commit": commit,
    }


def _cut(s: dict) -> str:
    names = [n for n, c in zip(("warm-up", "unseen", "replay"), s["truncated"], strict=True) if c]
    return ", ".join(names) or "none"


def _ratio(s: dict, base: dict | None, k: str) -> str:
    return f"{s[k] / base[k]:.3g}" if base and base.get(k) else "-"


def render(results: list[dict], host: dict, cmd: str, load: dict, skipped: list[str]) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Mask latency: grid-sql (kernels) vs grid-sql (Python walk) vs llguidance vs XGrammar "
        "vs GLRMask",
        "",
        f"- command: `{cmd}`",
        f"- date: {now}; grid-sql commit {host['commit']}",
        f"- host: `{host['uname']}`",
        f"- CPU: {host['cpu']}, {host['cores']} cores; Python {host['python']}",
        f"- load average (1/5/15 min) before: {load['before']}, after: {load['after']}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in host["versions"].items()),
        "",
    ]
    for s in skipped:
        out.append(f"- skipped: {s}")
    out.append("")
    for r in results:
        eng = r["engines"]
        out += [
            f"## Vocabulary {r['vocab']} ({r['n_vocab']} tokens)",
            "",
            f"Warm-up: {len(r['warm'])} statements; timed: {len(r['test'])} statements, "
            f"{r['test_tokens']} steps (tokens + EOS) per engine.",
            "",
            "| engine | steps | p50 µs | p90 µs | p99 µs | max µs | mean µs | steps >1 ms "
            "| rejected (timed/warm) | tokenizer load s | grammar compile s | warm-up s "
            "| p50 / grid | mean / grid | phases cut at the cap |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        base = eng.get("grid-sql")
        for name, s in eng.items():
            r50 = f"{s['p50'] / base['p50']:.3g}" if base and base["p50"] else "-"
            rmean = f"{s['mean'] / base['mean']:.3g}" if base and base["mean"] else "-"
            out.append(
                f"| {name} | {s['n']} | {s['p50']:.1f} | {s['p90']:.1f} | {s['p99']:.1f} "
                f"| {s['max']:.1f} | {s['mean']:.1f} | {s['gt1ms']} "
                f"| {s['rejected']}/{s['warm_rejected']} | {s['tok_load_s']:.3f} "
                f"| {s['compile_s']:.3f} | {s['warm_s']:.2f} | {r50} | {rmean} "
                f"| {_cut(s)} |"
            )
        out += [
            "",
            "Warm (replay, all CI hits for grid-sql) and cold-miss steps (grid-sql steps of the "
            "unseen pass that walked at least one subtree), ratios against grid-sql (kernels):",
            "",
            "| engine | warm p50 µs | warm p99 µs | warm mean µs | warm p50 / grid "
            "| warm p99 / grid | warm accept p50 µs | warm accept p99 µs "
            "| unseen p99 / grid | cold-miss steps | cold-miss p50 µs "
            "| cold-miss p99 µs "
            "| cache entries / bytes | trie bytes |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, s in eng.items():
            cold = (
                f"| {s['cold_n']} | {s['cold_p50']:.0f} | {s['cold_p99']:.0f} "
                f"| {s['cache_entries']} / {s['cache_bytes']} | {s['trie_bytes']} |"
                if "cold_n" in s
                else "| - | - | - | - | - |"
            )
            out.append(
                f"| {name} | {s['warm_p50']:.1f} | {s['warm_p99']:.1f} | {s['warm_mean']:.1f} "
                f"| {_ratio(s, base, 'warm_p50')} | {_ratio(s, base, 'warm_p99')} "
                f"| {s.get('acc_p50', 0.0):.2f} | {s.get('acc_p99', 0.0):.2f} "
                f"| {_ratio(s, base, 'p99')} " + cold
            )
        bat = {n: e["batched"] for n, e in eng.items() if "batched" in e}
        if bat:
            out += [
                "",
                f"Batched fill (grid-sql, warm): every configuration of the replayed statements, "
                f"`fill_rows` over batches of {BATCH} rows (walk=False) vs a per-row "
                "`fill_bitmask` loop (order alternating by round), µs per row (median of 20 "
                "rounds); and a second warm replay right after the first (rows still in the CPU "
                "caches):",
                "",
                "| engine | rows | fill_rows µs/row | per-row loop µs/row | rows identical "
                "| 2nd replay p50 µs | 2nd replay p99 µs |",
                "|---|---|---|---|---|---|---|",
            ]
            for name, bt in bat.items():
                e = eng[name]
                out.append(
                    f"| {name} | {bt['rows']} | {bt['batched_us_per_row']:.2f} "
                    f"| {bt['loop_us_per_row']:.2f} | {bt['same']} "
                    f"| {e.get('warm2_p50', 0.0):.1f} | {e.get('warm2_p99', 0.0):.1f} |"
                )
        md_ = r.get("mask_diff") or {}
        if md_:
            out += [
                "",
                "Mask parity on the timed steps (same prefix, full vocabulary, bit by bit):",
                "",
                "| engine | steps compared | steps whose mask differs from grid-sql "
                "| token bits set only by grid-sql | token bits set only by the engine "
                "| mean allowed tokens/step grid-sql | mean allowed tokens/step engine |",
                "|---|---|---|---|---|---|---|",
            ]
            for name, d in md_.items():
                out.append(
                    f"| {name} | {d['compared']} | {d['differ']} | {d['tokens_only_grid']} "
                    f"| {d['tokens_only_other']} | {d['mean_allowed_grid']:.0f} "
                    f"| {d['mean_allowed_other']:.0f} |"
                )
            for name, d in (r.get("mask_diff_llg") or {}).items():
                out.append(
                    f"| {name} vs llguidance (same Lark text; columns read llguidance for "
                    f"grid-sql) | {d['compared']} | {d['differ']} | {d['tokens_only_grid']} "
                    f"| {d['tokens_only_other']} | {d['mean_allowed_grid']:.0f} "
                    f"| {d['mean_allowed_other']:.0f} |"
                )
        slopes = {n: e["slope"] for n, e in eng.items() if "slope" in e}
        if slopes:
            any_s = next(iter(slopes.values()))
            out += [
                "",
                f"Position slope: one WHERE chain (`SELECT a FROM t WHERE a = 1 AND a = 1 ...`) "
                f"of about {any_s['n']} steps per engine (fewer where the phase cap cut it), every "
                "fill timed; least-squares slope of µs against position over all steps, without "
                "the first 1% (cold start), and over the second half:",
                "",
                "| engine | steps | accepted | slope µs/pos (± std. error) | slope w/o first 1% "
                "| slope second half "
                "| p50 first half µs | p50 second half µs | p99 second half µs | total s "
                "| stack depth at end | cache entries / bytes after |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for name, sl in slopes.items():
                cache = (
                    f"{sl['cache_entries_after']} / {sl['cache_bytes_after']}"
                    if "cache_entries_after" in sl
                    else "-"
                )
                acc = "cut at the cap" if sl["truncated"] else str(sl["accepted"])
                out.append(
                    f"| {name} | {sl['n']} | {acc} | {sl['slope_us_per_pos']:.2e} "
                    f"± {sl.get('slope_stderr', 0.0):.1e} "
                    f"| {sl['slope_warm_us_per_pos']:.2e} "
                    f"| {sl['slope_second_half_us_per_pos']:.2e} | {sl['p50_first']:.1f} "
                    f"| {sl['p50_second']:.1f} | {sl['p99_second']:.1f} | {sl['total_s']:.1f} "
                    f"| {sl.get('stack_depth_end', '-')} | {cache} |"
                )
        out += [
            "",
            "Memory: RSS growth of the process over tokenizer load + grammar compile (noisy: "
            "allocator reuse; the grid engine is built first), and sizes the engines report:",
            "",
            "| engine | RSS growth at compile MB | compiled grammar bytes (engine's figure) "
            "| trie bytes | cache bytes after the corpus | reload from saved bytes s |",
            "|---|---|---|---|---|---|",
        ]
        for name, s_ in eng.items():
            gb = s_.get("grammar_bytes")
            ls = s_.get("store_load_s")
            out.append(
                f"| {name} | {s_['rss_compile'] / 2**20:.1f} | {gb if gb is not None else '-'} "
                f"| {s_.get('trie_bytes', '-')} | {s_.get('cache_bytes', '-')} "
                f"| {f'{ls:.3f}' if ls is not None else '-'} |"
            )
        warn = r.get("llg_warnings")
        if warn:
            out += ["", "llguidance grammar warnings:", ""] + [f"- {w}" for w in warn]
        out += ["", "Timed statements:", ""]
        out += [f"- `{q}`" for q in r["test"]]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    global PHASE_CAP_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", nargs="+", default=["gpt-2", "qwen2"])
    ap.add_argument(
        "--n-statements",
        nargs="+",
        type=int,
        default=[8, 4],
        help="sample size per vocabulary (half warm-up, half timed); one value or one per vocab",
    )
    ap.add_argument("--engines", nargs="+", default=["grid", "grid-py", "llguidance", "xgrammar"])
    ap.add_argument(
        "--slope-tokens",
        nargs="+",
        type=int,
        default=[16000],
        help="length of the WHERE-chain statement for the position slope (0: skip); one "
        "value or one per vocabulary",
    )
    ap.add_argument(
        "--xgr-threads", type=int, default=2, help="XGrammar compiler threads (host cores)"
    )
    ap.add_argument(
        "--phase-cap-s",
        type=float,
        default=PHASE_CAP_S,
        help="per engine and phase: stop starting fills after this many seconds",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-masks.md"))
    ap.add_argument("--notes", default="", help="extra markdown appended to the report")
    args = ap.parse_args(argv)
    ns = args.n_statements
    if len(ns) == 1:
        ns = ns * len(args.vocab)
    skipped = []
    engines = list(args.engines)
    for lib in ("llguidance", "xgrammar", "glrmask"):
        if any(e.startswith(lib) for e in engines):
            try:
                __import__(lib)
            except ImportError:
                skipped.append(f"{lib}: not importable in this venv (pip install -e '.[bench]')")
                engines = [e for e in engines if not e.startswith(lib)]
    PHASE_CAP_S = args.phase_cap_s
    st = args.slope_tokens
    if len(st) == 1:
        st = st * len(args.vocab)

    def log(msg: str) -> None:
        print(msg, flush=True)

    load_before = tuple(round(x, 2) for x in os.getloadavg())
    results = [
        bench_vocab(v, n, engines, log, slope_tokens=t, xgr_threads=args.xgr_threads)
        for v, n, t in zip(args.vocab, ns, st, strict=True)
    ]
    load_after = tuple(round(x, 2) for x in os.getloadavg())
    cmd = "python bench/masks.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(results, host_info(), cmd, {"before": load_before, "after": load_after}, skipped)
    for key, title in (
        ("llg_notes", "llguidance (Lark)"),
        ("xgr_notes", "XGrammar (EBNF)"),
        ("glrm_notes", "GLRMask (Lark)"),
    ):
        notes = [n for r in results for n in r.get(key, [])]
        if notes:
            text += f"\n## {title} grammar adaptations (grid_sql/grammar/export.py)\n\n"
            text += "\n".join(f"- {n}" for n in dict.fromkeys(notes)) + "\n"
    if args.notes:
        text += "\n" + Path(args.notes).read_text()
    Path(args.out).write_text(text)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
