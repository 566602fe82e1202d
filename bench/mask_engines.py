"""The engines ``bench/masks.py`` times side by side, one adapter each: grid-sql (kernels or
the Python walk), llguidance, XGrammar and GLRMask, all with the same interface (``start``,
``pre_fill``/``fill``/``post_fill``, ``accept``) over the same token ids.

Split out of ``masks.py`` (issue #24: no module over 800 lines); ``masks`` re-exports them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


# ----------------------------------------------------------------------------- memory
def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc), for compile-time memory deltas."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


# ----------------------------------------------------------------------------- engines
class GuideEngine:
    """The engine interface over a grid-sql ``Guide`` (any grammar): what the protocol
    calls between and around the timed fills. ``bench/role_masks.py`` wraps role grammars
    with it; :class:`GridEngine` adds the dialect grammar's compile."""

    name = "grid-sql"
    missed = False

    def __init__(self, name: str, guide) -> None:
        self.name, self.guide = name, guide

    def start(self):
        self.m = self.guide.matcher()
        self.buf = self.m.allocate_bitmask()

    def cache_bytes(self) -> int:
        """Bytes of stored mask entries: the MaskCache's, plus the Rust filler's store."""
        f = self.guide._filler
        return self.guide.cache.nbytes + (0 if f is None else f.store_bytes)

    def cache_entries(self) -> int:
        f = self.guide._filler
        return len(self.guide.cache) + (0 if f is None else f.n_entries)

    def pre_fill(self):
        """Untimed, before each timed fill: the walk count a miss is detected by."""
        self._walks = self.guide.n_walks

    def fill(self):
        self.m.fill_next_token_bitmask(self.buf)
        return self.buf

    def post_fill(self):
        """Untimed, after each timed fill: a miss is a fill that ran a trie walk (either
        fill path). Kept out of the timed region: two walk-count reads are ~0.3 µs, a
        tenth of a warm fill."""
        self.missed = self.guide.n_walks != self._walks

    def accept(self, tid: int) -> bool:
        try:
            self.m.accept_token(tid)
            return True
        except Exception:
            return False


class GridEngine(GuideEngine):
    name = "grid-sql"

    def __init__(self, vocab_path: Path, kernels: bool = True, kernel_fill: bool = True):
        import grid_sql as gs
        from grid_sql.grammar.dialects import dialects_dir
        from grid_sql.mask.cache import MaskCache
        from grid_sql.mask.guide import Guide
        from grid_sql.mask.trie import get_token_trie

        r0 = rss_bytes()
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
        self.guide = Guide(g, self.v, cache=MaskCache(), trie=trie, kernel_fill=kernel_fill)
        self.guide.walker.use_kernel = kernels
        if kernels:
            self.guide.walker.kernel()  # the kernel's tables are part of the compile
        else:
            self.name = "grid-py"
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.rss_compile = rss_bytes() - r0
        self.grammar = g
        self.missed = False


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

        from grid_sql.grammar.export import to_llguidance_lark

        r0 = rss_bytes()
        t0 = time.perf_counter()
        self.tok = llg.LLTokenizer(_Wrapper())
        t1 = time.perf_counter()
        export = to_llguidance_lark(grammar, merge_same_regex=merge_same_regex)
        self.lark, self.notes = export.text, list(export.adaptations)
        if merge_same_regex:
            self.name = "llguidance-merged"
        self._new = lambda: llg.LLMatcher(self.tok, self.lark, log_level=1)
        self.m = self._new()
        if self.m.is_error():
            raise RuntimeError(f"llguidance grammar error: {self.m.get_error()}")
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.rss_compile = rss_bytes() - r0
        self.buf = llnp.allocate_token_bitmask(1, self.tok.vocab_size)

    def start(self):
        # a matcher that hit an error (e.g. its per-step item limit, "Too many items (limit
        # 50000; mask)" on nested subqueries with Qwen2) stays in error across reset():
        # every later statement would be refused at its first step, so rebuild it (untimed)
        if self.m.is_error():
            self.m = self._new()
        else:
            self.m.reset()

    def fill(self):
        self.llnp.fill_next_token_bitmask(self.m, self.buf, 0)
        return self.buf

    def accept(self, tid: int) -> bool:
        return bool(self.m.consume_token(tid)) and not self.m.is_error()


class XGREngine:
    """XGrammar on the EBNF export of the same grammar (grid_sql.grammar.export.to_ebnf).

    Engine ``xgrammar`` takes the export's ``style="xgrammar"`` (whitespace as one class
    star, comments left out: the form XGrammar fills in milliseconds); ``xgrammar-gbnf`` the
    full-language GBNF export (comments in ``sp``; seconds per fill), for the comparison.
    """

    name = "xgrammar"

    def __init__(self, v, grammar, threads: int, style: str = "xgrammar"):
        import xgrammar as xgr

        from grid_sql.grammar.export import to_ebnf

        special = set(v.special_ids)
        r0 = rss_bytes()
        t0 = time.perf_counter()
        # Token bytes straight from the GGUF vocabulary (RAW: no decoding); specials get
        # an empty spelling, which XGrammar treats as special (never allowed); EOS is the stop
        # token and enters only when the grammar can end.
        encoded = [b"" if i in special else b for i, b in enumerate(v.token_bytes)]
        info = xgr.TokenizerInfo(
            encoded,
            xgr.VocabType.RAW,
            vocab_size=len(encoded),
            stop_token_ids=[v.eos_token_id],
        )
        self.compiler = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=False)
        t1 = time.perf_counter()
        if style != "xgrammar":
            self.name = f"xgrammar-{style}"
        export = to_ebnf(grammar, style=style)
        self.ebnf, self.notes = export.text, list(export.adaptations)
        self.compiled = self.compiler.compile_grammar(self.ebnf)
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.rss_compile = rss_bytes() - r0
        self.grammar_bytes = int(self.compiled.memory_size_bytes)
        self.xgr = xgr
        self.buf = np.zeros((1, (len(encoded) + 31) // 32), dtype=np.int32)

    def start(self):
        self.m = self.xgr.GrammarMatcher(self.compiled, max_rollback_tokens=0)

    def fill(self):
        self.m.fill_next_token_bitmask(self.buf, 0)
        return self.buf

    def accept(self, tid: int) -> bool:
        return bool(self.m.accept_token(tid))


class GLRMEngine:
    """GLRMask on the same Lark export llguidance reads (grid_sql.grammar.export).

    GLRMask refuses unknown Lark directives, so the export's ``%llguidance`` line is dropped
    (GLRMask has no initial-skip option to set). Its masks cover vocabulary tokens only: the
    end of the sequence is ``is_accepting()``, so EOS is set in the row exactly when the state
    accepts (inside the timed fill, as llguidance and XGrammar do internally). Besides the
    compile, the bench times a reload of the compiled constraint from its saved bytes (GLRMask's
    own artifact, ``Constraint.save``/``load``) and reports the artifact's size.
    """

    name = "glrmask"

    def __init__(self, v, grammar):
        import glrmask

        from grid_sql.grammar.export import to_llguidance_lark

        special = set(v.special_ids)
        r0 = rss_bytes()
        t0 = time.perf_counter()
        self.vocab = glrmask.Vocab.from_id_to_bytes(
            {i: b for i, b in enumerate(v.token_bytes) if i not in special}
        )
        t1 = time.perf_counter()
        export = to_llguidance_lark(grammar)
        lines = export.text.splitlines()
        self.lark = "\n".join(ln for ln in lines if not ln.startswith("%llguidance")) + "\n"
        self.notes = [
            "the `%llguidance` directive is dropped (GLRMask refuses unknown directives); no "
            "other change: the same Lark text as llguidance's",
            "EOS: GLRMask's mask covers vocabulary tokens; the bench sets the EOS bit iff "
            "`is_accepting()` (timed with the fill)",
        ]
        self.constraint = glrmask.Grammar.from_lark(self.lark).compile(self.vocab)
        t2 = time.perf_counter()
        self.tok_load_s, self.compile_s = t1 - t0, t2 - t1
        self.rss_compile = rss_bytes() - r0
        blob = self.constraint.save()
        t3 = time.perf_counter()
        glrmask.Constraint.load(blob, self.vocab)
        self.load_s = time.perf_counter() - t3
        self.grammar_bytes = len(blob)
        self.eos = v.eos_token_id
        n_words = max(self.constraint.mask_len(), (len(v.token_bytes) + 31) // 32)
        self.buf = np.zeros(n_words, dtype=np.int32)
        self._eos_word, self._eos_bit = self.eos >> 5, np.int32(np.uint32(1 << (self.eos & 31)))

    def start(self):
        self.m = self.constraint.start()

    def fill(self):
        self.m.fill_mask(self.buf)
        if self.m.is_accepting():
            self.buf[self._eos_word] |= self._eos_bit
        else:
            self.buf[self._eos_word] &= ~self._eos_bit
        return self.buf

    def accept(self, tid: int) -> bool:
        return bool(self.m.commit_token(tid))
