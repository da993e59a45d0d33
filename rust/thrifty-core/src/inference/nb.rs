//! Splits, the per-split statistic, the Nadeau–Bengio corrected t-test on Fisher-z, and the pre-run gate.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{predict_test_raw, prepare_with, split_r_with, Data, Spec};
use crate::inference::route::{gate_rules, Gate};
use crate::inference::special::{norm_ppf, t_sf};
use crate::inference::splits::{fisher_z, Split};

/// Held-out r for every split (parallel over splits; each split is independent of scheduling).
pub fn split_correlations(data: &Data<'_>, spec: &Spec, splits: &[Split], y: &[f64]) -> Result<Vec<f64>> {
    split_correlations_cancellable(data, spec, splits, y, &AtomicBool::new(false))
}

/// [`split_correlations`] that stops with `Err(Interrupted)` soon after `cancel` is raised (checked per split).
pub fn split_correlations_cancellable(
    data: &Data<'_>,
    spec: &Spec,
    splits: &[Split],
    y: &[f64],
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    spec.validate(data.p, splits.len())?;
    let standardize = spec.learner.standardizes();
    splits
        .par_iter()
        .enumerate()
        .map(|(j, s)| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            if matches!(spec.learner, crate::inference::fit::Learner::Pls) && spec.k == 1 {
                return crate::inference::fit::pls1_split_r(data, &s.train, &s.test, y);
            }
            let prep = prepare_with(data, &s.train, &s.test, standardize, false)?;
            split_r_with(spec, &prep, y, j, |coef| predict_test_raw(data, &prep, coef))
        })
        .collect()
}

/// The NB-asymptotic test on per-split correlations.
#[derive(Clone, Debug, PartialEq)]
pub struct NbResult {
    pub z_mean: f64,
    pub z_sd: f64,
    pub se: f64,
    pub statistic: f64,
    pub t: f64,
    pub df: f64,
    pub p_value: f64,
    pub rho_hat: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// t = z̄ / (s_z √(1/J + ratio)), one-sided p = P(T_{J−1} > t), statistic tanh(z̄), Wald CI
/// tanh(z̄ ± Φ⁻¹(1 − (1−level)/2)·se), ρ̂ = clip(1 − s_z²(n_te − 3), 0, 1) (NaN if `n_te` is None).
pub fn nb_test(rs: &[f64], ratio: f64, n_te: Option<f64>, level: f64) -> Result<NbResult> {
    let j = rs.len();
    if j < 2 {
        return Err(ThriftyError::invalid("n_splits", "the NB test needs at least 2 splits"));
    }
    crate::error::ensure_finite("r", rs)?;
    if !(ratio.is_finite() && ratio > 0.0) {
        return Err(ThriftyError::invalid("ratio", "must be positive"));
    }
    if !(level > 0.0 && level < 1.0) {
        return Err(ThriftyError::invalid("confidence_level", "must be in (0, 1)"));
    }
    let z: Vec<f64> = rs.iter().map(|&r| fisher_z(r)).collect();
    let zbar = z.iter().sum::<f64>() / j as f64;
    let var = z.iter().map(|v| (v - zbar).powi(2)).sum::<f64>() / (j - 1) as f64;
    let sd = var.sqrt();
    let se = (sd * (1.0 / j as f64 + ratio).sqrt()).max(1e-15);
    let t = zbar / se;
    let df = (j - 1) as f64;
    let p = t_sf(t, df);
    let rho_hat = match n_te {
        Some(m) if m >= 4.0 => (1.0 - var * (m - 3.0)).clamp(0.0, 1.0),
        _ => f64::NAN,
    };
    let zc = norm_ppf(1.0 - (1.0 - level) / 2.0);
    Ok(NbResult {
        z_mean: zbar,
        z_sd: sd,
        se,
        statistic: zbar.tanh(),
        t,
        df,
        p_value: p,
        rho_hat,
        ci_low: (zbar - zc * se).tanh(),
        ci_high: (zbar + zc * se).tanh(),
    })
}

/// The gate: reroute to the permutation test when n_eff < 25, stable rank < 3 or ≤ 4 columns.
pub fn gate(data: &Data<'_>) -> Result<Gate> {
    let (n, p) = (data.n, data.p);
    let n_eff = match data.w {
        None => n as f64,
        Some(w) => {
            let s: f64 = w.iter().sum();
            let s2: f64 = w.iter().map(|v| v * v).sum();
            s * s / s2
        }
    };
    let all: Vec<usize> = (0..n).collect();
    let prep = prepare_with(data, &all, &[], true, false)?;
    let x = &prep.xs_tr;
    let fro2 = crate::linalg::dot(x, x);
    let sigma2 = top_eigen_gram(x, n, p);
    let stable_rank = if sigma2 > 0.0 { fro2 / sigma2 } else { 0.0 };
    Ok(gate_rules(n_eff, stable_rank, p))
}

/// Largest eigenvalue of XᵀX by Lanczos with full reorthogonalisation (deterministic start; at most
/// 60 steps, stopping once the top Ritz value changes by less than 1e-4 relative between checks two
/// steps apart; a lower bound on the eigenvalue, so the stable rank is never underestimated), run in the smaller of
/// the row/column spaces.
pub(crate) fn top_eigen_gram(x: &[f64], n: usize, p: usize) -> f64 {
    use crate::linalg::{dot, x_v, xt_v};
    let dim = n.min(p);
    let apply = |v: &[f64]| -> Vec<f64> {
        if p <= n {
            xt_v(x, n, p, &x_v(x, n, p, v))
        } else {
            x_v(x, n, p, &xt_v(x, n, p, v))
        }
    };
    let mut q: Vec<Vec<f64>> = vec![];
    let mut v: Vec<f64> = (0..dim).map(|j| 1.0 + 0.01 * ((j * 7919) % 101) as f64).collect();
    let nv = dot(&v, &v).sqrt();
    v.iter_mut().for_each(|a| *a /= nv);
    let (mut alpha, mut beta) = (vec![], vec![]);
    let mut last = 0.0;
    let steps = dim.min(60);
    for it in 0..steps {
        let mut w = apply(&v);
        let a = dot(&w, &v);
        alpha.push(a);
        q.push(v.clone());
        for _ in 0..2 {
            for qi in &q {
                let c = dot(qi, &w);
                w.iter_mut().zip(qi).for_each(|(wv, qv)| *wv -= c * qv);
            }
        }
        let b = dot(&w, &w).sqrt();
        let done = !(b > 1e-12 * a.abs().max(1e-300)) || it + 1 == steps;
        if done || (it + 1) % 2 == 0 {
            let m = alpha.len();
            let t = faer::Mat::<f64>::from_fn(m, m, |i, j| {
                if i == j {
                    alpha[i]
                } else if i + 1 == j {
                    beta[i]
                } else if j + 1 == i {
                    beta[j]
                } else {
                    0.0
                }
            });
            let top = t
                .self_adjoint_eigenvalues(faer::Side::Lower)
                .map(|e| e.into_iter().fold(f64::NEG_INFINITY, f64::max))
                .unwrap_or(a);
            if done || (top - last).abs() <= 1e-4 * top.abs() {
                return top.max(0.0);
            }
            last = top;
        }
        beta.push(b);
        v = w.into_iter().map(|x| x / b).collect();
    }
    last.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::splits::{draw_splits, split_sizes};

    #[test]
    fn split_sizes_follow_the_clamp() {
        assert_eq!(split_sizes(100, 1).unwrap(), (50, 50));
        assert_eq!(split_sizes(101, 1).unwrap(), (50, 51));
        assert_eq!(split_sizes(8, 3).unwrap(), (5, 3));
        assert!(split_sizes(7, 3).is_err());
    }

    #[test]
    fn draw_splits_is_reproducible_and_a_partition() {
        let a = draw_splits(31, 1, 5, 9).unwrap();
        let b = draw_splits(31, 1, 5, 9).unwrap();
        assert_eq!(a, b);
        for s in &a {
            assert_eq!(s.train.len(), 15);
            let mut all: Vec<usize> = s.train.iter().chain(&s.test).copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..31).collect::<Vec<_>>());
        }
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn lanczos_top_eigenvalue_matches_dense() {
        for &(n, p) in &[(30usize, 8usize), (8, 30), (25, 25)] {
            let x: Vec<f64> = (0..n * p).map(|i| ((i * 7 + 3) % 17) as f64 / 5.0 + (i as f64 * 0.37).sin()).collect();
            let m = faer::Mat::<f64>::from_fn(p, p, |a, b| (0..n).map(|i| x[i * p + a] * x[i * p + b]).sum());
            let dense = m.self_adjoint_eigenvalues(faer::Side::Lower).unwrap().into_iter().fold(0.0, f64::max);
            let lz = top_eigen_gram(&x, n, p);
            assert!((lz - dense).abs() < 1e-3 * dense, "{n}x{p}: {lz} vs {dense}");
        }
    }

    #[test]
    fn nb_test_matches_closed_form() {
        let rs = [0.3, 0.1, 0.25, 0.4, 0.05, 0.2];
        let res = nb_test(&rs, 1.0, Some(50.0), 0.95).unwrap();
        let z: Vec<f64> = rs.iter().map(|r: &f64| r.atanh()).collect();
        let m = z.iter().sum::<f64>() / 6.0;
        let v = z.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 5.0;
        let t = m / (v.sqrt() * (1.0 / 6.0 + 1.0f64).sqrt());
        assert!((res.t - t).abs() < 1e-14);
        assert!((res.statistic - m.tanh()).abs() < 1e-15);
        assert_eq!(res.df, 5.0);
        assert!(res.p_value > 0.0 && res.p_value < 0.5);
        assert!((res.rho_hat - (1.0 - v * 47.0).clamp(0.0, 1.0)).abs() < 1e-14);
        assert!(res.ci_low < res.statistic && res.statistic < res.ci_high);
        // the tail is the upper one: a negative mean gives p > 1/2
        let neg: Vec<f64> = rs.iter().map(|r| -r).collect();
        assert!(nb_test(&neg, 1.0, None, 0.95).unwrap().p_value > 0.5);
    }
}
