//! PLS1 by NIPALS on standardised data: weights, loadings, scores, and the rotations R = W(PᵀW)⁻¹.
use crate::error::{Result, ThriftyError};
use crate::linalg::{dot, invert_upper, x_v, xt_v};

/// A PLS1 fit on (already standardised) data: weights W, loadings P, y-loadings q, scores T.
pub struct Nipals {
    pub w: Vec<Vec<f64>>,
    pub p: Vec<Vec<f64>>,
    pub q: Vec<f64>,
    pub t: Vec<Vec<f64>>,
}

/// PLS1 NIPALS on row-major `x` (n×p, deflated in place) and `y` (deflated in place).
///
/// The last deflation is always skipped (nothing uses it), so X and y hold the residuals after k − 1
/// components. With `full = false` the last loading is skipped too (it does not affect the
/// coefficients); its `p` entry is then empty.
pub fn nipals(x: &mut [f64], y: &mut [f64], n: usize, p: usize, k: usize, full: bool) -> Result<Nipals> {
    nipals_upto(x, y, n, p, k, full, false)
}

/// Largest |value| of a slice.
pub(crate) fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// [`nipals`]; with `stop_early` it stops (instead of failing) once the y residual is constant to
/// rounding (|y_a| < 10 eps |y|, scikit-learn's rule) or X'y vanishes, returning fewer than k
/// components. The last extracted component is then deflated too.
pub fn nipals_upto(
    x: &mut [f64],
    y: &mut [f64],
    n: usize,
    p: usize,
    k: usize,
    full: bool,
    stop_early: bool,
) -> Result<Nipals> {
    nipals_shaped(x, y, n, p, k, full, stop_early, |_| {})
}

/// [`nipals_upto`] with every raw weight vector X_aᵀy_a passed through `shape` before it is
/// normalised (sparse PLS keeps its largest entries; the identity gives PLS1 bit for bit).
#[allow(clippy::too_many_arguments)]
pub fn nipals_shaped(
    x: &mut [f64],
    y: &mut [f64],
    n: usize,
    p: usize,
    k: usize,
    full: bool,
    stop_early: bool,
    shape: impl Fn(&mut [f64]),
) -> Result<Nipals> {
    let xnorm = dot(x, x).sqrt();
    let ynorm = dot(y, y).sqrt();
    let ymax0 = max_abs(y);
    let mut out = Nipals { w: vec![], p: vec![], q: vec![], t: vec![] };
    for a in 0..k {
        if stop_early && a > 0 && !(max_abs(y) >= 10.0 * f64::EPSILON * ymax0) {
            break;
        }
        let mut w = xt_v(x, n, p, y);
        shape(&mut w);
        let wn = dot(&w, &w).sqrt();
        if !(wn > 1e-10 * xnorm * ynorm) || wn == 0.0 {
            if stop_early && a > 0 {
                break;
            }
            return Err(ThriftyError::invalid(
                "n_components",
                format!(
                    "component {} is degenerate (X'y vanishes after {a} components): n_components must be \
                     below the rank of the data",
                    a + 1
                ),
            ));
        }
        w.iter_mut().for_each(|v| *v /= wn);
        let t = x_v(x, n, p, &w);
        let tt = dot(&t, &t);
        if !(tt > 0.0) {
            return Err(ThriftyError::numerical("PLS", "zero score vector"));
        }
        let q = dot(y, &t) / tt;
        if a + 1 == k && full && !stop_early {
            // the last loading is reported, but the last deflation is never used: skip it
            let mut pl = xt_v(x, n, p, &t);
            pl.iter_mut().for_each(|v| *v /= tt);
            out.w.push(w);
            out.p.push(pl);
            out.q.push(q);
            out.t.push(t);
            break;
        }
        if a + 1 == k && !full {
            // the last loading never enters R = W(PᵀW)⁻¹ (PᵀW is unit upper triangular), so skip it
            // and the last deflation
            out.w.push(w);
            out.p.push(vec![]);
            out.q.push(q);
            out.t.push(t);
            break;
        }
        let mut pl = xt_v(x, n, p, &t);
        pl.iter_mut().for_each(|v| *v /= tt);
        for i in 0..n {
            let ti = t[i];
            for (xv, pv) in x[i * p..(i + 1) * p].iter_mut().zip(&pl) {
                *xv -= ti * pv;
            }
            y[i] -= q * ti;
        }
        out.w.push(w);
        out.p.push(pl);
        out.q.push(q);
        out.t.push(t);
    }
    Ok(out)
}

impl Nipals {
    /// P'W (k×k, unit upper triangular in exact arithmetic), row-major. Entries that involve a skipped
    /// loading use their exact values (1 on the diagonal, 0 below it).
    pub fn ptw(&self) -> Vec<f64> {
        let k = self.q.len();
        let mut m = vec![0.0; k * k];
        for a in 0..k {
            for b in 0..k {
                m[a * k + b] = if self.p[a].is_empty() {
                    if a == b {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    dot(&self.p[a], &self.w[b])
                };
            }
        }
        m
    }

    /// Rotations R = W (P'W)⁻¹ (p×k, as k columns), so that T = X R.
    pub fn rotations(&self) -> Vec<Vec<f64>> {
        let k = self.q.len();
        let pw = self.ptw();
        let inv = invert_upper(&pw, k);
        let p = self.w[0].len();
        (0..k)
            .map(|b| {
                let mut col = vec![0.0; p];
                for a in 0..k {
                    let c = inv[a * k + b];
                    if c != 0.0 {
                        for (o, wv) in col.iter_mut().zip(&self.w[a]) {
                            *o += c * wv;
                        }
                    }
                }
                col
            })
            .collect()
    }

    /// Regression coefficients in the standardised space, R q.
    pub fn coef(&self) -> Vec<f64> {
        let rot = self.rotations();
        let mut c = vec![0.0; rot[0].len()];
        for (col, &q) in rot.iter().zip(&self.q) {
            for (o, v) in c.iter_mut().zip(col) {
                *o += q * v;
            }
        }
        c
    }
}
