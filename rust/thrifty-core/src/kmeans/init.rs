//! Initial centres: greedy k-means++ with scikit-learn's semantics (2 + ⌊ln k⌋ local trials, weighted
//! sampling, the trial that lowers the potential most wins) and "random" (k distinct rows drawn with
//! probability ∝ sample weight). Distances come from the same tile kernel as the iterations.
use rayon::prelude::*;

use super::distance::{sq_norm, tile_partial_dists, Scratch, TILE};
use crate::rng::{uniform, Stream};
use crate::scalar::Real;

/// Greedy k-means++ seeding; returns k centre rows (row-major `k × d`).
pub fn kmeans_plusplus<T: Real>(
    x: &[T],
    d: usize,
    xx: &[f64],
    w: &[f64],
    k: usize,
    rng: &mut Stream,
) -> Vec<T> {
    let n = xx.len();
    let n_trials = 2 + (k as f64).ln().floor() as usize;
    let mut centers = Vec::with_capacity(k * d);

    let first = weighted_pick(w, w.iter().sum(), uniform(rng));
    centers.extend_from_slice(&x[first * d..(first + 1) * d]);
    let mut closest = dists_to_candidates(x, d, xx, &[first]);
    let mut weighted: Vec<f64> = closest.iter().zip(w).map(|(c, wi)| c * wi).collect();
    let mut pot: f64 = weighted.iter().sum();

    let mut cand = Vec::with_capacity(n_trials);
    for _ in 1..k {
        // Draw the trials by inverse CDF over w·D² (sklearn: searchsorted on the cumulative sum).
        cand.clear();
        // Once every point sits on a centre (fewer distinct points than k) draw by weight alone;
        // the caller warns about the duplicate centres.
        let (draw, total): (&[f64], f64) = if pot > 0.0 { (&weighted, pot) } else { (w, w.iter().sum()) };
        let mut targets: Vec<(f64, usize)> = (0..n_trials).map(|t| (uniform(rng) * total, t)).collect();
        targets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut picks = vec![n - 1; n_trials];
        let mut acc = 0.0;
        let mut ti = 0;
        for (i, &v) in draw.iter().enumerate() {
            acc += v;
            while ti < n_trials && targets[ti].0 < acc {
                picks[targets[ti].1] = i;
                ti += 1;
            }
            if ti == n_trials {
                break;
            }
        }
        cand.extend_from_slice(&picks);

        // Potential after adding each candidate; the lowest wins (first on ties, as numpy's argmin).
        let dists = dists_to_candidates(x, d, xx, &cand);
        let pots: Vec<f64> = (0..n_trials)
            .map(|t| dists.chunks_exact(n_trials).zip(&closest).zip(w).map(|((row, &c), wi)| wi * c.min(row[t])).sum())
            .collect();
        let best = (0..n_trials).fold(0, |b, t| if pots[t] < pots[b] { t } else { b });
        let chosen = cand[best];
        for ((c, row), (wv, wi)) in closest.iter_mut().zip(dists.chunks_exact(n_trials)).zip(weighted.iter_mut().zip(w)) {
            *c = c.min(row[best]);
            *wv = *c * wi;
        }
        pot = weighted.iter().sum();
        centers.extend_from_slice(&x[chosen * d..(chosen + 1) * d]);
    }
    centers
}

/// `k` distinct rows drawn with probability ∝ weight (sklearn's `init="random"`).
pub fn random_rows<T: Real>(x: &[T], d: usize, w: &[f64], k: usize, rng: &mut Stream) -> Vec<T> {
    let mut avail: Vec<f64> = w.to_vec();
    let mut total: f64 = avail.iter().sum();
    let mut centers = Vec::with_capacity(k * d);
    for _ in 0..k {
        let i = if total > 0.0 {
            weighted_pick(&avail, total, uniform(rng))
        } else {
            // Only zero-weight rows are left: take the first unused one.
            avail.iter().position(|&v| v >= 0.0).unwrap_or(0)
        };
        total -= avail[i];
        avail[i] = -1.0;
        if total < 0.0 {
            total = avail.iter().filter(|v| **v > 0.0).sum();
        }
        centers.extend_from_slice(&x[i * d..(i + 1) * d]);
    }
    centers
}

/// Index i with cumulative weight crossing `u·total` (u in [0,1)); negative weights mark used rows.
fn weighted_pick(w: &[f64], total: f64, u: f64) -> usize {
    let target = u * total;
    let mut acc = 0.0;
    let mut last = 0;
    for (i, &v) in w.iter().enumerate() {
        if v > 0.0 {
            acc += v;
            last = i;
            if target < acc {
                return i;
            }
        }
    }
    last
}

/// Squared distances from every row of `x` to the rows `cand` of `x`: row-major `n × cand.len()`.
fn dists_to_candidates<T: Real>(x: &[T], d: usize, xx: &[f64], cand: &[usize]) -> Vec<f64> {
    let m = cand.len();
    let mut cx = Vec::with_capacity(m * d);
    for &c in cand {
        cx.extend_from_slice(&x[c * d..(c + 1) * d]);
    }
    let cc: Vec<T> = cx.chunks_exact(d).map(|r| T::of(sq_norm(r))).collect();
    let n = xx.len();
    let mut out = vec![0.0f64; n * m];
    out.par_chunks_mut(TILE * m).enumerate().for_each_init(
        || Scratch::new(d, m),
        |s, (t, block)| {
            s.rows.clear();
            s.rows.extend(t * TILE..((t + 1) * TILE).min(n));
            tile_partial_dists(x, d, &cx, &cc, m, s);
            for (r, (o, v)) in block.chunks_exact_mut(m).zip(s.dots.chunks_exact(m)).enumerate() {
                for (o, v) in o.iter_mut().zip(v) {
                    *o = (xx[t * TILE + r] + v.as_f64()).max(0.0);
                }
            }
        },
    );
    out
}
