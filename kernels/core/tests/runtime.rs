//! The parser runtime against independent references, on a small SQL-like grammar with
//! tables from `lalr::build` and a lexer from `UnionDfa::build`:
//! - the grouped allowed-set simulation equals one reduce-chain simulation per terminal;
//! - the stacks reached by the incremental advance equal a plain LALR driver's over the
//!   same terminals (a `Vec` of states, no arena);
//! - feeding bytes in any chunking gives the same configuration (interned node ids);
//! - the configuration hash equals Python's `mix_hash` and chains from the root.
//!
//! Parity with the Python runtime on the real dialect grammars is in `tests/kernels/`.

use std::sync::Arc;

use grid_sql_core::lalr::{self, Production};
use grid_sql_core::lexer::UnionDfa;
use grid_sql_core::runtime::{mix_hash, NodeId, ParseTables, ParserRuntime, ROOT};
use grid_sql_core::walk::{Frame, Lexicon, ScanTables};

// terminals
const SELECT: u32 = 0;
const FROM: u32 = 1;
const ID: u32 = 2;
const NUM: u32 = 3;
const COMMA: u32 = 4;
const LP: u32 = 5;
const RP: u32 = 6;
const WS: u32 = 7;
const N_T: usize = 8;
const END: u32 = N_T as u32;
// nonterminals (symbol id = N_T + 1 + k)
const START_NT: u32 = 0;
const STMT: u32 = 1;
const LIST: u32 = 2;
const EXPR: u32 = 3;

fn nt(k: u32) -> u32 {
    N_T as u32 + 1 + k
}

fn patterns() -> Vec<String> {
    [
        "(?i:select)",
        "(?i:from)",
        "[A-Za-z_][A-Za-z0-9_]*",
        "[0-9]+",
        ",",
        r"\(",
        r"\)",
        " +",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn rules() -> Vec<Production> {
    let p = |lhs: u32, rhs: Vec<u32>| Production { lhs, rhs };
    vec![
        p(START_NT, vec![nt(STMT)]),
        p(STMT, vec![SELECT, nt(LIST)]),
        p(STMT, vec![SELECT, nt(LIST), FROM, ID]),
        p(LIST, vec![nt(EXPR)]),
        p(LIST, vec![nt(LIST), COMMA, nt(EXPR)]),
        p(EXPR, vec![ID]),
        p(EXPR, vec![NUM]),
        p(EXPR, vec![LP, nt(EXPR), RP]),
    ]
}

struct Fixture {
    tables: Arc<ParseTables>,
    scan: Arc<ScanTables>,
    lalr: lalr::LalrTables,
}

fn fixture(lexicon: Option<Vec<&[u8]>>) -> Fixture {
    let prods = rules();
    let t = lalr::build(N_T, 4, &prods, START_NT).unwrap();
    let tables = ParseTables::new(
        N_T,
        4,
        t.action.clone(),
        t.goto.clone(),
        prods.iter().map(|p| p.lhs).collect(),
        prods.iter().map(|p| p.rhs.len() as u32).collect(),
        t.start_state,
        t.end_state,
    )
    .unwrap();
    let dfa = UnionDfa::build(&patterns()).unwrap();
    // resolution order: by terminal id (keywords before ID)
    let candidates = (0..dfa.n_states() as u32)
        .map(|s| dfa.accepting(s).into_iter().map(|p| p as u32).collect())
        .collect();
    let lex = match lexicon {
        None => vec![],
        Some(words) => vec![(
            ID,
            Lexicon::new(words.into_iter().map(|w| w.to_vec()), true),
        )],
    };
    let scan = ScanTables::new(
        dfa.trans().to_vec(),
        dfa.accept_words(),
        dfa.live_words().to_vec(),
        dfa.n_words(),
        candidates,
        &[1u64 << WS],
        lex,
    )
    .unwrap();
    Fixture {
        tables: Arc::new(tables),
        scan: Arc::new(scan),
        lalr: t,
    }
}

fn runtime(f: &Fixture) -> ParserRuntime {
    ParserRuntime::new(Arc::clone(&f.tables), Arc::clone(&f.scan)).unwrap()
}

/// A plain LALR driver: the states after feeding `terms` (None if refused).
fn reference_states(f: &Fixture, terms: &[u32]) -> Option<Vec<u32>> {
    let cols = N_T + 1;
    let prods = rules();
    let mut stack = vec![f.lalr.start_state];
    for &t in terms {
        loop {
            let a = f.lalr.action[*stack.last().unwrap() as usize * cols + t as usize];
            if a > 0 {
                stack.push((a - 1) as u32);
                break;
            }
            if a == 0 {
                return None;
            }
            let r = &prods[(-a - 1) as usize];
            stack.truncate(stack.len() - r.rhs.len());
            let g = f.lalr.goto[*stack.last().unwrap() as usize * 4 + r.lhs as usize];
            stack.push(g as u32);
        }
    }
    Some(stack)
}

fn bits(words: &[u64]) -> Vec<u32> {
    (0..(words.len() * 64) as u32)
        .filter(|&t| (words[t as usize / 64] >> (t % 64)) & 1 == 1)
        .collect()
}

const INPUTS: &[&[u8]] = &[
    b"select a",
    b"select a, b from t",
    b"SELECT (1), ((x)) FROM tbl",
    b"select  a ,  2 ,(  b  )",
    b"select fromage from t",
    b"select a from",
    b"select select",
    b"select (a",
    b"select a b",
    b"select 1x",
];

#[test]
fn mix_hash_matches_python() {
    // grid_sql.parser.stack.mix_hash
    assert_eq!(mix_hash(0, 5, 7), 0x106f16ec5da8b6aa);
    assert_eq!(
        mix_hash(0x0123456789abcdef, 4000000000, 3),
        0xe2e2f23327c338d4
    );
}

#[test]
fn grouped_allowed_set_equals_per_terminal_simulation() {
    let f = fixture(None);
    let mut rt = runtime(&f);
    let mut seen: Vec<NodeId> = vec![ROOT];
    for input in INPUTS {
        let (mut node, mut scan) = (ROOT, Frame::start());
        for &b in *input {
            match rt.advance(node, &scan, &[b]).unwrap() {
                Some((n, s)) => {
                    node = n;
                    scan = s;
                    seen.push(n);
                }
                None => break,
            }
        }
    }
    let n_nodes = rt.n_nodes() as NodeId;
    assert!(n_nodes > 10, "the inputs reach {n_nodes} nodes");
    for id in 0..n_nodes {
        let grouped = bits(rt.allowed(id).unwrap());
        let single: Vec<u32> = (0..N_T as u32)
            .filter(|&t| rt.simulate(id, t).unwrap())
            .collect();
        assert_eq!(grouped, single, "node {id} states {:?}", rt.states(id));
    }
}

#[test]
fn stacks_equal_a_plain_lalr_driver() {
    let f = fixture(None);
    let mut rt = runtime(&f);
    // terminal sequences, including refused ones
    let seqs: &[&[u32]] = &[
        &[SELECT, ID],
        &[SELECT, ID, COMMA, NUM, FROM, ID],
        &[SELECT, LP, LP, ID, RP, RP, COMMA, ID],
        &[SELECT, FROM],
        &[SELECT, ID, ID],
        &[SELECT, LP, ID, COMMA],
    ];
    for seq in seqs {
        let mut node = ROOT;
        for (k, &t) in seq.iter().enumerate() {
            let want = reference_states(&f, &seq[..=k]);
            let shiftable = bits(rt.allowed(node).unwrap()).contains(&t);
            assert_eq!(shiftable, want.is_some(), "{seq:?} at {k}");
            if !shiftable {
                assert!(rt.shift(node, t).is_err() || want.is_none());
                break;
            }
            node = rt.shift(node, t).unwrap();
            assert_eq!(Some(rt.states(node)), want, "{seq:?} at {k}");
        }
    }
}

#[test]
fn chunking_does_not_change_the_configuration() {
    let f = fixture(None);
    let mut rt = runtime(&f);
    for input in INPUTS {
        let whole = rt.advance(ROOT, &Frame::start(), input).unwrap();
        let mut cur = Some((ROOT, Frame::start()));
        for &b in *input {
            cur = match cur {
                Some((n, s)) => rt.advance(n, &s, &[b]).unwrap(),
                None => None,
            };
        }
        assert_eq!(whole, cur, "{}", String::from_utf8_lossy(input));
        // splitting in two at every point
        for cut in 0..=input.len() {
            let two = rt
                .advance(ROOT, &Frame::start(), &input[..cut])
                .unwrap()
                .and_then(|(n, s)| rt.advance(n, &s, &input[cut..]).unwrap());
            assert_eq!(
                whole,
                two,
                "{} cut at {cut}",
                String::from_utf8_lossy(input)
            );
        }
    }
}

#[test]
fn verdicts_on_the_inputs() {
    let f = fixture(None);
    let mut rt = runtime(&f);
    let mut verdict = |s: &[u8]| -> (bool, bool) {
        match rt.advance(ROOT, &Frame::start(), s).unwrap() {
            None => (false, false),
            Some((n, f)) => (true, rt.eos_allowed(n, &f).unwrap()),
        }
    };
    assert_eq!(verdict(b"select a"), (true, true));
    assert_eq!(verdict(b"select a, b from t"), (true, true));
    assert_eq!(verdict(b"select fromage from t"), (true, true)); // maximal munch
    assert_eq!(verdict(b"select a from"), (true, false));
    assert_eq!(verdict(b"select a,"), (true, false));
    assert_eq!(verdict(b"select (a"), (true, false));
    assert_eq!(verdict(b"select select"), (true, true)); // contextual: an ID here
    assert_eq!(verdict(b"select a b"), (false, false));
    assert_eq!(verdict(b"select 1x"), (false, false)); // NUM then ID: not in the grammar
    assert_eq!(verdict(b"sel"), (true, false)); // a live keyword prefix
    assert_eq!(verdict(b"x"), (false, false)); // ID where only SELECT may start
}

#[test]
fn lexicon_restricts_identifiers() {
    let f = fixture(Some(vec![b"alpha", b"beta"]));
    let mut rt = runtime(&f);
    let mut ok = |s: &[u8]| rt.advance(ROOT, &Frame::start(), s).unwrap().is_some();
    assert!(ok(b"select alpha, BETA"));
    assert!(ok(b"select alp")); // a live prefix of a word
    assert!(!ok(b"select gamma"));
    assert!(!ok(b"select alphax"));
}

#[test]
fn nodes_are_interned_and_hashes_chain() {
    let f = fixture(None);
    let mut rt = runtime(&f);
    let a = rt
        .advance(ROOT, &Frame::start(), b"select a, b ")
        .unwrap()
        .unwrap();
    let n = rt.n_nodes();
    let b = rt
        .advance(ROOT, &Frame::start(), b"select a, b ")
        .unwrap()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(rt.n_nodes(), n, "no new node for an equal stack");
    let mut id = a.0;
    while let Some(p) = rt.parent(id) {
        assert_eq!(
            rt.hash(id),
            mix_hash(rt.hash(p), rt.state(id), rt.symbol(id))
        );
        assert_eq!(rt.depth(id), rt.depth(p) + 1);
        id = p;
    }
    assert_eq!((id, rt.hash(id)), (ROOT, 0));
    let done = rt
        .advance(ROOT, &Frame::start(), b"select a ")
        .unwrap()
        .unwrap()
        .0;
    assert!(rt.accepts_end(done).unwrap());
    assert!(!rt.simulate(ROOT, END).unwrap());
}

#[test]
fn hashes_on_demand_equal_stored_ones() {
    let f = fixture(None);
    let mut eager = runtime(&f);
    let mut lazy = runtime(&f).without_hashing();
    let text = b"select a, b ";
    let e = eager.advance(ROOT, &Frame::start(), text).unwrap().unwrap();
    let l = lazy.advance(ROOT, &Frame::start(), text).unwrap().unwrap();
    let (mut x, mut y) = (e.0, l.0);
    loop {
        assert_eq!(eager.state(x), lazy.state(y));
        assert_eq!(eager.hash(x), lazy.hash(y));
        match (eager.parent(x), lazy.parent(y)) {
            (Some(p), Some(q)) => (x, y) = (p, q),
            (None, None) => break,
            _ => panic!("stacks of different depth"),
        }
    }
    assert_ne!(lazy.hash(l.0), 0);
    assert_eq!(lazy.fresh().hash(ROOT), 0);
}

#[test]
fn bad_tables_are_refused() {
    let f = fixture(None);
    let t = &f.lalr;
    let ok = |action: Vec<i32>, goto: Vec<i32>| {
        ParseTables::new(
            N_T,
            4,
            action,
            goto,
            vec![0; 8],
            vec![1; 8],
            t.start_state,
            t.end_state,
        )
    };
    assert!(ok(t.action.clone(), t.goto.clone()).is_ok());
    let mut bad = t.action.clone();
    bad[0] = 10_000; // shift out of range
    assert!(ok(bad, t.goto.clone()).is_err());
    let mut bad = t.action.clone();
    bad[0] = -100; // reduce by a rule that does not exist
    assert!(ok(bad, t.goto.clone()).is_err());
    assert!(ok(t.action[1..].to_vec(), t.goto.clone()).is_err());
}
