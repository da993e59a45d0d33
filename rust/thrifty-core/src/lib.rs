//! thrifty-core: the numerical engine of thrifty, with no Python dependency.
//!
//! One module per capability (`kmeans`, `inference`, `dpp`) over shared numerics (`linalg`, `rng`,
//! `threads`), fallible allocation (`alloc`) and one error type (`error`). Conventions (DESIGN.md): user-input problems are `Err`,
//! randomness comes from `rng::stream(seed, task)`, parallel results are thread-count independent.
// `!(x > tol)` (and `!(a <= b)`) is the NaN-safe guard used throughout the core: it is true for NaN,
// so a NaN residual, norm or pivot takes the failure branch. `partial_cmp` or `<=` would let NaN
// through silently, so clippy's suggestion is declined crate-wide.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod alloc;
pub mod error;
pub mod linalg;
pub mod rng;
pub mod scalar;
pub mod threads;

pub mod dpp;
pub mod inference;
pub mod kmeans;

pub use error::{Result, ThriftyError};
