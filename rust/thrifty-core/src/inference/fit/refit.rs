//! The learners' directions on the train part (PLS1, supervised PCA, ridge probe, fixed bases, with
//! an optional varimax rotation) and the OLS refit of ỹ on their train scores.
use super::{nipals, Learner, Prepared, Rotation, Spec};
use crate::error::{Result, ThriftyError};
use crate::inference::varimax::varimax;
use crate::linalg::{dot, ols, x_v, xt_v};

fn rank_error(k: usize) -> ThriftyError {
    ThriftyError::invalid(
        "n_components",
        format!("the {k} train scores are linearly dependent: n_components must be below the rank of the data"),
    )
}

/// Train scores S = X̃ B for a basis given as k columns.
fn scores(prep: &Prepared, basis: &[Vec<f64>]) -> Vec<Vec<f64>> {
    basis.iter().map(|b| x_v(&prep.xs_tr, prep.n_tr, prep.p, b)).collect()
}

/// OLS of ỹ on the scores of `basis`, giving coefficients in the prepared space.
fn refit(prep: &Prepared, basis: &[Vec<f64>], s: &[Vec<f64>], ytr: &[f64]) -> Result<Vec<f64>> {
    let beta = ols(s, ytr).ok_or_else(|| rank_error(basis.len()))?;
    let mut coef = vec![0.0; prep.p];
    for (b, &be) in basis.iter().zip(&beta) {
        for (o, v) in coef.iter_mut().zip(b) {
            *o += be * v;
        }
    }
    Ok(coef)
}

fn rotate_basis(basis: Vec<Vec<f64>>, rotate: Rotation) -> Result<Vec<Vec<f64>>> {
    if rotate == Rotation::None || basis.len() < 2 {
        return Ok(basis);
    }
    let (p, k) = (basis[0].len(), basis.len());
    let mut l = vec![0.0; p * k];
    for i in 0..p {
        for a in 0..k {
            l[i * k + a] = basis[a][i];
        }
    }
    let rot = varimax(&l, p, k, true, 500, 1e-10)?;
    Ok((0..k).map(|a| (0..p).map(|i| rot.rotated[i * k + a]).collect()).collect())
}

/// Columns of a row-major p×k matrix.
pub(crate) fn columns(m: &[f64], p: usize, k: usize) -> Vec<Vec<f64>> {
    (0..k).map(|a| (0..p).map(|i| m[i * k + a]).collect()).collect()
}

/// Top `q` feature indices by |score| (ties broken by index), in increasing index order.
pub(crate) fn top_features(score: &[f64], q: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..score.len()).collect();
    idx.sort_by(|&a, &b| score[b].abs().total_cmp(&score[a].abs()).then(a.cmp(&b)));
    let mut keep = idx[..q].to_vec();
    keep.sort_unstable();
    keep
}

pub fn spca_default_features(p: usize, k: usize) -> usize {
    p.min((5 * k).max(p.div_ceil(10)))
}

/// Coefficients (in the prepared space) of the held-out OLS refit on one split. `split` indexes
/// per-split bases. `ytr` is ỹ from [`train_response`].
pub fn fit_coef(spec: &Spec, prep: &Prepared, ytr: &[f64], split: usize) -> Result<Vec<f64>> {
    let (n, p, k) = (prep.n_tr, prep.p, spec.k);
    match &spec.learner {
        Learner::Pls if k == 1 => {
            // one component: w ∝ X̃ᵀỹ, and the OLS refit on t = X̃w gives coef = w (tᵀỹ / tᵀt); no copy of X̃
            let w = xt_v(&prep.xs_tr, n, p, ytr);
            let wn = dot(&w, &w).sqrt();
            // standardised columns have Σᵢ wᵢ x̃ᵢⱼ² = n_tr (weights have mean 1), so ‖X̃‖_F² = n_tr · #non-constant
            let xnorm = (n as f64 * prep.scale.iter().filter(|s| s.is_finite()).count() as f64).sqrt();
            let ynorm = dot(ytr, ytr).sqrt();
            if !(wn > 1e-10 * xnorm * ynorm) || wn == 0.0 {
                return Err(ThriftyError::invalid(
                    "n_components",
                    "component 1 is degenerate (X'y vanishes): n_components must be below the rank of the data",
                ));
            }
            let t = x_v(&prep.xs_tr, n, p, &w);
            let tt = dot(&t, &t);
            if !(tt > 0.0) {
                return Err(ThriftyError::numerical("PLS", "zero score vector"));
            }
            let q = dot(ytr, &t) / tt;
            Ok(w.into_iter().map(|v| v * q).collect())
        }
        Learner::Pls => {
            let mut x = prep.xs_tr.clone();
            let mut y = ytr.to_vec();
            let fit = nipals(&mut x, &mut y, n, p, k, false)?;
            if spec.rotate == Rotation::None || k == 1 {
                return Ok(fit.coef());
            }
            // train scores of W are T (P'W); rotate W and refit
            let pw = fit.ptw();
            let tw: Vec<Vec<f64>> = (0..k)
                .map(|b| {
                    let mut col = vec![0.0; n];
                    for a in 0..k {
                        let c = pw[a * k + b];
                        for (o, tv) in col.iter_mut().zip(&fit.t[a]) {
                            *o += c * tv;
                        }
                    }
                    col
                })
                .collect();
            let rb = rotate_basis(fit.w.clone(), spec.rotate)?;
            // rotated basis = W Rv; scores = (X W) Rv: recover Rv from the rotated columns by least squares
            // on W (W has orthonormal columns in PLS1), Rv = Wᵀ (W Rv)
            let rv: Vec<Vec<f64>> = rb.iter().map(|c| fit.w.iter().map(|wa| dot(wa, c)).collect()).collect();
            let s: Vec<Vec<f64>> = rv
                .iter()
                .map(|r| {
                    let mut col = vec![0.0; n];
                    for a in 0..k {
                        for (o, v) in col.iter_mut().zip(&tw[a]) {
                            *o += r[a] * v;
                        }
                    }
                    col
                })
                .collect();
            refit(prep, &rb, &s, ytr)
        }
        Learner::Spca { n_features } => {
            let q = if *n_features == 0 { spca_default_features(p, k) } else { *n_features };
            let score = xt_v(&prep.xs_tr, n, p, ytr);
            let keep = top_features(&score, q);
            let mut red = faer::Mat::<f64>::zeros(n, q);
            for i in 0..n {
                for (c, &j) in keep.iter().enumerate() {
                    red[(i, c)] = prep.xs_tr[i * p + j];
                }
            }
            let svd = red.thin_svd().map_err(|_| ThriftyError::numerical("supervised PCA", "SVD did not converge"))?;
            let v = svd.V();
            if k > q.min(n) {
                return Err(rank_error(k));
            }
            let basis: Vec<Vec<f64>> = (0..k)
                .map(|a| {
                    let mut col = vec![0.0; p];
                    for (c, &j) in keep.iter().enumerate() {
                        col[j] = v[(c, a)];
                    }
                    col
                })
                .collect();
            let basis = rotate_basis(basis, spec.rotate)?;
            let s = scores(prep, &basis);
            refit(prep, &basis, &s, ytr)
        }
        Learner::Spls { keep } => crate::inference::spls::fit_coef(prep, ytr, k, *keep),
        Learner::Ridge { alpha } => {
            let b = ridge_direction(&prep.xs_tr, n, p, ytr, *alpha)?;
            let s = scores(prep, std::slice::from_ref(&b));
            refit(prep, std::slice::from_ref(&b), &s, ytr)
        }
        Learner::Basis { basis } => {
            let b = rotate_basis(columns(basis, p, k), spec.rotate)?;
            let s = scores(prep, &b);
            refit(prep, &b, &s, ytr)
        }
        Learner::SplitBases { bases } => {
            let b = rotate_basis(columns(&bases[split], p, k), spec.rotate)?;
            let s = scores(prep, &b);
            refit(prep, &b, &s, ytr)
        }
    }
}

/// Ridge direction (X̃ᵀX̃ + αI)⁻¹X̃ᵀỹ, solved in the smaller of the primal/dual spaces.
pub fn ridge_direction(x: &[f64], n: usize, p: usize, y: &[f64], alpha: f64) -> Result<Vec<f64>> {
    use faer::linalg::matmul::matmul;
    use faer::prelude::Solve;
    use faer::{Accum, Mat, MatRef, Par, Side};
    let xm = MatRef::from_row_major_slice(x, n, p);
    let fail = |_| ThriftyError::numerical("ridge probe", "Cholesky factorisation failed");
    if p <= n {
        let mut a = Mat::<f64>::zeros(p, p);
        matmul(a.as_mut(), Accum::Replace, xm.transpose(), xm, 1.0, Par::Seq);
        for j in 0..p {
            a[(j, j)] += alpha;
        }
        let xty = xt_v(x, n, p, y);
        let rhs = Mat::from_fn(p, 1, |j, _| xty[j]);
        let llt = a.llt(Side::Lower).map_err(fail)?;
        let sol = llt.solve(rhs.as_ref());
        Ok((0..p).map(|j| sol[(j, 0)]).collect())
    } else {
        let mut kmat = Mat::<f64>::zeros(n, n);
        matmul(kmat.as_mut(), Accum::Replace, xm, xm.transpose(), 1.0, Par::Seq);
        for i in 0..n {
            kmat[(i, i)] += alpha;
        }
        let rhs = Mat::from_fn(n, 1, |i, _| y[i]);
        let llt = kmat.llt(Side::Lower).map_err(fail)?;
        let a = llt.solve(rhs.as_ref());
        let av: Vec<f64> = (0..n).map(|i| a[(i, 0)]).collect();
        Ok(xt_v(x, n, p, &av))
    }
}
