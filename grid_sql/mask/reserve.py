"""The termination reserve (paper §5, Proposition 9, mode 1): a token-denominated completion.

From any viable configuration κ the reserve produces a token sequence that (i) is legal
token by token under the exact mask and (ii) ends at ACCEPT, together with its length in
vocabulary tokens. The decode loop keeps ``cost(κ) <= remaining budget`` as an invariant and
writes the completion (then EOS) as soon as continuing would break it, so every non-error
stop is a complete statement.

How the completion is built:

1. *Pending lexeme.* If the scan remainder ρ finalizes as a terminal, it is kept; otherwise the
   shortest byte extension that makes it finalize is found by breadth-first search over the
   viable-prefix oracle (a quoted string needs its quote, ``Cust`` under a lexicon needs
   ``omer``).
2. *Grammar completion.* On the resulting LALR stack, the cheapest way to ACCEPT is read off
   the LR(0) kernel items: for the top state, each kernel item ``A -> α·β`` costs
   ``cost(β)`` plus the completion of the stack after reducing ``A`` (pop ``|α|``, GOTO).
   Items of an LR(0) state are exactly the items valid for its viable prefix, so every
   choice extends the prefix toward a sentence. ``cost`` of a nonterminal is its cheapest
   yield, computed once per (grammar, vocabulary).
3. *Spelling.* Each terminal is spelled by a fixed shortest lexeme (a lexicon word for
   category terminals) preceded by one space, and each such piece is cut into tokens by
   :func:`~grid_sql.mask.vocab.greedy_token_ids`. Every byte prefix of ``prefix + completion``
   is a viable prefix, so *any* segmentation is legal under the exact mask; a terminal's
   cost is the token count of its piece, which makes the cost exact for the sequence
   actually written (not a terminal-denominated under-estimate).

Among completions of equal token count a few terminals are disfavoured (``*`` as a whole
select list would be a statement SQLite refuses without ``FROM``); the reported cost is
always the exact token count.

With scopes, the terminal the grammar completion would write first may be refused by the
runtime; the completions through the terminals it allows, and a bounded search of the
configurations themselves, live in :mod:`grid_sql.mask.reserve_search`.

The completion is minimal in this token-weighted terminal metric, not over all token
sequences (a shorter spelling across lexeme boundaries may exist); soundness needs only that
the reported cost is the length of what is written. The result is verified with the oracle
before it is returned.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence

from lark.common import ParserConf
from lark.parsers.lalr_analysis import LALR_Analyzer

from ..errors import MaskError
from ..grammar.ir import Grammar
from ..grammar.lexer import DEAD, START
from ..grammar.lexicon import fold_lexeme
from ..grammar.scope import MAX_REFS, Ref
from ..parser.extend import extension_filter
from ..parser.incremental import Configuration, LexiconView, ParserRuntime
from ..parser.stack import StackNode
from .bind_pieces import bind_pieces
from .reserve_search import SCALE, Completion, FedText, RefinedCompletions
from .reserve_stack import Item, Kept, solve_stack
from .vocab import Vocabulary, greedy_token_ids

__all__ = ["Completion", "ReserveTable", "reserve_table"]

_MAX_EXTENSION = 96  # bytes: longer than any identifier or literal the BFS needs to close
_MAX_BFS_NODES = 50_000
_MAX_WORD_TRIES = 256  # listed words tried when the breadth-first search gives up
RESERVE_MEMO_LIMIT = 1 << 14  # completions kept per (grammar, vocabulary)
_STACK_MEMO_LIMIT = 1 << 17  # (state over stack) values kept per table (_stack_completion)
_SKIP_SAME_TARGET = True  # see _bfs_close; tests turn it off to check that nothing changes
# printable ASCII first, so lexemes and extensions are readable whenever they can be
_ALPHABET = bytes([*range(0x20, 0x7F), *range(0x00, 0x20), *range(0x7F, 0x100)])
# Search weights: _SCALE per token, +1 for terminals that make a poor filler.
_SCALE = SCALE  # (defined beside the lower bounds that read it: reserve_search.py)
_DISFAVOURED = frozenset({"STAR"})


class ReserveTable(RefinedCompletions):
    """Per (grammar, vocabulary) tables for minimal completions (paper: ReserveTable)."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.rt = ParserRuntime.for_grammar(grammar)
        tables = grammar.tables
        self.n_t = tables.n_terminals
        self.nt_ids = dict(tables.nonterminal_ids)
        self.end_state = tables.end_state
        self.start_state = tables.start_state
        self._cap = min(64, max(len(b) for b in vocab.token_bytes))
        # Lexemes are joined by one space where the grammar ignores whitespace (SQL), and
        # abutted otherwise (maximal munch may then merge them: the final check catches it).
        st = grammar.lexer.scan(b" ")
        ws = st != DEAD and any((self.rt.ignored_mask >> t) & 1 for t in self.rt.candidates[st])
        self.sep = b" " if ws else b""
        self.separators = (b" ", b"\n") if ws else (b"",)
        self.lexeme: dict[int, bytes] = self._shortest_lexemes()
        self.piece: dict[int, tuple[int, ...]] = {
            t: tuple(self._spell(self.sep + lex)) for t, lex in self.lexeme.items()
        }
        # Under the CTE-name rule (grammar/scope.py ``cte_names``) a CTE reference admits
        # only the CTE names bound where it is written, often none: never the cheapest way
        # to write a FROM item (a table name is allowed wherever a CTE reference is)
        skip = "cte_ref" if self.rt.sem is not None and self.rt.sem.cte_names else None
        self.sym_cost, self.best_rule = self._symbol_costs(skip)
        kernels = self._lr0_kernels()
        self.items: list[list[Item]] = self._kernel_items(kernels, self.sym_cost)
        # every rule counted: costs no completion undercuts (reserve_search's lower bounds)
        self.items_all = (
            self.items if skip is None else self._kernel_items(kernels, self._symbol_costs(None)[0])
        )
        # per configuration *value*: stacks are hash-consed, so a configuration that recurs
        # (same statement shape, or re-derived after a rollback) is a hit, not a new object
        self._memo: OrderedDict[Configuration, Completion] = OrderedDict()
        self._memo_lock = threading.Lock()
        # (state, uid of the node below) -> (cost, symbols to ACCEPT): _stack_completion
        self._sc_memo: Kept = {}
        self._sc_memo_all: Kept = {}
        # (node uid, depth) -> ranked completions: reserve_search._allowed_completions
        self._ranked_memo: dict[tuple[int, int], list[tuple[int, list[int]]]] = {}
        self._best_memo: dict[tuple[int, int], list[int] | None] = {}  # ... its first entry

    def _spell(self, data: bytes) -> list[int]:
        return greedy_token_ids(self.vocab, data, max_len=self._cap)

    # ------------------------------------------------------------------ offline tables
    def _shortest_lexemes(self) -> dict[int, bytes]:
        """A short lexeme per used terminal that scans (and resolves, when possible) as it."""
        rt = self.rt
        g = self.grammar
        used = {g.terminal_ids[n] for n in g.used_terminals}
        # BFS over the union DFA: the shortest string reaching each state.
        trans = rt.trans
        shortest: dict[int, bytes] = {START: b""}
        queue = deque([START])
        while queue:
            st = queue.popleft()
            s = shortest[st]
            if len(s) >= _MAX_EXTENSION:
                continue
            for b in _ALPHABET:
                nx = trans[st * 256 + b]
                if nx != DEAD and nx not in shortest:
                    shortest[nx] = s + bytes([b])
                    queue.append(nx)
        first: dict[int, bytes] = {}
        anyc: dict[int, bytes] = {}
        for st, s in shortest.items():
            cands = rt.candidates[st]
            if not s or not cands:
                continue
            lead = True
            for tid in cands:
                if tid in rt.lexicon:
                    continue  # category terminals are spelled from their words below
                if lead and (tid not in first or len(s) < len(first[tid])):
                    first[tid] = s
                if tid not in anyc or len(s) < len(anyc[tid]):
                    anyc[tid] = s
                lead = False
        out: dict[int, bytes] = {}
        for tid in used:
            words = rt.lexicon.get(tid)
            if words is not None:
                best: bytes | None = None
                for w in words.shortest_first:
                    st = g.lexer.scan(w)
                    if st == DEAD or tid not in rt.candidates[st]:
                        continue
                    if best is None:
                        best = w
                    if rt.resolve(st, w, 1 << tid) == tid:
                        best = w
                        break
                if best is not None:
                    out[tid] = best
            elif tid in first:
                out[tid] = first[tid]
            elif tid in anyc:
                out[tid] = anyc[tid]
        return out

    def _sym(self, name: str) -> int:
        tid = self.grammar.terminal_ids.get(name)
        if tid is not None:
            return tid
        return self.n_t + 1 + self.nt_ids[name]

    def _symbol_costs(self, skip: str | None) -> tuple[list[float], dict[int, tuple[int, ...]]]:
        """Cheapest yield (in tokens) of every symbol, and the rule giving it, without the
        rules of ``skip``: a Knuth-style fixed point."""
        n_nt = len(self.nt_ids)
        cost = [math.inf] * (self.n_t + 1 + n_nt)
        best_rule: dict[int, tuple[int, ...]] = {}
        names = self.grammar.terminals
        for t, toks in self.piece.items():
            # tokens dominate; the tie-break keeps executable fillers first (SELECT 0, not
            # SELECT * with no FROM)
            cost[t] = float(_SCALE * max(1, len(toks)) + (names[t].name in _DISFAVOURED))
        rules = [
            (self._sym(r.lhs), tuple(self._sym(s) for s in r.rhs))
            for r in self.grammar.rules
            if r.lhs != skip
        ]
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                c = sum(cost[s] for s in rhs) if rhs else 0.0
                if c < cost[lhs]:
                    cost[lhs] = c
                    best_rule[lhs] = rhs
                    changed = True
        return cost, best_rule

    def _lr0_kernels(self) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """``(state, lhs, |α|, β)`` of every LR(0) kernel item ``lhs -> α·β``, per canonical
        state id (lark's LR(0) sets, mapped by walking their transitions in lockstep with the
        frozen tables)."""
        g = self.grammar
        tables = g.tables
        an = LALR_Analyzer(ParserConf(list(g.lark_rules), {}, [g.start]))
        an.compute_lr0_states()
        root = an.lr0_start_states[g.start]
        canon = {root: tables.start_state}
        queue = deque([root])
        action, goto = tables.action, tables.goto
        while queue:
            iset = queue.popleft()
            s = canon[iset]
            for sym, nxt in iset.transitions.items():
                if sym.is_term:
                    tid = g.terminal_ids.get(sym.name)
                    if tid is None:  # $END: handled by the accept test
                        continue
                    a = int(action[s, tid])
                    if a <= 0:
                        raise MaskError(f"LR(0) shift on {sym.name} missing in state {s}")
                    s2 = a - 1
                else:
                    nt = self.nt_ids.get(sym.name)
                    if nt is None:
                        continue
                    s2 = int(goto[s, nt])
                if nxt in canon:
                    if canon[nxt] != s2:
                        raise MaskError("LR(0) sets do not match the frozen LALR tables")
                    continue
                canon[nxt] = s2
                queue.append(nxt)
        out: list[tuple[int, int, int, tuple[int, ...]]] = []
        for iset, s in canon.items():
            for rp in iset.kernel:
                lhs = self.nt_ids.get(rp.rule.origin.name, -1)
                beta = tuple(
                    self._sym(x.name) for x in rp.rule.expansion[rp.index :] if x.name != "$END"
                )
                out.append((s, lhs, rp.index, beta))
        return out

    def _kernel_items(
        self, kernels: list[tuple[int, int, int, tuple[int, ...]]], sym_cost: list[float]
    ) -> list[list[Item]]:
        """The kernel items of every state costed by ``sym_cost`` (those of finite cost)."""
        items: list[list[Item]] = [[] for _ in range(self.grammar.tables.n_states)]
        for s, lhs, k, beta in kernels:
            c = sum(sym_cost[x] for x in beta)
            if not math.isinf(c):
                items[s].append(Item(lhs, k, beta, int(c)))
        for row in items:
            # a total order: lark's kernels are sets, iterated in an order that varies with
            # the process's string hashing, and cost ties (`CREATE TABLE A ( A )` and
            # `CREATE VIEW A AS SELECT A`) would otherwise be broken differently per process
            row.sort(key=lambda it: (it.cost, it.lhs, it.k, it.beta))
        return items

    # ------------------------------------------------------------------ per configuration
    def _stack_completion(self, node: StackNode) -> list[int] | None:
        """Cheapest symbol sequence from stack ``node`` to ACCEPT (None if there is none;
        ``mask/reserve_stack.py``: the values are kept across calls)."""
        return self._stack_completion_cost(node)[0]

    def _stack_completion_cost(
        self, node: StackNode, *, every_rule: bool = False
    ) -> tuple[list[int] | None, float]:
        """:meth:`_stack_completion` and its cost in the search metric (``_SCALE`` per
        token, +1 per disfavoured terminal; inf when there is none). With ``every_rule``
        the rules the completion leaves out (``cte_ref``) count too: a cost no grammar
        completion undercuts."""
        got, total, _ = self._solve_stack(node, carried=True, every_rule=every_rule)
        return (None if got is None else list(got)), total

    def _solve_stack(
        self, node: StackNode, *, carried: bool, every_rule: bool = False
    ) -> tuple[tuple[int, ...] | None, float, bool]:
        """``reserve_stack.solve_stack`` on this table's items (with ``carried``: reading
        and keeping the values of earlier calls)."""
        all_items = every_rule and self.items_all is not self.items
        kept = (self._sc_memo_all if all_items else self._sc_memo) if carried else None
        return solve_stack(
            self.items_all if all_items else self.items,
            self.rt.goto,
            self.end_state,
            node,
            kept,
            _STACK_MEMO_LIMIT,
        )

    def _expand(self, symbols: list[int]) -> list[int]:
        """Terminal ids of the cheapest yield of ``symbols`` (left to right)."""
        out: list[int] = []
        stack = list(reversed(symbols))
        while stack:
            s = stack.pop()
            if s < self.n_t:
                out.append(s)
            else:
                stack.extend(reversed(self.best_rule[s]))
        return out

    def _close_pending(self, cfg: Configuration) -> tuple[bytes, StackNode] | None:
        """Bytes that end the pending lexeme and the stack after it is emitted."""
        if not cfg.scan.rem:
            return b"", cfg.stack
        # Extending the lexeme itself almost always suffices (and keeps the search narrow);
        # the full alphabet also tries bytes that force an emission first.
        return (
            self._bfs_close(cfg, extend_only=True)
            or self._bfs_close(cfg, extend_only=False)
            or self._word_close(cfg)
        )

    def _word_close(self, cfg: Configuration) -> tuple[bytes, StackNode] | None:
        """Finish the pending lexeme as a word of a category the view in force admits there
        (shortest first). The breadth-first search can run out of nodes before a quoted name
        is closed when several large categories read the same prefix (PostgreSQL `name ["`:
        quoted columns, qualifiers and ~3,000 quoted function names; found by the scoped walk
        arm, issue #29); a listed word whose extension finalizes is a way out it cannot miss.
        """
        rt = self.rt
        rem = cfg.scan.rem
        view = rt.lex_at(cfg.stack)
        live = rt.live_masks[cfg.scan.dfa]
        cands: set[bytes] = set()
        for tid, cat in view.words.items():
            if cat.exclude or not (live >> tid) & 1 or not cat.reads(rem):
                continue
            key = fold_lexeme(rem, cat.fold_bare_case, cat.fold_quoted_case)
            for w in cat.words:
                if (
                    len(w) > len(rem)
                    and fold_lexeme(w[: len(rem)], cat.fold_bare_case, cat.fold_quoted_case) == key
                ):
                    cands.add(w[len(rem) :])
        for ext in sorted(cands, key=lambda e: (len(e), e))[:_MAX_WORD_TRIES]:
            c = rt.advance(cfg, ext)
            if c is not None:
                done = self._emitted(c, ext)
                if done is not None:
                    return done
        return None

    def _emitted(self, c: Configuration, ext: bytes) -> tuple[bytes, StackNode] | None:
        """``(ext, node)`` if the lexeme pending at ``c`` finalizes (to ``node``) and the
        separator the pieces start with does not change what it finalizes to."""
        rt = self.rt
        node = rt.finalize(c)
        if node is None:
            return None
        if not self.sep:
            return ext, node
        for sep in self.separators:
            c2 = rt.advance(c, sep)
            if c2 is not None and c2.stack.hash == node.hash and not c2.scan.rem.strip():
                # the pieces that follow start with b" "; any other separator is kept
                return (ext if sep == self.sep else ext + sep), node
        return None

    def _bfs_close(
        self, cfg: Configuration, *, extend_only: bool
    ) -> tuple[bytes, StackNode] | None:
        rt = self.rt
        trans = rt.trans
        live = rt.live_masks
        seen = 0
        visited: set[tuple[object, ...]] = set()
        queue: deque[tuple[bytes, Configuration]] = deque([(b"", cfg)])
        while queue and seen < _MAX_BFS_NODES:
            ext, c = queue.popleft()
            done = self._emitted(c, ext)
            if done is not None:
                return done
            if len(ext) >= _MAX_EXTENSION:
                continue
            base = c.scan.dfa * 256
            # Extending without an emission, two bytes that reach the same DFA state give the
            # same key and the same verdict unless a lexicon reads the bytes (liveness checks
            # lexicon prefixes): only the first such byte is advanced. Inside a comment or a
            # string that is ~3 advances per node instead of ~250. `seen` still counts every
            # byte, so the search's cut-off, and with it the result, is unchanged.
            skip = extend_only and _SKIP_SAME_TARGET
            lv = rt.lex_at(c.stack) if skip else None
            words = rt.lexicon_mask | (lv.mask if lv is not None else 0)
            reached: set[int] = set()
            step, ok, other = extension_filter(rt, c) if extend_only else (None, None, 0)
            for b in _ALPHABET:
                if step is not None:
                    t = trans[base + b]
                    if t == DEAD:
                        continue
                    if skip and not live[t] & words:
                        if t in reached:
                            seen += 1
                            continue
                        reached.add(t)
                    elif ok is not None and b not in ok and not live[t] & other:
                        seen += 1  # no word continues the lexeme with b: step(b) is None
                        continue
                    c2 = step(b)  # advance(c, bytes([b])), the stack's part decided once
                else:
                    c2 = rt.advance(c, bytes([b]))
                seen += 1
                if c2 is None:
                    continue
                # Configurations that behave alike from here on are explored once (inside a
                # comment or string every byte leads to the same state).
                sc = c2.scan
                key: tuple[object, ...] = (
                    c2.stack.hash,
                    sc.dfa,
                    sc.la_state,
                    len(sc.rem) - sc.la_len,
                )
                # every category that reads the lexeme here: the grammar's lexicons and the
                # ones the view in force adds (an IDENT held to the qualifier names and output
                # aliases at a sort key is no category of the grammar, issue #29: keyed on the
                # DFA state alone, `ORDER BY TotalSp` explored one extension and gave up)
                view = rt.lex_at(c2.stack)
                lex_live = rt.live_masks[sc.dfa] & (rt.lexicon_mask | view.mask)
                if lex_live:
                    key += self._lexicon_key(sc.rem, lex_live, view)
                if key not in visited:
                    visited.add(key)
                    queue.append((ext + bytes([b]), c2))
        return None

    def _lexicon_key(self, rem: bytes, live: int, view: LexiconView) -> tuple[bytes | None, ...]:
        """What a pending lexeme's future depends on under the live lexicon categories.

        A category compares its words case-folded when it folds bare case, so ``Ref_T`` and
        ``ref_t`` extend alike there: keying the raw bytes made the search explore every case
        variant of a long identifier (2^n prefixes) and give up on ``Ref`` → ``Ref_Template_Types``.
        A lexeme that is a prefix of no word of the category, in the grammar's lexicon or in
        the view in force, is decided alike for every extension: all such lexemes share one
        key. Keying their bytes made the search give up on MySQL's `_` (a charset introducer
        `_x'…'` or an identifier; 63 letters per level under a lexicon without `_` words),
        found by the walk arm. (None stands for "no word".)
        """
        out: list[bytes | None] = []
        while live:
            low = live & -live
            tid = low.bit_length() - 1
            cat = self.rt.lexicon.get(tid)
            scoped = view.words.get(tid)
            ref = cat if cat is not None else scoped
            assert ref is not None  # tid is in the grammar's lexicon mask or the view's
            if (cat is not None and cat.reads(rem)) or (scoped is not None and scoped.reads(rem)):
                out.append(fold_lexeme(rem, ref.fold_bare_case, ref.fold_quoted_case))
            else:
                out.append(None)
            live ^= low
        return tuple(out)

    def completion(self, cfg: Configuration) -> Completion:
        """The reserve completion of viable configuration ``cfg`` (memoized, LRU-bounded).

        Keyed by the configuration itself: its stack compares by identity (interned nodes,
        so equal stacks are one object and the key pins it) and its scan state by value.
        """
        memo = self._memo
        with self._memo_lock:
            hit = memo.get(cfg)
            if hit is not None:
                memo.move_to_end(cfg)
                return hit
        comp = self._compute(cfg)
        with self._memo_lock:
            memo[cfg] = comp
            if len(memo) > RESERVE_MEMO_LIMIT:
                memo.popitem(last=False)
        return comp

    def cost(self, cfg: Configuration) -> int:
        """Tokens needed to reach ACCEPT from ``cfg`` (EOS excluded)."""
        return self.completion(cfg).cost

    def _compute(self, cfg: Configuration) -> Completion:
        try:
            return self._compute_cheapest(cfg)
        except MaskError as exc:
            if self.rt.sem is None:
                raise
            # The cheapest grammar completion spelled word by word can fail under a scope
            # view: a word the view admits may still be unable to go on the way the grammar
            # alone would (a sort key held to qualifier names and output aliases, none of
            # which may end the statement: PostgreSQL `SELECT 1 ORDER BY` wrote `main`, a
            # schema that must qualify; found by the scoped walk arm, issue #29). Search the
            # configurations themselves instead, terminal by terminal.
            found = self._search_completion(cfg)
            if found is None:
                raise exc
            return found

    def _compute_cheapest(self, cfg: Configuration) -> Completion:
        rt = self.rt
        closed = self._close_pending(cfg)
        if closed is None:
            raise MaskError(f"no way to finish the pending lexeme {cfg.scan.rem!r}")
        ext, node = closed
        syms = self._stack_completion(node)
        if syms is None:
            raise MaskError(f"no completion from the stack {node!r}")
        terms = self._expand(syms)
        if rt.sem is not None and (
            (terms and not self._writable(node, terms[0]))
            or (not terms and not rt.accepts_end(node))
        ):
            # the scope rule dropped the first terminal the grammar alone would read (the
            # `.` after a name no reference can continue: `HAVING count`), or the end (a
            # bare sort key that must qualify): the cheapest completion through a terminal
            # it allows instead
            terms = self._completion_via_allowed(node)
        tokens: list[int] = self._spell(ext) if ext else []
        data = ext
        text = FedText(rt, cfg)
        binds = rt.pending_refs(node)
        for t in (*terms, rt.end_id) if binds else terms:
            if binds:
                data = self._bind_refs(text, data, tokens, t)
                if t == rt.end_id:
                    break
            word = self._scoped_word(text, data, t) if rt.sem is not None else None
            if word is None:
                tokens.extend(self.piece[t])
                data += self.sep + self.lexeme[t]
            else:
                tokens.extend(self._spell(self.sep + word))
                data += self.sep + word
        end = text.at(data)
        if end is None or not rt.eos_allowed(end):
            raise MaskError(
                f"reserve completion {data!r} does not reach ACCEPT from pending "
                f"{cfg.scan.rem!r} (terminals {[self.grammar.terminals[t].name for t in terms]})"
            )
        return Completion(tuple(tokens), data)

    def _bind_refs(self, text: FedText, data: bytes, tokens: list[int], tid: int) -> bytes:
        """Select-list obligations (``docs/scope.md``): if reading ``tid`` after ``data``
        would close a FROM clause with a select-list reference bound nowhere, first write
        FROM items that bind them (``, t AS q`` for ``q.c``, ``, t`` with a table ``t`` that
        has ``c`` for a bare ``c``); their tokens are appended to ``tokens``. The grammar
        completion after them is unchanged: they only extend the FROM list it closes."""
        rt = self.rt
        if not (rt.closers_mask >> tid) & 1:
            return data  # (no FROM clause closes on it: ``unbound_on`` would say so, later)
        for _ in range(MAX_REFS + 1):
            at = text.at(data)
            node = None if at is None else rt.finalize(at)
            if node is None:
                return data
            refs = rt.unbound_on(node, tid)
            if not refs:
                return data
            for piece in self._bind_pieces(refs[0]):
                nxt = text.at(data + piece)
                n2 = None if nxt is None else rt.finalize(nxt)
                if n2 is not None and len(rt.unbound_on(n2, tid)) < len(refs):
                    tokens.extend(self._spell(piece))
                    data += piece
                    break
            else:
                return data  # nothing binds it: the final check reports the completion
        return data

    def _bind_pieces(self, ref: Ref) -> list[bytes]:
        """Candidate FROM items binding ``ref``, best first (``mask/bind_pieces.py``)."""
        return bind_pieces(self, ref)

    def _scoped_word(self, text: FedText, data: bytes, tid: int) -> bytes | None:
        """Under scope-aware lexicons (grammar/scope.py) the fixed shortest lexeme of a
        category terminal may be out of scope where it is written: the shortest word the
        lexicon view in force there admits instead (None: keep the fixed lexeme). The cost
        stays exact: it counts the tokens of the word actually written."""
        rt = self.rt
        if tid not in rt.lexicon and (rt.sem is None or tid not in rt.sem.qualifier_terms):
            return None  # (an IDENT may be held to a scope view's names too)
        at = text.at(data + self.sep)
        if at is None:
            return None
        view = rt.lex_at(at.stack)
        words = view.words.get(tid)
        if view.fp is None or words is None or words.admits(self.lexeme[tid]):
            return None
        if words.exclude:  # a fresh-alias view refused the fixed lexeme: grow it
            fixed = self.lexeme[tid]
            tries = [fixed + bytes([c]) for c in b"_0123456789abcdefghijklmnopqrstuvwxyz"]
            words_: Sequence[bytes] = [w for w in tries if words.admits(w)]
        else:
            words_ = words.shortest_first
        first = None
        for w in words_:
            nxt = rt.advance(at, w + self.sep)
            if nxt is None:
                continue
            # not a word that may only go on with `.` (a schema name admitted as the first
            # word of a FROM item, docs/scope.md "Table names by schema") if another exists
            node = rt.finalize(nxt)
            if node is not None and rt.sem is not None and rt.sem.t_dot >= 0:
                only_dot = rt.allowed_mask(node) & rt.term_bits == 1 << rt.sem.t_dot
                if only_dot and not rt.accepts_end(node):
                    first = first or w
                    continue
            return w
        return first


_TABLES: dict[tuple[str, str], ReserveTable] = {}
_LOCK = threading.Lock()


def reserve_table(grammar: Grammar, vocab: Vocabulary) -> ReserveTable:
    """The shared :class:`ReserveTable` of (grammar fingerprint, vocabulary fingerprint)."""
    key = (grammar.fingerprint, vocab.fingerprint)
    with _LOCK:
        hit = _TABLES.get(key)
    if hit is not None:
        return hit
    table = ReserveTable(grammar, vocab)
    with _LOCK:
        return _TABLES.setdefault(key, table)
