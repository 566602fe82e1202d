//! Scan-signature class tables (issue #26 §1, first part): a cold walk's CI part as one
//! liveness test per class plus ORs of precomputed class rows, instead of a trie walk.
//!
//! Why: a cold walk on a 151k vocabulary steps tens to hundreds of thousands of trie nodes
//! (`bench/RESULTS-masks.md`, "Where a cold miss goes"), yet almost all of that work does
//! not depend on the allowed set A: which DFA state a token's bytes end in, where a munch
//! happens, whether that munch is of an always-ignored terminal (whitespace). A
//! [`ClassTable`] does that part once per (start trie node, DFA start state, last accept)
//! and keeps, from the node's subtree:
//!
//! - **classes**: token nodes whose scan from the start frame never makes a real munch
//!   (no DFA death, or only deaths that emit an ignored terminal by its first resolution
//!   candidate, which no A can change), grouped by (final DFA state, guard set), each with
//!   its alias ids as a packed bitmask row;
//! - **frontier nodes**: the first node on a path whose step makes any other munch (its
//!   resolution reads A); today's node-by-node walk ([`Walker::walk_span`]) runs below each
//!   frontier node that the walk would reach, from the parent frame the table rebuilds;
//! - **guard sets**: the (DFA state, last-accept state) pairs of the ancestors whose
//!   "explore" verdict (live, or recoverable by resolving the last accept) depends on A;
//!   a node is reached iff every pair of its set explores.
//!
//! Exactness argument (the trie walk stays the oracle: `tests/classes.rs` compares the
//! two on every node, frame and allowed set of its fixtures). Within one segment (bytes
//! scanned since the last restart) a node's DFA state is reached from its ancestors', so
//! its live set is a subset of theirs: a token admitted (live) has live ancestors in its
//! segment, which the walk explored. Ancestors in earlier segments are in the class's
//! guard set. That liveness reads the lexeme only through lexicon-restricted terminals, and
//! resolution only when a lexicon-restricted candidate is allowed, ignored or stop-marked;
//! a table walk therefore declines (returns `None`: the caller walks as before) when A,
//! the ignored set or the stop bits touch a lexicon terminal. Identifier positions under a
//! schema lexicon thus keep today's walk (the runtime lexicon step of §2 is not built).
//!
//! The guard sets, as far as the fixtures show, only prune: with their checks disabled the
//! parity tests still pass (below an ancestor that is neither live nor recoverable every
//! resolution fails), but they spare the frontier walks the trie walk would not run.
//!
//! Residue (CD entries) comes only from frontier subtrees, visited in preorder, so its
//! order is the walk's; CI ids are a set (bitmask words), so the filler's entry ids (hashed
//! from the words) are the walk's too.

use crate::fill::Packed;
use crate::fxhash::FxMap;
use crate::lexer::{DEAD, START};
use crate::walk::{
    or_ids_into_words, CiWords, Frame, SpanScratch, WalkError, WalkWords, Walked, Walker,
};

/// Marks "no last accept" in a (DFA state, last-accept state) pair and in [`TableKey::la0`].
pub const NO_LA: u32 = u32::MAX;

/// What a table is built for: the start trie node, the start frame's DFA state, and its
/// last-accept state when the whole pending lexeme is the last accept (`NO_LA` when there
/// is none). The pending lexeme's bytes are not part of it: one table serves every
/// remainder that ends in this state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableKey {
    pub node0: u32,
    pub dfa: u32,
    pub la0: u32,
}

impl TableKey {
    /// The key of a walk below `node0` from `frame0`; `None` for a frame whose last accept
    /// is strictly inside its pending lexeme (its munch would requeue remainder bytes the
    /// table does not know).
    pub fn of(node0: usize, frame0: &Frame) -> Option<TableKey> {
        let la0 = if frame0.la_len <= 0 {
            NO_LA
        } else if frame0.la_len as usize == frame0.rem.len() {
            frame0.la_state
        } else {
            return None;
        };
        Some(TableKey {
            node0: u32::try_from(node0).ok()?,
            dfa: frame0.dfa,
            la0,
        })
    }
}

/// Where the last accept of a symbolic frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum La {
    /// still the start frame's (no accepting state since, no restart)
    Frame0,
    /// none: a restart after an ignored munch cleared it
    Restart,
    /// `(state, length)` with the length counted in the segment's own bytes
    Local(u32, u32),
}

/// A scan frame with the start frame's pending lexeme left symbolic: `base` says whether
/// the lexeme still starts with it, `rel` holds the bytes after it (or since the restart).
#[derive(Debug, Clone)]
struct Sym {
    dfa: u32,
    base: bool,
    rel: Vec<u8>,
    la: La,
    /// guard set of the ancestors in earlier segments
    old: u32,
    /// guard set of this segment's nodes so far (this node included)
    seg: u32,
}

enum SymStep {
    Dead,
    Frontier,
    /// the next frame is in the `out` argument; whether the step restarted
    Frame(bool),
}

#[derive(Debug)]
struct Class {
    state: u32,
    guard: u32,
    n_ids: u32,
    row: Packed,
}

#[derive(Debug)]
struct FrontierNode {
    node: u32,
    guard: u32,
    /// the parent's symbolic frame (its `rel` bytes are `arena[rel.0..rel.1]`)
    dfa: u32,
    base: bool,
    rel: (u32, u32),
    la: La,
}

/// The precomputed classes and frontier of one [`TableKey`] for one [`Walker`]; see the
/// module docs. Immutable once built.
#[derive(Debug)]
pub struct ClassTable {
    key: TableKey,
    n_words: usize,
    pairs: Vec<(u32, u32)>,
    sets: Vec<Vec<u32>>,
    classes: Vec<Class>,
    frontier: Vec<FrontierNode>,
    arena: Vec<u8>,
    /// trie nodes the build stepped (what one unpruned walk would)
    pub built_nodes: u64,
}

fn bit(words: &[u64], t: usize) -> bool {
    words.get(t / 64).is_some_and(|w| (w >> (t % 64)) & 1 == 1)
}

/// Guard sets interned as sorted pair-id lists (set 0 is empty).
struct Sets {
    sets: Vec<Vec<u32>>,
    ids: FxMap<Vec<u32>, u32>,
    add: FxMap<(u32, u32), u32>,
    union: FxMap<(u32, u32), u32>,
}

impl Sets {
    fn new() -> Self {
        let mut ids = FxMap::default();
        ids.insert(Vec::new(), 0);
        Sets {
            sets: vec![Vec::new()],
            ids,
            add: FxMap::default(),
            union: FxMap::default(),
        }
    }

    fn intern(&mut self, v: Vec<u32>) -> u32 {
        if let Some(&i) = self.ids.get(&v) {
            return i;
        }
        let i = self.sets.len() as u32;
        self.sets.push(v.clone());
        self.ids.insert(v, i);
        i
    }

    fn with(&mut self, s: u32, pair: u32) -> u32 {
        // a chain of nodes in one state repeats its pair: no hashing then
        if self.sets[s as usize].binary_search(&pair).is_ok() {
            return s;
        }
        if let Some(&r) = self.add.get(&(s, pair)) {
            return r;
        }
        let mut v = self.sets[s as usize].clone();
        if let Err(p) = v.binary_search(&pair) {
            v.insert(p, pair);
        }
        let r = self.intern(v);
        self.add.insert((s, pair), r);
        r
    }

    fn union(&mut self, a: u32, b: u32) -> u32 {
        if a == 0 || a == b {
            return b;
        }
        if b == 0 {
            return a;
        }
        if let Some(&r) = self.union.get(&(a, b)) {
            return r;
        }
        let mut v = self.sets[a as usize].clone();
        v.extend_from_slice(&self.sets[b as usize]);
        v.sort_unstable();
        v.dedup();
        let r = self.intern(v);
        self.union.insert((a, b), r);
        r
    }
}

impl ClassTable {
    /// Whether a munch with last-accept state `st` emits an ignored terminal whatever A is:
    /// its first resolution candidate has no lexicon and is ignored (`ScanTables::resolve`
    /// returns before reading A, the stop bits or the lexeme).
    fn transparent(walker: &Walker, st: u32) -> bool {
        let sc = walker.scan_tables();
        match sc.dfa.candidates[st as usize].first() {
            Some(&t) => sc.lexicon[t as usize].is_none() && bit(&sc.ignored, t as usize),
            None => false,
        }
    }

    /// One byte of the walk's step on a symbolic frame into `out` (its buffers reused):
    /// dead whatever A is, a frontier (some munch that reads A), or the next frame (and
    /// whether it restarted). `q` is scratch.
    fn sym_step(
        walker: &Walker,
        f: &Sym,
        b: u8,
        la0: u32,
        out: &mut Sym,
        q: &mut Vec<u8>,
    ) -> SymStep {
        let dfa_t = &walker.scan_tables().dfa;
        let mut dfa = f.dfa;
        out.rel.clear();
        out.rel.extend_from_slice(&f.rel);
        let mut base = f.base;
        let mut la = f.la;
        let mut restarted = false;
        q.clear();
        q.push(b);
        let mut i = 0;
        while i < q.len() {
            let c = q[i];
            let s2 = dfa_t.trans[dfa as usize * 256 + c as usize];
            if s2 != DEAD {
                dfa = s2;
                out.rel.push(c);
                i += 1;
                if dfa_t.accepting[s2 as usize] {
                    la = La::Local(s2, out.rel.len() as u32);
                }
                continue;
            }
            let (la_state, cut) = match la {
                La::Frame0 if la0 != NO_LA => (la0, 0usize),
                La::Frame0 | La::Restart => return SymStep::Dead,
                La::Local(s, k) => (s, k as usize),
            };
            if !Self::transparent(walker, la_state) {
                return SymStep::Frontier;
            }
            let mut rest = out.rel[cut..].to_vec();
            rest.extend_from_slice(&q[i..]);
            *q = rest;
            i = 0;
            dfa = START;
            out.rel.clear();
            base = false;
            la = La::Restart;
            restarted = true;
        }
        out.dfa = dfa;
        out.base = base;
        out.la = la;
        out.old = f.old;
        out.seg = f.seg;
        SymStep::Frame(restarted)
    }

    /// Build the table of `key` over `walker`'s scan tables and trie, rows of `n_words`
    /// bitmask words. Costs about one unpruned walk of the subtree (A-independent).
    pub fn build(walker: &Walker, key: TableKey, n_words: usize) -> Result<Self, WalkError> {
        let sc = walker.scan_tables();
        let tr = walker.trie();
        let node0 = key.node0 as usize;
        let n_states = sc.n_states();
        if node0 >= tr.n_nodes() {
            return Err(WalkError(format!("trie node {node0} out of range")));
        }
        if key.dfa as usize >= n_states || (key.la0 != NO_LA && key.la0 as usize >= n_states) {
            return Err(WalkError(format!(
                "table key states ({}, {}) out of range ({n_states} states)",
                key.dfa, key.la0
            )));
        }
        let nw = sc.n_words();
        let always_live: Vec<bool> = (0..n_states)
            .map(|s| (0..nw).any(|w| sc.dfa.live[s * nw + w] & sc.ignored[w] != 0))
            .collect();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut pair_ids: FxMap<(u32, u32), u32> = FxMap::default();
        let mut sets = Sets::new();
        let mut class_at: FxMap<(u32, u32), usize> = FxMap::default();
        let mut class_ids: Vec<(u32, u32, Vec<i32>)> = Vec::new();
        let mut frontier: Vec<FrontierNode> = Vec::new();
        let mut arena: Vec<u8> = Vec::new();
        let d0 = tr.depth[node0] as usize;
        let mut frames: Vec<Sym> = vec![Sym {
            dfa: key.dfa,
            base: true,
            rel: Vec::new(),
            la: La::Frame0,
            old: 0,
            seg: 0,
        }];
        let end = node0 + tr.size[node0] as usize;
        let mut i = node0 + 1;
        let mut built_nodes = 0u64;
        let mut f = frames[0].clone();
        let mut q: Vec<u8> = Vec::with_capacity(16);
        // the previous node's pair and class lookups (chains repeat them)
        let mut last_pair = ((DEAD, NO_LA), 0u32);
        let mut last_class = ((DEAD, u32::MAX), 0usize);
        while i < end {
            built_nodes += 1;
            let k = tr.depth[i] as usize - d0;
            let parent = &frames[k - 1];
            match Self::sym_step(walker, parent, tr.edge[i], key.la0, &mut f, &mut q) {
                SymStep::Dead => i += tr.size[i] as usize,
                SymStep::Frontier => {
                    let guard = sets.union(parent.old, parent.seg);
                    let a = arena.len() as u32;
                    arena.extend_from_slice(&parent.rel);
                    frontier.push(FrontierNode {
                        node: i as u32,
                        guard,
                        dfa: parent.dfa,
                        base: parent.base,
                        rel: (a, arena.len() as u32),
                        la: parent.la,
                    });
                    i += tr.size[i] as usize;
                }
                SymStep::Frame(restarted) => {
                    if restarted {
                        f.old = sets.union(parent.old, parent.seg);
                        f.seg = 0;
                    }
                    let la_state = match f.la {
                        La::Frame0 => key.la0,
                        La::Restart => NO_LA,
                        La::Local(s, _) => s,
                    };
                    let always = always_live[f.dfa as usize]
                        || (la_state != NO_LA && Self::transparent(walker, la_state));
                    if !always {
                        let pk = (f.dfa, la_state);
                        let p = if last_pair.0 == pk {
                            last_pair.1
                        } else {
                            let next = pairs.len() as u32;
                            let p = *pair_ids.entry(pk).or_insert(next);
                            if p == next {
                                pairs.push(pk);
                            }
                            last_pair = (pk, p);
                            p
                        };
                        f.seg = sets.with(f.seg, p);
                    }
                    let ids = tr.ids_at(i);
                    if !ids.is_empty() {
                        let ck = (f.dfa, f.old);
                        let c = if last_class.0 == ck {
                            last_class.1
                        } else {
                            let next = class_ids.len();
                            let c = *class_at.entry(ck).or_insert(next);
                            if c == next {
                                class_ids.push((f.dfa, f.old, Vec::new()));
                            }
                            last_class = (ck, c);
                            c
                        };
                        class_ids[c].2.extend_from_slice(ids);
                    }
                    if frames.len() == k {
                        frames.push(f.clone());
                    }
                    std::mem::swap(&mut frames[k], &mut f);
                    i += 1;
                }
            }
        }
        let classes = class_ids
            .into_iter()
            .map(|(state, guard, ids)| {
                Ok(Class {
                    state,
                    guard,
                    n_ids: ids.len() as u32,
                    row: packed_row(&ids, n_words)?,
                })
            })
            .collect::<Result<Vec<_>, WalkError>>()?;
        Ok(ClassTable {
            key,
            n_words,
            pairs,
            sets: sets.sets,
            classes,
            frontier,
            arena,
            built_nodes,
        })
    }

    /// The key this table was built for.
    pub fn key(&self) -> TableKey {
        self.key
    }

    /// Number of classes (precomputed rows).
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// Number of frontier nodes (where today's walk still runs when reached).
    pub fn n_frontier(&self) -> usize {
        self.frontier.len()
    }

    /// Heap bytes held (rows, frontier records, guard sets, roughly).
    pub fn nbytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.row.nbytes() + 24)
            .sum::<usize>()
            + self.frontier.len() * std::mem::size_of::<FrontierNode>()
            + self.arena.len()
            + self.pairs.len() * 8
            + self.sets.iter().map(|s| 24 + 4 * s.len()).sum::<usize>()
    }

    /// [`Walker::walk_words`] of `(key.node0, frame0)` under `allowed` from the table:
    /// the same ids (always as dense words), residue and id count; `visited` counts the
    /// nodes stepped below reached frontier nodes plus one per class. `Ok(None)` when the
    /// table cannot answer exactly (A, the ignored set or a stop bit touches a
    /// lexicon-restricted terminal): the caller walks. `walker` must be the one the table
    /// was built from, and `frame0` must have the table's key.
    pub fn walk_words(
        &self,
        walker: &Walker,
        frame0: &Frame,
        allowed: &[u64],
    ) -> Result<Option<WalkWords>, WalkError> {
        if TableKey::of(self.key.node0 as usize, frame0) != Some(self.key) {
            return Err(WalkError(format!(
                "frame ({}, {} bytes, {}, {}) does not have the table's key {:?}",
                frame0.dfa,
                frame0.rem.len(),
                frame0.la_len,
                frame0.la_state,
                self.key
            )));
        }
        let sc = walker.scan_tables();
        let tr = walker.trie();
        let nw = sc.n_words();
        let aw = |w: usize| allowed.get(w).copied().unwrap_or(0);
        let stops = allowed.len() > nw;
        for w in 0..nw {
            let stop = if stops { aw(nw + w) } else { 0 };
            if (aw(w) | sc.ignored[w] | stop) & sc.lexicon_mask[w] != 0 {
                return Ok(None);
            }
        }
        let live_ok = |s: u32| {
            let base = s as usize * nw;
            (0..nw).any(|w| sc.dfa.live[base + w] & (aw(w) | sc.ignored[w]) != 0)
        };
        // per pair / set: 0 unknown, 1 no, 2 yes
        let mut pv = vec![0u8; self.pairs.len()];
        let mut sv = vec![0u8; self.sets.len()];
        let mut set_ok = |g: u32| -> bool {
            let g = g as usize;
            if sv[g] == 0 {
                let ok = self.sets[g].iter().all(|&p| {
                    let p = p as usize;
                    if pv[p] == 0 {
                        let (s, la) = self.pairs[p];
                        let ok =
                            live_ok(s) || (la != NO_LA && sc.resolve(la, &[], allowed).is_some());
                        pv[p] = 1 + u8::from(ok);
                    }
                    pv[p] == 2
                });
                sv[g] = 1 + u8::from(ok);
            }
            sv[g] == 2
        };
        let mut words = vec![0u32; self.n_words];
        let mut n_ids = 0usize;
        let mut visited = 0u64;
        for c in &self.classes {
            visited += 1;
            if live_ok(c.state) && set_ok(c.guard) {
                c.row.or_into(&mut words);
                n_ids += c.n_ids as usize;
            }
        }
        let mut w = Walked::default();
        let mut sp = SpanScratch::new(sc.n_states());
        let mut fr = Frame::start();
        for f in &self.frontier {
            if !set_ok(f.guard) {
                continue;
            }
            fr.dfa = f.dfa;
            fr.rem.clear();
            if f.base {
                fr.rem.extend_from_slice(&frame0.rem);
            }
            fr.rem
                .extend_from_slice(&self.arena[f.rel.0 as usize..f.rel.1 as usize]);
            (fr.la_len, fr.la_state) = match f.la {
                La::Frame0 => (frame0.la_len, frame0.la_state),
                La::Restart => (-1, DEAD),
                La::Local(s, k) => {
                    let off = if f.base { frame0.rem.len() } else { 0 };
                    ((off + k as usize) as i64, s)
                }
            };
            let n = f.node as usize;
            walker.walk_span(n, n + tr.size(n), &fr, allowed, &mut w, &mut sp);
        }
        for &(a, b) in &w.ranges {
            or_ids_into_words(&tr.alias_ids[a as usize..b as usize], &mut words)?;
            n_ids += (b - a) as usize;
        }
        Ok(Some(WalkWords {
            words: CiWords::Dense(words),
            n_ids,
            residue: w.residue,
            visited: visited + w.visited,
        }))
    }
}

/// Subtrees smaller than this are walked as before: a table would cost about one walk to
/// build and save little (most CD sub-walks are below deep boundary nodes).
pub const MIN_TABLE_SUBTREE: usize = 4096;

/// A key's table is built at its this-many-th cold walk (the first ones walk): a one-off
/// frame does not pay a build.
pub const BUILD_AT: u32 = 2;

/// Table bytes per cache past which no further table is built (keys without one walk as
/// before; tables are A-independent, so the ones built stay valid).
pub const MAX_TABLE_BYTES: usize = 256 << 20;

#[derive(Debug)]
enum Slot {
    Seen(u32),
    Built(ClassTable),
}

/// The class tables of one [`Walker`] (one grammar over one vocabulary), built lazily per
/// [`TableKey`] and kept across fills; what the mask filler asks before walking.
#[derive(Debug)]
pub struct TableCache {
    n_words: usize,
    slots: FxMap<TableKey, Slot>,
    bytes: usize,
    max_bytes: usize,
    /// tables built so far
    pub built: u64,
    /// walks answered from a table
    pub answered: u64,
}

impl TableCache {
    /// An empty cache whose tables hold `n_words`-word rows.
    pub fn new(n_words: usize) -> Self {
        TableCache {
            n_words,
            slots: FxMap::default(),
            bytes: 0,
            max_bytes: MAX_TABLE_BYTES,
            built: 0,
            answered: 0,
        }
    }

    /// Bytes the built tables hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// [`Walker::walk_words`] of `(node0, frame0)` from a class table when one applies
    /// (building it at the key's [`BUILD_AT`]-th request); `Ok(None)`: walk instead.
    pub fn walk_words(
        &mut self,
        walker: &Walker,
        node0: usize,
        frame0: &Frame,
        allowed: &[u64],
    ) -> Result<Option<WalkWords>, WalkError> {
        if node0 >= walker.trie().n_nodes() || walker.trie().size(node0) < MIN_TABLE_SUBTREE {
            return Ok(None);
        }
        let Some(key) = TableKey::of(node0, frame0) else {
            return Ok(None);
        };
        let n_states = walker.scan_tables().n_states() as u32;
        if key.dfa >= n_states || (key.la0 != NO_LA && key.la0 >= n_states) {
            return Ok(None); // the walk reports the bad frame
        }
        let slot = self.slots.entry(key).or_insert(Slot::Seen(0));
        if let Slot::Seen(n) = slot {
            *n += 1;
            if *n < BUILD_AT || self.bytes > self.max_bytes {
                return Ok(None);
            }
            let t = ClassTable::build(walker, key, self.n_words)?;
            self.bytes += t.nbytes();
            self.built += 1;
            *slot = Slot::Built(t);
        }
        let Slot::Built(t) = slot else {
            unreachable!("built above")
        };
        let out = t.walk_words(walker, frame0, allowed)?;
        self.answered += u64::from(out.is_some());
        Ok(out)
    }

    /// [`Walker::walk_words`] of `(node0, frame0)`: from a class table when one applies,
    /// else by the trie walk (same ids, id count and residue either way).
    pub fn walk(
        &mut self,
        walker: &Walker,
        node0: usize,
        frame0: &Frame,
        allowed: &[u64],
        n_words: usize,
    ) -> Result<WalkWords, WalkError> {
        if n_words == self.n_words {
            if let Some(out) = self.walk_words(walker, node0, frame0, allowed)? {
                return Ok(out);
            }
        }
        walker.walk_words(node0, frame0, allowed, n_words)
    }

    /// Drop every table (and the request counts).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.bytes = 0;
    }
}

/// A class's alias ids as bitmask words, packed as the filler packs a root entry's words
/// (dense when more than a quarter are non-zero).
fn packed_row(ids: &[i32], n_words: usize) -> Result<Packed, WalkError> {
    let mut dense = vec![0u32; n_words];
    or_ids_into_words(ids, &mut dense)?;
    Ok(Packed::from_words(dense))
}
