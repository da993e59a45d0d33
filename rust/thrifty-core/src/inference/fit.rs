//! The held-out OLS refit of a supervised subspace on one train/test split.
//!
//! Per split: standardise X with the (weighted) train moments only and apply them to the test part,
//! scale train rows by √w, fit the learner's directions (a p×k basis) on the train part, refit y on
//! the k train scores by OLS, predict the test part and score it by the (weighted) Pearson r.
use crate::error::{Result, ThriftyError};
use crate::inference::varimax::varimax;

/// The data of one test: `x` is row-major `n × p`, `y` has length `n`, `w` (optional) non-negative
/// sample weights with positive sum.
#[derive(Clone, Copy, Debug)]
pub struct Data<'a> {
    pub x: &'a [f64],
    pub n: usize,
    pub p: usize,
    pub y: &'a [f64],
    pub w: Option<&'a [f64]>,
}

impl<'a> Data<'a> {
    /// Validate shapes and values (every user-input problem is an `Err`).
    pub fn new(x: &'a [f64], n: usize, p: usize, y: &'a [f64], w: Option<&'a [f64]>) -> Result<Self> {
        crate::error::ensure_matrix("X", x, n, p)?;
        crate::error::ensure_finite("X", x)?;
        if y.len() != n {
            return Err(ThriftyError::shape("y", format!("has length {}, but X has {n} rows", y.len())));
        }
        crate::error::ensure_finite("y", y)?;
        if let Some(w) = w {
            if w.len() != n {
                return Err(ThriftyError::shape(
                    "sample_weight",
                    format!("has length {}, but X has {n} rows", w.len()),
                ));
            }
            crate::error::ensure_finite("sample_weight", w)?;
            if w.iter().any(|&v| v < 0.0) {
                return Err(ThriftyError::invalid("sample_weight", "must be non-negative"));
            }
            if w.iter().sum::<f64>() <= 0.0 {
                return Err(ThriftyError::invalid("sample_weight", "must have a positive sum"));
            }
        }
        let (m, _) = mean_sd(y, w, |i| i, n);
        let ss: f64 = (0..n).map(|i| wt(w, i) * (y[i] - m).powi(2)).sum();
        let scale: f64 = (0..n).map(|i| wt(w, i) * y[i] * y[i]).sum();
        if !(ss > 1e-24 * scale) || ss == 0.0 {
            return Err(ThriftyError::invalid("y", "is constant (zero variance); there is nothing to predict"));
        }
        Ok(Data { x, n, p, y, w })
    }

    pub fn weighted(&self) -> bool {
        self.w.is_some()
    }
}

#[inline]
fn wt(w: Option<&[f64]>, i: usize) -> f64 {
    match w {
        Some(w) => w[i],
        None => 1.0,
    }
}

/// Weighted mean and population SD of `v[idx(i)]` for i in 0..m.
fn mean_sd(v: &[f64], w: Option<&[f64]>, idx: impl Fn(usize) -> usize, m: usize) -> (f64, f64) {
    let mut sw = 0.0;
    let mut s = 0.0;
    for i in 0..m {
        let r = idx(i);
        let wi = wt(w, r);
        sw += wi;
        s += wi * v[r];
    }
    let mean = s / sw;
    let mut ss = 0.0;
    for i in 0..m {
        let r = idx(i);
        ss += wt(w, r) * (v[r] - mean).powi(2);
    }
    (mean, (ss / sw).sqrt())
}

/// Which directions the train part learns.
#[derive(Clone, Debug)]
pub enum Learner {
    /// PLS1 (NIPALS on the train part; Krylov/Gram forms inside permutation routes).
    Pls,
    /// Supervised PCA: keep the `n_features` features with the largest |X̃ⱼᵀỹ| on the train part
    /// (0 = default `min(p, max(5k, ⌈p/10⌉))`), then the top-k right singular vectors of those columns.
    Spca { n_features: usize },
    /// Ridge probe: the single direction (X̃ᵀX̃ + αI)⁻¹X̃ᵀỹ (k = 1).
    Ridge { alpha: f64 },
    /// A fixed basis (p×k, row-major), applied to X centred by the train mean (raw units).
    Basis { basis: Vec<f64> },
    /// One fixed basis per split (p×k each, row-major), e.g. computed by a Python callable on each
    /// train part; applied to X centred by the train mean (raw units).
    SplitBases { bases: Vec<Vec<f64>> },
}

impl Learner {
    /// Built-in learners work on standardised X; user bases act on centred raw X.
    pub fn standardizes(&self) -> bool {
        matches!(self, Learner::Pls | Learner::Spca { .. } | Learner::Ridge { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    None,
    Varimax,
}

/// What to fit: the learner, the number of components and an optional rotation of the basis.
#[derive(Clone, Debug)]
pub struct Spec {
    pub learner: Learner,
    pub k: usize,
    pub rotate: Rotation,
}

impl Spec {
    pub fn validate(&self, p: usize, n_splits: usize) -> Result<()> {
        if self.k == 0 {
            return Err(ThriftyError::invalid("n_components", "must be at least 1"));
        }
        if self.k > p {
            return Err(ThriftyError::invalid(
                "n_components",
                format!("{} exceeds the number of columns of X ({p})", self.k),
            ));
        }
        match &self.learner {
            Learner::Ridge { alpha } => {
                if !(alpha.is_finite() && *alpha > 0.0) {
                    return Err(ThriftyError::invalid("ridge_alpha", "must be a positive finite number"));
                }
                if self.k != 1 {
                    return Err(ThriftyError::invalid(
                        "n_components",
                        "the ridge probe learns one direction; n_components must be 1",
                    ));
                }
            }
            Learner::Spca { n_features } => {
                if *n_features > p {
                    return Err(ThriftyError::invalid(
                        "spca_n_features",
                        format!("{n_features} exceeds the number of columns ({p})"),
                    ));
                }
                if *n_features != 0 && *n_features < self.k {
                    return Err(ThriftyError::invalid(
                        "spca_n_features",
                        format!("{n_features} is smaller than n_components ({})", self.k),
                    ));
                }
            }
            Learner::Basis { basis } => {
                if basis.len() != p * self.k {
                    return Err(ThriftyError::shape(
                        "learner",
                        format!("basis must have shape ({p}, {}), got {} values", self.k, basis.len()),
                    ));
                }
                crate::error::ensure_finite("learner", basis)?;
            }
            Learner::SplitBases { bases } => {
                if bases.len() != n_splits {
                    return Err(ThriftyError::shape(
                        "bases",
                        format!("need one basis per split ({n_splits}), got {}", bases.len()),
                    ));
                }
                for b in bases {
                    if b.len() != p * self.k {
                        return Err(ThriftyError::shape(
                            "bases",
                            format!("each basis must have shape ({p}, {}), got {} values", self.k, b.len()),
                        ));
                    }
                    crate::error::ensure_finite("bases", b)?;
                }
            }
            Learner::Pls => {}
        }
        Ok(())
    }
}

/// One split, prepared: standardised train rows (scaled by √w, row-major n_tr×p), standardised test
/// rows (row-major n_te×p), √w of the train rows and weights of the test rows (each part renormalised
/// to mean 1).
pub struct Prepared {
    pub n_tr: usize,
    pub n_te: usize,
    pub p: usize,
    pub xs_tr: Vec<f64>,
    pub xs_te: Vec<f64>,
    pub sw_tr: Vec<f64>,
    pub w_te: Vec<f64>,
    pub train: Vec<usize>,
    pub test: Vec<usize>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
}

/// Is a column constant on the train part (relative to its magnitude)?
#[inline]
pub(crate) fn is_constant(mean: f64, sd: f64) -> bool {
    !(sd > 1e-12 * mean.abs()) || sd == 0.0
}

pub fn prepare(data: &Data<'_>, train: &[usize], test: &[usize], standardize: bool) -> Prepared {
    prepare_with(data, train, test, standardize, true)
}

/// As [`prepare`]; with `with_test = false` the standardised test rows are not materialised (use
/// [`predict_test_raw`] for predictions).
pub fn prepare_with(data: &Data<'_>, train: &[usize], test: &[usize], standardize: bool, with_test: bool) -> Prepared {
    let (n_tr, n_te, p) = (train.len(), test.len(), data.p);
    let norm = |idx: &[usize]| -> Vec<f64> {
        match data.w {
            None => vec![1.0; idx.len()],
            Some(w) => {
                let s: f64 = idx.iter().map(|&i| w[i]).sum();
                let m = if s > 0.0 { s / idx.len() as f64 } else { 1.0 };
                idx.iter().map(|&i| w[i] / m).collect()
            }
        }
    };
    let w_tr = norm(train);
    let w_te = norm(test);
    let sw_tr: Vec<f64> = w_tr.iter().map(|v| v.sqrt()).collect();
    let sw_total: f64 = w_tr.iter().sum();
    let inv = if sw_total > 0.0 { 1.0 / sw_total } else { 0.0 };
    // weighted train moments in one pass over shifted data (shift = the first train row, so the sums
    // stay on the scale of the spread)
    let shift: Vec<f64> = match train.first() {
        Some(&i) => data.x[i * p..(i + 1) * p].to_vec(),
        None => vec![0.0; p],
    };
    let mut s1 = vec![0.0; p];
    let mut s2 = vec![0.0; p];
    for (a, &i) in train.iter().enumerate() {
        let row = &data.x[i * p..(i + 1) * p];
        let wi = w_tr[a];
        for (((a1, a2), &v), &k) in s1.iter_mut().zip(s2.iter_mut()).zip(row).zip(&shift) {
            let d = v - k;
            *a1 += wi * d;
            *a2 += wi * d * d;
        }
    }
    let mut mean = vec![0.0; p];
    let mut scale = vec![1.0; p];
    for j in 0..p {
        let dm = s1[j] * inv;
        mean[j] = shift[j] + dm;
        if standardize {
            let sd = (s2[j] * inv - dm * dm).max(0.0).sqrt();
            // constant columns on the train part: standardised values are 0 (the column drops out)
            scale[j] = if is_constant(mean[j], sd) { f64::INFINITY } else { sd };
        }
    }
    let inv_scale: Vec<f64> = scale.iter().map(|s| 1.0 / s).collect();
    let mut xs_tr = vec![0.0; n_tr * p];
    for (a, &i) in train.iter().enumerate() {
        let row = &data.x[i * p..(i + 1) * p];
        let out = &mut xs_tr[a * p..(a + 1) * p];
        let s = sw_tr[a];
        for (((o, &v), &m), &is) in out.iter_mut().zip(row).zip(&mean).zip(&inv_scale) {
            *o = s * ((v - m) * is);
        }
    }
    let mut xs_te = vec![];
    if with_test {
        xs_te = vec![0.0; n_te * p];
        for (a, &i) in test.iter().enumerate() {
            let row = &data.x[i * p..(i + 1) * p];
            let out = &mut xs_te[a * p..(a + 1) * p];
            for (((o, &v), &m), &is) in out.iter_mut().zip(row).zip(&mean).zip(&inv_scale) {
                *o = (v - m) * is;
            }
        }
    }
    Prepared { n_tr, n_te, p, xs_tr, xs_te, sw_tr, w_te, train: train.to_vec(), test: test.to_vec(), mean, scale }
}

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

/// ỹ on the train part: weighted-standardised by train moments and scaled by √w. `y` is the full
/// (possibly permuted) response. Returns `None` when y is constant on the train part.
pub fn train_response(prep: &Prepared, y: &[f64]) -> Option<Vec<f64>> {
    let w2: Vec<f64> = prep.sw_tr.iter().map(|s| s * s).collect();
    let sw: f64 = w2.iter().sum();
    let m: f64 = prep.train.iter().zip(&w2).map(|(&i, w)| w * y[i]).sum::<f64>() / sw;
    let ss: f64 = prep.train.iter().zip(&w2).map(|(&i, w)| w * (y[i] - m).powi(2)).sum::<f64>() / sw;
    let sd = ss.sqrt();
    if is_constant(m, sd) {
        return None;
    }
    Some(prep.train.iter().zip(&prep.sw_tr).map(|(&i, s)| s * (y[i] - m) / sd).collect())
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

// ---------------------------------------------------------------------------------------------
// small dense helpers on row-major data

/// Xᵀv for row-major X (n×p).
pub(crate) fn xt_v(x: &[f64], n: usize, p: usize, v: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; p];
    for i in 0..n {
        let vi = v[i];
        if vi != 0.0 {
            for (o, &xv) in out.iter_mut().zip(&x[i * p..(i + 1) * p]) {
                *o += vi * xv;
            }
        }
    }
    out
}

/// Xv for row-major X (n×p).
pub(crate) fn x_v(x: &[f64], n: usize, p: usize, v: &[f64]) -> Vec<f64> {
    (0..n).map(|i| dot(&x[i * p..(i + 1) * p], v)).collect()
}

#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    // eight independent accumulators over exact chunks: vectorises and keeps a fixed summation order
    let mut acc = [0.0f64; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// OLS of `y` on the columns of `s` (each of length n) without intercept (inputs are centred),
/// by modified Gram–Schmidt. Returns β, or `None` if the columns are (numerically) dependent.
pub fn ols(s: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let k = s.len();
    let mut q: Vec<Vec<f64>> = Vec::with_capacity(k);
    let mut r = vec![0.0; k * k];
    for a in 0..k {
        let mut v = s[a].clone();
        let norm0 = dot(&v, &v).sqrt();
        for b in 0..a {
            let c = dot(&q[b], &v);
            r[b * k + a] = c;
            for (vi, qi) in v.iter_mut().zip(&q[b]) {
                *vi -= c * qi;
            }
        }
        let nrm = dot(&v, &v).sqrt();
        if !(nrm > 1e-10 * norm0) || nrm == 0.0 {
            return None;
        }
        r[a * k + a] = nrm;
        v.iter_mut().for_each(|x| *x /= nrm);
        q.push(v);
    }
    let qty: Vec<f64> = q.iter().map(|qa| dot(qa, y)).collect();
    let mut beta = vec![0.0; k];
    for a in (0..k).rev() {
        let mut acc = qty[a];
        for b in a + 1..k {
            acc -= r[a * k + b] * beta[b];
        }
        beta[a] = acc / r[a * k + a];
    }
    Some(beta)
}

// ---------------------------------------------------------------------------------------------
// PLS1 by NIPALS

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
    let xnorm = dot(x, x).sqrt();
    let ynorm = dot(y, y).sqrt();
    let ymax0 = max_abs(y);
    let mut out = Nipals { w: vec![], p: vec![], q: vec![], t: vec![] };
    for a in 0..k {
        if stop_early && a > 0 && !(max_abs(y) >= 10.0 * f64::EPSILON * ymax0) {
            break;
        }
        let mut w = xt_v(x, n, p, y);
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

/// Inverse of an upper-triangular k×k matrix (row-major; the strict lower part is ignored).
fn invert_upper(u: &[f64], k: usize) -> Vec<f64> {
    let mut inv = vec![0.0; k * k];
    for col in 0..k {
        for row in (0..=col).rev() {
            let mut acc = if row == col { 1.0 } else { 0.0 };
            for m in row + 1..=col {
                acc -= u[row * k + m] * inv[m * k + col];
            }
            inv[row * k + col] = acc / u[row * k + row];
        }
    }
    inv
}

// ---------------------------------------------------------------------------------------------
// the refit

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
