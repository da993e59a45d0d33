//! Determinantal point processes: exact samplers, kernels made discrete, greedy log-det selection.
//!
//! Everything is built around one loop, [`pivot::run`]: a residual-diagonal pivoted Cholesky on a
//! rank-p factor (or a full kernel) whose pivot rule is one of three modes — sample ∝ residual (the
//! exact chain rule of a projection DPP), argmax (greedy MAP / entropy selection) and accept/reject
//! proposals from a guide table over leverage scores (repeated projection samples at a per-sample
//! cost independent of N). Around it:
//! - [`ortho`]: orthonormalisation of N×p features by blocked Cholesky-QR (never N×N), leverage
//!   scores, the exact variance of a weighted linear statistic;
//! - [`ensemble`]: L-ensembles (full kernel or low-rank features through the dual kernel) and k-DPPs
//!   with log-space elementary symmetric polynomials;
//! - [`kernels`]: Haar/stratified partitions with arbitrary cell counts, periodised tensor Daubechies
//!   wavelets from in-house filters, Jacobi/Legendre orthogonal-polynomial ensembles;
//! - [`greedy`]: entropy and mutual-information (Krause et al.) selection on a covariance matrix.
//!
//! Randomness: sample `s` of a call seeded with `seed` draws from `rng::stream(seed, s)`, so every
//! result is identical on any number of threads.
pub mod ensemble;
pub mod guide;
pub mod greedy;
pub mod kernels;
pub mod ortho;
pub mod pivot;
pub mod projection;

pub use guide::GuideTable;
pub use pivot::{Mode, PivotPath};

use rayon::prelude::*;

/// `f(s)` for samples number `offset .. offset + count`, in parallel over samples (each draws from
/// its own stream, so the order of evaluation does not matter). A single sample runs on the calling
/// thread: handing it to a pool worker costs about a millisecond of wake-up, more than the sample.
pub(crate) fn per_sample<R: Send>(offset: usize, count: usize, f: impl Fn(u64) -> R + Sync + Send) -> Vec<R> {
    if count == 1 {
        return vec![f(offset as u64)];
    }
    (offset as u64..(offset + count) as u64).into_par_iter().map(f).collect()
}
