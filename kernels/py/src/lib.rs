//! pyo3 glue for `grid_sql._kernels`. No logic lives here: argument conversion, error
//! mapping (`LexerError` -> `ValueError`) and releasing the GIL around long calls. The
//! contract is `grid_sql/_kernels.pyi`, checked by `python -m mypy.stubtest`.

use grid_sql_core::classes::{ClassTable, TableKey};
use grid_sql_core::fill::{FillError, Filler};
use grid_sql_core::lalr::{self, Production};
use grid_sql_core::lexer::{BuildConfig, UnionDfa, DEFAULT_MAX_STATES};
use grid_sql_core::rows::{check_rows, copy_rows as core_copy_rows};
use grid_sql_core::runtime::{NodeId, ParseTables, ParserRuntime};
use pyo3::buffer::PyBuffer;
use std::sync::{Arc, Mutex};

use grid_sql_core::walk::{Frame, Lexicon, ScanDfa as CoreScanDfa, ScanTables, TrieArrays, Walker};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

/// Scans shorter than this stay under the GIL: releasing it costs more than the walk.
const DETACH_SCAN_BYTES: usize = 1 << 16;

// The signature default below is written as a literal; keep it in sync at compile time.
const _: () = assert!(DEFAULT_MAX_STATES == 1048576);

type UnionTables<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    usize,
    usize,
);

/// Build the union lexer DFA of `patterns` (byte-semantics regexes, one per terminal).
///
/// Returns `(trans_u32_le, accept_u64_le, live_u64_le, n_states, n_words)`: the transition
/// table `trans[state * 256 + byte]` as little-endian u32, and per-state bitsets of
/// `n_words` little-endian u64 words (bit `p % 64` of word `p // 64` = pattern `p`).
/// State 0 is dead, state 1 is the start. Raises `ValueError` on a bad pattern, a pattern
/// matching the empty string, or more than `max_states` states.
#[pyfunction]
// Literal default (= DEFAULT_MAX_STATES) so that it shows in __text_signature__ / stubtest.
#[pyo3(signature = (patterns, *, max_states = 1048576))]
fn build_union_dfa<'py>(
    py: Python<'py>,
    patterns: Vec<String>,
    max_states: usize,
) -> PyResult<UnionTables<'py>> {
    let config = BuildConfig { max_states };
    let (dfa, trans, accept, live) = py
        .detach(|| {
            UnionDfa::build_with(&patterns, &config).map(|d| {
                let (t, a, l) = (d.trans_le_bytes(), d.accept_le_bytes(), d.live_le_bytes());
                (d, t, a, l)
            })
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((
        PyBytes::new(py, &trans),
        PyBytes::new(py, &accept),
        PyBytes::new(py, &live),
        dfa.n_states(),
        dfa.n_words(),
    ))
}

fn scan(trans: &[u8], data: &[u8], start: u32) -> Result<u32, String> {
    let n_states = trans.len() / 1024;
    let mut s = start;
    for &b in data {
        let i = (s as usize * 256 + b as usize) * 4;
        let next = u32::from_le_bytes([trans[i], trans[i + 1], trans[i + 2], trans[i + 3]]);
        if next as usize >= n_states {
            return Err(format!(
                "transition table refers to state {next} but has only {n_states} states"
            ));
        }
        s = next;
    }
    Ok(s)
}

/// Walk `data` through the transition table `trans` (as returned by `build_union_dfa`)
/// starting in `start`; return the final state.
#[pyfunction]
fn dfa_scan(py: Python<'_>, trans: &[u8], data: &[u8], start: u32) -> PyResult<u32> {
    if trans.is_empty() || trans.len() % 1024 != 0 {
        return Err(PyValueError::new_err(format!(
            "trans must hold n_states * 256 little-endian u32 values, got {} bytes",
            trans.len()
        )));
    }
    let n_states = trans.len() / 1024;
    if start as usize >= n_states {
        return Err(PyValueError::new_err(format!(
            "start state {start} out of range for {n_states} states"
        )));
    }
    let result = if data.len() >= DETACH_SCAN_BYTES {
        py.detach(|| scan(trans, data, start))
    } else {
        scan(trans, data, start)
    };
    result.map_err(PyValueError::new_err)
}

fn le_words<T: Copy, const N: usize>(
    name: &str,
    data: &[u8],
    conv: fn([u8; N]) -> T,
) -> PyResult<Vec<T>> {
    if data.len() % N != 0 {
        return Err(PyValueError::new_err(format!(
            "{name} must hold little-endian {N}-byte values, got {} bytes",
            data.len()
        )));
    }
    Ok(data
        .chunks_exact(N)
        .map(|c| conv(c.try_into().expect("chunk of N bytes")))
        .collect())
}

fn value_err(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One category lexicon as passed from Python: (terminal id, folded words, fold_bare_case,
/// fold_quoted_case, exclude, refused prefixes of a complement).
type LexiconSpec = (u32, Vec<Vec<u8>>, bool, bool, bool, Vec<Vec<u8>>);

/// The union-DFA side of the scan tables (`ScanDfa`), built once per lexer and shared by
/// the walkers of every grammar over it.
#[pyclass(frozen, module = "grid_sql._kernels")]
struct ScanDfa {
    inner: Arc<CoreScanDfa>,
}

#[pymethods]
impl ScanDfa {
    #[new]
    #[pyo3(signature = (trans, accept, live, n_words, candidates))]
    fn new(
        py: Python<'_>,
        trans: &[u8],
        accept: &[u8],
        live: &[u8],
        n_words: usize,
        candidates: Vec<Vec<u32>>,
    ) -> PyResult<Self> {
        let trans = le_words("trans", trans, u32::from_le_bytes)?;
        let accept = le_words("accept", accept, u64::from_le_bytes)?;
        let live = le_words("live", live, u64::from_le_bytes)?;
        let inner = py
            .detach(move || CoreScanDfa::new(trans, &accept, live, n_words, candidates))
            .map_err(value_err)?;
        Ok(ScanDfa {
            inner: Arc::new(inner),
        })
    }

    /// Number of union-DFA states.
    #[getter]
    fn n_states(&self) -> usize {
        self.inner.n_states()
    }

    /// Terminal bitset words per state.
    #[getter]
    fn n_words(&self) -> usize {
        self.inner.n_words()
    }

    /// Heap bytes of the tables.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.heap_bytes()
    }
}

/// The token trie arrays (`TrieArrays`), built once per token trie and shared by the walkers
/// of every grammar over that vocabulary.
#[pyclass(frozen, module = "grid_sql._kernels")]
struct TokenTrieArrays {
    inner: Arc<TrieArrays>,
}

#[pymethods]
impl TokenTrieArrays {
    #[new]
    #[pyo3(signature = (edge, depth, size, alias_offsets, alias_ids))]
    fn new(
        py: Python<'_>,
        edge: &[u8],
        depth: &[u8],
        size: &[u8],
        alias_offsets: &[u8],
        alias_ids: &[u8],
    ) -> PyResult<Self> {
        let edge = edge.to_vec();
        let depth = le_words("depth", depth, u16::from_le_bytes)?;
        let size = le_words("size", size, u32::from_le_bytes)?;
        let alias_off = le_words("alias_offsets", alias_offsets, u32::from_le_bytes)?;
        let alias_ids = le_words("alias_ids", alias_ids, i32::from_le_bytes)?;
        let inner = py
            .detach(move || TrieArrays::new(edge, depth, size, alias_off, alias_ids))
            .map_err(value_err)?;
        Ok(TokenTrieArrays {
            inner: Arc::new(inner),
        })
    }

    /// Number of trie nodes.
    #[getter]
    fn n_nodes(&self) -> usize {
        self.inner.n_nodes()
    }

    /// Heap bytes of the arrays.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.heap_bytes()
    }
}

/// The cold trie walk of one (grammar runtime, token trie) pair (`grid_sql/mask/walk.py`).
///
/// Built from a shared [`ScanDfa`], the grammar's ignored set and lexicons, and a shared
/// [`TokenTrieArrays`]: only the lexicons are per walker. `walk` releases the GIL.
#[pyclass(frozen, module = "grid_sql._kernels")]
struct TrieWalker {
    inner: Walker,
}

#[pymethods]
impl TrieWalker {
    #[new]
    #[pyo3(signature = (dfa, ignored, lexicons, trie))]
    fn new(
        py: Python<'_>,
        dfa: &ScanDfa,
        ignored: &[u8],
        lexicons: Vec<LexiconSpec>,
        trie: &TokenTrieArrays,
    ) -> PyResult<Self> {
        let ignored = le_words("ignored", ignored, u64::from_le_bytes)?;
        let (dfa, trie) = (Arc::clone(&dfa.inner), Arc::clone(&trie.inner));
        let inner = py.detach(move || -> Result<Walker, String> {
            Ok(Walker::shared(scan_tables(dfa, &ignored, lexicons)?, trie))
        });
        Ok(TrieWalker {
            inner: inner.map_err(PyValueError::new_err)?,
        })
    }

    /// CI walk of the subtree strictly below `node0` from the scan frame
    /// `(dfa, rem, la_len, la_state)` under the allowed-terminal bitset `allowed`
    /// (little-endian u64 words). Returns `(ci_ids_i32_le, residue, nodes_visited)` with
    /// `residue` a list of `(node, terminal, requeue)` in DFS order.
    #[allow(clippy::too_many_arguments)]
    fn walk<'py>(
        &self,
        py: Python<'py>,
        node0: usize,
        dfa: u32,
        rem: &[u8],
        la_len: i64,
        la_state: u32,
        allowed: &[u8],
    ) -> PyResult<Bound<'py, PyTuple>> {
        let allowed = le_words("allowed", allowed, u64::from_le_bytes)?;
        let frame = Frame {
            dfa,
            rem: rem.to_vec(),
            la_len,
            la_state,
        };
        let w = &self.inner;
        let out = py
            .detach(|| w.walk(node0, &frame, &allowed))
            .map_err(value_err)?;
        let mut id_bytes = Vec::with_capacity(out.ci_ids.len() * 4);
        for t in &out.ci_ids {
            id_bytes.extend_from_slice(&t.to_le_bytes());
        }
        let residue = PyList::empty(py);
        for c in &out.residue {
            residue.append((c.node, c.terminal, PyBytes::new(py, &c.requeue)))?;
        }
        (PyBytes::new(py, &id_bytes), residue, out.visited).into_pyobject(py)
    }

    /// [`walk`](Self::walk) answered from a freshly built class table (what the mask filler
    /// uses for large subtrees): the same tuple, with `nodes_visited` the table walk's own
    /// count, or None when no table applies (last accept inside `rem`, or a
    /// lexicon-restricted terminal allowed, ignored or stop-marked). For parity tests.
    #[allow(clippy::too_many_arguments)]
    fn walk_table<'py>(
        &self,
        py: Python<'py>,
        node0: usize,
        dfa: u32,
        rem: &[u8],
        la_len: i64,
        la_state: u32,
        allowed: &[u8],
        n_words: usize,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let allowed = le_words("allowed", allowed, u64::from_le_bytes)?;
        let frame = Frame {
            dfa,
            rem: rem.to_vec(),
            la_len,
            la_state,
        };
        let w = &self.inner;
        let Some(key) = TableKey::of(node0, &frame) else {
            return Ok(None);
        };
        let out = py
            .detach(|| ClassTable::build(w, key, n_words)?.walk_words(w, &frame, &allowed))
            .map_err(value_err)?;
        let Some(out) = out else {
            return Ok(None);
        };
        let mut id_bytes = Vec::with_capacity(out.n_ids * 4);
        for (i, word) in out.words.nonzero() {
            let mut m = word;
            while m != 0 {
                let t = (i * 32 + m.trailing_zeros() as usize) as i32;
                id_bytes.extend_from_slice(&t.to_le_bytes());
                m &= m - 1;
            }
        }
        let residue = PyList::empty(py);
        for c in &out.residue {
            residue.append((c.node, c.terminal, PyBytes::new(py, &c.requeue)))?;
        }
        Ok(Some(
            (PyBytes::new(py, &id_bytes), residue, out.visited).into_pyobject(py)?,
        ))
    }

    /// Number of trie nodes.
    #[getter]
    fn n_nodes(&self) -> usize {
        self.inner.trie().n_nodes()
    }

    /// Number of union-DFA states.
    #[getter]
    fn n_states(&self) -> usize {
        self.inner.scan_tables().n_states()
    }
}

/// The scan tables of one grammar over a shared union DFA: its ignored set (u64 words) and
/// lexicons (no Python objects: callable with the GIL released).
fn scan_tables(
    dfa: Arc<CoreScanDfa>,
    ignored: &[u64],
    lexicons: Vec<LexiconSpec>,
) -> Result<ScanTables, String> {
    let lex = lexicons
        .into_iter()
        .map(|(t, words, bare, quoted, exclude, prefixes)| {
            let lex = if exclude {
                Lexicon::excluding(words, bare, quoted).refusing_prefixes(prefixes)
            } else {
                Lexicon::with_folding(words, bare, quoted)
            };
            (t, lex)
        })
        .collect();
    ScanTables::with_dfa(dfa, ignored, lex).map_err(|e| e.to_string())
}

/// A scan state as Python holds it: `(dfa, rem, la_len, la_state)`.
type PyScan = (u32, Vec<u8>, i64, u32);

fn frame(scan: PyScan) -> Frame {
    Frame {
        dfa: scan.0,
        rem: scan.1,
        la_len: scan.2,
        la_state: scan.3,
    }
}

/// The LALR(1) parser runtime of one grammar without scope rules
/// (`grid_sql/parser/incremental.py` `ParserRuntime` is the reference; results are
/// identical). Stacks are node ids of its interned arena (0: the root).
#[pyclass(frozen, module = "grid_sql._kernels")]
struct ParserKernel {
    inner: Mutex<ParserRuntime>,
}

impl ParserKernel {
    fn rt(&self) -> std::sync::MutexGuard<'_, ParserRuntime> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl ParserKernel {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (n_terminals, n_nonterminals, action, goto, rule_lhs, rule_len, start_state, end_state, dfa, ignored, lexicons))]
    fn new(
        py: Python<'_>,
        n_terminals: usize,
        n_nonterminals: usize,
        action: &[u8],
        goto: &[u8],
        rule_lhs: Vec<u32>,
        rule_len: Vec<u32>,
        start_state: u32,
        end_state: u32,
        dfa: &ScanDfa,
        ignored: &[u8],
        lexicons: Vec<LexiconSpec>,
    ) -> PyResult<Self> {
        let action = le_words("action", action, i32::from_le_bytes)?;
        let goto = le_words("goto", goto, i32::from_le_bytes)?;
        let tables = ParseTables::new(
            n_terminals,
            n_nonterminals,
            action,
            goto,
            rule_lhs,
            rule_len,
            start_state,
            end_state,
        )
        .map_err(value_err)?;
        let ignored = le_words("ignored", ignored, u64::from_le_bytes)?;
        let dfa = Arc::clone(&dfa.inner);
        let scan = py
            .detach(move || scan_tables(dfa, &ignored, lexicons))
            .map_err(PyValueError::new_err)?;
        let rt = ParserRuntime::new(Arc::new(tables), Arc::new(scan)).map_err(value_err)?;
        Ok(ParserKernel {
            inner: Mutex::new(rt),
        })
    }

    /// Nodes in the arena (the root included).
    #[getter]
    fn n_nodes(&self) -> usize {
        self.rt().n_nodes()
    }

    /// The interned node `state` over `parent`.
    fn push(&self, parent: NodeId, state: u32, symbol: u32) -> PyResult<NodeId> {
        let mut rt = self.rt();
        check_node(&rt, parent)?;
        Ok(rt.push(parent, state, symbol))
    }

    /// LALR states from the bottom to `node`.
    fn states(&self, node: NodeId) -> PyResult<Vec<u32>> {
        let rt = self.rt();
        check_node(&rt, node)?;
        Ok(rt.states(node))
    }

    /// Rolling configuration hash of `node`.
    fn config_hash(&self, node: NodeId) -> PyResult<u64> {
        let rt = self.rt();
        check_node(&rt, node)?;
        Ok(rt.hash(node))
    }

    /// The allowed-terminal set of `node` as little-endian u64 words.
    fn allowed<'py>(&self, py: Python<'py>, node: NodeId) -> PyResult<Bound<'py, PyBytes>> {
        let mut rt = self.rt();
        check_node(&rt, node)?;
        let words = rt.allowed(node).map_err(value_err)?;
        let b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        Ok(PyBytes::new(py, &b))
    }

    /// Apply `tid`'s reduce chain and shift; `ValueError` if the tables refuse it.
    fn shift(&self, node: NodeId, tid: u32) -> PyResult<NodeId> {
        let mut rt = self.rt();
        check_node(&rt, node)?;
        rt.shift(node, tid).map_err(value_err)
    }

    /// Feed `data` from `(node, scan)`: the new `(node, scan)`, or None if not viable.
    fn advance(
        &self,
        node: NodeId,
        scan: PyScan,
        data: &[u8],
    ) -> PyResult<Option<(NodeId, PyScan)>> {
        let mut rt = self.rt();
        check_node(&rt, node)?;
        let out = rt.advance(node, &frame(scan), data).map_err(value_err)?;
        Ok(out.map(|(n, f)| (n, (f.dfa, f.rem, f.la_len, f.la_state))))
    }

    /// EOS gate: the input so far is a complete sentence.
    fn eos_allowed(&self, node: NodeId, scan: PyScan) -> PyResult<bool> {
        let mut rt = self.rt();
        check_node(&rt, node)?;
        rt.eos_allowed(node, &frame(scan)).map_err(value_err)
    }
}

/// The whole mask fill of one (grammar without scope rules, vocabulary)
/// (`Guide._fill` is the reference: rows, counts and entry ids are identical). Holds its
/// own entry store (dropped wholesale past `max_bytes`); `fill` releases the GIL.
#[pyclass(frozen, module = "grid_sql._kernels")]
struct MaskFiller {
    inner: Mutex<Filler>,
}

impl MaskFiller {
    fn filler(&self) -> std::sync::MutexGuard<'_, Filler> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl MaskFiller {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (parser, walker, lexicon_mask, schema_fp, term_words, vocab_size, eos_id, max_bytes))]
    fn new(
        parser: &ParserKernel,
        walker: &TrieWalker,
        lexicon_mask: &[u8],
        schema_fp: Option<Vec<u8>>,
        term_words: usize,
        vocab_size: usize,
        eos_id: usize,
        max_bytes: usize,
    ) -> PyResult<Self> {
        let lexicon_mask = le_words("lexicon_mask", lexicon_mask, u64::from_le_bytes)?;
        let rt = parser.rt().fresh();
        let f = Filler::new(
            rt,
            walker.inner.clone(),
            lexicon_mask,
            schema_fp,
            term_words,
            vocab_size,
            eos_id,
            max_bytes,
        )
        .map_err(value_err)?;
        Ok(MaskFiller {
            inner: Mutex::new(f),
        })
    }

    /// Fill `out` (a writable C-contiguous int32 buffer of at least `ceil(vocab_size /
    /// 32)` items; the rest is zeroed) with the mask of the configuration whose stack is
    /// `stack` (`(state, symbol)` pairs bottom-up above the root) and scan state `scan`.
    /// Returns `(allowed count, entry ids)`, or None when `walk` is false and some entry
    /// is not stored (`out` untouched).
    fn fill(
        &self,
        py: Python<'_>,
        stack: Vec<(u32, u32)>,
        scan: PyScan,
        out: &Bound<'_, PyAny>,
        walk: bool,
    ) -> PyResult<Option<(u32, Py<PyList>)>> {
        let buf = PyBuffer::<i32>::get(out)?;
        if buf.readonly() || !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "out must be a writable C-contiguous int32 buffer",
            ));
        }
        let n_items = buf.item_count();
        let f = frame(scan);
        let res = py.detach(|| {
            let mut filler = self.filler();
            let mut words = vec![0u32; n_items];
            let node = filler.node_of(&stack);
            filler
                .fill(node, &f, &mut words, walk)
                .map(|(n, entries)| (n, entries, words))
        });
        match res {
            Ok((n, entries, words)) => {
                let w: Vec<i32> = words.into_iter().map(|x| x as i32).collect();
                buf.copy_from_slice(py, &w)?;
                let ids = PyList::new(py, entries.iter().map(|e| e.hex.as_str()))?;
                Ok(Some((n, ids.unbind())))
            }
            Err(FillError::NeedWalk) => Ok(None),
            Err(e) => Err(value_err(e)),
        }
    }

    /// Drop the stored entries and every memo (the next fills walk again).
    fn reset(&self) {
        self.filler().reset();
    }

    /// Keep at most `n` class records / memoized sub-walks before dropping those memos
    /// (checked between fills; the store is kept).
    fn set_memo_limit(&self, n: usize) {
        self.filler().set_memo_limit(n);
    }

    /// Trie walks run (store misses) so far.
    #[getter]
    fn walks(&self) -> u64 {
        self.filler().walks
    }

    /// Class tables: `(built, walks answered from one, bytes held)`.
    #[getter]
    fn table_stats(&self) -> (u64, u64, usize) {
        let f = self.filler();
        (f.tables.built, f.tables.answered, f.tables.bytes())
    }

    /// Entries stored.
    #[getter]
    fn n_entries(&self) -> usize {
        self.filler().n_entries()
    }

    /// Bytes the stored entries account for.
    #[getter]
    fn store_bytes(&self) -> usize {
        self.filler().store_bytes()
    }

    /// Times the store was dropped for size.
    #[getter]
    fn resets(&self) -> u64 {
        self.filler().resets
    }
}

fn check_node(rt: &ParserRuntime, node: NodeId) -> PyResult<()> {
    if node as usize >= rt.n_nodes() {
        return Err(PyValueError::new_err(format!(
            "node {node} out of range ({} nodes)",
            rt.n_nodes()
        )));
    }
    Ok(())
}

type LalrOut<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize, u32, u32);

/// LALR(1) tables of a grammar given by symbol ids (terminals `0..n_terminals`, `$END` =
/// `n_terminals`, nonterminal `k` = `n_terminals + 1 + k`); `rules` are `(lhs, rhs)` with
/// `lhs` a nonterminal index. Returns `(action_i32_le, goto_i32_le, n_states, start_state,
/// end_state)` with canonical state numbering. Raises `ValueError` on a conflict, on a
/// grammar whose lookaheads lark would compute order-dependently, or on bad input.
#[pyfunction]
fn build_lalr<'py>(
    py: Python<'py>,
    n_terminals: usize,
    n_nonterminals: usize,
    rules: Vec<(u32, Vec<u32>)>,
    start: u32,
) -> PyResult<LalrOut<'py>> {
    let prods: Vec<Production> = rules
        .into_iter()
        .map(|(lhs, rhs)| Production { lhs, rhs })
        .collect();
    let t = py
        .detach(|| lalr::build(n_terminals, n_nonterminals, &prods, start))
        .map_err(value_err)?;
    let le = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    Ok((
        PyBytes::new(py, &le(&t.action)),
        PyBytes::new(py, &le(&t.goto)),
        t.n_states,
        t.start_state,
        t.end_state,
    ))
}

/// Copy finished mask rows into one step's bitmask in one GIL-released call: row
/// `rows[k]` of `out` (a writable C-contiguous 2-d int32 buffer) becomes `sources[k]` (a
/// C-contiguous int32 buffer no wider than a row) followed by zeros. Everything is checked
/// before a word is written; a source overlapping `out` is refused.
#[pyfunction]
fn copy_rows(
    py: Python<'_>,
    sources: Vec<Bound<'_, PyAny>>,
    out: &Bound<'_, PyAny>,
    rows: Vec<usize>,
) -> PyResult<()> {
    let ob = PyBuffer::<i32>::get(out)?;
    if ob.readonly() || !ob.is_c_contiguous() || ob.dimensions() != 2 {
        return Err(PyValueError::new_err(
            "out must be a writable C-contiguous 2-d int32 buffer",
        ));
    }
    let width = ob.shape()[1];
    let total = ob.item_count();
    let mut srcs = Vec::with_capacity(sources.len());
    for s in &sources {
        let b = PyBuffer::<i32>::get(s)?;
        if !b.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "sources must be C-contiguous int32 buffers",
            ));
        }
        srcs.push(b);
    }
    let lens: Vec<usize> = srcs.iter().map(|b| b.item_count()).collect();
    check_rows(total, width, &rows, &lens).map_err(value_err)?;
    if rows.is_empty() {
        return Ok(());
    }
    let out_lo = ob.buf_ptr() as usize;
    let out_hi = out_lo + total * std::mem::size_of::<i32>();
    let mut addrs = Vec::with_capacity(srcs.len());
    for (k, (b, &n)) in srcs.iter().zip(&lens).enumerate() {
        let lo = b.buf_ptr() as usize;
        let hi = lo + n * std::mem::size_of::<i32>();
        if n > 0 && lo < out_hi && out_lo < hi {
            return Err(PyValueError::new_err(format!("source {k} overlaps out")));
        }
        addrs.push((lo, n));
    }
    py.detach(|| {
        // SAFETY: `ob` and `srcs` hold buffer exports for the whole call, so the memory
        // stays allocated; the buffers are int32, C-contiguous and aligned (checked by
        // PyBuffer::get) with the item counts used here; the sources do not overlap `out`
        // (checked above), so the one mutable slice aliases nothing.
        let out = unsafe { std::slice::from_raw_parts_mut(out_lo as *mut i32, total) };
        let s: Vec<&[i32]> = addrs
            .iter()
            .map(|&(a, n)| {
                if n == 0 {
                    &[][..]
                } else {
                    unsafe { std::slice::from_raw_parts(a as *const i32, n) }
                }
            })
            .collect();
        core_copy_rows(out, width, &rows, &s)
    })
    .map_err(value_err)?;
    drop(srcs);
    drop(ob);
    Ok(())
}

#[pymodule]
fn _kernels(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(build_union_dfa, m)?)?;
    m.add_function(wrap_pyfunction!(dfa_scan, m)?)?;
    m.add_function(wrap_pyfunction!(build_lalr, m)?)?;
    m.add_class::<ScanDfa>()?;
    m.add_class::<TokenTrieArrays>()?;
    m.add_class::<TrieWalker>()?;
    m.add_class::<ParserKernel>()?;
    m.add_class::<MaskFiller>()?;
    m.add_function(wrap_pyfunction!(copy_rows, m)?)?;
    m.add("DEFAULT_MAX_STATES", DEFAULT_MAX_STATES)?;
    m.add("DEAD_STATE", grid_sql_core::lexer::DEAD)?;
    m.add("START_STATE", grid_sql_core::lexer::START)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
