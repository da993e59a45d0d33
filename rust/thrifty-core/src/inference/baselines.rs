//! Full-data PLS1 fit (scikit-learn's `PLSRegression(scale=True)` coefficients), deflation for the
//! per-component sequence, and the baselines: CV-permutation-Q² (pooled K-fold Q², permuted y),
//! scikit-learn-style permutation score (mean fold R²), and the jackknife t of R's `pls`.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{fit_coef, nipals, nipals_upto, prepare, train_response, Data, Prepared, Spec};
use crate::inference::special::t_sf;
use crate::inference::splits::permutation;
use crate::rng;

/// Stream used to assign CV folds / jackknife segments.
pub const FOLD_STREAM: u64 = (1 << 40) - 1;

/// A PLS1 fit on all rows (weighted-standardised, population SD), in scikit-learn's layout.
pub struct PlsFit {
    pub k: usize,
    pub p: usize,
    /// coefficients in original units (p) and intercept
    pub coef: Vec<f64>,
    pub intercept: f64,
    /// p×k row-major
    pub x_weights: Vec<f64>,
    pub x_loadings: Vec<f64>,
    pub x_rotations: Vec<f64>,
    pub y_loadings: Vec<f64>,
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    pub y_mean: f64,
    pub y_std: f64,
    /// Components extracted (< k when the y residual vanished first; the rest are zero).
    pub n_fitted: usize,
}

fn to_row_major(cols: &[Vec<f64>], p: usize) -> Vec<f64> {
    let k = cols.len();
    let mut m = vec![0.0; p * k];
    for (a, c) in cols.iter().enumerate() {
        for i in 0..p {
            m[i * k + a] = c[i];
        }
    }
    m
}

/// ȳ (weighted) and SD of y over the rows of `prep.train`.
fn y_moments(prep: &Prepared, y: &[f64]) -> (f64, f64) {
    let w2: Vec<f64> = prep.sw_tr.iter().map(|s| s * s).collect();
    let sw: f64 = w2.iter().sum();
    let m = prep.train.iter().zip(&w2).map(|(&i, w)| w * y[i]).sum::<f64>() / sw;
    let v = prep.train.iter().zip(&w2).map(|(&i, w)| w * (y[i] - m).powi(2)).sum::<f64>() / sw;
    (m, v.sqrt())
}

pub fn pls_fit(data: &Data<'_>, k: usize) -> Result<PlsFit> {
    let p = data.p;
    let bound = p.min(data.n); // scikit-learn's PLSRegression bound (rank of XᵀX at most min(n, p))
    if k == 0 || k > bound {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [1, min(n_samples, n_features)] = [1, {bound}], got {k}"),
        ));
    }
    let all: Vec<usize> = (0..data.n).collect();
    let mut prep = prepare(data, &all, &[], true)?;
    let ytr = train_response(&prep, data.y).ok_or_else(|| ThriftyError::invalid("y", "is constant"))?;
    let (y_mean, y_std) = y_moments(&prep, data.y);
    let mut x = std::mem::take(&mut prep.xs_tr); // NIPALS deflates in place; the copy is not needed again
    let mut y = ytr;
    // as scikit-learn's PLSRegression: components stop when the y residual vanishes (the rest are 0)
    let mut fit = nipals_upto(&mut x, &mut y, data.n, p, k, true, true)?;
    let n_fitted = fit.q.len();
    let rot = fit.rotations();
    let coef_std = fit.coef();
    let mut rot = rot;
    for _ in n_fitted..k {
        fit.w.push(vec![0.0; p]);
        fit.p.push(vec![0.0; p]);
        fit.q.push(0.0);
        rot.push(vec![0.0; p]);
    }
    let coef: Vec<f64> = (0..p).map(|j| coef_std[j] * y_std / prep.scale[j]).collect();
    let intercept = y_mean - (0..p).map(|j| prep.mean[j] * coef[j]).sum::<f64>();
    let x_std: Vec<f64> = prep.scale.iter().map(|&s| if s.is_finite() { s } else { 0.0 }).collect();
    Ok(PlsFit {
        k,
        p,
        coef,
        intercept,
        x_weights: to_row_major(&fit.w, p),
        x_loadings: to_row_major(&fit.p, p),
        x_rotations: to_row_major(&rot, p),
        y_loadings: fit.q.clone(),
        x_mean: prep.mean.clone(),
        x_std,
        y_mean,
        y_std,
        n_fitted,
    })
}

/// Standardise all rows (weighted), fit `h` PLS1 components and return the deflated X (n×p,
/// row-major, √w scaling undone) and deflated y — the input of step h+1 of the per-component sequence.
pub fn deflate(data: &Data<'_>, h: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let (n, p) = (data.n, data.p);
    let all: Vec<usize> = (0..n).collect();
    let mut prep = prepare(data, &all, &[], true)?;
    let mut y = train_response(&prep, data.y).ok_or_else(|| ThriftyError::invalid("y", "is constant"))?;
    let mut x = std::mem::take(&mut prep.xs_tr);
    if h > 0 {
        let fit = nipals(&mut x, &mut y, n, p, h, true)?;
        // nipals leaves the last deflation out; apply it here
        let (t, pl, q) = (&fit.t[h - 1], &fit.p[h - 1], fit.q[h - 1]);
        for i in 0..n {
            for (xv, pv) in x[i * p..(i + 1) * p].iter_mut().zip(pl) {
                *xv -= t[i] * pv;
            }
            y[i] -= q * t[i];
        }
    }
    for i in 0..n {
        let s = prep.sw_tr[i];
        if s > 0.0 {
            x[i * p..(i + 1) * p].iter_mut().for_each(|v| *v /= s);
            y[i] /= s;
        }
    }
    Ok((x, y))
}

/// Fold index of every row: a random permutation cut into `n_folds` near-equal parts.
pub fn folds(n: usize, n_folds: usize, seed: u64) -> Result<Vec<usize>> {
    if n_folds < 2 || n_folds > n {
        return Err(ThriftyError::invalid("n_folds", format!("must be in [2, n_samples={n}], got {n_folds}")));
    }
    let mut r = rng::stream(seed, FOLD_STREAM);
    let mut idx: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng::below(&mut r, i + 1);
        idx.swap(i, j);
    }
    let mut f = vec![0; n];
    for (pos, &i) in idx.iter().enumerate() {
        f[i] = pos * n_folds / n;
    }
    Ok(f)
}

/// Cross-validated score of `y` with fixed folds: pooled Q² = 1 − PRESS/TSS (`pooled`) or the mean of
/// per-fold R² (scikit-learn's `cross_val_score` with r2 scoring).
fn cv_score(spec: &Spec, preps: &[Prepared], y: &[f64], w: Option<&[f64]>, pooled: bool) -> Result<f64> {
    let mut press = 0.0;
    let mut fold_r2 = 0.0;
    let wt = |i: usize| w.map_or(1.0, |w| w[i]);
    for (f, prep) in preps.iter().enumerate() {
        let ytr = match train_response(prep, y) {
            Some(v) => v,
            None => return Ok(f64::NAN),
        };
        let (m, sd) = y_moments(prep, y);
        let coef = match fit_coef(spec, prep, &ytr, f) {
            Ok(c) => c,
            Err(ThriftyError::InvalidArgument { arg: "n_components", .. }) => return Ok(f64::NAN),
            Err(e) => return Err(e),
        };
        let pred = crate::inference::fit::predict_test(prep, &coef);
        let mut ss_res = 0.0;
        for (a, &i) in prep.test.iter().enumerate() {
            ss_res += wt(i) * (y[i] - (m + sd * pred[a])).powi(2);
        }
        press += ss_res;
        if !pooled {
            let sw: f64 = prep.test.iter().map(|&i| wt(i)).sum();
            let mt = prep.test.iter().map(|&i| wt(i) * y[i]).sum::<f64>() / sw;
            let ss_tot: f64 = prep.test.iter().map(|&i| wt(i) * (y[i] - mt).powi(2)).sum();
            fold_r2 += if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 0.0 };
        }
    }
    if pooled {
        let n = y.len();
        let sw: f64 = (0..n).map(wt).sum();
        let my = (0..n).map(|i| wt(i) * y[i]).sum::<f64>() / sw;
        let tss: f64 = (0..n).map(|i| wt(i) * (y[i] - my).powi(2)).sum();
        Ok(1.0 - press / tss)
    } else {
        Ok(fold_r2 / preps.len() as f64)
    }
}

/// Observed CV score and its permutation null (permutations `start .. start+count`, folds fixed).
pub fn cv_permutation(
    data: &Data<'_>,
    spec: &Spec,
    n_folds: usize,
    seed: u64,
    start: u64,
    count: usize,
    pooled: bool,
) -> Result<(f64, Vec<f64>)> {
    cv_permutation_cancellable(data, spec, n_folds, seed, start, count, pooled, &AtomicBool::new(false))
}

/// [`cv_permutation`] that stops with `Err(Interrupted)` soon after `cancel` is raised (checked per
/// permutation).
#[allow(clippy::too_many_arguments)]
pub fn cv_permutation_cancellable(
    data: &Data<'_>,
    spec: &Spec,
    n_folds: usize,
    seed: u64,
    start: u64,
    count: usize,
    pooled: bool,
    cancel: &AtomicBool,
) -> Result<(f64, Vec<f64>)> {
    crate::inference::splits::check_budget("n_perm", count, 1)?;
    let f = folds(data.n, n_folds, seed)?;
    for fold in 0..n_folds {
        let n_tr = f.iter().filter(|&&v| v != fold).count();
        if n_tr < spec.k.saturating_add(2) {
            return Err(ThriftyError::invalid("n_folds", "too many folds for this sample size and n_components"));
        }
    }
    spec.validate(data.p, n_folds)?;
    let standardize = spec.learner.standardizes();
    let preps: Vec<Prepared> = (0..n_folds)
        .into_par_iter()
        .map(|fold| {
            let train: Vec<usize> = (0..data.n).filter(|&i| f[i] != fold).collect();
            let test: Vec<usize> = (0..data.n).filter(|&i| f[i] == fold).collect();
            prepare(data, &train, &test, standardize)
        })
        .collect::<Result<_>>()?;
    let observed = cv_score(spec, &preps, data.y, data.w, pooled)?;
    if !observed.is_finite() {
        return Err(ThriftyError::invalid("n_components", "the model cannot be fitted on every fold (rank too low)"));
    }
    let null: Vec<f64> = (0..count)
        .into_par_iter()
        .map(|b| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            let pi = permutation(data.n, seed, start + b as u64);
            let yp: Vec<f64> = pi.iter().map(|&i| data.y[i]).collect();
            cv_score(spec, &preps, &yp, data.w, pooled)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((observed, null))
}

/// Jackknife of the PLS coefficients over `n_segments` random CV segments (R `pls::jack.test`,
/// `var.jack(use.mean = TRUE)`): var = (m−1)/m·Σ(β₋ᵢ − β̄)², t = β/√var, df = m−1, two-sided p.
pub struct Jackknife {
    pub coef: Vec<f64>,
    pub se: Vec<f64>,
    pub t: Vec<f64>,
    pub p_values: Vec<f64>,
    pub df: f64,
}

pub fn jackknife(data: &Data<'_>, k: usize, n_segments: usize, seed: u64) -> Result<Jackknife> {
    let full = pls_fit(data, k)?;
    let f = folds(data.n, n_segments, seed)?;
    let p = data.p;
    let loo: Vec<Vec<f64>> = (0..n_segments)
        .into_par_iter()
        .map(|seg| {
            let rows: Vec<usize> = (0..data.n).filter(|&i| f[i] != seg).collect();
            let x: Vec<f64> = rows.iter().flat_map(|&i| data.x[i * p..(i + 1) * p].iter().copied()).collect();
            let y: Vec<f64> = rows.iter().map(|&i| data.y[i]).collect();
            let w: Option<Vec<f64>> = data.w.map(|w| rows.iter().map(|&i| w[i]).collect());
            let d = Data::new(&x, rows.len(), p, &y, w.as_deref())?;
            Ok(pls_fit(&d, k)?.coef)
        })
        .collect::<Result<Vec<_>>>()?;
    let m = n_segments as f64;
    let mut se = vec![0.0; p];
    for j in 0..p {
        let mean = loo.iter().map(|c| c[j]).sum::<f64>() / m;
        let ss: f64 = loo.iter().map(|c| (c[j] - mean).powi(2)).sum();
        se[j] = ((m - 1.0) / m * ss).sqrt();
    }
    let df = m - 1.0;
    let t: Vec<f64> = (0..p).map(|j| if se[j] > 0.0 { full.coef[j] / se[j] } else { 0.0 }).collect();
    let p_values = t.iter().map(|&tv| (2.0 * t_sf(tv.abs(), df)).min(1.0)).collect();
    Ok(Jackknife { coef: full.coef, se, t, p_values, df })
}
