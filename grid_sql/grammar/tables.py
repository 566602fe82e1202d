"""Frozen LALR(1) tables: lark builds them, we freeze them into compact integer arrays.

The arrays are what both the Python parser and the Rust kernels read. Encoding of
``action[state, terminal]`` (terminal ``$END`` has id ``n_terminals``):
``0`` error, ``s + 1`` shift to ``s``, ``-(r + 1)`` reduce by rule ``r``.
``goto[state, nonterminal]`` is ``-1`` where undefined. Accept: after feeding ``$END``, a
reduce whose GOTO lands on ``end_state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from lark.common import ParserConf
from lark.exceptions import GrammarError as LarkGrammarError
from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

from ..errors import GrammarConflictError
from .fingerprint import fingerprint

if TYPE_CHECKING:
    from .ir import Grammar


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
    fingerprint: str

    @property
    def n_states(self) -> int:
        return int(self.action.shape[0])

    @property
    def end_terminal(self) -> int:
        return self.n_terminals

    @classmethod
    def build(cls, grammar: Grammar) -> LALRTables:
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
        rule_lhs = np.array([nt_ids[r.origin.name] for r in rules], dtype=np.int32)
        rule_len = np.array([len(r.expansion) for r in rules], dtype=np.int32)
        start_state = canon[lark_start]
        end_state = canon[table.end_states[grammar.start]]
        fp = fingerprint(
            "lalr-tables",
            {
                "grammar": grammar.fingerprint,
                "action": action.tobytes(),
                "goto": goto.tobytes(),
                "lhs": rule_lhs.tobytes(),
                "len": rule_len.tobytes(),
                "start": start_state,
                "end": end_state,
            },
        )
        for arr in (action, goto, rule_lhs, rule_len):
            arr.setflags(write=False)
        return cls(
            action, goto, rule_lhs, rule_len, start_state, end_state, n_t, nt_ids, fp
        )
