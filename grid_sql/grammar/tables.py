"""Frozen LALR(1) tables: built in Rust (lark as the reference), frozen into integer arrays.

The arrays are what both the Python parser and the Rust kernels read. Encoding of
``action[state, terminal]`` (terminal ``$END`` has id ``n_terminals``):
``0`` error, ``s + 1`` shift to ``s``, ``-(r + 1)`` reduce by rule ``r``.
``goto[state, nonterminal]`` is ``-1`` where undefined. Accept: after feeding ``$END``, a
reduce whose GOTO lands on ``end_state``.

Construction cost is the compile line of every role × schema re-specialization (paper
§6.2): each projection has its own rule set and so its own tables. lark's analyser takes
~0.8 s on the SQLite dialect; ``_kernels.build_lalr`` computes the same tables (same
DeRemer–Pennello lookaheads, same canonical state numbering) in a few milliseconds, and the
parity tests (``tests/grammar/test_lalr_compile.py``) hold them identical to lark's. lark
remains the reference and the fallback: it runs when the kernel is absent or disabled
(``GRID_SQL_KERNELS=0``), and whenever the kernel declines a grammar (any conflict, so the
error message is lark's; or a grammar on which lark's result would be order-dependent).

The analysed arrays depend only on the rule structure (start symbol, terminal numbering,
productions), not on the lexicon, so they are memoized by that structure: an L3 lexicon
over an L2 projection with the same productions reuses its tables. The tables' fingerprint
still names the full grammar (lexicon included).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import GrammarConflictError

if TYPE_CHECKING:
    from lark.grammar import Rule as LarkRule

    from .ir import Grammar

_MEMO_SIZE = 32
_memo: OrderedDict[bytes, _Analysed] = OrderedDict()
_memo_lock = threading.Lock()


class _Analysed(NamedTuple):
    action: np.ndarray
    goto: np.ndarray
    rule_lhs: np.ndarray
    rule_len: np.ndarray
    start_state: int
    end_state: int
    nonterminal_ids: dict[str, int]
    derived: dict[str, Any]  # see LALRTables.derived


def kernel_lalr_enabled() -> bool:
    """Whether tables are built by ``_kernels.build_lalr`` (else by lark)."""
    if os.environ.get("GRID_SQL_KERNELS", "1").strip() == "0":
        return False
    from .. import _kernels

    return hasattr(_kernels, "build_lalr")


def structure_key(grammar: Grammar) -> bytes:
    """Digest of what the tables depend on: start symbol, terminal names, productions."""
    h = hashlib.blake2b(digest_size=16, person=b"grid-sql-lalr")
    h.update(grammar.start.encode() + b"\0")
    h.update("\x1f".join(t.name for t in grammar.terminals).encode() + b"\0")
    for r in grammar.rules:
        h.update((r.lhs + "\x1e" + "\x1f".join(r.rhs) + "\x1d").encode())
    return h.digest()


def tables_fingerprint(
    grammar_fp: str,
    action: np.ndarray,
    goto: np.ndarray,
    rule_lhs: np.ndarray,
    rule_len: np.ndarray,
    start_state: int,
    end_state: int,
) -> str:
    """``fingerprint("lalr-tables", {...})`` streamed: the same digest as the generic
    canonical encoding (sorted keys, bytes as ``{"$b": hex}``), without building a
    megabyte-sized JSON document (tests check the two agree)."""
    h = hashlib.blake2b(digest_size=32, person=b"grid-sql-fp")
    h.update(b"lalr-tables\0")
    for part in (
        b'{"action":{"$b":"',
        action.tobytes().hex().encode(),
        b'"},"end":%d,"goto":{"$b":"' % end_state,
        goto.tobytes().hex().encode(),
        b'"},"grammar":"%s","len":{"$b":"' % grammar_fp.encode(),
        rule_len.tobytes().hex().encode(),
        b'"},"lhs":{"$b":"',
        rule_lhs.tobytes().hex().encode(),
        b'"},"start":%d}' % start_state,
    ):
        h.update(part)
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class LALRTables:
    """Dense LALR(1) action/goto tables over the grammar's fixed terminal numbering."""

    action: np.ndarray  # int32 [n_states, n_terminals + 1]
    goto: np.ndarray  # int32 [n_states, n_nonterminals]
    rule_lhs: np.ndarray  # int32 [n_rules] nonterminal id
    rule_len: np.ndarray  # int32 [n_rules]
    start_state: int
    end_state: int
    n_terminals: int
    nonterminal_ids: dict[str, int]
    grammar_fingerprint: str = field(repr=False)
    #: Shapes derived from the arrays alone (the parser runtime's Python rows), shared by
    #: every grammar these analysed tables were memoized for; filled by their users.
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def fingerprint(self) -> str:
        """Content address of the tables and the grammar they belong to (computed on first
        use: hashing the hex-encoded arrays is a large share of a re-specialization, and
        only audit records and tests read it)."""
        return tables_fingerprint(
            self.grammar_fingerprint, self.action, self.goto, self.rule_lhs, self.rule_len,
            self.start_state, self.end_state,
        )  # fmt: skip

    @property
    def n_states(self) -> int:
        return int(self.action.shape[0])

    @property
    def end_terminal(self) -> int:
        return self.n_terminals

    @property
    def nbytes(self) -> int:
        """Memory held by the four arrays, in bytes."""
        return int(
            self.action.nbytes + self.goto.nbytes + self.rule_lhs.nbytes + self.rule_len.nbytes
        )

    @classmethod
    def build(cls, grammar: Grammar, *, use_kernel: bool | None = None) -> LALRTables:
        """Tables of ``grammar`` (Rust kernel unless disabled; lark otherwise or on refusal).

        Raises :class:`GrammarConflictError` if the grammar is not LALR(1).
        """
        key = grammar.tables_key
        with _memo_lock:
            a = _memo.get(key)
            if a is not None:
                _memo.move_to_end(key)
        if a is None:
            if use_kernel is None:
                use_kernel = kernel_lalr_enabled()
            a = _analyse_kernel(grammar) if use_kernel else None
            if a is None:
                a = _analyse_lark(grammar)
            with _memo_lock:
                _memo[key] = a
                while len(_memo) > _MEMO_SIZE:
                    _memo.popitem(last=False)
        return cls(
            a.action, a.goto, a.rule_lhs, a.rule_len, a.start_state, a.end_state,
            len(grammar.terminals), a.nonterminal_ids, grammar.fingerprint, a.derived,
        )  # fmt: skip


def clear_memo() -> None:
    """Forget memoized tables (tests; a long-lived process never needs it)."""
    with _memo_lock:
        _memo.clear()


def _rule_arrays(rules: list[LarkRule], nt_ids: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    rule_lhs = np.array([nt_ids[r.origin.name] for r in rules], dtype=np.int32)
    rule_len = np.array([len(r.expansion) for r in rules], dtype=np.int32)
    return rule_lhs, rule_len


def _freeze(*arrays: np.ndarray) -> None:
    for arr in arrays:
        arr.setflags(write=False)


def kernel_spec(
    grammar: Grammar,
) -> tuple[int, int, list[tuple[int, list[int]]], int, dict[str, int]] | None:
    """``_kernels.build_lalr``'s arguments for ``grammar`` and the nonterminal ids (None if
    the start symbol has no production)."""
    rules = grammar.lark_rules
    n_t = len(grammar.terminals)
    nt_names = sorted({r.origin.name for r in rules})
    nt_ids = {n: i for i, n in enumerate(nt_names)}
    if grammar.start not in nt_ids:
        return None
    sym = dict(grammar.terminal_ids)
    sym.update({n: n_t + 1 + i for n, i in nt_ids.items()})
    spec = [(nt_ids[r.origin.name], [sym[s.name] for s in r.expansion]) for r in rules]
    return n_t, len(nt_names), spec, nt_ids[grammar.start], nt_ids


def _analyse_kernel(grammar: Grammar) -> _Analysed | None:
    """Tables by ``_kernels.build_lalr``; None when it declines (caller runs lark)."""
    from .. import _kernels

    try:
        args = kernel_spec(grammar)
        if args is None:
            return None
        n_t, n_nt, spec, start_nt, nt_ids = args
        act_b, goto_b, n_states, start, end = _kernels.build_lalr(n_t, n_nt, spec, start_nt)
    except (KeyError, ValueError):
        return None
    action = np.frombuffer(act_b, dtype="<i4").astype(np.int32).reshape(n_states, n_t + 1)
    goto = np.frombuffer(goto_b, dtype="<i4").astype(np.int32).reshape(n_states, max(1, n_nt))
    rule_lhs, rule_len = _rule_arrays(list(grammar.lark_rules), nt_ids)
    _freeze(action, goto, rule_lhs, rule_len)
    return _Analysed(action, goto, rule_lhs, rule_len, int(start), int(end), nt_ids, {})


def _analyse_lark(grammar: Grammar) -> _Analysed:
    """The reference construction: lark's ``LALR_Analyzer``, states renumbered canonically."""
    from lark.common import ParserConf
    from lark.exceptions import GrammarError as LarkGrammarError
    from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

    rules = list(grammar.lark_rules)
    conf = ParserConf(rules, {}, [grammar.start])
    try:
        analyzer = LALR_Analyzer(conf, strict=True)
        analyzer.compute_lalr()
    except LarkGrammarError as exc:
        raise GrammarConflictError(f"grammar is not LALR(1): {exc}") from exc
    table = analyzer.parse_table
    n_t = len(grammar.terminals)
    t_ids = dict(grammar.terminal_ids)
    t_ids["$END"] = n_t
    nt_names = sorted({r.origin.name for r in rules})
    nt_ids = {n: i for i, n in enumerate(nt_names)}
    rule_index = {id(r): i for i, r in enumerate(rules)}
    # lark numbers states in set-iteration order (varies with PYTHONHASHSEED); renumber
    # them canonically (BFS from the start state, successors by symbol id) so tables,
    # fingerprints and configuration hashes are identical on every run and machine.
    sym_order = {n: i for n, i in t_ids.items()}
    sym_order.update({n: n_t + 1 + i for n, i in nt_ids.items()})
    lark_start = table.start_states[grammar.start]
    canon = {lark_start: 0}
    queue = [lark_start]
    while queue:
        st = queue.pop(0)
        succ = sorted(
            (sym_order[sym], arg)
            for sym, (act, arg) in table.states[st].items()
            if act is Shift and sym in sym_order
        )
        for _, nxt in succ:
            if nxt not in canon:
                canon[nxt] = len(canon)
                queue.append(nxt)
    n_states = len(canon)
    action = np.zeros((n_states, n_t + 1), dtype=np.int32)
    goto = np.full((n_states, max(1, len(nt_names))), -1, dtype=np.int32)
    for lark_s, row in table.states.items():
        if lark_s not in canon:
            continue
        s = canon[lark_s]
        for sym, (act, arg) in row.items():
            if act is Shift:
                arg = canon[arg]
            if sym in t_ids:
                if act is Shift:
                    action[s, t_ids[sym]] = int(arg) + 1
                else:
                    action[s, t_ids[sym]] = -(rule_index[id(arg)] + 1)
            elif sym in nt_ids:
                goto[s, nt_ids[sym]] = int(arg)
            else:  # '$root_*' never appears in a row we read; be explicit otherwise
                raise GrammarConflictError(f"unexpected symbol {sym!r} in LALR table")
    rule_lhs, rule_len = _rule_arrays(rules, nt_ids)
    _freeze(action, goto, rule_lhs, rule_len)
    start_state = canon[lark_start]
    end_state = canon[table.end_states[grammar.start]]
    return _Analysed(action, goto, rule_lhs, rule_len, start_state, end_state, nt_ids, {})
