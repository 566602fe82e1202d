"""Compile-time benchmark: grammar + tokenizer to a ready matcher (issue #4, paper §6.2).

Measures, phase by phase and side by side with llguidance on the same grammar text and the
same vocabulary:

- tokenizer setup: ``Vocabulary.from_gguf`` and the token trie, built (``TokenTrie.build``,
  an empty store) or read from the on-disk store (``get_token_trie``) (llguidance:
  ``LLTokenizer`` over the same token bytes);
- the L1 SQLite dialect compile: lark's grammar loader (``load_grammar`` + ``compile``),
  then grid-sql's IR + LALR(1) tables, and the union lexer DFA; llguidance: ``LLMatcher``
  on the exported Lark text (``grid_sql.grammar.export.to_llguidance_lark``);
- the Chinook role × schema re-specialization with the tokenizer loaded:
  ``role_grammar(...)`` (projection + lexicon + tables) for a role never seen in the process
  (tables memo cleared) and for a repeated one, then ``Guide(...)`` and the first mask;
  llguidance: ``LLMatcher`` on the role grammar's export (lexicons as word alternations)
  plus its first mask;
- memory: LALR tables, lexer DFA, token trie and the mask cache after the first fill.

Every phase is repeated (``--repeats``) with the in-process memos cleared and reported as the
median wall time and the median CPU time of the process (``time.process_time``): the host is
shared, and CPU time is the figure that load does not inflate.

    python bench/compile.py --vocab gpt-2 qwen2 --repeats 5 --out bench/RESULTS-compile.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata as md
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
TOKENIZERS = DATA / "tokenizers"
CHINOOK = DATA / "chinook" / "Chinook_Sqlite.sqlite"


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall ms, process CPU ms)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w0) * 1e3, (time.process_time() - c0) * 1e3


class Phase:
    """Wall/CPU samples of one phase over the repeats."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    def run(self, fn: Callable[[], Any]) -> Any:
        out, w, c = timed(fn)
        self.add(w, c)
        return out

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall) if self.wall else float("nan")

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")


def clear_memos() -> None:
    """Forget what a fresh process would not have: tables, lexer DFAs and their keys,
    validated lexicon word sets, tries (and with them their Rust copies)."""
    from grid_sql.grammar import lexer, tables
    from grid_sql.mask import trie

    tables.clear_memo()
    clear_role_memos()
    with lexer._CACHE_LOCK:
        lexer._CACHE.clear()
        lexer._KEYS.clear()
    with trie._cache_lock:
        trie._cache.clear()


def clear_role_memos() -> None:
    """Forget what only an earlier role taught the process: analysed LALR tables and the
    word sets already validated against their terminals (FUNCTION_NAME's are the same for
    every role of a dialect, so a server that has seen any role skips them; a role "never
    seen" here pays them)."""
    from grid_sql.grammar import ir, tables

    tables.clear_memo()
    if hasattr(ir, "_validated"):  # absent before 7b29d27 (A/B runs against older trees)
        with ir._validated_lock:
            ir._validated.clear()
    from grid_sql.policy import grammar as pg

    if hasattr(pg, "_spellings"):  # absent before f9f60f4
        pg._spellings.cache_clear()


def chinook_role() -> tuple[Any, Any]:
    from grid_sql.policy import AppPolicy, narrow, open_sqlite, sqlite_baseline
    from grid_sql.schema import introspect

    snap = introspect(open_sqlite(CHINOOK))
    app = AppPolicy.from_mapping(
        {"verbs": ["select"], "tables": {"deny": ["Employee"]}}, origin="bench/compile"
    )
    return snap, narrow(sqlite_baseline(snap), app, snap)


def llg_tokenizer(v: Any) -> Any:
    import llguidance as llg

    from grid_sql.mask.vocab import greedy_token_ids

    special = set(v.special_ids)

    class _Wrapper(llg.TokenizerWrapper):  # type: ignore[misc]
        """Token bytes straight from the GGUF vocabulary (as bench/masks.py)."""

        def __init__(self) -> None:  # no HF tokenizer behind it
            self.eos_token_id = v.eos_token_id
            self.bos_token_id = None
            self.tokens = [
                (b"\xff" + b) if i in special else b for i, b in enumerate(v.token_bytes)
            ]
            self.special_token_ids = sorted(special)
            self.is_tokenizer_wrapper = True
            self._accepts_bytes = True
            self._gtokenizer = lambda b: greedy_token_ids(v, b, max_len=32)

    return llg.LLTokenizer(_Wrapper())


def llg_ready(tok: Any, text: str) -> tuple[int, Any]:
    """LLMatcher on ``text`` and its first mask: (allowed tokens, matcher)."""
    import llguidance as llg
    import llguidance.numpy as llnp

    m = llg.LLMatcher(tok, text, log_level=1)
    if m.is_error():
        raise RuntimeError(f"llguidance: {m.get_error()}")
    buf = llnp.allocate_token_bitmask(1, tok.vocab_size)
    llnp.fill_next_token_bitmask(m, buf, 0)
    return int(np.unpackbits(buf.view(np.uint8)).sum()), m


def grid_ready(grammar: Any, v: Any, trie: Any) -> tuple[int, Any]:
    """Guide + matcher + first mask: (allowed tokens, guide)."""
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide

    guide = Guide(grammar, v, cache=MaskCache(), trie=trie)
    m = guide.matcher()
    buf = m.allocate_bitmask()
    return int(m.fill_next_token_bitmask(buf)), guide


def bench_grammar(repeats: int) -> dict[str, Any]:
    """L1 compile phases (vocabulary independent), with an empty and a warm on-disk store."""
    import tempfile

    from lark.load_grammar import load_grammar

    from grid_sql.grammar import Grammar
    from grid_sql.grammar.dialects import dialects_dir
    from grid_sql.store import ENV

    d = dialects_dir()
    path = d / "sqlite.lark"
    text = path.read_text()

    def from_lark() -> Any:
        return Grammar.from_lark(text, "start", import_paths=[d], source_path=path, name="sqlite")

    P = {k: Phase() for k in ("lark_load", "l1_cold", "lexer_cold", "l1", "lexer")}
    g = None
    old = os.environ.get(ENV)
    try:
        with tempfile.TemporaryDirectory(prefix="grid-compile-warm-") as warm:
            for _ in range(repeats):
                clear_memos()
                P["lark_load"].run(
                    lambda: load_grammar(text, str(path), [str(d)], False)[0].compile(
                        ["start"], set()
                    )
                )
                with tempfile.TemporaryDirectory(prefix="grid-compile-cold-") as cold:
                    os.environ[ENV] = cold
                    clear_memos()
                    g = P["l1_cold"].run(from_lark)
                    P["lexer_cold"].run(lambda: g.lexer)  # noqa: B023
                os.environ[ENV] = warm
                if not any(Path(warm).iterdir()):
                    clear_memos()
                    _ = from_lark().lexer  # populate the warm store
                clear_memos()
                g = P["l1"].run(from_lark)
                P["lexer"].run(lambda: g.lexer)  # noqa: B023
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old
    assert g is not None
    return {"grammar": g, **P}


def bench_vocab(vname: str, repeats: int, l1: Any, log: Callable[[str], None]) -> dict[str, Any]:
    import grid_sql as gs
    from grid_sql.grammar import Grammar
    from grid_sql.grammar.export import to_llguidance_lark
    from grid_sql.mask.trie import TokenTrie, get_token_trie
    from grid_sql.policy.grammar import role_grammar

    path = TOKENIZERS / f"ggml-vocab-{vname}.gguf"
    P: dict[str, Phase] = {
        k: Phase()
        for k in (
            "vocab",
            "trie_cold",
            "trie",
            "llg_tok",
            "l1_ready",
            "llg_l1",
            "role_new",
            "role_repeat",
            "guide",
            "first_fill",
            "export",
            "llg_role",
        )
    }
    snap, policy = chinook_role()
    L1 = Grammar.dialect("sqlite")
    out: dict[str, Any] = {"vocab": vname}
    l1_text = to_llguidance_lark(L1).text
    for i in range(repeats):
        log(f"  {vname} repeat {i + 1}/{repeats}")
        clear_memos()
        v = P["vocab"].run(lambda: gs.Vocabulary.from_gguf(path))  # noqa: B023
        P["trie_cold"].run(lambda: TokenTrie.build(v))  # noqa: B023
        if i == 0:
            _ = get_token_trie(v)  # populate the (temporary) store
        clear_memos()
        trie = P["trie"].run(lambda: get_token_trie(v))  # noqa: B023
        tok = P["llg_tok"].run(lambda: llg_tokenizer(v))  # noqa: B023
        # L1 to a ready matcher with the tokenizer loaded (grammar compile is timed apart)
        n_l1, _ = P["l1_ready"].run(lambda: grid_ready(l1, v, trie))  # noqa: B023
        n_llg_l1, _ = P["llg_l1"].run(lambda: llg_ready(tok, l1_text))  # noqa: B023
        # Chinook role: never seen (tables and word-validation memos cleared), then again
        clear_role_memos()
        rg = P["role_new"].run(lambda: role_grammar(L1, snap, policy))
        P["role_repeat"].run(lambda: role_grammar(L1, snap, policy))
        from grid_sql.mask.cache import MaskCache
        from grid_sql.mask.guide import Guide

        guide = P["guide"].run(lambda: Guide(rg, v, cache=MaskCache(), trie=trie))  # noqa: B023

        def first(guide: Any = guide) -> int:
            m = guide.matcher()
            return int(m.fill_next_token_bitmask(m.allocate_bitmask()))

        n_role = P["first_fill"].run(first)
        role_text = P["export"].run(lambda: to_llguidance_lark(rg).text)  # noqa: B023
        n_llg_role, _ = P["llg_role"].run(lambda: llg_ready(tok, role_text))  # noqa: B023
        out.update(
            size=v.size,
            allowed=dict(l1=n_l1, llg_l1=n_llg_l1, role=n_role, llg_role=n_llg_role),
            memory=dict(
                l1_tables=l1.tables.nbytes,
                role_tables=rg.tables.nbytes,
                lexer=len(rg.lexer.trans_bytes)
                + sum((m.bit_length() + 7) // 8 for m in rg.lexer.accept_masks)
                + sum((m.bit_length() + 7) // 8 for m in rg.lexer.live_masks),
                trie=trie.nbytes,
                cache_entries=len(guide.cache),
                cache_bytes=guide.cache.nbytes,
                role_states=rg.tables.n_states,
            ),
        )
    out["phases"] = P
    return out


def best_cpu_ms(fn: Callable[[], Any], n: int, setup: Callable[[], Any] | None = None) -> float:
    """Smallest thread CPU time of ``n`` runs (the least disturbed by co-tenants);
    ``setup`` runs untimed before each."""
    best = float("inf")
    for _ in range(n):
        if setup is not None:
            setup()
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best * 1e3


def breakdown(vnames: list[str], n: int) -> tuple[list[tuple[str, str, float]], dict[str, int]]:
    """Best-of-n CPU ms of each piece of a re-specialization, for the reading; and the
    bytes every guide of a vocabulary shares instead of copying (Rust trie, union DFA)."""
    import grid_sql as gs
    from grid_sql.grammar import Grammar, tables
    from grid_sql.grammar.lexicon import SchemaLexicon
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.trie import TokenTrie
    from grid_sql.mask.walk import Walker, scan_dfa
    from grid_sql.parser.incremental import ParserRuntime
    from grid_sql.policy.grammar import role_grammar

    snap, policy = chinook_role()
    L1 = Grammar.dialect("sqlite")
    rg = role_grammar(L1, snap, policy)
    assert rg.projection is not None and rg.lexicon is not None
    l2 = L1.project(rg.projection)
    lexicon = rg.lexicon
    words = {name: sorted(c.words) for name, c in lexicon.categories.items()}
    rows: list[tuple[str, str, float]] = []
    shared: dict[str, int] = {}

    def fresh_tables() -> None:
        tables.clear_memo()
        rg.__dict__.pop("tables", None)
        _ = rg.tables

    def new_runtime() -> ParserRuntime:
        fresh_tables()  # the rows of fresh tables are converted on first use only
        return ParserRuntime(rg)

    rows.append(
        (
            "-",
            "role_grammar, same role (tables memo hit)",
            best_cpu_ms(lambda: role_grammar(L1, snap, policy), n),
        )
    )
    rows.append(
        (
            "-",
            "role_grammar, role never seen (tables + validation memos cleared)",
            best_cpu_ms(lambda: role_grammar(L1, snap, policy), n, setup=clear_role_memos),
        )
    )
    rows.append(
        (
            "-",
            "  of which L1.project(role projection) (tables memo hit)",
            best_cpu_ms(lambda: L1.project(rg.projection), n),  # type: ignore[arg-type]
        )
    )
    rows.append(
        (
            "-",
            "  of which SchemaLexicon(words) (grammar/lexicon.py, called by the policy)",
            best_cpu_ms(lambda: SchemaLexicon(words, fold_bare_case=True), n),
        )
    )
    rows.append(
        (
            "-",
            "  of which L2.with_lexicon(lexicon), words validated before",
            best_cpu_ms(lambda: l2.with_lexicon(lexicon), n),
        )
    )
    rows.append(
        (
            "-",
            "LALR(1) tables of the role grammar (Rust kernel + arrays)",
            best_cpu_ms(fresh_tables, n),
        )
    )
    rows.append(
        (
            "-",
            "ParserRuntime(role grammar), fresh tables (parser/incremental.py)",
            best_cpu_ms(lambda: ParserRuntime(rg), n, setup=fresh_tables),
        )
    )
    rt = new_runtime()
    for vn in vnames:
        v = gs.Vocabulary.from_gguf(TOKENIZERS / f"ggml-vocab-{vn}.gguf")
        trie = TokenTrie.build(v)
        rows.append(
            (
                vn,
                "Walker(runtime, trie) (mask/walk.py)",
                best_cpu_ms(lambda trie=trie: Walker(rt, trie), n),
            )
        )
        rows.append(
            (
                vn,
                "  first Rust copy of the trie, once per vocabulary (TokenTrie.kernel_arrays)",
                best_cpu_ms(
                    trie.kernel_arrays,
                    n,
                    setup=lambda trie=trie: object.__setattr__(trie, "_kernel_arrays", None),
                ),
            )
        )
        w = Walker(rt, trie)
        rows.append(
            (
                vn,
                "Walker._build_kernel(): TrieWalker over the shared trie + DFA",
                best_cpu_ms(w._build_kernel, n),
            )
        )
        holder: list[Any] = []

        def new_guide(v: Any = v, trie: Any = trie, holder: list[Any] = holder) -> None:
            fresh_tables()
            ParserRuntime._cache.pop(rg, None)  # a runtime over the fresh tables
            holder[:] = [Guide(rg, v, cache=MaskCache(), trie=trie)]
            holder[0].walker.kernel()

        def first_fill(holder: list[Any] = holder) -> None:
            m = holder[0].matcher()
            m.fill_next_token_bitmask(m.allocate_bitmask())

        rows.append(
            (
                vn,
                "first mask with the walker built (cold trie walk + table rows it reads)",
                best_cpu_ms(first_fill, n, setup=new_guide),
            )
        )
        shared[f"trie_{vn}"] = int(trie.kernel_arrays().nbytes)
    shared["dfa"] = int(scan_dfa(rt, max(1, (len(rg.terminals) + 63) // 64)).nbytes)
    return rows, shared


def respecialization_best(vnames: list[str], n: int) -> list[tuple[str, float, float, float]]:
    """Best-of-n thread CPU ms of a whole new-role re-specialization, end to end as one
    serving thread pays it (``--resp-best``): ``role_grammar`` with the role memos cleared,
    ``Guide``, first mask; the best run's (role_grammar, Guide, first mask) split. Thread
    CPU leaves out other threads' time (process CPU in the tables above also counts e.g.
    worker threads still spinning after llguidance's or the kernels' parallel work)."""
    import grid_sql as gs
    from grid_sql.grammar import Grammar
    from grid_sql.mask.cache import MaskCache
    from grid_sql.mask.guide import Guide
    from grid_sql.mask.trie import get_token_trie
    from grid_sql.policy.grammar import role_grammar

    snap, policy = chinook_role()
    L1 = Grammar.dialect("sqlite")
    _ = L1.lexer
    out = []
    for vn in vnames:
        v = gs.Vocabulary.from_gguf(TOKENIZERS / f"ggml-vocab-{vn}.gguf")
        trie = get_token_trie(v)
        warm = Guide(L1, v, cache=MaskCache(), trie=trie)  # the dialect guide already served
        m = warm.matcher()
        m.fill_next_token_bitmask(m.allocate_bitmask())
        best: tuple[float, float, float] | None = None
        for _ in range(n):
            clear_role_memos()
            t0 = time.thread_time()
            rg = role_grammar(L1, snap, policy)
            t1 = time.thread_time()
            g = Guide(rg, v, cache=MaskCache(), trie=trie)
            t2 = time.thread_time()
            m = g.matcher()
            m.fill_next_token_bitmask(m.allocate_bitmask())
            t3 = time.thread_time()
            run = ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)
            if best is None or sum(run) < sum(best):
                best = run
        assert best is not None
        out.append((vn, *best))
    return out


def host_info() -> dict[str, Any]:
    from hostinfo import cpu_model

    cpu = cpu_model("?")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "grid_sql", "kernels"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        commit, dirty = "?", ""
    versions = {}
    for p in ("grid-sql", "llguidance", "lark", "numpy"):
        try:
            versions[p] = md.version(p)
        except md.PackageNotFoundError:
            versions[p] = "not installed"
    return {
        "uname": " ".join(platform.uname()),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "commit": commit + (" (working tree has uncommitted changes)" if dirty else ""),
        "versions": versions,
    }


def fmt(p: Phase) -> str:
    return f"{p.wall_ms:.1f} | {p.cpu_ms:.1f}"


def render(
    cmd: str,
    host: dict[str, Any],
    load: tuple[Any, Any],
    gram: dict,
    vres: list,
    rows: list,
    shared: dict[str, int],
) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    L = [
        "# Compile time: grammar + tokenizer to a ready matcher (grid-sql vs llguidance)",
        "",
        f"- command: `{cmd}`",
        f"- date: {now}; grid-sql commit {host['commit']}",
        f"- host: `{host['uname']}`",
        f"- CPU: {host['cpu']}, {host['cores']} cores; Python {host['python']}",
        f"- load average (1/5/15 min) before: {load[0]}, after: {load[1]}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in host["versions"].items()),
        "- every figure: median over the repeats of wall ms | process CPU ms, in-process "
        "memos (LALR tables, lexer DFAs, tries) cleared before each repeat",
        "",
        "## L1 SQLite dialect grammar (vocabulary independent)",
        "",
        "Cold store: `GRID_SQL_CACHE_DIR` is a fresh empty directory (first start on a "
        "machine); warm store: the grammar, lexer and token-trie entries exist (every later "
        "start). The store is a temporary directory, never the user's cache.",
        "",
        "| phase | wall ms | CPU ms |",
        "|---|---|---|",
        f"| lark grammar loader alone (load_grammar + compile: parse .lark, resolve imports) | "
        f"{fmt(gram['lark_load'])} |",
        f"| Grammar.from_lark, cold store (loader + IR + LALR(1) tables in Rust) | "
        f"{fmt(gram['l1_cold'])} |",
        f"| union lexer DFA, cold store (Rust, regex-automata) | {fmt(gram['lexer_cold'])} |",
        f"| Grammar.from_lark, warm store (entry verified + IR + LALR(1) tables in Rust) | "
        f"{fmt(gram['l1'])} |",
        f"| union lexer DFA, warm store (entry digest checked) | {fmt(gram['lexer'])} |",
        "",
    ]
    for r in vres:
        P = r["phases"]
        m = r["memory"]
        a = r["allowed"]
        grid_total_w = sum(P[k].wall_ms for k in ("vocab", "trie", "l1_ready")) + (
            gram["l1"].wall_ms + gram["lexer"].wall_ms
        )
        grid_total_c = sum(P[k].cpu_ms for k in ("vocab", "trie", "l1_ready")) + (
            gram["l1"].cpu_ms + gram["lexer"].cpu_ms
        )
        cold_w = grid_total_w - gram["l1"].wall_ms - gram["lexer"].wall_ms - P["trie"].wall_ms
        cold_w += gram["l1_cold"].wall_ms + gram["lexer_cold"].wall_ms + P["trie_cold"].wall_ms
        cold_c = grid_total_c - gram["l1"].cpu_ms - gram["lexer"].cpu_ms - P["trie"].cpu_ms
        cold_c += gram["l1_cold"].cpu_ms + gram["lexer_cold"].cpu_ms + P["trie_cold"].cpu_ms
        llg_total_w = P["llg_tok"].wall_ms + P["llg_l1"].wall_ms
        llg_total_c = P["llg_tok"].cpu_ms + P["llg_l1"].cpu_ms
        resp_w = P["role_new"].wall_ms + P["guide"].wall_ms + P["first_fill"].wall_ms
        resp_c = P["role_new"].cpu_ms + P["guide"].cpu_ms + P["first_fill"].cpu_ms
        rep_w = P["role_repeat"].wall_ms + P["guide"].wall_ms + P["first_fill"].wall_ms
        rep_c = P["role_repeat"].cpu_ms + P["guide"].cpu_ms + P["first_fill"].cpu_ms
        L += [
            f"## Vocabulary {r['vocab']} ({r['size']} tokens)",
            "",
            "| phase | grid-sql wall ms | grid-sql CPU ms | llguidance wall ms | "
            "llguidance CPU ms |",
            "|---|---|---|---|---|",
            f"| tokenizer: Vocabulary.from_gguf | {fmt(P['vocab'])} | | |",
            f"| tokenizer: TokenTrie.build (cold store) | {fmt(P['trie_cold'])} | | |",
            f"| tokenizer: get_token_trie, warm store / LLTokenizer | {fmt(P['trie'])} | "
            f"{fmt(P['llg_tok'])} |",
            f"| L1 grammar compile, warm store (from_lark + lexer, above) / LLMatcher | "
            f"{gram['l1'].wall_ms + gram['lexer'].wall_ms:.1f} | "
            f"{gram['l1'].cpu_ms + gram['lexer'].cpu_ms:.1f} | {fmt(P['llg_l1'])} |",
            f"| L1 Guide + first mask (grid-sql) | {fmt(P['l1_ready'])} | (in LLMatcher row) | |",
            f"| **L1 total: tokenizer + grammar to first mask (warm store)** | "
            f"**{grid_total_w:.1f}** | **{grid_total_c:.1f}** | **{llg_total_w:.1f}** | "
            f"**{llg_total_c:.1f}** |",
            f"| L1 total, cold store (first start on the machine) | {cold_w:.1f} | "
            f"{cold_c:.1f} | {llg_total_w:.1f} | {llg_total_c:.1f} |",
            f"| Chinook role_grammar, role never seen (projection + lexicon + tables) | "
            f"{fmt(P['role_new'])} | | |",
            f"| Chinook role_grammar, same role again (tables memo hit) | "
            f"{fmt(P['role_repeat'])} | | |",
            f"| Guide(role grammar) | {fmt(P['guide'])} | | |",
            f"| first mask (matcher + fill; builds the Rust TrieWalker over the shared trie) | "
            f"{fmt(P['first_fill'])} | | |",
            f"| role grammar export to llguidance Lark (input of the next row) | "
            f"{fmt(P['export'])} | | |",
            f"| llguidance LLMatcher(role text) + first mask | | | {fmt(P['llg_role'])} |",
            f"| **re-specialization, new role: role_grammar + Guide + first mask** | "
            f"**{resp_w:.1f}** | **{resp_c:.1f}** | **{P['llg_role'].wall_ms:.1f}** | "
            f"**{P['llg_role'].cpu_ms:.1f}** |",
            f"| re-specialization, repeated role | {rep_w:.1f} | {rep_c:.1f} | | |",
            "",
            f"First-mask sizes (allowed tokens): L1 grid-sql {a['l1']} / llguidance "
            f"{a['llg_l1']}; role grid-sql {a['role']} / llguidance {a['llg_role']} "
            "(the languages differ as documented in bench/RESULTS-masks.md).",
            "",
            "Memory (bytes): "
            f"L1 LALR tables {m['l1_tables']:,}; role LALR tables {m['role_tables']:,} "
            f"({m['role_states']} states); union lexer DFA {m['lexer']:,}; token trie "
            f"{m['trie']:,} (shared by every guide of the vocabulary); mask cache after the "
            f"first fill {m['cache_entries']} entries / {m['cache_bytes']:,}.",
            "",
        ]
    if rows:
        L += [
            "## Where a re-specialization's time goes (best-of-N thread CPU ms)",
            "",
            "| vocabulary | piece | CPU ms |",
            "|---|---|---|",
        ]
        L += [f"| {v} | {what} | {ms:.1f} |" for v, what, ms in rows]
        L.append("")
    if shared:
        L.append(
            "Shared, not copied, by every further guide (bytes): Rust union DFA "
            f"{shared['dfa']:,} (one per lexer); "
            + "; ".join(
                f"Rust trie {k[5:]} {b:,} (one per vocabulary)"
                for k, b in shared.items()
                if k.startswith("trie_")
            )
            + "."
        )
        L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", nargs="+", default=["gpt-2", "qwen2"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--breakdown", type=int, default=15, help="best-of-N runs (0: skip)")
    ap.add_argument(
        "--resp-best",
        type=int,
        default=0,
        metavar="N",
        help="only print the best-of-N thread CPU of a new-role re-specialization and exit",
    )
    args = ap.parse_args(argv)
    if args.resp_best:
        for vn, r, g, f in respecialization_best(args.vocab, args.resp_best):
            print(
                f"{vn}: {r + g + f:.1f} ms thread CPU (role_grammar {r:.1f}, Guide {g:.1f}, "
                f"first mask {f:.1f}), best of {args.resp_best}"
            )
        return 0

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load0 = tuple(round(x, 2) for x in os.getloadavg())
    log("L1 grammar")
    gram = bench_grammar(args.repeats)
    import tempfile

    from grid_sql.store import ENV

    old_env = os.environ.get(ENV)
    with tempfile.TemporaryDirectory(prefix="grid-compile-tries-") as tmp:
        os.environ[ENV] = tmp  # tries and role lexers stored here, not in the user's cache
        try:
            vres = [bench_vocab(v, args.repeats, gram["grammar"], log) for v in args.vocab]
        finally:
            if old_env is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = old_env
    log("breakdown")
    rows, shared = breakdown(args.vocab, args.breakdown) if args.breakdown else ([], {})
    load1 = tuple(round(x, 2) for x in os.getloadavg())
    cmd = "python bench/compile.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(cmd, host_info(), (load0, load1), gram, vres, rows, shared)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
