//! Initial centres: greedy k-means++ with scikit-learn's semantics (2 + ⌊ln k⌋ local trials, weighted
//! sampling, the trial that lowers the potential most wins) and "random" (k distinct rows drawn with
//! probability ∝ sample weight).
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::distance::{sq_dist, sq_norm, Scratch, TILE};
use super::matrix::Matrix;
use crate::error::{Result, ThriftyError};
use crate::rng::{uniform, Stream};
use crate::scalar::Real;

/// Greedy k-means++ seeding; returns k centre rows (row-major `k × d`).
///
/// Exact, but pruned with the triangle inequality (as in accelerated k-means++): points are kept in
/// lists by their nearest chosen centre c with the list's radius r_c = max ‖x − c‖. A candidate q
/// can only get closer to a point x of c than c is when ‖q − c‖ < 2‖x − c‖, so whole lists with
/// ‖q − c‖ ≥ 2 r_c are skipped, and so are points with ‖q − c‖ ≥ 2‖x − c‖ for every candidate;
/// the rest are evaluated with GEMM tiles. Sampling
/// ∝ w·D² walks the lists' potentials, then one list. Candidates are evaluated in parallel; every
/// sum runs in a fixed order, so the result does not depend on the thread count.
pub fn kmeans_plusplus<T: Real>(
    x: &Matrix<'_, T>,
    d: usize,
    xx: &[f64],
    w: &[f64],
    k: usize,
    rng: &mut Stream,
    cancel: &AtomicBool,
) -> Result<Vec<T>> {
    let n = w.len();
    let n_trials = 2 + (k as f64).ln().floor() as usize;
    let mut centers = Vec::with_capacity(k * d);
    let first = weighted_pick(w, w.iter().sum(), uniform(rng));
    x.push_row(first, d, &mut centers);
    let first_c: Vec<f64> = centers.iter().map(|v| v.as_f64()).collect();
    let mut closest: Vec<f64> = (0..n).into_par_iter().map(|i| x.dist2(i, d, xx[i], &first_c, xx[first])).collect();
    let mut owner = vec![0u32; n];
    let mut members: Vec<Vec<u32>> = vec![(0..n as u32).collect()];
    let mut list_pot: Vec<f64> = Vec::with_capacity(k);
    let mut radius: Vec<f64> = Vec::with_capacity(k);
    let stats = |mem: &[u32], closest: &[f64]| -> (f64, f64) {
        let pot = mem.iter().map(|&i| w[i as usize] * closest[i as usize]).sum();
        let r2 = mem.iter().fold(0.0f64, |m, &i| m.max(closest[i as usize]));
        (pot, r2.sqrt())
    };
    let (p0, r0) = stats(&members[0], &closest);
    list_pot.push(p0);
    radius.push(r0);

    for c in 1..k {
        if cancel.load(Ordering::Relaxed) {
            return Err(ThriftyError::Interrupted);
        }
        let total: f64 = list_pot.iter().sum();
        let cands: Vec<usize> = (0..n_trials)
            .map(|_| {
                let u = uniform(rng);
                if total > 0.0 {
                    pick_from_lists(&members, &list_pot, &closest, w, u * total)
                } else {
                    // Every point sits on a centre (fewer distinct points than k): draw by weight;
                    // the caller warns about the duplicate centres.
                    weighted_pick(w, w.iter().sum(), u)
                }
            })
            .collect();
        // For each candidate: the potential it removes and the points it would take over. Lists
        // are evaluated in parallel, each against the candidates its radius does not rule out,
        // with GEMM tiles; the per-list results are combined in list order.
        let mut cx_all: Vec<T> = Vec::with_capacity(n_trials * d);
        for &q in &cands {
            x.push_row(q, d, &mut cx_all);
        }
        // per list: the potential each candidate removes, and the (point, distance) pairs it takes over
        type ListGains = (Vec<f64>, Vec<Vec<(u32, f64)>>);
        let per_list: Vec<ListGains> = members
            .par_iter()
            .enumerate()
            .map_init(
                || Scratch::<T>::new(d, n_trials),
                |s, (j, mem)| {
                    let mut gains = vec![0.0; n_trials];
                    let mut taken = vec![Vec::new(); n_trials];
                    let cj = &centers[j * d..(j + 1) * d];
                    let dc2: Vec<f64> = (0..n_trials).map(|t| sq_dist(&cx_all[t * d..(t + 1) * d], cj)).collect();
                    let ok: Vec<usize> = (0..n_trials).filter(|&t| dc2[t] < 4.0 * radius[j] * radius[j]).collect();
                    if ok.is_empty() {
                        return (gains, taken);
                    }
                    // A point x of the list can only move to q when ‖q − c_j‖ < 2‖x − c_j‖.
                    let min_dc2 = ok.iter().map(|&t| dc2[t]).fold(f64::INFINITY, f64::min);
                    let cx: Vec<T> = ok.iter().flat_map(|&t| cx_all[t * d..(t + 1) * d].iter().copied()).collect();
                    let cc: Vec<T> = cx.chunks_exact(d).map(|r| T::of(sq_norm(r))).collect();
                    let m = ok.len();
                    let ct = x.transpose_centers(&cx, m, d);
                    let mut pending =
                        mem.iter().map(|&i| i as usize).filter(|&i| 4.0 * closest[i] > min_dc2).peekable();
                    while pending.peek().is_some() && !cancel.load(Ordering::Relaxed) {
                        s.rows.clear();
                        s.rows.extend(pending.by_ref().take(TILE));
                        x.tile_partial(d, &cx, &ct, &cc, m, s);
                        for (r, &i) in s.rows.iter().enumerate() {
                            let ci = closest[i];
                            for (q, &t) in ok.iter().enumerate() {
                                let nd = (xx[i] + s.dots[r * m + q].as_f64()).max(0.0);
                                if nd < ci {
                                    gains[t] += w[i] * (ci - nd);
                                    taken[t].push((i as u32, nd));
                                }
                            }
                        }
                    }
                    (gains, taken)
                },
            )
            .collect();
        let mut evals: Vec<(f64, Vec<(u32, f64)>)> = vec![(0.0, Vec::new()); n_trials];
        for (gains, taken) in per_list {
            for (t, (g, mut tk)) in gains.into_iter().zip(taken).enumerate() {
                evals[t].0 += g;
                evals[t].1.append(&mut tk);
            }
        }
        let best = (0..n_trials).fold(0, |b, t| if evals[t].0 > evals[b].0 { t } else { b });
        x.push_row(cands[best], d, &mut centers);
        let taken = &evals[best].1;
        let mut touched = vec![false; c];
        for &(i, nd) in taken {
            touched[owner[i as usize] as usize] = true;
            owner[i as usize] = c as u32;
            closest[i as usize] = nd;
        }
        for j in 0..c {
            if touched[j] {
                members[j].retain(|&i| owner[i as usize] == j as u32);
                (list_pot[j], radius[j]) = stats(&members[j], &closest);
            }
        }
        members.push(taken.iter().map(|&(i, _)| i).collect());
        let (pc, rc) = stats(&members[c], &closest);
        list_pot.push(pc);
        radius.push(rc);
    }
    Ok(centers)
}

/// The point where the cumulative w·D², walked list by list, crosses `target` (the last point with
/// positive mass when rounding leaves `target` at or past the total).
fn pick_from_lists(members: &[Vec<u32>], list_pot: &[f64], closest: &[f64], w: &[f64], target: f64) -> usize {
    let mass = |i: u32| w[i as usize] * closest[i as usize];
    let mut acc = 0.0;
    let mut last = None;
    for (j, (mem, &p)) in members.iter().zip(list_pot).enumerate() {
        if p <= 0.0 {
            continue;
        }
        last = Some(j);
        if target < acc + p {
            let mut inner = acc;
            for &i in mem {
                inner += mass(i);
                if target < inner && mass(i) > 0.0 {
                    return i as usize;
                }
            }
            return mem.iter().rev().find(|&&i| mass(i) > 0.0).map_or(0, |&i| i as usize);
        }
        acc += p;
    }
    last.and_then(|j| members[j].iter().rev().find(|&&i| mass(i) > 0.0)).map_or(0, |&i| i as usize)
}

/// `k` distinct rows drawn with probability ∝ weight (sklearn's `init="random"`).
pub fn random_rows<T: Real>(x: &Matrix<'_, T>, d: usize, w: &[f64], k: usize, rng: &mut Stream) -> Vec<T> {
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
        x.push_row(i, d, &mut centers);
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
