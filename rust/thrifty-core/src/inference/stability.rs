//! Resampling stability of the varimax axes of a PLS1 fit.
//!
//! The reference axes are the varimax rotation (Kaiser-normalised) of the PLS1 weights W (p×k) fitted
//! on all rows (standardised). Resample b draws its rows from its own stream: with
//! [`Resample::Bootstrap`] n rows with replacement from `rng::stream(seed, BOOT_STREAM + b)`, with
//! [`Resample::Subsample`] m rows without replacement (m-out-of-n) from `rng::stream(seed,
//! SUBSAMPLE_STREAM + b)`. It standardises them with their own moments, refits W, rotates it, and
//! matches its axes to the reference by the signed permutation that maximises the summed |Tucker
//! congruence| φ(a, b) = aᵀb / (‖a‖‖b‖) (all k! assignments, k ≤ [`MAX_K`]; a sign flip is free). The
//! congruence of every reference axis with its match is recorded, for the rotated axes and, for
//! comparison, for the unrotated weights matched the same way. φ ≥ 0.95 is usually read as "the same
//! axis", 0.85–0.94 as fair similarity (Lorenzo-Seva & ten Berge 2006).
//!
//! Each rayon task keeps one [`Scratch`] (the standardised rows and response) across its resamples,
//! so a resample allocates only the small p×k results.
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Result, ThriftyError};
use crate::inference::fit::{is_constant, nipals, Data};
use crate::inference::varimax::varimax;
use crate::rng;

/// Stream offset of the bootstrap draws.
pub const BOOT_STREAM: u64 = 3 << 40;
/// Stream offset of the m-out-of-n subsample draws.
pub const SUBSAMPLE_STREAM: u64 = 7 << 40;
/// Largest number of axes (the matching enumerates k! assignments).
pub const MAX_K: usize = 8;

/// How each resample draws its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resample {
    /// n rows with replacement.
    Bootstrap,
    /// m rows without replacement, k + 2 ≤ m ≤ n.
    Subsample { m: usize },
}

/// Per-resample congruences (`n_boot × k`, row-major) of the rotated axes and of the unrotated
/// weights, and the reference axes (p×k, row-major).
pub struct Stability {
    pub rotated: Vec<f64>,
    pub unrotated: Vec<f64>,
    pub axes: Vec<f64>,
    pub weights: Vec<f64>,
}

/// Buffers reused across the resamples of one rayon task.
#[derive(Default)]
struct Scratch {
    idx: Vec<usize>,
    x: Vec<f64>,
    y: Vec<f64>,
    mean: Vec<f64>,
    s2: Vec<f64>,
}

/// The rows `idx` of `data` (unweighted) standardised by their own moments into `s.x` (m×p) and the
/// standardised response into `s.y`; false when y is constant on them. Bit for bit
/// `prepare(data, idx, &[], true)` and `train_response` with unit weights. `Err` only when the
/// m×p copy cannot be allocated.
fn standardise(data: &Data<'_>, idx: &[usize], s: &mut Scratch) -> Result<bool> {
    let (p, m) = (data.p, idx.len());
    let inv = 1.0 / m as f64;
    let shift = &data.x[idx[0] * p..(idx[0] + 1) * p];
    s.mean.clear();
    s.mean.resize(p, 0.0);
    s.s2.clear();
    s.s2.resize(p, 0.0);
    for &i in idx {
        let row = &data.x[i * p..(i + 1) * p];
        for (((a1, a2), &v), &k) in s.mean.iter_mut().zip(s.s2.iter_mut()).zip(row).zip(shift) {
            let d = v - k;
            *a1 += d;
            *a2 += d * d;
        }
    }
    // mean and 1/scale in place (a constant column standardises to 0)
    for j in 0..p {
        let dm = s.mean[j] * inv;
        let mean = shift[j] + dm;
        let sd = (s.s2[j] * inv - dm * dm).max(0.0).sqrt();
        let scale = if is_constant(mean, sd) { f64::INFINITY } else { sd };
        s.mean[j] = mean;
        s.s2[j] = 1.0 / scale;
    }
    crate::alloc::try_refill("the standardised rows of a resample", &mut s.x, m * p, 0.0)?;
    for (a, &i) in idx.iter().enumerate() {
        let row = &data.x[i * p..(i + 1) * p];
        for (((o, &v), &mu), &is) in s.x[a * p..(a + 1) * p].iter_mut().zip(row).zip(&s.mean).zip(&s.s2) {
            *o = (v - mu) * is;
        }
    }
    let y = data.y;
    let my: f64 = idx.iter().map(|&i| y[i]).sum::<f64>() / m as f64;
    let ss: f64 = idx.iter().map(|&i| (y[i] - my).powi(2)).sum::<f64>() / m as f64;
    let sd = ss.sqrt();
    if is_constant(my, sd) {
        return Ok(false);
    }
    s.y.clear();
    s.y.extend(idx.iter().map(|&i| (y[i] - my) / sd));
    Ok(true)
}

/// PLS1 weights (p×k, row-major) on the rows `idx` of `data` and their varimax rotation.
fn axes_on(data: &Data<'_>, idx: &[usize], k: usize, s: &mut Scratch) -> Result<(Vec<f64>, Vec<f64>)> {
    let p = data.p;
    if !standardise(data, idx, s)? {
        return Err(ThriftyError::invalid("y", "is constant on a resample"));
    }
    let fit = nipals(&mut s.x, &mut s.y, idx.len(), p, k, false)?;
    let w: Vec<f64> = (0..p).flat_map(|i| fit.w.iter().map(move |c| c[i])).collect();
    let rot = varimax(&w, p, k, true, 500, 1e-10)?.rotated;
    Ok((w, rot))
}

/// |φ| of every (reference axis i, candidate axis j) pair.
fn congruence(a: &[f64], b: &[f64], p: usize, k: usize) -> Vec<f64> {
    let norm = |m: &[f64], j: usize| (0..p).map(|i| m[i * k + j].powi(2)).sum::<f64>().sqrt();
    let (na, nb): (Vec<f64>, Vec<f64>) = (0..k).map(|j| (norm(a, j), norm(b, j))).unzip();
    let mut c = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            let d: f64 = (0..p).map(|r| a[r * k + i] * b[r * k + j]).sum();
            let den = na[i] * nb[j];
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

/// The resampling stability study of k varimax axes.
pub fn rotation_stability(
    data: &Data<'_>,
    k: usize,
    n_boot: usize,
    resample: Resample,
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
    if let Resample::Subsample { m } = resample {
        if m < k + 2 || m > n {
            return Err(ThriftyError::invalid(
                "subsample_rate",
                format!("gives a subsample size m = {m} outside [n_components + 2, n_samples] = [{}, {n}]", k + 2),
            ));
        }
    }
    crate::inference::splits::check_budget("n_boot", n_boot, 2 * k + n)?;
    // far from the origin or at extreme scales: the exact shift and power-of-two rescaling every test
    // route uses (the result is blind to both; ordinary data are the caller's, bit for bit)
    let xs = crate::inference::route::power_of_two_scaled(data.x, n, p, true)?;
    let ys = crate::inference::route::power_of_two_scaled(data.y, n, 1, false)?;
    let data = &Data { x: &xs, y: &ys, ..*data };
    let all: Vec<usize> = (0..n).collect();
    let (w0, a0) = axes_on(data, &all, k, &mut Scratch::default())?;
    let per: Vec<(Vec<f64>, Vec<f64>)> = (0..n_boot)
        .into_par_iter()
        .map_init(Scratch::default, |s, b| {
            if cancel.load(Ordering::Relaxed) {
                return Err(ThriftyError::Interrupted);
            }
            let mut idx = std::mem::take(&mut s.idx);
            idx.clear();
            match resample {
                Resample::Bootstrap => {
                    let mut r = rng::stream(seed, BOOT_STREAM + b as u64);
                    idx.extend((0..n).map(|_| rng::below(&mut r, n)));
                }
                Resample::Subsample { m } => {
                    let mut r = rng::stream(seed, SUBSAMPLE_STREAM + b as u64);
                    idx.extend(0..n);
                    for i in 0..m {
                        let pick = i + rng::below(&mut r, n - i);
                        idx.swap(i, pick);
                    }
                    idx.truncate(m);
                }
            }
            let fitted = axes_on(data, &idx, k, s);
            s.idx = idx;
            match fitted {
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

    fn data(n: usize, p: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut r = rng::stream(seed, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) * 2.0 - 1.0 + 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * p] + x[i * p + p / 2] + 0.3 * rng::uniform(&mut r)).collect();
        (x, y)
    }

    #[test]
    fn standardise_is_prepare_bit_for_bit() {
        use crate::inference::fit::{prepare, train_response};
        let (n, p) = (40, 7);
        let (mut x, y) = data(n, p, 3);
        for i in 0..n {
            x[i * p + 4] = 2.5; // a constant column
        }
        let d = Data::new(&x, n, p, &y, None).unwrap();
        let mut r = rng::stream(1, 2);
        let mut s = Scratch::default();
        for idx in [(0..n).collect::<Vec<_>>(), (0..n).map(|_| rng::below(&mut r, n)).collect(), vec![5, 3, 9, 3, 30]] {
            assert!(standardise(&d, &idx, &mut s).unwrap());
            let prep = prepare(&d, &idx, &[], true).unwrap();
            let yt = train_response(&prep, &y).unwrap();
            assert_eq!(
                s.x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                prep.xs_tr.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            assert_eq!(
                s.y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                yt.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn subsample_draws_m_distinct_rows_and_validates_m() {
        let (n, p) = (60, 6);
        let (x, y) = data(n, p, 4);
        let d = Data::new(&x, n, p, &y, None).unwrap();
        let no = AtomicBool::new(false);
        let s = rotation_stability(&d, 2, 20, Resample::Subsample { m: 18 }, 7, &no).unwrap();
        assert_eq!(s.rotated.len(), 40);
        assert!(s.rotated.iter().all(|v| (0.0..=1.0 + 1e-12).contains(v)));
        // m = n draws every row: the resample is the full fit (up to the row order)
        let full = rotation_stability(&d, 2, 3, Resample::Subsample { m: n }, 7, &no).unwrap();
        assert!(full.rotated.iter().all(|v| (v - 1.0).abs() < 1e-9), "{:?}", full.rotated);
        for m in [3, n + 1] {
            let e = rotation_stability(&d, 2, 5, Resample::Subsample { m }, 7, &no).err().unwrap();
            assert!(e.to_string().contains("subsample_rate"), "{e}");
        }
    }

    /// Per-resample cost of each step at n = 300, p = 50, k = 3 (one thread):
    /// `cargo test --release -p thrifty-core -q profile_one_resample -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn profile_one_resample() {
        use crate::inference::fit::{prepare, train_response};
        use std::time::Instant;
        let (n, p, k, reps) = (300, 50, 3, 400);
        let (x, y) = data(n, p, 5);
        let d = Data::new(&x, n, p, &y, None).unwrap();
        let mut r = rng::stream(9, 0);
        let sub = std::env::var("PROFILE_M").ok().and_then(|v| v.parse::<usize>().ok());
        let boots: Vec<Vec<usize>> = (0..reps)
            .map(|_| match sub {
                None => (0..n).map(|_| rng::below(&mut r, n)).collect(),
                Some(m) => {
                    let mut idx: Vec<usize> = (0..n).collect();
                    for i in 0..m {
                        let pick = i + rng::below(&mut r, n - i);
                        idx.swap(i, pick);
                    }
                    idx.truncate(m);
                    idx
                }
            })
            .collect();
        let n = boots[0].len();
        println!("rows per resample: {n}");
        let mut s = Scratch::default();
        let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        let t = Instant::now();
        for idx in &boots {
            let prep = prepare(&d, idx, &[], true).unwrap();
            std::hint::black_box(train_response(&prep, &y));
        }
        let t_prep = us(t);
        let t = Instant::now();
        for idx in &boots {
            std::hint::black_box(standardise(&d, idx, &mut s).unwrap());
        }
        let t_std = us(t);
        let mut ws = vec![];
        let t = Instant::now();
        for idx in &boots {
            standardise(&d, idx, &mut s).unwrap();
            let fit = nipals(&mut s.x, &mut s.y, n, p, k, false).unwrap();
            ws.push((0..p).flat_map(|i| fit.w.iter().map(move |c| c[i])).collect::<Vec<f64>>());
        }
        let t_nip = us(t) - t_std;
        let t = Instant::now();
        let rots: Vec<Vec<f64>> = ws.iter().map(|w| varimax(w, p, k, true, 500, 1e-10).unwrap().rotated).collect();
        let t_var = us(t);
        let iters: usize = ws.iter().map(|w| varimax(w, p, k, true, 500, 1e-10).unwrap().n_iter).sum();
        println!("varimax iterations per resample: {:.1}", iters as f64 / reps as f64);
        let t = Instant::now();
        for w in &ws {
            std::hint::black_box(crate::inference::varimax::tests::varimax_faer(w, p, k, true, 500, 1e-10));
        }
        let t_var_old = us(t);
        let t = Instant::now();
        for (w, a) in ws.iter().zip(&rots) {
            std::hint::black_box((
                matched(&congruence(&rots[0], a, p, k), k),
                matched(&congruence(&ws[0], w, p, k), k),
            ));
        }
        let t_match = us(t);
        println!(
            "per resample (us): prepare+train_response {t_prep:.2} | standardise (scratch) {t_std:.2} | nipals {t_nip:.2} | \
             varimax {t_var:.2} (faer-SVD version {t_var_old:.2}) | congruence+matching {t_match:.2}"
        );
    }
}
