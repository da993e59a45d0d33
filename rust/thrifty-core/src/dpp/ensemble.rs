//! L-ensembles P(S) ∝ det L_S and k-DPPs, through the spectrum of L.
//!
//! Full kernel: eigendecomposition of L (validated symmetric and PSD). Low-rank features Φ (n×d,
//! L = ΦΦᵀ): the thin SVD Φ = UΣWᵀ gives the eigenpairs (U, σ²) of L in O(nd²) — the dual-kernel
//! route, since σ² are the eigenvalues of the d×d dual kernel ΦᵀΦ — without forming n×n.
//! Sampling (spectral HKPV): keep eigenvector c with probability λ_c/(1+λ_c) (DPP) or choose exactly
//! k of them with the elementary symmetric polynomials (k-DPP), then sample the projection DPP
//! spanned by the kept eigenvectors with the pivoted-Cholesky loop. The ESP recursion runs in log
//! space, so it neither overflows nor underflows (N = 10⁴, k = 10³ and condition numbers of 10¹²).
use super::guide::GuideTable;
use super::ortho;
use super::pivot::{self, FactorState, Mode};
use super::try_zeroed;
use crate::error::{ensure_finite, ensure_matrix, Result, ThriftyError};
use crate::linalg;
use crate::rng::{self, Stream};
use crate::scalar::Real;
use std::sync::atomic::AtomicBool;

/// Eigenpairs of L with λ > 0: `v` is n×r row-major with orthonormal columns.
#[derive(Clone, Debug)]
pub struct Spectrum {
    pub v: Vec<f64>,
    pub lam: Vec<f64>,
    pub n: usize,
    pub r: usize,
}

/// Relative size below which an eigenvalue of L counts as zero.
const EIG_RTOL: f64 = 1e-13;

fn build(n: usize, vals: Vec<f64>, vecs: &[f64], ncols: usize, cols: Vec<usize>) -> Result<Spectrum> {
    let r = cols.len();
    let mut v = try_zeroed("the eigenvectors kept (n × rank)", n * r)?;
    for i in 0..n {
        for (c, &j) in cols.iter().enumerate() {
            v[i * r + c] = vecs[i * ncols + j];
        }
    }
    let lam = cols.iter().map(|&j| vals[j]).collect();
    Ok(Spectrum { v, lam, n, r })
}

impl Spectrum {
    /// From a full symmetric PSD kernel L (row-major n×n) whose entries carry a relative rounding
    /// error `input_eps` (f64::EPSILON for float64 input, f32::EPSILON for float32).
    ///
    /// Rounding the entries moves the eigenvalues by up to ‖ΔL‖₂ ≤ ‖ΔL‖_F ≲ √n·eps·max|L_ij| per
    /// rounding step, so asymmetries and negative eigenvalues within the precision's noise level
    /// `noise = max(1e-9, 64·√n·eps)·max(λ_max, max|L_ij|)` (asymmetry: `max(1e-10, 64·eps)·max|L_ij|`)
    /// are rounding, not input errors: the eigenvalues at or below that level are clipped to zero
    /// (dropped from the spectrum). Beyond it L is rejected as non-symmetric or indefinite.
    pub fn from_kernel(l: &[f64], n: usize, input_eps: f64, cancel: &AtomicBool) -> Result<Self> {
        ensure_matrix("L", l, n, n)?;
        ensure_finite("L", l)?;
        let eps = input_eps.clamp(f64::EPSILON, 1e-2);
        let amax = l.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
        let mut asym = 0.0f64;
        for i in 0..n {
            for j in 0..i {
                asym = asym.max((l[i * n + j] - l[j * n + i]).abs());
            }
        }
        if asym > (64.0 * eps).max(1e-10) * amax {
            return Err(ThriftyError::invalid("L", format!("must be symmetric (max |L − Lᵀ| = {asym:.3e})")));
        }
        let (vals, vecs) = linalg::sym_eigen(l, n, cancel)?;
        let lmax = vals[n - 1].max(0.0);
        let noise = (64.0 * (n as f64).sqrt() * eps).max(1e-9) * lmax.max(amax);
        if vals[0] < -noise {
            return Err(ThriftyError::invalid(
                "L",
                format!(
                    "must be positive semi-definite (smallest eigenvalue {:.3e}, below the rounding tolerance −{noise:.1e} of the input's precision)",
                    vals[0]
                ),
            ));
        }
        // For float64 input keep everything above 1e-13·λ_max (as before); coarser input drops its
        // rounding noise too.
        let cut = if eps > 1e-12 { noise } else { EIG_RTOL * lmax };
        let cols: Vec<usize> = (0..n).rev().filter(|&j| vals[j] > cut).collect();
        build(n, vals, &vecs, n, cols)
    }

    /// From eigenpairs already computed (a spectrum saved by `v`/`lam`, e.g. an unpickled object):
    /// `v` is n×r row-major, `lam` the r positive eigenvalues.
    pub fn from_parts(v: Vec<f64>, lam: Vec<f64>, n: usize) -> Result<Self> {
        let r = lam.len();
        if v.len() != n.saturating_mul(r) {
            return Err(ThriftyError::shape("eigenvectors", format!("must have shape ({n}, {r})")));
        }
        ensure_finite("eigenvectors", &v)?;
        if lam.iter().any(|l| !(l.is_finite() && *l > 0.0)) {
            return Err(ThriftyError::invalid("eigenvalues", "must be positive and finite"));
        }
        Ok(Spectrum { v, lam, n, r })
    }

    /// From features Φ (n×d, L = ΦΦᵀ), through the thin SVD of Φ.
    pub fn from_features<T: ortho::Dense>(phi: &[T], n: usize, d: usize) -> Result<Self> {
        ensure_matrix("features", phi, n, d)?;
        super::ortho::finite("features", phi)?;
        // faer's thin SVD holds the copy, both factors and a workspace (its buffers are not
        // fallible): check their total first.
        let (nf, df, kf) = (n as f64, d as f64, n.min(d) as f64);
        let what = "the SVD of the features (a copy, both factors and a workspace)";
        crate::alloc::ensure_fits(what, 8.0 * (2.0 * nf * df + 3.0 * nf * kf + 2.0 * df * kf))?;
        // features beyond 2^±200 are factorised rescaled by an exact power of two 2^e (their squares
        // over- or underflow: at 1e300 the SVD did not converge) and σ² moved back by 2^2e
        let e = ortho::extreme_exponent_of(phi);
        let f: Vec<f64> = crate::alloc::try_collect(
            "a float64 copy of features",
            phi.iter().map(|&v| ortho::pow2_scale(Real::as_f64(v), e)),
        )?;
        let svd = linalg::view(&f, n, d)
            .thin_svd()
            .map_err(|e| ThriftyError::numerical("SVD of the features", format!("{e:?}")))?;
        let k = n.min(d);
        let s: Vec<f64> = (0..k).map(|i| svd.S().column_vector()[i]).collect();
        let u = linalg::try_row_major(svd.U())?;
        let vals: Vec<f64> = s.iter().map(|x| ortho::pow2_scale(x * x, -2 * e)).collect();
        if vals.iter().any(|v| v.is_infinite()) {
            let top = (s[0].log2() + e as f64) * 2.0;
            return Err(ThriftyError::invalid(
                "features",
                format!(
                    "L = ΦΦᵀ has an eigenvalue of about 2^{top:.0}, beyond the float64 range: an L-ensemble is \
                     not scale-free (larger L favours larger sets), so the features must be rescaled"
                ),
            ));
        }
        let lmax = vals.iter().cloned().fold(0.0, f64::max);
        let cols: Vec<usize> = (0..k).filter(|&j| vals[j] > EIG_RTOL * lmax).collect();
        build(n, vals, &u, k, cols)
    }

    /// Marginal kernel diagonal K_ii = Σ_c v_ic² λ_c/(1+λ_c).
    pub fn inclusion(&self) -> Result<Vec<f64>> {
        let w: Vec<f64> = self.lam.iter().map(|l| l / (1.0 + l)).collect();
        let k_ii = (0..self.n).map(|i| (0..self.r).map(|c| self.v[i * self.r + c].powi(2) * w[c]).sum());
        crate::alloc::try_collect("the inclusion probabilities", k_ii)
    }

    /// Exact variance of Σ_{i∈S} g_i: K = WWᵀ with W = V diag(√(λ/(1+λ))).
    pub fn exact_variance(&self, g: &[f64]) -> Result<f64> {
        if self.r == 0 {
            return Ok(0.0);
        }
        let s: Vec<f64> = self.lam.iter().map(|l| (l / (1.0 + l)).sqrt()).collect();
        let w = crate::alloc::try_collect(
            "the scaled eigenvectors (n × rank)",
            (0..self.n * self.r).map(|k| self.v[k] * s[k % self.r]),
        )?;
        ortho::exact_variance(&w, self.n, self.r, g)
    }

    /// The projection sample spanned by the eigenvectors `cols`.
    fn project(&self, cols: &[usize], rng: &mut Stream, cancel: &AtomicBool) -> Result<Vec<usize>> {
        let k = cols.len();
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut u: Vec<f64> =
            try_zeroed("the sample's eigenvector basis (n × k)", super::checked_size("L", self.n, k)?)?;
        for i in 0..self.n {
            for (c, &j) in cols.iter().enumerate() {
                u[i * k + c] = self.v[i * self.r + j];
            }
        }
        let lev = ortho::leverage(&u, self.n, k)?;
        let mut st = FactorState::new(&u, self.n, k, &lev);
        let path = if k >= 16 {
            let table = GuideTable::new(&lev)?;
            pivot::run(&mut st, Mode::AcceptReject(rng, &table), k, super::projection::TOL, cancel)?
        } else {
            pivot::run(&mut st, Mode::Sample(rng), k, super::projection::TOL, cancel)?
        };
        Ok(path.items)
    }

    /// One DPP sample from stream (seed, task).
    pub fn sample(&self, seed: u64, task: u64, cancel: &AtomicBool) -> Result<Vec<usize>> {
        let mut r = rng::stream(seed, task);
        let cols: Vec<usize> =
            (0..self.r).filter(|&c| rng::uniform(&mut r) * (1.0 + self.lam[c]) < self.lam[c]).collect();
        self.project(&cols, &mut r, cancel)
    }

    /// Samples number `offset .. offset + count` of the family seeded by `seed`.
    pub fn sample_many(&self, offset: usize, count: usize, seed: u64, cancel: &AtomicBool) -> Result<Vec<Vec<usize>>> {
        super::per_sample_ragged(offset, count, cancel, |s| self.sample(seed, s, cancel))
    }

    /// k-DPP samples number `offset .. offset + count` (exactly k items each), row-major count × k.
    pub fn sample_k_many(
        &self,
        k: usize,
        offset: usize,
        count: usize,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<Vec<usize>> {
        if k == 0 {
            return Err(ThriftyError::invalid("k", "must be at least 1"));
        }
        if k > self.r {
            return Err(ThriftyError::invalid("k", format!("k = {k} exceeds the rank of L ({})", self.r)));
        }
        let esp = LogEsp::new(&self.lam, k);
        super::per_sample_flat(offset, count, k, cancel, |s, row| {
            let mut r = rng::stream(seed, s);
            let cols = esp.select(&mut r);
            row.copy_from_slice(&self.project(&cols, &mut r, cancel)?);
            Ok(())
        })
    }
}

/// log e_l(λ_1..λ_j) for l ≤ k, j ≤ r (the k-DPP normaliser and its backward selection).
pub struct LogEsp {
    k: usize,
    r: usize,
    loglam: Vec<f64>,
    /// (k+1)×(r+1), row l, column j.
    e: Vec<f64>,
}

#[inline]
fn logaddexp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

impl LogEsp {
    pub fn new(lam: &[f64], k: usize) -> Self {
        let r = lam.len();
        let w = r + 1;
        let loglam: Vec<f64> = lam.iter().map(|l| if *l > 0.0 { l.ln() } else { f64::NEG_INFINITY }).collect();
        let mut e = vec![f64::NEG_INFINITY; (k + 1) * w];
        e[..=r].fill(0.0);
        for l in 1..=k {
            for j in 1..=r {
                e[l * w + j] = logaddexp(e[l * w + j - 1], loglam[j - 1] + e[(l - 1) * w + j - 1]);
            }
        }
        LogEsp { k, r, loglam, e }
    }

    /// log e_k(λ) (the log normaliser of the k-DPP).
    pub fn log_normaliser(&self) -> f64 {
        self.e[self.k * (self.r + 1) + self.r]
    }

    /// Backward selection of exactly k eigen-indices (Kulesza–Taskar Alg. 8).
    pub fn select(&self, rng: &mut Stream) -> Vec<usize> {
        let w = self.r + 1;
        let mut l = self.k;
        let mut out = Vec::with_capacity(self.k);
        let mut j = self.r;
        while l > 0 && j > 0 {
            // P(keep j | l still to pick among 1..j) = λ_j e_{l−1}(1..j−1) / e_l(1..j).
            let lp = self.loglam[j - 1] + self.e[(l - 1) * w + j - 1] - self.e[l * w + j];
            if l == j || rng::uniform(rng) < lp.exp() {
                out.push(j - 1);
                l -= 1;
            }
            j -= 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_esp_matches_brute_force() {
        let lam = [0.5, 2.0, 1.5, 0.1, 3.0];
        let esp = LogEsp::new(&lam, 3);
        let mut brute = 0.0;
        for a in 0..5 {
            for b in a + 1..5 {
                for c in b + 1..5 {
                    brute += lam[a] * lam[b] * lam[c];
                }
            }
        }
        assert!((esp.log_normaliser() - f64::ln(brute)).abs() < 1e-12);
        let mut r = rng::stream(1, 0);
        for _ in 0..100 {
            let s = esp.select(&mut r);
            assert_eq!(s.len(), 3);
        }
        // No overflow for large problems.
        let big: Vec<f64> = (0..10_000).map(|i| 1e-6 + (i as f64) * 1e3).collect();
        assert!(LogEsp::new(&big, 1000).log_normaliser().is_finite());
    }

    #[test]
    fn full_and_dual_spectra_agree() {
        let (n, d) = (8, 3);
        let mut r = rng::stream(2, 0);
        let phi: Vec<f64> = (0..n * d).map(|_| rng::uniform(&mut r)).collect();
        let l: Vec<f64> =
            (0..n * n).map(|ij| (0..d).map(|c| phi[(ij / n) * d + c] * phi[(ij % n) * d + c]).sum()).collect();
        let a = Spectrum::from_kernel(&l, n, f64::EPSILON, crate::dpp::never()).unwrap();
        let b = Spectrum::from_features(&phi, n, d).unwrap();
        assert_eq!(a.r, 3);
        assert_eq!(b.r, 3);
        for (x, y) in a.inclusion().unwrap().iter().zip(b.inclusion().unwrap()) {
            assert!((x - y).abs() < 1e-10);
        }
        let mut nonsym = l.clone();
        nonsym[1] += 1.0;
        assert!(Spectrum::from_kernel(&nonsym, n, f64::EPSILON, crate::dpp::never()).is_err());
        let mut neg = vec![0.0; 4];
        neg[0] = 1.0;
        neg[3] = -1.0;
        assert!(Spectrum::from_kernel(&neg, 2, f64::EPSILON, crate::dpp::never()).is_err());
        assert!(a.sample_k_many(4, 0, 1, 0, crate::dpp::never()).is_err());
        // Rounding-level negative eigenvalues of float32 input are clipped, not rejected.
        let lf: Vec<f64> = l.iter().map(|&v| v as f32 as f64).collect();
        let c = Spectrum::from_kernel(&lf, n, f32::EPSILON as f64, crate::dpp::never()).unwrap();
        assert_eq!(c.r, 3);
        let mut tiny = l.clone();
        for i in 0..n {
            tiny[i * n + i] -= 1e-6;
        }
        assert!(Spectrum::from_kernel(&tiny, n, f64::EPSILON, crate::dpp::never()).is_err());
        assert!(Spectrum::from_kernel(&tiny, n, f32::EPSILON as f64, crate::dpp::never()).is_ok());
        let back = Spectrum::from_parts(a.v.clone(), a.lam.clone(), n).unwrap();
        assert_eq!(back.sample(1, 2, crate::dpp::never()).unwrap(), a.sample(1, 2, crate::dpp::never()).unwrap());
    }
}
