//! The LALR(1) parser runtime (paper §2 L1, §3): frozen tables, a persistent interned
//! stack arena, the allowed-set simulation memoized per node, and the incremental
//! scanner's advance with maximal munch and contextual resolution.
//!
//! This is a transcription of `grid_sql/parser/incremental.py` (`ParserRuntime`) for
//! grammars *without* scope rules (`ParserRuntime.sem is None`: dialect grammars, role
//! projections and their schema lexicons), which stays the reference; `tests/kernels/`
//! holds the two equal on every step of the mask corpora (states, configuration hashes,
//! allowed sets, EOS verdicts, rejections). Why in Rust: a cold mask fill resolves a few
//! hundred CD classes, each a shift plus a re-scan on a fresh stack, and in Python that
//! orchestration, not the trie walk, is most of a miss (`bench/RESULTS-masks.md`).
//!
//! Stacks are nodes of an arena: pushing `(parent, state, symbol)` twice gives the same
//! [`NodeId`] (hash-consing, as `ParserRuntime._push`), so per-node memos (allowed set,
//! EOS) are computed once per distinct stack, and a configuration is a node id plus a
//! scan [`Frame`]. Node 0 is the root (the start state). The arena only grows; a caller
//! that wants to bound it drops the runtime and builds a new one.

use std::fmt;
use std::sync::Arc;

use blake2::digest::CustomizedInit;
use blake2::{Blake2b128, Digest};

use crate::fxhash::FxMap;
use crate::lexer::{DEAD, START};
use crate::walk::{Frame, Resolved, ScanTables};

/// Index of a stack node in its runtime's arena.
pub type NodeId = u32;

/// The root node (the start state, empty stack).
pub const ROOT: NodeId = 0;

const NO_PARENT: NodeId = NodeId::MAX;

/// Personalization of the configuration hash (`grid_sql/parser/stack.py` `_HASH_PERSON`).
const HASH_PERSON: &[u8] = b"grid-sql-cfg";

/// Inconsistent tables or a parse that popped below the root (bad tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeError(pub String);

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RuntimeError {}

fn err<T>(msg: String) -> Result<T, RuntimeError> {
    Err(RuntimeError(msg))
}

/// `H(node) = low64 BLAKE2b-128[person "grid-sql-cfg"](H(parent) ‖ u32 state ‖ u32
/// symbol)`, all little-endian: the rolling configuration hash of the audit trail (paper
/// §6.4), equal to `grid_sql.parser.stack.mix_hash`.
pub fn mix_hash(parent_hash: u64, state: u32, symbol: u32) -> u64 {
    let mut h = Blake2b128::new_customized(HASH_PERSON);
    h.update(parent_hash.to_le_bytes());
    h.update(state.to_le_bytes());
    h.update(symbol.to_le_bytes());
    let d = h.finalize();
    let mut low = [0u8; 8];
    low.copy_from_slice(&d[..8]);
    u64::from_le_bytes(low)
}

/// Dense LALR(1) tables in `LALRTables`' layout (as [`crate::lalr::build`] returns them):
/// `action[s * (n_terminals + 1) + t]` is `s' + 1` (shift), `-(r + 1)` (reduce) or 0
/// (error), column `n_terminals` being `$END`; `goto[s * max(1, n_nonterminals) + a]` is
/// the target state or -1.
#[derive(Debug, Clone)]
pub struct ParseTables {
    n_terminals: usize,
    n_cols: usize,
    n_goto_cols: usize,
    n_states: usize,
    action: Vec<i32>,
    goto: Vec<i32>,
    rule_lhs: Vec<u32>,
    rule_len: Vec<u32>,
    start_state: u32,
    end_state: u32,
    /// Per state, the terminals with a non-error action (`$END` excluded), ascending.
    row_terms: Vec<Vec<u32>>,
}

impl ParseTables {
    /// Build and validate (every shift, reduce and goto in range).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        n_terminals: usize,
        n_nonterminals: usize,
        action: Vec<i32>,
        goto: Vec<i32>,
        rule_lhs: Vec<u32>,
        rule_len: Vec<u32>,
        start_state: u32,
        end_state: u32,
    ) -> Result<Self, RuntimeError> {
        let n_cols = n_terminals + 1;
        if action.is_empty() || action.len() % n_cols != 0 {
            return err(format!(
                "action must hold n_states * {n_cols} entries, got {}",
                action.len()
            ));
        }
        let n_states = action.len() / n_cols;
        let n_goto_cols = n_nonterminals.max(1);
        if goto.len() != n_states * n_goto_cols {
            return err(format!(
                "goto must hold {n_states} * {n_goto_cols} entries, got {}",
                goto.len()
            ));
        }
        if rule_lhs.len() != rule_len.len() {
            return err("rule_lhs and rule_len differ in length".into());
        }
        if let Some(&a) = rule_lhs.iter().find(|&&a| a as usize >= n_goto_cols) {
            return err(format!("rule left-hand side {a} out of range"));
        }
        for &a in &action {
            if a > 0 && a as usize > n_states {
                return err(format!("shift to state {} out of range", a - 1));
            }
            if a < 0 && (-(a as i64) - 1) as usize >= rule_lhs.len() {
                return err(format!("reduce by rule {} out of range", -(a as i64) - 1));
            }
        }
        if let Some(&g) = goto.iter().find(|&&g| g < -1 || g >= n_states as i32) {
            return err(format!("goto to state {g} out of range"));
        }
        if start_state as usize >= n_states || end_state as usize >= n_states {
            return err(format!(
                "start {start_state} / end {end_state} state out of range ({n_states} states)"
            ));
        }
        let row_terms = (0..n_states)
            .map(|s| {
                (0..n_terminals as u32)
                    .filter(|&t| action[s * n_cols + t as usize] != 0)
                    .collect()
            })
            .collect();
        Ok(ParseTables {
            n_terminals,
            n_cols,
            n_goto_cols,
            n_states,
            action,
            goto,
            rule_lhs,
            rule_len,
            start_state,
            end_state,
            row_terms,
        })
    }

    /// Number of LALR states.
    pub fn n_states(&self) -> usize {
        self.n_states
    }

    /// Number of terminals (`$END` is terminal id `n_terminals`).
    pub fn n_terminals(&self) -> usize {
        self.n_terminals
    }

    #[inline]
    fn action(&self, state: u32, t: u32) -> i32 {
        self.action[state as usize * self.n_cols + t as usize]
    }

    #[inline]
    fn goto(&self, state: u32, lhs: u32) -> Result<u32, RuntimeError> {
        let g = self.goto[state as usize * self.n_goto_cols + lhs as usize];
        if g < 0 {
            return err(format!("no goto from state {state} on nonterminal {lhs}"));
        }
        Ok(g as u32)
    }
}

#[derive(Debug, Clone, Copy)]
struct Node {
    state: u32,
    parent: NodeId,
    symbol: u32,
    depth: u32,
    hash: u64,
}

/// The parser runtime of one grammar: tables, scanner tables and the stack arena.
#[derive(Debug, Clone)]
pub struct ParserRuntime {
    tables: Arc<ParseTables>,
    scan: Arc<ScanTables>,
    /// words of an allowed set (`ceil(n_terminals / 64)`, at least the scanner's)
    words: usize,
    nodes: Vec<Node>,
    intern: FxMap<(NodeId, u32, u32), NodeId>,
    /// per node: `words` words of its allowed set, valid where `allowed_done`
    allowed: Vec<u64>,
    allowed_done: Vec<bool>,
    /// per node: 0 unknown, 1 `$END` does not reach ACCEPT, 2 it does
    eos: Vec<u8>,
    /// whether `push` computes the configuration hash (off: `hash` recomputes it from the
    /// chain on demand; a filler never reads it, and BLAKE2b per push was ~4 % of the
    /// samples of a cold-profile run)
    hashing: bool,
}

impl ParserRuntime {
    /// A runtime with an arena holding only the root.
    pub fn new(tables: Arc<ParseTables>, scan: Arc<ScanTables>) -> Result<Self, RuntimeError> {
        let words = tables.n_terminals.div_ceil(64).max(scan.n_words()).max(1);
        if scan.n_words() * 64 < tables.n_terminals {
            return err(format!(
                "scanner knows {} terminal bits, the tables {} terminals",
                scan.n_words() * 64,
                tables.n_terminals
            ));
        }
        let root = Node {
            state: tables.start_state,
            parent: NO_PARENT,
            symbol: 0,
            depth: 0,
            hash: 0,
        };
        Ok(ParserRuntime {
            tables,
            scan,
            words,
            nodes: vec![root],
            intern: FxMap::default(),
            allowed: vec![0; words],
            allowed_done: vec![false],
            eos: vec![0],
            hashing: true,
        })
    }

    /// The same runtime with configuration hashes computed on demand only (see `hash`).
    /// Only while the arena holds just the root, so every node is stored one way.
    pub fn without_hashing(mut self) -> Self {
        assert_eq!(self.nodes.len(), 1, "without_hashing on a used arena");
        self.hashing = false;
        self
    }

    /// A runtime over the same tables with an empty arena (node ids of `self` mean
    /// nothing to it).
    pub fn fresh(&self) -> Self {
        let mut rt = Self::new(Arc::clone(&self.tables), Arc::clone(&self.scan))
            .expect("the tables were validated by new");
        rt.hashing = self.hashing;
        rt
    }

    /// The scanner tables.
    pub fn scan_tables(&self) -> &ScanTables {
        &self.scan
    }

    /// Words of an allowed set.
    pub fn words(&self) -> usize {
        self.words
    }

    /// Nodes in the arena (the root included).
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// LALR state of `id`.
    pub fn state(&self, id: NodeId) -> u32 {
        self.nodes[id as usize].state
    }

    /// The node below `id` (`None` for the root).
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        let p = self.nodes[id as usize].parent;
        (p != NO_PARENT).then_some(p)
    }

    /// Symbol shifted (terminal id) or reduced (`n_terminals + 1 + lhs`) onto `id`.
    pub fn symbol(&self, id: NodeId) -> u32 {
        self.nodes[id as usize].symbol
    }

    /// Stack depth of `id` (the root is 0).
    pub fn depth(&self, id: NodeId) -> u32 {
        self.nodes[id as usize].depth
    }

    /// Rolling configuration hash of `id` (the root is 0); O(depth) BLAKE2b calls when the
    /// runtime was made `without_hashing`.
    pub fn hash(&self, id: NodeId) -> u64 {
        if self.hashing {
            return self.nodes[id as usize].hash;
        }
        let mut chain = Vec::with_capacity(self.depth(id) as usize);
        let mut n = id;
        while let Some(p) = self.parent(n) {
            chain.push(n);
            n = p;
        }
        chain
            .iter()
            .rev()
            .fold(0, |h, &c| mix_hash(h, self.state(c), self.symbol(c)))
    }

    /// LALR states from the bottom (start state) to `id`.
    pub fn states(&self, id: NodeId) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.depth(id) as usize + 1);
        let mut n = id;
        loop {
            out.push(self.state(n));
            match self.parent(n) {
                Some(p) => n = p,
                None => break,
            }
        }
        out.reverse();
        out
    }

    /// The interned node `state` over `parent` (`ParserRuntime._push`).
    pub fn push(&mut self, parent: NodeId, state: u32, symbol: u32) -> NodeId {
        if let Some(&id) = self.intern.get(&(parent, state, symbol)) {
            return id;
        }
        let p = self.nodes[parent as usize];
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node {
            state,
            parent,
            symbol,
            depth: p.depth + 1,
            hash: if self.hashing {
                mix_hash(p.hash, state, symbol)
            } else {
                0
            },
        });
        self.allowed.resize(self.allowed.len() + self.words, 0);
        self.allowed_done.push(false);
        self.eos.push(0);
        self.intern.insert((parent, state, symbol), id);
        id
    }

    fn ancestor(&self, id: NodeId, k: u32) -> Result<NodeId, RuntimeError> {
        let mut n = id;
        for _ in 0..k {
            n = match self.parent(n) {
                Some(p) => p,
                None => return err("a reduction popped below the stack root".into()),
            };
        }
        Ok(n)
    }

    /// A(σ): the terminals whose reduce chain reaches a SHIFT (`ParserRuntime._lalr_mask`,
    /// equal to `allowed_mask` for grammars without scope rules), memoized per node.
    ///
    /// The terminals of the top state's row are simulated together: at each virtual top
    /// they split by action (shift: allowed; error: not; reduce `r`: one group), and each
    /// group's reduce is applied once for all of its terminals.
    pub fn allowed(&mut self, id: NodeId) -> Result<&[u64], RuntimeError> {
        self.ensure_allowed(id)?;
        Ok(self.allowed_of(id))
    }

    fn ensure_allowed(&mut self, id: NodeId) -> Result<(), RuntimeError> {
        let i = id as usize;
        if !self.allowed_done[i] {
            let w = self.words;
            let m = self.lalr_mask(id)?;
            self.allowed[i * w..(i + 1) * w].copy_from_slice(&m);
            self.allowed_done[i] = true;
        }
        Ok(())
    }

    /// The memoized allowed set of `id` (after [`Self::ensure_allowed`]), cut to the
    /// scanner's words (the terminal words; no stop bits without scope rules).
    fn allowed_of(&self, id: NodeId) -> &[u64] {
        let (i, w) = (id as usize, self.words);
        &self.allowed[i * w..(i + 1) * w]
    }

    fn lalr_mask(&self, id: NodeId) -> Result<Vec<u64>, RuntimeError> {
        let t = &*self.tables;
        let mut m = vec![0u64; self.words];
        let mut work: Vec<(NodeId, Vec<u32>, Vec<u32>)> =
            vec![(id, Vec::new(), t.row_terms[self.state(id) as usize].clone())];
        // groups by reduce action, in first-seen order (the order does not change the union)
        let mut groups: Vec<(i32, Vec<u32>)> = Vec::new();
        while let Some((base, overlay, terms)) = work.pop() {
            let top = overlay.last().copied().unwrap_or_else(|| self.state(base));
            groups.clear();
            for &term in &terms {
                let a = t.action(top, term);
                if a > 0 {
                    m[term as usize / 64] |= 1 << (term % 64);
                } else if a < 0 {
                    match groups.iter_mut().find(|(ga, _)| *ga == a) {
                        Some((_, ts)) => ts.push(term),
                        None => groups.push((a, vec![term])),
                    }
                }
            }
            for (a, ts) in groups.drain(..) {
                let r = (-a - 1) as usize;
                let n = t.rule_len[r] as usize;
                let (b, mut ov) = if n <= overlay.len() {
                    (base, overlay[..overlay.len() - n].to_vec())
                } else {
                    (self.ancestor(base, (n - overlay.len()) as u32)?, Vec::new())
                };
                let top = ov.last().copied().unwrap_or_else(|| self.state(b));
                ov.push(t.goto(top, t.rule_lhs[r])?);
                work.push((b, ov, ts));
            }
        }
        Ok(m)
    }

    /// Whether `tid`'s reduce chain ends in a shift, or for `$END` (`tid == n_terminals`)
    /// in ACCEPT (`ParserRuntime._simulate`).
    pub fn simulate(&self, id: NodeId, tid: u32) -> Result<bool, RuntimeError> {
        let t = &*self.tables;
        let is_end = tid as usize == t.n_terminals;
        let mut overlay: Vec<u32> = Vec::new();
        let mut base = id;
        loop {
            let top = overlay.last().copied().unwrap_or_else(|| self.state(base));
            let a = t.action(top, tid);
            if a > 0 {
                return Ok(!is_end);
            }
            if a == 0 {
                return Ok(false);
            }
            let r = (-a - 1) as usize;
            let n = t.rule_len[r] as usize;
            if n <= overlay.len() {
                overlay.truncate(overlay.len() - n);
            } else {
                base = self.ancestor(base, (n - overlay.len()) as u32)?;
                overlay.clear();
            }
            let top = overlay.last().copied().unwrap_or_else(|| self.state(base));
            let g = t.goto(top, t.rule_lhs[r])?;
            if is_end && g == t.end_state {
                return Ok(true);
            }
            overlay.push(g);
        }
    }

    /// Whether `$END` reduces to ACCEPT from `id` (`ParserRuntime.accepts_end`), memoized.
    pub fn accepts_end(&mut self, id: NodeId) -> Result<bool, RuntimeError> {
        let e = self.eos[id as usize];
        if e != 0 {
            return Ok(e == 2);
        }
        let ok = self.simulate(id, self.tables.n_terminals as u32)?;
        self.eos[id as usize] = if ok { 2 } else { 1 };
        Ok(ok)
    }

    /// Apply `tid`'s reduce chain and its shift (`ParserRuntime.shift`); an error if the
    /// tables refuse it (callers check the allowed set first).
    pub fn shift(&mut self, id: NodeId, tid: u32) -> Result<NodeId, RuntimeError> {
        let sym_base = self.tables.n_terminals as u32 + 1;
        let mut node = id;
        loop {
            let t = &*self.tables;
            let a = t.action(self.state(node), tid);
            if a > 0 {
                return Ok(self.push(node, (a - 1) as u32, tid));
            }
            if a == 0 {
                return err(format!(
                    "terminal {tid} not shiftable in state {}",
                    self.state(node)
                ));
            }
            let r = (-a - 1) as usize;
            let (lhs, n) = (t.rule_lhs[r], t.rule_len[r]);
            let base = self.ancestor(node, n)?;
            let g = self.tables.goto(self.state(base), lhs)?;
            node = self.push(base, g, sym_base + lhs);
        }
    }

    /// Resolve a forced emission of `lexeme` (accepted at DFA state `la_state`) against
    /// `id` and apply it (`ParserRuntime._emit`): the new top, or `None` if no candidate is
    /// viable.
    fn emit(
        &mut self,
        id: NodeId,
        la_state: u32,
        lexeme: &[u8],
    ) -> Result<Option<NodeId>, RuntimeError> {
        self.ensure_allowed(id)?;
        let nw = self.scan.n_words();
        let allowed = self.allowed_of(id);
        match self
            .scan
            .resolve(la_state, lexeme, &allowed[..nw.min(allowed.len())])
        {
            None => Ok(None),
            Some(Resolved::Ignored) => Ok(Some(id)),
            Some(Resolved::Terminal(t)) => self.shift(id, t).map(Some),
        }
    }

    /// Feed `data` from the configuration `(id, scan)` (`ParserRuntime._advance`): maximal
    /// munch, a lexeme emitted when the DFA dies and resolved against the live stack. The
    /// new configuration, or `None` if some emission has no viable terminal. The pending
    /// lexeme's liveness is not checked (see [`ParserRuntime::remainder_live`]).
    pub fn advance_raw(
        &mut self,
        id: NodeId,
        scan: &Frame,
        data: &[u8],
    ) -> Result<Option<(NodeId, Frame)>, RuntimeError> {
        let mut node = id;
        let (mut st, mut rem, mut la_len, mut la_st) =
            (scan.dfa, scan.rem.clone(), scan.la_len, scan.la_state);
        let mut queue: Vec<u8> = data.to_vec();
        let mut i = 0usize;
        while i < queue.len() {
            let b = queue[i];
            let s2 = self.scan.step(st, b);
            if s2 != DEAD {
                st = s2;
                rem.push(b);
                i += 1;
                if self.scan.accepting(s2) {
                    la_len = rem.len() as i64;
                    la_st = s2;
                }
                continue;
            }
            if la_len <= 0 {
                return Ok(None);
            }
            let cut = la_len as usize;
            match self.emit(node, la_st, &rem[..cut])? {
                None => return Ok(None),
                Some(n) => node = n,
            }
            let mut q = rem[cut..].to_vec();
            q.extend_from_slice(&queue[i..]);
            queue = q;
            i = 0;
            st = START;
            rem.clear();
            la_len = -1;
            la_st = DEAD;
        }
        Ok(Some((
            node,
            Frame {
                dfa: st,
                rem,
                la_len,
                la_state: la_st,
            },
        )))
    }

    /// The pending lexeme can still become an allowed or ignored terminal
    /// (`ParserRuntime.remainder_live`).
    pub fn remainder_live(&mut self, id: NodeId, scan: &Frame) -> Result<bool, RuntimeError> {
        if scan.rem.is_empty() {
            return Ok(true);
        }
        self.ensure_allowed(id)?;
        let nw = self.scan.n_words();
        let allowed = self.allowed_of(id);
        Ok(self
            .scan
            .pending_live(scan.dfa, &scan.rem, &allowed[..nw.min(allowed.len())]))
    }

    /// Feed `data` (`ParserRuntime.advance`): the new configuration, or `None` if the
    /// result is not a viable prefix.
    pub fn advance(
        &mut self,
        id: NodeId,
        scan: &Frame,
        data: &[u8],
    ) -> Result<Option<(NodeId, Frame)>, RuntimeError> {
        match self.advance_raw(id, scan, data)? {
            Some((n, f)) if self.remainder_live(n, &f)? => Ok(Some((n, f))),
            _ => Ok(None),
        }
    }

    /// Emit the pending lexeme(s) as at end of input (`ParserRuntime.finalize`): the
    /// stack, or `None` on failure.
    pub fn finalize(&mut self, id: NodeId, scan: &Frame) -> Result<Option<NodeId>, RuntimeError> {
        let (mut node, mut scan) = (id, scan.clone());
        while !scan.rem.is_empty() {
            if scan.la_len <= 0 {
                return Ok(None);
            }
            let cut = scan.la_len as usize;
            let Some(n) = self.emit(node, scan.la_state, &scan.rem[..cut])? else {
                return Ok(None);
            };
            let tail = scan.rem[cut..].to_vec();
            match self.advance_raw(n, &Frame::start(), &tail)? {
                None => return Ok(None),
                Some((n2, f2)) => {
                    node = n2;
                    scan = f2;
                }
            }
        }
        Ok(Some(node))
    }

    /// EOS gate (paper §3, `ParserRuntime.eos_allowed`): the input so far is a complete
    /// sentence.
    pub fn eos_allowed(&mut self, id: NodeId, scan: &Frame) -> Result<bool, RuntimeError> {
        match self.finalize(id, scan)? {
            None => Ok(false),
            Some(n) => self.accepts_end(n),
        }
    }
}
