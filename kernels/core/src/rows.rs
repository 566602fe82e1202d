//! Batched row fill: copy many finished mask rows into one step's bitmask at once.
//!
//! A serving step fills one bitmask row per constrained request. For a warm request the row
//! is already known (a guide's warm record or structural memo holds the finished words), so
//! the step's work is moving `n` rows of `n_words` into the engine's `[rows, width]` buffer.
//! Doing that row by row from Python pays an interpreter round trip and a slice view per
//! row; [`copy_rows`] does the whole step in one call (the pyo3 glue runs it with the GIL
//! released, so an engine thread is never held by it). Rows are written exactly as the
//! per-row fill writes them: the source words, then zeros up to the row width.

use std::fmt;

/// Bad input to [`copy_rows`] (mapped to `ValueError` by the Python glue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowsError {
    /// `out.len()` is not a multiple of the row width (or the width is zero).
    Shape { len: usize, width: usize },
    /// A destination row index past the buffer's rows.
    RowOutOfRange { row: usize, n_rows: usize },
    /// A source row wider than the destination rows.
    SourceTooWide {
        index: usize,
        len: usize,
        width: usize,
    },
    /// Different numbers of destination rows and sources.
    Count { rows: usize, sources: usize },
}

impl fmt::Display for RowsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowsError::Shape { len, width } => {
                write!(
                    f,
                    "buffer of {len} words is not whole rows of width {width}"
                )
            }
            RowsError::RowOutOfRange { row, n_rows } => {
                write!(f, "row {row} out of range for a buffer of {n_rows} rows")
            }
            RowsError::SourceTooWide { index, len, width } => {
                write!(f, "source {index} has {len} words, rows hold {width}")
            }
            RowsError::Count { rows, sources } => {
                write!(f, "{rows} destination rows but {sources} sources")
            }
        }
    }
}

impl std::error::Error for RowsError {}

/// Check a batch before any word is written (so a bad batch leaves `out` untouched).
pub fn check_rows(
    out_len: usize,
    width: usize,
    rows: &[usize],
    src_lens: &[usize],
) -> Result<(), RowsError> {
    if width == 0 || out_len % width != 0 {
        return Err(RowsError::Shape {
            len: out_len,
            width,
        });
    }
    if rows.len() != src_lens.len() {
        return Err(RowsError::Count {
            rows: rows.len(),
            sources: src_lens.len(),
        });
    }
    let n_rows = out_len / width;
    for (k, (&r, &len)) in rows.iter().zip(src_lens).enumerate() {
        if r >= n_rows {
            return Err(RowsError::RowOutOfRange { row: r, n_rows });
        }
        if len > width {
            return Err(RowsError::SourceTooWide {
                index: k,
                len,
                width,
            });
        }
    }
    Ok(())
}

/// Row `rows[k]` of `out` (row-major, `width` words per row) becomes `srcs[k]` followed by
/// zeros. A row named twice ends as its last source. Validates everything first.
pub fn copy_rows(
    out: &mut [i32],
    width: usize,
    rows: &[usize],
    srcs: &[&[i32]],
) -> Result<(), RowsError> {
    let lens: Vec<usize> = srcs.iter().map(|s| s.len()).collect();
    check_rows(out.len(), width, rows, &lens)?;
    for (&r, src) in rows.iter().zip(srcs) {
        let row = &mut out[r * width..(r + 1) * width];
        row[..src.len()].copy_from_slice(src);
        row[src.len()..].fill(0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_zeroes_the_tail() {
        let mut out = vec![-1i32; 12];
        let a = [1, 2, 3];
        let b = [7, 8];
        copy_rows(&mut out, 4, &[2, 0], &[&a, &b]).unwrap();
        assert_eq!(out, vec![7, 8, 0, 0, -1, -1, -1, -1, 1, 2, 3, 0]);
    }

    #[test]
    fn last_write_wins_for_a_repeated_row() {
        let mut out = vec![0i32; 4];
        copy_rows(&mut out, 2, &[1, 1], &[&[1, 1], &[2]]).unwrap();
        assert_eq!(out, vec![0, 0, 2, 0]);
    }

    #[test]
    fn bad_batches_leave_the_buffer_untouched() {
        let mut out = vec![5i32; 6];
        let e = copy_rows(&mut out, 3, &[0, 2], &[&[1], &[2]]).unwrap_err();
        assert_eq!(e, RowsError::RowOutOfRange { row: 2, n_rows: 2 });
        let e = copy_rows(&mut out, 3, &[0, 1], &[&[1], &[1, 2, 3, 4]]).unwrap_err();
        assert_eq!(
            e,
            RowsError::SourceTooWide {
                index: 1,
                len: 4,
                width: 3
            }
        );
        assert_eq!(
            copy_rows(&mut out, 4, &[], &[]).unwrap_err(),
            RowsError::Shape { len: 6, width: 4 }
        );
        assert_eq!(
            copy_rows(&mut out, 3, &[0], &[]).unwrap_err(),
            RowsError::Count {
                rows: 1,
                sources: 0
            }
        );
        assert_eq!(out, vec![5; 6]);
    }
}
