//! The scan side of the cold walk (paper §4.1): the union-DFA tables a walk steps through
//! ([`ScanDfa`], shared by every grammar runtime over one lexer), the per-runtime
//! [`ScanTables`] (ignored terminals, accept candidates, schema [`Lexicon`]s) and contextual
//! resolution ([`Resolved`]). Split from `walk.rs` along its seam: these tables know bytes
//! and terminals, not the token trie; `walk` re-exports them under their old paths.

use std::fmt;
use std::sync::Arc;

use crate::fxhash::FxSet;
use crate::lexer::{DEAD, START};

/// Bytes that open a quoted identifier: such lexemes are compared exactly even when the
/// category folds bare case (`grid_sql.grammar.lexicon.QUOTE_BYTES`).
pub const QUOTE_BYTES: [u8; 3] = [b'"', b'`', b'['];

/// `fold_lexeme`: with `fold_bare_case`, a bare (unquoted) lexeme compares ASCII-lower-cased.
pub fn fold_lexeme(lexeme: &[u8], fold_bare_case: bool) -> Vec<u8> {
    let mut out = lexeme.to_vec();
    if fold_bare_case && !lexeme.is_empty() && !QUOTE_BYTES.contains(&lexeme[0]) {
        out.make_ascii_lowercase();
    }
    out
}

/// The allowed words of one category terminal with their prefix closure (`CategoryWords`).
#[derive(Debug, Clone)]
pub struct Lexicon {
    words: FxSet<Vec<u8>>,
    prefixes: FxSet<Vec<u8>>,
    fold_bare_case: bool,
    fold_quoted_case: bool,
    exclude: bool,
    /// Of a complement: no lexeme beginning (folded) with one of these is admitted.
    refused_prefixes: Vec<Vec<u8>>,
}

impl Lexicon {
    /// Words are folded on entry, exactly as `CategoryWords.__post_init__` does.
    pub fn new<I: IntoIterator<Item = Vec<u8>>>(words: I, fold_bare_case: bool) -> Self {
        Self::with_folding(words, fold_bare_case, false)
    }

    /// [`Lexicon::new`] that may also compare quoted lexemes case-folded
    /// (`CategoryWords.fold_quoted_case`: the scope rule's name lists).
    pub fn with_folding<I: IntoIterator<Item = Vec<u8>>>(
        words: I,
        fold_bare_case: bool,
        fold_quoted_case: bool,
    ) -> Self {
        let words: FxSet<Vec<u8>> = words
            .into_iter()
            .map(|w| {
                if fold_quoted_case {
                    w.to_ascii_lowercase()
                } else {
                    fold_lexeme(&w, fold_bare_case)
                }
            })
            .collect();
        let mut prefixes = FxSet::default();
        for w in &words {
            for i in 0..=w.len() {
                prefixes.insert(w[..i].to_vec());
            }
        }
        Lexicon {
            words,
            prefixes,
            fold_bare_case,
            fold_quoted_case,
            exclude: false,
            refused_prefixes: Vec::new(),
        }
    }

    /// The complement lexicon (`CategoryWords.exclude`): every lexeme of the terminal but
    /// `words` (folded as [`Lexicon::with_folding`] does) is admitted.
    pub fn excluding<I: IntoIterator<Item = Vec<u8>>>(
        words: I,
        fold_bare_case: bool,
        fold_quoted_case: bool,
    ) -> Self {
        let mut lex = Self::with_folding(words, fold_bare_case, fold_quoted_case);
        lex.prefixes = FxSet::default();
        lex.exclude = true;
        lex
    }

    /// A complement that also refuses every lexeme beginning (folded as the words are) with
    /// one of `prefixes` (`CategoryWords.refused_prefixes`: the keywords a select-list
    /// obligation blocks where a table's alias may be written). No effect on an allow-list.
    pub fn refusing_prefixes<I: IntoIterator<Item = Vec<u8>>>(mut self, prefixes: I) -> Self {
        if self.exclude {
            self.refused_prefixes = prefixes
                .into_iter()
                .filter(|p| !p.is_empty())
                .map(|p| {
                    if self.fold_quoted_case {
                        p.to_ascii_lowercase()
                    } else {
                        fold_lexeme(&p, self.fold_bare_case)
                    }
                })
                .collect();
        }
        self
    }

    /// Whether `partial` (folded) begins with a refused prefix: it and every extension are
    /// refused.
    fn refuses_prefix(&self, partial: &[u8]) -> bool {
        if self.refused_prefixes.is_empty() {
            return false;
        }
        let key = if self.folds(partial) {
            partial.to_ascii_lowercase()
        } else {
            partial.to_vec()
        };
        self.refused_prefixes.iter().any(|p| key.starts_with(p))
    }

    fn folds(&self, lexeme: &[u8]) -> bool {
        !lexeme.is_empty()
            && (self.fold_quoted_case || (self.fold_bare_case && !QUOTE_BYTES.contains(&lexeme[0])))
            && lexeme.iter().any(u8::is_ascii_uppercase)
    }

    /// Whether `lexeme` is one of the allowed words (not a refused one).
    pub fn admits(&self, lexeme: &[u8]) -> bool {
        if self.exclude && self.refuses_prefix(lexeme) {
            return false;
        }
        let listed = if self.folds(lexeme) {
            self.words.contains(&lexeme.to_ascii_lowercase())
        } else {
            self.words.contains(lexeme)
        };
        listed != self.exclude
    }

    /// Whether `partial` can still be extended to an allowed word.
    pub fn admits_prefix(&self, partial: &[u8]) -> bool {
        if self.exclude {
            !self.refuses_prefix(partial)
        } else if self.folds(partial) {
            self.prefixes.contains(&partial.to_ascii_lowercase())
        } else {
            self.prefixes.contains(partial)
        }
    }

    /// Number of words (after folding; the refused ones of a complement lexicon).
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the category admits no word at all.
    pub fn is_empty(&self) -> bool {
        !self.exclude && self.words.is_empty()
    }

    /// Whether the words are the refused ones ([`Lexicon::excluding`]).
    pub fn is_complement(&self) -> bool {
        self.exclude
    }
}

/// Invalid tables or arguments; the message says which input is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkError(pub String);

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

pub(crate) fn err<T>(msg: String) -> Result<T, WalkError> {
    Err(WalkError(msg))
}

/// Byte classes for the sink-subtree shortcut of the walk (see [`Walker::walk`]): a trie
/// node records which of them contain every edge byte below it, a DFA state which of them
/// it loops on. Identifier characters, digits, whitespace, and string contents (all bytes
/// but a quote and the backslash).
pub(crate) const SINK_CLASSES: usize = 5;

pub(crate) fn in_sink_class(k: usize, b: u8) -> bool {
    match k {
        0 => b.is_ascii_alphanumeric() || b == b'_',
        1 => b.is_ascii_digit(),
        2 => matches!(b, b' ' | b'\t' | b'\n' | b'\r'),
        3 => b != b'\'' && b != b'\\',
        _ => b != b'"' && b != b'\\',
    }
}

pub(crate) fn class_bits(b: u8) -> u8 {
    (0..SINK_CLASSES).fold(0u8, |m, k| m | (u8::from(in_sink_class(k, b)) << k))
}

#[inline]
pub(crate) fn bit(words: &[u64], t: usize) -> bool {
    words.get(t / 64).is_some_and(|w| (w >> (t % 64)) & 1 == 1)
}

/// The union-DFA side of the scan tables: transitions, per-state "accepts anything" flags,
/// live bitsets and accept candidates in resolution order. It depends on the lexer alone,
/// so every grammar runtime over one lexer (every role projection and lexicon of a dialect)
/// shares one, behind an `Arc`.
#[derive(Debug, Clone)]
pub struct ScanDfa {
    pub(crate) trans: Vec<u32>,
    pub(crate) n_states: usize,
    pub(crate) accepting: Vec<bool>,
    pub(crate) live: Vec<u64>,
    pub(crate) n_words: usize,
    pub(crate) candidates: Vec<Vec<u32>>,
    /// per state: the byte classes (`SINK_CLASSES`) on every byte of which it loops
    pub(crate) sink: Vec<u8>,
}

impl ScanDfa {
    /// Build and validate.
    ///
    /// - `trans`: `n_states * 256` next states; `accept` / `live`: `n_states * n_words`
    ///   terminal bitset words (as `UnionDfa::accept_words` / `live_words`);
    /// - `candidates[s]`: the accepting terminals of state `s` in resolution order.
    pub fn new(
        trans: Vec<u32>,
        accept: &[u64],
        live: Vec<u64>,
        n_words: usize,
        candidates: Vec<Vec<u32>>,
    ) -> Result<Self, WalkError> {
        if trans.is_empty() || trans.len() % 256 != 0 {
            return err(format!(
                "trans must hold n_states * 256 entries, got {}",
                trans.len()
            ));
        }
        let n_states = trans.len() / 256;
        if n_states <= START as usize {
            return err(format!(
                "need at least the dead and start states, got {n_states}"
            ));
        }
        if let Some(bad) = trans.iter().find(|&&s| s as usize >= n_states) {
            return err(format!(
                "transition to state {bad} but only {n_states} states"
            ));
        }
        if n_words == 0 {
            return err("n_words must be positive".into());
        }
        if accept.len() != n_states * n_words || live.len() != n_states * n_words {
            return err(format!(
                "accept/live must hold n_states * n_words = {} words, got {} / {}",
                n_states * n_words,
                accept.len(),
                live.len()
            ));
        }
        if candidates.len() != n_states {
            return err(format!(
                "candidates must have one row per state ({n_states}), got {}",
                candidates.len()
            ));
        }
        let n_terms = n_words * 64;
        for (s, row) in candidates.iter().enumerate() {
            for &t in row {
                if t as usize >= n_terms
                    || !bit(&accept[s * n_words..(s + 1) * n_words], t as usize)
                {
                    return err(format!(
                        "candidate terminal {t} of state {s} is not in its accept set"
                    ));
                }
            }
        }
        let accepting = (0..n_states)
            .map(|s| {
                accept[s * n_words..(s + 1) * n_words]
                    .iter()
                    .any(|&w| w != 0)
            })
            .collect();
        let sink = (0..n_states)
            .map(|st| {
                let row = &trans[st * 256..(st + 1) * 256];
                (0..SINK_CLASSES).fold(0u8, |m, k| {
                    let loops = st != DEAD as usize
                        && (0..=255u8)
                            .filter(|&b| in_sink_class(k, b))
                            .all(|b| row[b as usize] as usize == st);
                    m | (u8::from(loops) << k)
                })
            })
            .collect();
        Ok(ScanDfa {
            trans,
            n_states,
            accepting,
            live,
            n_words,
            candidates,
            sink,
        })
    }

    /// Number of union-DFA states.
    pub fn n_states(&self) -> usize {
        self.n_states
    }

    /// Terminal bitset words per state.
    pub fn n_words(&self) -> usize {
        self.n_words
    }

    /// Heap bytes held by the tables (what sharing one `ScanDfa` saves per extra runtime).
    pub fn heap_bytes(&self) -> usize {
        self.trans.len() * 4
            + self.accepting.len()
            + self.sink.len()
            + self.live.len() * 8
            + self.candidates.len() * std::mem::size_of::<Vec<u32>>()
            + self.candidates.iter().map(|c| c.len() * 4).sum::<usize>()
    }
}

/// Scanner-side tables of one grammar runtime (`ParserRuntime`'s lexer fields): the shared
/// union DFA plus what the grammar adds (the ignored set and the schema lexicons).
#[derive(Debug, Clone)]
pub struct ScanTables {
    pub(crate) dfa: Arc<ScanDfa>,
    pub(crate) ignored: Vec<u64>,
    pub(crate) lexicon: Vec<Option<Lexicon>>,
    pub(crate) lexicon_mask: Vec<u64>,
}

impl ScanTables {
    /// Build and validate (a private [`ScanDfa`]; see [`ScanDfa::new`] for the DFA inputs).
    ///
    /// - `ignored`: bitset of ignored terminals (`n_words` words or fewer);
    /// - `lexicons`: `(terminal, lexicon)` for every category restricted by a schema lexicon.
    pub fn new(
        trans: Vec<u32>,
        accept: &[u64],
        live: Vec<u64>,
        n_words: usize,
        candidates: Vec<Vec<u32>>,
        ignored: &[u64],
        lexicons: Vec<(u32, Lexicon)>,
    ) -> Result<Self, WalkError> {
        let dfa = ScanDfa::new(trans, accept, live, n_words, candidates)?;
        Self::with_dfa(Arc::new(dfa), ignored, lexicons)
    }

    /// The tables of one grammar over a shared union DFA (no copy of the DFA).
    pub fn with_dfa(
        dfa: Arc<ScanDfa>,
        ignored: &[u64],
        lexicons: Vec<(u32, Lexicon)>,
    ) -> Result<Self, WalkError> {
        let n_words = dfa.n_words;
        let n_terms = n_words * 64;
        if ignored.len() > n_words {
            return err(format!(
                "ignored bitset has {} words > n_words",
                ignored.len()
            ));
        }
        let mut ign = vec![0u64; n_words];
        ign[..ignored.len()].copy_from_slice(ignored);
        let mut lexicon: Vec<Option<Lexicon>> = vec![None; n_terms];
        let mut lexicon_mask = vec![0u64; n_words];
        for (t, lex) in lexicons {
            let t = t as usize;
            if t >= n_terms {
                return err(format!("lexicon terminal {t} out of range"));
            }
            lexicon_mask[t / 64] |= 1 << (t % 64);
            lexicon[t] = Some(lex);
        }
        Ok(ScanTables {
            dfa,
            ignored: ign,
            lexicon,
            lexicon_mask,
        })
    }

    /// The shared union-DFA part.
    pub fn dfa(&self) -> &Arc<ScanDfa> {
        &self.dfa
    }

    /// Number of union-DFA states.
    pub fn n_states(&self) -> usize {
        self.dfa.n_states
    }

    /// Terminal bitset words (of the accept/live sets and of an allowed set without stop
    /// bits).
    pub fn n_words(&self) -> usize {
        self.dfa.n_words
    }

    /// One DFA step: the state after reading `byte` in `state` ([`DEAD`] if none).
    #[inline]
    pub fn step(&self, state: u32, byte: u8) -> u32 {
        self.dfa.trans[state as usize * 256 + byte as usize]
    }

    /// Whether some terminal fully matches the bytes that lead to `state`.
    #[inline]
    pub fn accepting(&self, state: u32) -> bool {
        self.dfa.accepting[state as usize]
    }

    /// Contextual resolution (`ParserRuntime.resolve`): the first candidate, in resolution
    /// order, admitted by its lexicon (if any) that is ignored (`Some(Resolved::Ignored)`)
    /// or allowed (`Some(Resolved::Terminal)`); `None` if no candidate is viable, or if the
    /// first one reached has its stop bit set (bit `64 * n_words + t` of `allowed`, after
    /// the terminal words: a reserved keyword a select-list obligation blocks).
    pub fn resolve(&self, la_state: u32, lexeme: &[u8], allowed: &[u64]) -> Option<Resolved> {
        let stop_base = self.dfa.n_words * 64;
        let stops = allowed.len() > self.dfa.n_words;
        for &t in &self.dfa.candidates[la_state as usize] {
            let tu = t as usize;
            if let Some(lex) = &self.lexicon[tu] {
                if !lex.admits(lexeme) {
                    continue;
                }
            }
            if bit(&self.ignored, tu) {
                return Some(Resolved::Ignored);
            }
            if stops && bit(allowed, stop_base + tu) {
                return None;
            }
            if bit(allowed, tu) {
                return Some(Resolved::Terminal(t));
            }
        }
        None
    }

    /// At DFA state `dfa` under `allowed`: (some live allowed-or-ignored terminal has no
    /// lexicon, some has one).
    pub(crate) fn live_kinds(&self, dfa: u32, allowed: &[u64]) -> (bool, bool) {
        let (live, n_words) = (&self.dfa.live, self.dfa.n_words);
        let base = dfa as usize * n_words;
        let mut any_lex = false;
        for w in 0..n_words {
            let m = live[base + w] & (allowed.get(w).copied().unwrap_or(0) | self.ignored[w]);
            if m & !self.lexicon_mask[w] != 0 {
                return (true, any_lex);
            }
            any_lex |= m & self.lexicon_mask[w] != 0;
        }
        (false, any_lex)
    }

    /// Whether [`Self::pending_live`] at DFA state `dfa` under `allowed` is the same for
    /// every pending lexeme: some live terminal without a lexicon, or none with one.
    pub fn liveness_ignores_rem(&self, dfa: u32, allowed: &[u64]) -> bool {
        let (plain, lex) = self.live_kinds(dfa, allowed);
        plain || !lex
    }

    /// `ParserRuntime.pending_live`: the pending lexeme `rem` (DFA state `dfa`) can still
    /// become an allowed or ignored terminal.
    pub fn pending_live(&self, dfa: u32, rem: &[u8], allowed: &[u64]) -> bool {
        let (plain, any_lex) = self.live_kinds(dfa, allowed);
        self.pending_live_with(dfa, rem, allowed, plain, any_lex)
    }

    /// [`Self::pending_live`] given `dfa`'s [`Self::live_kinds`] under `allowed`.
    pub(crate) fn pending_live_with(
        &self,
        dfa: u32,
        rem: &[u8],
        allowed: &[u64],
        plain: bool,
        any_lex: bool,
    ) -> bool {
        if plain {
            return true;
        }
        if !any_lex {
            return false;
        }
        let (live, n_words) = (&self.dfa.live, self.dfa.n_words);
        let base = dfa as usize * n_words;
        for w in 0..n_words {
            let mut m = live[base + w]
                & (allowed.get(w).copied().unwrap_or(0) | self.ignored[w])
                & self.lexicon_mask[w];
            while m != 0 {
                let t = w * 64 + m.trailing_zeros() as usize;
                if let Some(lex) = &self.lexicon[t] {
                    if lex.admits_prefix(rem) {
                        return true;
                    }
                }
                m &= m - 1;
            }
        }
        false
    }
}

/// Outcome of contextual resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// An ignored terminal: emitted without touching the stack.
    Ignored,
    /// A real terminal: emitting it changes the stack (a CD boundary).
    Terminal(u32),
}
