//! Per-block kernels of the blocked (scale-out) k-means: every function reads one logical block of
//! rows, sequentially and in row order, and returns small per-block totals that the driver combines
//! with one fixed pairwise tree. The same kernels run on one machine and on Dask workers, so a fixed
//! seed gives bit-identical results on any number of workers (see `docs/scale.md`).
//!
//! - k-means‖ ([`kpar_update`], [`kpar_sample`]): distance to the nearest candidate per row, the block's
//!   cost and per-candidate weights; Bernoulli sampling with the block's own stream `(seed, round, block)`.
//! - Lloyd ([`lloyd_block`]): Hamerly bounds (two floats per row) carried between iterations, one GEMM
//!   tile for the rows the bounds do not certify; per-cluster counts, sums and Σ‖x‖².
//! - Hartigan ([`hartigan_block`]): applies the moves the driver accepted, scores every row's best
//!   Hartigan move against the round's centres and returns per-(from, to, gain bucket) totals.
//!
//! Every kernel takes optional sample weights `w` (one per row of the block, finite, >= 0). Counts
//! become weight sums, sums and squared distances are weighted, k-means‖ samples row i with
//! probability min(1, ℓ·w_i·D_i²/φ), and Hartigan's size factors are `W_j/(W_j ± w_i)`. A zero-weight
//! row adds nothing to any total (it never moves a centre) and is labelled with its nearest centre.
//! Without weights the unit-weight arithmetic is the one of the unweighted kernels, bit for bit.
use std::collections::BTreeMap;

use super::distance::{gemm_slack, small_d_centers, sq_dist_f64, sq_norm, tile_partial_dists, top2, Scratch, TILE};
use crate::error::{Result, ThriftyError};
use crate::rng::{stream, uniform};
use crate::scalar::Real;

/// Relative margin a Hartigan move must clear to be proposed (no cycling on rounding ties).
pub const MOVE_MARGIN: f64 = 1e-12;

fn check_block<T: Real>(x: &[T], n: usize, d: usize) -> Result<()> {
    if d == 0 || x.len() != n * d {
        return Err(ThriftyError::shape("X", format!("block has {} values, expected {n} x {d}", x.len())));
    }
    Ok(())
}

/// The block's weights: `n` finite non-negative values (`None`: unit weights).
fn check_weights(w: Option<&[f64]>, n: usize) -> Result<()> {
    if let Some(w) = w {
        if w.len() != n {
            return Err(ThriftyError::shape("sample_weight", format!("block has {} weights, expected {n}", w.len())));
        }
        if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(ThriftyError::invalid(
                "sample_weight",
                format!("must be finite and non-negative (row {i} of this block)"),
            ));
        }
    }
    Ok(())
}

/// Weight of row i (1 without weights).
#[inline]
fn weight(w: Option<&[f64]>, i: usize) -> f64 {
    w.map_or(1.0, |w| w[i])
}

fn not_finite(row: usize) -> ThriftyError {
    ThriftyError::invalid("X", format!("contains NaN or infinity (row {row} of this block)"))
}

/// The random stream of `(seed, round, block)`: one ChaCha stream per key, whatever the scheduling.
pub fn block_stream(seed: u64, round: u64, block: u64) -> crate::rng::Stream {
    stream(seed, (round << 40) ^ block)
}

/// k-means‖ bookkeeping for one block: fold the new candidates `cands` (`m × d`, numbered from
/// `offset`) into each row's nearest-candidate distance `closest` and index `owner` (updated in
/// place: the caller passes copies). Returns the block's cost Σ closest and the number of rows whose
/// nearest candidate is each of the `total` candidates (the k-means‖ weights). Errors on a non-finite
/// row (checked when `offset == 0`, the first pass over the block). With weights `w` the cost is
/// Σ w·closest and the counts are weight sums.
#[allow(clippy::too_many_arguments)]
pub fn kpar_update<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    w: Option<&[f64]>,
    closest: &mut [f64],
    owner: &mut [u32],
    cands: &[f64],
    offset: usize,
    total: usize,
) -> Result<(f64, Vec<f64>)> {
    check_block(x, n, d)?;
    check_weights(w, n)?;
    if closest.len() != n || owner.len() != n || !cands.len().is_multiple_of(d) || offset + cands.len() / d > total {
        return Err(ThriftyError::shape("state", "block state does not match the block"));
    }
    let mut cost = 0.0;
    let mut counts = vec![0.0; total];
    for i in 0..n {
        let row = &x[i * d..(i + 1) * d];
        if offset == 0 && !row.iter().all(|v| v.is_finite()) {
            return Err(not_finite(i));
        }
        for (q, c) in cands.chunks_exact(d).enumerate() {
            let v = sq_dist_f64(row, c);
            if v < closest[i] {
                closest[i] = v;
                owner[i] = (offset + q) as u32;
            }
        }
        match w {
            None => {
                cost += closest[i];
                counts[owner[i] as usize] += 1.0;
            }
            Some(w) => {
                cost += w[i] * closest[i];
                counts[owner[i] as usize] += w[i];
            }
        }
    }
    Ok((cost, counts))
}

/// k-means‖ sampling for one block: row i is kept with probability min(1, ℓ·closest_i/φ), with
/// uniforms from the block's stream `(seed, round, block)` drawn one per row in order. Returns the
/// kept row indices (ascending). With weights `w` the probability is min(1, ℓ·w_i·closest_i/φ).
pub fn kpar_sample(
    closest: &[f64],
    w: Option<&[f64]>,
    phi: f64,
    ell: f64,
    seed: u64,
    round: u64,
    block: u64,
) -> Result<Vec<u32>> {
    check_weights(w, closest.len())?;
    let mut rng = block_stream(seed, round, block);
    let mut kept = Vec::new();
    for (i, &c) in closest.iter().enumerate() {
        let u = uniform(&mut rng);
        let c = match w {
            None => c,
            Some(w) => w[i] * c,
        };
        let p = if phi > 0.0 { (ell * c / phi).min(1.0) } else { 0.0 };
        if u < p {
            kept.push(i as u32);
        }
    }
    Ok(kept)
}

/// Centres in the data type with their squared norms, for the GEMM tiles.
fn typed_centers<T: Real>(centers: &[f64], d: usize) -> (Vec<T>, Vec<T>, f64) {
    let ct: Vec<T> = centers.iter().map(|&v| T::of(v)).collect();
    let cc: Vec<T> = ct.chunks_exact(d).map(|r| T::of(sq_norm(r))).collect();
    let cc_max = cc.iter().fold(0.0f64, |m, v| m.max(v.as_f64()));
    (ct, cc, cc_max)
}

/// Per-block totals of a Lloyd step, laid out flat so that the reduction tree is an element-wise sum:
/// `[counts (k) | sums (k·d) | Σ‖x − c_j‖² per cluster against the step's centres (k) | changed
/// labels | distance rows computed]` (exact, so the SSE needs no cancelling Σ‖x‖² − ‖S‖²/n). With
/// weights, counts are weight sums and sums and distances are weighted; the first (`fresh`) step then
/// appends the unweighted `[counts (k) | sums (k·d) | Σ‖x − c_j‖² (k)]` (scikit-learn's tolerance is
/// the unweighted per-feature variance).
pub fn lloyd_partial_len(k: usize, d: usize) -> usize {
    k * (d + 2) + 2
}

/// Adds each row's weight, weighted coordinates and weighted squared distance to its centre into
/// `part` (`[counts (k) | sums (k·d) | Σ w‖x − c_j‖² (k)]`).
fn accumulate_clusters<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    w: Option<&[f64]>,
    centers: &[f64],
    part: &mut [f64],
) {
    let k = centers.len() / d;
    for (i, row) in x.chunks_exact(d).enumerate() {
        let j = labels[i] as usize;
        let dist = sq_dist_f64(row, &centers[j * d..(j + 1) * d]);
        match w {
            None => {
                part[j] += 1.0;
                for (s, v) in part[k + j * d..k + (j + 1) * d].iter_mut().zip(row) {
                    *s += v.as_f64();
                }
                part[k + k * d + j] += dist;
            }
            Some(w) => {
                let wi = w[i];
                part[j] += wi;
                for (s, v) in part[k + j * d..k + (j + 1) * d].iter_mut().zip(row) {
                    *s += wi * v.as_f64();
                }
                part[k + k * d + j] += wi * dist;
            }
        }
    }
}

/// One Lloyd step on one block with Hamerly bounds. `labels`, `upper`, `lower` are the block's state
/// (updated in place: the caller passes copies); with `fresh` they are ignored and every row gets a
/// distance row. `drift[j]` = ‖c_j(now) − c_j(previous step)‖, `half_sep[j]` = half the distance
/// from c_j to its nearest other centre. Rows whose bounds certify their label are skipped; the
/// others get one GEMM tile against all centres (ties → lowest index), their upper bound the exact
/// distance and their lower bound the second-nearest distance less the GEMM rounding slack.
#[allow(clippy::too_many_arguments)]
pub fn lloyd_block<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    w: Option<&[f64]>,
    labels: &mut [u32],
    upper: &mut [f64],
    lower: &mut [f64],
    centers: &[f64],
    drift: &[f64],
    half_sep: &[f64],
    fresh: bool,
) -> Result<Vec<f64>> {
    check_block(x, n, d)?;
    let k = centers.len() / d;
    if k == 0 || centers.len() != k * d || drift.len() != k || half_sep.len() != k {
        return Err(ThriftyError::shape("cluster_centers", "centres, drift and separations disagree"));
    }
    if labels.len() != n || upper.len() != n || lower.len() != n {
        return Err(ThriftyError::shape("state", "block state does not match the block"));
    }
    check_weights(w, n)?;
    // Largest drift among the centres other than a: the top two drifts.
    let mut top = (usize::MAX, 0.0f64, 0.0f64);
    for (j, &v) in drift.iter().enumerate() {
        if v > top.1 {
            top = (j, v, top.1);
        } else if v > top.2 {
            top.2 = v;
        }
    }
    let (ct, cc, cc_max) = typed_centers::<T>(centers, d);
    let unweighted_tail = fresh && w.is_some();
    let mut part = vec![0.0; lloyd_partial_len(k, d) + if unweighted_tail { k * (d + 2) } else { 0 }];
    let tr = small_d_centers(&ct, k, d);
    let mut scratch = Scratch::<T>::new(d, k);
    let mut xx_tile = Vec::with_capacity(TILE);
    let (mut changed, mut computed) = (0usize, 0usize);
    for t0 in (0..n).step_by(TILE) {
        let t1 = (t0 + TILE).min(n);
        scratch.rows.clear();
        xx_tile.clear();
        for i in t0..t1 {
            let row = &x[i * d..(i + 1) * d];
            if fresh {
                if !row.iter().all(|v| v.is_finite()) {
                    return Err(not_finite(i));
                }
                scratch.rows.push(i);
                continue;
            }
            let a = labels[i] as usize;
            let u = upper[i] + drift[a];
            let l = lower[i] - if a == top.0 { top.2 } else { top.1 };
            let bound = l.max(half_sep[a]);
            if u <= bound {
                upper[i] = u;
                lower[i] = l;
                continue;
            }
            let u = sq_dist_f64(row, &centers[a * d..(a + 1) * d]).sqrt();
            upper[i] = u;
            lower[i] = l;
            if u <= bound {
                continue;
            }
            scratch.rows.push(i);
        }
        if !scratch.rows.is_empty() {
            computed += scratch.rows.len();
            for &i in &scratch.rows {
                xx_tile.push(sq_norm(&x[i * d..(i + 1) * d]));
            }
            tile_partial_dists(x, d, &ct, &tr, &cc, k, &mut scratch);
            for (r, &i) in scratch.rows.iter().enumerate() {
                let xx = xx_tile[r];
                let (j1, _p1, p2) = top2(&mut scratch.dots[r * k..(r + 1) * k]);
                let row = &x[i * d..(i + 1) * d];
                if !fresh && labels[i] as usize != j1 {
                    changed += 1;
                }
                labels[i] = j1 as u32;
                upper[i] = sq_dist_f64(row, &centers[j1 * d..(j1 + 1) * d]).sqrt();
                let slack = gemm_slack::<T>(xx, cc_max, d);
                lower[i] = if k > 1 { (xx + p2.as_f64() - slack).max(0.0).sqrt() } else { f64::INFINITY };
            }
        }
    }
    if fresh {
        changed = n;
    }
    let (head, tail) = part.split_at_mut(lloyd_partial_len(k, d));
    accumulate_clusters(&x[..n * d], d, labels, w, centers, head);
    if unweighted_tail {
        accumulate_clusters(&x[..n * d], d, labels, None, centers, tail);
    }
    part[k * (d + 2)] = changed as f64;
    part[k * (d + 2) + 1] = computed as f64;
    Ok(part)
}

/// Gain bucket of a proposed move with single-move SSE change `delta` < 0: ⌊log2(scale/−delta)⌋,
/// clamped to `[0, n_buckets)` (bucket 0 = the largest gains).
#[inline]
pub fn gain_bucket(delta: f64, scale: f64, n_buckets: u32) -> u32 {
    let q = (scale / -delta).log2().floor();
    if q.is_nan() || q < 0.0 {
        0
    } else {
        (q as u64).min(n_buckets as u64 - 1) as u32
    }
}

/// Key of a (from, to, bucket) class of moves: sorts by bucket first (largest gains first), then by
/// from and to.
#[inline]
pub fn move_key(from: u32, to: u32, bucket: u32, k: usize) -> u64 {
    (bucket as u64 * k as u64 + from as u64) * k as u64 + to as u64
}

/// What one block returns from a Hartigan round.
pub struct HartiganPartial {
    /// `[counts (k) | sums (k·d) | Σ‖x − c_label‖² against the round's centres | proposed moves]`.
    pub flat: Vec<f64>,
    /// Sorted keys ([`move_key`]) of the proposed moves' classes.
    pub keys: Vec<u64>,
    /// Per key: `[count, Σ(d_to² − d_from²), Σx (d)]` (weighted: `[Σw, Σw(d_to² − d_from²), Σwx]`).
    pub values: Vec<f64>,
    /// Best single proposal of the block: (ΔSSE, row, from, to, the row's weight); ΔSSE = +∞ when none.
    pub best: (f64, u32, u32, u32, f64),
}

/// One round of the blocked Hartigan on one block (state updated in place: the caller passes copies).
///
/// 1. Apply the accepted moves: a row whose proposal from the previous round (`prop_to`, `prop_bucket`
///    with its label) has its key in `accepted` (sorted), or whose index is `single`, moves.
/// 2. Score every row against `centers` (the means after those moves) and `sizes` (cluster sizes
///    after them): removal gain g = n_a/(n_a−1)·d_a² (∞ for a singleton), best target
///    b = argmin_{j≠a} n_j/(n_j+1)·d_j²; propose a → b when Δ = n_b/(n_b+1)·d_b² − g < −margin·g,
///    bucketed by `gain_bucket(Δ, scale)`.
/// 3. Return the block's totals (see [`HartiganPartial`]); d² of the chosen pair are exact.
///
/// With weights `w`, `sizes` are the clusters' weights W and row i's factors are `W_a/(W_a − w_i)`
/// (∞ when nothing else weighs in a) and `W_j/(W_j + w_i)`, the gain and cost are multiplied by w_i;
/// a zero-weight row proposes nothing and takes its nearest centre's label.
#[allow(clippy::too_many_arguments)]
pub fn hartigan_block<T: Real>(
    x: &[T],
    n: usize,
    d: usize,
    w: Option<&[f64]>,
    labels: &mut [u32],
    prop_to: &mut [i32],
    prop_bucket: &mut [u8],
    accepted: &[u64],
    single: i64,
    centers: &[f64],
    sizes: &[f64],
    scale: f64,
    n_buckets: u32,
) -> Result<HartiganPartial> {
    check_block(x, n, d)?;
    let k = centers.len() / d;
    if k == 0 || centers.len() != k * d || sizes.len() != k {
        return Err(ThriftyError::shape("cluster_centers", "centres and sizes disagree"));
    }
    if labels.len() != n || prop_to.len() != n || prop_bucket.len() != n {
        return Err(ThriftyError::shape("state", "block state does not match the block"));
    }
    if n_buckets == 0 || n_buckets > 255 {
        return Err(ThriftyError::invalid("n_buckets", "must be in [1, 255]"));
    }
    check_weights(w, n)?;
    for i in 0..n {
        let b = prop_to[i];
        if b >= 0 {
            let key = move_key(labels[i], b as u32, prop_bucket[i] as u32, k);
            if accepted.binary_search(&key).is_ok() || single == i as i64 {
                labels[i] = b as u32;
            }
        }
        prop_to[i] = -1;
    }
    let join: Vec<f64> = sizes.iter().map(|&s| s / (s + 1.0)).collect();
    let leave: Vec<f64> = sizes.iter().map(|&s| if s > 1.0 { s / (s - 1.0) } else { f64::INFINITY }).collect();
    let (ct, cc, _) = typed_centers::<T>(centers, d);
    let mut flat = vec![0.0; k * (d + 1) + 2];
    let mut classes: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let mut best = (f64::INFINITY, 0u32, 0u32, 0u32, 0.0);
    let tr = small_d_centers(&ct, k, d);
    let mut scratch = Scratch::<T>::new(d, k);
    let mut proposed = 0usize;
    for t0 in (0..n).step_by(TILE) {
        let t1 = (t0 + TILE).min(n);
        scratch.rows.clear();
        scratch.rows.extend(t0..t1);
        tile_partial_dists(x, d, &ct, &tr, &cc, k, &mut scratch);
        for (r, i) in (t0..t1).enumerate() {
            let row = &x[i * d..(i + 1) * d];
            let dots = &scratch.dots[r * k..(r + 1) * k];
            let wi = weight(w, i);
            if wi == 0.0 {
                // Weightless: adds nothing anywhere; labelled by its nearest centre (GEMM, ties low).
                let mut near = (0usize, f64::INFINITY);
                for (j, p) in dots.iter().enumerate() {
                    if p.as_f64() < near.1 {
                        near = (j, p.as_f64());
                    }
                }
                labels[i] = near.0 as u32;
                continue;
            }
            let a = labels[i] as usize;
            let da2 = sq_dist_f64(row, &centers[a * d..(a + 1) * d]);
            let (g, factor) = match w {
                None => {
                    flat[a] += 1.0;
                    for (s, v) in flat[k + a * d..k + (a + 1) * d].iter_mut().zip(row) {
                        *s += v.as_f64();
                    }
                    flat[k * (d + 1)] += da2;
                    (leave[a] * da2, None)
                }
                Some(_) => {
                    flat[a] += wi;
                    for (s, v) in flat[k + a * d..k + (a + 1) * d].iter_mut().zip(row) {
                        *s += wi * v.as_f64();
                    }
                    flat[k * (d + 1)] += wi * da2;
                    let rest = sizes[a] - wi;
                    let leave_a = if rest > 0.0 { sizes[a] / rest } else { f64::INFINITY };
                    (wi * leave_a * da2, Some(wi))
                }
            };
            if !g.is_finite() || k < 2 {
                continue;
            }
            let join_at = |j: usize| match factor {
                None => join[j],
                Some(wi) => sizes[j] / (sizes[j] + wi),
            };
            // Best target by the GEMM distances (approximate), then exact distances for the decision.
            let xx = sq_norm(row);
            let mut bt = (usize::MAX, f64::INFINITY);
            for (j, p) in dots.iter().enumerate() {
                if j != a {
                    let c = join_at(j) * (xx + p.as_f64()).max(0.0);
                    if c < bt.1 {
                        bt = (j, c);
                    }
                }
            }
            let b = bt.0;
            let db2 = sq_dist_f64(row, &centers[b * d..(b + 1) * d]);
            let delta = match factor {
                None => join[b] * db2 - g,
                Some(wi) => wi * join_at(b) * db2 - g,
            };
            if delta < -MOVE_MARGIN * g {
                let q = gain_bucket(delta, scale, n_buckets);
                prop_to[i] = b as i32;
                prop_bucket[i] = q as u8;
                proposed += 1;
                let v = classes.entry(move_key(a as u32, b as u32, q, k)).or_insert_with(|| vec![0.0; d + 2]);
                match factor {
                    None => {
                        v[0] += 1.0;
                        v[1] += db2 - da2;
                        for (s, xv) in v[2..].iter_mut().zip(row) {
                            *s += xv.as_f64();
                        }
                    }
                    Some(wi) => {
                        v[0] += wi;
                        v[1] += wi * (db2 - da2);
                        for (s, xv) in v[2..].iter_mut().zip(row) {
                            *s += wi * xv.as_f64();
                        }
                    }
                }
                if delta < best.0 {
                    best = (delta, i as u32, a as u32, b as u32, wi);
                }
            }
        }
    }
    flat[k * (d + 1) + 1] = proposed as f64;
    let keys: Vec<u64> = classes.keys().copied().collect();
    let values: Vec<f64> = classes.into_values().flatten().collect();
    Ok(HartiganPartial { flat, keys, values, best })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SSE change that accepting every class of `keys`/`values` predicts (the identity's terms).
    fn predicted_change(keys: &[u64], values: &[f64], k: usize, d: usize, m: &[f64], c: &[f64]) -> f64 {
        let mut dn = vec![0.0; k];
        let mut din = vec![0.0; k * d];
        let mut pair = 0.0;
        for (e, &key) in keys.iter().enumerate() {
            let v = &values[e * (d + 2)..(e + 1) * (d + 2)];
            let (from, to) = (((key / k as u64) % k as u64) as usize, (key % k as u64) as usize);
            dn[from] -= v[0];
            dn[to] += v[0];
            pair += v[1];
            for l in 0..d {
                din[from * d + l] -= v[2 + l];
                din[to * d + l] += v[2 + l];
            }
        }
        let mut predicted = pair;
        for j in 0..k {
            let dv: f64 = (0..d).map(|l| (din[j * d + l] - dn[j] * m[j * d + l]).powi(2)).sum();
            predicted -= dv / (c[j] + dn[j]);
        }
        predicted
    }

    fn data(n: usize, d: usize, seed: u64) -> Vec<f64> {
        let mut rng = stream(seed, 0);
        (0..n * d).map(|i| uniform(&mut rng) * 4.0 + (i / d % 3) as f64 * 5.0).collect()
    }

    #[test]
    fn lloyd_block_matches_brute_force_and_bounds_skip_work() {
        let (n, d, k) = (700, 3, 4);
        let x = data(n, d, 1);
        let c0: Vec<f64> = x[..k * d].to_vec();
        let (mut lab, mut up, mut lo) = (vec![0u32; n], vec![0.0; n], vec![0.0; n]);
        let zero = vec![0.0; k];
        let part = lloyd_block(&x, n, d, None, &mut lab, &mut up, &mut lo, &c0, &zero, &zero, true).unwrap();
        for i in 0..n {
            let dist: Vec<f64> = (0..k).map(|j| sq_dist_f64(&x[i * d..(i + 1) * d], &c0[j * d..(j + 1) * d])).collect();
            let m = dist.iter().cloned().fold(f64::INFINITY, f64::min);
            assert!(dist[lab[i] as usize] <= m * (1.0 + 1e-12) + 1e-12);
        }
        assert_eq!(part[..k].iter().sum::<f64>(), n as f64);
        // Same centres again: every row is certified (drift 0), labels unchanged.
        let sep: Vec<f64> = (0..k)
            .map(|j| {
                (0..k)
                    .filter(|&o| o != j)
                    .map(|o| sq_dist_f64(&c0[j * d..(j + 1) * d], &c0[o * d..(o + 1) * d]).sqrt() / 2.0)
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let lab0 = lab.clone();
        let part2 = lloyd_block(&x, n, d, None, &mut lab, &mut up, &mut lo, &c0, &zero, &sep, false).unwrap();
        assert_eq!(lab, lab0);
        assert_eq!(part2[k * (d + 2)], 0.0);
        assert_eq!(&part2[..k * (d + 2)], &part[..k * (d + 2)]);
    }

    #[test]
    fn kpar_sampling_is_keyed_and_rejects_nan() {
        let a = kpar_sample(&[1.0; 100], None, 100.0, 30.0, 7, 2, 5).unwrap();
        assert_eq!(a, kpar_sample(&[1.0; 100], None, 100.0, 30.0, 7, 2, 5).unwrap());
        assert_ne!(a, kpar_sample(&[1.0; 100], None, 100.0, 30.0, 7, 2, 6).unwrap());
        assert!(a.len() > 10 && a.len() < 55);
        let mut x = data(10, 2, 3);
        x[7] = f64::NAN;
        let (mut cl, mut ow) = (vec![f64::INFINITY; 10], vec![0u32; 10]);
        assert!(kpar_update(&x, 10, 2, None, &mut cl, &mut ow, &[0.0, 0.0], 0, 1).is_err());
    }

    #[test]
    fn hartigan_totals_give_the_exact_sse_change() {
        let (n, d, k) = (300, 2, 3);
        let x = data(n, d, 9);
        let mut lab: Vec<u32> = (0..n as u64).map(|i| ((i * 2654435761) >> 7) as u32 % 3).collect();
        let means = |lab: &[u32]| -> (Vec<f64>, Vec<f64>) {
            let mut s = vec![0.0; k * d];
            let mut c = vec![0.0; k];
            for i in 0..n {
                let j = lab[i] as usize;
                c[j] += 1.0;
                for l in 0..d {
                    s[j * d + l] += x[i * d + l];
                }
            }
            (s.iter().enumerate().map(|(e, v)| v / c[e / d]).collect(), c)
        };
        let sse = |lab: &[u32]| -> f64 {
            let (m, _) = means(lab);
            (0..n)
                .map(|i| sq_dist_f64(&x[i * d..(i + 1) * d], &m[lab[i] as usize * d..(lab[i] as usize + 1) * d]))
                .sum()
        };
        let (m, c) = means(&lab);
        let (mut pt, mut pb) = (vec![-1i32; n], vec![0u8; n]);
        let out = hartigan_block(&x, n, d, None, &mut lab, &mut pt, &mut pb, &[], -1, &m, &c, 1.0, 16).unwrap();
        assert!(!out.keys.is_empty());
        // Accept every class: the exact change from the identity equals the recomputed change.
        let predicted = predicted_change(&out.keys, &out.values, k, d, &m, &c);
        let before = sse(&lab);
        let mut moved = lab.clone();
        let mut dummy = (pt.clone(), pb.clone());
        let _ = hartigan_block(&x, n, d, None, &mut moved, &mut dummy.0, &mut dummy.1, &out.keys, -1, &m, &c, 1.0, 16)
            .unwrap();
        let after = sse(&moved);
        assert!(((after - before) - predicted).abs() < 1e-9 * before, "{} vs {predicted}", after - before);
    }

    #[test]
    fn weighted_lloyd_block_equals_repeated_rows_and_ignores_zero_weights() {
        let (n, d, k) = (400, 3, 4);
        let x = data(n, d, 5);
        let c0: Vec<f64> = x[..k * d].to_vec();
        let w: Vec<f64> = (0..n).map(|i| (i % 4) as f64).collect(); // 0, 1, 2, 3
        let mut rep = Vec::new();
        for i in 0..n {
            for _ in 0..i % 4 {
                rep.extend_from_slice(&x[i * d..(i + 1) * d]);
            }
        }
        let m = rep.len() / d;
        let zero = vec![0.0; k];
        let st = |m: usize| (vec![0u32; m], vec![0.0; m], vec![0.0; m]);
        let (mut l1, mut u1, mut o1) = st(n);
        let pw = lloyd_block(&x, n, d, Some(&w), &mut l1, &mut u1, &mut o1, &c0, &zero, &zero, true).unwrap();
        let (mut l2, mut u2, mut o2) = st(m);
        let pr = lloyd_block(&rep, m, d, None, &mut l2, &mut u2, &mut o2, &c0, &zero, &zero, true).unwrap();
        let len = k * (d + 2);
        for (a, b) in pw[..len].iter().zip(&pr[..len]) {
            assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
        }
        // The fresh weighted step appends the unweighted totals: those of the plain block.
        let (mut l3, mut u3, mut o3) = st(n);
        let pu = lloyd_block(&x, n, d, None, &mut l3, &mut u3, &mut o3, &c0, &zero, &zero, true).unwrap();
        assert_eq!(&pw[len + 2..], &pu[..len]);
        assert!(lloyd_block(&x, n, d, Some(&w[1..]), &mut l3, &mut u3, &mut o3, &c0, &zero, &zero, true).is_err());
        let mut bad = w.clone();
        bad[3] = -1.0;
        assert!(lloyd_block(&x, n, d, Some(&bad), &mut l3, &mut u3, &mut o3, &c0, &zero, &zero, true).is_err());
    }

    #[test]
    fn weighted_hartigan_totals_give_the_exact_weighted_sse_change() {
        let (n, d, k) = (300, 2, 3);
        let x = data(n, d, 11);
        let w: Vec<f64> = (0..n).map(|i| if i % 7 == 0 { 0.0 } else { 0.25 + (i % 5) as f64 }).collect();
        let mut lab: Vec<u32> = (0..n as u64).map(|i| ((i * 2654435761) >> 7) as u32 % 3).collect();
        let means = |lab: &[u32]| -> (Vec<f64>, Vec<f64>) {
            let mut s = vec![0.0; k * d];
            let mut c = vec![0.0; k];
            for i in 0..n {
                let j = lab[i] as usize;
                c[j] += w[i];
                for l in 0..d {
                    s[j * d + l] += w[i] * x[i * d + l];
                }
            }
            (s.iter().enumerate().map(|(e, v)| v / c[e / d]).collect(), c)
        };
        let sse = |lab: &[u32]| -> f64 {
            let (m, _) = means(lab);
            (0..n)
                .map(|i| w[i] * sq_dist_f64(&x[i * d..(i + 1) * d], &m[lab[i] as usize * d..(lab[i] as usize + 1) * d]))
                .sum()
        };
        let (m, c) = means(&lab);
        let (mut pt, mut pb) = (vec![-1i32; n], vec![0u8; n]);
        let out = hartigan_block(&x, n, d, Some(&w), &mut lab, &mut pt, &mut pb, &[], -1, &m, &c, 1.0, 16).unwrap();
        assert!(!out.keys.is_empty());
        // Zero-weight rows propose nothing and carry their nearest centre's label.
        for i in (0..n).step_by(7) {
            assert_eq!(pt[i], -1);
            let dist: Vec<f64> = (0..k).map(|j| sq_dist_f64(&x[i * d..(i + 1) * d], &m[j * d..(j + 1) * d])).collect();
            assert!(dist[lab[i] as usize] <= dist.iter().cloned().fold(f64::INFINITY, f64::min) * (1.0 + 1e-9));
        }
        // Their flat totals are the weights' totals.
        for j in 0..k {
            let wj: f64 = (0..n).filter(|&i| lab[i] as usize == j).map(|i| w[i]).sum();
            assert!((out.flat[j] - wj).abs() < 1e-9 * wj);
        }
        let predicted = predicted_change(&out.keys, &out.values, k, d, &m, &c);
        let before = sse(&lab);
        let mut moved = lab.clone();
        let mut dummy = (pt.clone(), pb.clone());
        let _ =
            hartigan_block(&x, n, d, Some(&w), &mut moved, &mut dummy.0, &mut dummy.1, &out.keys, -1, &m, &c, 1.0, 16)
                .unwrap();
        let after = sse(&moved);
        assert!(((after - before) - predicted).abs() < 1e-9 * before, "{} vs {predicted}", after - before);
        // The best single move carries its row's weight.
        assert_eq!(out.best.4, w[out.best.1 as usize]);
    }
}
