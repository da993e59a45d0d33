//! The held-out OLS refit of a supervised subspace on one train/test split.
//!
//! Per split: standardise X with the (weighted) train moments only and apply them to the test part,
//! scale train rows by √w, fit the learner's directions (a p×k basis) on the train part, refit y on
//! the k train scores by OLS, predict the test part and score it by the (weighted) Pearson r.
//!
//! This file holds what is fitted (the validated [`Data`], the [`Learner`], the [`Spec`]); the steps
//! live in one file each: [`prepare`](prepare::prepare) standardises a split, [`nipals()`] fits PLS1,
//! [`fit_coef`](refit::fit_coef) learns the directions and refits y on their scores, and `score`
//! predicts the test part and scores it ([`split_r`]). Dense helpers (`dot`, `xt_v`, `ols`, …) are
//! in [`crate::linalg`].
use crate::error::{Result, ThriftyError};

mod nipals;
mod prepare;
mod refit;
mod score;

pub(crate) use nipals::max_abs;
pub use nipals::{nipals, nipals_shaped, nipals_upto, Nipals};
pub(crate) use prepare::is_constant;
pub use prepare::{prepare, prepare_with, train_response, Prepared};
pub(crate) use refit::columns;
pub use refit::{fit_coef, ridge_direction, spca_default_features};
pub use score::{pls1_split_r, predict_test, predict_test_raw, split_r, split_r_with, wcorr};
// the dense helpers moved to `crate::linalg`; re-exported under their old paths
pub use crate::linalg::{dot, ols, x_v, xt_v};

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
pub(crate) fn wt(w: Option<&[f64]>, i: usize) -> f64 {
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
    /// Sparse PLS1 (`inference::spls`): each weight vector loads on exactly `keep` variables
    /// (0 = choose the keep-count by cross-validation on every train part).
    Spls { keep: usize },
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
        matches!(self, Learner::Pls | Learner::Spca { .. } | Learner::Ridge { .. } | Learner::Spls { .. })
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
            Learner::Spls { keep } => {
                if *keep > p {
                    return Err(ThriftyError::invalid(
                        "spls_keep",
                        format!("{keep} exceeds the number of columns ({p})"),
                    ));
                }
            }
            Learner::Pls => {}
        }
        Ok(())
    }
}
