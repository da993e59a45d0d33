//! Held-out predictions of the test part and the split statistic r (weighted Pearson correlation),
//! with the fused one-pass PLS1 path of the NB test.
use super::{fit_coef, is_constant, train_response, wt, Data, Prepared, Spec};
use crate::error::{Result, ThriftyError};
use crate::linalg::x_v;

/// PLS1 with one component, fused for the NB test: the held-out prediction is proportional (with a
/// non-negative factor) to X̃_te·X̃ᵀỹ, so r needs one pass over the train rows (weighted moments and
/// the shifted cross-product Σᵢ wᵢ (xᵢ − K)(yᵢ − ȳ) together) and one over the test rows; nothing is
/// copied. Equals [`split_r`] with `Learner::Pls`, k = 1 (tested).
pub fn pls1_split_r(data: &Data<'_>, train: &[usize], test: &[usize], y: &[f64]) -> Result<f64> {
    let p = data.p;
    let n_tr = train.len();
    let wsum: f64 = train.iter().map(|&i| wt(data.w, i)).sum();
    let wnorm = if wsum > 0.0 { n_tr as f64 / wsum } else { 1.0 };
    let w_of = |i: usize| wt(data.w, i) * wnorm;
    let inv = 1.0 / n_tr as f64;
    let my = train.iter().map(|&i| w_of(i) * y[i]).sum::<f64>() * inv;
    let vy = train.iter().map(|&i| w_of(i) * (y[i] - my).powi(2)).sum::<f64>() * inv;
    if is_constant(my, vy.sqrt()) {
        return Ok(f64::NAN); // y is constant on the train part: r is undefined
    }
    let shift = &data.x[train[0] * p..(train[0] + 1) * p];
    let (mut s1, mut s2, mut g) = (vec![0.0; p], vec![0.0; p], vec![0.0; p]);
    for &i in train {
        let row = &data.x[i * p..(i + 1) * p];
        let wi = w_of(i);
        let wy = wi * (y[i] - my);
        for j in 0..p {
            let d = row[j] - shift[j];
            s1[j] += wi * d;
            s2[j] += wi * d * d;
            g[j] += wy * d;
        }
    }
    let mut mean = vec![0.0; p];
    let mut c = vec![0.0; p];
    let mut n_nonconst = 0usize;
    let mut gnorm2 = 0.0;
    for j in 0..p {
        let dm = s1[j] * inv;
        mean[j] = shift[j] + dm;
        let sd = (s2[j] * inv - dm * dm).max(0.0).sqrt();
        if !is_constant(mean[j], sd) {
            n_nonconst += 1;
            let gj = g[j] / sd; // (X̃ᵀ(w ⊙ (y − ȳ)))ⱼ
            gnorm2 += gj * gj;
            c[j] = gj / sd;
        }
    }
    // degenerate direction: same rule as the refit path, ‖X̃ᵀỹ‖ ≤ 1e-10 ‖X̃‖_F ‖ỹ‖ with ỹ = (y − ȳ)/s_y
    let sy = vy.sqrt();
    let wn = gnorm2.sqrt() / sy;
    let bound = 1e-10 * (n_tr as f64 * n_nonconst as f64).sqrt() * (n_tr as f64).sqrt();
    if !(wn > bound) || wn == 0.0 {
        return Err(ThriftyError::invalid(
            "n_components",
            "component 1 is degenerate (X'y vanishes): n_components must be below the rank of the data",
        ));
    }
    let tsum: f64 = test.iter().map(|&i| wt(data.w, i)).sum();
    let tnorm = if tsum > 0.0 { test.len() as f64 / tsum } else { 1.0 };
    let mut pred = Vec::with_capacity(test.len());
    let mut yte = Vec::with_capacity(test.len());
    let mut wte = Vec::with_capacity(test.len());
    for &i in test {
        let row = &data.x[i * p..(i + 1) * p];
        let mut acc = [0.0f64; 4];
        let chunks = p / 4;
        for q in 0..chunks {
            for l in 0..4 {
                let j = 4 * q + l;
                acc[l] += (row[j] - mean[j]) * c[j];
            }
        }
        let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for j in 4 * chunks..p {
            sum += (row[j] - mean[j]) * c[j];
        }
        pred.push(sum);
        yte.push(y[i]);
        wte.push(wt(data.w, i) * tnorm);
    }
    Ok(wcorr(&pred, &yte, &wte))
}

/// Held-out predictions read straight from the raw test rows: Σⱼ (xᵢⱼ − mⱼ)·coefⱼ/sⱼ.
pub fn predict_test_raw(data: &Data<'_>, prep: &Prepared, coef: &[f64]) -> Vec<f64> {
    let p = prep.p;
    let c: Vec<f64> = coef.iter().zip(&prep.scale).map(|(c, s)| c / s).collect();
    prep.test
        .iter()
        .map(|&i| {
            let row = &data.x[i * p..(i + 1) * p];
            let mut acc = [0.0f64; 4];
            let chunks = p / 4;
            for q in 0..chunks {
                for l in 0..4 {
                    let j = 4 * q + l;
                    acc[l] += (row[j] - prep.mean[j]) * c[j];
                }
            }
            let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            for j in 4 * chunks..p {
                sum += (row[j] - prep.mean[j]) * c[j];
            }
            sum
        })
        .collect()
}

/// Weighted Pearson correlation; NaN (undefined) when either vector is (numerically) constant.
pub fn wcorr(a: &[f64], b: &[f64], w: &[f64]) -> f64 {
    let sw: f64 = w.iter().sum();
    let ma = a.iter().zip(w).map(|(x, w)| w * x).sum::<f64>() / sw;
    let mb = b.iter().zip(w).map(|(x, w)| w * x).sum::<f64>() / sw;
    let (mut sab, mut saa, mut sbb, mut raa, mut rbb) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in 0..a.len() {
        let (da, db) = (a[i] - ma, b[i] - mb);
        sab += w[i] * da * db;
        saa += w[i] * da * da;
        sbb += w[i] * db * db;
        raa += w[i] * a[i] * a[i];
        rbb += w[i] * b[i] * b[i];
    }
    if !(saa > 1e-15 * raa) || !(sbb > 1e-15 * rbb) || saa == 0.0 || sbb == 0.0 {
        return f64::NAN;
    }
    (sab / (saa.sqrt() * sbb.sqrt())).clamp(-1.0, 1.0)
}

/// Held-out predictions on the test part for coefficients in the prepared space.
pub fn predict_test(prep: &Prepared, coef: &[f64]) -> Vec<f64> {
    x_v(&prep.xs_te, prep.n_te, prep.p, coef)
}

/// The split statistic r for a (possibly permuted) response `y` (full length n); NaN when it is
/// undefined (y constant on the train part, or a constant test response or prediction).
pub fn split_r(spec: &Spec, prep: &Prepared, y: &[f64], split: usize) -> Result<f64> {
    split_r_with(spec, prep, y, split, |coef| predict_test(prep, coef))
}

/// [`split_r`] with a caller-supplied prediction of the test rows from the coefficients.
pub fn split_r_with(
    spec: &Spec,
    prep: &Prepared,
    y: &[f64],
    split: usize,
    predict: impl Fn(&[f64]) -> Vec<f64>,
) -> Result<f64> {
    let ytr = match train_response(prep, y) {
        Some(v) => v,
        None => return Ok(f64::NAN), // y constant on the train part: r is undefined
    };
    let coef = fit_coef(spec, prep, &ytr, split)?;
    let pred = predict(&coef);
    let yte: Vec<f64> = prep.test.iter().map(|&i| y[i]).collect();
    Ok(wcorr(&pred, &yte, &prep.w_te))
}
