//! Class tables against the trie walk (the oracle): for every start node with a subtree,
//! every frame of the fixtures, and many allowed sets (stop bits and lexicons included),
//! a table walk that answers must give exactly the walk's ids, id count and residue (DFS
//! order); it may only decline when A, the ignored set or a stop bit touches a
//! lexicon-restricted terminal. Several vocabularies: a hand-written one with SQL-ish
//! tokens and random ones (leading spaces, quotes, digits, punctuation) from fixed seeds.

use std::collections::BTreeMap;

use grid_sql_core::classes::{ClassTable, TableCache, TableKey, MIN_TABLE_SUBTREE, NO_LA};
use grid_sql_core::lexer::{UnionDfa, DEAD, START};
use grid_sql_core::walk::{CiWords, Frame, Lexicon, ScanTables, TrieArrays, Walker};

// Terminal ids = indices; resolution order = index order (keywords before NAME).
const PATTERNS: &[&str] = &[
    "(?i:select)",            // 0
    "(?i:from)",              // 1
    "[A-Za-z_][A-Za-z0-9_]*", // 2 NAME (lexicon-restricted in some tables)
    "[0-9]+(\\.[0-9]+)?",     // 3 NUMBER ("1." is not accepting: last accept inside)
    "[ \t\n]+",               // 4 WS (ignored)
    ",",                      // 5
    "\\*",                    // 6
    "'([^'\\\\]|\\\\.)*'",    // 7 STRING
    "\"[^\"]+\"",             // 8 QNAME (lexicon-restricted in some tables)
    "<=|<|=|<>",              // 9
    "--[^\n]*\n",             // 10 COMMENT (ignored)
    "-",                      // 11 MINUS (a prefix of COMMENT)
    "\\(|\\)",                // 12
    "\\.",                    // 13
];
const N_TERMS: u32 = PATTERNS.len() as u32;
const IGNORED: &[u32] = &[4, 10];

fn dfa() -> UnionDfa {
    let pats: Vec<String> = PATTERNS.iter().map(|s| s.to_string()).collect();
    UnionDfa::build(&pats).unwrap()
}

fn tables(lexicon: bool, ws_first_is_name: bool) -> ScanTables {
    let dfa = dfa();
    let nw = dfa.n_words();
    // ws_first_is_name: a resolution order where NAME precedes WS (WS munches are then
    // not transparent in states where both accept; none here, so it only reorders)
    let mut order: Vec<u32> = (0..N_TERMS).collect();
    if ws_first_is_name {
        order.swap(2, 4);
    }
    let cands = (0..dfa.n_states() as u32)
        .map(|s| {
            order
                .iter()
                .copied()
                .filter(|&t| dfa.is_accept(s, t as usize))
                .collect()
        })
        .collect();
    let mut ign = vec![0u64; nw];
    for &t in IGNORED {
        ign[t as usize / 64] |= 1 << (t % 64);
    }
    let lex = if lexicon {
        vec![
            (
                2,
                Lexicon::new(
                    [b"Customer".to_vec(), b"city".to_vec(), b"c".to_vec()],
                    true,
                ),
            ),
            (8, Lexicon::new([b"\"Odd one\"".to_vec()], false)),
        ]
    } else {
        vec![]
    };
    ScanTables::new(
        dfa.trans().to_vec(),
        dfa.accept_words(),
        dfa.live_words().to_vec(),
        nw,
        cands,
        &ign,
        lex,
    )
    .unwrap()
}

/// Preorder trie arrays from (spelling, id) pairs, as `TokenTrie.build` lays them out.
fn trie(tokens: &[(Vec<u8>, i32)]) -> TrieArrays {
    let mut kids: BTreeMap<Vec<u8>, Vec<i32>> = BTreeMap::new();
    kids.insert(Vec::new(), Vec::new());
    for (s, id) in tokens {
        for i in 1..s.len() {
            kids.entry(s[..i].to_vec()).or_default();
        }
        kids.entry(s.clone()).or_default().push(*id);
    }
    // BTreeMap order over byte strings is preorder with children by byte
    let keys: Vec<&Vec<u8>> = kids.keys().collect();
    let n = keys.len();
    let (mut edge, mut depth, mut size) = (vec![0u8; n], vec![0u16; n], vec![1u32; n]);
    let mut stack: Vec<usize> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        edge[i] = k.last().copied().unwrap_or(0);
        depth[i] = k.len() as u16;
        while stack.last().is_some_and(|&p| !k.starts_with(keys[p])) {
            stack.pop();
        }
        for &p in &stack {
            size[p] += 1;
        }
        stack.push(i);
    }
    let mut off = vec![0u32];
    let mut alias = vec![];
    for k in &keys {
        let mut ids = kids[*k].clone();
        ids.sort();
        alias.extend_from_slice(&ids);
        off.push(alias.len() as u32);
    }
    TrieArrays::new(edge, depth, size, off, alias).unwrap()
}

fn hand_vocab() -> Vec<Vec<u8>> {
    let alphabet: &[u8] = b"sSeflcCtmu o,*'\"1<=-\nrx_.()\\";
    let mut out: Vec<Vec<u8>> = vec![];
    for &a in alphabet {
        out.push(vec![a]);
        for &b in alphabet {
            out.push(vec![a, b]);
        }
    }
    for w in [
        &b"select"[..],
        b" select",
        b" FROM",
        b"Customer",
        b" Customer",
        b"city",
        b" c",
        b"c,",
        b"'abc'",
        b"'a\\'b",
        b"\"Odd",
        b" one\"",
        b"-- hi\n",
        b"--",
        b"1.5",
        b"1.",
        b".5 ",
        b"  c",
        b"c c",
        b"1,2",
        b"x) ",
        b" -- x\n s",
        b"' ,",
    ] {
        out.push(w.to_vec());
    }
    out
}

fn random_vocab(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let alphabet: &[u8] = b"sSelcty_x01 ,*'\"<=->\n.()\\";
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut out = Vec::new();
    for _ in 0..n {
        let len = 1 + next() % 6;
        let mut t: Vec<u8> = (0..len)
            .map(|_| alphabet[next() % alphabet.len()])
            .collect();
        if next() % 3 == 0 {
            t.insert(0, b' ');
        }
        out.push(t);
    }
    out
}

/// Frames after scanning `p` from the start as one pending lexeme (None if it dies).
fn frame_of(d: &UnionDfa, p: &[u8]) -> Option<Frame> {
    let (mut s, mut la_len, mut la_st) = (START, -1i64, DEAD);
    for (i, &b) in p.iter().enumerate() {
        s = d.next(s, b);
        if s == DEAD {
            return None;
        }
        if d.any_accept(s) {
            la_len = i as i64 + 1;
            la_st = s;
        }
    }
    Some(Frame {
        dfa: s,
        rem: p.to_vec(),
        la_len,
        la_state: la_st,
    })
}

fn allowed_sets(seed: u64) -> Vec<Vec<u64>> {
    let all = (1u64 << N_TERMS) - 1;
    let mut out = vec![
        vec![all],
        vec![0],
        vec![1 | 2],
        vec![1 << 2 | 1 << 3 | 1 << 5],
    ];
    let mut x = seed;
    for i in 0..14 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let a = (x >> 20) & all;
        if i % 3 == 0 {
            // stop bits (word 1): reserved keywords blocked
            out.push(vec![a, (x >> 7) & 0b11]);
        } else {
            out.push(vec![a]);
        }
    }
    out
}

fn ids_of(words: &CiWords) -> Vec<i32> {
    let mut ids = Vec::new();
    for (w, word) in words.nonzero() {
        for b in 0..32 {
            if (word >> b) & 1 == 1 {
                ids.push((w * 32 + b) as i32);
            }
        }
    }
    ids
}

fn check_vocab(tokens: &[Vec<u8>], seed: u64) -> (usize, usize, usize) {
    let d = dfa();
    let toks: Vec<(Vec<u8>, i32)> = tokens
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), (i as i32) * 2 + 1))
        .collect();
    let tr = trie(&toks);
    let n_words = (2 * toks.len() + 2).div_ceil(32);
    let prefixes: &[&[u8]] = &[
        b"", b"s", b"sel", b"select", b"c", b"ci", b"1", b"1.", b"1.5", b"'a", b"'a\\", b"<", b" ",
        b"-", b"--x", b"\"O", b"\"x\"", b"x", b"FROM",
    ];
    let (mut answered, mut declined, mut nonempty) = (0, 0, 0);
    for (lexicon, reorder) in [(false, false), (true, false), (false, true)] {
        let walker = Walker::new(tables(lexicon, reorder), tr.clone());
        let starts: Vec<usize> = (0..tr.n_nodes()).filter(|&n| tr.size(n) > 1).collect();
        for p in prefixes {
            let Some(f) = frame_of(&d, p) else { continue };
            for &node0 in &starts {
                let Some(key) = TableKey::of(node0, &f) else {
                    assert!(f.la_len > 0 && (f.la_len as usize) < f.rem.len());
                    continue;
                };
                assert_eq!(key.la0 == NO_LA, f.la_len <= 0);
                let table = ClassTable::build(&walker, key, n_words).unwrap();
                for a in allowed_sets(seed ^ node0 as u64) {
                    let want = walker.walk(node0, &f, &a).unwrap();
                    match table.walk_words(&walker, &f, &a).unwrap() {
                        None => {
                            assert!(lexicon, "declined without a lexicon");
                            declined += 1;
                        }
                        Some(got) => {
                            let ids = ids_of(&got.words);
                            assert_eq!(
                                ids, want.ci_ids,
                                "node {node0} frame {f:?} allowed {a:?} lexicon {lexicon}"
                            );
                            assert_eq!(got.n_ids, want.ci_ids.len());
                            assert_eq!(
                                got.residue, want.residue,
                                "node {node0} frame {f:?} allowed {a:?}"
                            );
                            answered += 1;
                            nonempty += usize::from(!ids.is_empty() || !want.residue.is_empty());
                        }
                    }
                }
            }
        }
    }
    (answered, declined, nonempty)
}

#[test]
fn class_table_equals_the_walk_on_a_hand_vocabulary() {
    let (answered, declined, nonempty) = check_vocab(&hand_vocab(), 7);
    assert!(
        answered > 10_000 && declined > 100 && nonempty > 5_000,
        "{answered} {declined} {nonempty}"
    );
}

#[test]
fn class_table_equals_the_walk_on_random_vocabularies() {
    for seed in [1u64, 2, 3] {
        let (answered, _, nonempty) = check_vocab(&random_vocab(seed, 400), seed);
        assert!(
            answered > 1_000 && nonempty > 500,
            "{seed}: {answered} {nonempty}"
        );
    }
}

#[test]
fn table_refuses_a_frame_of_another_key() {
    let toks: Vec<(Vec<u8>, i32)> = hand_vocab()
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, i as i32))
        .collect();
    let tr = trie(&toks);
    let walker = Walker::new(tables(false, false), tr);
    let d = dfa();
    let f = frame_of(&d, b"sel").unwrap();
    let key = TableKey::of(0, &f).unwrap();
    let t = ClassTable::build(&walker, key, 64).unwrap();
    assert!(t.n_classes() > 0 && t.n_frontier() > 0);
    let g = frame_of(&d, b"1").unwrap();
    assert!(t.walk_words(&walker, &g, &[u64::MAX]).is_err());
    // a last accept inside the pending lexeme has no key
    assert!(TableKey::of(0, &frame_of(&d, b"1.").unwrap()).is_none());
    // out-of-range keys are errors, not panics
    let bad = TableKey {
        node0: 1 << 30,
        ..key
    };
    assert!(ClassTable::build(&walker, bad, 64).is_err());
}

#[test]
fn table_cache_builds_at_the_second_walk_and_equals_the_walk() {
    // a trie large enough for a table at the root (MIN_TABLE_SUBTREE nodes)
    let toks: Vec<(Vec<u8>, i32)> = random_vocab(11, 6000)
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, i as i32))
        .collect();
    let tr = trie(&toks);
    assert!(tr.size(0) >= MIN_TABLE_SUBTREE);
    let n_words = toks.len().div_ceil(32);
    let d = dfa();
    for lexicon in [false, true] {
        let walker = Walker::new(tables(lexicon, false), tr.clone());
        let mut cache = TableCache::new(n_words);
        let frames: Vec<Frame> = [&b""[..], b"sel", b"1", b"'a", b"x"]
            .iter()
            .filter_map(|p| frame_of(&d, p))
            .collect();
        for round in 0..3 {
            for f in &frames {
                for a in allowed_sets(round) {
                    let want = walker.walk_words(0, f, &a, n_words).unwrap();
                    let got = cache.walk(&walker, 0, f, &a, n_words).unwrap();
                    assert_eq!(ids_of(&got.words), ids_of(&want.words), "{f:?} {a:?}");
                    assert_eq!(got.n_ids, want.n_ids);
                    assert_eq!(got.residue, want.residue);
                }
            }
        }
        assert_eq!(
            cache.built as usize,
            frames.len(),
            "one table per key, built once"
        );
        assert!(cache.answered > 0 && cache.bytes() > 0);
        // a small subtree never gets a table
        let small = (1..tr.n_nodes()).find(|&n| tr.size(n) > 1).unwrap();
        assert!(tr.size(small) < MIN_TABLE_SUBTREE);
        let f = &frames[0];
        let a = vec![u64::MAX];
        for _ in 0..3 {
            assert!(cache.walk_words(&walker, small, f, &a).unwrap().is_none());
        }
    }
}
