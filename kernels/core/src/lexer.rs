//! The union lexer DFA (paper §2 L1, §4.1; design `foundation.md` §1–§2).
//!
//! One deterministic automaton runs all terminal regexes at once. Each union state is the
//! tuple of per-terminal DFA states that can still lead to a full match; per state we keep
//! - `accept`: terminals whose regex fully matches exactly the bytes read so far, and
//! - `live`: terminals for which some extension (possibly empty) of those bytes matches.
//!
//! The scanner's maximal munch runs on this table: keep stepping while the state is not
//! dead, remember the last state with a non-empty `accept`, emit there.
//!
//! Per-terminal DFAs come from `regex-automata` (dense, anchored, byte semantics). Two
//! subtleties of those DFAs are handled here rather than leaked to callers:
//! - *match delay*: a regex-automata DFA reports a match one byte late. "Full match of
//!   exactly the bytes read" is therefore `is_match_state(next_eoi_state(s))`.
//! - *useless states*: because of the delay, a DFA state can be non-dead yet unable to
//!   produce a *full* match of any extension (e.g. `a` after reading `ab`: the state still
//!   has to report the match ending at 1). We prune states from which no eoi-accepting
//!   state is reachable, so `live` means exactly "some extension fully matches".
//!
//! The DFAs use `MatchKind::All` so that no alternative is dropped after an earlier match
//! (leftmost-first would forget `ab` in `a|ab` once `a` matched).

use std::collections::{HashMap, VecDeque};
use std::fmt;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::util::syntax;
use regex_automata::{Anchored, MatchKind};

use crate::fingerprint::Fingerprinter;

/// The dead state: every transition leads back to it, `accept` and `live` are empty.
pub const DEAD: u32 = 0;
/// The start state (nothing read yet).
pub const START: u32 = 1;
/// Default cap on the number of union states (each costs 1 KiB of transitions).
pub const DEFAULT_MAX_STATES: usize = 1 << 20;

/// Marker for "no useful component state" inside the per-pattern tables.
const NONE: u32 = u32::MAX;

/// Errors of [`UnionDfa::build`]; messages name the offending pattern by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexerError {
    /// The terminal set is empty.
    NoPatterns,
    /// The pattern is not a valid regex (under byte semantics).
    Syntax {
        index: usize,
        pattern: String,
        message: String,
    },
    /// The pattern uses a look-around assertion (`^`, `$`, `\b`, ...), outside the
    /// common subset of `foundation.md` §1.
    Assertion { index: usize, pattern: String },
    /// The pattern matches the empty string; a lexeme must consume at least one byte.
    EmptyMatch { index: usize, pattern: String },
    /// regex-automata failed to build the DFA for this pattern (e.g. a size limit).
    Build {
        index: usize,
        pattern: String,
        message: String,
    },
    /// The union automaton exceeded the configured state cap.
    TooManyStates { limit: usize, n_patterns: usize },
}

impl fmt::Display for LexerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LexerError::NoPatterns => write!(f, "union DFA needs at least one pattern"),
            LexerError::Syntax {
                index,
                pattern,
                message,
            } => {
                write!(
                    f,
                    "pattern {index} ({pattern:?}) is not a valid regex: {message}"
                )
            }
            LexerError::Assertion { index, pattern } => write!(
                f,
                "pattern {index} ({pattern:?}) uses a look-around assertion (^, $, \\b, ...), \
                 which terminal regexes must not use"
            ),
            LexerError::EmptyMatch { index, pattern } => {
                write!(f, "pattern {index} ({pattern:?}) matches the empty string")
            }
            LexerError::Build {
                index,
                pattern,
                message,
            } => {
                write!(
                    f,
                    "pattern {index} ({pattern:?}): DFA build failed: {message}"
                )
            }
            LexerError::TooManyStates { limit, n_patterns } => write!(
                f,
                "union DFA of {n_patterns} patterns exceeds the cap of {limit} states"
            ),
        }
    }
}

impl std::error::Error for LexerError {}

/// Build options for [`UnionDfa::build_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildConfig {
    /// Error out (instead of exhausting memory) above this many union states.
    pub max_states: usize,
}

impl Default for BuildConfig {
    fn default() -> Self {
        Self {
            max_states: DEFAULT_MAX_STATES,
        }
    }
}

/// The union lexer DFA; see the module docs.
///
/// Layout (also the layout handed to Python): `trans[state * 256 + byte]` is the next
/// state; `accept`/`live` hold `n_words` little-endian-meaningful `u64` words per state,
/// bit `p % 64` of word `p / 64` standing for pattern `p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnionDfa {
    trans: Vec<u32>,
    accept: Vec<u64>,
    live: Vec<u64>,
    n_states: usize,
    n_words: usize,
    n_patterns: usize,
}

/// One terminal's DFA, re-indexed to its useful states only.
struct Component {
    /// byte -> equivalence class of this DFA
    classes: [u8; 256],
    n_classes: usize,
    /// `trans[local * n_classes + class]` -> local state or `NONE` (no full match possible)
    trans: Vec<u32>,
    accept: Vec<bool>,
    /// `NONE` when the pattern's language is empty
    start: u32,
}

fn syntax_config() -> syntax::Config {
    // Byte semantics (foundation §1): classes range over bytes, (?i) folds ASCII only,
    // and patterns may match invalid UTF-8.
    syntax::Config::new().unicode(false).utf8(false)
}

fn compile_component(index: usize, pattern: &str) -> Result<Component, LexerError> {
    let hir = syntax::parse_with(pattern, &syntax_config()).map_err(|e| LexerError::Syntax {
        index,
        pattern: pattern.to_string(),
        message: e.to_string(),
    })?;
    let props = hir.properties();
    if !props.look_set().is_empty() {
        return Err(LexerError::Assertion {
            index,
            pattern: pattern.to_string(),
        });
    }
    if props.minimum_len() == Some(0) {
        return Err(LexerError::EmptyMatch {
            index,
            pattern: pattern.to_string(),
        });
    }
    let build_err = |message: String| LexerError::Build {
        index,
        pattern: pattern.to_string(),
        message,
    };
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().utf8(false))
        .build_from_hir(&hir)
        .map_err(|e| build_err(e.to_string()))?;
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .minimize(true),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| build_err(e.to_string()))?;
    let start_id = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| build_err(e.to_string()))?;

    // Byte classes of this DFA, and one representative byte per class.
    let bc = dfa.byte_classes();
    let mut classes = [0u8; 256];
    // (Do not assume how classes are numbered: take the first byte seen in each.)
    let mut first: Vec<Option<u8>> = vec![None; 256];
    for b in 0..=255u8 {
        let c = bc.get(b);
        classes[b as usize] = c;
        first[c as usize].get_or_insert(b);
    }
    let reps: Vec<u8> = first.iter().map_while(|r| *r).collect();
    debug_assert_eq!(
        reps.len(),
        first.iter().flatten().count(),
        "classes are 0..n"
    );
    let n_classes = reps.len();

    // Enumerate all states reachable from the anchored start.
    let mut local: HashMap<StateID, u32> = HashMap::new();
    let mut ids: Vec<StateID> = vec![start_id];
    local.insert(start_id, 0);
    let mut raw_trans: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let sid = ids[i];
        for &rep in &reps {
            let next = dfa.next_state(sid, rep);
            let n = ids.len() as u32;
            let l = *local.entry(next).or_insert_with(|| {
                ids.push(next);
                n
            });
            raw_trans.push(l);
        }
        i += 1;
    }
    let n = ids.len();
    let raw_accept: Vec<bool> = ids
        .iter()
        .map(|&sid| dfa.is_match_state(dfa.next_eoi_state(sid)))
        .collect();

    // Useful = can reach an eoi-accepting state (reverse reachability).
    let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
    for s in 0..n {
        for c in 0..n_classes {
            let t = raw_trans[s * n_classes + c] as usize;
            rev[t].push(s as u32);
        }
    }
    let mut useful = raw_accept.clone();
    let mut queue: VecDeque<usize> = (0..n).filter(|&s| raw_accept[s]).collect();
    while let Some(t) = queue.pop_front() {
        for &s in &rev[t] {
            if !useful[s as usize] {
                useful[s as usize] = true;
                queue.push_back(s as usize);
            }
        }
    }

    // Re-index to useful states only.
    let mut remap = vec![NONE; n];
    let mut next_id = 0u32;
    for s in 0..n {
        if useful[s] {
            remap[s] = next_id;
            next_id += 1;
        }
    }
    let mut trans = Vec::with_capacity(next_id as usize * n_classes);
    let mut accept = Vec::with_capacity(next_id as usize);
    for s in 0..n {
        if useful[s] {
            for c in 0..n_classes {
                trans.push(remap[raw_trans[s * n_classes + c] as usize]);
            }
            accept.push(raw_accept[s]);
        }
    }
    Ok(Component {
        classes,
        n_classes,
        trans,
        accept,
        start: remap[0],
    })
}

/// Key of a union state: the non-dead components as (pattern index, local state), sorted
/// by pattern index.
type Key = Vec<(u32, u32)>;

impl UnionDfa {
    /// Build with the default [`BuildConfig`].
    pub fn build(patterns: &[String]) -> Result<UnionDfa, LexerError> {
        Self::build_with(patterns, &BuildConfig::default())
    }

    /// Build the union DFA of `patterns` (terminal `p` is `patterns[p]`).
    pub fn build_with(patterns: &[String], config: &BuildConfig) -> Result<UnionDfa, LexerError> {
        if patterns.is_empty() {
            return Err(LexerError::NoPatterns);
        }
        let comps: Vec<Component> = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| compile_component(i, p))
            .collect::<Result<_, _>>()?;
        let n_patterns = patterns.len();
        let n_words = n_patterns.div_ceil(64);
        let max_states = config.max_states.max(2);
        let too_many = || LexerError::TooManyStates {
            limit: max_states,
            n_patterns,
        };

        // Union byte classes: bytes that every component treats alike.
        let mut sig_to_class: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut class_bytes: Vec<Vec<u8>> = Vec::new();
        for b in 0..256usize {
            let sig: Vec<u8> = comps.iter().map(|c| c.classes[b]).collect();
            let k = sig_to_class.len();
            let cls = *sig_to_class.entry(sig).or_insert(k);
            if cls == class_bytes.len() {
                class_bytes.push(Vec::new());
            }
            class_bytes[cls].push(b as u8);
        }

        let start_key: Key = comps
            .iter()
            .enumerate()
            .filter(|(_, c)| c.start != NONE)
            .map(|(p, c)| (p as u32, c.start))
            .collect();
        let mut index: HashMap<Key, u32> = HashMap::new();
        index.insert(Vec::new(), DEAD);
        if !start_key.is_empty() {
            index.insert(start_key.clone(), START);
        }
        let mut keys: Vec<Key> = vec![Vec::new(), start_key];
        let mut trans: Vec<u32> = vec![DEAD; 2 * 256];

        let mut s = START as usize;
        let mut next_key: Key = Vec::new();
        while s < keys.len() {
            for bytes in &class_bytes {
                let rep = bytes[0] as usize;
                next_key.clear();
                for &(p, ls) in &keys[s] {
                    let c = &comps[p as usize];
                    let t = c.trans[ls as usize * c.n_classes + c.classes[rep] as usize];
                    if t != NONE {
                        next_key.push((p, t));
                    }
                }
                let target = match index.get(&next_key) {
                    Some(&t) => t,
                    None => {
                        if keys.len() >= max_states {
                            return Err(too_many());
                        }
                        let t = keys.len() as u32;
                        index.insert(next_key.clone(), t);
                        keys.push(next_key.clone());
                        trans.resize(trans.len() + 256, DEAD);
                        t
                    }
                };
                for &b in bytes {
                    trans[s * 256 + b as usize] = target;
                }
            }
            s += 1;
        }

        let n_states = keys.len();
        let mut accept = vec![0u64; n_states * n_words];
        let mut live = vec![0u64; n_states * n_words];
        for (s, key) in keys.iter().enumerate() {
            for &(p, ls) in key {
                let (w, bit) = (p as usize / 64, 1u64 << (p % 64));
                live[s * n_words + w] |= bit;
                if comps[p as usize].accept[ls as usize] {
                    accept[s * n_words + w] |= bit;
                }
            }
        }
        Ok(UnionDfa {
            trans,
            accept,
            live,
            n_states,
            n_words,
            n_patterns,
        })
    }

    pub fn n_states(&self) -> usize {
        self.n_states
    }

    /// `u64` words per state in the `accept`/`live` bitsets (`ceil(n_patterns / 64)`).
    pub fn n_words(&self) -> usize {
        self.n_words
    }

    pub fn n_patterns(&self) -> usize {
        self.n_patterns
    }

    /// The whole transition table, `n_states * 256` entries.
    pub fn trans(&self) -> &[u32] {
        &self.trans
    }

    /// All accept bitsets, `n_states * n_words` words.
    pub fn accept_words(&self) -> &[u64] {
        &self.accept
    }

    /// All live bitsets, `n_states * n_words` words.
    pub fn live_words(&self) -> &[u64] {
        &self.live
    }

    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * 256 + byte as usize]
    }

    /// Walk `data` from `state`; returns the final state (dead is absorbing).
    pub fn scan(&self, state: u32, data: &[u8]) -> u32 {
        let mut s = state;
        for &b in data {
            s = self.next(s, b);
            if s == DEAD {
                break;
            }
        }
        s
    }

    #[inline]
    pub fn accept_set(&self, state: u32) -> &[u64] {
        let o = state as usize * self.n_words;
        &self.accept[o..o + self.n_words]
    }

    #[inline]
    pub fn live_set(&self, state: u32) -> &[u64] {
        let o = state as usize * self.n_words;
        &self.live[o..o + self.n_words]
    }

    #[inline]
    pub fn is_accept(&self, state: u32, pattern: usize) -> bool {
        self.accept_set(state)[pattern / 64] >> (pattern % 64) & 1 == 1
    }

    #[inline]
    pub fn is_live(&self, state: u32, pattern: usize) -> bool {
        self.live_set(state)[pattern / 64] >> (pattern % 64) & 1 == 1
    }

    /// True iff some pattern fully matches the bytes read to reach `state`.
    pub fn any_accept(&self, state: u32) -> bool {
        self.accept_set(state).iter().any(|&w| w != 0)
    }

    /// Patterns accepting in `state`, ascending.
    pub fn accepting(&self, state: u32) -> Vec<usize> {
        bits(self.accept_set(state))
    }

    /// Patterns live in `state`, ascending.
    pub fn live_patterns(&self, state: u32) -> Vec<usize> {
        bits(self.live_set(state))
    }

    /// Transition table as little-endian `u32` bytes (the Python-facing layout).
    pub fn trans_le_bytes(&self) -> Vec<u8> {
        self.trans.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    pub fn accept_le_bytes(&self) -> Vec<u8> {
        self.accept.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    pub fn live_le_bytes(&self) -> Vec<u8> {
        self.live.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Hex BLAKE2b-256 of the canonical encoding of the tables (design §5). State
    /// numbering is deterministic (BFS over byte classes in byte order), so equal pattern
    /// lists give equal fingerprints.
    pub fn fingerprint(&self) -> String {
        let mut f = Fingerprinter::new();
        f.update_field(b"grid-sql/union-dfa/v1")
            .update_u64(self.n_patterns as u64)
            .update_u64(self.n_states as u64)
            .update_u64(self.n_words as u64)
            .update_field(&self.trans_le_bytes())
            .update_field(&self.accept_le_bytes())
            .update_field(&self.live_le_bytes());
        f.hex()
    }
}

fn bits(words: &[u64]) -> Vec<usize> {
    let mut out = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        let mut x = word;
        while x != 0 {
            let t = x.trailing_zeros() as usize;
            out.push(w * 64 + t);
            x &= x - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pats(ps: &[&str]) -> Vec<String> {
        ps.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dead_and_start_layout() {
        let d = UnionDfa::build(&pats(&["ab"])).unwrap();
        assert!(d.trans()[..256].iter().all(|&t| t == DEAD));
        assert!(!d.any_accept(DEAD) && d.live_patterns(DEAD).is_empty());
        assert_eq!(d.live_patterns(START), vec![0]);
        assert!(!d.any_accept(START));
        // "ab", "a", "b", dead, start
        let a = d.next(START, b'a');
        let ab = d.next(a, b'b');
        assert_eq!(d.accepting(ab), vec![0]);
        assert_eq!(d.next(ab, b'b'), DEAD, "no extension of `ab` matches `ab`");
        assert_eq!(d.next(START, b'b'), DEAD);
        assert_eq!(d.n_states(), 4);
    }

    #[test]
    fn match_delay_does_not_leak_into_live() {
        // After "ab" the regex-automata DFA for `a` still has to report the match ending at 1,
        // so its state is not "dead" — but for us no extension fully matches.
        let d = UnionDfa::build(&pats(&["a"])).unwrap();
        let a = d.next(START, b'a');
        assert!(d.is_accept(a, 0));
        assert_eq!(d.next(a, b'b'), DEAD);
    }

    #[test]
    fn all_alternatives_kept() {
        let d = UnionDfa::build(&pats(&["a|ab"])).unwrap();
        let ab = d.scan(START, b"ab");
        assert!(
            d.is_accept(ab, 0),
            "leftmost-first would drop `ab` after `a`"
        );
    }

    #[test]
    fn errors_name_the_pattern() {
        let e = UnionDfa::build(&pats(&["a", "(b"])).unwrap_err();
        assert!(matches!(e, LexerError::Syntax { index: 1, .. }), "{e}");
        assert!(e.to_string().contains("pattern 1"), "{e}");
        let e = UnionDfa::build(&pats(&["a", "b", "c*"])).unwrap_err();
        assert_eq!(
            e,
            LexerError::EmptyMatch {
                index: 2,
                pattern: "c*".into()
            }
        );
        assert!(e.to_string().contains("empty string"));
        let e = UnionDfa::build(&pats(&[r"a\b"])).unwrap_err();
        assert!(matches!(e, LexerError::Assertion { index: 0, .. }), "{e}");
        assert_eq!(UnionDfa::build(&[]).unwrap_err(), LexerError::NoPatterns);
    }

    #[test]
    fn state_cap() {
        // (a|b)*a(a|b){k} needs 2^k states deterministically.
        let e = UnionDfa::build_with(&pats(&["[ab]*a[ab]{8}"]), &BuildConfig { max_states: 64 })
            .unwrap_err();
        assert_eq!(
            e,
            LexerError::TooManyStates {
                limit: 64,
                n_patterns: 1
            }
        );
    }

    #[test]
    fn fingerprint_is_deterministic() {
        let p = pats(&["(?i:select)", "[A-Za-z_][A-Za-z0-9_]*"]);
        let a = UnionDfa::build(&p).unwrap();
        let b = UnionDfa::build(&p).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 64);
        let c = UnionDfa::build(&pats(&["(?i:from)", "[A-Za-z_][A-Za-z0-9_]*"])).unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint());
    }
}
