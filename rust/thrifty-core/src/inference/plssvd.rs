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
//! so a split costs n_tr·p·q for C plus min(p, q)³. When both blocks are wider than the train rows
//! (`rows_route`) C has rank below n_tr and is never formed: the pair comes from n_tr × n_tr Gram
//! matrices (`RowSide`), n_tr²·(p + q) plus a few n_tr³.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{prepare, wcorr, Data, Prepared};
use crate::inference::splits::{check_budget, Split};
use crate::inference::splits::{mean_z_defined, permutation};
use crate::linalg::{sym_eigen, x_v};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};

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
    crate::alloc::ensure_fits(CROSS, 16.0 * xp.p as f64 * yp.p as f64)?;
    let xm = crate::linalg::view(&xp.xs_tr, xp.n_tr, xp.p);
    let ym = crate::linalg::view(&yp.xs_tr, yp.n_tr, yp.p);
    let mut c = crate::alloc::try_mat(CROSS, xp.p, yp.p)?;
    matmul(c.as_mut(), Accum::Replace, xm.transpose(), ym, 1.0, Par::Seq);
    crate::linalg::try_row_major(c.as_ref())
}

/// Held-out latent correlation of one split from prepared blocks (NaN where undefined: no
/// covariance between the train blocks, or a constant held-out score).
fn split_stat(xp: &Prepared, yp: &Prepared, cancel: &AtomicBool) -> Result<f64> {
    if rows_route(xp.n_tr, xp.p, yp.p) {
        let (xm, ym) = (crate::linalg::view(&xp.xs_tr, xp.n_tr, xp.p), crate::linalg::view(&yp.xs_tr, yp.n_tr, yp.p));
        let side = RowSide::new(xm, cancel)?;
        let (pairs, defined) = side.top_pairs(xm, ym, 1, cancel)?;
        return Ok(held_out_r(&pairs, defined, &xp.xs_te, &yp.xs_te, xp.p, yp.p, &xp.w_te));
    }
    let c = cross(xp, yp)?;
    stat_from_cross(&c, &xp.xs_te, &yp.xs_te, xp.p, yp.p, &xp.w_te)
}

/// The split statistic from the train cross matrix `c` (p×q row-major) and the standardised test
/// rows of both blocks (shared by the observed and the permutation paths).
fn stat_from_cross(c: &[f64], xte: &[f64], yte: &[f64], p: usize, q: usize, w_te: &[f64]) -> Result<f64> {
    let pairs = top_pairs(c, p, q, 1)?;
    let cmax = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let s = &pairs.2;
    let defined = !s.is_empty() && s[0] > 1e-12 * cmax && s[0] != 0.0;
    Ok(held_out_r(&pairs, defined, xte, yte, p, q, w_te))
}

/// r = cor(X̃_te u₁, Ỹ_te v₁) of the first pair (test rows row-major), NaN when the pair is not
/// `defined` (no covariance between the train blocks).
fn held_out_r(pairs: &Pairs, defined: bool, xte: &[f64], yte: &[f64], p: usize, q: usize, w_te: &[f64]) -> f64 {
    if !defined {
        return f64::NAN;
    }
    let n_te = w_te.len();
    let a = x_v(xte, n_te, p, &pairs.0[0]);
    let b = x_v(yte, n_te, q, &pairs.1[0]);
    wcorr(&a, &b, w_te)
}

/// Both blocks wider than the train rows: the pairs come from n_tr × n_tr Gram matrices
/// ([`RowSide`]) instead of the p × q cross matrix, which then has rank at most n_tr and can be far
/// larger than the machine (300 rows of 75000 and 75000 columns: 45 GB). Narrower blocks keep the
/// cross-matrix route (and its results bit for bit).
fn rows_route(n_tr: usize, p: usize, q: usize) -> bool {
    p.min(q) > n_tr
}

/// What the n-space route's matrices are called in an out-of-memory error.
const ROWS: &str = "the row-space Gram matrices of the two blocks (n_tr × n_tr)";

/// X's half of the n-space route, shared by every permutation of a split: S = (X̃X̃ᵀ)^{1/2}
/// (n_tr × n_tr, the symmetric PSD root) and tr(X̃X̃ᵀ) = ‖X̃‖²_F.
///
/// With Kʏ = ỸỸᵀ, M = S Kʏ S has the nonzero eigenvalues of CᵀC (C = X̃ᵀỸ), and an eigenvector w
/// of M gives v ∝ Ỹᵀ S w, an eigenvector of CᵀC = Ỹᵀ S² Ỹ (CᵀC Ỹᵀ S w = Ỹᵀ S (S Kʏ S) w); then u ∝ C v =
/// X̃ᵀ(Ỹ v). No p × q or p × p matrix is formed: a split costs n_tr²(p + q) plus three n_tr³.
struct RowSide {
    s: Mat<f64>,
    trace: f64,
}

impl RowSide {
    fn new(x: MatRef<'_, f64>, cancel: &AtomicBool) -> Result<Self> {
        let n = x.nrows();
        crate::alloc::ensure_fits(ROWS, 8.0 * 7.0 * (n as f64).powi(2))?;
        let k = gram_rows(x)?;
        let trace = (0..n).map(|i| k[(i, i)]).sum();
        let (vals, vecs) = sym_eigen(&crate::linalg::try_row_major(k.as_ref())?, n, cancel)?;
        let e = crate::linalg::view(&vecs, n, n);
        let mut er = crate::alloc::try_mat(ROWS, n, n)?;
        for j in 0..n {
            let r = vals[j].max(0.0).sqrt();
            for i in 0..n {
                er[(i, j)] = e[(i, j)] * r;
            }
        }
        let mut s = crate::alloc::try_mat(ROWS, n, n)?;
        matmul(s.as_mut(), Accum::Replace, er.as_ref(), e.transpose(), 1.0, Par::Seq);
        Ok(RowSide { s, trace })
    }

    /// The first `k` pairs of X̃ᵀỸ (as [`top_pairs`]: unit U and V columns, σ, the largest-|entry| of
    /// each U column positive) from the train rows `x` (n_tr × p) and `y` (n_tr × q), and whether the
    /// first is defined: σ₁² above 1e-12 ‖X̃‖²_F ‖Ỹ‖²_F (the eigensolve of M is accurate to about
    /// ε n_tr ‖X̃‖²‖Ỹ‖², so a smaller σ₁ is rounding).
    fn top_pairs(
        &self,
        x: MatRef<'_, f64>,
        y: MatRef<'_, f64>,
        k: usize,
        cancel: &AtomicBool,
    ) -> Result<(Pairs, bool)> {
        let n = x.nrows();
        let ky = gram_rows(y)?;
        let trace_y: f64 = (0..n).map(|i| ky[(i, i)]).sum();
        let mut t = crate::alloc::try_mat(ROWS, n, n)?;
        matmul(t.as_mut(), Accum::Replace, self.s.as_ref(), ky.as_ref(), 1.0, Par::Seq);
        drop(ky);
        let mut m = crate::alloc::try_mat(ROWS, n, n)?;
        matmul(m.as_mut(), Accum::Replace, t.as_ref(), self.s.as_ref(), 1.0, Par::Seq);
        drop(t);
        let (vals, vecs) = sym_eigen(&crate::linalg::try_row_major(m.as_ref())?, n, cancel)?;
        let defined = n > 0 && vals[n - 1] > 1e-12 * self.trace * trace_y && vals[n - 1] > 0.0;
        let (mut us, mut vs, mut ss) = (Vec::with_capacity(k), Vec::with_capacity(k), Vec::with_capacity(k));
        for a in 0..k.min(n) {
            let col = n - 1 - a; // eigenvalues ascend
            let w: Vec<f64> = (0..n).map(|i| vecs[i * n + col]).collect();
            let sw = mat_vec(self.s.as_ref(), &w);
            let mut v = unit(mat_vec(y.transpose(), &sw));
            let mut u = unit(mat_vec(x.transpose(), &mat_vec(y, &v)));
            let big = u.iter().copied().fold(0.0f64, |acc, x| if x.abs() > acc.abs() { x } else { acc });
            if big < 0.0 {
                u.iter_mut().for_each(|x| *x = -*x);
                v.iter_mut().for_each(|x| *x = -*x);
            }
            us.push(u);
            vs.push(v);
            ss.push(vals[col].max(0.0).sqrt());
        }
        Ok(((us, vs, ss), defined))
    }
}

/// A Aᵀ (rows × rows) of a train block, allocated fallibly: the lower triangle by one product (half
/// the flops of a full one, the cost of a permutation on this route), mirrored.
fn gram_rows(a: MatRef<'_, f64>) -> Result<Mat<f64>> {
    use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
    let n = a.nrows();
    let mut g = crate::alloc::try_mat(ROWS, n, n)?;
    let full = BlockStructure::Rectangular;
    tri_matmul(
        g.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        a,
        full,
        a.transpose(),
        full,
        1.0,
        Par::Seq,
    );
    for j in 1..n {
        for i in 0..j {
            g[(i, j)] = g[(j, i)];
        }
    }
    Ok(g)
}

/// a v for a matrix view `a` (any layout).
fn mat_vec(a: MatRef<'_, f64>, v: &[f64]) -> Vec<f64> {
    let mut out = Mat::<f64>::zeros(a.nrows(), 1);
    matmul(out.as_mut(), Accum::Replace, a, MatRef::from_column_major_slice(v, v.len(), 1), 1.0, Par::Seq);
    (0..a.nrows()).map(|i| out[(i, 0)]).collect()
}

/// `v / ‖v‖` (a zero vector stays zero).
fn unit(v: Vec<f64>) -> Vec<f64> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.into_iter().map(|x| x / norm).collect()
    } else {
        v
    }
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
            split_stat(&prepare(&dx, &s.train, &s.test, true)?, &prepare(&dy, &s.train, &s.test, true)?, cancel)
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
            let xp = prepare(&dx, &s.train, &s.test, true)?;
            let (n_tr, n_te, p) = (xp.n_tr, xp.n_te, xp.p);
            let xm = crate::linalg::view(&xp.xs_tr, n_tr, p);
            if rows_route(n_tr, p, q) {
                return rows_null(bl, &xp, &s.train, &s.test, &perms, cancel);
            }
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

/// The permutation statistics of one split on the n-space route: S from X's train rows once, then per
/// permutation Y's permuted rows standardised and the first pair from [`RowSide::top_pairs`].
fn rows_null(
    bl: &Blocks<'_>,
    xp: &Prepared,
    train0: &[usize],
    test0: &[usize],
    perms: &[Vec<usize>],
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let (n_tr, n_te, p, q) = (xp.n_tr, xp.n_te, xp.p, bl.q);
    let xm = crate::linalg::view(&xp.xs_tr, n_tr, p);
    let side = RowSide::new(xm, cancel)?;
    let what = "the permuted blocks of a batch";
    let mut ytr = crate::alloc::try_zeroed(what, n_tr * q)?;
    let mut yte = crate::alloc::try_zeroed(what, n_te * q)?;
    let (mut train, mut test) = (Vec::with_capacity(n_tr), Vec::with_capacity(n_te));
    let mut out = Vec::with_capacity(perms.len());
    for perm in perms {
        if cancel.load(Ordering::Relaxed) {
            return Err(ThriftyError::Interrupted);
        }
        train.clear();
        train.extend(train0.iter().map(|&i| perm[i]));
        test.clear();
        test.extend(test0.iter().map(|&i| perm[i]));
        standardise_y(bl.y, q, &train, &test, &mut ytr, n_tr, 0, &mut yte);
        let ym = MatRef::from_column_major_slice(&ytr, n_tr, q);
        let (pairs, defined) = side.top_pairs(xm, ym, 1, cancel)?;
        out.push(held_out_r(&pairs, defined, &xp.xs_te, &yte, p, q, &xp.w_te));
    }
    Ok(out)
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
    // the n-space route has at most n − 1 nonzero pairs (centred blocks): k ≥ n keeps the cross matrix
    let (u, v, s) = if rows_route(bl.n, bl.p, bl.q) && k < bl.n {
        let never = AtomicBool::new(false);
        let (xm, ym) = (crate::linalg::view(&xp.xs_tr, bl.n, bl.p), crate::linalg::view(&yp.xs_tr, bl.n, bl.q));
        RowSide::new(xm, &never)?.top_pairs(xm, ym, k, &never)?.0
    } else {
        top_pairs(&cross(&xp, &yp)?, bl.p, bl.q, k)?
    };
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
                        &AtomicBool::new(false),
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

    /// Blocks with some shared signal (and, for `constant`, a constant Y column).
    fn blocks(seed: u64, n: usize, p: usize, q: usize, constant: bool) -> (Vec<f64>, Vec<f64>) {
        let mut st = seed;
        let x: Vec<f64> = (0..n * p).map(|_| lcg(&mut st)).collect();
        let mut y: Vec<f64> = (0..n * q).map(|_| lcg(&mut st)).collect();
        for i in 0..n {
            y[i * q] += 0.7 * x[i * p];
            if constant {
                y[i * q + 1] = 2.5;
            }
        }
        (x, y)
    }

    #[test]
    fn the_row_space_route_gives_the_cross_matrix_pairs() {
        // both blocks wider than the rows: the pairs from the n × n Grams are the SVD's of X̃ᵀỸ
        for (seed, n, p, q, k) in [(5u64, 12, 30, 20, 3), (6, 9, 14, 40, 2), (7, 16, 17, 17, 4)] {
            let (x, y) = blocks(seed, n, p, q, seed == 6);
            let bl = Blocks::new(&x, &y, n, p, q).unwrap();
            let all: Vec<usize> = (0..n).collect();
            let xp = prepare(&bl.block(false), &all, &[], true).unwrap();
            let yp = prepare(&bl.block(true), &all, &[], true).unwrap();
            let (u0, v0, s0) = top_pairs(&cross(&xp, &yp).unwrap(), p, q, k).unwrap();
            let never = AtomicBool::new(false);
            let (xm, ym) = (crate::linalg::view(&xp.xs_tr, n, p), crate::linalg::view(&yp.xs_tr, n, q));
            let ((u1, v1, s1), defined) = RowSide::new(xm, &never).unwrap().top_pairs(xm, ym, k, &never).unwrap();
            assert!(defined);
            for a in 0..k {
                assert!((s0[a] - s1[a]).abs() <= 1e-9 * s0[0], "seed {seed} σ{a}: {} vs {}", s0[a], s1[a]);
                for (b0, b1) in u0[a].iter().zip(&u1[a]).chain(v0[a].iter().zip(&v1[a])) {
                    assert!((b0 - b1).abs() <= 1e-7, "seed {seed} pair {a}: {b0} vs {b1}");
                }
            }
        }
    }

    #[test]
    fn the_row_space_route_tests_as_the_cross_matrix_route() {
        // per-split r and the permutation null on wide blocks agree with the p × q computation
        for (seed, n, p, q) in [(8u64, 20, 25, 30), (9, 15, 40, 12), (10, 18, 22, 22)] {
            let (x, y) = blocks(seed, n, p, q, seed == 10);
            let bl = Blocks::new(&x, &y, n, p, q).unwrap();
            let splits = crate::inference::splits::draw_splits(n, 1, 6, seed).unwrap();
            let never = AtomicBool::new(false);
            let via_cross = |bl: &Blocks<'_>, s: &Split| {
                let (xp, yp) = (
                    prepare(&bl.block(false), &s.train, &s.test, true).unwrap(),
                    prepare(&bl.block(true), &s.train, &s.test, true).unwrap(),
                );
                stat_from_cross(&cross(&xp, &yp).unwrap(), &xp.xs_te, &yp.xs_te, p, q, &xp.w_te).unwrap()
            };
            let rs = split_correlations(&bl, &splits, &never).unwrap();
            let wide = splits.iter().filter(|s| rows_route(s.train.len(), p, q)).count();
            assert!(wide > 0, "seed {seed}: no split takes the row-space route");
            for (r, s) in rs.iter().zip(&splits) {
                assert!((r - via_cross(&bl, s)).abs() <= 1e-8, "seed {seed}: {r} vs {}", via_cross(&bl, s));
            }
            let fast = permutation_null(&bl, &splits, seed, 0, 25, &never).unwrap();
            for (b, f) in fast.iter().enumerate() {
                let yb = permuted_rows(bl.y, q, &permutation(n, seed, b as u64));
                let blb = Blocks::new(&x, &yb, n, p, q).unwrap();
                let z = mean_z_defined(splits.iter().map(|s| via_cross(&blb, s)));
                assert!((f - z).abs() <= 1e-8, "seed {seed} permutation {b}: {f} vs {z}");
            }
        }
    }

    #[test]
    fn the_row_space_route_calls_unrelated_blocks_undefined() {
        // Y's only varying column is orthogonal to every X column on the train rows: X̃ᵀỸ = 0
        let n = 8;
        let (p, q) = (10, 12);
        let xs: Vec<f64> = (0..n)
            .flat_map(|i| {
                (0..p).map(move |j| if i < 4 { (j + 1) as f64 } else { -((j + 1) as f64) }).collect::<Vec<_>>()
            })
            .collect();
        let ys: Vec<f64> = (0..n)
            .flat_map(|i| {
                (0..q).map(move |j| if i % 2 == 0 { (j + 1) as f64 } else { -((j + 1) as f64) }).collect::<Vec<_>>()
            })
            .collect();
        let all: Vec<usize> = (0..n).collect();
        let bl = Blocks::new(&xs, &ys, n, p, q).unwrap();
        let xp = prepare(&bl.block(false), &all, &[], true).unwrap();
        let yp = prepare(&bl.block(true), &all, &[], true).unwrap();
        let never = AtomicBool::new(false);
        let (xm, ym) = (crate::linalg::view(&xp.xs_tr, n, p), crate::linalg::view(&yp.xs_tr, n, q));
        let (_, defined) = RowSide::new(xm, &never).unwrap().top_pairs(xm, ym, 1, &never).unwrap();
        assert!(!defined);
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
