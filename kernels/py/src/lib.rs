//! pyo3 glue for `grid_sql._kernels`. No logic lives here: argument conversion, error
//! mapping (`LexerError` -> `ValueError`) and releasing the GIL around long calls. The
//! contract is `grid_sql/_kernels.pyi`, checked by `python -m mypy.stubtest`.

use grid_sql_core::lexer::{BuildConfig, UnionDfa, DEFAULT_MAX_STATES};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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

#[pymodule]
fn _kernels(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(build_union_dfa, m)?)?;
    m.add_function(wrap_pyfunction!(dfa_scan, m)?)?;
    m.add("DEFAULT_MAX_STATES", DEFAULT_MAX_STATES)?;
    m.add("DEAD_STATE", grid_sql_core::lexer::DEAD)?;
    m.add("START_STATE", grid_sql_core::lexer::START)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
