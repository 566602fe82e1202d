"""Per-token mask latency: grid-sql (Rust walk kernel) vs grid-sql (Python walk) vs
llguidance (vs XGrammar when installable).

Protocol "unseen": Spider dev gold queries sampled with ``random.Random(2026)``; each engine
warms its caches on the first half of the sample, then every step (a full-vocabulary mask
fill, EOS step included) of the second half is timed ("unseen" pass: cold misses and hits
mixed). The second half is then replayed once more ("warm" pass: for grid-sql every CI
entry is a cache hit). For grid-sql, steps of the unseen pass whose fill walked at least
one trie subtree (a cache miss) are also reported on their own ("cold miss").
All engines get the SAME token ids: greedy longest-match over the GGUF vocabulary's token
spellings (specials excluded). ``grid-py`` is grid-sql with ``GRID_SQL_KERNELS=0``
semantics (the Python reference walk); its masks are compared bit by bit too.

The llguidance grammar is generated from grid-sql's own compiled SQLite grammar (lark's
resolved BNF rules and terminal regexes after %import/%override/%extend), so the language is
the same up to the documented adaptations in :func:`grammar_to_llg_lark`.

    python bench/masks.py --vocab gpt-2 qwen2 --n-statements 12 6 \
        --engines grid llguidance llguidance-merged xgrammar
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


# ----------------------------------------------------------------------------- grammar
_CTRL = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\x0c": "\\f", "\x0b": "\\v"}


def _regex_literal(pat: str) -> str:
    out = []
    prev_bs = False
    for ch in pat:
        if ch in _CTRL:
            out.append(_CTRL[ch])
        elif ch == "/" and not prev_bs:
            out.append("\\/")
        else:
            out.append(ch)
        prev_bs = ch == "\\" and not prev_bs
    return "".join(out)


def grammar_to_llg_lark(g, merge_same_regex: bool = False) -> tuple[str, list[str]]:
    """Serialise grid-sql's resolved grammar (BNF + terminal regexes) to llguidance lark.

    Returns the text and the list of adaptations made (reported in RESULTS).
    """
    notes = [
        "grammar text generated from grid-sql's compiled SQLite grammar (lark resolves "
        "%import of common.lark, %override, %extend; [x]/x*/x+ already expanded to BNF)",
        "terminal priorities (COLUMN_NAME.-1 .. IDENT.-4) dropped: llguidance's lexer keeps "
        "every lexeme that matches and lets the parser choose, so keyword/identifier "
        "overlap is resolved by the grammar rather than by priority",
        "rules with an empty alternative written as `lhs: (alt | ...)?`",
        "rule names starting with `_` get an `r` prefix (lark would inline them)",
        '`%llguidance {"allow_initial_skip": true}`: grid-sql accepts leading whitespace '
        "and comments (%ignore before the first lexeme); llguidance does not by default",
        "NOT adapted (no equivalent in llguidance's lark): llguidance lexes like lark's "
        "`lexer='dynamic'` (a lexeme may end wherever the parser allows the next one to "
        "start, e.g. `selected` = SELECT + identifier `ed`, `SELECT0`), and has no "
        "keyword-over-identifier priority (`FROM` may also be an alias identifier). grid-sql "
        "lexes by maximal munch with terminal priorities. The languages therefore differ; "
        "the mask comparison table quantifies it on the timed steps",
    ]

    def rname(n: str) -> str:
        n = str(n)
        return "r" + n if n.startswith("_") else n

    def tname(n: str) -> str:
        n = str(n)
        return "T" + n if n.startswith("_") else n

    term_names = {str(t.name) for t in g.terminals}
    alias: dict[str, str] = {}
    if merge_same_regex:
        # Without priorities, terminals with the same regex are interchangeable for
        # llguidance: one lexeme instead of several identical ones (same language).
        first: dict[str, str] = {}
        for t in sorted(g.terminals, key=lambda t: str(t.name)):
            if not t.ignored:
                alias[str(t.name)] = first.setdefault(t.pattern, str(t.name))
        merged = sorted(k for k, a in alias.items() if k != a)
        notes.append(
            "variant `llguidance-merged`: terminals with identical regexes merged into one "
            f"lexeme ({', '.join(f'{k}->{alias[k]}' for k in merged)}); same llguidance language"
        )
    lines = ['%llguidance {"allow_initial_skip": true}', ""]
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in g.rules:
        by_lhs.setdefault(str(r.lhs), []).append(tuple(str(s) for s in r.rhs))
    order = [g.start] + sorted(k for k in by_lhs if k != g.start)
    for lhs in order:
        alts = by_lhs[lhs]
        empty = any(not a for a in alts)
        bodies = [
            " ".join(tname(alias.get(s, s)) if s in term_names else rname(s) for s in a)
            for a in alts
            if a
        ]
        body = " | ".join(bodies)
        if empty:
            body = f"({body})?"
        lines.append(f"{rname(lhs)}: {body}")
    lines.append("")
    for t in g.terminals:
        if alias.get(str(t.name), str(t.name)) != str(t.name):
            continue
        pat = t.pattern
        if t.is_string and pat.startswith("(?i:") and pat.endswith(")"):
            import re

            lit = re.sub(r"\\(.)", r"\1", pat[4:-1])
            lines.append(f"{tname(t.name)}: {json.dumps(lit)}i")
        else:
            lines.append(f"{tname(t.name)}: /{_regex_literal(pat)}/")
    for t in g.terminals:
        if t.ignored:
            lines.append(f"%ignore {tname(t.name)}")
    return "\n".join(lines) + "\n", notes


# ----------------------------------------------------------------------------- engines
class GridEngine:
    name = "grid-sql"

    def __init__(self, vocab_path: Path, kernels: bool = True):
        import grid_sql as gs
        from grid_sql.grammar.dialects import dialects_dir
        from grid_sql.mask.cache import MaskCache
        from grid_sql.mask.guide import Guide
        from grid_sql.mask.trie import get_token_trie

        t0 = time.perf_counter()
        self.v = gs.Vocabulary.from_gguf(str(vocab_path))
        trie = get_token_trie(self.v)
        t1 = time.perf_counter()
        # Grammar.dialect() is memoised per process: load through from_lark so the compile
        # is timed for every vocabulary (the parser runtime may still be shared in-process).
        d = dialects_dir()
        path = d / "sqlite.lark"
        g = gs.Grammar.from_lark(
            path.read_text(), "start", import_paths=[d], source_path=path, name="sqlite"
        )
        self.guide = Guide(g, self.v, cache=MaskCache(), trie=trie)
        self.guide.walker.use_kernel = kernels
        if kernels:
            self.guide.walker.kernel()  # the kernel's tables are part of the compile
        else:
            self.name = "grid-py"
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.grammar = g
        self.missed = False

    def start(self):
        self.m = self.guide.matcher()
        self.buf = self.m.allocate_bitmask()

    def fill(self):
        st = self.guide.cache.stats
        before = st.misses
        self.m.fill_next_token_bitmask(self.buf)
        self.missed = st.misses != before
        return self.buf

    def accept(self, tid: int) -> bool:
        try:
            self.m.accept_token(tid)
            return True
        except Exception:
            return False


class LLGEngine:
    name = "llguidance"

    def __init__(self, v, grammar, tokenize, merge_same_regex: bool = False):
        import llguidance as llg
        import llguidance.numpy as llnp

        self.llnp = llnp
        special = set(v.special_ids)

        class _Wrapper(llg.TokenizerWrapper):
            """Token bytes straight from the GGUF vocabulary; encoding = greedy longest match."""

            def __init__(self) -> None:  # no super().__init__: there is no HF tokenizer
                self.eos_token_id = v.eos_token_id
                self.bos_token_id = None
                # llguidance marks special tokens by a leading 0xFF byte
                self.tokens = [
                    (b"\xff" + b) if i in special else b for i, b in enumerate(v.token_bytes)
                ]
                self.special_token_ids = sorted(special)
                self.is_tokenizer_wrapper = True
                self._accepts_bytes = True
                self._gtokenizer = tokenize

        t0 = time.perf_counter()
        self.tok = llg.LLTokenizer(_Wrapper())
        t1 = time.perf_counter()
        self.lark, self.notes = grammar_to_llg_lark(grammar, merge_same_regex)
        if merge_same_regex:
            self.name = "llguidance-merged"
        self.m = llg.LLMatcher(self.tok, self.lark, log_level=1)
        if self.m.is_error():
            raise RuntimeError(f"llguidance grammar error: {self.m.get_error()}")
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.buf = llnp.allocate_token_bitmask(1, self.tok.vocab_size)

    def start(self):
        self.m.reset()

    def fill(self):
        self.llnp.fill_next_token_bitmask(self.m, self.buf, 0)
        return self.buf

    def accept(self, tid: int) -> bool:
        return bool(self.m.consume_token(tid)) and not self.m.is_error()


# ----------------------------------------------------------------------------- running
def run_statement(eng, ids, eos, timed, stats, masks=None, key=0, missed=None):
    eng.start()
    for step, tid in enumerate(ids + [eos]):
        t0 = time.perf_counter_ns()
        buf = eng.fill()
        dt = time.perf_counter_ns() - t0
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
        if not eng.accept(tid):
            stats["rejected"] += 1
            return False
    return True


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


def bench_vocab(vname: str, n_stmts: int, engines: list[str], log) -> dict:
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
        else:
            log(f"[{vname}] engine {name}: not available, skipped")
            continue
        stats = {"steps": 0, "rejected": 0}
        tw = time.perf_counter()
        for s in warm:
            run_statement(eng, tokenize(s.encode()), v.eos_token_id, None, stats)
        warm_s = time.perf_counter() - tw
        lat: list[float] = []
        missed: list[bool] = []
        tstats = {"steps": 0, "rejected": 0}
        masks: dict = {}
        all_masks[eng.name] = masks
        for k, s in enumerate(test):
            ids = tokenize(s.encode())
            ok = run_statement(eng, ids, v.eos_token_id, lat, tstats, masks, k, missed)
            if not ok:
                log(f"[{vname}] {eng.name} REJECTED in: {s}")
        hot: list[float] = []
        for s in test:  # replay: the warm (hit) pass
            run_statement(
                eng, tokenize(s.encode()), v.eos_token_id, hot, {"steps": 0, "rejected": 0}
            )
        summ = summarize(lat)
        wsum = summarize(hot)
        summ.update(warm_p50=wsum["p50"], warm_p99=wsum["p99"], warm_mean=wsum["mean"])
        if name.startswith("grid"):
            cold = [x for x, m in zip(lat, missed, strict=True) if m]
            csum = summarize(cold)
            summ.update(
                cold_n=len(cold),
                cold_p50=csum["p50"],
                cold_p99=csum["p99"],
                cache_bytes=eng.guide.cache.nbytes,
                cache_entries=len(eng.guide.cache),
                trie_bytes=eng.guide.trie.nbytes,
            )
        summ.update(
            tok_load_s=eng.tok_load_s,
            compile_s=eng.compile_s,
            warm_s=warm_s,
            warm_rejected=stats["rejected"],
            rejected=tstats["rejected"],
            steps=tstats["steps"],
        )
        res["engines"][eng.name] = summ
        log(f"[{vname}] {eng.name}: {json.dumps(summ)}")
    res["mask_diff"] = compare_masks(all_masks, res["n_vocab"])
    log(f"[{vname}] mask comparison vs grid-sql: {json.dumps(res['mask_diff'])}")
    return res


def compare_masks(all_masks: dict[str, dict], n_vocab: int) -> dict:
    """Per engine: steps whose full-vocabulary mask differs from grid-sql's, and by how much."""
    base = all_masks.get("grid-sql")
    out: dict = {}
    if base is None:
        return out

    def bits(w: np.ndarray) -> np.ndarray:
        return np.unpackbits(w.astype("<i4").view(np.uint8), bitorder="little")[:n_vocab]

    for name, masks in all_masks.items():
        if name == "grid-sql":
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
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    vers = {}
    for p in ("grid-sql", "llguidance", "xgrammar", "numpy", "lark"):
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


def _ratio(s: dict, base: dict | None, k: str) -> str:
    return f"{s[k] / base[k]:.3g}" if base and base.get(k) else "-"


def render(results: list[dict], host: dict, cmd: str, load: dict, skipped: list[str]) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Mask latency: grid-sql (kernels) vs grid-sql (Python walk) vs llguidance",
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
            "| p50 / grid | mean / grid |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        base = eng.get("grid-sql")
        for name, s in eng.items():
            r50 = f"{s['p50'] / base['p50']:.3g}" if base and base["p50"] else "-"
            rmean = f"{s['mean'] / base['mean']:.3g}" if base and base["mean"] else "-"
            out.append(
                f"| {name} | {s['n']} | {s['p50']:.1f} | {s['p90']:.1f} | {s['p99']:.1f} "
                f"| {s['max']:.1f} | {s['mean']:.1f} | {s['gt1ms']} "
                f"| {s['rejected']}/{s['warm_rejected']} | {s['tok_load_s']:.3f} "
                f"| {s['compile_s']:.3f} | {s['warm_s']:.2f} | {r50} | {rmean} |"
            )
        out += [
            "",
            "Warm (replay, all CI hits for grid-sql) and cold-miss steps (grid-sql steps of the "
            "unseen pass that walked at least one subtree), ratios against grid-sql (kernels):",
            "",
            "| engine | warm p50 µs | warm p99 µs | warm mean µs | warm p50 / grid "
            "| warm p99 / grid | unseen p99 / grid | cold-miss steps | cold-miss p50 µs "
            "| cold-miss p99 µs "
            "| cache entries / bytes | trie bytes |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
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
                f"| {_ratio(s, base, 'p99')} " + cold
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
        warn = r.get("llg_warnings")
        if warn:
            out += ["", "llguidance grammar warnings:", ""] + [f"- {w}" for w in warn]
        out += ["", "Timed statements:", ""]
        out += [f"- `{q}`" for q in r["test"]]
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS-masks.md"))
    ap.add_argument("--notes", default="", help="extra markdown appended to the report")
    args = ap.parse_args(argv)
    ns = args.n_statements
    if len(ns) == 1:
        ns = ns * len(args.vocab)
    skipped = []
    engines = list(args.engines)
    if "xgrammar" in engines:
        try:
            import xgrammar  # noqa: F401
        except ImportError:
            skipped.append("xgrammar: not importable in this venv (see reading below)")
            engines.remove("xgrammar")
        else:
            skipped.append("xgrammar: installed, but no EBNF conversion of the grammar yet")
            engines.remove("xgrammar")

    def log(msg: str) -> None:
        print(msg, flush=True)

    load_before = tuple(round(x, 2) for x in os.getloadavg())
    results = [bench_vocab(v, n, engines, log) for v, n in zip(args.vocab, ns, strict=True)]
    load_after = tuple(round(x, 2) for x in os.getloadavg())
    cmd = "python bench/masks.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(results, host_info(), cmd, {"before": load_before, "after": load_after}, skipped)
    notes = [n for r in results for n in r.get("llg_notes", [])]
    if notes:
        text += "## llguidance grammar adaptations\n\n"
        text += "\n".join(f"- {n}" for n in dict.fromkeys(notes)) + "\n"
    if args.notes:
        text += "\n" + Path(args.notes).read_text()
    Path(args.out).write_text(text)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
