//! k-means: greedy k-means++ seeding, Lloyd with Hamerly bounds, and batched Hartigan — one
//! machinery (`batched`) whose certificates, batch and sequential phases are described there.
//!
//! Data cross this API as row-major slices (`n × d`) in f32 or f64, or as CSR matrices
//! ([`Matrix::Csr`], the `*_matrix` functions) that are read in place with sparse kernels; sums and
//! decisions run in f64. Dense data far from the origin are mean-centred in a working copy for
//! precision (as scikit-learn does always for dense data; sparse data are never centred, as in
//! scikit-learn); the caller's array is never modified.
pub mod batched;
pub mod blocks;
pub mod distance;
pub mod init;
pub mod matrix;

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use batched::Data;
pub use batched::{Algorithm, IterStats};
use distance::{sq_dist, sq_norm, TILE};
pub use matrix::{Csr, Matrix};

pub(crate) use crate::alloc::try_filled;
use crate::error::{ensure_finite, ensure_matrix, Result, ThriftyError};
use crate::rng::stream;
use crate::scalar::Real;

/// How initial centres are chosen.
pub enum Init<'a, T> {
    KMeansPlusPlus,
    Random,
    /// Explicit `k × d` centres in the data's coordinates (used by every one of the `n_init` runs).
    Centers(&'a [T]),
}

#[derive(Clone, Debug)]
pub struct Params {
    pub n_clusters: usize,
    pub n_init: usize,
    pub max_iter: usize,
    /// scikit-learn's tolerance: stop when Σ‖Δc‖² ≤ tol · mean per-feature variance (0 = run to a
    /// fixed point).
    pub tol: f64,
    pub algorithm: Algorithm,
    pub seed: u64,
}

/// Result of the best of the `n_init` runs (lowest inertia, first on ties).
#[derive(Clone, Debug)]
pub struct Fit<T> {
    /// Centres (data coordinates), labels, inertia, iterations and per-iteration statistics.
    pub run: batched::Run<T>,
    /// Which of the runs won (its RNG stream is `stream(seed, run)`).
    pub best_run: usize,
    /// The initial centres of the winning run (data coordinates).
    pub init_centers: Vec<T>,
}

/// `Err(Interrupted)` once `cancel` is raised.
fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(ThriftyError::Interrupted)
    } else {
        Ok(())
    }
}

fn check_data<T: Real>(x: &Matrix<'_, T>, n: usize, d: usize) -> Result<()> {
    match x {
        Matrix::Dense(x) => {
            ensure_matrix("X", x, n, d)?;
            if x.iter().any(|v| !v.is_finite()) {
                return Err(ThriftyError::NotFinite { arg: "X" });
            }
            Ok(())
        }
        Matrix::Csr(m) => m.check(n, d),
    }
}

/// The shape checks of [`check_data`] without the finiteness scan (done by the fit's first pass).
fn check_shape<T: Real>(x: &Matrix<'_, T>, n: usize, d: usize) -> Result<()> {
    match x {
        Matrix::Dense(x) => ensure_matrix("X", x, n, d),
        Matrix::Csr(m) => m.check(n, d),
    }
}

/// The weights (ones when absent) divided by `2^e`, the power of two nearest their maximum (exact), and
/// `e`: only relative weights shape the clustering, so weights of 1e308 (whose sums overflow) or
/// 1e-320 (subnormal) give the unit-weight centres and labels; the inertia is scaled back by `2^e`.
fn check_weights(w: Option<&[f64]>, n: usize) -> Result<(Vec<f64>, i32)> {
    let mut w = check_weight_values(w, n)?;
    let max = w.iter().fold(0.0f64, |m, &v| m.max(v));
    let e = if (0.25..=4.0).contains(&max) { 0 } else { max.log2().round() as i32 };
    if e != 0 {
        w.iter_mut().for_each(|v| *v = ldexp(*v, -e));
    }
    Ok((w, e))
}

/// `v · 2^e` in two exact steps (each factor representable even where `2^e` alone is not).
fn ldexp(v: f64, e: i32) -> f64 {
    v * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

fn check_weight_values(w: Option<&[f64]>, n: usize) -> Result<Vec<f64>> {
    match w {
        None => try_filled("the unit weights", n, 1.0),
        Some(w) => {
            if w.len() != n {
                return Err(ThriftyError::shape("sample_weight", format!("has length {}, expected {n}", w.len())));
            }
            ensure_finite("sample_weight", w)?;
            if w.iter().any(|&v| v < 0.0) {
                return Err(ThriftyError::invalid("sample_weight", "must be non-negative"));
            }
            if !w.iter().any(|&v| v > 0.0) {
                return Err(ThriftyError::invalid("sample_weight", "must not be all zero"));
            }
            Ok(w.to_vec())
        }
    }
}

/// Fit k-means to `x` (`n × d`, row-major).
pub fn fit<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    init: Init<'_, T>,
    p: &Params,
) -> Result<Fit<T>> {
    fit_cancellable(x, n, d, sample_weight, init, p, &AtomicBool::new(false))
}

/// [`fit`] that stops with `Err(Interrupted)` soon after `cancel` is raised (checked once per
/// iteration and per k-means++ step).
pub fn fit_cancellable<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    init: Init<'_, T>,
    p: &Params,
    cancel: &AtomicBool,
) -> Result<Fit<T>> {
    ensure_matrix("X", x, n, d)?;
    fit_matrix(Matrix::Dense(x), n, d, sample_weight, init, p, cancel)
}

/// [`fit_cancellable`] for dense or CSR data (`n × d`). CSR rows are read in place: distance tiles
/// are sparse products with the transposed centres, centre sums add the non-zeros only.
pub fn fit_matrix<T: Real>(
    x: Matrix<'_, T>,
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    init: Init<'_, T>,
    p: &Params,
    cancel: &AtomicBool,
) -> Result<Fit<T>> {
    check_shape(&x, n, d)?;
    let (w, weight_exponent) = check_weights(sample_weight, n)?;
    let k = p.n_clusters;
    if k == 0 {
        return Err(ThriftyError::invalid("n_clusters", "must be at least 1"));
    }
    if n < k {
        return Err(ThriftyError::invalid("n_clusters", format!("n_samples={n} should be >= n_clusters={k}")));
    }
    if p.n_init == 0 {
        return Err(ThriftyError::invalid("n_init", "must be at least 1"));
    }
    if p.max_iter == 0 {
        return Err(ThriftyError::invalid("max_iter", "must be at least 1"));
    }
    if !(p.tol >= 0.0 && p.tol.is_finite()) {
        return Err(ThriftyError::invalid("tol", "must be a finite number >= 0"));
    }
    if let Init::Centers(c) = &init {
        if c.len() != k * d {
            return Err(ThriftyError::shape("init", format!("must have shape ({k}, {d}), got {} values", c.len())));
        }
        if c.iter().any(|v| !v.is_finite()) {
            return Err(ThriftyError::NotFinite { arg: "init" });
        }
    }

    // One read pass: column sums and row norms over fixed blocks (deterministic on any thread count);
    // it doubles as the finiteness check.
    let mut xx = try_filled("the row norms of X", n, 0.0f64)?;
    let col_sums: Vec<Vec<f64>> = xx
        .par_chunks_mut(4096)
        .enumerate()
        .map(|(b, norms)| {
            let mut s = vec![0.0f64; d];
            for (r, nrm) in norms.iter_mut().enumerate() {
                *nrm = x.norm_and_sum(b * 4096 + r, d, &mut s);
            }
            s
        })
        .collect();
    // A row is finite iff its squared norm is, unless the norm overflowed: only then scan the data.
    if xx.iter().any(|v| !v.is_finite()) {
        check_data(&x, n, d)?;
    }
    let mut mean = vec![0.0f64; d];
    for s in &col_sums {
        for (m, v) in mean.iter_mut().zip(s) {
            *m += v;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mean_sq: f64 = mean.iter().map(|m| m * m).sum();
    let var_sum = (xx.iter().sum::<f64>() / n as f64 - mean_sq).max(0.0); // Σ per-feature variances
                                                                          // Centre (unweighted mean, as scikit-learn) in a working copy only when the offset dominates
                                                                          // the spread: then ‖x‖² − 2x·c + ‖c‖² would cancel badly. Otherwise the copy costs more than
                                                                          // it buys, and the caller's array is used as is (read-only).
    let centred: Vec<T>;
    let xw: Matrix<'_, T> = match x {
        Matrix::Dense(x) if mean_sq > var_sum => {
            let mut xc = try_filled("a centred copy of X", n * d, T::zero())?;
            xc.par_chunks_mut(d * TILE).zip(x.par_chunks(d * TILE)).zip(xx.par_chunks_mut(TILE)).for_each(
                |((dst, src), norms)| {
                    for ((drow, srow), nrm) in dst.chunks_exact_mut(d).zip(src.chunks_exact(d)).zip(norms.iter_mut()) {
                        for ((o, v), m) in drow.iter_mut().zip(srow).zip(&mean) {
                            *o = T::of(v.as_f64() - m);
                        }
                        *nrm = sq_norm(drow);
                    }
                },
            );
            centred = xc;
            Matrix::Dense(&centred[..])
        }
        _ => {
            mean.iter_mut().for_each(|m| *m = 0.0);
            x
        }
    };
    let is_centred = matches!((&x, &xw), (Matrix::Dense(a), Matrix::Dense(b)) if a.as_ptr() != b.as_ptr());
    // scikit-learn's tolerance: tol × mean per-feature variance (from the centred norms when centred:
    // E‖x‖² − ‖mean‖² cancels exactly when the offset dominates).
    let var_sum = if is_centred { xx.iter().sum::<f64>() / n as f64 } else { var_sum };
    let tol = p.tol * var_sum / d as f64;
    let total_wxx: f64 = xx.iter().zip(&w).map(|(a, b)| a * b).sum();
    let data = Data { x: xw, d, xx: &xx, w: &w, w_max: w.iter().fold(0.0, |m: f64, &v| m.max(v)), cancel };

    // The runs are reduced as they finish (lowest inertia, lowest run index on ties: the same winner
    // on any thread count), so memory does not grow with n_init.
    let (best, mut run, init_c) = (0..p.n_init)
        .into_par_iter()
        .map(|r| -> Result<(usize, batched::Run<T>, Vec<T>)> {
            check_cancel(cancel)?;
            let mut rng = stream(p.seed, r as u64);
            let init_c: Vec<T> = match &init {
                Init::KMeansPlusPlus => init::kmeans_plusplus(&xw, d, &xx, &w, k, &mut rng, cancel)?,
                Init::Random => init::random_rows(&xw, d, &w, k, &mut rng),
                Init::Centers(c) => c
                    .chunks_exact(d)
                    .flat_map(|row| row.iter().zip(&mean).map(|(v, m)| T::of(v.as_f64() - m)))
                    .collect(),
            };
            Ok((r, batched::run(&data, &init_c, k, p.algorithm, p.max_iter, tol, total_wxx)?, init_c))
        })
        .try_reduce_with(|a, b| {
            let b_wins = b.1.inertia < a.1.inertia || (b.1.inertia == a.1.inertia && b.0 < a.0);
            Ok(if b_wins { b } else { a })
        })
        .expect("n_init >= 1")?;
    let uncenter = |c: &[T]| -> Vec<T> {
        c.chunks_exact(d).flat_map(|row| row.iter().zip(&mean).map(|(v, m)| T::of(v.as_f64() + m))).collect()
    };
    run.centers = uncenter(&run.centers);
    run.inertia = ldexp(run.inertia, weight_exponent);
    for s in &mut run.stats {
        s.sse_after_batch = ldexp(s.sse_after_batch, weight_exponent);
        s.sse_after_sequential = ldexp(s.sse_after_sequential, weight_exponent);
    }
    Ok(Fit { run, best_run: best, init_centers: uncenter(&init_c) })
}

fn check_centers<T: Real>(centers: &[T], k: usize, d: usize) -> Result<()> {
    ensure_matrix("cluster_centers", centers, k, d)?;
    if centers.iter().any(|v| !v.is_finite()) {
        return Err(ThriftyError::NotFinite { arg: "cluster_centers" });
    }
    Ok(())
}

/// Index of the nearest centre of each row (ties → lowest index); exact f64 distances, so a row's
/// label never depends on the other rows it is passed with. Stops with `Err(Interrupted)` soon
/// after `cancel` is raised (checked per tile of rows).
pub fn predict<T: Real>(x: &[T], n: usize, d: usize, centers: &[T], k: usize, cancel: &AtomicBool) -> Result<Vec<u32>> {
    ensure_matrix("X", x, n, d)?;
    predict_matrix(Matrix::Dense(x), n, d, centers, k, cancel)
}

/// [`predict`] for dense or CSR rows (sparse rows: ‖x‖² − 2·x·c + ‖c‖² with a sparse dot).
pub fn predict_matrix<T: Real>(
    x: Matrix<'_, T>,
    n: usize,
    d: usize,
    centers: &[T],
    k: usize,
    cancel: &AtomicBool,
) -> Result<Vec<u32>> {
    let rows = Rows::checked(x, n, d, centers, k)?;
    let mut labels = try_filled("the labels", n, 0u32)?;
    labels.par_chunks_mut(TILE).enumerate().for_each(|(t, lab)| {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        for (r, l) in lab.iter_mut().enumerate() {
            *l = rows.nearest(t * TILE + r).0;
        }
    });
    check_cancel(cancel)?;
    Ok(labels)
}

/// Exact distances of single rows to a fixed set of centres (predict, transform, inertia).
struct Rows<'a, T> {
    x: Matrix<'a, T>,
    d: usize,
    centers: &'a [T],
    /// Sparse rows only: the centres in f64 with their squared norms.
    c64: Vec<f64>,
    cn: Vec<f64>,
}

impl<'a, T: Real> Rows<'a, T> {
    /// The validation prelude of predict, transform and inertia: rows and centres checked (shape,
    /// finiteness), then [`Rows::new`].
    fn checked(x: Matrix<'a, T>, n: usize, d: usize, centers: &'a [T], k: usize) -> Result<Self> {
        check_data(&x, n, d)?;
        check_centers(centers, k, d)?;
        Ok(Rows::new(x, d, centers))
    }

    fn new(x: Matrix<'a, T>, d: usize, centers: &'a [T]) -> Self {
        let (c64, cn) = if x.is_sparse() {
            let c64: Vec<f64> = centers.iter().map(|v| v.as_f64()).collect();
            let cn = matrix::center_norms(&c64, d);
            (c64, cn)
        } else {
            (Vec::new(), Vec::new())
        };
        Rows { x, d, centers, c64, cn }
    }

    /// Squared distance of row i to centre j.
    #[inline]
    fn dist2(&self, i: usize, j: usize, xx: f64) -> f64 {
        let d = self.d;
        match self.x {
            Matrix::Dense(x) => sq_dist(&x[i * d..(i + 1) * d], &self.centers[j * d..(j + 1) * d]),
            Matrix::Csr(_) => self.x.dist2(i, d, xx, &self.c64[j * d..(j + 1) * d], self.cn[j]),
        }
    }

    fn row_norm(&self, i: usize) -> f64 {
        match self.x {
            Matrix::Dense(_) => 0.0, // unused by dense distances
            Matrix::Csr(_) => self.x.row_sq_norm(i, self.d),
        }
    }

    /// Nearest centre of row i (lowest index on ties) and its squared distance.
    fn nearest(&self, i: usize) -> (u32, f64) {
        let xx = self.row_norm(i);
        let mut best = (0u32, f64::INFINITY);
        for j in 0..self.centers.len() / self.d {
            let v = self.dist2(i, j, xx);
            if v < best.1 {
                best = (j as u32, v);
            }
        }
        best
    }
}

/// Euclidean distances of every row to every centre (`n × k`, the data's precision); `Err` naming
/// `n_clusters` when the `n × k` output cannot be allocated. Interruptible like [`predict`].
pub fn transform<T: Real>(x: &[T], n: usize, d: usize, centers: &[T], k: usize, cancel: &AtomicBool) -> Result<Vec<T>> {
    ensure_matrix("X", x, n, d)?;
    transform_matrix(Matrix::Dense(x), n, d, centers, k, cancel)
}

/// [`transform`] for dense or CSR rows (the output is dense).
pub fn transform_matrix<T: Real>(
    x: Matrix<'_, T>,
    n: usize,
    d: usize,
    centers: &[T],
    k: usize,
    cancel: &AtomicBool,
) -> Result<Vec<T>> {
    let rows = Rows::checked(x, n, d, centers, k)?;
    let len =
        n.checked_mul(k).ok_or_else(|| ThriftyError::invalid("n_clusters", format!("{n} x {k} distances overflow")))?;
    let mut out = try_filled("the distances (n_samples × n_clusters)", len, T::zero())?;
    out.par_chunks_mut(k * TILE).enumerate().for_each(|(t, block)| {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        for (r, row) in block.chunks_exact_mut(k).enumerate() {
            let i = t * TILE + r;
            let xx = rows.row_norm(i);
            for (j, o) in row.iter_mut().enumerate() {
                *o = T::of(rows.dist2(i, j, xx).sqrt());
            }
        }
    });
    check_cancel(cancel)?;
    Ok(out)
}

/// Weighted sum of squared distances of each row to its nearest centre (scikit-learn's `score` is
/// minus this), in O(n) memory (no `n × k` matrix). Interruptible like [`predict`].
pub fn inertia<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    centers: &[T],
    k: usize,
    cancel: &AtomicBool,
) -> Result<f64> {
    ensure_matrix("X", x, n, d)?;
    inertia_matrix(Matrix::Dense(x), n, d, sample_weight, centers, k, cancel)
}

/// [`inertia`] for dense or CSR rows.
pub fn inertia_matrix<T: Real>(
    x: Matrix<'_, T>,
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    centers: &[T],
    k: usize,
    cancel: &AtomicBool,
) -> Result<f64> {
    let rows = Rows::checked(x, n, d, centers, k)?;
    let (w, weight_exponent) = check_weights(sample_weight, n)?;
    let parts: Vec<f64> = w
        .par_chunks(TILE)
        .enumerate()
        .map(|(t, wt)| {
            if cancel.load(Ordering::Relaxed) {
                return 0.0;
            }
            wt.iter().enumerate().map(|(r, wi)| wi * rows.nearest(t * TILE + r).1).sum()
        })
        .collect();
    check_cancel(cancel)?;
    Ok(ldexp(parts.iter().sum(), weight_exponent))
}

#[cfg(test)]
mod tests;
