"""Why XGrammar is slow on the SQL grammar: the diagnostics behind bench/RESULTS-masks.md.

`bench/masks.py` measures XGrammar against grid-sql and llguidance; this script answers the
question its numbers raise (seconds per fill on the full-language export, ~0.6 s per fill on
Qwen2 even with the ``style="xgrammar"`` export). Each subcommand is one experiment; all of
them call XGrammar directly on the exports of ``grid_sql.grammar.export.to_ebnf`` with the
GGUF token bytes (RAW, specials given an empty spelling, as ``masks.XGREngine`` does):

* ``sp`` — the ignored-material prefix ``sp`` in front of every terminal, varied in the
  full-language GBNF export: as exported (whitespace and both comment kinds), whitespace only
  as one class star, whitespace + line comments, whitespace + block comments. Per-fill ms on
  a short statement, GPT-2.
* ``lookahead`` — the ``style="xgrammar"`` export with and without its maximal-munch
  lookaheads, paired in one process over masks.py's timed statements (alternating order).
* ``subsets`` — one Qwen2 fill at ``... JOIN AIRPORTS AS T2 ON T1|`` with all but a subset
  of the vocabulary given an empty spelling: which tokens the time goes to.
* ``parity`` — where XGrammar's masks differ from grid-sql's on masks.py's statements, by
  class of token (comment openers, non-UTF-8 bytes, other).

Not timed tests: numbers depend on the host and its load; the report prints both.

    python bench/xgrammar_profile.py sp lookahead subsets parity > /tmp/xgr-profile.md
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from masks import TOKENIZERS, GridEngine, XGREngine, sample_statements  # noqa: E402

import grid_sql as gs  # noqa: E402
from grid_sql.grammar import Grammar  # noqa: E402
from grid_sql.grammar.export import to_ebnf  # noqa: E402
from grid_sql.mask.vocab import greedy_token_ids  # noqa: E402

SHORT_SQL = "SELECT a FROM t WHERE a = 1 AND b = 2"
JOIN_PREFIX = "SELECT count(*) FROM FLIGHTS AS T1 JOIN AIRPORTS AS T2 ON T1"
WS_CLASS = r"[\t\n\x0B\x0C\r ]"


def vocab(name: str) -> gs.Vocabulary:
    return gs.Vocabulary.from_gguf(TOKENIZERS / f"ggml-vocab-{name}.gguf")


class Xgr:
    """An XGrammar compiler over ``v``'s token bytes, with ``keep`` deciding which tokens keep
    their spelling (the rest become empty = special = never allowed)."""

    def __init__(self, v: gs.Vocabulary, keep: Callable[[int, bytes], bool] | None = None):
        import xgrammar as xgr

        special = set(v.special_ids)
        self.enc = [
            b"" if i in special or (keep is not None and not keep(i, b)) else b
            for i, b in enumerate(v.token_bytes)
        ]
        self.kept = sum(1 for b in self.enc if b)
        info = xgr.TokenizerInfo(
            self.enc, xgr.VocabType.RAW, vocab_size=len(self.enc), stop_token_ids=[v.eos_token_id]
        )
        self.xgr = xgr
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.buf = np.zeros((1, (len(self.enc) + 31) // 32), dtype=np.int32)

    def compile(self, ebnf: str) -> tuple[Any, float]:
        t0 = time.perf_counter()
        cg = self.compiler.compile_grammar(ebnf)
        return cg, time.perf_counter() - t0

    def fill_ms(self, matcher: Any) -> float:
        t0 = time.perf_counter_ns()
        matcher.fill_next_token_bitmask(self.buf, 0)
        return (time.perf_counter_ns() - t0) / 1e6


def _sp(text: str, body: str) -> str:
    out, n = re.subn(r"^sp ::= .*$", lambda _m: f"sp ::= {body}", text, flags=re.M)
    if n != 1:
        raise SystemExit("the export has no single `sp ::=` rule; this experiment is stale")
    return out


def exp_sp(cap_s: float) -> list[str]:
    v = vocab("gpt-2")
    x = Xgr(v)
    gbnf = to_ebnf(Grammar.dialect("sqlite"), style="gbnf").text
    line = r'("--" ([^\n])*)'
    block = r'("/*" (([^*] | ("*")+ [^*/]))* ("*")+ "/")'
    variants = {
        "as exported (whitespace, line and block comments)": gbnf,
        "whitespace only, one class star": _sp(gbnf, f"{WS_CLASS}*"),
        "whitespace + line comments": _sp(gbnf, f"({line} | ({WS_CLASS}))*"),
        "whitespace + block comments": _sp(gbnf, f"({block} | ({WS_CLASS}))*"),
    }
    ids = greedy_token_ids(v, SHORT_SQL.encode(), max_len=32)
    rows = [
        f"### `sp` variants of the GBNF export (GPT-2, `{SHORT_SQL}`, {len(ids)} tokens, "
        f"cap {cap_s:.0f} s per variant)",
        "",
        "| `sp` | compile s | fills | min ms | median ms | max ms | per-fill ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, text in variants.items():
        cg, tc = x.compile(text)
        m = x.xgr.GrammarMatcher(cg, max_rollback_tokens=0)
        times: list[float] = []
        start = time.perf_counter()
        for tid in ids:
            times.append(x.fill_ms(m))
            if not m.accept_token(tid):
                raise SystemExit(f"{label}: XGrammar rejected {v.token_bytes[tid]!r}")
            if time.perf_counter() - start > cap_s:
                break
        a = np.array(times)
        rows.append(
            f"| {label} | {tc:.2f} | {len(a)} | {a.min():.1f} | {np.median(a):.1f} | "
            f"{a.max():.1f} | {' '.join(f'{t:.0f}' for t in a)} |"
        )
    return rows


def exp_lookahead(rounds: int) -> list[str]:
    v = vocab("gpt-2")
    x = Xgr(v)
    la = to_ebnf(Grammar.dialect("sqlite"), style="xgrammar").text
    nola = re.sub(r" \(= \[[^\n]*\]\)$", "", la, flags=re.M)
    if "(= " not in la or "(= " in nola:
        raise SystemExit("the xgrammar export's lookaheads changed form; this experiment is stale")
    arms = {"with lookaheads": x.compile(la)[0], "without lookaheads": x.compile(nola)[0]}
    stmts = sample_statements(8)[4:]  # masks.py's timed half for GPT-2
    res: dict[str, list[float]] = {k: [] for k in arms}
    for rnd in range(rounds):
        order = list(arms) if rnd % 2 == 0 else list(reversed(arms))
        for s in stmts:
            ids = greedy_token_ids(v, s.encode(), max_len=32)
            for k in order:
                m = x.xgr.GrammarMatcher(arms[k], max_rollback_tokens=0)
                for tid in ids:
                    res[k].append(x.fill_ms(m) * 1e3)
                    if not m.accept_token(tid):
                        raise SystemExit(f"{k}: XGrammar rejected {v.token_bytes[tid]!r} in {s!r}")
                res[k].append(x.fill_ms(m) * 1e3)  # the fill that must admit EOS
    rows = [
        f"### Keyword lookaheads, paired (GPT-2, {len(stmts)} statements, {rounds} alternating "
        "rounds)",
        "",
        "| export | fills | p50 µs | p90 µs | p99 µs | mean µs |",
        "|---|---|---|---|---|---|",
    ]
    for k, xs in res.items():
        a = np.array(xs)
        p50, p90, p99 = np.percentile(a, [50, 90, 99])
        rows.append(f"| {k} | {len(a)} | {p50:.0f} | {p90:.0f} | {p99:.0f} | {a.mean():.0f} |")
    return rows


def _ascii_punct(b: bytes) -> bool:
    return all(c < 128 for c in b) and any(not (c == 32 or chr(c).isalnum()) for c in b)


def _mixed(b: bytes) -> bool:
    return (
        _ascii_punct(b) and not any(c in b"\n\t\r" for c in b) and any(chr(c).isalnum() for c in b)
    )


def exp_subsets(repeats: int) -> list[str]:
    q = vocab("qwen2")
    g2 = set(vocab("gpt-2").token_bytes)
    text = to_ebnf(Grammar.dialect("sqlite"), style="xgrammar").text
    ids = greedy_token_ids(q, JOIN_PREFIX.encode(), max_len=32)
    need = set(ids)
    subsets: dict[str, Callable[[bytes], bool]] = {
        "full vocabulary": lambda b: True,
        "also GPT-2 tokens": lambda b: b in g2,
        "letters/digits/space only": lambda b: all(c == 32 or chr(c).isalnum() for c in b),
        "non-ASCII": lambda b: any(c >= 128 for c in b),
        "ASCII with punctuation": _ascii_punct,
        "ASCII punctuation mixed with letters/digits, no newline": _mixed,
        "ASCII punctuation only, no newline": lambda b: (
            _ascii_punct(b) and not any(c in b"\n\t\r" or chr(c).isalnum() for c in b)
        ),
    }
    rows = [
        f"### Qwen2 vocabulary subsets, one fill at `{JOIN_PREFIX}|` (min of {repeats})",
        "",
        "| tokens kept (the prefix's own tokens always kept) | kept | fill ms |",
        "|---|---|---|",
    ]
    for label, f in subsets.items():
        x = Xgr(q, keep=lambda i, b, f=f: i in need or f(b))
        m = x.xgr.GrammarMatcher(x.compile(text)[0], max_rollback_tokens=0)
        for tid in ids:
            if not m.accept_token(tid):
                raise SystemExit(f"XGrammar rejected {q.token_bytes[tid]!r}")
        best = min(x.fill_ms(m) for _ in range(repeats))
        rows.append(f"| {label} | {x.kept:,} | {best:.1f} |")
    return rows


def exp_parity(vname: str) -> list[str]:
    grid = GridEngine(TOKENIZERS / f"ggml-vocab-{vname}.gguf")
    v = grid.v
    x = XGREngine(v, grid.grammar, 1, "xgrammar")
    stmts = sample_statements(8)[4:] if vname == "gpt-2" else sample_statements(4)[2:]
    n = len(v.token_bytes)

    def bits(buf: np.ndarray) -> np.ndarray:
        return np.unpackbits(buf.reshape(-1).view(np.uint8), bitorder="little")[:n].astype(bool)

    only_grid: collections.Counter[str] = collections.Counter()
    only_x = steps = differ = 0
    for s in stmts:
        grid.start()
        x.start()
        ids = greedy_token_ids(v, s.encode(), max_len=32)
        for tid in [*ids, v.eos_token_id]:
            g, xx = bits(grid.fill()).copy(), bits(x.fill()).copy()
            steps += 1
            differ += int((g != xx).any())
            for t in np.nonzero(g & ~xx)[0]:
                tb = v.token_bytes[t]
                if b"--" in tb or b"/*" in tb:
                    only_grid["contains a comment opener `--` or `/*`"] += 1
                elif tb.endswith((b"-", b"/")) and len(tb) > 1:
                    only_grid["ends in `-` or `/` after another byte (a comment may start)"] += 1
                else:
                    try:
                        tb.decode("utf-8")
                        only_grid["other"] += 1
                    except UnicodeDecodeError:
                        only_grid["not UTF-8 (bytes inside a string literal)"] += 1
            only_x += int((xx & ~g).sum())
            if tid == v.eos_token_id:
                break
            grid.accept(tid)
            x.accept(tid)
    rows = [
        f"### Mask parity, {vname}: {steps} steps over {len(stmts)} statements, {differ} differ",
        "",
        f"- bits XGrammar allows and grid-sql refuses: {only_x:,}",
        "- bits grid-sql allows and XGrammar refuses, by class of token:",
        "",
        "| class | bits |",
        "|---|---|",
    ]
    rows += [f"| {k} | {c:,} |" for k, c in only_grid.most_common()]
    return rows


def header(argv: list[str]) -> list[str]:
    from importlib.metadata import version

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "grid_sql", "bench"], capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", ""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return [
        "## XGrammar diagnostics (bench/xgrammar_profile.py)",
        "",
        f"- command: `python bench/xgrammar_profile.py {' '.join(argv)}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; grid-sql commit {commit}"
        + (" (working tree has uncommitted changes)" if dirty else ""),
        f"- host: `{' '.join(platform.uname())}`; CPU: {cpu}, {os.cpu_count()} cores; "
        f"Python {platform.python_version()}; xgrammar {version('xgrammar')}",
        f"- load average before: {os.getloadavg()}",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiments", nargs="+", choices=["sp", "lookahead", "subsets", "parity"])
    ap.add_argument("--cap-s", type=float, default=20.0, help="sp: seconds per variant")
    ap.add_argument("--rounds", type=int, default=2, help="lookahead: alternating rounds")
    ap.add_argument("--repeats", type=int, default=3, help="subsets: fills per subset (min)")
    ap.add_argument("--parity-vocab", default="gpt-2", choices=["gpt-2", "qwen2"])
    a = ap.parse_args(argv)
    out = header(argv)
    for e in a.experiments:
        if e == "sp":
            out += exp_sp(a.cap_s)
        elif e == "lookahead":
            out += exp_lookahead(a.rounds)
        elif e == "subsets":
            out += exp_subsets(a.repeats)
        else:
            out += exp_parity(a.parity_vocab)
        out.append("")
        print("\n".join(out), flush=True)
        out = []
    print(f"- load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
