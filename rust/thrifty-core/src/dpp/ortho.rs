//! Orthonormalisation of a tall N×p feature matrix by blocked Cholesky-QR (never N×N), leverage
//! scores, and the exact variance of a weighted linear statistic of a DPP with kernel K = WWᵀ.
//!
//! Orthonormalisation is a direct TSQR over fixed logical row blocks ([`super::tsqr`], shared with
//! the distributed path): the columns are equilibrated (scaled to unit norm, read off R), the rank
//! comes from the SVD of the p×p R, and a second pass refines an ill-conditioned basis.
//!
//! [`orthonormality_probe`]: the O(Np) randomized check of UᵀU = I, fused with the leverage pass
//! ([`super::scan`]).
use super::{check_cancel, try_zeroed};
use crate::error::{ensure_finite, ensure_matrix, Result, ThriftyError};
use crate::rng;
use crate::scalar::Real;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

const BLOCK: usize = 8192;

/// `Err(NotFinite)` unless every value of a generic float slice is finite.
pub fn finite<T: Real>(arg: &'static str, values: &[T]) -> Result<()> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(ThriftyError::NotFinite { arg })
    }
}

/// Dense kernels on row-major blocks for the two float types (faer GEMM with runtime SIMD dispatch).
pub trait Dense: Real {
    /// `out (p×p) = blkᵀ blk` for a row-major `b × p` block.
    fn gram_block(blk: &[Self], b: usize, p: usize, out: &mut [Self]);
    /// `out (b×r) = blk (b×p) · w (p×r)`, all row-major.
    fn mul_block(blk: &[Self], b: usize, p: usize, w: &[Self], r: usize, out: &mut [Self]);
}

macro_rules! impl_dense {
    ($t:ty) => {
        impl Dense for $t {
            fn gram_block(blk: &[Self], b: usize, p: usize, out: &mut [Self]) {
                use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
                let x = MatRef::from_row_major_slice(blk, b, p);
                let dst = MatMut::from_row_major_slice_mut(out, p, p);
                matmul(dst, Accum::Replace, x.transpose(), x, 1.0 as $t, Par::Seq);
            }
            fn mul_block(blk: &[Self], b: usize, p: usize, w: &[Self], r: usize, out: &mut [Self]) {
                use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
                let x = MatRef::from_row_major_slice(blk, b, p);
                let wm = MatRef::from_row_major_slice(w, p, r);
                let dst = MatMut::from_row_major_slice_mut(out, b, r);
                matmul(dst, Accum::Replace, x, wm, 1.0 as $t, Par::Seq);
            }
        }
    };
}
impl_dense!(f32);
impl_dense!(f64);

fn sum_partials(partials: Vec<Vec<f64>>, p: usize) -> Result<Vec<f64>> {
    let mut g = try_zeroed("a p × p Gram matrix", p * p)?;
    for part in partials {
        for (a, b) in g.iter_mut().zip(part) {
            *a += b;
        }
    }
    Ok(g)
}

/// `XᵀX` (p×p, row-major, f64) of a row-major `n × p` matrix; blocks summed in a fixed order.
pub fn gram<T: Dense>(x: &[T], n: usize, p: usize) -> Result<Vec<f64>> {
    gram_cancellable(x, n, p, super::never())
}

/// [`gram`] that checks `cancel` before every block. Every block's p × p partial is held until the
/// fixed-order sum, so their total is checked against the machine first.
pub fn gram_cancellable<T: Dense>(x: &[T], n: usize, p: usize, cancel: &AtomicBool) -> Result<Vec<f64>> {
    let blocks = n.div_ceil(BLOCK) as f64;
    let what = "the Gram matrices UᵀU of the row blocks (p × p each)";
    crate::alloc::ensure_fits(what, (2.0 * blocks + 1.0) * 8.0 * (p as f64).powi(2))?;
    let partials: Vec<Vec<f64>> = x[..n * p]
        .par_chunks(BLOCK * p)
        .map(|blk| {
            check_cancel(cancel)?;
            let mut g: Vec<T> = try_zeroed(what, p * p)?;
            T::gram_block(blk, blk.len() / p, p, &mut g);
            crate::alloc::try_collect(what, g.into_iter().map(|v| v.as_f64()))
        })
        .collect::<Result<_>>()?;
    sum_partials(partials, p)
}

/// The randomized orthonormality check: `probes` directions z drawn uniformly on the unit sphere
/// of R^p (from stream (seed, 0)); returns the leverage scores and max_z ‖(UᵀU − I)z‖.
///
/// Every U with ‖UᵀU − I‖₂ ≤ tol passes (`error ≤ tol`). If ‖UᵀU − I‖₂ = ε (in particular if any
/// entry of UᵀU − I exceeds ε in absolute value), the top eigenvector v of UᵀU − I gives
/// ‖(UᵀU − I)z‖ ≥ ε|vᵀz|, and |vᵀz| ≤ a has probability at most a·√(2p/π) (for a ≤ 1/2; the
/// density of vᵀz is bounded by Γ(p/2)/(√π Γ((p−1)/2)) < √(p/(2π)), Gautschi's inequality), so
/// such a U passes with probability at most (√(2p/π)·tol/ε)^probes. For E = ε vvᵀ the pass
/// probability is exactly P(|vᵀz| ≤ tol/ε)^probes; the tests check the empirical rate against it.
pub fn orthonormality_probe<T: Real>(u: &[T], n: usize, p: usize, probes: usize, seed: u64) -> Result<(Vec<f64>, f64)> {
    let k = probes.clamp(1, 4);
    let mut r = rng::stream(seed, 0);
    let mut z = vec![0.0; p * k];
    for c in 0..k {
        // Gaussian entries (Box–Muller), then normalised: uniform on the sphere.
        let mut norm2 = 0.0;
        for i in 0..p {
            let (a, b) = (rng::uniform(&mut r).max(f64::MIN_POSITIVE), rng::uniform(&mut r));
            let g = (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos();
            z[c * p + i] = g;
            norm2 += g * g;
        }
        let inv = 1.0 / norm2.sqrt();
        for i in 0..p {
            z[c * p + i] *= inv;
        }
    }
    let (lev, w) = super::scan::leverage_and_probe(u, n, p, &z, k)?;
    let err =
        (0..k).map(|c| (0..p).map(|i| (w[c * p + i] - z[c * p + i]).powi(2)).sum::<f64>().sqrt()).fold(0.0, f64::max);
    Ok((lev, if err.is_finite() { err } else { f64::INFINITY }))
}

/// Largest absolute entry of `UᵀU − I` (how far the columns of `u` are from orthonormal).
pub fn orthonormality_error<T: Dense>(u: &[T], n: usize, p: usize) -> Result<f64> {
    let g = gram(u, n, p)?;
    let mut e: f64 = 0.0;
    for i in 0..p {
        for j in 0..p {
            let t = if i == j { 1.0 } else { 0.0 };
            e = e.max((g[i * p + j] - t).abs());
        }
    }
    Ok(e)
}

/// Σ r_i² in f64 over eight independent accumulators (the sum is bound by add latency otherwise).
#[inline(always)]
fn sumsq<T: Real>(r: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = r.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            let v = c[l].as_f64();
            acc[l] += v * v;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| v.as_f64() * v.as_f64()).sum();
    acc.iter().sum::<f64>() + tail
}

pub use super::scan::leverage;

/// Orthonormal basis `Q` (n×r, row-major) of the column space of the row-major `n × p` matrix `x`
/// and its numerical rank `r`: direct TSQR over fixed logical row blocks ([`super::tsqr`]), the
/// same bits as the distributed (Dask) path on any chunking. With `equilibrate` the columns are
/// first scaled to unit norm (same column space), and singular values of the scaled matrix below
/// `rtol · σ_max` are dropped; without it, those of `x` itself. O(np²) time; stops with
/// `Err(Interrupted)` soon after `cancel` is raised (checked before every row block).
pub fn orthonormalize<T: Dense>(
    x: &[T],
    n: usize,
    p: usize,
    rtol: f64,
    equilibrate: bool,
    cancel: &AtomicBool,
) -> Result<(Vec<T>, usize)> {
    ensure_matrix("features", x, n, p)?;
    super::ortho::finite("features", x)?;
    if !(rtol > 0.0 && rtol < 1.0) {
        return Err(ThriftyError::invalid("rtol", format!("must be in (0, 1), got {rtol}")));
    }
    crate::alloc::ensure_fits("the working memory of orthonormalize", tsqr_bytes(n, p))?;
    let scales = extreme_scales(x, n, p, equilibrate);
    if p <= n && scales.is_none() {
        return super::tsqr::orthonormalize(x, n, p, rtol, equilibrate, cancel);
    }
    let scales = scales.unwrap_or_else(|| vec![0; p]);
    let (q, r) = if p <= n {
        // Extreme scales: TSQR of a copy scaled by exact powers of two (the column space is unchanged).
        let mut y: Vec<f64> = try_zeroed("a rescaled copy of features", n * p)?;
        for (yr, xr) in y.chunks_exact_mut(p).zip(x.chunks_exact(p)) {
            for ((o, &v), &e) in yr.iter_mut().zip(xr).zip(&scales) {
                *o = pow2_scale(v.as_f64(), e);
            }
        }
        super::tsqr::orthonormalize(&y, n, p, rtol, equilibrate, cancel)?
    } else {
        wide_basis(x, n, p, rtol, equilibrate, &scales, cancel)?
    };
    let mut out: Vec<T> = try_zeroed("the basis (n_samples × rank)", q.len())?;
    out.iter_mut().zip(&q).for_each(|(o, &v)| *o = T::of(v));
    Ok((out, r))
}

/// Bytes TSQR holds at once for an `n × p` input: the basis, the leaves' R factors, the blocks being
/// factorised (one per thread) and the final SVD.
fn tsqr_bytes(n: usize, p: usize) -> f64 {
    let (n, q) = (n as f64, n.min(p) as f64);
    let leaves = (n.max(p as f64) / super::tsqr::LEAF_ROWS as f64).ceil();
    let threads = rayon::current_num_threads() as f64;
    8.0 * (n * q + leaves * q * q + threads * super::tsqr::LEAF_ROWS as f64 * q + 4.0 * q * q)
}

/// Exponents below and above which squares under- or overflow inside the factorisation.
const SAFE_EXPONENT: i32 = 200;

/// The binary exponent of `m > 0` (`⌊log₂ m⌋`; 0 for 0).
fn binary_exponent(m: f64) -> i32 {
    if m > 0.0 {
        m.log2().floor() as i32
    } else {
        0
    }
}

/// `e` when `m`'s binary exponent `e` lies outside `±SAFE_EXPONENT` (squares of such entries over-
/// or underflow: divide by `2^e`, exactly), else 0 (used as it is).
fn extreme_exponent(m: f64) -> i32 {
    let e = binary_exponent(m);
    if e.abs() > SAFE_EXPONENT {
        e
    } else {
        0
    }
}

/// The exponent to divide a whole matrix by before its squares are formed: that of its largest
/// |entry| when outside `2^±SAFE_EXPONENT`, else 0. The one rule for every factorisation of features.
pub(crate) fn extreme_exponent_of<T: Real>(x: &[T]) -> i32 {
    extreme_exponent(x.iter().fold(0.0f64, |m, v| m.max(v.as_f64().abs())))
}

/// `v · 2^(-e)` in two exact steps (each factor representable even when `2^(-e)` alone is not).
pub(crate) fn pow2_scale(v: f64, e: i32) -> f64 {
    let h = e / 2;
    v * 2f64.powi(-h) * 2f64.powi(-(e - h))
}

/// `None` when every column's largest entry lies within `2^±SAFE_EXPONENT` (no rescaling: the same
/// bits as the distributed path); else the binary exponent to divide each column by — the column's
/// own with `equilibrate` (each column keeps its direction), the whole matrix's without (the rank
/// decision stays relative to the largest singular value of `x`). All-zero columns get 0.
fn extreme_scales<T: Real>(x: &[T], n: usize, p: usize, equilibrate: bool) -> Option<Vec<i32>> {
    let mut amax = vec![0.0f64; p];
    for row in x[..n * p].chunks_exact(p) {
        for (m, v) in amax.iter_mut().zip(row) {
            *m = m.max(v.as_f64().abs());
        }
    }
    let global = amax.iter().cloned().fold(0.0, f64::max);
    if equilibrate && amax.iter().any(|&m| extreme_exponent(m) != 0) {
        Some(amax.iter().map(|&m| binary_exponent(m)).collect())
    } else if !equilibrate && extreme_exponent(global) != 0 {
        Some(vec![binary_exponent(global); p])
    } else {
        None
    }
}

/// Basis of the column space of a wide `x` (p > n): its rank is at most n, and no p×p matrix is
/// needed. With D the column scaling (equilibration and the exponents `scales`), TSQR of the tall
/// `Y = (X D)ᵀ` (p × n) gives `Y = Q₁R₁`, so `X D = R₁ᵀQ₁ᵀ` and, Q₁ᵀ being onto, span(X) = span(R₁ᵀ)
/// with the same singular values: the basis is the orthonormalisation of the n × n `R₁ᵀ`, whose
/// rank decision (rtol · σ_max) is that of `X D`.
fn wide_basis<T: Real>(
    x: &[T],
    n: usize,
    p: usize,
    rtol: f64,
    equilibrate: bool,
    scales: &[i32],
    cancel: &AtomicBool,
) -> Result<(Vec<f64>, usize)> {
    let mut y: Vec<f64> = try_zeroed("the transposed features (features × n_samples)", p * n)?;
    for (i, row) in x[..n * p].chunks_exact(p).enumerate() {
        for (j, (&v, &e)) in row.iter().zip(scales).enumerate() {
            y[j * n + i] = pow2_scale(v.as_f64(), e);
        }
    }
    if equilibrate {
        for col in y.chunks_exact_mut(n) {
            let norm = sumsq(col).sqrt();
            if norm > 0.0 {
                col.iter_mut().for_each(|v| *v /= norm);
            }
        }
    }
    let r1 = super::tsqr::reduce_nodes(super::tsqr::chunk_nodes(&y, p, n, 0, p, None, cancel)?, p, n)?;
    drop(y);
    let mut z: Vec<f64> = try_zeroed("the transposed R factor", n * n)?;
    for i in 0..n {
        for j in 0..n {
            z[i * n + j] = r1[j * n + i];
        }
    }
    super::tsqr::orthonormalize(&z, n, n, rtol, false, cancel)
}

/// Exact variance of the linear statistic Σ_{i∈S} g_i of a DPP with marginal kernel K = WWᵀ
/// (W n×r, row-major): Σ g_i² K_ii − ‖Wᵀ diag(g) W‖_F². O(nr²), no n×n matrix.
pub fn exact_variance<T: Dense>(w: &[T], n: usize, r: usize, g: &[f64]) -> Result<f64> {
    ensure_matrix("U", w, n, r)?;
    if g.len() != n {
        return Err(ThriftyError::shape("g", format!("has length {}, expected {n}", g.len())));
    }
    ensure_finite("g", g)?;
    let lev = leverage(w, n, r)?;
    let first: f64 = g.iter().zip(&lev).map(|(a, l)| a * a * l).sum();
    // M = Wᵀ diag(g) W as the Gram matrix of rows scaled by sqrt|g| with signs tracked: split g = g⁺ − g⁻.
    // Block by block (the blocks and their order are gram's), so no n × r copy is held.
    let scaled_gram = |sign: f64| -> Result<Vec<f64>> {
        let partials: Vec<Vec<f64>> = w[..n * r]
            .par_chunks(BLOCK * r)
            .zip(g.par_chunks(BLOCK))
            .map(|(wb, gb)| {
                let mut s: Vec<f64> = try_zeroed("a block of the scaled basis", wb.len())?;
                for ((srow, wrow), &gi) in s.chunks_exact_mut(r).zip(wb.chunks_exact(r)).zip(gb) {
                    let gi = (gi * sign).max(0.0).sqrt();
                    srow.iter_mut().zip(wrow).for_each(|(o, v)| *o = v.as_f64() * gi);
                }
                let mut part = try_zeroed("a p × p Gram matrix", r * r)?;
                f64::gram_block(&s, gb.len(), r, &mut part);
                Ok(part)
            })
            .collect::<Result<_>>()?;
        sum_partials(partials, r)
    };
    let mp = scaled_gram(1.0)?;
    let mm = scaled_gram(-1.0)?;
    let fro: f64 = mp.iter().zip(&mm).map(|(a, b)| (a - b) * (a - b)).sum();
    Ok((first - fro).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpp::never;

    #[test]
    fn randomized_check_accepts_orthonormal_and_rejects_perturbed_bases() {
        let (n, p) = (400, 12);
        let (u, _) = orthonormalize(&test_matrix(n, p, 7), n, p, 1e-8, true, never()).unwrap();
        let (lev, err) = orthonormality_probe(&u, n, p, 2, 3).unwrap();
        assert!(err < 1e-12, "{err}");
        let exact = leverage(&u, n, p).unwrap();
        assert!(lev.iter().zip(&exact).all(|(a, b)| (a - b).abs() < 1e-15));
        // One entry of UᵀU − I of size 1e-3 (a column scaled by 1 + 5e-4): caught on every seed.
        let mut bad = u.clone();
        for i in 0..n {
            bad[i * p + 5] *= 1.0 + 5e-4;
        }
        for seed in 0..20 {
            let (_, e) = orthonormality_probe(&bad, n, p, 2, seed).unwrap();
            assert!(e > 1e-6, "seed {seed}: {e}");
        }
        let uf: Vec<f32> = u.iter().map(|&v| v as f32).collect();
        assert!(orthonormality_probe(&uf, n, p, 2, 1).unwrap().1 < 1e-5);
    }

    /// P(|vᵀz| ≤ a) for z uniform on the sphere of R^p and a fixed unit v: the integral of the
    /// density ∝ (1 − t²)^((p−3)/2) over [−a, a] (Simpson's rule, normalised on [−1, 1]).
    fn sphere_marginal_cdf(p: usize, a: f64) -> f64 {
        let integral = |hi: f64| {
            let m = 20_000;
            let h = hi / m as f64;
            let f = |t: f64| (1.0 - t * t).max(0.0).powf((p as f64 - 3.0) / 2.0);
            let inner: f64 = (1..m).map(|i| f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 }).sum();
            (f(0.0) + inner + f(hi)) * h / 3.0
        };
        integral(a) / integral(1.0)
    }

    #[test]
    fn false_accept_rate_matches_the_stated_probability() {
        // UᵀU − I = ε vvᵀ exactly (U = Q(I + (√(1+ε) − 1) vvᵀ) with Q orthonormal), so a probe z
        // passes iff ε|vᵀz| ≤ tol: the pass rate over seeds is P(|vᵀz| ≤ tol/ε)^probes. Check it
        // against that exact value and against the bound (√(2p/π)·tol/ε)^probes stated on
        // `orthonormality_probe`.
        let (n, p) = (60, 8);
        let (q, _) = orthonormalize(&test_matrix(n, p, 11), n, p, 1e-8, true, never()).unwrap();
        let mut v: Vec<f64> = (0..p).map(|i| (i as f64 + 1.0).sin()).collect();
        let nv = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter_mut().for_each(|x| *x /= nv);
        let eps: f64 = 0.05;
        let c = (1.0 + eps).sqrt() - 1.0;
        let mut u = vec![0.0; n * p];
        for i in 0..n {
            let qv: f64 = (0..p).map(|j| q[i * p + j] * v[j]).sum();
            for j in 0..p {
                u[i * p + j] = q[i * p + j] + c * qv * v[j];
            }
        }
        let tol = 0.3 * eps; // a = tol/ε = 0.3: P(|vᵀz| ≤ a) ≈ 0.56 for p = 8
        let a = tol / eps;
        let single = sphere_marginal_cdf(p, a);
        let trials = 4000u64;
        for probes in [1usize, 2] {
            let passed =
                (0..trials).filter(|&s| orthonormality_probe(&u, n, p, probes, 1000 + s).unwrap().1 <= tol).count();
            let rate = passed as f64 / trials as f64;
            let want = single.powi(probes as i32);
            let sd = (want * (1.0 - want) / trials as f64).sqrt();
            assert!((rate - want).abs() < 4.5 * sd, "probes {probes}: pass rate {rate}, exact {want}");
            let bound = ((2.0 * p as f64 / std::f64::consts::PI).sqrt() * a).powi(probes as i32);
            assert!(want <= bound && rate <= bound + 4.5 * sd, "probes {probes}: {rate} vs bound {bound}");
        }
    }

    fn test_matrix(n: usize, p: usize, seed: u64) -> Vec<f64> {
        let mut r = crate::rng::stream(seed, 0);
        (0..n * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect()
    }

    #[test]
    fn orthonormalize_spans_and_is_orthonormal() {
        let (n, p) = (500, 7);
        let x = test_matrix(n, p, 1);
        let (q, r) = orthonormalize(&x, n, p, 1e-8, true, never()).unwrap();
        assert_eq!(r, p);
        assert!(orthonormality_error(&q, n, r).unwrap() < 1e-12);
        // Projection of X onto span(Q) reproduces X.
        for c in 0..p {
            let coef: Vec<f64> = (0..r).map(|k| (0..n).map(|i| q[i * r + k] * x[i * p + c]).sum()).collect();
            for i in 0..n {
                let v: f64 = (0..r).map(|k| q[i * r + k] * coef[k]).sum();
                assert!((v - x[i * p + c]).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn rank_deficient_and_ill_conditioned() {
        let (n, p) = (300, 5);
        let mut x = test_matrix(n, p, 2);
        for i in 0..n {
            x[i * p + 4] = x[i * p] + 2.0 * x[i * p + 1];
            x[i * p + 3] *= 1e-9;
        }
        // Without equilibration the column of scale 1e-9 falls below rtol = 1e-6; with it, only the
        // exactly dependent column is dropped.
        let (q, r) = orthonormalize(&x, n, p, 1e-6, false, never()).unwrap();
        assert_eq!(r, 3);
        assert!(orthonormality_error(&q, n, r).unwrap() < 1e-11);
        let (q, r) = orthonormalize(&x, n, p, 1e-6, true, never()).unwrap();
        assert_eq!(r, 4);
        assert!(orthonormality_error(&q, n, r).unwrap() < 1e-11);
        let (q, r) = orthonormalize(&x, n, p, 1e-12, false, never()).unwrap();
        assert_eq!(r, 4);
        assert!(orthonormality_error(&q, n, r).unwrap() < 1e-11);
        let xf: Vec<f32> = test_matrix(n, p, 3).iter().map(|&v| v as f32).collect();
        let (qf, rf) = orthonormalize(&xf, n, p, 1e-3, true, never()).unwrap();
        assert_eq!(rf, p);
        assert!(orthonormality_error(&qf, n, rf).unwrap() < 1e-5);
        assert!(orthonormalize(&[0.0; 6], 3, 2, 1e-8, true, never()).is_err());
        assert!(orthonormalize(&[f64::NAN, 1.0], 2, 1, 1e-8, true, never()).is_err());
        let raised = AtomicBool::new(true);
        assert_eq!(orthonormalize(&x, n, p, 1e-6, true, &raised).unwrap_err(), ThriftyError::Interrupted);
    }

    #[test]
    fn exact_variance_matches_dense_formula() {
        let (n, p) = (12, 3);
        let (u, _) = orthonormalize(&test_matrix(n, p, 4), n, p, 1e-8, true, never()).unwrap();
        let g: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let k = |i: usize, j: usize| (0..p).map(|c| u[i * p + c] * u[j * p + c]).sum::<f64>();
        let mut v = 0.0;
        for i in 0..n {
            v += g[i] * g[i] * k(i, i);
            for j in 0..n {
                v -= g[i] * g[j] * k(i, j) * k(i, j);
            }
        }
        assert!((exact_variance(&u, n, p, &g).unwrap() - v).abs() < 1e-12);
    }
}
