//! Exact sampling of projection DPPs K = UUᵀ (U n×p with orthonormal columns), one independent RNG
//! stream per sample, in parallel.
use super::guide::GuideTable;
use super::ortho;
use super::pivot::{self, FactorState, Mode};
use crate::error::{ensure_matrix, Result, ThriftyError};
use crate::rng;

/// Which pivot rule draws the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Chain rule with a full residual update per step: O(n·p²) per sample.
    Chain,
    /// Accept/reject proposals from the leverage guide table: O(p³ log p) per sample after an O(np)
    /// setup.
    AcceptReject,
}

/// A validated projection kernel with its leverage scores and their guide table.
pub struct Projection {
    pub n: usize,
    pub p: usize,
    pub leverage: Vec<f64>,
    table: GuideTable,
}

/// Rank tolerance of the samplers (relative residual treated as zero).
pub const TOL: f64 = 1e-10;

impl Projection {
    /// `check_tol`: maximal |UᵀU − I| accepted (None skips the O(np²) check, for bases that come
    /// from [`ortho::orthonormalize`]).
    pub fn new<T: ortho::Dense>(u: &[T], n: usize, p: usize, check_tol: Option<f64>) -> Result<Self> {
        ensure_matrix("U", u, n, p)?;
        // One pass: a leverage score is finite iff its row is (finiteness check and K_ii together).
        let leverage = ortho::leverage(u, n, p);
        if leverage.iter().any(|l| !l.is_finite()) {
            return Err(ThriftyError::NotFinite { arg: "U" });
        }
        if p > n {
            return Err(ThriftyError::shape("U", format!("has more columns ({p}) than rows ({n}); columns cannot be orthonormal")));
        }
        if let Some(tol) = check_tol {
            let err = ortho::orthonormality_error(u, n, p);
            if !(err <= tol) {
                return Err(ThriftyError::invalid(
                    "U",
                    format!("columns are not orthonormal (max |UᵀU − I| = {err:.3e} > {tol:.1e}); use orthonormalize(U) first"),
                ));
            }
        }
        let table = GuideTable::new(&leverage)?;
        Ok(Projection { n, p, leverage, table })
    }

    /// One sample of exactly p items from stream (seed, task); `u` must be the matrix given to `new`.
    pub fn sample<T: ortho::Dense>(&self, u: &[T], method: Method, seed: u64, task: u64) -> Result<Vec<usize>> {
        if u.len() != self.n * self.p {
            return Err(ThriftyError::shape("U", "does not match the sampler's shape"));
        }
        let mut r = rng::stream(seed, task);
        let mut st = FactorState::new(u, self.n, self.p, &self.leverage);
        let mode = match method {
            Method::Chain => Mode::Sample(&mut r),
            Method::AcceptReject => Mode::AcceptReject(&mut r, &self.table),
        };
        Ok(pivot::run(&mut st, mode, self.p, TOL)?.items)
    }

    /// `count` samples; sample s uses stream (seed, s), so the result is thread-count independent.
    pub fn sample_many<T: ortho::Dense>(&self, u: &[T], count: usize, method: Method, seed: u64) -> Result<Vec<Vec<usize>>> {
        self.sample_range(u, 0, count, method, seed)
    }

    /// Samples number `offset .. offset + count` of the family seeded by `seed` (for chunked calls).
    pub fn sample_range<T: ortho::Dense>(&self, u: &[T], offset: usize, count: usize, method: Method, seed: u64) -> Result<Vec<Vec<usize>>> {
        super::per_sample(offset, count, |s| self.sample(u, method, seed, s)).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_have_rank_many_distinct_items_and_right_marginals() {
        let (n, p) = (15, 4);
        let mut r = rng::stream(9, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let (u, rank) = ortho::orthonormalize(&x, n, p, 1e-8).unwrap();
        assert_eq!(rank, p);
        let proj = Projection::new(&u, n, p, Some(1e-8)).unwrap();
        for method in [Method::Chain, Method::AcceptReject] {
            let s = proj.sample_many(&u, 20_000, method, 11).unwrap();
            let mut counts = vec![0usize; n];
            for smp in &s {
                let mut t = smp.clone();
                t.sort();
                t.dedup();
                assert_eq!(t.len(), p);
                for &i in smp {
                    counts[i] += 1;
                }
            }
            for i in 0..n {
                let pi = proj.leverage[i];
                let sd = (pi * (1.0 - pi) / 20_000.0).sqrt();
                assert!((counts[i] as f64 / 20_000.0 - pi).abs() < 5.0 * sd + 1e-9, "{method:?} item {i}");
            }
            // Same seed, same samples (and thread-count independence follows from per-sample streams).
            assert_eq!(proj.sample_many(&u, 5, method, 11).unwrap(), s[..5].to_vec());
        }
        let bad: Vec<f64> = x.clone();
        assert!(Projection::new(&bad, n, p, Some(1e-8)).is_err());
    }
}
