"""The token–terminal bridge: the trie walk and its CI/CD split (paper §4.1–§4.2).

For a configuration κ = (σ, ρ) the exact mask is {t : w·bytes(t) is a viable prefix}. The
walk runs a DFS over the token trie carrying the scanner state of the pending lexeme. As
long as a token's bytes only extend the pending lexeme (or emit *ignored* terminals, which
leave σ alone) its verdict depends on ρ and on the allowed-terminal set A(σ) alone: it is
**context independent** (CI) and cacheable under the key (ρ, A). When a byte forces the
emission of a real terminal τ the stack changes, so the rest of that subtree depends on the
live stack: the walk records a **context dependent** (CD) residue entry (trie node, τ, bytes
to re-scan) and skips the subtree. Which τ is emitted is itself decided by A (contextual
resolution), so the residue too is a function of the key. At fill time each residue entry
is resolved against the live stack: shift τ, re-scan, and continue with the sub-walk below
that trie node, whose own CI part is cached under *its* key (node, ρ', A(σ')).

Rejection is pruned subtree-wise: a subtree is skipped when the scan is dead (a forced
emission failed). A node whose pending lexeme is live for no allowed or ignored terminal is
not admitted, but its subtree is still explored while its last accept could be emitted
viably later (that is the only way a longer token can become viable again; see
``docs/design/foundation.md`` §2).

Two implementations, one semantics: :meth:`Walker.walk_py` below is the reference, and
:meth:`Walker.walk_kernel` runs the same walk in Rust (``grid_sql._kernels.TrieWalker``,
``kernels/core/src/walk.rs``) with the GIL released, because the cold walk visits up to
every trie node (~400k on a 151k-token vocabulary) and the interpreter costs ~1 µs per
node. :meth:`Walker.walk` uses the kernel when the extension provides it, unless
``GRID_SQL_KERNELS=0``; parity tests hold the two bit-identical (``tests/kernels/``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..grammar.lexer import DEAD, START, LexerTables
from ..grammar.lexicon import CategoryWords
from ..parser.incremental import LexiconView, ParserRuntime
from ..parser.stack import StackNode
from .trie import TokenTrie

_IGNORED = -1  # ParserRuntime.resolve's answer for an ignored terminal
KERNEL_LIMIT = 32  # Rust walkers kept per Walker for scoped lexicon views (LRU)


def kernels_enabled() -> bool:
    """Whether the Rust walk may be used: the extension has it and ``GRID_SQL_KERNELS`` is
    not ``0``."""
    if os.environ.get("GRID_SQL_KERNELS", "1").strip() == "0":
        return False
    from .. import _kernels

    return hasattr(_kernels, "TrieWalker")


@dataclass(frozen=True, slots=True)
class ScanFrame:
    """Scanner state inside the walk (same meaning as the parser's ScanState)."""

    dfa: int
    rem: bytes
    la_len: int
    la_state: int


START_FRAME = ScanFrame(START, b"", -1, DEAD)


@dataclass(frozen=True, slots=True)
class CDEntry:
    """A boundary-crossing subtree: below trie ``node``, after emitting ``terminal``."""

    node: int
    terminal: int
    requeue: bytes


@dataclass(frozen=True, slots=True)
class WalkResult:
    """CI token ids (sorted, alias-expanded) and the CD residue of one walk."""

    ci_ids: np.ndarray
    residue: tuple[CDEntry, ...]
    nodes_visited: int


# One Rust union DFA per lexer: every projection and lexicon of a dialect shares the lexer
# tables, so their walkers share this too (the per-state conversion cost ~2.5 ms per guide).
_scan_dfas: weakref.WeakKeyDictionary[LexerTables, tuple[int, Any]] = weakref.WeakKeyDictionary()
_scan_dfas_lock = threading.Lock()


def scan_dfa(rt: ParserRuntime, n_words: int) -> Any:
    """The ``_kernels.ScanDfa`` of ``rt``'s lexer tables, built once per lexer."""
    lexer = rt.grammar.lexer
    with _scan_dfas_lock:
        hit = _scan_dfas.get(lexer)
    if hit is not None and hit[0] == n_words:
        return hit[1]
    from .. import _kernels

    nbytes = n_words * 8

    def words(masks: tuple[int, ...]) -> bytes:
        return b"".join(m.to_bytes(nbytes, "little") for m in masks)

    dfa = _kernels.ScanDfa(
        bytes(lexer.trans_bytes),
        words(lexer.accept_masks),
        words(lexer.live_masks),
        n_words,
        [list(c) for c in lexer.accept_candidates],
    )
    with _scan_dfas_lock:
        _scan_dfas[lexer] = (n_words, dfa)
    return dfa


def lexicon_specs(lexicon: Mapping[int, CategoryWords]) -> list[Any]:
    """The category lexicons as the kernels take them (``_kernels.pyi``: terminal, words,
    fold_bare_case, fold_quoted_case, exclude, refused_prefixes)."""
    return [
        (
            tid,
            sorted(w.words),
            w.fold_bare_case,
            w.fold_quoted_case,
            w.exclude,
            sorted(w.refused_prefixes),
        )
        for tid, w in lexicon.items()
    ]


def parser_kernel(rt: ParserRuntime) -> Any:
    """A ``_kernels.ParserKernel`` over ``rt``'s tables, lexer and lexicons: the Rust parser
    runtime (``kernels/core/src/runtime.rs``) of a grammar without scope rules, whose
    stacks, configuration hashes, allowed sets and verdicts equal ``rt``'s
    (``tests/kernels/test_parser_kernel.py``). Its arena is its own: node ids, not
    :class:`StackNode` objects. Raises ``ValueError`` for a grammar with scope rules (its
    allowed sets and values depend on the scope rule, which the kernel does not run)."""
    from .. import _kernels

    if rt.sem is not None:
        raise ValueError("the Rust parser runtime covers grammars without scope rules")
    t = rt.grammar.tables
    nw = rt.term_words
    return _kernels.ParserKernel(
        t.n_terminals,
        int(t.goto.shape[1]),
        np.ascontiguousarray(t.action, dtype="<i4").tobytes(),
        np.ascontiguousarray(t.goto, dtype="<i4").tobytes(),
        [int(x) for x in t.rule_lhs],
        [int(x) for x in t.rule_len],
        int(t.start_state),
        int(t.end_state),
        scan_dfa(rt, nw),
        rt.ignored_mask.to_bytes(nw * 8, "little"),
        lexicon_specs(rt.lexicon),
    )


def mask_filler(walker: Walker, vocab_size: int, eos_id: int, max_bytes: int = 256 << 20) -> Any:
    """A ``_kernels.MaskFiller`` for ``walker``'s (grammar runtime, trie): the whole fill of
    a grammar without scope rules in Rust, equal to ``Guide._fill``
    (``tests/kernels/test_mask_filler.py``). Raises ``ValueError`` for a grammar with scope
    rules."""
    from .. import _kernels

    rt = walker.rt
    nw = rt.term_words
    lex = rt.grammar.lexicon
    return _kernels.MaskFiller(
        parser_kernel(rt),
        walker.kernel(),
        rt.lexicon_mask.to_bytes(nw * 8, "little"),
        None if lex is None else lex.fingerprint.encode(),
        nw,
        vocab_size,
        eos_id,
        max_bytes,
    )


def stack_pairs(node: StackNode) -> list[tuple[int, int]]:
    """``(state, symbol)`` of every node above the root, bottom-up (``MaskFiller.fill``)."""
    out: list[tuple[int, int]] = []
    n: StackNode | None = node
    while n is not None and n.parent is not None:
        out.append((n.state, n.symbol))
        n = n.parent
    out.reverse()
    return out


class Walker:
    """Runs CI walks for one (grammar runtime, token trie) pair."""

    def __init__(self, runtime: ParserRuntime, trie: TokenTrie) -> None:
        self.rt = runtime
        self.trie = trie
        self._lists: tuple[list[int], list[int], list[int], list[int]] | None = None
        self.alias_ids = trie.alias_ids
        self.use_kernel = kernels_enabled()
        self.n_words = runtime.term_words  # terminal words; stop bits follow (resolve)
        self._kernel: Any = None
        self._kernel_lock = threading.Lock()
        # scoped lexicon views (parser/incremental.py LexiconView.fp) -> their Rust walker
        self._scoped_kernels: OrderedDict[str, Any] = OrderedDict()

    def _trie_lists(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """The trie arrays as Python lists (edge byte, depth, subtree size, alias offsets).

        Built on first use by the Python walk only: the kernel path never reads them, and
        converting a 151k-token trie cost ~27 ms of every guide's construction.
        """
        lists = self._lists
        if lists is None:
            nodes = self.trie.nodes
            lists = (
                nodes["byte"].tolist(),
                nodes["depth"].tolist(),
                nodes["size"].tolist(),
                self.trie.alias_offsets.tolist(),
            )
            self._lists = lists
        return lists

    # ------------------------------------------------------------------ the Rust kernel
    def kernel(self, lex: LexiconView | None = None) -> Any:
        """The ``_kernels.TrieWalker`` of this (runtime, trie), built once on first use.

        A scoped lexicon view (``lex.fp`` not None) has its own walker, since the Rust
        walker holds its lexicons; those are built lazily and kept LRU-bounded.
        """
        if lex is not None and lex.fp is not None:
            with self._kernel_lock:
                k = self._scoped_kernels.get(lex.fp)
                if k is not None:
                    self._scoped_kernels.move_to_end(lex.fp)
                    return k
            k = self._build_kernel(lex)
            with self._kernel_lock:
                self._scoped_kernels[lex.fp] = k
                while len(self._scoped_kernels) > KERNEL_LIMIT:
                    self._scoped_kernels.popitem(last=False)
            return k
        k = self._kernel
        if k is None:
            with self._kernel_lock:
                k = self._kernel
                if k is None:
                    k = self._build_kernel()
                    self._kernel = k
        return k

    def _build_kernel(self, lex: LexiconView | None = None) -> Any:
        """A Rust walker over the shared union DFA and the shared trie arrays: only the
        grammar's ignored set and lexicons are converted per walker."""
        from .. import _kernels

        rt, nw = self.rt, self.n_words
        lexicon = rt.lexicon if lex is None else lex.words
        return _kernels.TrieWalker(
            scan_dfa(rt, nw),
            rt.ignored_mask.to_bytes(nw * 8, "little"),
            lexicon_specs(lexicon),
            self.trie.kernel_arrays(),
        )

    def _allowed_bytes(self, allowed: int) -> bytes:
        """``allowed`` as the kernel reads it: the terminal words, then the stop bits
        (``ParserRuntime.stop_shift``) only when there are any."""
        nw = self.n_words
        return allowed.to_bytes((2 * nw if allowed >> (64 * nw) else nw) * 8, "little")

    def walk_payload(
        self, node0: int, frame0: ScanFrame, allowed: int, lex: LexiconView | None = None
    ) -> tuple[np.ndarray, tuple[tuple[int, int, bytes], ...]]:
        """(CI ids, residue as ``(node, terminal, requeue)`` tuples): what a cache entry
        stores, without the per-entry :class:`CDEntry` objects on the kernel path.
        ``lex``: the lexicons in force (default: the grammar's own)."""
        if self.use_kernel:
            ids, residue, _ = self.kernel(lex).walk(
                node0,
                frame0.dfa,
                frame0.rem,
                frame0.la_len,
                frame0.la_state,
                self._allowed_bytes(allowed),
            )
            return np.frombuffer(ids, dtype="<i4"), tuple(residue)
        r = self.walk_py(node0, frame0, allowed, lex)
        return r.ci_ids, tuple((c.node, c.terminal, c.requeue) for c in r.residue)

    def walk_kernel(
        self, node0: int, frame0: ScanFrame, allowed: int, lex: LexiconView | None = None
    ) -> WalkResult:
        """:meth:`walk_py` in Rust (one GIL-released call)."""
        ids, residue, visited = self.kernel(lex).walk(
            node0,
            frame0.dfa,
            frame0.rem,
            frame0.la_len,
            frame0.la_state,
            self._allowed_bytes(allowed),
        )
        return WalkResult(
            np.frombuffer(ids, dtype="<i4"),
            tuple(CDEntry(n, t, r) for n, t, r in residue),
            visited,
        )

    # ------------------------------------------------------------------ scanning under fixed A
    def step(
        self, frame: ScanFrame, data: bytes, allowed: int, lex: LexiconView | None = None
    ) -> ScanFrame | CDEntry | None:
        """Scan ``data`` from ``frame`` under A = ``allowed``.

        Returns the new frame, a CDEntry (node -1; the caller fills it) when a real terminal
        must be emitted, or None when a forced emission fails.
        """
        trans, accept = self.rt.trans, self.rt.accept_masks
        dfa, rem, la_len, la_st = frame.dfa, frame.rem, frame.la_len, frame.la_state
        i = 0
        n = len(data)
        while i < n:
            b = data[i]
            s2 = trans[dfa * 256 + b]
            if s2 != DEAD:
                dfa = s2
                rem += data[i : i + 1]
                i += 1
                if accept[s2]:
                    la_len = len(rem)
                    la_st = s2
                continue
            if la_len <= 0:
                return None
            choice = self.rt.resolve(la_st, rem[:la_len], allowed, lex)
            if choice is None:
                return None
            rest = rem[la_len:] + data[i:]
            if choice != _IGNORED:
                return CDEntry(-1, choice, rest)
            data, i, n = rest, 0, len(rest)
            dfa, rem, la_len, la_st = START, b"", -1, DEAD
        return ScanFrame(dfa, rem, la_len, la_st)

    def live(self, frame: ScanFrame, allowed: int, lex: LexiconView | None = None) -> bool:
        """The pending lexeme can still become an allowed or ignored terminal."""
        return self.rt.pending_live(frame.dfa, frame.rem, allowed, lex)

    def may_recover(self, frame: ScanFrame, allowed: int, lex: LexiconView | None = None) -> bool:
        """A later forced emission at the last accept could still succeed."""
        return frame.la_len > 0 and (
            self.rt.resolve(frame.la_state, frame.rem[: frame.la_len], allowed, lex) is not None
        )

    def cd_lexeme(
        self, frame0: ScanFrame, data: bytes, allowed: int, lex: LexiconView | None = None
    ) -> bytes:
        """The lexeme a CD residue entry emits: scan ``data`` (the trie path from the
        entry's root down to the residue node) from ``frame0`` up to the first real
        emission. Scope-aware lexicons need it: the emitted identifier becomes the
        semantic value on the stack its sub-walk continues from."""
        trans, accept = self.rt.trans, self.rt.accept_masks
        dfa, rem, la_len, la_st = frame0.dfa, frame0.rem, frame0.la_len, frame0.la_state
        i = 0
        n = len(data)
        while i < n:
            b = data[i]
            s2 = trans[dfa * 256 + b]
            if s2 != DEAD:
                dfa = s2
                rem += data[i : i + 1]
                i += 1
                if accept[s2]:
                    la_len = len(rem)
                    la_st = s2
                continue
            if la_len <= 0:
                break
            choice = self.rt.resolve(la_st, rem[:la_len], allowed, lex)
            if choice is None:
                break
            if choice != _IGNORED:
                return rem[:la_len]
            data = rem[la_len:] + data[i:]
            i, n = 0, len(data)
            dfa, rem, la_len, la_st = START, b"", -1, DEAD
        raise AssertionError(f"no emission scanning {data!r}: not a residue path")

    # ------------------------------------------------------------------ the walk
    def walk(
        self, node0: int, frame0: ScanFrame, allowed: int, lex: LexiconView | None = None
    ) -> WalkResult:
        """CI walk of the subtree strictly below ``node0`` from ``frame0`` under A."""
        if self.use_kernel:
            return self.walk_kernel(node0, frame0, allowed, lex)
        return self.walk_py(node0, frame0, allowed, lex)

    def walk_py(
        self, node0: int, frame0: ScanFrame, allowed: int, lex: LexiconView | None = None
    ) -> WalkResult:
        """The reference walk in Python (see the module docstring)."""
        edge, depth, size, off = self._trie_lists()
        step, live, recover = self.step, self.live, self.may_recover
        frames: dict[int, ScanFrame] = {depth[node0]: frame0}
        ranges: list[tuple[int, int]] = []
        residue: list[CDEntry] = []
        i = node0 + 1
        end = node0 + size[node0]
        visited = 0
        one = [bytes([b]) for b in range(256)]
        while i < end:
            visited += 1
            d = depth[i]
            res = step(frames[d - 1], one[edge[i]], allowed, lex)
            if res is None:
                i += size[i]
                continue
            if isinstance(res, CDEntry):
                residue.append(CDEntry(i, res.terminal, res.requeue))
                i += size[i]
                continue
            a, b = off[i], off[i + 1]
            ok = live(res, allowed, lex)
            if ok and a < b:
                if ranges and ranges[-1][1] == a:
                    ranges[-1] = (ranges[-1][0], b)
                else:
                    ranges.append((a, b))
            if ok or recover(res, allowed, lex):
                frames[d] = res
                i += 1
            else:
                i += size[i]
        if ranges:
            ids = np.concatenate([self.alias_ids[a:b] for a, b in ranges])
            ids = np.sort(ids).astype(np.int32)
        else:
            ids = np.zeros(0, dtype=np.int32)
        return WalkResult(ids, tuple(residue), visited)
