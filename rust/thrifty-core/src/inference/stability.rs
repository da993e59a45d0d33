//! Bootstrap stability of the varimax axes of a PLS1 fit.
//!
//! The reference axes are the varimax rotation (Kaiser-normalised) of the PLS1 weights W (p×k) fitted
//! on all rows (standardised). Bootstrap b draws n rows with replacement from `rng::stream(seed,
//! BOOT_STREAM + b)`, standardises them with their own moments, refits W, rotates it, and matches its
//! axes to the reference by the signed permutation that maximises the summed |Tucker congruence|
//! φ(a, b) = aᵀb / (‖a‖‖b‖) (all k! assignments, k ≤ [`MAX_K`]; a sign flip is free). The congruence
//! of every reference axis with its match is recorded, for the rotated axes and, for comparison, for the
//! unrotated weights matched the same way. φ ≥ 0.95 is usually read as "the same axis", 0.85–0.94 as
//! fair similarity (Lorenzo-Seva & ten Berge 2006).
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{nipals, prepare, train_response, Data};
use crate::inference::varimax::varimax;
use crate::rng;

/// Stream offset of the bootstrap draws.
pub const BOOT_STREAM: u64 = 3 << 40;
/// Largest number of axes (the matching enumerates k! assignments).
pub const MAX_K: usize = 8;

/// Per-bootstrap congruences (`n_boot × k`, row-major) of the rotated axes and of the unrotated
/// weights, and the reference axes (p×k, row-major).
pub struct Stability {
    pub rotated: Vec<f64>,
    pub unrotated: Vec<f64>,
    pub axes: Vec<f64>,
    pub weights: Vec<f64>,
}

/// PLS1 weights (p×k, row-major) on the rows `idx` of `data` and their varimax rotation.
fn axes_on(data: &Data<'_>, idx: &[usize], k: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let p = data.p;
    let mut prep = prepare(data, idx, &[], true);
    let mut y = train_response(&prep, data.y).ok_or_else(|| ThriftyError::invalid("y", "is constant on a resample"))?;
    let mut x = std::mem::take(&mut prep.xs_tr);
    let fit = nipals(&mut x, &mut y, idx.len(), p, k, false)?;
    let w: Vec<f64> = (0..p).flat_map(|i| fit.w.iter().map(move |c| c[i])).collect();
    let rot = varimax(&w, p, k, true, 500, 1e-10)?.rotated;
    Ok((w, rot))
}

/// |φ| of every (reference axis i, candidate axis j) pair.
fn congruence(a: &[f64], b: &[f64], p: usize, k: usize) -> Vec<f64> {
    let norm = |m: &[f64], j: usize| (0..p).map(|i| m[i * k + j].powi(2)).sum::<f64>().sqrt();
    let mut c = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            let d: f64 = (0..p).map(|r| a[r * k + i] * b[r * k + j]).sum();
            let den = norm(a, i) * norm(b, j);
            c[i * k + j] = if den > 0.0 { (d / den).abs() } else { 0.0 };
        }
    }
    c
}

/// The congruence of each reference axis with its match under the best assignment (by exhaustive search).
pub fn matched(c: &[f64], k: usize) -> Vec<f64> {
    fn search(c: &[f64], k: usize, row: usize, used: &mut [bool], cur: &mut Vec<usize>, best: &mut (f64, Vec<usize>)) {
        if row == k {
            let s: f64 = cur.iter().enumerate().map(|(i, &j)| c[i * k + j]).sum();
            if s > best.0 {
                *best = (s, cur.clone());
            }
            return;
        }
        for j in 0..k {
            if !used[j] {
                used[j] = true;
                cur.push(j);
                search(c, k, row + 1, used, cur, best);
                cur.pop();
                used[j] = false;
            }
        }
    }
    let mut best = (f64::NEG_INFINITY, (0..k).collect::<Vec<_>>());
    search(c, k, 0, &mut vec![false; k], &mut Vec::with_capacity(k), &mut best);
    best.1.iter().enumerate().map(|(i, &j)| c[i * k + j]).collect()
}

/// The bootstrap stability study of k varimax axes.
pub fn rotation_stability(
    data: &Data<'_>,
    k: usize,
    n_boot: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Stability> {
    let (n, p) = (data.n, data.p);
    if k < 2 || k > MAX_K.min(p) || k + 2 > n {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [2, min({MAX_K}, n_features, n_samples - 2)], got {k}"),
        ));
    }
    if n_boot == 0 {
        return Err(ThriftyError::invalid("n_boot", "must be at least 1"));
    }
    crate::inference::splits::check_budget("n_boot", n_boot, 2 * k + n)?;
    let all: Vec<usize> = (0..n).collect();
    let (w0, a0) = axes_on(data, &all, k)?;
    let per: Vec<(Vec<f64>, Vec<f64>)> = (0..n_boot)
        .into_par_iter()
        .map(|b| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            let mut r = rng::stream(seed, BOOT_STREAM + b as u64);
            let idx: Vec<usize> = (0..n).map(|_| rng::below(&mut r, n)).collect();
            match axes_on(data, &idx, k) {
                Ok((w, a)) => Ok((matched(&congruence(&a0, &a, p, k), k), matched(&congruence(&w0, &w, p, k), k))),
                // a resample where the fit degenerates (repeated rows, rank below k) counts as unmatched
                Err(ThriftyError::InvalidArgument { .. }) => Ok((vec![f64::NAN; k], vec![f64::NAN; k])),
                Err(e) => Err(e),
            }
        })
        .collect::<Result<_>>()?;
    Ok(Stability {
        rotated: per.iter().flat_map(|(a, _)| a.iter().copied()).collect(),
        unrotated: per.iter().flat_map(|(_, w)| w.iter().copied()).collect(),
        axes: a0,
        weights: w0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_finds_the_permutation() {
        // reference axis 0 matches candidate 2, 1 ↔ 0, 2 ↔ 1
        let c = vec![0.1, 0.2, 0.9, 0.8, 0.1, 0.3, 0.2, 0.95, 0.1];
        assert_eq!(matched(&c, 3), vec![0.9, 0.8, 0.95]);
    }

    #[test]
    fn congruence_is_sign_free_and_one_for_the_same_axes() {
        let a = vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let b = vec![0.0, 1.0, -1.0, 0.0, -1.0, 1.0]; // columns -a1 and a0
        let m = matched(&congruence(&a, &b, 3, 2), 2);
        assert!(m.iter().all(|v| (v - 1.0).abs() < 1e-12));
    }
}
