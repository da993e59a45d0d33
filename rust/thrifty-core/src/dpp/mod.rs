//! Determinantal point processes: exact samplers, kernels made discrete, greedy log-det selection.
//!
//! Everything is built around one loop, [`pivot::run`]: a residual-diagonal pivoted Cholesky on a
//! rank-p factor (or a full kernel) whose pivot rule is one of three modes — sample ∝ residual (the
//! exact chain rule of a projection DPP), argmax (greedy MAP / entropy selection) and accept/reject
//! proposals from a guide table over leverage scores (repeated projection samples at a per-sample
//! cost independent of N). Around it:
//! - [`ortho`]: orthonormalisation of N×p features by blocked Cholesky-QR (never N×N), leverage
//!   scores, the exact variance of a weighted linear statistic, the O(Np) randomized check;
//! - [`ensemble`]: L-ensembles (full kernel or low-rank features through the dual kernel) and k-DPPs
//!   with log-space elementary symmetric polynomials;
//! - [`kernels`]: Haar/stratified partitions with arbitrary cell counts, periodised tensor Daubechies
//!   wavelets from in-house filters, Jacobi/Legendre orthogonal-polynomial ensembles;
//! - [`greedy`]: entropy and mutual-information (Krause et al.) selection on a covariance matrix.
//!
//! Randomness: sample `s` of a call seeded with `seed` draws from `rng::stream(seed, s)`, so every
//! result is identical on any number of threads.
//!
//! Safety: every long loop checks a cancel flag (Ctrl-C in Python) between samples or pivot steps,
//! and every buffer whose size the caller chooses is allocated with [`try_zeroed`], so an absurd size
//! is an `Err` naming the argument, never Rust's allocation-failure abort.
pub mod ensemble;
pub mod greedy;
pub mod guide;
pub mod kernels;
pub mod ortho;
pub mod pivot;
pub mod projection;
pub mod remote;
pub mod scan;
pub mod tsqr;

pub use guide::GuideTable;
pub use pivot::{Mode, PivotPath};

use crate::error::{Result, ThriftyError};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// `Err(Interrupted)` once the caller raised `cancel`.
#[inline]
pub fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(ThriftyError::Interrupted)
    } else {
        Ok(())
    }
}

/// A flag that is never raised (for callers without cancellation).
pub fn never() -> &'static AtomicBool {
    static NEVER: AtomicBool = AtomicBool::new(false);
    &NEVER
}

pub use crate::alloc::try_zeroed;

/// `rows · cols` as a checked product (an `Err` naming `arg` on overflow).
pub fn checked_size(arg: &'static str, rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .ok_or_else(|| ThriftyError::invalid(arg, format!("{rows} × {cols} overflows the address space")))
}

/// Samples number `offset .. offset + count`, each exactly `width` items, written row by row into one
/// flat buffer (allocated fallibly). `f(s, row)` fills row s; samples run in parallel (each draws
/// from its own stream, so the order of evaluation does not matter) and stop early once `cancel` is
/// raised. A single sample runs on the calling thread: handing it to a pool worker costs about a
/// millisecond of wake-up, more than the sample.
pub(crate) fn per_sample_flat(
    offset: usize,
    count: usize,
    width: usize,
    cancel: &AtomicBool,
    f: impl Fn(u64, &mut [usize]) -> Result<()> + Sync + Send,
) -> Result<Vec<usize>> {
    let mut out = try_zeroed::<usize>("n_samples", checked_size("n_samples", count, width)?)?;
    if count == 1 {
        check_cancel(cancel)?;
        f(offset as u64, &mut out)?;
        return Ok(out);
    }
    if width == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(width).enumerate().try_for_each(|(s, row)| {
        check_cancel(cancel)?;
        f((offset + s) as u64, row)
    })?;
    Ok(out)
}

/// Samples number `offset .. offset + count` of varying sizes (L-ensembles), in parallel.
pub(crate) fn per_sample_ragged(
    offset: usize,
    count: usize,
    cancel: &AtomicBool,
    f: impl Fn(u64) -> Result<Vec<usize>> + Sync + Send,
) -> Result<Vec<Vec<usize>>> {
    let mut all: Vec<Result<Vec<usize>>> = Vec::new();
    all.try_reserve_exact(count)
        .map_err(|_| ThriftyError::invalid("n_samples", format!("{count} samples cannot be allocated")))?;
    if count == 1 {
        check_cancel(cancel)?;
        return Ok(vec![f(offset as u64)?]);
    }
    // The vector already has the capacity: collecting into it allocates nothing more.
    (0..count)
        .into_par_iter()
        .map(|s| {
            check_cancel(cancel)?;
            f((offset + s) as u64)
        })
        .collect_into_vec(&mut all);
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_errors_not_aborts() {
        assert!(checked_size("n_samples", usize::MAX, 2).is_err());
        let e = per_sample_flat(0, usize::MAX / 4, 100, never(), |_, _| Ok(())).unwrap_err();
        assert!(e.to_string().contains("n_samples"), "{e}");
    }

    #[test]
    fn raised_cancel_stops_sampling() {
        let flag = AtomicBool::new(true);
        assert_eq!(per_sample_flat(0, 10, 2, &flag, |_, _| Ok(())).unwrap_err(), ThriftyError::Interrupted);
        assert_eq!(per_sample_ragged(0, 10, &flag, |_| Ok(vec![])).unwrap_err(), ThriftyError::Interrupted);
    }
}
