//! Union DFA against brute-force oracles.
//!
//! - accept: `regex_automata::meta::Regex` of `^(?:p)$` (an anchored full match; `$` forces
//!   the engine to consider every alternative, so this is independent of match kinds).
//! - live: a direct Thompson-NFA simulation (state sets, no determinisation) plus graph
//!   reachability to a match state — independent of the dense DFA, its match delay and the
//!   product construction under test. Cross-checked with bounded brute force on small cases.

use grid_sql_core::lexer::{UnionDfa, DEAD, START};
use regex_automata::meta::Regex;
use regex_automata::nfa::thompson::{self, State, NFA};
use regex_automata::util::primitives::StateID;
use regex_automata::util::syntax;
use regex_automata::Input;

fn syn() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false)
}

fn full_match_regex(p: &str) -> Regex {
    Regex::builder()
        .syntax(syn())
        .build(&format!("^(?:{p})$"))
        .unwrap()
}

/// Thompson NFA simulation for anchored full match and prefix liveness.
struct NfaOracle {
    nfa: NFA,
    /// can_reach_match[s]: some path from NFA state s ends in a Match state
    can_reach_match: Vec<bool>,
}

impl NfaOracle {
    fn new(p: &str) -> Self {
        let nfa = thompson::Compiler::new()
            .syntax(syn())
            .configure(thompson::Config::new().utf8(false))
            .build(p)
            .unwrap();
        let n = nfa.states().len();
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, st) in nfa.states().iter().enumerate() {
            succ[i] = match st {
                State::ByteRange { trans } => vec![trans.next.as_usize()],
                State::Sparse(s) => s.transitions.iter().map(|t| t.next.as_usize()).collect(),
                State::Dense(d) => (0..=255u8)
                    .filter_map(|b| d.matches_byte(b))
                    .map(|s| s.as_usize())
                    .collect(),
                State::Look { next, .. } => panic!("test patterns have no look-around ({next:?})"),
                State::Union { alternates } => alternates.iter().map(|s| s.as_usize()).collect(),
                State::BinaryUnion { alt1, alt2 } => vec![alt1.as_usize(), alt2.as_usize()],
                State::Capture { next, .. } => vec![next.as_usize()],
                State::Fail | State::Match { .. } => vec![],
            };
        }
        let mut can = vec![false; n];
        // fixpoint (NFAs here are small)
        loop {
            let mut changed = false;
            for i in 0..n {
                if !can[i]
                    && (matches!(nfa.states()[i], State::Match { .. })
                        || succ[i].iter().any(|&j| can[j]))
                {
                    can[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        NfaOracle {
            nfa,
            can_reach_match: can,
        }
    }

    fn closure(&self, set: &mut Vec<StateID>) {
        let mut seen = vec![false; self.nfa.states().len()];
        let mut stack: Vec<StateID> = std::mem::take(set);
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut seen[s.as_usize()], true) {
                continue;
            }
            set.push(s);
            match self.nfa.state(s) {
                State::Union { alternates } => stack.extend(alternates.iter().copied()),
                State::BinaryUnion { alt1, alt2 } => stack.extend([*alt1, *alt2]),
                State::Capture { next, .. } => stack.push(*next),
                _ => {}
            }
        }
    }

    /// (accept, live) after reading `data` from the anchored start.
    fn run(&self, data: &[u8]) -> (bool, bool) {
        let mut set = vec![self.nfa.start_anchored()];
        self.closure(&mut set);
        for &b in data {
            let mut next = Vec::new();
            for &s in &set {
                match self.nfa.state(s) {
                    State::ByteRange { trans } if trans.matches_byte(b) => next.push(trans.next),
                    State::Sparse(sp) => next.extend(sp.matches_byte(b)),
                    State::Dense(d) => next.extend(d.matches_byte(b)),
                    _ => {}
                }
            }
            set = next;
            self.closure(&mut set);
        }
        let accept = set
            .iter()
            .any(|&s| matches!(self.nfa.state(s), State::Match { .. }));
        let live = set.iter().any(|&s| self.can_reach_match[s.as_usize()]);
        (accept, live)
    }
}

/// xorshift64*: deterministic, no dev-dependency needed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_inputs(seed: u64, n: usize, alphabet: &[u8], fragments: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let mut v = Vec::new();
            for _ in 0..rng.below(7) {
                if rng.below(2) == 0 {
                    v.extend_from_slice(fragments[rng.below(fragments.len())]);
                } else {
                    for _ in 0..1 + rng.below(3) {
                        v.push(alphabet[rng.below(alphabet.len())]);
                    }
                }
            }
            v
        })
        .collect()
}

fn check(patterns: &[&str], inputs: &[Vec<u8>]) -> UnionDfa {
    let owned: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
    let dfa = UnionDfa::build(&owned).unwrap();
    let metas: Vec<Regex> = patterns.iter().map(|p| full_match_regex(p)).collect();
    let nfas: Vec<NfaOracle> = patterns.iter().map(|p| NfaOracle::new(p)).collect();
    for data in inputs {
        let s = dfa.scan(START, data);
        let mut any_live = false;
        for (p, (meta, nfa)) in metas.iter().zip(&nfas).enumerate() {
            let want_accept = meta.is_match(Input::new(data));
            let (nfa_accept, want_live) = nfa.run(data);
            assert_eq!(nfa_accept, want_accept, "oracles disagree: {p} on {data:?}");
            assert_eq!(
                dfa.is_accept(s, p),
                want_accept,
                "accept[{p}] ({:?}) on {:?}",
                patterns[p],
                String::from_utf8_lossy(data)
            );
            assert_eq!(
                dfa.is_live(s, p),
                want_live,
                "live[{p}] ({:?}) on {:?}",
                patterns[p],
                String::from_utf8_lossy(data)
            );
            any_live |= want_live;
        }
        assert_eq!(
            s == DEAD,
            !any_live,
            "dead state iff nothing live: {data:?}"
        );
    }
    dfa
}

const SQL: &[&str] = &[
    r"(?i:select)",
    r"(?i:from)",
    r"(?i:as)",
    r"(?i:asc)",
    r"[A-Za-z_][A-Za-z0-9_]*",
    r#""(?:[^"]|"")*""#,
    r"'([^']|'')*'",
    r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
    r"<>|!=",
    r"<=",
    r"<",
    r"\.",
    r"-",
    r"[ \t\r\n]+",
    r"--[^\n]*",
    r"/\*(?:[^*]|\*+[^*/])*\*+/",
];

#[test]
fn sql_terminals_against_oracles() {
    let alphabet = b"sSeElLcCtTfromaA_x019.'\" \n*/-+<>=!\xe9\x00";
    let fragments: &[&[u8]] = &[
        b"select", b"SELECT", b"as", b"asc", b"''", b"'", b"\"\"", b"1e+9", b"1.", b".5", b"E-",
        b"--", b"/*", b"*/", b"**", b"\n", b"<>",
    ];
    let inputs = random_inputs(0x9E37_79B9_7F4A_7C15, 4000, alphabet, fragments);
    check(SQL, &inputs);
}

#[test]
fn keyword_vs_identifier() {
    let pats = [r"(?i:select)", r"[A-Za-z_][A-Za-z0-9_]*"];
    let inputs: Vec<Vec<u8>> = [
        &b"select"[..],
        b"SeLeCt",
        b"sel",
        b"selects",
        b"s",
        b"_1",
        b"1",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let d = check(&pats, &inputs);
    let s = d.scan(START, b"SeLeCt");
    assert_eq!(d.accepting(s), vec![0, 1]);
    let s = d.scan(START, b"sel");
    assert_eq!(d.accepting(s), vec![1]);
    assert_eq!(d.live_patterns(s), vec![0, 1]);
    let s = d.scan(START, b"selectx");
    assert_eq!(d.accepting(s), vec![1]);
    assert_eq!(d.live_patterns(s), vec![1]);
    assert_eq!(d.scan(START, b"1"), DEAD);
}

#[test]
fn case_insensitive_keyword() {
    let d = UnionDfa::build(&["(?i:select)".to_string()]).unwrap();
    for w in [&b"select"[..], b"SELECT", b"sElEcT"] {
        assert!(d.is_accept(d.scan(START, w), 0), "{w:?}");
    }
    // ASCII-only folding (byte semantics): no Unicode case mapping.
    assert_eq!(d.scan(START, "ſelect".as_bytes()), DEAD);
}

#[test]
fn string_literal() {
    let d = UnionDfa::build(&[r"'([^']|'')*'".to_string()]).unwrap();
    let acc = |w: &[u8]| d.is_accept(d.scan(START, w), 0);
    let live = |w: &[u8]| d.is_live(d.scan(START, w), 0);
    assert!(acc(b"''") && acc(b"'it''s'") && acc(b"'\xff\x00\n'"));
    assert!(live(b"'it''") && !acc(b"'it''"));
    assert!(live(b"'it'") && acc(b"'it'"));
    assert_eq!(d.scan(START, b"'it's"), DEAD);
    assert_eq!(d.scan(START, b"x"), DEAD);
}

#[test]
fn number_with_exponent() {
    let pat = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?";
    let d = UnionDfa::build(&[pat.to_string()]).unwrap();
    let st = |w: &[u8]| d.scan(START, w);
    for w in [
        &b"1"[..],
        b"12.5",
        b"1.",
        b".5",
        b"1e9",
        b"1.5E-10",
        b"3e+0",
    ] {
        assert!(d.is_accept(st(w), 0), "{:?}", String::from_utf8_lossy(w));
    }
    for w in [&b"1e"[..], b"1e+", b"."] {
        let s = st(w);
        assert!(d.is_live(s, 0) && !d.is_accept(s, 0), "{w:?}");
    }
    for w in [&b"1e+-"[..], b"1..", b"e1", b"1e5."] {
        assert_eq!(st(w), DEAD, "{w:?}");
    }
}

#[test]
fn dead_transitions_are_absorbing() {
    let d = UnionDfa::build(&SQL.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    for b in 0..=255u8 {
        assert_eq!(d.next(DEAD, b), DEAD);
    }
    // every non-dead state has some live pattern, and every state is reachable and in range
    for s in 1..d.n_states() as u32 {
        assert!(
            !d.live_patterns(s).is_empty(),
            "state {s} is a hidden dead state"
        );
        for b in 0..=255u8 {
            assert!((d.next(s, b) as usize) < d.n_states());
        }
    }
    // accept implies live
    for s in 0..d.n_states() as u32 {
        for p in d.accepting(s) {
            assert!(d.is_live(s, p));
        }
    }
}

#[test]
fn exhaustive_small_alphabet_with_bounded_extensions() {
    // Over Σ = {a, b, '} and these patterns, every live prefix completes within 3 bytes of Σ,
    // so live can be brute-forced with the meta regex alone.
    let pats = [r"a|ab", r"(?:ab)+", r"'(?:[^']|'')*'", r"a+b?", r"b'b"];
    let sigma = [b'a', b'b', b'\''];
    let metas: Vec<Regex> = pats.iter().map(|p| full_match_regex(p)).collect();
    let d = UnionDfa::build(&pats.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let words = |max: usize| {
        let mut all: Vec<Vec<u8>> = vec![vec![]];
        let mut frontier: Vec<Vec<u8>> = vec![vec![]];
        for _ in 0..max {
            let mut next = Vec::new();
            for w in &frontier {
                for &c in &sigma {
                    let mut v = w.clone();
                    v.push(c);
                    next.push(v);
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    };
    let exts = words(3);
    for w in words(5) {
        let s = d.scan(START, &w);
        for (p, meta) in metas.iter().enumerate() {
            assert_eq!(
                d.is_accept(s, p),
                meta.is_match(Input::new(&w)),
                "{p} {w:?}"
            );
            let live = exts.iter().any(|e| {
                let mut v = w.clone();
                v.extend_from_slice(e);
                meta.is_match(Input::new(&v))
            });
            assert_eq!(d.is_live(s, p), live, "live {p} {w:?}");
        }
    }
}
