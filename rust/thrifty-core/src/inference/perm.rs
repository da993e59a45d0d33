//! NB-permutation: the J splits are drawn once and held fixed; permutation b of y (drawn from
//! `rng::stream(seed, PERM_STREAM + b)`) gives z̄*_b, the mean Fisher-z over the same splits, and
//! p = (1 + #{z̄* ≥ z̄})/(B + 1) (a non-finite z̄* counts as an exceedance).
//!
//! Routes (all give the refit's r up to rounding; `Route::Refit` forces the refit for checking):
//! - fixed bases: the scores do not depend on y, so each permutation is one k-column OLS;
//! - PLS: the PLS1 score space is K̃·Krylov_k(K̃, ỹ) with K̃ = X̃X̃ᵀ, so each split needs only
//!   Gram blocks — n-space (X̃_te X̃ᵀ and K̃) when p ≥ n_tr, p-space (X̃ᵀX̃) when n_tr > p — and all
//!   permutations of a block become matrix products. At k = 1 no K̃ is needed: the held-out
//!   prediction is the fixed linear map X̃_te X̃ᵀ applied to ỹ (the no-refit route);
//! - ridge: the prediction X̃_te X̃ᵀ(K̃ + αI)⁻¹ỹ is a fixed linear map of ỹ;
//! - supervised PCA: screening depends on y, so every permutation refits.
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::prepare;
use crate::inference::fit::{split_r, train_response, wcorr, Data, Learner, Prepared, Spec};
use crate::inference::splits::{check_budget, null_mean_z, permutation, Split, RANK_DEFICIENT};
use crate::linalg::{dot, ols};
use rayon::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Auto,
    Refit,
}

const BLOCK: usize = 512;

/// z̄* for permutations `start .. start + count`.
pub fn nb_permutation_null(
    data: &Data<'_>,
    spec: &Spec,
    splits: &[Split],
    seed: u64,
    start: u64,
    count: usize,
    route: Route,
) -> Result<Vec<f64>> {
    nb_permutation_null_cancellable(data, spec, splits, seed, start, count, route, &AtomicBool::new(false))
}

/// [`nb_permutation_null`] that stops with `Err(Interrupted)` soon after `cancel` is raised (checked
/// per split and per permutation of a refit).
#[allow(clippy::too_many_arguments)]
pub fn nb_permutation_null_cancellable(
    data: &Data<'_>,
    spec: &Spec,
    splits: &[Split],
    seed: u64,
    start: u64,
    count: usize,
    route: Route,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    spec.validate(data.p, splits.len())?;
    if splits.len() < 2 {
        return Err(ThriftyError::invalid("splits", "need at least 2 splits"));
    }
    let per_split = split_null_rs_cancellable(data, spec, splits, seed, start, count, route, cancel)?;
    null_mean_z(&per_split)
}

/// Null r of every split in `splits` (outer) for permutations `start .. start + count` (inner).
/// Per-split bases (`Learner::SplitBases`) are those of `splits`, in order.
#[allow(clippy::too_many_arguments)]
pub fn split_null_rs_cancellable(
    data: &Data<'_>,
    spec: &Spec,
    splits: &[Split],
    seed: u64,
    start: u64,
    count: usize,
    route: Route,
    cancel: &AtomicBool,
) -> Result<Vec<Vec<f64>>> {
    spec.validate(data.p, splits.len())?;
    if splits.is_empty() {
        return Err(ThriftyError::invalid("splits", "need at least 1 split"));
    }
    let n = data.n;
    // permuted index and response copies: count * n entries each
    check_budget("n_perm", count, 2 * n)?;
    let ys: Vec<Vec<f64>> =
        (0..count).map(|b| permutation(n, seed, start + b as u64).into_iter().map(|i| data.y[i]).collect()).collect();
    let standardize = spec.learner.standardizes();
    splits
        .par_iter()
        .enumerate()
        .map(|(j, s)| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            let prep = prepare(data, &s.train, &s.test, standardize)?;
            split_null_r(spec, &prep, &ys, j, route, cancel)
        })
        .collect()
}

/// r of one split for each permuted response in `ys` (NaN where undefined, [`RANK_DEFICIENT`] where a
/// refit is rank deficient).
pub fn split_null_r(
    spec: &Spec,
    prep: &Prepared,
    ys: &[Vec<f64>],
    split: usize,
    route: Route,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let refit_all = || -> Result<Vec<f64>> {
        ys.iter()
            .map(|y| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(ThriftyError::Interrupted);
                }
                Ok(y)
            })
            .map(|y| match split_r(spec, prep, y?, split) {
                Ok(r) => Ok(r),
                Err(ThriftyError::InvalidArgument { arg: "n_components", .. }) => Ok(RANK_DEFICIENT),
                Err(e) => Err(e),
            })
            .collect()
    };
    if route == Route::Refit {
        return refit_all();
    }
    match &spec.learner {
        Learner::Spls { keep } if spec.k == 1 && *keep > 0 => Ok(crate::inference::spls::null_k1(prep, ys, *keep)),
        Learner::Spca { .. } | Learner::Spls { .. } => refit_all(),
        Learner::Basis { .. } | Learner::SplitBases { .. } => fixed_basis_null(spec, prep, ys, split),
        Learner::Pls => Ok(pls_gram_null(prep, ys, spec.k)),
        Learner::Ridge { alpha } => ridge_null(prep, ys, *alpha),
    }
}

fn test_response(prep: &Prepared, y: &[f64]) -> Vec<f64> {
    prep.test.iter().map(|&i| y[i]).collect()
}

fn fixed_basis_null(spec: &Spec, prep: &Prepared, ys: &[Vec<f64>], split: usize) -> Result<Vec<f64>> {
    let (p, k) = (prep.p, spec.k);
    let basis = match &spec.learner {
        Learner::Basis { basis } => basis,
        Learner::SplitBases { bases } => &bases[split],
        _ => unreachable!("fixed_basis_null is only called for fixed bases"),
    };
    let cols = crate::inference::fit::columns(basis, p, k);
    let s_tr: Vec<Vec<f64>> = cols.iter().map(|b| crate::linalg::x_v(&prep.xs_tr, prep.n_tr, p, b)).collect();
    let s_te: Vec<Vec<f64>> = cols.iter().map(|b| crate::linalg::x_v(&prep.xs_te, prep.n_te, p, b)).collect();
    Ok(ys
        .iter()
        .map(|y| {
            let ytr = match train_response(prep, y) {
                Some(v) => v,
                None => return f64::NAN,
            };
            match ols(&s_tr, &ytr) {
                None => RANK_DEFICIENT,
                Some(beta) => {
                    let pred: Vec<f64> = (0..prep.n_te).map(|i| (0..k).map(|a| beta[a] * s_te[a][i]).sum()).collect();
                    wcorr(&pred, &test_response(prep, y), &prep.w_te)
                }
            }
        })
        .collect())
}

/// Rows of a product per [`gemm`] call: on an AVX-512 Xeon faer's blocking runs a 500×1000·1000×500
/// product at ~30 GMAC/s on one core and the same product in 250-row panels at ~53 (OpenBLAS: 45); on an
/// AVX2 EPYC both run at ~18–20, near its peak (OpenBLAS: 21), so the split costs nothing there
/// (`benches/compare_inference_perm_rows.py`); larger products are unaffected by the split.
const PANEL_ROWS: usize = 256;

/// dst = a·b, in balanced row panels of at most [`PANEL_ROWS`] rows.
fn gemm(mut dst: faer::MatMut<'_, f64>, a: MatRef<'_, f64>, b: MatRef<'_, f64>) {
    let m = a.nrows();
    let panels = m.div_ceil(PANEL_ROWS).max(1);
    let rows = m.div_ceil(panels);
    let mut r0 = 0;
    while r0 < m {
        let h = rows.min(m - r0);
        matmul(dst.as_mut().subrows_mut(r0, h), Accum::Replace, a.subrows(r0, h), b, 1.0, Par::Seq);
        r0 += h;
    }
}

/// ỹ columns (n_tr × c) for a block of permuted responses; `ok[b]` is false where y is constant on train.
fn response_block(prep: &Prepared, ys: &[Vec<f64>]) -> (Mat<f64>, Vec<bool>) {
    let mut m = Mat::<f64>::zeros(prep.n_tr, ys.len());
    let mut ok = vec![true; ys.len()];
    for (b, y) in ys.iter().enumerate() {
        match train_response(prep, y) {
            Some(v) => {
                for (i, val) in v.into_iter().enumerate() {
                    m[(i, b)] = val;
                }
            }
            None => ok[b] = false,
        }
    }
    (m, ok)
}

fn col(m: &Mat<f64>, b: usize) -> Vec<f64> {
    (0..m.nrows()).map(|i| m[(i, b)]).collect()
}

/// Orthonormalise column b of `v` against the same column of every matrix in `prev` (twice, for
/// stability); returns false when the column vanishes.
fn orth_column(v: &mut Mat<f64>, prev: &[Mat<f64>], b: usize) -> bool {
    let mut x = v.col_as_slice(b).to_vec();
    let n0 = dot(&x, &x).sqrt();
    for _ in 0..2 {
        for pm in prev {
            let q = pm.col_as_slice(b);
            let c = dot(q, &x);
            for (xi, &qi) in x.iter_mut().zip(q) {
                *xi -= c * qi;
            }
        }
    }
    let nrm = dot(&x, &x).sqrt();
    if !(nrm > 1e-10 * n0) || nrm == 0.0 {
        return false;
    }
    for (o, &xi) in v.col_as_slice_mut(b).iter_mut().zip(&x) {
        *o = xi / nrm;
    }
    true
}

/// X Xᵀ with only the lower triangle multiplied (faer's triangular product), mirrored to the upper.
fn gram_lower_mirrored(x: MatRef<'_, f64>) -> Mat<f64> {
    use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
    let n = x.nrows();
    let mut g = Mat::<f64>::zeros(n, n);
    tri_matmul(
        g.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        x,
        BlockStructure::Rectangular,
        x.transpose(),
        BlockStructure::Rectangular,
        1.0,
        Par::Seq,
    );
    for j in 1..n {
        for i in 0..j {
            g[(i, j)] = g[(j, i)];
        }
    }
    g
}

/// PLS null r via Gram blocks (see the module docs).
fn pls_gram_null(prep: &Prepared, ys: &[Vec<f64>], k: usize) -> Vec<f64> {
    let (n_tr, n_te, p) = (prep.n_tr, prep.n_te, prep.p);
    let xtr = MatRef::from_row_major_slice(&prep.xs_tr, n_tr, p);
    let xte = MatRef::from_row_major_slice(&prep.xs_te, n_te, p);
    let mut out = Vec::with_capacity(ys.len());
    // choose the space: n-space costs ~ n_tr·p·(n_te + [k>1]·n_tr) once + B·k·n_tr·(n_tr + n_te);
    // p-space costs ~ [k>1]·n_tr·p² once + B·(n_tr·p + k·p² + n_te·p)
    let b_est = ys.len() as f64;
    let (ntr, nte, pf, kf) = (n_tr as f64, n_te as f64, p as f64, k as f64);
    let multi = if k > 1 { 1.0 } else { 0.0 };
    let cost_n = ntr * pf * (nte + multi * ntr) + b_est * (kf * ntr * (multi * ntr + nte));
    let cost_p = multi * ntr * pf * pf + b_est * (ntr * pf + multi * kf * pf * pf + nte * pf);
    if cost_n <= cost_p && k == 1 {
        // no-refit route: prediction ∝ X̃_te X̃ᵀ(√w ⊙ y*) with a non-negative factor; centring and
        // scaling of y* drop out because the train columns of X̃ are weighted-centred
        let mut kte = Mat::<f64>::zeros(n_te, n_tr);
        gemm(kte.as_mut(), xte, xtr.transpose());
        let unit = prep.w_te.iter().all(|&w| w == 1.0);
        // one response block and one prediction block per split, overwritten block by block
        let width = BLOCK.min(ys.len());
        let mut y0_buf = Mat::<f64>::zeros(n_tr, width);
        let mut pred_buf = Mat::<f64>::zeros(n_te, width);
        let mut yte_buf = Mat::<f64>::zeros(n_te, width);
        for chunk in ys.chunks(BLOCK) {
            let c = chunk.len();
            let mut constant = vec![false; c];
            for (b, y) in chunk.iter().enumerate() {
                let col = y0_buf.col_as_slice_mut(b);
                // y is finite (validated), so "constant on train" is "no value differs from the first";
                // an OR instead of a min/max chain keeps this gather off a dependency chain
                let first = y[prep.train[0]];
                let mut differs = false;
                for ((o, &i), &s) in col.iter_mut().zip(&prep.train).zip(&prep.sw_tr) {
                    let v = y[i];
                    differs |= v != first;
                    *o = s * v;
                }
                constant[b] = !differs;
                for (o, &i) in yte_buf.col_as_slice_mut(b).iter_mut().zip(&prep.test) {
                    *o = y[i];
                }
            }
            gemm(pred_buf.as_mut().subcols_mut(0, c), kte.as_ref(), y0_buf.as_ref().subcols(0, c));
            let (pred, yte) = (&pred_buf, &yte_buf);
            let mut rs = vec![f64::NAN; c];
            if unit {
                // four permutations' correlations at a time (the same bits as one at a time)
                const G: usize = 4;
                for g in (0..c).step_by(G) {
                    if g + G <= c {
                        let r = corr_group::<G>(
                            std::array::from_fn(|l| pred.col_as_slice(g + l)),
                            std::array::from_fn(|l| yte.col_as_slice(g + l)),
                        );
                        rs[g..g + G].copy_from_slice(&r);
                    } else {
                        for b in g..c {
                            rs[b] = corr(pred.col_as_slice(b), yte.col_as_slice(b));
                        }
                    }
                }
            } else {
                for (b, r) in rs.iter_mut().enumerate() {
                    *r = wcorr(pred.col_as_slice(b), yte.col_as_slice(b), &prep.w_te);
                }
            }
            out.extend(rs.into_iter().zip(&constant).map(|(r, &k)| if k { f64::NAN } else { r }));
        }
    } else if cost_n <= cost_p {
        // k > 1: K̃ is symmetric, so only its lower triangle is formed (half the flops), and the test
        // scores enter only through the OLS prediction Σ_a β_a K̃_te v_a = K̃_te (Σ_a β_a v_a): β is
        // solved on the train side first and one K̃_te product per block gives every prediction
        let mut kte = Mat::<f64>::zeros(n_te, n_tr);
        gemm(kte.as_mut(), xte, xtr.transpose());
        let ktr = gram_lower_mirrored(xtr);
        for chunk in ys.chunks(BLOCK) {
            let (y0, ok) = response_block(prep, chunk);
            let c = chunk.len();
            let mut alive = ok.clone();
            let mut vs: Vec<Mat<f64>> = Vec::with_capacity(k);
            let mut s_tr: Vec<Mat<f64>> = Vec::with_capacity(k);
            let mut v = y0.clone();
            for b in 0..c {
                if alive[b] && !orth_column(&mut v, &[], b) {
                    alive[b] = false;
                }
            }
            for a in 0..k {
                let cur = std::mem::replace(&mut v, Mat::<f64>::zeros(0, 0));
                let mut u = Mat::<f64>::zeros(n_tr, c);
                gemm(u.as_mut(), ktr.as_ref(), cur.as_ref());
                vs.push(cur);
                if a + 1 < k {
                    let mut next = u.clone();
                    for b in 0..c {
                        if alive[b] && !orth_column(&mut next, &vs, b) {
                            alive[b] = false;
                        }
                    }
                    v = next;
                }
                s_tr.push(u);
            }
            let mut coef = Mat::<f64>::zeros(n_tr, c);
            for b in 0..c {
                if !alive[b] {
                    continue;
                }
                let st: Vec<Vec<f64>> = s_tr.iter().map(|m| m.col_as_slice(b).to_vec()).collect();
                match ols(&st, y0.col_as_slice(b)) {
                    None => alive[b] = false,
                    Some(beta) => {
                        let cb = coef.col_as_slice_mut(b);
                        for (va, &ba) in vs.iter().zip(&beta) {
                            for (o, &vi) in cb.iter_mut().zip(va.col_as_slice(b)) {
                                *o += ba * vi;
                            }
                        }
                    }
                }
            }
            let mut pred = Mat::<f64>::zeros(n_te, c);
            gemm(pred.as_mut(), kte.as_ref(), coef.as_ref());
            for b in 0..c {
                if !ok[b] {
                    out.push(f64::NAN);
                } else if !alive[b] {
                    out.push(RANK_DEFICIENT);
                } else {
                    out.push(wcorr(pred.col_as_slice(b), &test_response(prep, &chunk[b]), &prep.w_te));
                }
            }
        }
    } else {
        let mut cmat = Mat::<f64>::zeros(0, 0);
        if k > 1 {
            cmat = Mat::<f64>::zeros(p, p);
            gemm(cmat.as_mut(), xtr.transpose(), xtr);
        }
        for chunk in ys.chunks(BLOCK) {
            let (y0, ok) = response_block(prep, chunk);
            let c = chunk.len();
            let mut g = Mat::<f64>::zeros(p, c);
            gemm(g.as_mut(), xtr.transpose(), y0.as_ref());
            let mut coefs = Mat::<f64>::zeros(p, c);
            let mut alive = ok.clone();
            if k == 1 {
                coefs = g;
            } else {
                let mut ws: Vec<Mat<f64>> = Vec::with_capacity(k);
                let mut cws: Vec<Mat<f64>> = Vec::with_capacity(k);
                let mut w = g.clone();
                for b in 0..c {
                    if alive[b] && !orth_column(&mut w, &[], b) {
                        alive[b] = false;
                    }
                }
                for a in 0..k {
                    let mut cw = Mat::<f64>::zeros(p, c);
                    gemm(cw.as_mut(), cmat.as_ref(), w.as_ref());
                    ws.push(w);
                    if a + 1 < k {
                        let mut next = cw.clone();
                        for b in 0..c {
                            if alive[b] && !orth_column(&mut next, &ws, b) {
                                alive[b] = false;
                            }
                        }
                        w = next;
                    } else {
                        w = Mat::<f64>::zeros(0, 0);
                    }
                    cws.push(cw);
                }
                for b in 0..c {
                    if !alive[b] {
                        continue;
                    }
                    // normal equations (WᵀCW) β = Wᵀg, solved by Cholesky (k×k, SPD)
                    let wcol: Vec<Vec<f64>> = ws.iter().map(|m| col(m, b)).collect();
                    let cwcol: Vec<Vec<f64>> = cws.iter().map(|m| col(m, b)).collect();
                    let gb = col(&g, b);
                    let mut a_m = vec![0.0; k * k];
                    for i in 0..k {
                        for j in 0..k {
                            a_m[i * k + j] = 0.5 * (dot(&wcol[i], &cwcol[j]) + dot(&wcol[j], &cwcol[i]));
                        }
                    }
                    let rhs: Vec<f64> = wcol.iter().map(|wc| dot(wc, &gb)).collect();
                    match small_spd_solve(&a_m, &rhs, k) {
                        None => alive[b] = false,
                        Some(beta) => {
                            for i in 0..p {
                                coefs[(i, b)] = (0..k).map(|a| beta[a] * wcol[a][i]).sum();
                            }
                        }
                    }
                }
            }
            let mut pred = Mat::<f64>::zeros(n_te, c);
            gemm(pred.as_mut(), xte, coefs.as_ref());
            for b in 0..c {
                if !ok[b] {
                    out.push(f64::NAN);
                } else if !alive[b] {
                    out.push(RANK_DEFICIENT);
                } else {
                    out.push(wcorr(&col(&pred, b), &test_response(prep, &chunk[b]), &prep.w_te));
                }
            }
        }
    }
    out
}

/// Unweighted Pearson r with the same degenerate-case rule as [`wcorr`] (two passes, no weights; NaN
/// when undefined).
fn corr(a: &[f64], b: &[f64]) -> f64 {
    corr_group([a], [b])[0]
}

/// [`corr`] of L column pairs at once: each pair's sums run in its own accumulator in row order (the
/// bits of L separate calls), and the L independent chains vectorise across the pairs.
fn corr_group<const L: usize>(a: [&[f64]; L], b: [&[f64]; L]) -> [f64; L] {
    let n = a[0].len();
    assert!(a.iter().chain(&b).all(|v| v.len() == n));
    // -0.0 starts the means' sums as `Iterator::sum` does, so a sum of zeros keeps its sign
    let (mut sa, mut sb) = ([-0.0f64; L], [-0.0f64; L]);
    for i in 0..n {
        for l in 0..L {
            sa[l] += a[l][i];
            sb[l] += b[l][i];
        }
    }
    let (ma, mb) = (sa.map(|s| s / n as f64), sb.map(|s| s / n as f64));
    let mut acc = [[0.0f64; L]; 5];
    for i in 0..n {
        for l in 0..L {
            let (x, y) = (a[l][i], b[l][i]);
            let (da, db) = (x - ma[l], y - mb[l]);
            acc[0][l] += da * db;
            acc[1][l] += da * da;
            acc[2][l] += db * db;
            acc[3][l] += x * x;
            acc[4][l] += y * y;
        }
    }
    std::array::from_fn(|l| {
        let [sab, saa, sbb, raa, rbb] = acc.map(|v| v[l]);
        if !(saa > 1e-15 * raa) || !(sbb > 1e-15 * rbb) || saa == 0.0 || sbb == 0.0 {
            return f64::NAN;
        }
        (sab / (saa.sqrt() * sbb.sqrt())).clamp(-1.0, 1.0)
    })
}

/// Cholesky solve of a small SPD system; `None` if not numerically positive definite.
fn small_spd_solve(a: &[f64], b: &[f64], k: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; k * k];
    let scale = (0..k).map(|i| a[i * k + i]).fold(0.0f64, f64::max);
    for i in 0..k {
        for j in 0..=i {
            let mut s = a[i * k + j];
            for m in 0..j {
                s -= l[i * k + m] * l[j * k + m];
            }
            if i == j {
                if !(s > 1e-13 * scale) {
                    return None;
                }
                l[i * k + i] = s.sqrt();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    let mut z = vec![0.0; k];
    for i in 0..k {
        let mut s = b[i];
        for m in 0..i {
            s -= l[i * k + m] * z[m];
        }
        z[i] = s / l[i * k + i];
    }
    let mut x = vec![0.0; k];
    for i in (0..k).rev() {
        let mut s = z[i];
        for m in i + 1..k {
            s -= l[m * k + i] * x[m];
        }
        x[i] = s / l[i * k + i];
    }
    Some(x)
}

/// Ridge null r: the prediction X̃_te X̃ᵀ(K̃ + αI)⁻¹ỹ is a fixed linear map M of ỹ.
fn ridge_null(prep: &Prepared, ys: &[Vec<f64>], alpha: f64) -> Result<Vec<f64>> {
    use faer::prelude::Solve;
    let (n_tr, n_te, p) = (prep.n_tr, prep.n_te, prep.p);
    let xtr = MatRef::from_row_major_slice(&prep.xs_tr, n_tr, p);
    let xte = MatRef::from_row_major_slice(&prep.xs_te, n_te, p);
    let mut kmat = Mat::<f64>::zeros(n_tr, n_tr);
    gemm(kmat.as_mut(), xtr, xtr.transpose());
    for i in 0..n_tr {
        kmat[(i, i)] += alpha;
    }
    let mut g = Mat::<f64>::zeros(n_tr, n_te);
    gemm(g.as_mut(), xtr, xte.transpose());
    let llt = kmat
        .llt(faer::Side::Lower)
        .map_err(|_| ThriftyError::numerical("ridge probe", "Cholesky factorisation failed"))?;
    let z = llt.solve(g.as_ref()); // (K̃+αI)⁻¹ X̃ X̃_teᵀ  = Mᵀ
    let mut out = Vec::with_capacity(ys.len());
    for chunk in ys.chunks(BLOCK) {
        let (y0, ok) = response_block(prep, chunk);
        let mut pred = Mat::<f64>::zeros(n_te, chunk.len());
        gemm(pred.as_mut(), z.transpose(), y0.as_ref());
        for b in 0..chunk.len() {
            out.push(if ok[b] { wcorr(&col(&pred, b), &test_response(prep, &chunk[b]), &prep.w_te) } else { f64::NAN });
        }
    }
    Ok(out)
}
