//! The whole mask fill of one configuration (paper §4.2–§4.3) for grammars without scope
//! rules: root entry, CD residue resolution with its sub-walks, the row.
//!
//! A transcription of `Guide._fill` / `Guide.collect` / `Guide._resolve_residue`
//! (`grid_sql/mask/guide.py`), which stay the reference: for every configuration the row,
//! the allowed count and the entry ids in order (root first, then the CD sub-walk entries
//! in residue order, depth first) are identical, and so are the entries' keys and ids
//! (`MaskKey.encode`, `MaskEntry.make`: BLAKE2b-128, person `grid-sql-entry`), so audit
//! trails replay unchanged. Why: a cold fill resolves a few hundred CD classes and looks up
//! a few hundred sub-walk entries; in Python that orchestration was ~85 % of a miss
//! (`bench/cold_profile.py --timers`). Here it is one call with no per-entry Python object.
//!
//! Entries live in this filler's own store, keyed by their encoded key. A stored entry is
//! a pure function of its key, so the store may drop everything at any time (it does when
//! it outgrows its byte bound); the memos below (class advances and sub-walk results per
//! configuration) are dropped with it.

use std::fmt;
use std::sync::Arc;

use blake2::digest::CustomizedInit;
use blake2::{Blake2b128, Digest};

use crate::runtime::{NodeId, ParserRuntime, RuntimeError, ROOT};
use crate::walk::{or_ids_into_words, CdEntry, CiWords, Frame, WalkError, Walker};
use crate::{classes::TableCache, fxhash::FxMap};

const ENTRY_PERSON: &[u8] = b"grid-sql-entry";

/// Class records and memoized sub-walks kept before the resolution memos are dropped
/// (`RESOLVE_MEMO_LIMIT` / `SUB_MEMO_LIMIT` of the Python fill); the store is not.
pub const MEMO_LIMIT: usize = 1 << 18;

/// Why a fill did not produce a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FillError {
    /// `walk = false` and some entry is not in the store (`try_fill_bitmask`'s None).
    NeedWalk,
    /// No token is allowed at a configuration the caller claims viable, or bad input.
    Invalid(String),
}

impl fmt::Display for FillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FillError::NeedWalk => f.write_str("an entry of this mask is not stored"),
            FillError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for FillError {}

impl From<RuntimeError> for FillError {
    fn from(e: RuntimeError) -> Self {
        FillError::Invalid(e.0)
    }
}

impl From<WalkError> for FillError {
    fn from(e: WalkError) -> Self {
        FillError::Invalid(e.0)
    }
}

/// A stored walk result (`MaskEntry`): CI ids, CD residue, content id, and the residue's
/// verdict-equivalence classes (distinct `(terminal, requeue)` in first-seen order).
#[derive(Debug)]
pub struct Entry {
    /// number of CI ids (the ids themselves are the packed words)
    pub n_ids: usize,
    pub residue: Vec<CdEntry>,
    pub id: [u8; 16],
    /// `id` as lower-case hex (what audit records hold)
    pub hex: String,
    /// the residue's classes as ids of the filler's class table, first-seen order
    classes: Vec<u32>,
    class_of: Vec<u32>,
    packed: Packed,
}

/// The CI ids as bitmask words (`PackedWords`): all `n_words` when more than a quarter
/// are non-zero, else the non-zero ones with their indices. A fill ORs words, not ids.
#[derive(Debug)]
pub(crate) enum Packed {
    Dense(Vec<u32>),
    Sparse(Vec<(u32, u32)>),
}

impl Packed {
    fn new(ids: &[i32], n_words: usize) -> Result<Self, FillError> {
        let mut dense = vec![0u32; n_words];
        or_ids_into_words(ids, &mut dense)?;
        Ok(Self::from_words(dense))
    }

    /// The packing of `dense` (`n_words` words): kept as is, or its non-zero words.
    pub(crate) fn from_words(dense: Vec<u32>) -> Self {
        let n_words = dense.len();
        let nz = dense.iter().filter(|&&w| w != 0).count();
        if nz * 4 > n_words {
            return Packed::Dense(dense);
        }
        Packed::Sparse(
            dense
                .iter()
                .enumerate()
                .filter(|(_, &w)| w != 0)
                .map(|(i, &w)| (i as u32, w))
                .collect(),
        )
    }

    pub(crate) fn or_into(&self, words: &mut [u32]) {
        match self {
            Packed::Dense(d) => {
                for (o, w) in words.iter_mut().zip(d) {
                    *o |= w;
                }
            }
            Packed::Sparse(s) => {
                for &(i, w) in s {
                    words[i as usize] |= w;
                }
            }
        }
    }

    pub(crate) fn nbytes(&self) -> usize {
        match self {
            Packed::Dense(d) => 4 * d.len(),
            Packed::Sparse(s) => 8 * s.len(),
        }
    }
}

/// The canonical bytes of an entry's CI ids in its entry id (`grid_sql/mask/cache.py`
/// `ids_payload`): the little-endian i32 list, or, when that would be longer, the bitmap up
/// to the largest id's word as little-endian u32 words (~50k ids on a 151k vocabulary are
/// 200 KB as a list, ~250 µs of BLAKE2b against a ~0.85 ms cold miss).
pub fn ids_payload(ids: &[i32]) -> Vec<u8> {
    let n = ids.len();
    let nw = ids
        .iter()
        .map(|&t| (t as u32 >> 5) as usize + 1)
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    if n > 0 && nw < n {
        let mut words = vec![0u32; nw];
        for &t in ids {
            words[(t as u32 >> 5) as usize] |= 1 << (t as u32 & 31);
        }
        out.reserve(21 + 4 * nw);
        out.extend_from_slice(b"ids-bitmap/v1");
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&(nw as u32).to_le_bytes());
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    } else {
        out.reserve(16 + 4 * n);
        out.extend_from_slice(b"ids-i32le/v1");
        out.extend_from_slice(&(n as u32).to_le_bytes());
        for t in ids {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    out
}

/// [`ids_payload`] of the distinct ids set in `words` (`n_ids` of them), fed to `h`
/// without building the id list: the same bytes, so the same entry id.
fn hash_words_payload(h: &mut Blake2b128, words: &CiWords, n_ids: usize) {
    let nw = words.nonzero().last().map_or(0, |(i, _)| i + 1);
    if n_ids > 0 && nw < n_ids {
        h.update(b"ids-bitmap/v1");
        h.update((n_ids as u32).to_le_bytes());
        h.update((nw as u32).to_le_bytes());
        match words {
            CiWords::Dense(d) => {
                let mut buf = [0u8; 4096];
                for chunk in d[..nw].chunks(buf.len() / 4) {
                    for (o, w) in buf.chunks_exact_mut(4).zip(chunk) {
                        o.copy_from_slice(&w.to_le_bytes());
                    }
                    h.update(&buf[..4 * chunk.len()]);
                }
            }
            CiWords::Sparse(s) => {
                let mut next = 0usize;
                for &(i, w) in s {
                    for _ in next..i as usize {
                        h.update([0u8; 4]);
                    }
                    h.update(w.to_le_bytes());
                    next = i as usize + 1;
                }
            }
        }
    } else {
        h.update(b"ids-i32le/v1");
        h.update((n_ids as u32).to_le_bytes());
        for (i, word) in words.nonzero() {
            let mut m = word;
            while m != 0 {
                let t = (i * 32 + m.trailing_zeros() as usize) as i32;
                h.update(t.to_le_bytes());
                m &= m - 1;
            }
        }
    }
}

impl Entry {
    fn new(
        key: &[u8],
        ci_ids: Vec<i32>,
        residue: Vec<CdEntry>,
        n_words: usize,
        class_ids: &mut FxMap<(u32, Vec<u8>), u32>,
    ) -> Result<Self, FillError> {
        let packed = Packed::new(&ci_ids, n_words)?; // validates the ids (range) first
        let mut h = Blake2b128::new_customized(ENTRY_PERSON);
        h.update(key);
        h.update(ids_payload(&ci_ids));
        Ok(Self::finish(h, ci_ids.len(), residue, class_ids, packed))
    }

    /// [`Entry::new`] from the CI ids as `words` holding `n_ids` distinct ids (what
    /// [`Walker::walk_words`] returns): the same entry (id, residue, classes, packing)
    /// without the id list.
    fn from_words(
        key: &[u8],
        words: CiWords,
        n_ids: usize,
        residue: Vec<CdEntry>,
        class_ids: &mut FxMap<(u32, Vec<u8>), u32>,
    ) -> Self {
        let mut h = Blake2b128::new_customized(ENTRY_PERSON);
        h.update(key);
        hash_words_payload(&mut h, &words, n_ids);
        let packed = match words {
            CiWords::Dense(d) => Packed::from_words(d),
            // at most a quarter of the words non-zero: Packed::from_words keeps it sparse
            CiWords::Sparse(s) => Packed::Sparse(s),
        };
        Self::finish(h, n_ids, residue, class_ids, packed)
    }

    fn finish(
        mut h: Blake2b128,
        n_ids: usize,
        residue: Vec<CdEntry>,
        class_ids: &mut FxMap<(u32, Vec<u8>), u32>,
        packed: Packed,
    ) -> Self {
        h.update((residue.len() as u32).to_le_bytes());
        for c in &residue {
            h.update((c.node as i32).to_le_bytes());
            h.update((c.terminal as i32).to_le_bytes());
            h.update((c.requeue.len() as u32).to_le_bytes());
            h.update(&c.requeue);
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&h.finalize());
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let hex: String = id
            .iter()
            .flat_map(|b| {
                [
                    HEX[(b >> 4) as usize] as char,
                    HEX[(b & 15) as usize] as char,
                ]
            })
            .collect();
        let mut classes: Vec<u32> = Vec::new();
        let class_of = residue
            .iter()
            .map(|c| {
                let next = class_ids.len() as u32;
                let cid = *class_ids
                    .entry((c.terminal, c.requeue.clone()))
                    .or_insert(next);
                match classes.iter().position(|&x| x == cid) {
                    Some(i) => i as u32,
                    None => {
                        classes.push(cid);
                        classes.len() as u32 - 1
                    }
                }
            })
            .collect();
        Entry {
            n_ids,
            residue,
            id,
            hex,
            classes,
            class_of,
            packed,
        }
    }

    /// Heap bytes held (packed words, residue and its classes, roughly).
    fn nbytes(&self) -> usize {
        self.packed.nbytes()
            + self
                .residue
                .iter()
                .map(|r| 24 + 2 * r.requeue.len())
                .sum::<usize>()
            + 128
    }
}

/// What one sub-walk below a residue node contributes: its entries (depth first) and the
/// token ids spelled exactly at the node when the pending lexeme there is live.
#[derive(Debug, Default)]
struct Sub {
    entries: Vec<Arc<Entry>>,
    extra: Vec<i32>,
}

/// A class record: the configuration below a residue entry, whether its pending lexeme
/// is live, and the index of its sub-walk memo (shared by every class record reaching the
/// same configuration).
#[derive(Debug, Clone)]
struct ClassRec {
    node: NodeId,
    scan: Frame,
    live: bool,
    subs: usize,
}

/// Fills masks for one (grammar without scope rules, vocabulary).
pub struct Filler {
    rt: ParserRuntime,
    walker: Walker,
    lexicon_mask: Vec<u64>,
    /// `grammar.lexicon.fingerprint` (keys at identifier positions carry it)
    schema_fp: Option<Vec<u8>>,
    /// the walker's allowed-set words (`ParserRuntime.term_words`)
    term_words: usize,
    eos_id: usize,
    n_words: usize,
    /// entries by (allowed-set id, remainder id, trie node): the key's content, interned
    store: FxMap<(u32, u32, u32), Arc<Entry>>,
    store_bytes: usize,
    max_bytes: usize,
    max_nodes: usize,
    allowed_ids: FxMap<Vec<u64>, u32>,
    allowed_tab: Vec<Vec<u64>>,
    node_aid: FxMap<NodeId, u32>,
    rem_ids: FxMap<Vec<u8>, u32>,
    class_ids: FxMap<(u32, Vec<u8>), u32>,
    class_tab: Vec<(u32, Vec<u8>)>,
    /// (node, class id) -> index into `recs` (None: the class is rejected on that node)
    advanced: FxMap<(NodeId, u32), Option<u32>>,
    recs: Vec<ClassRec>,
    shifted: FxMap<(NodeId, u32), NodeId>,
    subs_at: FxMap<(NodeId, Frame, bool), usize>,
    subs: Vec<FxMap<u32, Arc<Sub>>>,
    n_subs: usize,
    memo_limit: usize,
    /// class tables of cold walks from large subtrees (A-independent: kept across resets)
    pub tables: TableCache,
    /// trie walks run (cache misses) since the filler was built
    pub walks: u64,
    /// times the store and memos were dropped for size
    pub resets: u64,
}

impl Filler {
    /// `rt` and `walker` must be over the same grammar (tables, lexer, lexicons) and the
    /// walker's trie over a vocabulary of `vocab_size` tokens with EOS `eos_id`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: ParserRuntime,
        walker: Walker,
        lexicon_mask: Vec<u64>,
        schema_fp: Option<Vec<u8>>,
        term_words: usize,
        vocab_size: usize,
        eos_id: usize,
        max_bytes: usize,
    ) -> Result<Self, FillError> {
        if eos_id >= vocab_size {
            return Err(FillError::Invalid(format!(
                "EOS id {eos_id} outside a vocabulary of {vocab_size}"
            )));
        }
        Ok(Filler {
            rt: rt.without_hashing(),
            walker,
            lexicon_mask,
            schema_fp,
            term_words,
            eos_id,
            n_words: vocab_size.div_ceil(32),
            store: FxMap::default(),
            store_bytes: 0,
            max_bytes,
            max_nodes: 1 << 20,
            allowed_ids: FxMap::default(),
            allowed_tab: Vec::new(),
            node_aid: FxMap::default(),
            rem_ids: FxMap::default(),
            class_ids: FxMap::default(),
            class_tab: Vec::new(),
            advanced: FxMap::default(),
            recs: Vec::new(),
            shifted: FxMap::default(),
            subs_at: FxMap::default(),
            subs: Vec::new(),
            n_subs: 0,
            memo_limit: MEMO_LIMIT,
            tables: TableCache::new(vocab_size.div_ceil(32)),
            walks: 0,
            resets: 0,
        })
    }

    /// Class records / memoized sub-walks kept before those memos are dropped (between
    /// fills; default [`MEMO_LIMIT`]).
    pub fn set_memo_limit(&mut self, n: usize) {
        self.memo_limit = n;
    }

    /// Bitmask words of a row (`ceil(vocab_size / 32)`).
    pub fn n_words(&self) -> usize {
        self.n_words
    }

    /// Entries stored.
    pub fn n_entries(&self) -> usize {
        self.store.len()
    }

    /// Bytes the stored entries account for.
    pub fn store_bytes(&self) -> usize {
        self.store_bytes
    }

    /// Drop the store and every memo (entries are pure functions of their keys). Node ids
    /// stay valid.
    pub fn reset(&mut self) {
        self.store.clear();
        self.store_bytes = 0;
        self.allowed_ids.clear();
        self.allowed_tab.clear();
        self.node_aid.clear();
        self.rem_ids.clear();
        self.class_ids.clear();
        self.class_tab.clear();
        self.clear_resolution_memos();
        self.resets += 1;
    }

    /// Drop the class records and memoized sub-walks (between fills only: a resolution in
    /// progress holds indices into them).
    fn clear_resolution_memos(&mut self) {
        self.advanced.clear();
        self.recs.clear();
        self.shifted.clear();
        self.subs_at.clear();
        self.subs.clear();
        self.n_subs = 0;
    }

    /// The node for a stack given bottom-up as `(state, symbol)` pairs above the root.
    /// Nodes are per fill, so a full arena is dropped (with every memo) first.
    pub fn node_of(&mut self, pairs: &[(u32, u32)]) -> NodeId {
        if self.rt.n_nodes() > self.max_nodes {
            self.rt = self.rt.fresh();
            self.reset();
        }
        let mut n = ROOT;
        for &(state, symbol) in pairs {
            n = self.rt.push(n, state, symbol);
        }
        n
    }

    /// The interned id of `node`'s allowed set.
    fn allowed_id(&mut self, node: NodeId) -> Result<u32, FillError> {
        if let Some(&a) = self.node_aid.get(&node) {
            return Ok(a);
        }
        let allowed = self.rt.allowed(node)?;
        let a = match self.allowed_ids.get(allowed) {
            Some(&a) => a,
            None => {
                let a = self.allowed_tab.len() as u32;
                self.allowed_tab.push(allowed.to_vec());
                self.allowed_ids.insert(allowed.to_vec(), a);
                a
            }
        };
        self.node_aid.insert(node, a);
        Ok(a)
    }

    fn rem_id(&mut self, rem: &[u8]) -> u32 {
        if let Some(&r) = self.rem_ids.get(rem) {
            return r;
        }
        let r = self.rem_ids.len() as u32;
        self.rem_ids.insert(rem.to_vec(), r);
        r
    }

    /// `MaskKey.encode()` of (allowed set, trie node, remainder).
    fn encode_key(&self, allowed: &[u64], rem: &[u8], trie_node: u32) -> Vec<u8> {
        let ident = allowed
            .iter()
            .zip(&self.lexicon_mask)
            .any(|(a, l)| a & l != 0);
        let mut a: Vec<u8> = allowed.iter().flat_map(|w| w.to_le_bytes()).collect();
        while a.len() > 1 && a.last() == Some(&0) {
            a.pop();
        }
        let mut k = Vec::with_capacity(32 + rem.len() + a.len());
        k.extend_from_slice(if ident { b"ident\0" } else { b"generic\0" });
        k.extend_from_slice(&(trie_node as i32).to_le_bytes());
        k.extend_from_slice(&(rem.len() as u32).to_le_bytes());
        k.extend_from_slice(rem);
        k.extend_from_slice(&(a.len() as u32).to_le_bytes());
        k.extend_from_slice(&a);
        if ident {
            if let Some(fp) = &self.schema_fp {
                k.extend_from_slice(fp);
            }
        }
        k
    }

    /// The stored entry of `(node, scan)` below `trie_node` (walked and stored on a miss;
    /// `walk = false`: [`FillError::NeedWalk`] instead).
    fn entry_for(
        &mut self,
        node: NodeId,
        scan: &Frame,
        trie_node: u32,
        walk: bool,
    ) -> Result<Arc<Entry>, FillError> {
        let aid = self.allowed_id(node)?;
        let rid = self.rem_id(&scan.rem);
        if let Some(e) = self.store.get(&(aid, rid, trie_node)) {
            return Ok(Arc::clone(e));
        }
        if !walk {
            return Err(FillError::NeedWalk);
        }
        let allowed = &self.allowed_tab[aid as usize];
        let key = self.encode_key(allowed, &scan.rem, trie_node);
        let aw = &allowed[..self.term_words.min(allowed.len())];
        let out = self
            .tables
            .walk(&self.walker, trie_node as usize, scan, aw, self.n_words)?;
        self.walks += 1;
        let e = if out.words.count() == out.n_ids {
            Entry::from_words(&key, out.words, out.n_ids, out.residue, &mut self.class_ids)
        } else {
            // an id spelled at two trie nodes (no TokenTrie does this): the id list's
            // payload repeats it, so take the list path to keep the entry id
            let out = self.walker.walk(trie_node as usize, scan, aw)?;
            Entry::new(
                &key,
                out.ci_ids,
                out.residue,
                self.n_words,
                &mut self.class_ids,
            )?
        };
        while self.class_tab.len() < self.class_ids.len() {
            self.class_tab.push((0, Vec::new()));
        }
        for (r, &ci) in e.residue.iter().zip(&e.class_of) {
            let cid = e.classes[ci as usize] as usize;
            if self.class_tab[cid].1 != r.requeue || self.class_tab[cid].0 != r.terminal {
                self.class_tab[cid] = (r.terminal, r.requeue.clone());
            }
        }
        let e = Arc::new(e);
        self.store_bytes += e.nbytes() + key.len();
        self.store.insert((aid, rid, trie_node), Arc::clone(&e));
        Ok(e)
    }

    /// Shift `term` on `node` and re-scan `requeue` (`Guide._advance_class`).
    fn advance_class(&mut self, node: NodeId, cid: u32) -> Result<Option<u32>, FillError> {
        let term = self.class_tab[cid as usize].0;
        let s1 = match self.shifted.get(&(node, term)) {
            Some(&s) => s,
            None => {
                let s = self.rt.shift(node, term)?;
                self.shifted.insert((node, term), s);
                s
            }
        };
        let requeue = &self.class_tab[cid as usize].1;
        let Some((n2, f2)) = self.rt.advance_raw(s1, &Frame::start(), requeue)? else {
            return Ok(None);
        };
        let live = self.rt.remainder_live(n2, &f2)?;
        let ck = (n2, f2, live);
        let subs = match self.subs_at.get(&ck) {
            Some(&i) => i,
            None => {
                self.subs.push(FxMap::default());
                let i = self.subs.len() - 1;
                self.subs_at.insert(ck.clone(), i);
                i
            }
        };
        self.recs.push(ClassRec {
            node: ck.0,
            scan: ck.1,
            live,
            subs,
        });
        Ok(Some(self.recs.len() as u32 - 1))
    }

    /// Append the sub-walk entries and live alias ids of `entry`'s CD residue resolved
    /// against `node` (`Guide._resolve_residue`), in residue order, depth first.
    fn resolve(
        &mut self,
        node: NodeId,
        entry: &Entry,
        entries: &mut Vec<Arc<Entry>>,
        extra: &mut Vec<i32>,
        walk: bool,
    ) -> Result<(), FillError> {
        let mut resolved: Vec<Option<u32>> = Vec::with_capacity(entry.classes.len());
        for &cid in &entry.classes {
            let rec = match self.advanced.get(&(node, cid)) {
                Some(&r) => r,
                None => {
                    let r = self.advance_class(node, cid)?;
                    self.advanced.insert((node, cid), r);
                    r
                }
            };
            resolved.push(rec);
        }
        for (r, &ci) in entry.residue.iter().zip(&entry.class_of) {
            let Some(ri) = resolved[ci as usize] else {
                continue;
            };
            let sub = r.node;
            let si = self.recs[ri as usize].subs;
            let got = match self.subs[si].get(&sub) {
                Some(g) => Arc::clone(g),
                None => {
                    let rec = self.recs[ri as usize].clone();
                    let mut s = Sub::default();
                    if rec.live {
                        s.extra
                            .extend_from_slice(self.walker.trie().ids_at(sub as usize));
                    }
                    let e2 = self.entry_for(rec.node, &rec.scan, sub, walk)?;
                    s.entries.push(Arc::clone(&e2));
                    self.resolve(rec.node, &e2, &mut s.entries, &mut s.extra, walk)?;
                    let g = Arc::new(s);
                    self.subs[si].insert(sub, Arc::clone(&g));
                    self.n_subs += 1;
                    g
                }
            };
            entries.extend(got.entries.iter().cloned());
            extra.extend_from_slice(&got.extra);
        }
        Ok(())
    }

    /// The exact mask of `(node, scan)` into `out` (`n_words` u32 words, XGrammar layout;
    /// words past `n_words` are zeroed): the allowed count and the entries it is made of,
    /// root first (`Guide._fill` without its structural memo).
    pub fn fill(
        &mut self,
        node: NodeId,
        scan: &Frame,
        out: &mut [u32],
        walk: bool,
    ) -> Result<(u32, Vec<Arc<Entry>>), FillError> {
        if out.len() < self.n_words {
            return Err(FillError::Invalid(format!(
                "bitmask buffer must hold >= {} words",
                self.n_words
            )));
        }
        if self.store_bytes > self.max_bytes {
            self.reset();
        } else if self.advanced.len() > self.memo_limit || self.n_subs > self.memo_limit {
            self.clear_resolution_memos();
        }
        let root = self.entry_for(node, scan, 0, walk)?;
        let mut entries = vec![Arc::clone(&root)];
        let mut extra = Vec::new();
        self.resolve(node, &root, &mut entries, &mut extra, walk)?;
        let eos = self.rt.eos_allowed(node, scan)?;
        out.fill(0);
        let words = &mut out[..self.n_words];
        for e in &entries {
            e.packed.or_into(words);
        }
        or_ids_into_words(&extra, words)?;
        if eos {
            words[self.eos_id >> 5] |= 1 << (self.eos_id & 31);
        }
        let n: u32 = words.iter().map(|w| w.count_ones()).sum();
        if n == 0 {
            return Err(FillError::Invalid(
                "empty mask at a viable configuration".into(),
            ));
        }
        Ok((n, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_id(ids: &[i32], n_words: usize) -> ([u8; 16], usize) {
        let mut classes = FxMap::default();
        let res = vec![CdEntry {
            node: 7,
            terminal: 3,
            requeue: b"x".to_vec(),
        }];
        let a = Entry::new(b"key", ids.to_vec(), res.clone(), n_words, &mut classes).unwrap();
        let mut words = vec![0u32; n_words];
        or_ids_into_words(ids, &mut words).unwrap();
        let sparse: Vec<(u32, u32)> = words
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 0)
            .map(|(i, &w)| (i as u32, w))
            .collect();
        if sparse.len() * 4 <= n_words {
            // the sparse form (what walk_words returns for few ids) hashes the same
            let mut c2 = classes.clone();
            let s = Entry::from_words(
                b"key",
                CiWords::Sparse(sparse),
                ids.len(),
                res.clone(),
                &mut c2,
            );
            assert_eq!(a.id, s.id);
            let mut ws = vec![0u32; n_words];
            s.packed.or_into(&mut ws);
            let mut wa = vec![0u32; n_words];
            a.packed.or_into(&mut wa);
            assert_eq!(wa, ws);
        }
        let b = Entry::from_words(b"key", CiWords::Dense(words), ids.len(), res, &mut classes);
        assert_eq!(a.id, b.id);
        assert_eq!(a.hex, b.hex);
        assert_eq!(a.n_ids, b.n_ids);
        assert_eq!(
            (a.classes.clone(), a.class_of.clone()),
            (b.classes, b.class_of)
        );
        let (mut wa, mut wb) = (vec![0u32; n_words], vec![0u32; n_words]);
        a.packed.or_into(&mut wa);
        b.packed.or_into(&mut wb);
        assert_eq!(wa, wb);
        (a.id, a.packed.nbytes())
    }

    #[test]
    fn entry_from_words_equals_entry_from_ids() {
        // both payload forms (list: few ids; bitmap: more ids than words up to the last),
        // dense and sparse packing, the empty set, ids at word edges
        let n_words = 4749; // a 151,936-token vocabulary
        let dense: Vec<i32> = (0..151_936).step_by(3).collect();
        let sparse: Vec<i32> = vec![0, 31, 32, 63, 64, 151_935];
        let bitmap_small: Vec<i32> = (0..100).collect(); // 100 ids in 4 words: bitmap form
        let list_wide: Vec<i32> = (0..40).map(|i| i * 3000).collect(); // list form
        let mut ids_seen = Vec::new();
        for ids in [&dense, &sparse, &bitmap_small, &list_wide, &Vec::new()] {
            ids_seen.push(entry_id(ids, n_words).0);
        }
        ids_seen.sort();
        ids_seen.dedup();
        assert_eq!(ids_seen.len(), 5);
        // a payload form check against ids_payload itself
        let mut h1 = Blake2b128::new_customized(ENTRY_PERSON);
        h1.update(ids_payload(&bitmap_small));
        let mut h2 = Blake2b128::new_customized(ENTRY_PERSON);
        let mut w = vec![0u32; n_words];
        or_ids_into_words(&bitmap_small, &mut w).unwrap();
        hash_words_payload(&mut h2, &CiWords::Dense(w), bitmap_small.len());
        assert_eq!(h1.finalize(), h2.finalize());
    }
}
