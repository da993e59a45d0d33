//! Two-block symmetric PLS ("PLS-SVD", PLSC, plskit's PLS3): the SVD of the standardised
//! cross-covariance X̃ᵀỸ, and its split-half confirmatory test.
//!
//! Per split: standardise both blocks with their train moments (population SD; constant train
//! columns drop out), take the first singular pair (u₁, v₁) of X̃_trᵀỸ_tr and score the split by the
//! held-out latent correlation r = cor(X̃_te u₁, Ỹ_te v₁). A simultaneous sign flip of (u₁, v₁) leaves r
//! unchanged, so no sign convention enters the test. Under the null (rows of Y independent of X's)
//! r on one split follows the ordinary null correlation law given the train part; the splits are
//! combined by the same Fisher-z / Nadeau–Bengio machinery as the one-block test (`nb`), and the
//! permutation twin shuffles the rows of Y with the splits held fixed (permutation b is
//! `perm::permutation(n, seed, b)`, as everywhere in the inference core).
//!
//! The first pair comes from the eigenvector of the smaller Gram matrix (CᵀC when q ≤ p, else CCᵀ),
//! so a split costs n_tr·p·q for C plus min(p, q)³.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{prepare, wcorr, Data, Prepared};
use crate::inference::splits::{check_budget, Split};
use crate::inference::splits::{mean_z_defined, permutation};
use crate::linalg::{sym_eigen, x_v};

/// Two blocks of the same rows: `x` is row-major n×p, `y` row-major n×q, both finite.
#[derive(Clone, Copy, Debug)]
pub struct Blocks<'a> {
    pub x: &'a [f64],
    pub y: &'a [f64],
    pub n: usize,
    pub p: usize,
    pub q: usize,
}

impl<'a> Blocks<'a> {
    /// Validate shapes and values (every problem is an `Err` naming the argument).
    pub fn new(x: &'a [f64], y: &'a [f64], n: usize, p: usize, q: usize) -> Result<Self> {
        crate::error::ensure_matrix("X", x, n, p)?;
        crate::error::ensure_matrix("Y", y, n, q)?;
        crate::error::ensure_finite("X", x)?;
        crate::error::ensure_finite("Y", y)?;
        if n < 6 {
            return Err(ThriftyError::invalid("X", format!("{n} rows are too few: need at least 6")));
        }
        Ok(Blocks { x, y, n, p, q })
    }

    fn block(&self, second: bool) -> Data<'a> {
        // `Data`'s y is not read by `prepare`; the fields are filled directly (inputs validated above)
        let (v, c) = if second { (self.y, self.q) } else { (self.x, self.p) };
        Data { x: v, n: self.n, p: c, y: &[], w: None }
    }
}

/// U columns, V columns and singular values of [`top_pairs`].
pub type Pairs = (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<f64>);

/// The first `k` singular triplets of the p×q matrix `c` (row-major): U (p×k), V (q×k), σ (k),
/// with the largest-|entry| of each U column made positive (V flipped with it).
pub fn top_pairs(c: &[f64], p: usize, q: usize, k: usize) -> Result<Pairs> {
    let small = q <= p;
    let m = if small { q } else { p };
    // Gram matrix of the smaller side
    let mut g = crate::alloc::try_zeroed("the Gram matrix of the cross-covariance's smaller side", m * m)?;
    for a in 0..m {
        for b in 0..=a {
            let s: f64 = if small {
                (0..p).map(|i| c[i * q + a] * c[i * q + b]).sum()
            } else {
                (0..q).map(|j| c[a * q + j] * c[b * q + j]).sum()
            };
            g[a * m + b] = s;
            g[b * m + a] = s;
        }
    }
    let (vals, vecs) = sym_eigen(&g, m, &std::sync::atomic::AtomicBool::new(false))?;
    let mut us = Vec::with_capacity(k);
    let mut vs = Vec::with_capacity(k);
    let mut ss = Vec::with_capacity(k);
    for a in 0..k.min(m) {
        let col = m - 1 - a; // eigenvalues ascend
        let e: Vec<f64> = (0..m).map(|i| vecs[i * m + col]).collect();
        let sigma = vals[col].max(0.0).sqrt();
        // the other side: C e / σ (or Cᵀ e / σ)
        let other: Vec<f64> = if small {
            (0..p).map(|i| (0..q).map(|j| c[i * q + j] * e[j]).sum::<f64>()).collect()
        } else {
            (0..q).map(|j| (0..p).map(|i| c[i * q + j] * e[i]).sum::<f64>()).collect()
        };
        let norm = other.iter().map(|v| v * v).sum::<f64>().sqrt();
        let other: Vec<f64> = if norm > 0.0 { other.iter().map(|v| v / norm).collect() } else { other };
        let (mut u, mut v) = if small { (other, e) } else { (e, other) };
        let big = u.iter().copied().fold(0.0f64, |acc, x| if x.abs() > acc.abs() { x } else { acc });
        if big < 0.0 {
            u.iter_mut().for_each(|x| *x = -*x);
            v.iter_mut().for_each(|x| *x = -*x);
        }
        us.push(u);
        vs.push(v);
        ss.push(sigma);
    }
    Ok((us, vs, ss))
}

/// What the cross-covariance matrix is called in an out-of-memory error.
const CROSS: &str = "the cross-covariance matrix X'Y (p × q)";

/// C = X̃ᵀỸ (p×q, row-major) of prepared train parts.
fn cross(xp: &Prepared, yp: &Prepared) -> Result<Vec<f64>> {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Par};
    crate::alloc::ensure_fits(CROSS, 16.0 * xp.p as f64 * yp.p as f64)?;
    let xm = crate::linalg::view(&xp.xs_tr, xp.n_tr, xp.p);
    let ym = crate::linalg::view(&yp.xs_tr, yp.n_tr, yp.p);
    let mut c = crate::alloc::try_mat(CROSS, xp.p, yp.p)?;
    matmul(c.as_mut(), Accum::Replace, xm.transpose(), ym, 1.0, Par::Seq);
    crate::linalg::try_row_major(c.as_ref())
}

/// Held-out latent correlation of one split from prepared blocks (NaN where undefined: no
/// covariance between the train blocks, or a constant held-out score).
fn split_stat(xp: &Prepared, yp: &Prepared) -> Result<f64> {
    let c = cross(xp, yp)?;
    stat_from_cross(&c, &xp.xs_te, &yp.xs_te, xp.p, yp.p, &xp.w_te)
}

/// The split statistic from the train cross matrix `c` (p×q row-major) and the standardised test
/// rows of both blocks (shared by the observed and the permutation paths).
fn stat_from_cross(c: &[f64], xte: &[f64], yte: &[f64], p: usize, q: usize, w_te: &[f64]) -> Result<f64> {
    let (u, v, s) = top_pairs(c, p, q, 1)?;
    let cmax = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if s.is_empty() || !(s[0] > 1e-12 * cmax) || s[0] == 0.0 {
        return Ok(f64::NAN);
    }
    let n_te = w_te.len();
    let a = x_v(xte, n_te, p, &u[0]);
    let b = x_v(yte, n_te, q, &v[0]);
    Ok(wcorr(&a, &b, w_te))
}

/// Permutations per batched cross-matrix GEMM (bounds the scratch to n_tr·q·BATCH values and sets
/// how often the cancel flag is read).
const BATCH: usize = 64;

/// At most this many values in a batch's cross matrices (p × q per permutation): wide blocks get
/// smaller batches rather than a p·q·BATCH scratch per thread (64 MiB here).
const BATCH_CROSS_VALUES: usize = 8 << 20;

/// Standardise the rows `rows` of the (already permuted, unweighted) Y with the moments of its
/// train rows, exactly as [`prepare`] does for unit weights: the train part is written into column
/// block `col0 .. col0 + q` of the column-major n_tr×ld matrix `tr`, the test part row-major into `te`.
#[allow(clippy::too_many_arguments)]
fn standardise_y(
    y: &[f64],
    q: usize,
    train: &[usize],
    test: &[usize],
    tr: &mut [f64],
    n_tr: usize,
    col0: usize,
    te: &mut [f64],
) {
    let shift = &y[train[0] * q..(train[0] + 1) * q];
    let (mut s1, mut s2) = (vec![0.0f64; q], vec![0.0f64; q]);
    for &i in train {
        let row = &y[i * q..(i + 1) * q];
        for j in 0..q {
            let d = row[j] - shift[j];
            s1[j] += d;
            s2[j] += d * d;
        }
    }
    // unit weights: prepare's weight total is the train count (a sum of ones, exact)
    let inv = if train.is_empty() { 0.0 } else { 1.0 / train.len() as f64 };
    for j in 0..q {
        let dm = s1[j] * inv;
        let mean = shift[j] + dm;
        let sd = (s2[j] * inv - dm * dm).max(0.0).sqrt();
        let scale = if crate::inference::fit::is_constant(mean, sd) { f64::INFINITY } else { sd };
        let is = 1.0 / scale;
        let col = &mut tr[(col0 + j) * n_tr..(col0 + j + 1) * n_tr];
        for (o, &i) in col.iter_mut().zip(train) {
            *o = (y[i * q + j] - mean) * is;
        }
        for (a, &i) in test.iter().enumerate() {
            te[a * q + j] = (y[i * q + j] - mean) * is;
        }
    }
}

/// Held-out latent correlation on every split (parallel over splits).
pub fn split_correlations(bl: &Blocks<'_>, splits: &[Split], cancel: &AtomicBool) -> Result<Vec<f64>> {
    let (dx, dy) = (bl.block(false), bl.block(true));
    splits
        .par_iter()
        .map(|s| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            split_stat(&prepare(&dx, &s.train, &s.test, true)?, &prepare(&dy, &s.train, &s.test, true)?)
        })
        .collect()
}

/// Mean Fisher z over the fixed splits for the permutations `start .. start + count` of Y's rows
/// (NaN splits left out, as on the observed side).
pub fn permutation_null(
    bl: &Blocks<'_>,
    splits: &[Split],
    seed: u64,
    start: u64,
    count: usize,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    check_budget("n_perm", count, bl.n)?;
    let dx = bl.block(false);
    // the permutations, not the permuted copies of Y (count × n × q): a permuted Y's row a is Y's
    // row perm[a], read in place
    let perms: Vec<Vec<usize>> =
        (0..count).into_par_iter().map(|b| permutation(bl.n, seed, start + b as u64)).collect();
    // per split: X prepared once; the permuted Y blocks standardised in batches and all their train
    // cross matrices X̃_trᵀ[Ỹ_π1 … Ỹ_πB] formed by one GEMM per batch (the same statistic as
    // `split_stat` on `prepare`d permuted blocks, up to the summation order of the cross products)
    let q = bl.q;
    let per_split: Vec<Vec<f64>> = splits
        .par_iter()
        .map(|s| {
            use faer::linalg::matmul::matmul;
            use faer::{Accum, MatRef, Par};
            let xp = prepare(&dx, &s.train, &s.test, true)?;
            let (n_tr, n_te, p) = (xp.n_tr, xp.n_te, xp.p);
            let xm = crate::linalg::view(&xp.xs_tr, n_tr, p);
            let nb = BATCH.min(count.max(1)).min((BATCH_CROSS_VALUES / (p * q).max(1)).max(1));
            let what = "the permuted blocks of a batch";
            let mut ytr = crate::alloc::try_zeroed(what, n_tr * q * nb)?;
            let mut yte = crate::alloc::try_zeroed(what, n_te * q * nb)?;
            let mut cm = crate::alloc::try_mat(CROSS, p, q * nb)?;
            let mut c = crate::alloc::try_zeroed(CROSS, p * q)?;
            let (mut train, mut test) = (Vec::with_capacity(n_tr), Vec::with_capacity(n_te));
            let mut out = Vec::with_capacity(count);
            for b0 in (0..count).step_by(nb) {
                if cancel.load(Ordering::Relaxed) {
                    return Err(ThriftyError::Interrupted);
                }
                let m = nb.min(count - b0);
                for k in 0..m {
                    let perm = &perms[b0 + k];
                    train.clear();
                    train.extend(s.train.iter().map(|&i| perm[i]));
                    test.clear();
                    test.extend(s.test.iter().map(|&i| perm[i]));
                    let te = &mut yte[k * n_te * q..(k + 1) * n_te * q];
                    standardise_y(bl.y, q, &train, &test, &mut ytr, n_tr, k * q, te);
                }
                let ym = MatRef::from_column_major_slice(&ytr[..n_tr * q * m], n_tr, q * m);
                matmul(cm.as_mut().subcols_mut(0, q * m), Accum::Replace, xm.transpose(), ym, 1.0, Par::Seq);
                for k in 0..m {
                    for i in 0..p {
                        for j in 0..q {
                            c[i * q + j] = cm[(i, k * q + j)];
                        }
                    }
                    let te = &yte[k * n_te * q..(k + 1) * n_te * q];
                    out.push(stat_from_cross(&c, &xp.xs_te, te, p, q, &xp.w_te)?);
                }
            }
            Ok(out)
        })
        .collect::<Result<_>>()?;
    Ok((0..count).map(|b| mean_z_defined(per_split.iter().map(|r| r[b]))).collect())
}

/// PLS-SVD on all rows: X weights U (p×k), Y weights V (q×k), singular values of X̃ᵀỸ / n (the
/// covariances of the latent pairs), and the standardisation moments.
pub struct PlsSvdFit {
    pub x_weights: Vec<f64>,
    pub y_weights: Vec<f64>,
    pub singular_values: Vec<f64>,
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    pub y_mean: Vec<f64>,
    pub y_std: Vec<f64>,
}

/// Fit `k` PLS-SVD pairs on all rows (k ≤ min(p, q)).
pub fn fit(bl: &Blocks<'_>, k: usize) -> Result<PlsSvdFit> {
    if k == 0 || k > bl.p.min(bl.q) {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [1, min(p, q)] = [1, {}], got {k}", bl.p.min(bl.q)),
        ));
    }
    let all: Vec<usize> = (0..bl.n).collect();
    let xp = prepare(&bl.block(false), &all, &[], true)?;
    let yp = prepare(&bl.block(true), &all, &[], true)?;
    let c = cross(&xp, &yp)?;
    let (u, v, s) = top_pairs(&c, bl.p, bl.q, k)?;
    let row_major =
        |cols: &[Vec<f64>], r: usize| -> Vec<f64> { (0..r).flat_map(|i| cols.iter().map(move |col| col[i])).collect() };
    let sd = |sc: &[f64]| -> Vec<f64> { sc.iter().map(|&s| if s.is_finite() { s } else { 0.0 }).collect() };
    Ok(PlsSvdFit {
        x_weights: row_major(&u, bl.p),
        y_weights: row_major(&v, bl.q),
        singular_values: s.iter().map(|v| v / bl.n as f64).collect(),
        x_std: sd(&xp.scale),
        y_std: sd(&yp.scale),
        x_mean: xp.mean,
        y_mean: yp.mean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_pairs_match_a_rank_one_matrix_both_orientations() {
        // c = 3 a bᵀ with unit a (p = 3), b (q = 2): σ₁ = 3, u = ±a, v = ±b
        let a = [0.6, 0.0, 0.8];
        let b = [1.0 / 2f64.sqrt(), -1.0 / 2f64.sqrt()];
        let c: Vec<f64> = (0..3).flat_map(|i| (0..2).map(move |j| 3.0 * a[i] * b[j])).collect();
        let (u, v, s) = top_pairs(&c, 3, 2, 1).unwrap();
        assert!((s[0] - 3.0).abs() < 1e-12);
        for i in 0..3 {
            assert!((u[0][i] - a[i]).abs() < 1e-12);
        }
        for j in 0..2 {
            assert!((v[0][j] - b[j]).abs() < 1e-12);
        }
        let ct: Vec<f64> = (0..2).flat_map(|j| (0..3).map(move |i| 3.0 * a[i] * b[j])).collect();
        let (u2, v2, s2) = top_pairs(&ct, 2, 3, 1).unwrap();
        assert!((s2[0] - 3.0).abs() < 1e-12);
        let sign = if u2[0][0] * b[0] > 0.0 { 1.0 } else { -1.0 };
        for i in 0..3 {
            assert!((v2[0][i] - sign * a[i]).abs() < 1e-12);
        }
    }

    /// Rows of Y reordered by `perm` (row i of the result is row perm[i] of Y).
    fn permuted_rows(y: &[f64], q: usize, perm: &[usize]) -> Vec<f64> {
        perm.iter().flat_map(|&i| y[i * q..(i + 1) * q].iter().copied()).collect()
    }

    /// The straightforward null: every permuted Y `prepare`d and refit by `split_stat`.
    fn slow_null(bl: &Blocks<'_>, splits: &[Split], seed: u64, count: usize) -> Vec<f64> {
        let dx = bl.block(false);
        (0..count)
            .map(|b| {
                let y = permuted_rows(bl.y, bl.q, &permutation(bl.n, seed, b as u64));
                let dy = Data { x: &y, n: bl.n, p: bl.q, y: &[], w: None };
                mean_z_defined(splits.iter().map(|s| {
                    split_stat(
                        &prepare(&dx, &s.train, &s.test, true).unwrap(),
                        &prepare(&dy, &s.train, &s.test, true).unwrap(),
                    )
                    .unwrap()
                }))
            })
            .collect()
    }

    fn lcg(state: &mut u64) -> f64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*state >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
    }

    #[test]
    fn fast_null_matches_the_straightforward_refit() {
        // both orientations (q < p, q > p), a constant Y column, a shared factor, and a batch tail
        for (seed, n, p, q, count) in [(1u64, 40, 8, 3, 70), (2, 33, 3, 6, 9), (3, 50, 12, 4, 130), (4, 24, 5, 5, 1)] {
            let mut st = seed;
            let x: Vec<f64> = (0..n * p).map(|_| lcg(&mut st)).collect();
            let mut y: Vec<f64> = (0..n * q).map(|_| lcg(&mut st)).collect();
            for i in 0..n {
                y[i * q] += 0.7 * x[i * p]; // some signal
                if seed == 3 {
                    y[i * q + 1] = 2.5; // constant column drops out
                }
            }
            let bl = Blocks::new(&x, &y, n, p, q).unwrap();
            let splits = crate::inference::splits::draw_splits(n, 1, 7, seed).unwrap();
            let fast = permutation_null(&bl, &splits, seed, 0, count, &AtomicBool::new(false)).unwrap();
            let slow = slow_null(&bl, &splits, seed, count);
            assert_eq!(fast.len(), count);
            for (a, b) in fast.iter().zip(&slow) {
                assert!(a.is_nan() == b.is_nan(), "NaN rule differs: {a} vs {b}");
                if !a.is_nan() {
                    assert!((a - b).abs() <= 1e-10, "seed {seed}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn fast_null_is_cancellable() {
        let x = vec![0.0; 60];
        let bl = Blocks::new(&x, &x, 20, 3, 3).unwrap();
        let splits = crate::inference::splits::draw_splits(20, 1, 3, 0).unwrap();
        let r = permutation_null(&bl, &splits, 0, 0, 10, &AtomicBool::new(true));
        assert!(matches!(r, Err(ThriftyError::Interrupted)));
    }

    #[test]
    fn bad_blocks_are_errors() {
        assert!(Blocks::new(&[0.0; 10], &[0.0; 10], 5, 2, 2).is_err());
        assert!(Blocks::new(&[f64::NAN; 12], &[0.0; 12], 6, 2, 2).is_err());
        assert!(Blocks::new(&[0.0; 12], &[0.0; 11], 6, 2, 2).is_err());
    }
}
