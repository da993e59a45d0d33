//! PLS2 for a multi-column response Y (n×m): NIPALS in scikit-learn's "regression" deflation mode,
//! with each weight vector taken exactly as the dominant left singular vector of X_aᵀY_a (the fixed
//! point of NIPALS' inner power iteration). The held-out statistic of a split is the Pearson r between
//! the predicted and observed test responses, both in train-standardised units and pooled over columns
//! (weights repeated per column).
use crate::error::{Result, ThriftyError};
use crate::inference::fit::{is_constant, prepare, wcorr, Data};
use crate::linalg::{dot, x_v, xt_v};

/// Row-major n×m response and its train-standardised, √w-scaled train part.
fn standardise_y(y: &[f64], m: usize, rows: &[usize], w: &[f64]) -> Option<(Vec<f64>, Vec<f64>)> {
    let sw: f64 = w.iter().sum();
    // every column's sums accumulated row by row (Y is row-major; a column-wise sum reads it at
    // stride m), over the rows in the same order from the same -0.0 as `Iterator::sum`: the values of
    // the column-wise sums bit for bit
    let mut mean = vec![-0.0; m];
    for (&i, wi) in rows.iter().zip(w) {
        for (mu, &yc) in mean.iter_mut().zip(&y[i * m..(i + 1) * m]) {
            *mu += wi * yc;
        }
    }
    mean.iter_mut().for_each(|mu| *mu /= sw);
    let mut sd = vec![-0.0; m];
    for (&i, wi) in rows.iter().zip(w) {
        for ((v, &yc), &mu) in sd.iter_mut().zip(&y[i * m..(i + 1) * m]).zip(&mean) {
            *v += wi * (yc - mu).powi(2);
        }
    }
    sd.iter_mut().for_each(|v| *v = (*v / sw).sqrt());
    if (0..m).all(|c| is_constant(mean[c], sd[c])) {
        return None;
    }
    for c in 0..m {
        if is_constant(mean[c], sd[c]) {
            sd[c] = f64::INFINITY; // a constant response column drops out
        }
    }
    Some((mean, sd))
}

/// PLS2 NIPALS fit on standardised, row-major `x` (n×p) and `y` (n×m), both deflated in place.
/// Returns (W, P, C, T) with W, P as k columns of length p, C as k rows of length m. With
/// `stop_early` it stops (instead of failing) once the Y residual is constant to rounding or X'Y
/// vanishes, returning fewer components (scikit-learn's rule).
#[allow(clippy::type_complexity)]
pub fn nipals2(
    x: &mut [f64],
    y: &mut [f64],
    n: usize,
    p: usize,
    m: usize,
    k: usize,
    stop_early: bool,
) -> Result<(Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>)> {
    if m == 0 {
        return Err(ThriftyError::shape("Y", "must have at least one column"));
    }
    let xnorm = dot(x, x).sqrt();
    let ynorm = dot(y, y).sqrt();
    let ymax0 = crate::inference::fit::max_abs(y);
    let (mut ws, mut ps, mut cs, mut ts) = (vec![], vec![], vec![], vec![]);
    for a in 0..k {
        if stop_early && a > 0 && !(crate::inference::fit::max_abs(y) >= 10.0 * f64::EPSILON * ymax0) {
            break;
        }
        // G = XᵀY (p×m, row-major)
        let mut g = crate::alloc::try_zeroed("PLS2's cross-product matrix X'Y (p × m)", p * m)?;
        for i in 0..n {
            let xi = &x[i * p..(i + 1) * p];
            let yi = &y[i * m..(i + 1) * m];
            for (gj, &xv) in g.chunks_exact_mut(m).zip(xi) {
                if xv != 0.0 {
                    // zipped slices: the same sums in the same order, without bounds checks (vectorised)
                    for (gc, &yc) in gj.iter_mut().zip(yi) {
                        *gc += xv * yc;
                    }
                }
            }
        }
        let mut w = dominant_left_vector(&g, p, m)?;
        let wn = dot(&w, &w).sqrt();
        if !(wn > 1e-10 * xnorm * ynorm) || wn == 0.0 {
            if stop_early && a > 0 {
                break;
            }
            return Err(ThriftyError::invalid(
                "n_components",
                format!("component {} is degenerate (X'Y vanishes after {a} components): n_components must be below the rank of the data", a + 1),
            ));
        }
        w.iter_mut().for_each(|v| *v /= wn);
        let t = x_v(x, n, p, &w);
        let tt = dot(&t, &t);
        if !(tt > 0.0) {
            return Err(ThriftyError::numerical("PLS2", "zero score vector"));
        }
        // Yᵀt / tt, accumulated row by row (Y is row-major: a column-wise sum reads Y at stride m, the
        // cost of a wide Y); each column's sum runs over i in the same order from the same -0.0 as
        // `Iterator::sum`, so the values are those of the column-wise sum bit for bit
        let mut cvec = crate::alloc::try_filled("PLS2's Y loadings (m)", m, -0.0f64)?;
        for (yi, &ti) in y.chunks_exact(m).zip(&t) {
            for (cc, &yc) in cvec.iter_mut().zip(yi) {
                *cc += yc * ti;
            }
        }
        cvec.iter_mut().for_each(|c| *c /= tt);
        let mut pl = xt_v(x, n, p, &t);
        pl.iter_mut().for_each(|v| *v /= tt);
        for i in 0..n {
            for (xv, pv) in x[i * p..(i + 1) * p].iter_mut().zip(&pl) {
                *xv -= t[i] * pv;
            }
            for (yc, &cc) in y[i * m..(i + 1) * m].iter_mut().zip(&cvec) {
                *yc -= t[i] * cc;
            }
        }
        ws.push(w);
        ps.push(pl);
        cs.push(cvec);
        ts.push(t);
    }
    Ok((ws, ps, cs, ts))
}

/// The dominant left singular vector of the row-major p×m matrix `g`, unnormalised: G v for the
/// top eigenvector v of GᵀG (m×m) when m ≤ p; otherwise, so that a wide Y costs p² and not m², the
/// top eigenvector of GGᵀ (p×p) scaled by its eigenvalue's square root (the same vector, both up to
/// sign, to which every PLS2 output is blind).
fn dominant_left_vector(g: &[f64], p: usize, m: usize) -> Result<Vec<f64>> {
    let side = m.min(p);
    crate::alloc::ensure_fits("PLS2's Gram matrix and its eigendecomposition", 32.0 * (side as f64).powi(2))?;
    let mut gram = crate::alloc::try_mat("PLS2's Gram matrix", side, side)?;
    for r in 0..side {
        for c in 0..side {
            gram[(r, c)] = if m <= p {
                (0..p).map(|j| g[j * m + r] * g[j * m + c]).sum()
            } else {
                (0..m).map(|j| g[r * m + j] * g[c * m + j]).sum()
            };
        }
    }
    let eig = gram
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|_| ThriftyError::numerical("PLS2", "eigendecomposition failed"))?;
    let top = side - 1; // eigenvalues in non-decreasing order
    let u = eig.U();
    if m <= p {
        let v: Vec<f64> = (0..m).map(|r| u[(r, top)]).collect();
        Ok((0..p).map(|j| (0..m).map(|c| g[j * m + c] * v[c]).sum()).collect())
    } else {
        let sigma = eig.S().column_vector()[top].max(0.0).sqrt();
        Ok((0..p).map(|j| u[(j, top)] * sigma).collect())
    }
}

/// Coefficients R C (p×m, row-major) with R = W (PᵀW)⁻¹.
pub fn coef2(
    ws: &[Vec<f64>],
    ps: &[Vec<f64>],
    cs: &[Vec<f64>],
    p: usize,
    m: usize,
) -> Result<(Vec<f64>, Vec<Vec<f64>>)> {
    let k = ws.len();
    let pw = faer::Mat::<f64>::from_fn(k, k, |a, b| dot(&ps[a], &ws[b]));
    use faer::prelude::Solve;
    let inv = pw.partial_piv_lu().solve(faer::Mat::<f64>::identity(k, k));
    let rot: Vec<Vec<f64>> =
        (0..k).map(|b| (0..p).map(|j| (0..k).map(|a| ws[a][j] * inv[(a, b)]).sum()).collect()).collect();
    let mut coef: Vec<f64> = crate::alloc::try_zeroed("PLS2's coefficients (p × m)", p * m)?;
    for j in 0..p {
        for c in 0..m {
            coef[j * m + c] = (0..k).map(|a| rot[a][j] * cs[a][c]).sum();
        }
    }
    if !coef.iter().all(|v| v.is_finite()) {
        return Err(ThriftyError::numerical("PLS2", "singular PᵀW"));
    }
    Ok((coef, rot))
}

fn check_y(y: &[f64], n: usize, m: usize) -> Result<()> {
    if m == 0 || y.len() != n * m {
        return Err(ThriftyError::shape("Y", format!("must have shape ({n}, m) with m >= 1, got {} values", y.len())));
    }
    crate::error::ensure_finite("Y", y)
}

/// Held-out r of a PLS2 refit on every split (`train`/`test` index sets); `data.y` is ignored.
pub fn pls2_split_correlations(
    data: &Data<'_>,
    y: &[f64],
    m: usize,
    k: usize,
    splits: &[crate::inference::splits::Split],
) -> Result<Vec<f64>> {
    use rayon::prelude::*;
    check_y(y, data.n, m)?;
    if k == 0 || k > data.p {
        return Err(ThriftyError::invalid("n_components", format!("must be in [1, {}], got {k}", data.p)));
    }
    splits
        .par_iter()
        .map(|s| {
            let prep = prepare(data, &s.train, &s.test, true)?;
            let w_tr: Vec<f64> = prep.sw_tr.iter().map(|v| v * v).collect();
            let (mean, sd) = match standardise_y(y, m, &s.train, &w_tr) {
                Some(v) => v,
                None => return Ok(f64::NAN), // every response column constant on the train part
            };
            let mut yt = crate::alloc::try_zeroed("the standardised train responses (n_train × m)", prep.n_tr * m)?;
            for (a, &i) in s.train.iter().enumerate() {
                for c in 0..m {
                    yt[a * m + c] = prep.sw_tr[a] * (y[i * m + c] - mean[c]) / sd[c];
                }
            }
            let mut x = crate::alloc::try_copied("the train rows NIPALS deflates", &prep.xs_tr)?;
            let (ws, ps, cs, _) = nipals2(&mut x, &mut yt, prep.n_tr, prep.p, m, k, false)?;
            let (coef, _) = coef2(&ws, &ps, &cs, prep.p, m)?;
            let held_out = "the held-out predictions (n_test × m)";
            let mut pred = crate::alloc::try_with_capacity(held_out, prep.n_te * m)?;
            let mut obs = crate::alloc::try_with_capacity(held_out, prep.n_te * m)?;
            let mut wv = crate::alloc::try_with_capacity(held_out, prep.n_te * m)?;
            // a test row's predictions for all columns at once, summed over j in order from -0.0 (the
            // column-wise `Iterator::sum`'s values, without reading coef at stride m)
            let mut row_pred = crate::alloc::try_filled(held_out, m, -0.0f64)?;
            for (a, &i) in s.test.iter().enumerate() {
                let row = &prep.xs_te[a * prep.p..(a + 1) * prep.p];
                row_pred.iter_mut().for_each(|v| *v = -0.0);
                for (&xj, cj) in row.iter().zip(coef.chunks_exact(m)) {
                    for (v, &cc) in row_pred.iter_mut().zip(cj) {
                        *v += xj * cc;
                    }
                }
                for c in 0..m {
                    if sd[c].is_infinite() {
                        continue;
                    }
                    pred.push(row_pred[c]);
                    obs.push((y[i * m + c] - mean[c]) / sd[c]);
                    wv.push(prep.w_te[a]);
                }
            }
            Ok(wcorr(&pred, &obs, &wv))
        })
        .collect()
}

/// A PLS2 fit on all rows: coefficients in original units (p×m row-major), intercepts (m), rotations,
/// weights and loadings (p×k row-major), y-loadings (m×k row-major), moments.
pub struct Pls2Fit {
    pub coef: Vec<f64>,
    pub intercept: Vec<f64>,
    pub x_weights: Vec<f64>,
    pub x_loadings: Vec<f64>,
    pub x_rotations: Vec<f64>,
    pub y_loadings: Vec<f64>,
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    /// Components extracted (< k when the Y residual vanished first; the rest are zero).
    pub n_fitted: usize,
}

pub fn pls2_fit(data: &Data<'_>, y: &[f64], m: usize, k: usize) -> Result<Pls2Fit> {
    let (n, p) = (data.n, data.p);
    check_y(y, n, m)?;
    let bound = p.min(n); // scikit-learn's PLSRegression bound
    if k == 0 || k > bound {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [1, min(n_samples, n_features)] = [1, {bound}], got {k}"),
        ));
    }
    let all: Vec<usize> = (0..n).collect();
    let mut prep = prepare(data, &all, &[], true)?;
    let w: Vec<f64> = prep.sw_tr.iter().map(|v| v * v).collect();
    let (ymean, ysd) =
        standardise_y(y, m, &all, &w).ok_or_else(|| ThriftyError::invalid("Y", "every column is constant"))?;
    let mut yt = crate::alloc::try_zeroed("the standardised responses (n × m)", n * m)?;
    for i in 0..n {
        for c in 0..m {
            yt[i * m + c] = prep.sw_tr[i] * (y[i * m + c] - ymean[c]) / ysd[c];
        }
    }
    let mut x = std::mem::take(&mut prep.xs_tr); // deflated in place; not needed again
    let (mut ws, mut ps, mut cs, _) = nipals2(&mut x, &mut yt, n, p, m, k, true)?;
    let n_fitted = ws.len();
    let (coef_std, mut rot) = coef2(&ws, &ps, &cs, p, m)?;
    for _ in n_fitted..k {
        ws.push(vec![0.0; p]);
        ps.push(vec![0.0; p]);
        cs.push(vec![0.0; m]);
        rot.push(vec![0.0; p]);
    }
    let mut coef = crate::alloc::try_zeroed("PLS2's coefficients (p × m)", p * m)?;
    let mut intercept = vec![0.0; m];
    for c in 0..m {
        let s = if ysd[c].is_finite() { ysd[c] } else { 0.0 };
        for j in 0..p {
            coef[j * m + c] = coef_std[j * m + c] * s / prep.scale[j];
        }
        intercept[c] = ymean[c] - (0..p).map(|j| prep.mean[j] * coef[j * m + c]).sum::<f64>();
    }
    let rm = |cols: &[Vec<f64>], len: usize| -> Vec<f64> {
        let kk = cols.len();
        let mut out = vec![0.0; len * kk];
        for (a, col) in cols.iter().enumerate() {
            for i in 0..len {
                out[i * kk + a] = col[i];
            }
        }
        out
    };
    Ok(Pls2Fit {
        coef,
        intercept,
        x_weights: rm(&ws, p),
        x_loadings: rm(&ps, p),
        x_rotations: rm(&rot, p),
        y_loadings: rm(&cs, m),
        x_mean: prep.mean.clone(),
        x_std: prep.scale.iter().map(|&s| if s.is_finite() { s } else { 0.0 }).collect(),
        n_fitted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_cross_product_gives_the_same_dominant_vector_from_either_side() {
        // G is p×m with m > p (the p×p route); Gᵀ is m×p (the m ≤ p route): its result is σ v₁, and
        // G v₁ = σ u₁ must be the wide route's vector up to sign
        let (p, m) = (3, 7);
        let g: Vec<f64> = (0..p * m).map(|i| ((i * 29 % 17) as f64 - 8.0) / 5.0 + (i as f64).cos()).collect();
        let gt: Vec<f64> = (0..m * p).map(|i| g[(i % p) * m + i / p]).collect();
        let wide = dominant_left_vector(&g, p, m).unwrap();
        let sv = dominant_left_vector(&gt, m, p).unwrap();
        let sigma = dot(&sv, &sv).sqrt();
        let via_v: Vec<f64> = (0..p).map(|j| (0..m).map(|c| g[j * m + c] * sv[c] / sigma).sum()).collect();
        let sign = if dot(&wide, &via_v) < 0.0 { -1.0 } else { 1.0 };
        assert!((dot(&wide, &wide).sqrt() - sigma).abs() < 1e-12 * sigma);
        for j in 0..p {
            assert!((wide[j] - sign * via_v[j]).abs() < 1e-12 * sigma, "{j}: {} vs {}", wide[j], via_v[j]);
        }
    }

    #[test]
    fn row_wise_moments_are_the_column_wise_sums_bit_for_bit() {
        // standardise_y accumulates by rows; the recorded fixtures were computed column by column
        let (n, m) = (13, 9);
        let y: Vec<f64> =
            (0..n * m).map(|i| ((i * 41 % 19) as f64 - 9.0) / 3.0 + (i as f64 * 0.7).sin() * 1e3).collect();
        let rows: Vec<usize> = (0..n).filter(|i| i % 3 != 1).collect();
        let w: Vec<f64> = rows.iter().map(|&i| 0.5 + (i as f64 * 0.37).cos().abs()).collect();
        let (mean, sd) = standardise_y(&y, m, &rows, &w).unwrap();
        let sw: f64 = w.iter().sum();
        for c in 0..m {
            let mu = rows.iter().zip(&w).map(|(&i, wi)| wi * y[i * m + c]).sum::<f64>() / sw;
            let v = rows.iter().zip(&w).map(|(&i, wi)| wi * (y[i * m + c] - mu).powi(2)).sum::<f64>() / sw;
            assert_eq!(mean[c].to_bits(), mu.to_bits());
            assert_eq!(sd[c].to_bits(), v.sqrt().to_bits());
        }
    }

    #[test]
    fn pls2_with_one_column_equals_pls1() {
        let (n, p) = (30, 6);
        let x: Vec<f64> = (0..n * p).map(|i| ((i * 37 % 23) as f64 - 11.0) / 7.0 + (i as f64 * 0.3).sin()).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * p] - 0.5 * x[i * p + 2] + ((i * 13 % 7) as f64) / 10.0).collect();
        let data = Data::new(&x, n, p, &y, None).unwrap();
        let one = crate::inference::baselines::pls_fit(&data, 2).unwrap();
        let two = pls2_fit(&data, &y, 1, 2).unwrap();
        for j in 0..p {
            assert!((one.coef[j] - two.coef[j]).abs() < 1e-10);
        }
    }
}
