//! The trie walk against a per-token restatement of the same semantics.
//!
//! The reference below scans every token's spelling on its own (no trie, no shared frames,
//! no subtree skipping) with the walk's rules: a dead scan rejects, a forced emission of a
//! real terminal records a CD entry at that prefix's trie node, a prefix that is neither
//! live nor recoverable stops the descent, and a live end admits the token's whole alias
//! class. The walk must produce the same sorted ids and the same residue in DFS order.
//! Tables come from a real union DFA (`UnionDfa::build`) of a small SQL-like terminal set.

use std::collections::BTreeMap;
use std::sync::Arc;

use grid_sql_core::lexer::{UnionDfa, DEAD, START};
use grid_sql_core::walk::{
    fold_lexeme, or_ids_into_words, CdEntry, CiWords, Frame, Lexicon, Resolved, ScanTables,
    TrieArrays, Walker,
};

// Terminal ids = indices; resolution order = keywords first, then the rest by index.
const PATTERNS: &[&str] = &[
    "(?i:select)",            // 0 SELECT
    "(?i:from)",              // 1 FROM
    "[A-Za-z_][A-Za-z0-9_]*", // 2 NAME (lexicon-restricted in some tests)
    "[0-9]+",                 // 3 NUMBER
    "[ \t\n]+",               // 4 WS (ignored)
    ",",                      // 5 COMMA
    "\\*",                    // 6 STAR
    "'[^']*'",                // 7 STRING
    "\"[^\"]+\"",             // 8 QNAME (lexicon-restricted in some tests)
    "<=|<|=",                 // 9 CMP
    "--[^\n]*\n",             // 10 COMMENT (ignored)
];
const IGNORED: &[u32] = &[4, 10];

fn tables(lexicon: bool) -> ScanTables {
    let pats: Vec<String> = PATTERNS.iter().map(|s| s.to_string()).collect();
    let dfa = UnionDfa::build(&pats).unwrap();
    let nw = dfa.n_words();
    let order: Vec<u32> = (0..PATTERNS.len() as u32).collect();
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
                    [
                        b"Customer".to_vec(),
                        b"city".to_vec(),
                        b"c".to_vec(),
                        b"\"x\"".to_vec(),
                    ],
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
fn trie(tokens: &[(Vec<u8>, i32)]) -> (TrieArrays, Vec<usize>) {
    #[derive(Default)]
    struct N {
        kids: BTreeMap<u8, N>,
        ids: Vec<i32>,
        slot: usize,
    }
    let mut root = N::default();
    for (s, id) in tokens {
        let mut n = &mut root;
        for &b in s {
            n = n.kids.entry(b).or_default();
        }
        n.ids.push(*id);
    }
    let (mut edge, mut depth, mut size, mut ids_per) = (vec![], vec![], vec![], vec![]);
    fn dfs(
        n: &mut N,
        b: u8,
        d: u16,
        e: &mut Vec<u8>,
        dp: &mut Vec<u16>,
        sz: &mut Vec<u32>,
        ip: &mut Vec<Vec<i32>>,
    ) -> u32 {
        let me = e.len();
        n.slot = me;
        e.push(b);
        dp.push(d);
        sz.push(0);
        n.ids.sort();
        ip.push(n.ids.clone());
        let mut s = 1;
        for (&c, k) in n.kids.iter_mut() {
            s += dfs(k, c, d + 1, e, dp, sz, ip);
        }
        sz[me] = s;
        s
    }
    dfs(
        &mut root,
        0,
        0,
        &mut edge,
        &mut depth,
        &mut size,
        &mut ids_per,
    );
    let mut off = vec![0u32];
    let mut alias = vec![];
    for ids in &ids_per {
        alias.extend_from_slice(ids);
        off.push(alias.len() as u32);
    }
    // node of each token (by walking again)
    let nodes = tokens
        .iter()
        .map(|(s, _)| {
            let mut n = &root;
            for b in s {
                n = &n.kids[b];
            }
            n.slot
        })
        .collect();
    (
        TrieArrays::new(edge, depth, size, off, alias).unwrap(),
        nodes,
    )
}

fn vocab() -> Vec<(Vec<u8>, i32)> {
    let alphabet: &[u8] = b"sSeflcCtmu o,*'\"1<=-\nrx_";
    let mut out: Vec<Vec<u8>> = vec![];
    for &a in alphabet {
        out.push(vec![a]);
        for &b in alphabet {
            out.push(vec![a, b]);
        }
    }
    for w in [
        &b"select"[..],
        b"SELECT",
        b" select",
        b"from",
        b" FROM",
        b"Customer",
        b" Customer",
        b"city",
        b"cit",
        b"ci",
        b" c",
        b"c,",
        b"'abc'",
        b"'ab",
        b"\"Odd",
        b" one\"",
        b"\"x\"",
        b"-- hi\n",
        b"--",
        b"<=",
        b"12",
        b"1 ",
        b", ",
        b"* ",
        b"sel",
        b"ect",
        b"Cust",
        b"omer",
        b"  ",
        b"\n\n",
        b"c c",
        b"1,2",
    ] {
        out.push(w.to_vec());
    }
    // Alias classes: some spellings twice under different ids.
    out.push(b"select".to_vec());
    out.push(b",".to_vec());
    out.iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i as i32 * 3 + 1))
        .collect()
}

enum R {
    Dead,
    Cd(u32, Vec<u8>),
    F(Frame),
}

fn step(
    sc: &ScanTables,
    f: &Frame,
    data: &[u8],
    allowed: &[u64],
    trans: &dyn Fn(u32, u8) -> u32,
    acc: &dyn Fn(u32) -> bool,
) -> R {
    let (mut dfa, mut rem, mut la_len, mut la_st) = (f.dfa, f.rem.clone(), f.la_len, f.la_state);
    let mut q = data.to_vec();
    let mut i = 0;
    while i < q.len() {
        let s2 = trans(dfa, q[i]);
        if s2 != DEAD {
            dfa = s2;
            rem.push(q[i]);
            i += 1;
            if acc(s2) {
                la_len = rem.len() as i64;
                la_st = s2;
            }
            continue;
        }
        if la_len <= 0 {
            return R::Dead;
        }
        let la = la_len as usize;
        let ch = sc.resolve(la_st, &rem[..la], allowed);
        let mut rest = rem[la..].to_vec();
        rest.extend_from_slice(&q[i..]);
        match ch {
            None => return R::Dead,
            Some(Resolved::Terminal(t)) => return R::Cd(t, rest),
            Some(Resolved::Ignored) => {
                q = rest;
                i = 0;
                dfa = START;
                rem.clear();
                la_len = -1;
                la_st = DEAD;
            }
        }
    }
    R::F(Frame {
        dfa,
        rem,
        la_len,
        la_state: la_st,
    })
}

fn reference(
    lexicon: bool,
    toks: &[(Vec<u8>, i32)],
    tr: &TrieArrays,
    frame0: &Frame,
    allowed: &[u64],
) -> (Vec<i32>, Vec<CdEntry>) {
    let pats: Vec<String> = PATTERNS.iter().map(|s| s.to_string()).collect();
    let dfa = UnionDfa::build(&pats).unwrap();
    let sc = tables(lexicon);
    let trans = |s: u32, b: u8| dfa.next(s, b);
    let acc = |s: u32| dfa.any_accept(s);
    let mut ids = vec![];
    let mut res: BTreeMap<usize, CdEntry> = BTreeMap::new();
    // find the node of each prefix by walking the trie arrays (children sorted by byte)
    let node_of = |p: &[u8]| -> usize {
        let mut n = 0usize;
        for &b in p {
            let mut c = n + 1;
            let end = n + tr_size(tr, n);
            loop {
                assert!(c < end);
                if tr_edge(tr, c) == b {
                    break;
                }
                c += tr_size(tr, c);
            }
            n = c;
        }
        n
    };
    for (s, id) in toks {
        let mut f = frame0.clone();
        for j in 0..s.len() {
            match step(&sc, &f, &s[j..j + 1], allowed, &trans, &acc) {
                R::Dead => break,
                R::Cd(t, rq) => {
                    let n = node_of(&s[..=j]);
                    res.insert(
                        n,
                        CdEntry {
                            node: n as u32,
                            terminal: t,
                            requeue: rq,
                        },
                    );
                    break;
                }
                R::F(g) => {
                    let live = sc.pending_live(g.dfa, &g.rem, allowed);
                    if j + 1 == s.len() {
                        if live {
                            ids.push(*id);
                        }
                        break;
                    }
                    let rec = g.la_len > 0
                        && sc
                            .resolve(g.la_state, &g.rem[..g.la_len as usize], allowed)
                            .is_some();
                    if !(live || rec) {
                        break;
                    }
                    f = g;
                }
            }
        }
    }
    ids.sort();
    (ids, res.into_values().collect())
}

fn tr_size(tr: &TrieArrays, n: usize) -> usize {
    tr.size(n)
}
fn tr_edge(tr: &TrieArrays, n: usize) -> u8 {
    tr.edge(n)
}

fn bits(ts: &[u32]) -> Vec<u64> {
    let mut w = vec![0u64; 1];
    for &t in ts {
        w[t as usize / 64] |= 1 << (t % 64);
    }
    w
}

fn frames_from(prefixes: &[&[u8]], lexicon: bool) -> Vec<Frame> {
    // Frames reached by scanning a pending lexeme from the start with everything allowed.
    let sc = tables(lexicon);
    let pats: Vec<String> = PATTERNS.iter().map(|s| s.to_string()).collect();
    let dfa = UnionDfa::build(&pats).unwrap();
    let all = bits(&(0..PATTERNS.len() as u32).collect::<Vec<_>>());
    prefixes
        .iter()
        .filter_map(|p| {
            match step(
                &sc,
                &Frame::start(),
                p,
                &all,
                &|s, b| dfa.next(s, b),
                &|s| dfa.any_accept(s),
            ) {
                R::F(f) => Some(f),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn walk_equals_per_token_reference() {
    let toks = vocab();
    let (tr, _) = trie(&toks);
    let allowed_sets: Vec<Vec<u64>> = vec![
        bits(&[0]),
        bits(&[2]),
        bits(&[1, 5]),
        bits(&[2, 3, 6, 7, 8]),
        bits(&[9]),
        bits(&(0..11).collect::<Vec<_>>()),
        bits(&[]),
    ];
    let mut checked = 0;
    let mut nonempty_residue = 0;
    for lexicon in [false, true] {
        let walker = Walker::new(tables(lexicon), tr.clone());
        let frames = frames_from(
            &[
                b"", b"s", b"sel", b"C", b"ci", b"1", b"'a", b"\"Od", b"<", b"-", b" ",
            ],
            lexicon,
        );
        assert!(frames.len() >= 10);
        for f in &frames {
            for a in &allowed_sets {
                let out = walker.walk(0, f, a).unwrap();
                let (ids, res) = reference(lexicon, &toks, &tr, f, a);
                assert_eq!(
                    out.ci_ids, ids,
                    "frame {f:?} allowed {a:?} lexicon {lexicon}"
                );
                assert_eq!(
                    out.residue, res,
                    "frame {f:?} allowed {a:?} lexicon {lexicon}"
                );
                assert!(out.visited as usize <= tr.n_nodes());
                checked += 1;
                nonempty_residue += usize::from(!res.is_empty());
            }
        }
    }
    assert!(
        checked > 100 && nonempty_residue > 20,
        "{checked} {nonempty_residue}"
    );
}

#[test]
fn sub_walk_below_a_node_only_sees_that_subtree() {
    let toks = vocab();
    let (tr, nodes) = trie(&toks);
    let walker = Walker::new(tables(false), tr.clone());
    let all = bits(&(0..11).collect::<Vec<_>>());
    // node of "se": its subtree holds "sel..." tokens only
    let i = toks.iter().position(|(s, _)| s == b"se").unwrap();
    let out = walker
        .walk(nodes[i], &frames_from(&[b"se"], false)[0], &all)
        .unwrap();
    let want: Vec<i32> = {
        let mut v: Vec<i32> = toks
            .iter()
            .filter(|(s, _)| {
                s.starts_with(b"se") && s.len() > 2 && s.iter().all(|c| c.is_ascii_alphanumeric())
            })
            .map(|(_, id)| *id)
            .collect();
        v.sort();
        v
    };
    assert_eq!(out.ci_ids, want);
}

#[test]
fn lexicon_folds_bare_case_only() {
    assert_eq!(fold_lexeme(b"CusTomer", true), b"customer");
    assert_eq!(fold_lexeme(b"\"CusTomer\"", true), b"\"CusTomer\"");
    assert_eq!(fold_lexeme(b"`A`", true), b"`A`");
    assert_eq!(fold_lexeme(b"[A]", true), b"[A]");
    assert_eq!(fold_lexeme(b"CusTomer", false), b"CusTomer");
    let lex = Lexicon::new([b"Customer".to_vec(), b"\"Odd\"".to_vec()], true);
    assert!(lex.admits(b"CUSTOMER") && lex.admits(b"customer"));
    assert!(lex.admits_prefix(b"CUS") && lex.admits_prefix(b""));
    assert!(lex.admits(b"\"Odd\"") && !lex.admits(b"\"odd\""));
    assert!(lex.admits_prefix(b"\"O") && !lex.admits_prefix(b"\"o"));
    assert!(!lex.admits(b"Cust"));
    let exact = Lexicon::new([b"Customer".to_vec()], false);
    assert!(!exact.admits(b"customer") && exact.admits(b"Customer"));
    assert_eq!(lex.len(), 2);
}

#[test]
fn bad_inputs_are_errors() {
    assert!(TrieArrays::new(vec![0, 1], vec![0, 2], vec![2, 1], vec![0, 0, 0], vec![]).is_err());
    assert!(TrieArrays::new(vec![0, 1], vec![0, 1], vec![2, 1], vec![0, 1, 0], vec![5]).is_err());
    assert!(TrieArrays::new(vec![0], vec![0], vec![1], vec![0, 0], vec![]).is_ok());
    assert!(ScanTables::new(vec![0; 255], &[], vec![], 1, vec![], &[], vec![]).is_err());
    assert!(ScanTables::new(
        vec![7; 512],
        &[0, 0],
        vec![0, 0],
        1,
        vec![vec![], vec![]],
        &[],
        vec![]
    )
    .is_err());
    let toks = vocab();
    let (tr, _) = trie(&toks);
    let walker = Walker::new(tables(false), tr.clone());
    assert!(walker.walk(tr.n_nodes(), &Frame::start(), &[1]).is_err());
    let bad = Frame {
        dfa: 1 << 30,
        ..Frame::start()
    };
    assert!(walker.walk(0, &bad, &[1]).is_err());
    let mut w = vec![0u32; 2];
    or_ids_into_words(&[0, 33, 63], &mut w).unwrap();
    assert_eq!(w, vec![1, (1 << 1) | (1 << 31)]);
    assert!(or_ids_into_words(&[64], &mut w).is_err());
    assert!(or_ids_into_words(&[-1], &mut w).is_err());
}

#[test]
fn walkers_sharing_one_dfa_and_trie_equal_owned_ones() {
    // Guides of one vocabulary share the trie and grammars over one lexer share the DFA
    // (`Walker::shared`, `ScanTables::with_dfa`); the walks must not change, and walkers
    // with different lexicons over the same shared parts must stay independent.
    let toks = vocab();
    let (tr, _) = trie(&toks);
    let shared_trie = Arc::new(tr.clone());
    let plain = tables(false);
    let dfa = Arc::clone(plain.dfa());
    let with_lex = tables(true);
    let a = Walker::shared(
        ScanTables::with_dfa(Arc::clone(&dfa), &bits(IGNORED), vec![]).unwrap(),
        Arc::clone(&shared_trie),
    );
    let b = Walker::shared(
        ScanTables::with_dfa(
            Arc::clone(&dfa),
            &bits(IGNORED),
            vec![
                (
                    2,
                    Lexicon::new(
                        [
                            b"Customer".to_vec(),
                            b"city".to_vec(),
                            b"c".to_vec(),
                            b"\"x\"".to_vec(),
                        ],
                        true,
                    ),
                ),
                (8, Lexicon::new([b"\"Odd one\"".to_vec()], false)),
            ],
        )
        .unwrap(),
        Arc::clone(&shared_trie),
    );
    assert!(Arc::ptr_eq(a.trie(), b.trie()) && Arc::ptr_eq(a.scan_tables().dfa(), &dfa));
    let owned_a = Walker::new(plain, tr.clone());
    let owned_b = Walker::new(with_lex, tr.clone());
    let all = bits(&(0..11).collect::<Vec<_>>());
    let mut differ = 0;
    for f in &frames_from(&[b"", b"s", b"C", b"ci", b"\"Od", b" "], false) {
        for allowed in [bits(&[2]), bits(&[2, 8]), all.clone()] {
            let (sa, sb) = (
                a.walk(0, f, &allowed).unwrap(),
                b.walk(0, f, &allowed).unwrap(),
            );
            assert_eq!(sa, owned_a.walk(0, f, &allowed).unwrap());
            assert_eq!(sb, owned_b.walk(0, f, &allowed).unwrap());
            differ += usize::from(sa != sb);
        }
    }
    assert!(differ > 0, "the lexicon must matter in some walk");
}

#[test]
fn stop_bits_end_resolution_without_fallback() {
    // `from` scans as FROM (1) or NAME (2). With FROM not allowed, resolution falls back
    // to NAME; with FROM's stop bit set (after the terminal words: a reserved keyword a
    // select-list obligation blocks) the lexeme resolves to nothing.
    let sc = tables(false);
    let pats: Vec<String> = PATTERNS.iter().map(|s| s.to_string()).collect();
    let dfa = UnionDfa::build(&pats).unwrap();
    let mut st = START;
    for &b in b"from" {
        st = dfa.next(st, b);
    }
    assert!(dfa.any_accept(st));
    let nw = dfa.n_words();
    let name_only = bits(&[2]);
    assert!(matches!(
        sc.resolve(st, b"from", &name_only),
        Some(Resolved::Terminal(2))
    ));
    let mut stopped = name_only.clone();
    stopped.resize(2 * nw, 0);
    stopped[(nw * 64 + 1) / 64] |= 1 << ((nw * 64 + 1) % 64);
    assert!(sc.resolve(st, b"from", &stopped).is_none());
    // a stop bit of a terminal the lexeme does not reach changes nothing
    let mut other = name_only.clone();
    other.resize(2 * nw, 0);
    other[(nw * 64) / 64] |= 1; // SELECT's stop bit
    assert!(matches!(
        sc.resolve(st, b"from", &other),
        Some(Resolved::Terminal(2))
    ));
}

#[test]
fn lexicon_folding_quoted_case() {
    // the scope rule's name lists: quoted spellings compare case-folded too
    let lex = Lexicon::with_folding([b"t1".to_vec(), b"\"T1\"".to_vec()], true, true);
    for w in [&b"t1"[..], b"T1", b"\"t1\"", b"\"T1\""] {
        assert!(lex.admits(w), "{:?}", String::from_utf8_lossy(w));
    }
    assert!(lex.admits_prefix(b"\"T"));
    assert!(!lex.admits(b"`T1`"));
    assert!(!lex.admits_prefix(b"\"T2"));
    // without it a quoted lexeme compares exactly
    let bare = Lexicon::new([b"\"T1\"".to_vec()], true);
    assert!(bare.admits(b"\"T1\"") && !bare.admits(b"\"t1\""));
}

#[test]
fn complement_lexicon_refuses_only_its_words() {
    // the scope rule's fresh-alias views: every lexeme but the refused ones, any prefix live
    let lex = Lexicon::excluding([b"t1".to_vec(), b"\"t1\"".to_vec()], true, true);
    assert!(lex.is_complement() && !lex.is_empty());
    for w in [&b"t1"[..], b"T1", b"\"t1\"", b"\"T1\""] {
        assert!(!lex.admits(w), "{:?}", String::from_utf8_lossy(w));
    }
    for w in [&b"t2"[..], b"t1x", b"T", b"`t1`"] {
        assert!(lex.admits(w), "{:?}", String::from_utf8_lossy(w));
    }
    // a refused word may still be extended: every partial lexeme is live
    assert!(lex.admits_prefix(b"T1") && lex.admits_prefix(b""));
    // refusing nothing admits everything (not an empty category)
    let none = Lexicon::excluding(Vec::<Vec<u8>>::new(), true, true);
    assert!(!none.is_empty() && none.admits(b"x"));
}

#[test]
fn complement_lexicon_refuses_lexemes_led_by_a_refused_prefix() {
    // keyword-led aliases: after `FROM t` with GROUP blocked, no alias begins with `group`
    let lex = Lexicon::excluding([b"t1".to_vec()], true, true)
        .refusing_prefixes([b"GROUP".to_vec(), b"where".to_vec()]);
    for w in [&b"group"[..], b"GROUPBY", b"GroupByX", b"where_x", b"t1"] {
        assert!(!lex.admits(w), "{:?}", String::from_utf8_lossy(w));
        assert!(
            w == b"t1" || !lex.admits_prefix(w),
            "{:?}",
            String::from_utf8_lossy(w)
        );
    }
    // one byte off the prefix leaves it; a quoted lexeme is never led by a bare keyword
    for w in [
        &b"grou"[..],
        b"grouz",
        b"groundx",
        b"\"GROUPBY\"",
        b"wher",
        b"t2",
    ] {
        assert!(
            lex.admits(w) && lex.admits_prefix(w),
            "{:?}",
            String::from_utf8_lossy(w)
        );
    }
    // an allow-list ignores refused prefixes (they only narrow a complement)
    let list = Lexicon::new([b"groupby".to_vec()], true).refusing_prefixes([b"group".to_vec()]);
    assert!(list.admits(b"groupby") && list.admits_prefix(b"group"));
}

#[test]
fn walk_words_sets_exactly_the_walks_ids() {
    // the filler's word-form walk (no id list) against the id-list walk, which
    // walk_equals_per_token_reference holds to the per-token reference
    let toks = vocab();
    let (tr, _) = trie(&toks);
    let n_ids = toks.iter().map(|t| t.1).max().unwrap() as usize + 1;
    let n_words = n_ids.div_ceil(32);
    let (mut nonempty, mut sparse) = (0, 0);
    for lexicon in [false, true] {
        let walker = Walker::new(tables(lexicon), tr.clone());
        let frames = frames_from(
            &[b"", b"s", b"sel", b"ci", b"1", b"'a", b"<", b" "],
            lexicon,
        );
        for f in &frames {
            for a in [
                bits(&[0]),
                bits(&[2, 3, 6, 7, 8]),
                bits(&(0..11).collect::<Vec<_>>()),
                bits(&[]),
            ] {
                let want = walker.walk(0, f, &a).unwrap();
                // tight words (dense form) and 64x more words (the sparse form)
                for n_words in [n_words, 64 * n_words] {
                    let got = walker.walk_words(0, f, &a, n_words).unwrap();
                    let dense = match &got.words {
                        CiWords::Dense(d) => d.clone(),
                        CiWords::Sparse(sp) => {
                            assert!(sp.windows(2).all(|p| p[0].0 < p[1].0));
                            assert!(sp.iter().all(|&(_, w)| w != 0));
                            let mut d = vec![0u32; n_words];
                            for &(i, w) in sp {
                                d[i as usize] = w;
                            }
                            d
                        }
                    };
                    let mut ids = Vec::new();
                    for (w, &word) in dense.iter().enumerate() {
                        for b in 0..32 {
                            if (word >> b) & 1 == 1 {
                                ids.push((w * 32 + b) as i32);
                            }
                        }
                    }
                    assert_eq!(ids, want.ci_ids, "frame {f:?} allowed {a:?}");
                    assert_eq!(got.n_ids, want.ci_ids.len());
                    assert_eq!(got.residue, want.residue);
                    assert_eq!(got.visited, want.visited);
                    assert_eq!(got.words.count(), ids.len());
                    nonempty += usize::from(!ids.is_empty());
                    sparse +=
                        usize::from(matches!(got.words, CiWords::Sparse(_)) && !ids.is_empty());
                }
            }
        }
    }
    assert!(nonempty > 10 && sparse > 5, "{nonempty} {sparse}");
    // an id outside the words is an error, as or_ids_into_words
    let walker = Walker::new(tables(false), tr.clone());
    assert!(walker
        .walk_words(0, &Frame::start(), &bits(&(0..11).collect::<Vec<_>>()), 0)
        .is_err());
}
