//! grid-sql-core: the pure-Rust kernels of grid-sql.
//!
//! No Python in here (the pyo3 glue lives in `kernels/py`), so everything is tested by
//! `cargo test` alone. Conventions follow `docs/design/foundation.md`: lexemes are byte
//! strings and terminal regexes have byte semantics (`unicode(false)`, `utf8(false)`).
//!
//! Modules:
//! - [`lexer`]: the union lexer DFA (paper §2 L1, §4.1) — one deterministic automaton over
//!   all terminals, with per-state `accept` and `live` pattern bitsets.
//! - [`fingerprint`]: hex BLAKE2b-256 of canonical byte encodings (design §5).
//! - [`lalr`]: LALR(1) table construction (lark's analysis, canonical state numbering).
//! - [`fxhash`]: the hasher of the kernels' internal maps and sets.
//! - [`scan`]: the scan tables a walk steps through (union DFA, lexicons, resolution).
//! - [`walk`]: the cold token-trie walk (paper §4.1–§4.2): CI ids and CD residue of a key.
//! - [`classes`]: scan-signature class tables: a cold walk as class tests + row ORs.
//! - [`fill`]: the whole mask fill of a configuration (root entry, CD residue, row).
//! - [`rows`]: one step's finished mask rows copied into the engine's bitmask in one call.
//! - [`runtime`]: the LALR(1) parser runtime (paper §2–§3): interned stack arena, allowed
//!   sets memoized per node, shift/reduce, the incremental scanner's advance.

pub mod classes;
pub mod fill;
pub mod fingerprint;
pub mod fxhash;
pub mod lalr;
pub mod lexer;
pub mod rows;
pub mod runtime;
pub mod scan;
pub mod walk;

pub use lexer::{BuildConfig, LexerError, UnionDfa};
