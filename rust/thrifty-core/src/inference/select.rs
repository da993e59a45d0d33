//! Choosing the number of components: the K-fold cross-validated R² curve of PLS1 (or sparse PLS1)
//! over k = 1..k_max, and the rules that read a choice off it.
//!
//! Folds are `baselines::folds(n, n_folds, seed)`. Each fold standardises its train rows with their own
//! moments, fits k_max components once (NIPALS; the first k rotations of a k_max fit are the k-component
//! fit's, since PᵀW is unit upper triangular) and scores the held-out rows of every k by
//! R² = 1 − SSE/SST (SST around the fold's mean). A fold where fewer than k components exist (the y
//! residual vanished) scores −∞ at that k, so the rules never pick it.
//!
//! Rules: `Max` takes the k of the largest mean R²; `OneSe` the smallest k whose mean R² is within
//! one standard error (sd over folds / √folds) of the best (Breiman's one-SE rule, plskit's `r2_se`).
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::baselines::folds;
use crate::inference::fit::{nipals_shaped, prepare, train_response, Data};
use crate::inference::spls::{fold_r2, hard_threshold, mean_se, one_se_choice};
use crate::linalg::x_v;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Max,
    OneSe,
}

/// The CV curve: per-fold R² (`scores[k-1][fold]`), its mean and SE per k, and the choice of each rule.
pub struct CvCurve {
    pub scores: Vec<Vec<f64>>,
    pub mean: Vec<f64>,
    pub se: Vec<f64>,
}

impl CvCurve {
    /// The number of components the rule picks (1-based); `None` when no k could be scored.
    pub fn choose(&self, rule: Rule) -> Option<usize> {
        let pick = match rule {
            Rule::OneSe => one_se_choice(&self.mean, &self.se),
            Rule::Max => {
                (0..self.mean.len()).filter(|&g| self.mean[g].is_finite()).max_by(|&a, &b| {
                    self.mean[a].total_cmp(&self.mean[b]).then(b.cmp(&a)) // ties: the smaller k
                })
            }
        };
        pick.map(|g| g + 1)
    }
}

/// Per-fold R² of k = 1..=k_max components (`keep` = p: PLS1; fewer: sparse PLS1 with that keep-count).
/// `Err(Interrupted)` soon after `cancel` is raised (checked between NIPALS components).
pub fn cv_curve(
    data: &Data<'_>,
    k_max: usize,
    keep: usize,
    n_folds: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<CvCurve> {
    let (n, p) = (data.n, data.p);
    if k_max == 0 || k_max > p.min(n) {
        return Err(ThriftyError::invalid(
            "k_max",
            format!("must be in [1, min(n_samples, n_features)] = [1, {}]", p.min(n)),
        ));
    }
    if keep == 0 || keep > p {
        return Err(ThriftyError::invalid("spls_keep", format!("must be in [1, n_features={p}], got {keep}")));
    }
    let fold = folds(n, n_folds, seed)?;
    // far from the origin or at extreme scales: the exact shift and power-of-two rescaling every test
    // route uses (the result is blind to both; ordinary data are the caller's, bit for bit)
    let xs = crate::inference::route::power_of_two_scaled(data.x, n, p, true)?;
    let ys = crate::inference::route::power_of_two_scaled(data.y, n, 1, false)?;
    let data = &Data { x: &xs, y: &ys, ..*data };
    let per_fold: Vec<Vec<f64>> = (0..n_folds)
        .into_par_iter()
        .map(|f| {
            let train: Vec<usize> = (0..n).filter(|&i| fold[i] != f).collect();
            let test: Vec<usize> = (0..n).filter(|&i| fold[i] == f).collect();
            fold_scores(data, &train, &test, k_max, keep, cancel)
        })
        .collect::<Result<_>>()?;
    let scores: Vec<Vec<f64>> = (0..k_max).map(|a| per_fold.iter().map(|s| s[a]).collect()).collect();
    let (mean, se) = scores.iter().map(|s| mean_se(s)).unzip();
    Ok(CvCurve { scores, mean, se })
}

/// R² of 1..=k_max components on one fold (−∞ where the fit has fewer components or fails).
fn fold_scores(
    data: &Data<'_>,
    train: &[usize],
    test: &[usize],
    k_max: usize,
    keep: usize,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let interrupted = || if cancel.load(Ordering::Relaxed) { Err(ThriftyError::Interrupted) } else { Ok(()) };
    interrupted()?;
    let mut out = vec![f64::NEG_INFINITY; k_max];
    let p = data.p;
    let prep = prepare(data, train, test, true)?;
    let Some(ytr) = train_response(&prep, data.y) else { return Ok(out) };
    // the held-out response in the train part's standardised units
    let w2: f64 = prep.sw_tr.iter().map(|s| s * s).sum();
    let m = train.iter().zip(&prep.sw_tr).map(|(&i, s)| s * s * data.y[i]).sum::<f64>() / w2;
    let sd = (train.iter().zip(&prep.sw_tr).map(|(&i, s)| s * s * (data.y[i] - m).powi(2)).sum::<f64>() / w2).sqrt();
    let yte: Vec<f64> = test.iter().map(|&i| (data.y[i] - m) / sd).collect();
    let (mut x, mut y) = (crate::alloc::try_copied("the train rows NIPALS deflates", &prep.xs_tr)?, ytr);
    // the shaping step runs once per component: on Ctrl-C it zeroes the weights, which ends NIPALS
    // there (a vanished X'y), and the interruption is reported below
    let shape = |w: &mut [f64]| {
        if cancel.load(Ordering::Relaxed) {
            w.fill(0.0);
        } else {
            hard_threshold(w, keep);
        }
    };
    let fit = nipals_shaped(&mut x, &mut y, train.len(), p, k_max, false, true, shape);
    interrupted()?;
    let Ok(fit) = fit else {
        return Ok(out);
    };
    let rot = fit.rotations();
    let mut coef = vec![0.0; p];
    for (a, (r, q)) in rot.iter().zip(&fit.q).enumerate() {
        coef.iter_mut().zip(r).for_each(|(c, v)| *c += q * v);
        out[a] = fold_r2(&x_v(&prep.xs_te, test.len(), p, &coef), &yte);
        interrupted()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_the_curve() {
        let c = CvCurve { scores: vec![], mean: vec![0.2, 0.5, 0.52, 0.51], se: vec![0.05; 4] };
        assert_eq!(c.choose(Rule::Max), Some(3));
        assert_eq!(c.choose(Rule::OneSe), Some(2));
        let none = CvCurve { scores: vec![], mean: vec![f64::NEG_INFINITY], se: vec![f64::INFINITY] };
        assert_eq!(none.choose(Rule::Max), None);
    }

    #[test]
    fn planted_two_components_are_found() {
        let (n, p) = (200, 10);
        let mut r = crate::rng::stream(11, 0);
        let x: Vec<f64> = (0..n * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
        let y: Vec<f64> =
            (0..n).map(|i| x[i * p] - x[i * p + 1] + 0.05 * (crate::rng::uniform(&mut r) - 0.5)).collect();
        let d = Data::new(&x, n, p, &y, None).unwrap();
        let c = cv_curve(&d, 5, p, 5, 3, &AtomicBool::new(false)).unwrap();
        assert!(c.mean[0] < c.mean[1], "{:?}", c.mean);
        assert!(c.choose(Rule::OneSe).unwrap() <= 3);
    }
}
