//! Sparse PLS1 with a keep-count: every weight vector loads on exactly `keep` variables.
//!
//! Component a computes the PLS1 weight c = X_aᵀy_a on the deflated data, keeps its `keep` entries
//! of largest |value| (ties broken by the lower index), sets the others to 0 and normalises; scores,
//! loadings and deflation are PLS1's (NIPALS). Deflation keeps PᵀW unit upper triangular for any
//! weight vectors, so the rotations R = W(PᵀW)⁻¹ give T = XR and the coefficients R q are the OLS refit
//! of y on the k scores, exactly as for PLS1; `keep = p` is PLS1 bit for bit (the same code path).
//!
//! `keep = 0` asks for the keep-count to be chosen by K-fold cross-validation on the rows given
//! ([`choose_keep`]): the grid is the powers of two below p and p itself, and the sparsest keep whose
//! mean fold R² is within one standard error of the best is chosen (the one-SE rule). Inside the
//! split test this runs on every train part (and for every permutation), so the choice never sees
//! test rows and the test stays calibrated.
use crate::error::{Result, ThriftyError};
use crate::inference::fit::{nipals_shaped, prepare, train_response, Data, Nipals, Prepared};
use crate::linalg::{dot, x_v, xt_v};

/// Folds of the keep-count cross-validation (rows are assigned by position, `i mod CV_FOLDS`).
pub const CV_FOLDS: usize = 5;

/// Keep the `keep` entries of largest |value| (ties: lower index first), zero the rest.
pub fn hard_threshold(w: &mut [f64], keep: usize) {
    if keep >= w.len() {
        return;
    }
    let mut idx: Vec<usize> = (0..w.len()).collect();
    idx.select_nth_unstable_by(keep, |&a, &b| w[b].abs().total_cmp(&w[a].abs()).then(a.cmp(&b)));
    for &j in &idx[keep..] {
        w[j] = 0.0;
    }
}

/// Sparse PLS1 by NIPALS on standardised row-major `x` (n×p, deflated in place) and `y`.
pub fn spls_nipals(x: &mut [f64], y: &mut [f64], n: usize, p: usize, k: usize, keep: usize) -> Result<Nipals> {
    check_keep(keep, p)?;
    nipals_shaped(x, y, n, p, k, false, false, |w| hard_threshold(w, keep))
}

fn check_keep(keep: usize, p: usize) -> Result<()> {
    if keep == 0 || keep > p {
        return Err(ThriftyError::invalid("spls_keep", format!("must be in [1, n_features={p}], got {keep}")));
    }
    Ok(())
}

/// The keep-count grid of the cross-validation: 1, 2, 4, … below p, and p.
pub fn keep_grid(p: usize) -> Vec<usize> {
    let mut g: Vec<usize> = std::iter::successors(Some(1usize), |v| v.checked_mul(2)).take_while(|&v| v < p).collect();
    g.push(p);
    g
}

/// Coefficients (standardised space) of sparse PLS1 with `k` components on prepared train rows `x`
/// (n×p) and response `y`; without copying X when k = 1.
pub fn spls_coef(x: &[f64], y: &[f64], n: usize, p: usize, k: usize, keep: usize) -> Result<Vec<f64>> {
    check_keep(keep, p)?;
    if k == 1 {
        let mut w = xt_v(x, n, p, y);
        hard_threshold(&mut w, keep);
        let t = x_v(x, n, p, &w);
        let tt = dot(&t, &t);
        let scale = dot(&w, &w).sqrt() * dot(y, y).sqrt() * dot(x, x).sqrt();
        if !(tt > 1e-20 * scale * scale) || tt == 0.0 || !tt.is_finite() {
            return Err(ThriftyError::invalid(
                "n_components",
                "component 1 is degenerate (X'y vanishes on the kept variables): n_components must be below the rank of the data",
            ));
        }
        let q = dot(y, &t) / tt;
        return Ok(w.into_iter().map(|v| v * q).collect());
    }
    let mut xc = crate::alloc::try_copied("the rows sparse NIPALS deflates", x)?;
    let mut yc = y.to_vec();
    Ok(spls_nipals(&mut xc, &mut yc, n, p, k, keep)?.coef())
}

/// Mean and standard error (over folds) of the fold R² of sparse PLS1 for every keep of `grid`, on
/// rows `x` (n×p, standardised) and `y`; folds by position. A fold whose fit degenerates scores −∞;
/// running out of memory is an error, not a score.
pub fn keep_cv_curve(
    x: &[f64],
    y: &[f64],
    n: usize,
    p: usize,
    k: usize,
    grid: &[usize],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let folds = CV_FOLDS.min(n);
    let mut scores = vec![vec![f64::NEG_INFINITY; folds]; grid.len()];
    for f in 0..folds {
        let inn: Vec<usize> = (0..n).filter(|i| i % folds != f).collect();
        let out: Vec<usize> = (0..n).filter(|i| i % folds == f).collect();
        if inn.len() < k + 2 || out.len() < 2 {
            continue;
        }
        let (xi, yi, xo, yo) = centred_fold(x, y, p, &inn, &out)?;
        for (g, &keep) in grid.iter().enumerate() {
            match spls_coef(&xi, &yi, inn.len(), p, k, keep) {
                Ok(coef) => scores[g][f] = fold_r2(&x_v(&xo, out.len(), p, &coef), &yo),
                Err(e @ ThriftyError::OutOfMemory { .. }) => return Err(e),
                Err(_) => {}
            }
        }
    }
    Ok(scores.iter().map(|s| mean_se(s)).unzip())
}

/// A fold's centred in-fold rows and response, then its centred out-of-fold rows and response.
pub(crate) type Fold = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

/// In-fold rows and response centred by the in-fold means, out-of-fold rows and response centred by
/// the same (in-fold) means: the fit has no intercept to learn and ŷ is comparable with the returned y.
pub(crate) fn centred_fold(x: &[f64], y: &[f64], p: usize, inn: &[usize], out: &[usize]) -> Result<Fold> {
    let mut mx = vec![0.0; p];
    for &i in inn {
        mx.iter_mut().zip(&x[i * p..(i + 1) * p]).for_each(|(m, v)| *m += v);
    }
    mx.iter_mut().for_each(|m| *m /= inn.len() as f64);
    let my = inn.iter().map(|&i| y[i]).sum::<f64>() / inn.len() as f64;
    let rows = |idx: &[usize]| -> Result<Vec<f64>> {
        let mut v = crate::alloc::try_with_capacity("the centred rows of a fold", idx.len() * p)?;
        v.extend(idx.iter().flat_map(|&i| x[i * p..(i + 1) * p].iter().zip(&mx).map(|(v, m)| v - m)));
        Ok(v)
    };
    let resp = |idx: &[usize]| -> Vec<f64> { idx.iter().map(|&i| y[i] - my).collect() };
    Ok((rows(inn)?, resp(inn), rows(out)?, resp(out)))
}

/// Fold R² = 1 − SSE/SST with SST around the fold's own mean (−∞ when the fold's y is constant).
pub(crate) fn fold_r2(pred: &[f64], yo: &[f64]) -> f64 {
    let m = yo.iter().sum::<f64>() / yo.len() as f64;
    let sst: f64 = yo.iter().map(|v| (v - m).powi(2)).sum();
    let sse: f64 = pred.iter().zip(yo).map(|(a, b)| (a - b).powi(2)).sum();
    if sst > 0.0 {
        1.0 - sse / sst
    } else {
        f64::NEG_INFINITY
    }
}

/// Mean and standard error (sd / √folds) of per-fold scores; SE ∞ when the mean is not finite.
pub(crate) fn mean_se(scores: &[f64]) -> (f64, f64) {
    let f = scores.len();
    let m = scores.iter().sum::<f64>() / f as f64;
    if !m.is_finite() || f < 2 {
        return (m, f64::INFINITY);
    }
    let v = scores.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (f - 1) as f64;
    (m, (v / f as f64).sqrt())
}

/// The one-SE choice over a curve whose entries are ordered from the sparsest (index 0) on: the first
/// entry whose mean is within one SE of the best mean. `None` when no entry is finite.
pub fn one_se_choice(mean: &[f64], se: &[f64]) -> Option<usize> {
    let best = (0..mean.len()).filter(|&g| mean[g].is_finite()).max_by(|&a, &b| mean[a].total_cmp(&mean[b]))?;
    let bar = mean[best] - if se[best].is_finite() { se[best] } else { 0.0 };
    (0..mean.len()).find(|&g| mean[g] >= bar)
}

/// The keep-count chosen by cross-validation on rows `x` (n×p, standardised) and `y` (one-SE rule
/// over [`keep_grid`]); p when no grid point can be scored.
pub fn choose_keep(x: &[f64], y: &[f64], n: usize, p: usize, k: usize) -> Result<usize> {
    let grid = keep_grid(p);
    let (mean, se) = keep_cv_curve(x, y, n, p, k, &grid)?;
    Ok(one_se_choice(&mean, &se).map_or(p, |g| grid[g]))
}

/// The sparse learner on one prepared split (the [`crate::inference::Learner::Spls`] arm of `fit_coef`).
pub fn fit_coef(prep: &Prepared, ytr: &[f64], k: usize, keep: usize) -> Result<Vec<f64>> {
    let (n, p) = (prep.n_tr, prep.p);
    let keep = if keep == 0 { choose_keep(&prep.xs_tr, ytr, n, p, k)? } else { keep };
    spls_coef(&prep.xs_tr, ytr, n, p, k, keep)
}

/// Held-out r of one prepared split for each permuted response in `ys` (k = 1, fixed `keep`), in
/// blocks of responses by matrix products: C = X̃_trᵀ(√w ⊙ y*) for the whole block, each column
/// thresholded to its `keep` largest entries (w), predictions X̃_te w. The OLS slope on t = X̃_tr w is
/// cᵀw / tᵀt > 0 (w is c on its support), and centring and scaling of y* only rescale c by a positive
/// factor (X̃'s train columns are weighted-centred), so r = cor(X̃_te w, y*_te) is the refit's r.
/// NaN where y* is constant on the train part, `perm::RANK_DEFICIENT` where c vanishes.
pub fn null_k1(prep: &Prepared, ys: &[Vec<f64>], keep: usize) -> Vec<f64> {
    use crate::inference::splits::RANK_DEFICIENT;
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Mat, Par};
    let (n_tr, n_te, p) = (prep.n_tr, prep.n_te, prep.p);
    let xtr = crate::linalg::view(&prep.xs_tr, n_tr, p);
    let xte = crate::linalg::view(&prep.xs_te, n_te, p);
    let xnorm = dot(&prep.xs_tr, &prep.xs_tr).sqrt();
    let w2: Vec<f64> = prep.sw_tr.iter().map(|s| s * s).collect();
    let sw: f64 = w2.iter().sum();
    let mut out = Vec::with_capacity(ys.len());
    for chunk in ys.chunks(256) {
        let c = chunk.len();
        let mut y0 = Mat::<f64>::zeros(n_tr, c);
        let mut ynorm = vec![0.0; c];
        let mut constant = vec![false; c];
        for (b, y) in chunk.iter().enumerate() {
            let m = prep.train.iter().zip(&w2).map(|(&i, w)| w * y[i]).sum::<f64>() / sw;
            let col = y0.col_as_slice_mut(b);
            let (mut lo, mut hi, mut ss) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
            for ((o, &i), &s) in col.iter_mut().zip(&prep.train).zip(&prep.sw_tr) {
                let v = y[i];
                lo = lo.min(v);
                hi = hi.max(v);
                ss += (s * (v - m)).powi(2);
                *o = s * v;
            }
            constant[b] = !(hi > lo);
            ynorm[b] = ss.sqrt();
        }
        let mut cm = Mat::<f64>::zeros(p, c);
        matmul(cm.as_mut(), Accum::Replace, xtr.transpose(), y0.as_ref(), 1.0, Par::Seq);
        let mut degenerate = vec![false; c];
        for b in 0..c {
            let col = cm.col_as_slice_mut(b);
            hard_threshold(col, keep);
            let wn = dot(col, col).sqrt();
            degenerate[b] = !(wn > 1e-10 * xnorm * ynorm[b]) || wn == 0.0;
        }
        let mut pred = Mat::<f64>::zeros(n_te, c);
        matmul(pred.as_mut(), Accum::Replace, xte, cm.as_ref(), 1.0, Par::Seq);
        for (b, y) in chunk.iter().enumerate() {
            out.push(if constant[b] {
                f64::NAN
            } else if degenerate[b] {
                RANK_DEFICIENT
            } else {
                let yte: Vec<f64> = prep.test.iter().map(|&i| y[i]).collect();
                crate::inference::fit::wcorr(pred.col_as_slice(b), &yte, &prep.w_te)
            });
        }
    }
    out
}

/// A sparse PLS1 fit on all rows (weighted-standardised as the test's learners).
pub struct SplsFit {
    /// Weights W (p×k, row-major): column a is non-zero on exactly `keep` rows (fewer only on ties at 0).
    pub weights: Vec<f64>,
    /// Rotations R = W(PᵀW)⁻¹ (p×k, row-major): the scores of standardised X are X̃R.
    pub rotations: Vec<f64>,
    /// Coefficients in original units and the intercept.
    pub coef: Vec<f64>,
    pub intercept: f64,
    /// The keep-count used (the cross-validated one when 0 was asked for).
    pub keep: usize,
}

/// Fit sparse PLS1 on all rows; `keep = 0` chooses the keep-count by [`choose_keep`].
pub fn spls_fit(data: &Data<'_>, k: usize, keep: usize) -> Result<SplsFit> {
    let (n, p) = (data.n, data.p);
    if k == 0 || k > p.min(n) {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [1, min(n_samples, n_features)] = [1, {}], got {k}", p.min(n)),
        ));
    }
    let all: Vec<usize> = (0..n).collect();
    let mut prep = prepare(data, &all, &[], true)?;
    let ytr = train_response(&prep, data.y).ok_or_else(|| ThriftyError::invalid("y", "is constant"))?;
    let keep = if keep == 0 { choose_keep(&prep.xs_tr, &ytr, n, p, k)? } else { keep };
    let mut x = std::mem::take(&mut prep.xs_tr);
    let mut y = ytr;
    let fit = spls_nipals(&mut x, &mut y, n, p, k, keep)?;
    let coef_std = fit.coef();
    let rot = fit.rotations();
    let w2: f64 = prep.sw_tr.iter().map(|s| s * s).sum();
    let y_mean = (0..n).map(|i| prep.sw_tr[i].powi(2) * data.y[i]).sum::<f64>() / w2;
    let y_var = (0..n).map(|i| prep.sw_tr[i].powi(2) * (data.y[i] - y_mean).powi(2)).sum::<f64>() / w2;
    let y_std = y_var.sqrt();
    let coef: Vec<f64> = (0..p).map(|j| coef_std[j] * y_std / prep.scale[j]).collect();
    let intercept = y_mean - (0..p).map(|j| prep.mean[j] * coef[j]).sum::<f64>();
    let row_major = |cols: &[Vec<f64>]| -> Vec<f64> { (0..p).flat_map(|i| cols.iter().map(move |c| c[i])).collect() };
    Ok(SplsFit { weights: row_major(&fit.w), rotations: row_major(&rot), coef, intercept, keep })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::fit::nipals;

    fn data(n: usize, p: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut r = crate::rng::stream(seed, 0);
        let x: Vec<f64> = (0..n * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * p] + 0.5 * x[i * p + 1] + 0.1 * crate::rng::uniform(&mut r)).collect();
        (x, y)
    }

    #[test]
    fn keep_p_is_pls1_bit_for_bit() {
        let (n, p) = (30, 8);
        let (x, y) = data(n, p, 3);
        for k in 1..4 {
            let (mut x1, mut y1) = (x.clone(), y.clone());
            let (mut x2, mut y2) = (x.clone(), y.clone());
            let a = nipals(&mut x1, &mut y1, n, p, k, false).unwrap().coef();
            let b = spls_nipals(&mut x2, &mut y2, n, p, k, p).unwrap().coef();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn weights_load_on_exactly_keep_variables() {
        let (n, p) = (40, 12);
        let (mut x, mut y) = data(n, p, 5);
        let fit = spls_nipals(&mut x, &mut y, n, p, 3, 4).unwrap();
        for w in &fit.w {
            assert_eq!(w.iter().filter(|v| **v != 0.0).count(), 4);
        }
    }

    #[test]
    fn threshold_breaks_ties_by_index_and_grid_ends_at_p() {
        let mut w = vec![1.0, -3.0, 3.0, 0.5];
        hard_threshold(&mut w, 2);
        assert_eq!(w, vec![0.0, -3.0, 3.0, 0.0]);
        assert_eq!(keep_grid(10), vec![1, 2, 4, 8, 10]);
        assert_eq!(keep_grid(8), vec![1, 2, 4, 8]);
        assert_eq!(one_se_choice(&[0.1, 0.5, 0.55], &[0.1, 0.1, 0.1]), Some(1));
    }

    #[test]
    fn bad_keep_is_an_error() {
        let (x, y) = data(20, 5, 1);
        assert!(spls_coef(&x, &y, 20, 5, 1, 0).is_err());
        assert!(spls_coef(&x, &y, 20, 5, 1, 6).is_err());
    }
}
