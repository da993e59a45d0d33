//! Direct TSQR over fixed logical row blocks, shared by the single-machine and the distributed
//! (Dask) orthonormalisation, so both give the same basis bit for bit.
//!
//! The rows are cut into logical blocks of [`LEAF_ROWS`] rows (the last may be shorter), fixed by n
//! alone. Leaf `k` holds the R factor of the Householder QR of block k; node `(h, k)` covers the
//! leaves `[k·2^h, min((k+1)·2^h, L))` and is the R factor of the stacked R's of its two children
//! (or its left child alone when the right one is empty). The root is R of the whole matrix. Any
//! contiguous, block-aligned range of rows (a Dask chunk) computes the maximal nodes inside it
//! ([`chunk_nodes`]); the driver completes the same tree from them ([`reduce_nodes`]). Every QR runs
//! on the calling thread on a freshly allocated faer matrix, so a node is a pure function of its
//! rows: the same on one machine and on any worker, whatever the chunking or worker count.
//!
//! Q is never stored: [`whiten`] turns R into W (p×r) with `X·W` orthonormal — an SVD of the
//! column-equilibrated R gives the numerical rank — and rows of the basis are `x_i·W`, computed by
//! [`apply_rows`] with a fixed summation order (one fused multiply-add per term, k ascending), so a
//! single fetched row comes out exactly as it does inside its block. When R is ill-conditioned the
//! basis is refined by a second TSQR pass over `Y = X·W₁` (TSQR2; one pass leaves ‖QᵀQ − I‖ ≈ ε·κ):
//! rows become `(x_i·W₁)·R₂⁻¹`, the second stage applied to the computed first, as in CholQR2.
use super::{check_cancel, try_zeroed};
use crate::alloc::{try_buffer, try_mat};
use crate::error::{Result, ThriftyError};
use crate::scalar::Real;
use faer::Mat;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

/// Rows per logical block (leaf of the TSQR tree, and block of the proposal guide table).
pub const LEAF_ROWS: usize = 8192;

/// Above this condition number of the equilibrated R the basis gets a second TSQR pass.
pub const ONE_PASS_KAPPA: f64 = 100.0;

/// Number of leaves for n rows.
pub fn n_leaves(n: usize) -> usize {
    n.div_ceil(LEAF_ROWS).max(1)
}

/// Height of the root: the smallest H with 2^H ≥ L.
fn root_height(leaves: usize) -> usize {
    let mut h = 0;
    while (1usize << h) < leaves {
        h += 1;
    }
    h
}

/// `p × p` row-major R (non-negative diagonal; zero rows below min(rows, p)) of the QR of `a`.
fn qr_r(mut a: Mat<f64>) -> Result<Vec<f64>> {
    use faer::dyn_stack::MemStack;
    use faer::linalg::qr::no_pivoting::factor;
    use faer::Par;
    let (m, p) = a.shape();
    let k = m.min(p);
    if k > 0 {
        let bs = factor::recommended_block_size::<f64>(m, p);
        let mut coeff = try_mat("the Householder factors of a TSQR block", bs, k)?;
        let scratch = factor::qr_in_place_scratch::<f64>(m, p, bs, Par::Seq, Default::default());
        let mut mem = try_buffer("the QR workspace of a TSQR block", scratch)?;
        factor::qr_in_place(a.as_mut(), coeff.as_mut(), Par::Seq, MemStack::new(&mut mem), Default::default());
    }
    let mut r = try_zeroed("the R factor (features × features)", p * p)?;
    for i in 0..k {
        let sign = if a[(i, i)] < 0.0 { -1.0 } else { 1.0 };
        for j in i..p {
            r[i * p + j] = sign * a[(i, j)];
        }
    }
    Ok(r)
}

/// A `rows × cols` faer matrix filled by `f`, allocated fallibly.
fn try_from_fn(what: &'static str, rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) -> Result<Mat<f64>> {
    let mut m = try_mat(what, rows, cols)?;
    for j in 0..cols {
        for i in 0..rows {
            m[(i, j)] = f(i, j);
        }
    }
    Ok(m)
}

/// The R factor of the stacked `[a; b]` (both p×p row-major).
pub fn combine(a: &[f64], b: &[f64], p: usize) -> Result<Vec<f64>> {
    let what = "two stacked R factors";
    qr_r(try_from_fn(what, 2 * p, p, |i, j| if i < p { a[i * p + j] } else { b[(i - p) * p + j] })?)
}

/// Rows `x·w` of a row-major `rows × p` block in f64 (`w` row-major `p × r`), each entry summed over
/// k ascending with one fused multiply-add per term (exactly rounded, so the same bits on any x86
/// or portable build), so a row gives the same bits alone or inside any block. Register-tiled 4 rows × 8 columns.
fn apply_impl<T: Real>(x: &[T], rows: usize, p: usize, w: &[f64], r: usize, out: &mut [f64]) {
    let full = r - r % 8;
    let mut i = 0;
    while i < rows {
        let nr = (rows - i).min(4);
        let mut c0 = 0;
        while c0 < full {
            let mut acc = [[0.0f64; 8]; 4];
            if nr == 4 {
                // Constant bounds: the 4×8 accumulators stay in registers.
                let (x0, x1, x2, x3) = (
                    &x[i * p..(i + 1) * p],
                    &x[(i + 1) * p..(i + 2) * p],
                    &x[(i + 2) * p..(i + 3) * p],
                    &x[(i + 3) * p..(i + 4) * p],
                );
                for k in 0..p {
                    let wv: &[f64; 8] = w[k * r + c0..k * r + c0 + 8].try_into().expect("8 columns");
                    let xs = [x0[k].as_f64(), x1[k].as_f64(), x2[k].as_f64(), x3[k].as_f64()];
                    for a in 0..4 {
                        for l in 0..8 {
                            acc[a][l] = xs[a].mul_add(wv[l], acc[a][l]);
                        }
                    }
                }
            } else {
                for k in 0..p {
                    let wv: &[f64; 8] = w[k * r + c0..k * r + c0 + 8].try_into().expect("8 columns");
                    for (a, acc_a) in acc.iter_mut().enumerate().take(nr) {
                        let xa = x[(i + a) * p + k].as_f64();
                        for l in 0..8 {
                            acc_a[l] = xa.mul_add(wv[l], acc_a[l]);
                        }
                    }
                }
            }
            for (a, acc_a) in acc.iter().enumerate().take(nr) {
                out[(i + a) * r + c0..(i + a) * r + c0 + 8].copy_from_slice(acc_a);
            }
            c0 += 8;
        }
        for a in 0..nr {
            for c in full..r {
                let mut s = 0.0;
                for k in 0..p {
                    s = x[(i + a) * p + k].as_f64().mul_add(w[k * r + c], s);
                }
                out[(i + a) * r + c] = s;
            }
        }
        i += nr;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2<T: Real>(x: &[T], rows: usize, p: usize, w: &[f64], r: usize, out: &mut [f64]) {
    // AVX2 + FMA: fused multiply-adds are exactly rounded (IEEE 754), so the result is the same as
    // the portable build's software `mul_add`, only faster.
    apply_impl(x, rows, p, w, r, out)
}

/// `out (rows × r) = x (rows × p) · w (p × r)` in f64 with a fixed per-entry summation order.
pub fn apply_rows<T: Real>(x: &[T], rows: usize, p: usize, w: &[f64], r: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 support was detected at run time.
        unsafe { apply_avx2(x, rows, p, w, r, out) };
        return;
    }
    apply_impl(x, rows, p, w, r, out)
}

/// R of one leaf block (`rows × p`, row-major), of `x·w` when `w` (p×r) is given.
fn leaf<T: Real>(x: &[T], rows: usize, p: usize, w: Option<(&[f64], usize)>) -> Result<Vec<f64>> {
    let what = "a TSQR block (8192 rows × features)";
    match w {
        None => qr_r(try_from_fn(what, rows, p, |i, j| x[i * p + j].as_f64())?),
        Some((w, r)) => {
            let mut y = try_zeroed(what, rows * r)?;
            apply_rows(x, rows, p, w, r, &mut y);
            qr_r(try_from_fn(what, rows, r, |i, j| y[i * r + j])?)
        }
    }
}

/// One node of the tree: (height, index, R as p×p row-major).
pub type Node = (usize, usize, Vec<f64>);

/// The maximal tree nodes inside the rows `first_row .. first_row + rows` of an `n_total`-row
/// matrix (`x` holds those rows, row-major `rows × p`; `first_row` must start a logical block and
/// the range must end at a block boundary or at `n_total`). With `w = Some((W, r))` the tree is that
/// of `x·W` (the second TSQR pass). Leaves run in parallel; `cancel` is checked before each.
pub fn chunk_nodes<T: Real>(
    x: &[T],
    rows: usize,
    p: usize,
    first_row: usize,
    n_total: usize,
    w: Option<(&[f64], usize)>,
    cancel: &AtomicBool,
) -> Result<Vec<Node>> {
    let q = w.map_or(p, |(_, r)| r);
    if !first_row.is_multiple_of(LEAF_ROWS) || first_row + rows > n_total || rows == 0 {
        return Err(ThriftyError::invalid(
            "chunks",
            format!("rows {first_row}..{} do not start a logical block of {LEAF_ROWS} rows", first_row + rows),
        ));
    }
    if !(first_row + rows).is_multiple_of(LEAF_ROWS) && first_row + rows != n_total {
        return Err(ThriftyError::invalid(
            "chunks",
            format!("rows {first_row}..{} do not end at a logical block boundary", first_row + rows),
        ));
    }
    if x.len() < rows * p {
        return Err(ThriftyError::shape("x", "shorter than rows × p"));
    }
    let total = n_leaves(n_total);
    let a = first_row / LEAF_ROWS;
    let leaves: Vec<Vec<f64>> = x[..rows * p]
        .par_chunks(LEAF_ROWS * p)
        .map(|blk| {
            check_cancel(cancel)?;
            leaf(blk, blk.len() / p, p, w)
        })
        .collect::<Result<_>>()?;
    let b = a + leaves.len();
    let top = root_height(total);
    // Greedy decomposition of [a, b) into maximal aligned nodes.
    let mut want = Vec::new();
    let mut pos = a;
    while pos < b {
        let mut h = 0;
        while h < top && pos.is_multiple_of(1 << (h + 1)) && (pos + (1 << (h + 1))).min(total) <= b {
            h += 1;
        }
        want.push((h, pos >> h));
        pos = (pos + (1 << h)).min(total);
    }
    fn build(h: usize, k: usize, a: usize, total: usize, leaves: &[Vec<f64>], q: usize) -> Result<Vec<f64>> {
        if h == 0 {
            return Ok(leaves[k - a].clone());
        }
        let right = (2 * k + 1) << (h - 1);
        if right >= total {
            return build(h - 1, 2 * k, a, total, leaves, q);
        }
        let (l, r) =
            rayon::join(|| build(h - 1, 2 * k, a, total, leaves, q), || build(h - 1, 2 * k + 1, a, total, leaves, q));
        combine(&l?, &r?, q)
    }
    want.into_iter().map(|(h, k)| Ok((h, k, build(h, k, a, total, &leaves, q)?))).collect()
}

/// The root R (p×p) from nodes covering all leaves of an `n_total`-row matrix (any chunking).
pub fn reduce_nodes(nodes: Vec<Node>, n_total: usize, p: usize) -> Result<Vec<f64>> {
    let total = n_leaves(n_total);
    let mut have: HashMap<(usize, usize), Vec<f64>> = HashMap::new();
    for (h, k, r) in nodes {
        if r.len() != p * p {
            return Err(ThriftyError::shape(
                "nodes",
                format!("an R factor has {} values, expected {}", r.len(), p * p),
            ));
        }
        have.insert((h, k), r);
    }
    fn get(
        h: usize,
        k: usize,
        total: usize,
        p: usize,
        have: &mut HashMap<(usize, usize), Vec<f64>>,
    ) -> Result<Vec<f64>> {
        if let Some(r) = have.remove(&(h, k)) {
            return Ok(r);
        }
        if h == 0 {
            return Err(ThriftyError::invalid(
                "nodes",
                format!("logical block {k} is missing (the chunks do not cover the rows)"),
            ));
        }
        let left = get(h - 1, 2 * k, total, p, have)?;
        if ((2 * k + 1) << (h - 1)) >= total {
            return Ok(left);
        }
        let right = get(h - 1, 2 * k + 1, total, p, have)?;
        combine(&left, &right, p)
    }
    get(root_height(total), 0, total, p, &mut have)
}

/// The first-stage whitening W (p×r, row-major) and rank r from the root R of X: with `equilibrate` the columns
/// are scaled to unit norm (‖x_j‖ = ‖R e_j‖) before the rank decision; the SVD `R S = U Σ Vᵀ` keeps
/// the r singular values above `rtol · σ_max` and `W = S V_r Σ_r⁻¹`, so `X W = Q U_r` has orthonormal
/// columns spanning the numerical column space. Also returns σ_max/σ_min over the kept values.
pub fn whiten(r: &[f64], p: usize, rtol: f64, equilibrate: bool) -> Result<(Vec<f64>, usize, f64)> {
    use faer::dyn_stack::MemStack;
    use faer::linalg::svd::{self, ComputeSvdVectors};
    use faer::Par;
    if r.iter().any(|v| !v.is_finite()) {
        return Err(ThriftyError::NotFinite { arg: "features" });
    }
    let scale: Vec<f64> = (0..p)
        .map(|j| {
            let d = (0..p).map(|i| r[i * p + j] * r[i * p + j]).sum::<f64>().sqrt();
            if equilibrate && d > 0.0 && d.is_finite() {
                1.0 / d
            } else {
                1.0
            }
        })
        .collect();
    let a = try_from_fn("the equilibrated R factor", p, p, |i, j| r[i * p + j] * scale[j])?;
    let mut s = faer::diag::Diag::<f64>::zeros(p);
    let mut v = try_mat("the singular vectors of R", p, p)?;
    let scratch =
        svd::svd_scratch::<f64>(p, p, ComputeSvdVectors::No, ComputeSvdVectors::Thin, Par::Seq, Default::default());
    let mut mem = try_buffer("the SVD workspace of R", scratch)?;
    svd::svd(a.as_ref(), s.as_mut(), None, Some(v.as_mut()), Par::Seq, MemStack::new(&mut mem), Default::default())
        .map_err(|e| ThriftyError::numerical("TSQR", format!("SVD of R failed: {e:?}")))?;
    let sv: Vec<f64> = (0..p).map(|i| s.column_vector()[i]).collect();
    let smax = sv.iter().cloned().fold(0.0, f64::max);
    if smax.is_nan() || smax <= 0.0 {
        return Err(ThriftyError::invalid("features", "all columns are zero (rank 0)"));
    }
    let keep: Vec<usize> = (0..p).filter(|&i| sv[i] > rtol * smax).collect();
    let rank = keep.len();
    let mut w = try_zeroed("the whitening (features × rank)", p * rank)?;
    for i in 0..p {
        for (c, &j) in keep.iter().enumerate() {
            w[i * rank + c] = scale[i] * v[(i, j)] / sv[j];
        }
    }
    let smin = keep.iter().map(|&j| sv[j]).fold(f64::INFINITY, f64::min);
    Ok((w, rank, smax / smin))
}

/// `R₂⁻¹` (r×r upper triangular, row-major) after the second pass: the basis rows are then
/// `(x_i·W₁)·R₂⁻¹`, applied in two stages so that the second corrects the rounding of the first.
pub fn refine(r2: &[f64], r: usize) -> Result<Vec<f64>> {
    if r2.len() != r * r
        || (0..r).any(|i| r2[i * r + i].is_nan() || r2[i * r + i] <= 0.0)
        || r2.iter().any(|v| !v.is_finite())
    {
        return Err(ThriftyError::numerical("TSQR", "the second pass lost rank"));
    }
    // Solve R₂ Z = I column by column (back substitution).
    let mut z = vec![0.0; r * r];
    for c in 0..r {
        for i in (0..=c).rev() {
            let mut s = if i == c { 1.0 } else { 0.0 };
            for k in i + 1..=c {
                s -= r2[i * r + k] * z[k * r + c];
            }
            z[i * r + c] = s / r2[i * r + i];
        }
    }
    Ok(z)
}

/// How rows of X become rows of the orthonormal basis: `x·W₁`, then `·W₂` after a second pass.
#[derive(Clone, Debug)]
pub struct Whitening {
    pub w1: Vec<f64>,
    pub w2: Option<Vec<f64>>,
    pub p: usize,
    pub r: usize,
}

impl Whitening {
    /// The basis rows (f64, `rows × r`) of a row-major `rows × p` block.
    pub fn apply<T: Real>(&self, x: &[T], rows: usize, out: &mut [f64]) {
        apply_rows(x, rows, self.p, &self.w1, self.r, out);
        if let Some(w2) = &self.w2 {
            let tmp = out[..rows * self.r].to_vec();
            apply_rows(&tmp, rows, self.r, w2, self.r, out);
        }
    }

    /// The basis rows cast to `T`, block by block in parallel (n×r row-major).
    pub fn basis<T: Real>(&self, x: &[T], n: usize, cancel: &AtomicBool) -> Result<Vec<T>> {
        let (p, r) = (self.p, self.r);
        let mut q: Vec<T> = try_zeroed("the basis (n_samples × rank)", n.saturating_mul(r))?;
        if r == 0 {
            return Ok(q);
        }
        const ROWS: usize = 1024;
        q.par_chunks_mut(ROWS * r).zip(x[..n * p].par_chunks(ROWS * p)).try_for_each(|(qb, xb)| {
            check_cancel(cancel)?;
            let b = xb.len() / p;
            let mut y = try_zeroed("a block of the basis", b * r)?;
            self.apply(xb, b, &mut y);
            for (o, v) in qb.iter_mut().zip(y) {
                *o = T::of(v);
            }
            Ok(())
        })?;
        Ok(q)
    }
}

/// The whitening of an n-row matrix given a way to compute the TSQR root of `X·W` for any `W`
/// (`None` = X itself): one pass, or two when the equilibrated R is ill-conditioned. The driver of
/// the distributed path calls the same steps with roots computed on the cluster.
pub fn whitening_from(
    mut root: impl FnMut(Option<(&[f64], usize)>) -> Result<Vec<f64>>,
    p: usize,
    rtol: f64,
    equilibrate: bool,
) -> Result<Whitening> {
    let r1 = root(None)?;
    let (w1, r, kappa) = whiten(&r1, p, rtol, equilibrate)?;
    if kappa <= ONE_PASS_KAPPA {
        return Ok(Whitening { w1, w2: None, p, r });
    }
    let r2 = root(Some((&w1, r)))?;
    let w2 = refine(&r2, r)?;
    Ok(Whitening { w1, w2: Some(w2), p, r })
}

/// Orthonormal basis `Q` (n×r, row-major, in `T`) of the row-major `n × p` matrix `x` by
/// TSQR over the fixed logical blocks; the same bits as the distributed path on any chunking.
pub fn orthonormalize<T: Real>(
    x: &[T],
    n: usize,
    p: usize,
    rtol: f64,
    equilibrate: bool,
    cancel: &AtomicBool,
) -> Result<(Vec<T>, usize)> {
    let root = |w: Option<(&[f64], usize)>| -> Result<Vec<f64>> {
        let q = w.map_or(p, |(_, r)| r);
        reduce_nodes(chunk_nodes(x, n, p, 0, n, w, cancel)?, n, q)
    };
    let wh = whitening_from(root, p, rtol, equilibrate)?;
    Ok((wh.basis(x, n, cancel)?, wh.r))
}

/// Within-block inverse CDF of the proposal table: for each target `t`, the first row i of the
/// block with `start + c_i > t` (c_i the running sum of `lev` over the block, as in
/// [`super::GuideTable`]); `None` when no row of the block qualifies.
pub fn locate_in_block(lev: &[f64], start: f64, targets: &[f64]) -> Vec<Option<usize>> {
    let mut cum = Vec::with_capacity(lev.len());
    let mut c = 0.0;
    for &l in lev {
        c += l;
        cum.push(start + c);
    }
    targets
        .iter()
        .map(|&t| {
            let i = cum.partition_point(|&v| v <= t);
            (i < cum.len()).then_some(i)
        })
        .collect()
}

/// Sequential sums of `lev` over consecutive blocks of [`LEAF_ROWS`] (the block totals of the
/// proposal table), and the index of the last positive entry (or None).
pub fn block_totals(lev: &[f64]) -> (Vec<f64>, Option<usize>) {
    let totals = lev.chunks(LEAF_ROWS).map(|b| b.iter().fold(0.0, |c, &l| c + l)).collect();
    (totals, lev.iter().rposition(|&l| l > 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpp::{never, ortho};
    use crate::rng;

    fn data(n: usize, p: usize, seed: u64) -> Vec<f64> {
        let mut r = rng::stream(seed, 0);
        (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect()
    }

    #[test]
    fn any_aligned_chunking_gives_the_same_root() {
        let (n, p) = (5 * LEAF_ROWS + 300, 6);
        let x = data(n, p, 1);
        let whole = reduce_nodes(chunk_nodes(&x, n, p, 0, n, None, never()).unwrap(), n, p).unwrap();
        for cuts in
            [vec![0, LEAF_ROWS, n], vec![0, 3 * LEAF_ROWS, 4 * LEAF_ROWS, n], vec![0, 2 * LEAF_ROWS, 5 * LEAF_ROWS, n]]
        {
            let mut nodes = Vec::new();
            for w in cuts.windows(2) {
                nodes.extend(chunk_nodes(&x[w[0] * p..w[1] * p], w[1] - w[0], p, w[0], n, None, never()).unwrap());
            }
            assert_eq!(reduce_nodes(nodes, n, p).unwrap(), whole);
        }
        // RᵀR = XᵀX.
        let g = ortho::gram(&x, n, p).unwrap();
        for i in 0..p {
            for j in 0..p {
                let rtr: f64 = (0..p).map(|k| whole[k * p + i] * whole[k * p + j]).sum();
                assert!((rtr - g[i * p + j]).abs() < 1e-9 * g[i * p + i].max(1.0));
            }
        }
        assert!(chunk_nodes(&x[p..], 10, p, 1, n, None, never()).is_err());
        assert!(reduce_nodes(vec![], n, p).is_err());
    }

    #[test]
    fn basis_is_orthonormal_rows_are_exact_and_rank_is_found() {
        let (n, p) = (3 * LEAF_ROWS + 17, 5);
        let mut x = data(n, p, 2);
        for i in 0..n {
            x[i * p + 4] = x[i * p] - 3.0 * x[i * p + 1];
            x[i * p + 2] *= 1e-7;
        }
        let (q, r) = orthonormalize(&x, n, p, 1e-6, true, never()).unwrap();
        assert_eq!(r, 4);
        assert!(ortho::orthonormality_error(&q, n, r).unwrap() < 1e-12);
        // Ill-conditioned but full rank: the second pass keeps it orthonormal.
        let mut y = data(n, 3, 3);
        for i in 0..n {
            y[i * 3 + 2] = y[i * 3] + 1e-5 * y[i * 3 + 2];
        }
        let (qy, ry) = orthonormalize(&y, n, 3, 1e-8, true, never()).unwrap();
        assert_eq!(ry, 3);
        assert!(ortho::orthonormality_error(&qy, n, 3).unwrap() < 1e-12);
        // A single row through apply_rows equals its row inside the block.
        let root = reduce_nodes(chunk_nodes(&x, n, p, 0, n, None, never()).unwrap(), n, p).unwrap();
        let (w, rr, _) = whiten(&root, p, 1e-6, true).unwrap();
        let w2: Vec<f64> = (0..rr * rr).map(|k| if k % (rr + 1) == 0 { 1.0 } else { 0.1 }).collect();
        let wh = Whitening { w1: w, w2: Some(w2), p, r: rr };
        let all = wh.basis(&x, n, never()).unwrap();
        for i in [0, 3, 1025, n - 1] {
            let mut one = vec![0.0; rr];
            wh.apply(&x[i * p..(i + 1) * p], 1, &mut one);
            assert_eq!(one, all[i * rr..(i + 1) * rr].to_vec());
        }
        assert!(orthonormalize(&[0.0; 20], 4, 5, 1e-6, true, never()).is_err());
    }

    #[test]
    fn locate_is_the_inverse_cdf() {
        let lev = [0.5, 0.0, 0.25, 1.0];
        let got = locate_in_block(&lev, 2.0, &[2.0, 2.49, 2.5, 2.74, 2.75, 3.74, 3.75]);
        assert_eq!(got, vec![Some(0), Some(0), Some(2), Some(2), Some(3), Some(3), None]);
        let (t, last) = block_totals(&[1.0, 2.0, 0.0]);
        assert_eq!((t, last), (vec![3.0], Some(1)));
    }
}
