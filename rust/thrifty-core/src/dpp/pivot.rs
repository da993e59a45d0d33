//! The one loop: residual-diagonal pivoted Cholesky with three pivot rules.
//!
//! State: the items chosen so far, A, and the residual diagonal d_i = K_ii − K_iA K_AA⁻¹ K_Ai (the
//! conditional variance of item i given A, i.e. the Schur complement). Each step picks a pivot j,
//! conditions on it, and updates d. The pivot rule is the [`Mode`]:
//! - `Sample`: j with probability d_j / Σd (the exact chain rule of a projection DPP; Σd is the
//!   *actual* sum after clamping, so the probabilities always sum to one);
//! - `Argmax`: j = argmax d (greedy MAP / entropy selection; log det K_AA = Σ log d_pivot);
//! - `AcceptReject`: propose j from a guide table over the leverage scores ℓ_j = K_jj, accept with
//!   probability d_j/ℓ_j (Barthelmé–Tremblay–Amblard 2023). Only d_j of the proposals is computed,
//!   so the cost per sample does not depend on N.
//!
//! Two states implement the conditioning: [`FactorState`] for K = VVᵀ with V an n×p factor (an
//! orthonormal basis of the chosen rows in R^p, built by classical Gram–Schmidt applied twice, the
//! re-orthogonalisation guard), and [`KernelState`] for a full symmetric n×n kernel (columns of the
//! Cholesky factor). Guards: residuals clamped at 0, renormalisation by the actual sum, a rank
//! tolerance below which the loop stops (argmax) or a residual is treated as 0 (sampling).
//!
//! This file holds the loop and its three rules; the states live in `pivot/factor.rs` and
//! `pivot/kernel.rs`.
use super::check_cancel;
use super::guide::GuideTable;
use crate::error::{Result, ThriftyError};
use crate::rng::{self, Stream};
use std::sync::atomic::AtomicBool;

mod factor;
mod kernel;

pub use factor::FactorState;
pub use kernel::KernelState;

/// Conditioning state of the loop.
pub trait PivotState: Sync {
    fn n(&self) -> usize;
    /// Initial residual diagonal (K_ii), allocated fallibly.
    fn diagonal(&self) -> Result<Vec<f64>>;
    /// K_ii of one item.
    fn diagonal_at(&self, i: usize) -> f64;
    /// Current residual of item i (O(p·t) for a factor, O(t) for a kernel).
    fn residual(&self, i: usize) -> f64;
    /// Residuals of several items at once (a GEMM for a factor).
    fn residuals(&self, idx: &[usize], out: &mut [f64]) {
        for (o, &i) in out.iter_mut().zip(idx) {
            *o = self.residual(i);
        }
    }
    /// Condition on item j; returns its residual before conditioning (the Cholesky pivot), or
    /// `None` if it is numerically zero (below `tol`).
    fn add(&mut self, j: usize, tol: f64) -> Option<f64>;
    /// d_i ← max(d_i − c_i², 0) for the newest Cholesky column c.
    fn update(&self, d: &mut [f64]);
    /// Accept/reject hint that more than half of the rank is chosen: a factor state then switches
    /// to a basis of the orthogonal complement, so a residual costs O(p·(p−t)) instead of O(p·t).
    /// After the switch only `residual(s)` and `add` are valid (not `update`).
    fn use_complement(&mut self) {}
}

/// The pivot rule of [`run`].
pub enum Mode<'a> {
    Sample(&'a mut Stream),
    Argmax,
    AcceptReject(&'a mut Stream, &'a GuideTable),
}

/// The chosen items in order and their pivots (conditional variances); log det K_AA = Σ ln pivot.
///
/// `pivot_exponent` is 0 unless the loop ran on an input rescaled by a power of two (features far
/// outside 2^±200, whose squares over- or underflow): the conditional variances are then
/// `pivots · 2^pivot_exponent` ([`PivotPath::conditional_variances`], which may be ±0 or inf where
/// they are not representable), and [`PivotPath::log_det`] adds the exponent exactly.
#[derive(Clone, Debug, Default)]
pub struct PivotPath {
    pub items: Vec<usize>,
    pub pivots: Vec<f64>,
    pub pivot_exponent: i32,
}

impl PivotPath {
    pub fn log_det(&self) -> f64 {
        let sum: f64 = self.pivots.iter().map(|p| p.ln()).sum();
        if self.pivot_exponent == 0 {
            return sum;
        }
        sum + self.pivots.len() as f64 * self.pivot_exponent as f64 * std::f64::consts::LN_2
    }

    /// The conditional variances in the input's units (`pivots` unless the input was rescaled).
    pub fn conditional_variances(&self) -> Vec<f64> {
        let e = self.pivot_exponent;
        self.pivots.iter().map(|&v| crate::dpp::ortho::pow2_scale(v, -e)).collect()
    }
}

/// Run the loop for at most `k` steps. `tol` is the relative rank tolerance: argmax stops when the
/// largest residual is below `tol · max K_ii`; sampling treats such residuals as zero. The
/// `AcceptReject` mode needs a state whose diagonal is the guide table's weights and a projection
/// kernel (residuals ≤ leverage); it fails with a numerical error instead of looping forever.
/// Every step first checks `cancel` (`Err(Interrupted)` once raised).
pub fn run<S: PivotState>(state: &mut S, mode: Mode<'_>, k: usize, tol: f64, cancel: &AtomicBool) -> Result<PivotPath> {
    match mode {
        Mode::AcceptReject(rng, table) => accept_reject(state, rng, table, k, tol, cancel),
        Mode::Sample(rng) => chain_rule(state, rng, k, tol, cancel),
        Mode::Argmax => argmax(state, k, tol, cancel),
    }
}

/// Condition on `j` and record it; `false` when its residual is numerically zero.
fn take<S: PivotState>(state: &mut S, path: &mut PivotPath, j: usize, tol: f64) -> bool {
    match state.add(j, tol) {
        Some(piv) => {
            path.items.push(j);
            path.pivots.push(piv);
            true
        }
        None => false,
    }
}

/// Proposals from the guide table over the leverage scores, accepted with probability d_j/ℓ_j.
/// A projection of rank k has Σ K_ii = k; nothing of size n is touched per sample.
fn accept_reject<S: PivotState>(
    state: &mut S,
    rng: &mut Stream,
    table: &GuideTable,
    k: usize,
    tol: f64,
    cancel: &AtomicBool,
) -> Result<PivotPath> {
    let draw = |b: usize, idx: &mut Vec<usize>, us: &mut Vec<f64>| {
        for _ in 0..b {
            idx.push(table.draw(rng));
            us.push(rng::uniform(rng));
        }
        true
    };
    accept_reject_with(state, k, tol, cancel, draw)?
        .ok_or_else(|| ThriftyError::numerical("accept/reject sampler", "the proposal stream ended"))
}

/// The accept/reject loop over a stream of proposals: `propose(b, idx, us)` appends the next `b`
/// (item, acceptance uniform) pairs to the empty `idx` and `us`, or returns `false` when the stream
/// has run out (then `Ok(None)`). The single-machine sampler draws them from the guide table; the
/// distributed one ([`super::remote`]) replays pairs drawn up front over fetched rows: one loop, so
/// both consume the pairs in the same batches and give the same sample bit for bit.
pub fn accept_reject_with<S: PivotState>(
    state: &mut S,
    k: usize,
    tol: f64,
    cancel: &AtomicBool,
    mut propose: impl FnMut(usize, &mut Vec<usize>, &mut Vec<f64>) -> bool,
) -> Result<Option<PivotPath>> {
    let mut path = PivotPath::default();
    let rank = k as f64;
    let max_prop = 1000 * (k + 1) + 10_000;
    let mut idx: Vec<usize> = Vec::with_capacity(256);
    let mut us: Vec<f64> = Vec::with_capacity(256);
    let mut res = vec![0.0; 256];
    while path.items.len() < k {
        check_cancel(cancel)?;
        if 2 * path.items.len() >= k {
            state.use_complement();
        }
        let t = path.items.len() as f64;
        // Proposals are i.i.d.; draw a batch sized to the expected number needed (rank/(rank − t))
        // and take the first accepted one. Unused draws are discarded, which leaves the
        // distribution of the accepted item ∝ ℓ_j · d_j/ℓ_j = d_j.
        let expect = rank / (rank - t).max(1.0);
        let b = ((0.5 * expect).ceil() as usize).clamp(1, 256);
        let mut tries = 0usize;
        'step: loop {
            if tries > max_prop {
                return Err(ThriftyError::numerical(
                    "accept/reject sampler",
                    "no proposal accepted: the basis is not orthonormal or k exceeds the rank",
                ));
            }
            idx.clear();
            us.clear();
            if !propose(b, &mut idx, &mut us) {
                return Ok(None);
            }
            if idx.len() != b || us.len() != b {
                return Err(ThriftyError::shape("proposals", format!("expected a batch of {b} pairs")));
            }
            state.residuals(&idx, &mut res[..b]);
            tries += b;
            for a in 0..b {
                let j = idx[a];
                if us[a] * state.diagonal_at(j) < res[a] && take(state, &mut path, j, tol) {
                    break 'step;
                }
            }
        }
    }
    Ok(Some(path))
}

/// The chain rule: j with probability d_j / Σd, Σd the actual sum after clamping (so the
/// probabilities always sum to one), then a full residual update.
fn chain_rule<S: PivotState>(
    state: &mut S,
    rng: &mut Stream,
    k: usize,
    tol: f64,
    cancel: &AtomicBool,
) -> Result<PivotPath> {
    let n = state.n();
    let mut path = PivotPath::default();
    let mut d = state.diagonal()?;
    let scale = d.iter().cloned().fold(0.0, f64::max);
    let floor = tol * scale;
    while path.items.len() < k {
        check_cancel(cancel)?;
        for v in d.iter_mut() {
            if !(*v > floor) {
                *v = 0.0;
            }
        }
        let total: f64 = d.iter().sum();
        if !(total > 0.0) {
            return Err(ThriftyError::numerical(
                "projection sampler",
                format!("residuals vanished after {} of {k} items (k exceeds the numerical rank)", path.items.len()),
            ));
        }
        let u = rng::uniform(rng) * total;
        let mut acc = 0.0;
        let mut j = n;
        for (i, &v) in d.iter().enumerate() {
            if v > 0.0 {
                acc += v;
                j = i;
                if acc > u {
                    break;
                }
            }
        }
        if take(state, &mut path, j, tol) {
            state.update(&mut d);
        }
        d[j] = 0.0;
    }
    Ok(path)
}

/// Greedy argmax of the residual; stops at the numerical rank (largest residual ≤ tol · max K_ii).
fn argmax<S: PivotState>(state: &mut S, k: usize, tol: f64, cancel: &AtomicBool) -> Result<PivotPath> {
    let n = state.n();
    let mut path = PivotPath::default();
    let mut d = state.diagonal()?;
    let scale = d.iter().cloned().fold(0.0, f64::max);
    while path.items.len() < k.min(n) {
        check_cancel(cancel)?;
        let (j, dj) = d.iter().enumerate().fold((n, f64::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        if j == n || !(dj > tol * scale) || dj <= 0.0 {
            break;
        }
        if take(state, &mut path, j, tol) {
            state.update(&mut d);
        }
        d[j] = 0.0;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(m: &[f64], k: usize) -> f64 {
        let mut a = m.to_vec();
        let mut d = 1.0;
        for c in 0..k {
            let piv = (c..k).max_by(|&x, &y| a[x * k + c].abs().partial_cmp(&a[y * k + c].abs()).unwrap()).unwrap();
            if a[piv * k + c] == 0.0 {
                return 0.0;
            }
            if piv != c {
                for j in 0..k {
                    a.swap(c * k + j, piv * k + j);
                }
                d = -d;
            }
            d *= a[c * k + c];
            for r in c + 1..k {
                let f = a[r * k + c] / a[c * k + c];
                for j in c..k {
                    a[r * k + j] -= f * a[c * k + j];
                }
            }
        }
        d
    }

    #[test]
    fn argmax_is_greedy_log_det_on_factor_and_kernel() {
        let (n, p) = (9, 4);
        let mut r = rng::stream(5, 0);
        let v: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let lev: Vec<f64> = (0..n).map(|i| (0..p).map(|c| v[i * p + c].powi(2)).sum()).collect();
        let kfull: Vec<f64> =
            (0..n * n).map(|ij| (0..p).map(|c| v[(ij / n) * p + c] * v[(ij % n) * p + c]).sum()).collect();
        let a = run(&mut FactorState::new(&v, n, p, &lev), Mode::Argmax, 3, 1e-12, crate::dpp::never()).unwrap();
        let b = run(&mut KernelState::new(&kfull, n), Mode::Argmax, 3, 1e-12, crate::dpp::never()).unwrap();
        assert_eq!(a.items, b.items);
        // Brute-force greedy on determinants.
        let mut chosen: Vec<usize> = Vec::new();
        for _ in 0..3 {
            let best = (0..n)
                .filter(|i| !chosen.contains(i))
                .max_by(|&x, &y| {
                    let f = |c: usize| {
                        let mut s = chosen.clone();
                        s.push(c);
                        let k = s.len();
                        let sub: Vec<f64> = (0..k * k).map(|t| kfull[s[t / k] * n + s[t % k]]).collect();
                        det(&sub, k)
                    };
                    f(x).partial_cmp(&f(y)).unwrap()
                })
                .unwrap();
            chosen.push(best);
        }
        assert_eq!(a.items, chosen);
        let k = 3;
        let sub: Vec<f64> = (0..k * k).map(|t| kfull[chosen[t / k] * n + chosen[t % k]]).collect();
        assert!((a.log_det() - det(&sub, k).ln()).abs() < 1e-10);
        // Stops at the rank.
        let full = run(&mut FactorState::new(&v, n, p, &lev), Mode::Argmax, n, 1e-10, crate::dpp::never()).unwrap();
        assert_eq!(full.items.len(), p);
    }
}
