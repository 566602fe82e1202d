//! LALR(1) table construction (paper §2 L1/L2, §6.2 compile line).
//!
//! The reference is lark's `LALR_Analyzer` (DeRemer–Pennello lookaheads over the LR(0)
//! automaton): `grid_sql/grammar/tables.py` builds tables with it when this kernel is absent
//! or declines, and the parity tests require identical action/goto tables. Building them in
//! Rust matters because every role × schema re-specialization projects the grammar and so
//! needs fresh tables: lark takes ~0.8 s for the SQLite dialect, this takes milliseconds.
//!
//! Symbols are numbered as in `LALRTables`: terminals `0..n_terminals`, `$END` =
//! `n_terminals`, nonterminal `k` = `n_terminals + 1 + k`. The automaton gets the augmented
//! rule `$root: start` (as lark; `$END` is seeded as what the start state reads after
//! `start`, whose target is the end state); states are numbered canonically (breadth first from the start
//! state, successors by ascending symbol id), which is exactly the renumbering the Python
//! side applies to lark's states.
//!
//! Two details follow lark on purpose, because the tables must be bit-identical:
//! - `includes` is computed from *every* item of the state whose left-hand side is the
//!   transition's nonterminal (lark does not restrict to dot-at-0 items);
//! - a non-trivial strongly connected component of the `reads` relation makes lark's result
//!   depend on set iteration order (its digraph aliases the read sets across an SCC). Such a
//!   grammar is never LR(k) (DeRemer and Pennello), so lark rejects it anyway: the builder
//!   declines ([`LalrError::ReadsCycle`]) and the caller lets lark report the conflict.

use crate::fxhash::FxMap;
use std::fmt;

/// A production: left-hand nonterminal index (`0..n_nonterminals`) and right-hand symbols.
#[derive(Clone, Debug)]
pub struct Production {
    pub lhs: u32,
    pub rhs: Vec<u32>,
}

/// Dense tables in `LALRTables`' layout.
#[derive(Clone, Debug)]
pub struct LalrTables {
    pub n_states: usize,
    /// `n_states * (n_terminals + 1)`: `s + 1` shift to state `s`, `-(r + 1)` reduce by
    /// production `r`, 0 error.
    pub action: Vec<i32>,
    /// `n_states * max(1, n_nonterminals)`: target state or -1.
    pub goto: Vec<i32>,
    pub start_state: u32,
    pub end_state: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LalrError {
    /// Malformed input (symbol out of range, ...).
    Input(String),
    /// Shift/reduce conflict: state, terminal, production.
    ShiftReduce(u32, u32, u32),
    /// Reduce/reduce conflict: state, terminal, productions.
    ReduceReduce(u32, u32, Vec<u32>),
    /// A non-trivial SCC in the `reads` relation (see the module docs).
    ReadsCycle,
}

impl fmt::Display for LalrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LalrError::Input(m) => write!(f, "invalid grammar input: {m}"),
            LalrError::ShiftReduce(s, t, r) => {
                write!(
                    f,
                    "shift/reduce conflict in state {s} on terminal {t} (rule {r})"
                )
            }
            LalrError::ReduceReduce(s, t, rs) => {
                write!(
                    f,
                    "reduce/reduce conflict in state {s} on terminal {t} (rules {rs:?})"
                )
            }
            LalrError::ReadsCycle => write!(f, "reads relation has a non-trivial cycle"),
        }
    }
}

impl std::error::Error for LalrError {}

struct Bits {
    words: usize,
    data: Vec<u64>,
}

impl Bits {
    fn new(n_rows: usize, n_bits: usize) -> Self {
        let words = n_bits.div_ceil(64).max(1);
        Bits {
            words,
            data: vec![0; n_rows * words],
        }
    }
    fn set(&mut self, row: usize, bit: usize) {
        self.data[row * self.words + bit / 64] |= 1 << (bit % 64);
    }
    fn row(&self, row: usize) -> &[u64] {
        &self.data[row * self.words..(row + 1) * self.words]
    }
    fn or_rows(&mut self, dst: usize, src: usize) {
        if dst == src {
            return;
        }
        for w in 0..self.words {
            let v = self.data[src * self.words + w];
            self.data[dst * self.words + w] |= v;
        }
    }
    fn copy_row(&mut self, dst: usize, src: usize) {
        if dst != src {
            let w = self.words;
            self.data.copy_within(src * w..(src + 1) * w, dst * w);
        }
    }
}

/// DeRemer–Pennello `digraph`: `F(x) = G(x) ∪ ⋃{F(y) | x R y}`, SCCs share one set.
/// `f` holds `G` on entry and `F` on return. Returns the largest SCC size.
fn digraph(n: usize, rel: &[Vec<u32>], f: &mut Bits) -> usize {
    const DONE: u32 = u32::MAX;
    let mut mark = vec![0u32; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut max_scc = 0usize;
    // explicit recursion: (node, next relation index, depth at push)
    let mut frames: Vec<(usize, usize, u32)> = Vec::new();
    for x0 in 0..n {
        if mark[x0] != 0 {
            continue;
        }
        stack.push(x0);
        mark[x0] = stack.len() as u32;
        frames.push((x0, 0, mark[x0]));
        while let Some(top) = frames.len().checked_sub(1) {
            let (x, i, d) = frames[top];
            if i < rel[x].len() {
                frames[top].1 += 1;
                let y = rel[x][i] as usize;
                if mark[y] == 0 {
                    stack.push(y);
                    mark[y] = stack.len() as u32;
                    frames.push((y, 0, mark[y]));
                    continue;
                }
                if mark[y] < mark[x] {
                    mark[x] = mark[y];
                }
                f.or_rows(x, y);
                continue;
            }
            frames.pop();
            if mark[x] == d {
                let mut size = 0;
                loop {
                    let z = stack.pop().expect("scc member on stack");
                    mark[z] = DONE;
                    f.copy_row(z, x);
                    size += 1;
                    if z == x {
                        break;
                    }
                }
                max_scc = max_scc.max(size);
            }
            if let Some(&(p, _, _)) = frames.last() {
                if mark[x] < mark[p] {
                    mark[p] = mark[x];
                }
                f.or_rows(p, x);
            }
        }
    }
    max_scc
}

/// Build the LALR(1) tables of `rules` (start symbol: nonterminal `start`).
pub fn build(
    n_terminals: usize,
    n_nonterminals: usize,
    rules: &[Production],
    start: u32,
) -> Result<LalrTables, LalrError> {
    let end = n_terminals as u32;
    let nt_base = n_terminals as u32 + 1;
    let n_syms = n_terminals + 1 + n_nonterminals;
    if start as usize >= n_nonterminals {
        return Err(LalrError::Input(format!(
            "start nonterminal {start} out of range"
        )));
    }
    for (i, r) in rules.iter().enumerate() {
        if r.lhs as usize >= n_nonterminals {
            return Err(LalrError::Input(format!(
                "rule {i}: lhs {} out of range",
                r.lhs
            )));
        }
        if let Some(&s) = r.rhs.iter().find(|&&s| s as usize >= n_syms || s == end) {
            return Err(LalrError::Input(format!(
                "rule {i}: symbol {s} out of range"
            )));
        }
    }
    // augmented rule `$root: start` (as lark's LR(0) automaton; `$END` is the lookahead
    // read after `start` in the start state, seeded below)
    let root_rule = rules.len();
    let mut rhs_of: Vec<&[u32]> = rules.iter().map(|r| r.rhs.as_slice()).collect();
    let root_rhs = [nt_base + start];
    rhs_of.push(&root_rhs);
    let lhs_of: Vec<u32> = rules.iter().map(|r| r.lhs).chain([u32::MAX]).collect();
    let n_rules = rhs_of.len();

    // item ids: item_base[r] + dot
    let mut item_base = Vec::with_capacity(n_rules + 1);
    let mut acc = 0u32;
    for rhs in &rhs_of {
        item_base.push(acc);
        acc += rhs.len() as u32 + 1;
    }
    let n_items = acc as usize;
    let mut item_rule = vec![0u32; n_items];
    let mut item_dot = vec![0u32; n_items];
    for (r, rhs) in rhs_of.iter().enumerate() {
        for d in 0..=rhs.len() {
            item_rule[item_base[r] as usize + d] = r as u32;
            item_dot[item_base[r] as usize + d] = d as u32;
        }
    }
    let next_sym = |it: u32| -> Option<u32> {
        let (r, d) = (
            item_rule[it as usize] as usize,
            item_dot[it as usize] as usize,
        );
        rhs_of[r].get(d).copied()
    };

    let mut rules_by_nt: Vec<Vec<u32>> = vec![Vec::new(); n_nonterminals];
    for (i, r) in rules.iter().enumerate() {
        rules_by_nt[r.lhs as usize].push(i as u32);
    }
    // closure rules per nonterminal: every rule reachable through leftmost nonterminals
    let mut expand: Vec<Vec<u32>> = Vec::with_capacity(n_nonterminals);
    {
        let mut seen_nt = vec![usize::MAX; n_nonterminals];
        for a in 0..n_nonterminals {
            let mut out = Vec::new();
            let mut todo = vec![a];
            seen_nt[a] = a;
            while let Some(b) = todo.pop() {
                for &r in &rules_by_nt[b] {
                    out.push(r);
                    if let Some(&s) = rhs_of[r as usize].first() {
                        if s >= nt_base {
                            let c = (s - nt_base) as usize;
                            if seen_nt[c] != a {
                                seen_nt[c] = a;
                                todo.push(c);
                            }
                        }
                    }
                }
            }
            out.sort_unstable();
            expand.push(out);
        }
    }

    // ---- LR(0) automaton, states created breadth first (canonical numbering)
    let mut kernel_ids: FxMap<Vec<u32>, u32> = FxMap::default();
    let mut closures: Vec<Vec<u32>> = Vec::new();
    let mut trans: Vec<Vec<(u32, u32)>> = Vec::new(); // sorted by symbol
    let mut stamp = vec![u32::MAX; n_items];
    let mut nt_stamp = vec![u32::MAX; n_nonterminals];
    let start_kernel = vec![item_base[root_rule]];
    kernel_ids.insert(start_kernel.clone(), 0);
    let mut pending: Vec<Vec<u32>> = vec![start_kernel];
    let mut head = 0usize;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    while head < pending.len() {
        let sid = head as u32;
        let kernel = std::mem::take(&mut pending[head]);
        head += 1;
        let mut closure = kernel.clone();
        for &it in &kernel {
            stamp[it as usize] = sid;
        }
        for &it in &kernel {
            if let Some(s) = next_sym(it) {
                if s >= nt_base && nt_stamp[(s - nt_base) as usize] != sid {
                    nt_stamp[(s - nt_base) as usize] = sid;
                    for &r in &expand[(s - nt_base) as usize] {
                        let i0 = item_base[r as usize];
                        if stamp[i0 as usize] != sid {
                            stamp[i0 as usize] = sid;
                            closure.push(i0);
                        }
                    }
                }
            }
        }
        closure.sort_unstable();
        // successor kernels: (symbol, advanced item) pairs sorted, one run per symbol
        pairs.clear();
        for &it in &closure {
            if let Some(s) = next_sym(it) {
                pairs.push((s, it + 1));
            }
        }
        pairs.sort_unstable();
        let mut row = Vec::new();
        let mut a = 0;
        while a < pairs.len() {
            let s = pairs[a].0;
            let mut b = a + 1;
            while b < pairs.len() && pairs[b].0 == s {
                b += 1;
            }
            let k: Vec<u32> = pairs[a..b].iter().map(|&(_, it)| it).collect();
            let target = match kernel_ids.get(&k) {
                Some(&t) => t,
                None => {
                    let n = kernel_ids.len() as u32;
                    kernel_ids.insert(k.clone(), n);
                    pending.push(k);
                    n
                }
            };
            row.push((s, target));
            a = b;
        }
        closures.push(closure);
        trans.push(row);
    }
    let n_states = closures.len();
    let goto_of = |st: usize, s: u32| -> u32 {
        let row = &trans[st];
        row[row
            .binary_search_by_key(&s, |&(x, _)| x)
            .expect("transition exists")]
        .1
    };

    // ---- nullable nonterminals
    let mut nullable = vec![false; n_nonterminals];
    loop {
        let mut changed = false;
        for r in rules {
            if !nullable[r.lhs as usize]
                && r.rhs
                    .iter()
                    .all(|&s| s >= nt_base && nullable[(s - nt_base) as usize])
            {
                nullable[r.lhs as usize] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let is_nullable = |s: u32| s >= nt_base && nullable[(s - nt_base) as usize];

    // ---- nonterminal transitions (state, A), indexed
    let mut nt_index: FxMap<(u32, u32), u32> = FxMap::default();
    let mut nts: Vec<(u32, u32, u32)> = Vec::new(); // (state, symbol, target)
    for (st, row) in trans.iter().enumerate() {
        for &(s, t) in row {
            if s >= nt_base {
                nt_index.insert((st as u32, s), nts.len() as u32);
                nts.push((st as u32, s, t));
            }
        }
    }
    let n_nt = nts.len();
    let n_bits = n_terminals + 1;
    let mut sets = Bits::new(n_nt, n_bits);
    let mut reads: Vec<Vec<u32>> = vec![Vec::new(); n_nt];
    sets.set(nt_index[&(0, nt_base + start)] as usize, end as usize);
    for (i, &(_, _, t)) in nts.iter().enumerate() {
        for &(s2, _) in &trans[t as usize] {
            if s2 < nt_base {
                sets.set(i, s2 as usize);
            } else if is_nullable(s2) {
                reads[i].push(nt_index[&(t, s2)]);
            }
        }
    }
    // ---- includes and lookback
    let mut includes: Vec<Vec<u32>> = vec![Vec::new(); n_nt];
    let mut lookback: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n_nt]; // (state, rule)
    for (i, &(st, a, _)) in nts.iter().enumerate() {
        let a_nt = a - nt_base;
        for &it in &closures[st as usize] {
            let r = item_rule[it as usize] as usize;
            if r == root_rule || lhs_of[r] != a_nt {
                continue;
            }
            let rhs = rhs_of[r];
            let dot = item_dot[it as usize] as usize;
            let mut st2 = st as usize;
            for j in dot..rhs.len() {
                let s = rhs[j];
                if s >= nt_base && rhs[j + 1..].iter().all(|&x| is_nullable(x)) {
                    let k = nt_index[&(st2 as u32, s)];
                    includes[k as usize].push(i as u32);
                }
                st2 = goto_of(st2, s) as usize;
            }
            if dot == 0 {
                lookback[i].push((st2 as u32, r as u32));
            }
        }
    }
    for v in includes.iter_mut() {
        v.sort_unstable();
        v.dedup();
    }
    if digraph(n_nt, &reads, &mut sets) > 1 {
        return Err(LalrError::ReadsCycle);
    }
    digraph(n_nt, &includes, &mut sets);

    // ---- lookaheads -> reduce actions; shifts and gotos
    let width = n_terminals + 1;
    let gw = n_nonterminals.max(1);
    let mut action = vec![0i32; n_states * width];
    let mut goto = vec![-1i32; n_states * gw];
    for (st, row) in trans.iter().enumerate() {
        for &(s, t) in row {
            if s < nt_base {
                action[st * width + s as usize] = t as i32 + 1;
            } else {
                goto[st * gw + (s - nt_base) as usize] = t as i32;
            }
        }
    }
    // reductions: a cell already holding a shift or another rule is a conflict
    for (i, lbs) in lookback.iter().enumerate() {
        let follow = sets.row(i);
        for &(st, r) in lbs {
            let red = -(r as i32 + 1);
            for (w, &word) in follow.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let t = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let cell = &mut action[st as usize * width + t];
                    if *cell > 0 {
                        return Err(LalrError::ShiftReduce(st, t as u32, r));
                    }
                    if *cell < 0 && *cell != red {
                        let mut rs = vec![(-*cell - 1) as u32, r];
                        rs.sort_unstable();
                        return Err(LalrError::ReduceReduce(st, t as u32, rs));
                    }
                    *cell = red;
                }
            }
        }
    }
    let end_state = goto_of(0, nt_base + start);
    Ok(LalrTables {
        n_states,
        action,
        goto,
        start_state: 0,
        end_state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(lhs: u32, rhs: &[u32]) -> Production {
        Production {
            lhs,
            rhs: rhs.to_vec(),
        }
    }

    // terminals: 0 '+', 1 'n'; $END = 2; nonterminals: e = 3, (start) s = 4
    #[test]
    fn left_recursive_sum() {
        let rules = vec![p(0, &[3, 0, 1]), p(0, &[1]), p(1, &[3])];
        let t = build(2, 2, &rules, 1).unwrap();
        // start: shift n, goto e, goto s
        let w = 3;
        assert!(t.action[1] > 0);
        let after_n = (t.action[1] - 1) as usize;
        // after `n`: reduce e -> n on '+' and $END
        assert_eq!(t.action[after_n * w], -2);
        assert_eq!(t.action[after_n * w + 2], -2);
        assert_eq!(t.action[after_n * w + 1], 0);
        assert!(t.end_state as usize > 0 && (t.end_state as usize) < t.n_states);
    }

    #[test]
    fn ambiguous_grammar_conflicts() {
        // e: e '+' e | n
        let rules = vec![p(0, &[3, 0, 3]), p(0, &[1]), p(1, &[3])];
        match build(2, 2, &rules, 1) {
            Err(LalrError::ShiftReduce(..)) => {}
            other => panic!("expected a shift/reduce conflict, got {other:?}"),
        }
    }

    #[test]
    fn reduce_reduce_conflict() {
        // s: a | b ; a: n ; b: n
        let rules = vec![p(0, &[4]), p(0, &[5]), p(1, &[1]), p(2, &[1])];
        // nonterminals: s = 0 (sym 3), a = 1 (sym 4), b = 2 (sym 5)
        match build(2, 3, &rules, 0) {
            Err(LalrError::ReduceReduce(_, _, rs)) => assert_eq!(rs, vec![2, 3]),
            other => panic!("expected a reduce/reduce conflict, got {other:?}"),
        }
    }

    #[test]
    fn nullable_rules() {
        // s: opt n ; opt: '+' | <empty>
        let rules = vec![p(0, &[4, 1]), p(1, &[0]), p(1, &[])];
        let t = build(2, 2, &rules, 0).unwrap();
        // start state: reduce opt -> <empty> on n, shift '+'
        assert_eq!(t.action[1], -3);
        assert!(t.action[0] > 0);
    }

    #[test]
    fn bad_input() {
        assert!(matches!(
            build(2, 1, &[p(0, &[9])], 0),
            Err(LalrError::Input(_))
        ));
        assert!(matches!(
            build(2, 1, &[p(0, &[2])], 0),
            Err(LalrError::Input(_))
        ));
    }
}
