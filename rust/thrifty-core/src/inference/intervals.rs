//! Subsampling (m-out-of-n) replicates of rotation-invariant PLS1 quantities: the coefficients β
//! (original units) and the per-variable leverage h_j = Σ_a W_ja² (the diagonal of the projection on
//! the weight span; PLS1 weights are orthonormal, so h does not depend on a rotation of the basis).
//!
//! Subsample b draws m rows without replacement from `rng::stream(seed, SUB_STREAM + b)` and refits
//! PLS1 with k components (`baselines::pls_fit`). The Politis–Romano root √m(θ̂_m − θ̂_n) estimates the
//! law of √n(θ̂_n − θ); the Python layer turns the replicates into intervals and z statistics.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::baselines::pls_fit;
use crate::inference::fit::Data;
use crate::rng;

/// Stream offset of the subsample draws.
pub const SUB_STREAM: u64 = 5 << 40;

/// β (p) and leverage (p) of a k-component PLS1 fit.
fn quantities(data: &Data<'_>, k: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let f = pls_fit(data, k)?;
    let lev = (0..data.p).map(|j| (0..k).map(|a| f.x_weights[j * k + a].powi(2)).sum()).collect();
    Ok((f.coef, lev))
}

/// Full-data β and leverage, and `n_sub` subsample replicates of each (row-major n_sub × p; NaN rows
/// where a subsample's fit degenerates, e.g. y constant on it).
pub struct Replicates {
    pub coef: Vec<f64>,
    pub leverage: Vec<f64>,
    pub coef_sub: Vec<f64>,
    pub leverage_sub: Vec<f64>,
}

pub fn subsample_replicates(
    data: &Data<'_>,
    k: usize,
    n_sub: usize,
    m: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Replicates> {
    let (n, p) = (data.n, data.p);
    if m < k + 2 || m >= n {
        return Err(ThriftyError::invalid("m_rate", format!("the subsample size {m} must be in [k + 2, n_samples)")));
    }
    if n_sub == 0 {
        return Err(ThriftyError::invalid("n_boot", "must be at least 1"));
    }
    crate::inference::splits::check_budget("n_boot", n_sub, 2 * p + m * (p + 1))?;
    let (coef, leverage) = quantities(data, k)?;
    let reps: Vec<(Vec<f64>, Vec<f64>)> = (0..n_sub)
        .into_par_iter()
        .map(|b| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            let mut r = rng::stream(seed, SUB_STREAM + b as u64);
            let mut idx: Vec<usize> = (0..n).collect();
            for i in 0..m {
                let pick = i + rng::below(&mut r, n - i);
                idx.swap(i, pick);
            }
            let rows = &idx[..m];
            let x: Vec<f64> = rows.iter().flat_map(|&i| data.x[i * p..(i + 1) * p].iter().copied()).collect();
            let y: Vec<f64> = rows.iter().map(|&i| data.y[i]).collect();
            let w: Option<Vec<f64>> = data.w.map(|w| rows.iter().map(|&i| w[i]).collect());
            let fitted = Data::new(&x, m, p, &y, w.as_deref()).and_then(|d| quantities(&d, k));
            match fitted {
                Ok(q) => Ok(q),
                Err(ThriftyError::InvalidArgument { .. }) => Ok((vec![f64::NAN; p], vec![f64::NAN; p])),
                Err(e) => Err(e),
            }
        })
        .collect::<Result<_>>()?;
    Ok(Replicates {
        coef,
        leverage,
        coef_sub: reps.iter().flat_map(|(c, _)| c.iter().copied()).collect(),
        leverage_sub: reps.iter().flat_map(|(_, l)| l.iter().copied()).collect(),
    })
}
