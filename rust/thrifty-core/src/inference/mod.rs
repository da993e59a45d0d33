//! Supervised-subspace inference: held-out OLS refits of a supervised subspace (PLS1, supervised PCA,
//! ridge probe, fixed or per-split bases) scored by the held-out Pearson r, with the Nadeau–Bengio
//! corrected t-test on Fisher-z (`nb`), its permutation twin with splits held fixed (`perm`), the
//! pre-run gate, built-in baselines (`baselines`) and varimax rotation (`varimax`).
//!
//! Layers (each imports only those listed before it): `special`, `splits` (split and permutation
//! primitives), `route` (gate rules, scaling, learner rule, method resolution) and `fit` at the
//! bottom; then `nb`, `perm` and `baselines`; then `pls2` and `blocks`; `run` (the whole test, which
//! the C ABI and the Python layer call) on top.
//!
//! Formulas: `shared/reference/pls.md`. Every random choice comes from `rng::stream(seed, task)`
//! (split j: task j; permutation b: task `splits::PERM_STREAM + b`; folds: `baselines::FOLD_STREAM`),
//! and parallel work is combined in a fixed order, so results do not depend on the thread count.
// `!(x > tol)` is the NaN-safe guard of this module (true for NaN), lane loops index fixed-size
// accumulators on purpose, and the special-function coefficients are quoted as published.
#![allow(clippy::neg_cmp_op_on_partial_ord, clippy::needless_range_loop, clippy::excessive_precision)]
pub mod baselines;
pub mod blocks;
pub mod fit;
pub mod intervals;
pub mod nb;
pub mod perm;
pub mod pls2;
pub mod plssvd;
pub mod route;
pub mod run;
pub mod select;
pub mod special;
pub mod splits;
pub mod spls;
pub mod stability;
pub mod varimax;

#[cfg(test)]
mod tests;

pub use fit::{Data, Learner, Rotation, Spec};
pub use nb::{gate, nb_test, split_correlations, NbResult};
pub use perm::{nb_permutation_null, Route};
pub use route::Gate;
pub use splits::{draw_splits, permutation_p, splits_from_train, Split};
