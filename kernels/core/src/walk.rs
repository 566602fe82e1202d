//! The cold trie walk (paper §4.1–§4.2): CI token ids and the CD residue of one key.
//!
//! This is a transcription of `grid_sql/mask/walk.py` (`Walker.walk`), which stays the
//! reference; parity tests in `tests/kernels/` hold the two bit-identical (ids, residue
//! entries and their order). Why a kernel: on a 151k-token vocabulary the walk visits
//! hundreds of thousands of trie nodes, and the per-node work (one DFA step, one bitset
//! test) is nanoseconds in Rust but a microsecond of interpreter dispatch in Python.
//!
//! Inputs are plain tables, built once per (grammar runtime, token trie):
//! - [`ScanTables`]: the union-DFA transitions, per-state "accepts anything" flags and live
//!   terminal bitsets, accept candidates in resolution order, the ignored-terminal bitset
//!   and the per-terminal schema lexicons ([`Lexicon`], `fold_lexeme` semantics);
//! - [`TrieArrays`]: the DFS-contiguous token trie (edge byte, depth, subtree size) and
//!   its alias CSR (`alias_offsets`, `alias_ids`), exactly `grid_sql/mask/trie.py`'s layout.
//!
//! The allowed set A is a little-endian bitset over terminal ids (`u64` words; missing
//! high words read as zero).

use std::sync::Arc;

use crate::lexer::{DEAD, START};
pub(crate) use crate::scan::{class_bits, err};
pub use crate::scan::{
    fold_lexeme, Lexicon, Resolved, ScanDfa, ScanTables, WalkError, QUOTE_BYTES,
};

/// The DFS-contiguous token trie (`grid_sql/mask/trie.py`).
#[derive(Debug, Clone)]
pub struct TrieArrays {
    pub(crate) edge: Vec<u8>,
    pub(crate) depth: Vec<u16>,
    pub(crate) size: Vec<u32>,
    pub(crate) alias_off: Vec<u32>,
    pub(crate) alias_ids: Vec<i32>,
    /// per node: the byte classes (`SINK_CLASSES`) holding every edge byte strictly below it
    pub(crate) below: Vec<u8>,
}

impl TrieArrays {
    /// Build and validate the preorder layout (children one level deeper, subtrees nested).
    pub fn new(
        edge: Vec<u8>,
        depth: Vec<u16>,
        size: Vec<u32>,
        alias_off: Vec<u32>,
        alias_ids: Vec<i32>,
    ) -> Result<Self, WalkError> {
        let n = edge.len();
        if n == 0 || depth.len() != n || size.len() != n || alias_off.len() != n + 1 {
            return err(format!(
                "trie arrays disagree: {n} edges, {} depths, {} sizes, {} alias offsets",
                depth.len(),
                size.len(),
                alias_off.len()
            ));
        }
        if depth[0] != 0 || size[0] as usize != n {
            return err("node 0 must be the root (depth 0, size = number of nodes)".into());
        }
        // Stack of open subtree ends; node i must sit at depth = number of open ancestors.
        let mut open: Vec<usize> = Vec::new();
        for i in 0..n {
            while open.last().is_some_and(|&end| end <= i) {
                open.pop();
            }
            let end = i + size[i] as usize;
            if size[i] == 0
                || depth[i] as usize != open.len()
                || open.last().is_some_and(|&e| end > e)
            {
                return err(format!("trie node {i} breaks the DFS preorder layout"));
            }
            open.push(end);
        }
        if alias_off[0] != 0
            || alias_off.windows(2).any(|w| w[0] > w[1])
            || alias_off[n] as usize != alias_ids.len()
        {
            return err("alias offsets must be a CSR row pointer over alias_ids".into());
        }
        // bottom-up (reverse preorder): a node's classes are those of each child's edge
        // byte and of everything below that child
        let mut below = vec![u8::MAX; n];
        for i in (0..n).rev() {
            let end = i + size[i] as usize;
            let mut m = u8::MAX;
            let mut c = i + 1;
            while c < end {
                m &= class_bits(edge[c]) & below[c];
                c += size[c] as usize;
            }
            below[i] = m;
        }
        Ok(TrieArrays {
            edge,
            depth,
            size,
            alias_off,
            alias_ids,
            below,
        })
    }

    /// Number of trie nodes.
    pub fn n_nodes(&self) -> usize {
        self.edge.len()
    }

    /// Heap bytes held by the arrays (what sharing one trie saves per extra walker).
    pub fn heap_bytes(&self) -> usize {
        self.edge.len()
            + self.depth.len() * 2
            + self.size.len() * 4
            + self.alias_off.len() * 4
            + self.alias_ids.len() * 4
            + self.below.len()
    }

    /// The edge byte into node `i`.
    pub fn edge(&self, i: usize) -> u8 {
        self.edge[i]
    }

    /// The number of nodes in node `i`'s subtree, `i` included.
    pub fn size(&self, i: usize) -> usize {
        self.size[i] as usize
    }

    /// All ids spelled exactly as node `i`'s prefix.
    pub fn ids_at(&self, i: usize) -> &[i32] {
        &self.alias_ids[self.alias_off[i] as usize..self.alias_off[i + 1] as usize]
    }
}

/// Scanner state inside the walk (`ScanFrame`): DFA state after `rem`, last accept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub dfa: u32,
    pub rem: Vec<u8>,
    pub la_len: i64,
    pub la_state: u32,
}

impl Frame {
    /// The empty pending lexeme.
    pub fn start() -> Self {
        Frame {
            dfa: START,
            rem: Vec::new(),
            la_len: -1,
            la_state: DEAD,
        }
    }
}

/// A boundary-crossing subtree: below trie `node`, after emitting `terminal`, re-scan
/// `requeue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdEntry {
    pub node: u32,
    pub terminal: u32,
    pub requeue: Vec<u8>,
}

/// CI token ids (sorted, alias-expanded), CD residue (DFS order) and nodes visited.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkOutput {
    pub ci_ids: Vec<i32>,
    pub residue: Vec<CdEntry>,
    pub visited: u64,
}

/// CI ids as bitmask words (XGrammar layout: bit `i % 32` of word `i / 32` for id `i`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CiWords {
    /// all `n_words` words
    Dense(Vec<u32>),
    /// the non-zero words as `(word index, word)`, ascending index: at most a quarter of
    /// the words can be non-zero (few ids, as in most CD sub-walks)
    Sparse(Vec<(u32, u32)>),
}

impl CiWords {
    /// The non-zero words as `(word index, word)`, ascending.
    pub fn nonzero(&self) -> Box<dyn Iterator<Item = (usize, u32)> + '_> {
        match self {
            CiWords::Dense(d) => Box::new(
                d.iter()
                    .enumerate()
                    .filter(|(_, &w)| w != 0)
                    .map(|(i, &w)| (i, w)),
            ),
            CiWords::Sparse(s) => Box::new(s.iter().map(|&(i, w)| (i as usize, w))),
        }
    }

    /// Distinct ids set (the words' popcount).
    pub fn count(&self) -> usize {
        self.nonzero().map(|(_, w)| w.count_ones() as usize).sum()
    }
}

/// [`WalkOutput`] with the CI ids as bitmask words instead of a sorted id list: what the
/// mask filler stores ([`Walker::walk_words`]). Same ids, residue and visit count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkWords {
    pub words: CiWords,
    /// number of CI ids (the words' popcount)
    pub n_ids: usize,
    pub residue: Vec<CdEntry>,
    pub visited: u64,
}

/// The alias-slice ranges of the admitted subtrees, the residue and the visit count: the
/// walk before its ids are expanded.
#[derive(Default)]
pub(crate) struct Walked {
    pub(crate) ranges: Vec<(u32, u32)>,
    pub(crate) residue: Vec<CdEntry>,
    pub(crate) visited: u64,
}

/// Reusable buffers of [`Walker::walk_span`]: the frame stack, the step's scratch frame and
/// requeue, and the per-DFA-state live-kind memo (valid for one allowed set).
pub(crate) struct SpanScratch {
    frames: Vec<Frame>,
    scratch: Frame,
    q: Vec<u8>,
    kinds: Vec<u8>,
}

impl SpanScratch {
    pub(crate) fn new(n_states: usize) -> Self {
        SpanScratch {
            frames: vec![Frame::start()],
            scratch: Frame::start(),
            q: Vec::with_capacity(16),
            kinds: vec![0; n_states],
        }
    }
}

enum Step {
    Dead,
    Cd(u32, Vec<u8>),
    Frame,
}

/// Runs CI walks for one (scan tables, token trie) pair; immutable, `Sync`. The trie is
/// held through an `Arc`: it depends on the vocabulary alone, so every walker of one
/// vocabulary (one per role grammar) references a single copy.
#[derive(Debug, Clone)]
pub struct Walker {
    scan: ScanTables,
    trie: Arc<TrieArrays>,
}

impl Walker {
    /// A walker owning its trie.
    pub fn new(scan: ScanTables, trie: TrieArrays) -> Self {
        Walker {
            scan,
            trie: Arc::new(trie),
        }
    }

    /// A walker over a shared trie (no copy of the trie arrays).
    pub fn shared(scan: ScanTables, trie: Arc<TrieArrays>) -> Self {
        Walker { scan, trie }
    }

    pub fn scan_tables(&self) -> &ScanTables {
        &self.scan
    }

    pub fn trie(&self) -> &Arc<TrieArrays> {
        &self.trie
    }

    /// Scan one byte `b` from `f` under A = `allowed` into `out` (`Walker.step`).
    fn step(&self, f: &Frame, b: u8, allowed: &[u64], out: &mut Frame, q: &mut Vec<u8>) -> Step {
        let sc = &self.scan;
        let dfa_t: &ScanDfa = &sc.dfa;
        let mut dfa = f.dfa;
        out.rem.clear();
        out.rem.extend_from_slice(&f.rem);
        let mut la_len = f.la_len;
        let mut la_st = f.la_state;
        q.clear();
        q.push(b);
        let mut i = 0;
        while i < q.len() {
            let c = q[i];
            let s2 = dfa_t.trans[dfa as usize * 256 + c as usize];
            if s2 != DEAD {
                dfa = s2;
                out.rem.push(c);
                i += 1;
                if dfa_t.accepting[s2 as usize] {
                    la_len = out.rem.len() as i64;
                    la_st = s2;
                }
                continue;
            }
            if la_len <= 0 {
                return Step::Dead;
            }
            let la = la_len as usize;
            let choice = match sc.resolve(la_st, &out.rem[..la], allowed) {
                None => return Step::Dead,
                Some(c) => c,
            };
            let mut rest = out.rem[la..].to_vec();
            rest.extend_from_slice(&q[i..]);
            if let Resolved::Terminal(t) = choice {
                return Step::Cd(t, rest);
            }
            *q = rest;
            i = 0;
            dfa = START;
            out.rem.clear();
            la_len = -1;
            la_st = DEAD;
        }
        out.dfa = dfa;
        out.la_len = la_len;
        out.la_state = la_st;
        Step::Frame
    }

    fn may_recover(&self, f: &Frame, allowed: &[u64]) -> bool {
        f.la_len > 0
            && self
                .scan
                .resolve(f.la_state, &f.rem[..f.la_len as usize], allowed)
                .is_some()
    }

    /// CI walk of the subtree strictly below `node0` from `frame0` under A = `allowed`.
    pub fn walk(
        &self,
        node0: usize,
        frame0: &Frame,
        allowed: &[u64],
    ) -> Result<WalkOutput, WalkError> {
        let w = self.walk_ranges(node0, frame0, allowed)?;
        let total: usize = w.ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
        let ids = sorted_ids(&self.trie.alias_ids, &w.ranges, total);
        Ok(WalkOutput {
            ci_ids: ids,
            residue: w.residue,
            visited: w.visited,
        })
    }

    /// [`Walker::walk`] with the CI ids set straight into `n_words` bitmask words. Why: on a
    /// 151k vocabulary a root entry holds ~50k ids; the sorted list (200 KB of fresh memory
    /// per cold walk, page faults included) was only re-packed into words and hashed by the
    /// filler, never read again. Ids outside the words, or negative, are an error (as
    /// [`or_ids_into_words`]).
    pub fn walk_words(
        &self,
        node0: usize,
        frame0: &Frame,
        allowed: &[u64],
        n_words: usize,
    ) -> Result<WalkWords, WalkError> {
        let w = self.walk_ranges(node0, frame0, allowed)?;
        let n_ids: usize = w.ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
        let words = if n_ids * 4 <= n_words {
            // few ids (a quarter of the words could not all be non-zero): sort them and
            // pack the non-zero words, without touching n_words words
            let mut ids: Vec<i32> = Vec::with_capacity(n_ids);
            for &(a, b) in &w.ranges {
                ids.extend_from_slice(&self.trie.alias_ids[a as usize..b as usize]);
            }
            ids.sort_unstable();
            let mut sparse: Vec<(u32, u32)> = Vec::new();
            for &t in &ids {
                let wi = (t as u32 as usize) >> 5;
                if t < 0 || wi >= n_words {
                    return err(format!("token id {t} outside a {n_words}-word bitmask"));
                }
                let bit = 1u32 << (t as u32 & 31);
                match sparse.last_mut() {
                    Some(last) if last.0 as usize == wi => last.1 |= bit,
                    _ => sparse.push((wi as u32, bit)),
                }
            }
            CiWords::Sparse(sparse)
        } else {
            let mut words = vec![0u32; n_words];
            for &(a, b) in &w.ranges {
                or_ids_into_words(&self.trie.alias_ids[a as usize..b as usize], &mut words)?;
            }
            CiWords::Dense(words)
        };
        Ok(WalkWords {
            words,
            n_ids,
            residue: w.residue,
            visited: w.visited,
        })
    }

    fn walk_ranges(
        &self,
        node0: usize,
        frame0: &Frame,
        allowed: &[u64],
    ) -> Result<Walked, WalkError> {
        let tr = &self.trie;
        if node0 >= tr.n_nodes() {
            return err(format!(
                "trie node {node0} out of range ({} nodes)",
                tr.n_nodes()
            ));
        }
        let n_states = self.scan.n_states();
        if frame0.dfa as usize >= n_states || frame0.la_state as usize >= n_states {
            return err(format!(
                "scan frame states ({}, {}) out of range ({} states)",
                frame0.dfa, frame0.la_state, n_states
            ));
        }
        if frame0.la_len > frame0.rem.len() as i64 {
            return err(format!(
                "last-accept length {} exceeds the pending lexeme ({} bytes)",
                frame0.la_len,
                frame0.rem.len()
            ));
        }
        let mut w = Walked::default();
        let mut sp = SpanScratch::new(n_states);
        self.walk_span(
            node0 + 1,
            node0 + tr.size[node0] as usize,
            frame0,
            allowed,
            &mut w,
            &mut sp,
        );
        Ok(w)
    }

    /// The walk over the nodes `start..end`: whole sibling subtrees (in preorder) whose
    /// parent's frame is `parent`, appending to `w`. Why split out: the class-table walk
    /// ([`crate::classes`]) runs today's node-by-node walk only below its frontier nodes.
    /// `sp` may be reused across spans of one walk (its live-kind memo depends on
    /// `allowed` alone); indices must be valid (callers validate).
    pub(crate) fn walk_span(
        &self,
        start: usize,
        end: usize,
        parent: &Frame,
        allowed: &[u64],
        w: &mut Walked,
        sp: &mut SpanScratch,
    ) {
        let tr = &self.trie;
        if start >= end {
            return;
        }
        let d0 = tr.depth[start] as usize - 1;
        // frames[k] is the frame at depth d0 + k (validated layout: children are one deeper).
        let SpanScratch {
            frames,
            scratch,
            q,
            kinds,
        } = sp;
        if frames.is_empty() {
            frames.push(Frame::start());
        }
        frames[0].clone_from(parent);
        let (ranges, residue) = (&mut w.ranges, &mut w.residue);
        let mut i = start;
        let mut visited: u64 = 0;
        while i < end {
            visited += 1;
            let k = tr.depth[i] as usize - d0;
            let step = self.step(&frames[k - 1], tr.edge[i], allowed, scratch, q);
            match step {
                Step::Dead => {
                    i += tr.size[i] as usize;
                }
                Step::Cd(t, requeue) => {
                    residue.push(CdEntry {
                        node: i as u32,
                        terminal: t,
                        requeue,
                    });
                    i += tr.size[i] as usize;
                }
                Step::Frame => {
                    let (a, b) = (tr.alias_off[i], tr.alias_off[i + 1]);
                    // live_kinds depends on the DFA state alone under this walk's A: read
                    // once per state (bit 0: known, 1: plain, 2: any lexicon), not per node
                    let ds = scratch.dfa as usize;
                    let mut kind = kinds[ds];
                    if kind == 0 {
                        let (p, l) = self.scan.live_kinds(scratch.dfa, allowed);
                        kind = 1 | (u8::from(p) << 1) | (u8::from(l) << 2);
                        kinds[ds] = kind;
                    }
                    let (plain, any_lex) = (kind & 2 != 0, kind & 4 != 0);
                    let ok = self.scan.pending_live_with(
                        scratch.dfa,
                        &scratch.rem,
                        allowed,
                        plain,
                        any_lex,
                    );
                    let size = tr.size[i] as usize;
                    // Sink subtree: every byte below loops on this DFA state, so every node
                    // below keeps this frame's state (the scan never dies: no CD entry) and,
                    // when liveness does not read the lexeme, this node's verdict. All of
                    // them are admitted (one id range) or none is; counted as visited where
                    // the node-by-node walk would visit them.
                    let sink = size > 1
                        && tr.below[i] & self.scan.dfa.sink[scratch.dfa as usize] != 0
                        && (plain || !any_lex); // liveness_ignores_rem
                    let b = if sink && ok {
                        tr.alias_off[i + size]
                    } else {
                        b
                    };
                    if ok && a < b {
                        match ranges.last_mut() {
                            Some(last) if last.1 == a => last.1 = b,
                            _ => ranges.push((a, b)),
                        }
                    }
                    let explore = ok || self.may_recover(scratch, allowed);
                    if sink {
                        if explore {
                            visited += size as u64 - 1;
                        }
                        i += size;
                    } else if explore {
                        if frames.len() == k {
                            frames.push(Frame::start());
                        }
                        std::mem::swap(&mut frames[k], scratch);
                        i += 1;
                    } else {
                        i += tr.size[i] as usize;
                    }
                }
            }
        }
        w.visited += visited;
    }
}

/// The ids of the alias slices `ranges`, ascending. Alias ids are distinct and come in
/// spelling order, so large sets are sorted through a bitset (linear in the id range)
/// instead of a comparison sort.
fn sorted_ids(alias_ids: &[i32], ranges: &[(u32, u32)], total: usize) -> Vec<i32> {
    let mut ids = Vec::with_capacity(total);
    if total < 4096 {
        for &(a, b) in ranges {
            ids.extend_from_slice(&alias_ids[a as usize..b as usize]);
        }
        ids.sort_unstable();
        return ids;
    }
    let mut max = 0i32;
    let mut min = 0i32;
    for &(a, b) in ranges {
        for &t in &alias_ids[a as usize..b as usize] {
            max = max.max(t);
            min = min.min(t);
        }
    }
    if min < 0 {
        // not produced by TokenTrie (ids are non-negative); keep the general path
        for &(a, b) in ranges {
            ids.extend_from_slice(&alias_ids[a as usize..b as usize]);
        }
        ids.sort_unstable();
        return ids;
    }
    let mut bits = vec![0u64; max as usize / 64 + 1];
    for &(a, b) in ranges {
        for &t in &alias_ids[a as usize..b as usize] {
            bits[t as usize / 64] |= 1 << (t as usize % 64);
        }
    }
    for (w, &word) in bits.iter().enumerate() {
        let mut m = word;
        while m != 0 {
            ids.push((w * 64 + m.trailing_zeros() as usize) as i32);
            m &= m - 1;
        }
    }
    ids
}

/// Pack sorted-or-not token ids into XGrammar-layout bitmask words (bit `i % 32` of word
/// `i / 32`), OR-ing into `words`. Ids outside the buffer are an error.
pub fn or_ids_into_words(ids: &[i32], words: &mut [u32]) -> Result<(), WalkError> {
    for &t in ids {
        let w = (t as u32 as usize) >> 5;
        if t < 0 || w >= words.len() {
            return err(format!(
                "token id {t} outside a {}-word bitmask",
                words.len()
            ));
        }
        words[w] |= 1 << (t as u32 & 31);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sorted_ids;

    #[test]
    fn bitset_sort_equals_comparison_sort() {
        // distinct ids in a scrambled (spelling-like) order, many ranges, both paths
        let n = 20_000i32;
        let alias: Vec<i32> = (0..n).map(|i| (i * 7919) % n).collect();
        for (step, len) in [(3usize, 2usize), (5, 4), (1, 1), (50, 49)] {
            let ranges: Vec<(u32, u32)> = (0..alias.len())
                .step_by(step)
                .map(|a| (a as u32, (a + len).min(alias.len()) as u32))
                .collect();
            let total: usize = ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
            let mut want: Vec<i32> = ranges
                .iter()
                .flat_map(|&(a, b)| alias[a as usize..b as usize].iter().copied())
                .collect();
            want.sort_unstable();
            assert_eq!(sorted_ids(&alias, &ranges, total), want);
            assert!(total >= 4096);
        }
        assert_eq!(sorted_ids(&alias, &[(0, 3)], 3), {
            let mut v = alias[..3].to_vec();
            v.sort_unstable();
            v
        });
    }
}
