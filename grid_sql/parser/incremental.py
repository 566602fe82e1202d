"""The viable-prefix oracle: an incremental LALR(1) parser driven by a byte scanner.

A :class:`Configuration` is the pair (parser stack, scan state over the pending lexeme) of
paper Definition 1. Feeding bytes applies maximal munch over the union lexer automaton;
a forced emission picks the highest-priority *parser-viable* candidate (contextual
resolution). A byte string is a viable prefix iff every forced emission succeeds and the
pending lexeme is live for an allowed or ignored terminal (paper §3, Proposition 3).
The exact semantics are written down in ``docs/design/foundation.md`` §2.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParseError
from ..grammar.ir import Grammar
from ..grammar.lexer import DEAD, START
from ..grammar.lexicon import CategoryWords
from ..grammar.scope import NONE, Bag, Context, Ref, ScopeRules, norm_name
from .closers import closed_context, drop_unbound_closers
from .rows import RowGroups, Rows, rows_of
from .scoping import ScopedViews
from .stack import StackNode
from .tables import schema_only, unbound_schema_ref, untyped_literal_head
from .views import VIEW_LIMIT, LexiconView  # noqa: F401 - re-exported (their old home)


@dataclass(frozen=True, slots=True)
class ScanState:
    """Scanner state over the pending lexeme ``rem`` (paper: the remainder ρ).

    ``dfa`` is the union-DFA state after ``rem``; ``la_len``/``la_state`` the last accepting
    length (-1 if none) and the DFA state there (its candidates resolve a forced emission).
    """

    dfa: int = START
    rem: bytes = b""
    la_len: int = -1
    la_state: int = DEAD


EMPTY_SCAN = ScanState()
INTERN_LIMIT = 1 << 18  # interned stack nodes per grammar before the table is cleared


@dataclass(frozen=True, slots=True)
class Configuration:
    """Paper Definition 1: the LALR stack σ and the scan state ρ. Immutable and cheap."""

    stack: StackNode
    scan: ScanState

    @property
    def config_hash(self) -> int:
        """Rolling O(1) hash of the stack (paper §6.4)."""
        return self.stack.hash


class ParserRuntime(ScopedViews):
    """Per-grammar tables in the shapes the Python hot path reads fastest."""

    _cache: weakref.WeakKeyDictionary[Grammar, ParserRuntime] = weakref.WeakKeyDictionary()

    @classmethod
    def for_grammar(cls, grammar: Grammar) -> ParserRuntime:
        rt = cls._cache.get(grammar)
        if rt is None:
            rt = cls(grammar)
            cls._cache[grammar] = rt
        return rt

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        tables = grammar.tables
        lexer = grammar.lexer
        self.n_terminals = tables.n_terminals
        self.end_id = tables.n_terminals
        rows = rows_of(tables)
        self.action: Rows = rows.action
        self.goto: Rows = rows.goto
        self.rule_lhs: list[int] = rows.rule_lhs
        self.rule_len: list[int] = rows.rule_len
        self.end_state = tables.end_state
        # the same rows as bitmasks grouped by action: shift, and each reduce (_lalr_mask)
        self.row_groups: RowGroups = rows.row_groups
        self.trans = lexer.trans
        self.accept_masks = lexer.accept_masks
        self.live_masks = lexer.live_masks
        self.candidates = lexer.accept_candidates
        self.ignored_mask = 0
        for t in grammar.terminals:
            if t.ignored:
                self.ignored_mask |= 1 << t.id
        self.lexicon: dict[int, CategoryWords] = {}
        if grammar.lexicon is not None:
            for name, words in grammar.lexicon.categories.items():
                self.lexicon[grammar.terminal_ids[name]] = words
        self.lexicon_mask = 0
        for tid in self.lexicon:
            self.lexicon_mask |= 1 << tid
        self.base_lex = LexiconView(self.lexicon, self.lexicon_mask, None)
        # Scope-aware lexicons (grammar/scope.py): stack nodes carry semantic values and the
        # COLUMN_NAME words in force are a function of the stack (see lex_at).
        self.sem: ScopeRules | None = None
        self._col_index: dict[str, frozenset[bytes]] = {}
        self._views: dict[tuple[Any, ...], LexiconView] = {}
        # the words a qualifier terminal keeps for a set of names (ScopedViews._qualifier_words)
        self._qual_cats: dict[tuple[int, frozenset[str]], CategoryWords | None] = {}
        if grammar.scopes is not None:
            self.sem = ScopeRules(grammar, grammar.scopes, self.n_terminals + 1)
            cw = self.lexicon[self.sem.column_tid]
            index: dict[str, set[bytes]] = {}
            for w in cw.words:
                index.setdefault(norm_name(w), set()).add(w)
            self._col_index = {k: frozenset(v) for k, v in index.items()}
        # positions where a scope view may restrict IDENT without any lexicon terminal being
        # allowed (a table's alias: ScopeTable.fresh_aliases); the mask layer keys them
        # as identifier positions (Guide.key_for)
        self.fresh_mask = 0
        self._static_alias: frozenset[bytes] | None = None  # sem.alias_refuse spelled, no `[q]`
        self._alias_kinds: dict[int, str] = {}  # state -> scoping._alias_kind
        self._static_output: frozenset[bytes] | None = None  # spellings of sem.output_refuse
        if self.sem is not None and self.sem.fresh:
            self.fresh_mask = 1 << self.sem.t_ident
        # Stop bits: above the terminal words of an allowed set, bit ``stop_shift + t``
        # marks a reserved keyword ``t`` a select-list obligation blocks; a lexeme whose
        # candidates reach it resolves to nothing (no fallback to an identifier). The Rust
        # scanner reads them at the same place (after its terminal words).
        self.term_words = max(1, (len(grammar.terminals) + 63) // 64)
        self.term_bits = (1 << self.n_terminals) - 1
        self.stop_shift = 64 * self.term_words
        self.reserved_mask = 0
        for t in grammar.terminals:
            if t.reserved:
                self.reserved_mask |= 1 << t.id
        # terminals on which some state reduces a FROM clause (only they can close one)
        self.closers_mask = 0
        if self.sem is not None and self.sem.bind:
            fc = [r for r, a in enumerate(self.rule_lhs) if a == self.sem.nt_from_clause]
            act = np.asarray(tables.action)
            hit = np.isin(act, [-r - 1 for r in fc]).any(axis=0)
            for tc in np.flatnonzero(hit).tolist():
                self.closers_mask |= 1 << tc  # $END (column n_terminals) included
        self.root = StackNode(tables.start_state, None, 0)
        self.initial = Configuration(self.root, EMPTY_SCAN)
        # Hash-consing of pushes: (parent uid, state, symbol, value) -> the node (keyed by the
        # parent's uid, not the parent: see StackNode; the node holds its parent alive).
        # Equal stacks built from the root become one object, so the per-node memos (allowed
        # set, EOS) and the uid-keyed memos of the mask layer survive across steps and
        # requests instead of being recomputed on freshly shifted copies. Bounded by
        # clearing: a cleared table only costs new, structurally equal nodes.
        self._interned: dict[tuple[int, int, int, Any], StackNode] = {}
        self._shifted: dict[tuple[int, int, Any], StackNode] = {}  # shift(node, tid, value)
        # (node uid, the reduce chain up to its FROM clause) -> the context it closes with
        # (parser/closers.py)
        self._closed: dict[tuple[int, tuple[int, ...]], Context] = {}
        # (state, uid of the node below) -> _lalr_mask: the tables read states only, and
        # words shifted at one position (the reserve's candidates) share state and parent
        self._lalr_memo: dict[tuple[int, int], int] = {}

    # ------------------------------------------------------------------ LALR side
    def _simulate(self, node: StackNode, tid: int) -> bool:
        """Run the reduce chain for ``tid`` on a virtual overlay; True iff it shifts/accepts."""
        return self._chain_rules(node, tid)[1]

    def _chain_rules(self, node: StackNode, tid: int) -> tuple[list[int], bool]:
        """The rules the reduce chain for ``tid`` reduces (on a virtual overlay of states, in
        order) and whether it ends in a shift (or, for ``$END``, ACCEPT)."""
        action, goto, lhs, rlen = self.action, self.goto, self.rule_lhs, self.rule_len
        overlay: list[int] = []
        rules: list[int] = []
        base = node
        is_end = tid == self.end_id
        while True:
            top = overlay[-1] if overlay else base.state
            a = action[top][tid]
            if a > 0:
                return rules, not is_end
            if a == 0:
                return rules, False
            r = -a - 1
            rules.append(r)
            n = rlen[r]
            if n <= len(overlay):
                if n:
                    del overlay[-n:]
            else:
                base = base.ancestor(n - len(overlay))
                overlay.clear()
            top = overlay[-1] if overlay else base.state
            g = goto[top][lhs[r]]
            if is_end and g == self.end_state:
                return rules, True
            overlay.append(g)

    def allowed_mask(self, node: StackNode) -> int:
        """A(σ): bitmask of terminals whose reduce chain reaches a SHIFT (memoized per node).

        Equal to running :meth:`_simulate` per terminal of the top state's row, but the
        terminals are simulated together: at each virtual top they split by action (shift:
        allowed; error: not; reduce r: one group), and each group's reduce is applied once
        for all of its terminals instead of once per terminal.
        """
        m = node.allowed
        if m is None:
            key = (node.state, -1 if node.parent is None else node.parent.uid)
            lm = self._lalr_memo.get(key)
            if lm is None:
                lm = self._lalr_mask(node)
                if len(self._lalr_memo) >= INTERN_LIMIT:
                    self._lalr_memo.clear()
                self._lalr_memo[key] = lm
            m = lm
            if self.sem is not None and self.sem.bind and m:
                m = self._drop_unbound_closers(node, m)
            if (
                self.sem is not None
                and self.sem.typed_words is not None
                and (m >> self.sem.t_string) & 1
                and untyped_literal_head(self, node, self.sem)
            ):
                m &= ~(1 << self.sem.t_string)
            if self.sem is not None and self.sem.t_dot >= 0 and (m >> self.sem.t_dot) & 1:
                dot = 1 << self.sem.t_dot
                if m & self.term_bits & ~dot and self._dot_dead(node):
                    m &= ~dot
                elif self._must_qualify(node) or schema_only(self, node, self.sem):
                    m = (m & ~self.term_bits) | dot
            if self.sem is not None and unbound_schema_ref(self, node, self.sem):
                keep = (1 << self.sem.t_dot) | (1 << self.sem.t_lpar)
                m = (m & ~self.term_bits) | (m & keep)
            node.allowed = m
        return m

    def _must_qualify(self, node: StackNode) -> bool:
        """Whether the word on top of ``node`` is a bare sort key that can only go on as a
        qualifier: an ``IDENT``/``TABLE_NAME`` the tables may reduce to ``any_name`` or
        ``output_alias`` only, every FROM known (its lexicon view applied), and no output
        alias of the level (docs/scope.md, "The `.` after a name"). Then only ``.`` (and no
        ``$END``) may follow: the word is a qualifier name, never a sort key of its own."""
        sem = self.sem
        assert sem is not None
        w = node.value
        if node.symbol not in sem.qualifier_terms or not isinstance(w, bytes):
            return False
        kinds = self._reduced_to(node)
        if kinds is None or sem.nt_output_alias not in kinds:
            return False
        if not kinds <= {sem.nt_any_name, sem.nt_output_alias}:
            return False
        ctx = self.ctx_at(node)
        aliases, quals, name = sem.output_aliases(ctx), sem.qualifier_names(ctx), norm_name(w)
        if aliases is None or quals is None or name not in quals:
            return False  # (a word bound nowhere: its `.` is dead instead, _dot_dead)
        return name not in aliases

    def _lalr_mask(self, node: StackNode) -> int:
        """The terminals whose reduce chain reaches a SHIFT by the tables alone (no scope
        rule): :meth:`allowed_mask` before its semantic refinements. The terminals are
        simulated together, split at each virtual top by the state's action groups
        (``parser/rows.py``): shifts join the mask, each reduce is applied once for its
        group, errors drop out."""
        m = 0
        groups = self.row_groups
        work: list[tuple[StackNode, tuple[int, ...], int]] = [(node, (), -1)]
        while work:
            base, overlay, terms = work.pop()
            shift, reduces = groups[overlay[-1] if overlay else base.state]
            m |= shift & terms
            for a, rmask in reduces:
                ts = rmask & terms
                if ts:
                    work.append((*self.reduce_virtual(base, overlay, -a - 1), ts))
        return m

    def reduce_virtual(
        self, base: StackNode, overlay: tuple[int, ...], r: int
    ) -> tuple[StackNode, tuple[int, ...]]:
        """Rule ``r`` reduced on a virtual stack (the states of ``overlay`` above ``base``,
        nothing pushed for real): the new base and overlay, the goto state on top. The step
        of every reduce-chain simulation that splits terminals by action."""
        n = self.rule_len[r]
        if n <= len(overlay):
            b, ov = base, overlay[: len(overlay) - n]
        else:
            b, ov = base.ancestor(n - len(overlay)), ()
        top = ov[-1] if ov else b.state
        return b, (*ov, self.goto[top][self.rule_lhs[r]])

    def _dot_dead(self, node: StackNode) -> bool:
        """Whether a ``.`` read at ``node`` would continue a name no valid reference can
        continue (docs/scope.md): the ``.`` after a first part ``q`` bound nowhere once
        every FROM is known (``q`` no schema), or the ``.`` starting the third part of
        ``q.c`` where ``q`` is no schema. Only asked where the name has another way on (the
        caller keeps the ``.`` otherwise), so no position becomes a dead end."""
        sem = self.sem
        assert sem is not None
        rules, ok = self._chain_rules(node, sem.t_dot)
        if not ok:
            return False
        top = node
        for r in rules:
            top = self._reduce_valued(top, r, sem)
        if top.symbol != sem.n_any_name:
            return False
        p = top.parent
        if p is not None and p.symbol == sem.t_dot:
            q = p.parent  # `q . c .`: the third part
            if q is None or q.symbol != sem.n_any_name or not isinstance(q.value, bytes):
                return False
            if q.parent is not None and q.parent.symbol == sem.t_dot:
                return False
            return sem.restriction(self.ctx_at(p), q.value).qualified
        if not isinstance(top.value, bytes):
            return False  # a name whose value was dropped is never followed by `.` here
        return sem.restriction(self.ctx_at(top), top.value).dead

    def pending_refs(self, node: StackNode) -> bool:
        """Whether the stack holds select-list references an obligation may still read
        (``unbound_on`` can only answer non-empty below such a stack)."""
        if self.sem is None or not self.sem.bind:
            return False
        m: StackNode | None = node
        while m is not None:
            v = m.value
            if isinstance(v, Bag) and v.refs:
                return True
            m = m.parent
        return False

    def _drop_unbound_closers(self, node: StackNode, m: int) -> int:
        """``m`` without the terminals that would close a FROM clause while a reference of
        its select list is bound nowhere (``docs/scope.md``; ``parser/closers.py``)."""
        return drop_unbound_closers(self, node, m)

    def blocked_closers(self, node: StackNode) -> tuple[int, ...]:
        """The terminals (``end_id`` for EOS) the grammar would read next at ``node`` but a
        select-list obligation keeps out: each would close a FROM clause with a reference
        bound nowhere. Not memoized: callers ask only where a model tries to close."""
        if self.sem is None or not self.sem.bind or not self.pending_refs(node):
            return ()
        out: list[int] = []
        bits = self.closers_mask
        while bits:
            low = bits & -bits
            bits ^= low
            t = low.bit_length() - 1
            if self._simulate(node, t) and self.unbound_on(node, t):
                out.append(t)
        return tuple(out)

    def accepts_end(self, node: StackNode) -> bool:
        """Whether ``$END`` reduces to ACCEPT from ``node`` (memoized per node)."""
        e = node.eos
        if e is None:
            e = self._simulate(node, self.end_id) and not self.unbound_on(node, self.end_id)
            if (
                e
                and self.sem is not None
                and self.sem.t_dot >= 0
                and (
                    self._must_qualify(node)
                    or schema_only(self, node, self.sem)
                    or unbound_schema_ref(self, node, self.sem)
                )
            ):
                e = False
            node.eos = e
        return e

    def shift(self, node: StackNode, tid: int, lexeme: bytes | None = None) -> StackNode:
        """Apply the reduce chain and the shift of ``tid`` (caller checked viability).

        ``lexeme`` is the shifted lexeme; with scope-aware lexicons it becomes the semantic
        value of an identifier terminal, and each reduction synthesizes its value.

        Kept per (node, terminal, value): the result is an interned node, and the same
        shift recurs (a lexeme finalized, then emitted by the byte after it; the words a
        completion tries; issue #26: 58 % of a cold reserve's shifts were repeats, each
        reducing its chain's scope values again).
        """
        sem = self.sem
        val = lexeme if sem is not None and tid in sem.valued else None
        key = (node.uid, tid, val)
        hit = self._shifted.get(key)
        if hit is not None:
            return hit
        action, goto, lhs, rlen = self.action, self.goto, self.rule_lhs, self.rule_len
        sym_base = self.n_terminals + 1
        push = self._push
        while True:
            a = action[node.state][tid]
            if a > 0:
                out = push(node, a - 1, tid, val)
                if len(self._shifted) >= INTERN_LIMIT:
                    self._shifted.clear()
                self._shifted[key] = out
                return out
            if a == 0:  # unreachable when allowed_mask was consulted
                raise ParseError(f"terminal {self.grammar.terminals[tid].name} not shiftable")
            r = -a - 1
            if sem is None:
                base = node.ancestor(rlen[r])
                node = push(base, goto[base.state][lhs[r]], sym_base + lhs[r])
            else:
                node = self._reduce_valued(node, r, sem)

    def _reduce_valued(self, node: StackNode, r: int, sem: ScopeRules) -> StackNode:
        """Reduce rule ``r`` on ``node`` with its semantic value (scope-aware lexicons)."""
        if sem.unit_merge[r]:  # what ScopeRules.reduce gives a one-child merge
            v = node.value
            base = node.parent
            assert base is not None, "popped below the stack root"
            a = self.rule_lhs[r]
            val = v if isinstance(v, Bag) else None
            return self._push(base, self.goto[base.state][a], self.n_terminals + 1 + a, val)
        n = self.rule_len[r]
        kids: list[Any] = [None] * n
        base = node
        for i in range(n - 1, -1, -1):
            kids[i] = base.value
            assert base.parent is not None, "popped below the stack root"
            base = base.parent
        if sem.records_refs(r):
            levels = self.ctx_at(base).levels
            val = sem.reduce(r, kids, bool(levels) and levels[-1].state == NONE)
        else:
            val = sem.reduce(r, kids)
        a = self.rule_lhs[r]
        return self._push(base, self.goto[base.state][a], self.n_terminals + 1 + a, val)

    def unbound_on(self, node: StackNode, tid: int) -> tuple[Ref, ...]:
        """The select-list references left unbound if ``tid`` (or ``$END``) is read next
        at ``node``: non-empty only when its reduce chain closes a FROM clause that binds
        none of them (``ScopeRules.unbound_refs``; ``ScopeTable.bind_select_list``)."""
        ctx = self.closed_context(node, tid)
        if ctx is None:
            return ()
        assert self.sem is not None
        return self.sem.unbound_refs(ctx)

    def closed_context(self, node: StackNode, tid: int) -> Context | None:
        """The scope context right after reading ``tid`` at ``node`` closes a FROM clause
        whose select list holds references (None if it closes none, or no references):
        its top level lists the FROM items the clause ends with (``parser/closers.py``)."""
        return closed_context(self, node, tid)

    def _push(self, parent: StackNode, state: int, symbol: int, value: Any = None) -> StackNode:
        """The interned node ``state`` over ``parent`` (see ``_interned``)."""
        k = (parent.uid, state, symbol, value)
        tbl = self._interned
        node = tbl.get(k)
        if node is None:
            node = StackNode(state, parent, symbol, value)
            if len(tbl) >= INTERN_LIMIT:
                tbl.clear()
                self._shifted.clear()  # (it would keep the old nodes' family apart)
            tbl[k] = node
        return node

    # ------------------------------------------------------------------ scanner side
    def resolve(
        self, la_state: int, lexeme: bytes, allowed: int, lex: LexiconView | None = None
    ) -> int | None:
        """Contextual resolution: the first candidate (in resolution order) that is ignored
        (returns -1) or in ``allowed``; None if no candidate is viable. ``lex``: the
        lexicons in force (default: the grammar's own)."""
        lexicon = self.lexicon if lex is None else lex.words
        stops = allowed >> self.stop_shift
        for tid in self.candidates[la_state]:
            words = lexicon.get(tid)
            if words is not None and not words.admits(lexeme):
                continue
            if (self.ignored_mask >> tid) & 1:
                return -1
            if stops and (stops >> tid) & 1:
                return None  # a blocked reserved keyword: no identifier fallback
            if (allowed >> tid) & 1:
                return tid
        return None

    def _emit(self, node: StackNode, la_state: int, lexeme: bytes) -> StackNode | None:
        """Resolve a forced emission against the live stack and apply it."""
        tid = self.resolve(la_state, lexeme, self.allowed_mask(node), self.lex_at(node))
        if tid is None:
            return None
        return node if tid < 0 else self.shift(node, tid, lexeme)

    def advance(self, cfg: Configuration, data: bytes) -> Configuration | None:
        """Feed ``data``; the new configuration, or None if the result is not viable."""
        r = self._advance(cfg.stack, cfg.scan, data)
        if r is None:
            return None
        node, scan = r
        if not self.remainder_live(node, scan):
            return None
        return Configuration(node, scan)

    def feed(self, cfg: Configuration, data: bytes) -> Configuration | None:
        """:meth:`advance` without its final liveness test: a streaming step, so feeding
        ``a`` then ``b`` gives what feeding ``a + b`` gives (``advance`` cannot promise that:
        a pending lexeme no terminal continues may still end in an emission). A caller that
        grows one text piece by piece feeds each piece once and tests liveness with
        :meth:`remainder_live` (``advance(cfg, d)`` is ``feed(cfg, d)`` when that is live)."""
        r = self._advance(cfg.stack, cfg.scan, data)
        return None if r is None else Configuration(*r)

    def _advance(
        self, node: StackNode, scan: ScanState, data: bytes
    ) -> tuple[StackNode, ScanState] | None:
        trans, accept = self.trans, self.accept_masks
        st, rem, la_len, la_st = scan.dfa, scan.rem, scan.la_len, scan.la_state
        queue = data
        i = 0
        n = len(queue)
        while i < n:
            b = queue[i]
            s2 = trans[st * 256 + b]
            if s2 != DEAD:
                st = s2
                rem += queue[i : i + 1]
                i += 1
                if accept[s2]:
                    la_len = len(rem)
                    la_st = s2
                continue
            if la_len <= 0:
                return None
            nxt = self._emit(node, la_st, rem[:la_len])
            if nxt is None:
                return None
            node = nxt
            queue = rem[la_len:] + queue[i:]
            i = 0
            n = len(queue)
            st, rem, la_len, la_st = START, b"", -1, DEAD
        return node, ScanState(st, rem, la_len, la_st)

    def remainder_live(self, node: StackNode, scan: ScanState) -> bool:
        """The pending lexeme can still become an allowed or ignored terminal."""
        if not scan.rem:
            return True
        return self.pending_live(scan.dfa, scan.rem, self.allowed_mask(node), self.lex_at(node))

    def pending_live(
        self, dfa: int, rem: bytes, allowed: int, lex: LexiconView | None = None
    ) -> bool:
        """Liveness of a non-empty pending lexeme under the allowed set ``allowed``."""
        lexicon, lmask = (self.lexicon, self.lexicon_mask) if lex is None else (lex.words, lex.mask)
        m = self.live_masks[dfa] & (allowed | self.ignored_mask)
        if m & ~lmask:
            return True
        m &= lmask
        while m:
            low = m & -m
            if lexicon[low.bit_length() - 1].admits_prefix(rem):
                return True
            m ^= low
        return False

    def finalize(self, cfg: Configuration) -> StackNode | None:
        """Emit the pending lexeme(s) as at end of input; the stack, or None on failure."""
        node, scan = cfg.stack, cfg.scan
        while scan.rem:
            if scan.la_len <= 0:
                return None
            nxt = self._emit(node, scan.la_state, scan.rem[: scan.la_len])
            if nxt is None:
                return None
            r = self._advance(nxt, EMPTY_SCAN, scan.rem[scan.la_len :])
            if r is None:
                return None
            node, scan = r
        return node

    def eos_allowed(self, cfg: Configuration) -> bool:
        """EOS gate (paper §3): the output so far is a complete sentence."""
        node = self.finalize(cfg)
        return node is not None and self.accepts_end(node)

    def allowed_terminals(self, cfg: Configuration) -> frozenset[str]:
        m = self.allowed_mask(cfg.stack)
        terms = self.grammar.terminals
        return frozenset(terms[t].name for t in range(self.n_terminals) if (m >> t) & 1)


class IncrementalParser:
    """A mutable handle over immutable configurations: feed, ask, copy, roll back.

    Mirrors lark's interactive parser (``feed``/``copy``/``accepts``) at byte level::

        p = IncrementalParser(Grammar.dialect("sqlite"))
        p.feed(b"SELECT * FRO")      # raises ParseError if not a viable prefix
        p.is_viable(b"M t")          # would feeding keep it viable?
        p.accepts_eos()              # may the sentence end here?
    """

    def __init__(self, grammar: Grammar, config: Configuration | None = None) -> None:
        self.grammar = grammar
        self.runtime = ParserRuntime.for_grammar(grammar)
        self.config: Configuration = config or self.runtime.initial
        self._history: list[Configuration] = []
        self._n_bytes = 0

    def feed(self, data: bytes) -> None:
        """Consume ``data``; raises :class:`ParseError` (state unchanged) if not viable."""
        nxt = self.runtime.advance(self.config, data)
        if nxt is None:
            raise ParseError(
                f"{data!r} at byte {self._n_bytes} leaves the viable prefixes of {self.grammar!r}"
            )
        self._history.append(self.config)
        self.config = nxt
        self._n_bytes += len(data)

    def try_feed(self, data: bytes) -> bool:
        """Like :meth:`feed` but returns False instead of raising."""
        try:
            self.feed(data)
        except ParseError:
            return False
        return True

    def is_viable(self, data: bytes) -> bool:
        """Whether feeding ``data`` would keep the input a viable prefix (no state change)."""
        return self.runtime.advance(self.config, data) is not None

    def accepts_eos(self) -> bool:
        """Whether the input so far is a complete sentence (EOS legal)."""
        return self.runtime.eos_allowed(self.config)

    def allowed_terminals(self) -> frozenset[str]:
        """Terminals the parser can shift next (A(σ) by reduce-chain simulation)."""
        return self.runtime.allowed_terminals(self.config)

    @property
    def pending(self) -> bytes:
        """The bytes of the pending (not yet emitted) lexeme."""
        return self.config.scan.rem

    @property
    def config_hash(self) -> int:
        return self.config.config_hash

    def copy(self) -> IncrementalParser:
        """An independent handle sharing all structure (O(1))."""
        p = IncrementalParser(self.grammar, self.config)
        p._history = list(self._history)
        p._n_bytes = self._n_bytes
        return p

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` successful feeds."""
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} feeds (have {len(self._history)})")
        if n:
            self.config = self._history[-n]
            del self._history[-n:]


def is_viable_prefix(grammar: Grammar, data: bytes) -> bool:
    """Whether ``data`` is a viable prefix of the grammar's language."""
    rt = ParserRuntime.for_grammar(grammar)
    return rt.advance(rt.initial, data) is not None


def accepts(grammar: Grammar, data: bytes) -> bool:
    """Whether ``data`` is a complete sentence of the grammar's language."""
    rt = ParserRuntime.for_grammar(grammar)
    cfg = rt.advance(rt.initial, data)
    return cfg is not None and rt.eos_allowed(cfg)
