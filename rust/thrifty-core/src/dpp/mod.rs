//! Determinantal point processes: exact samplers, kernels made discrete, greedy log-det selection.
//!
//! Everything is built around one loop, [`pivot::run`]: a residual-diagonal pivoted Cholesky on a
//! rank-p factor (or a full kernel) whose pivot rule is one of three modes — sample ∝ residual (the
//! exact chain rule of a projection DPP), argmax (greedy MAP / entropy selection) and accept/reject
//! proposals from an alias table over leverage scores (repeated projection samples at a per-sample
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
pub mod alias;
pub mod ensemble;
pub mod greedy;
pub mod kernels;
pub mod ortho;
pub mod pivot;
pub mod projection;

pub use alias::AliasTable;
pub use pivot::{Mode, PivotPath};
