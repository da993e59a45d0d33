//! One run of batched Hartigan (or Lloyd, the same machinery with unit size factors) from given
//! initial centres on mean-centred data.
//!
//! Every iteration:
//! 1. a parallel pass over fixed 256-row chunks: Hamerly bounds (u ≥ ‖x−c_a‖, l ≤ min_{b≠a}‖x−c_b‖),
//!    moved by the centre drift (kept as per-cluster drift sums, see `DriftSums`), certify points that
//!    cannot move under Hartigan's rule
//!    (`√(W_min/(W_min+w))·max(l, 2s_a−u) ≥ √(W_a/(W_a−w))·u`); the rest get one GEMM tile against all
//!    centres and are classified as *Lloyd-type* (a strictly nearer centre exists) or *Hartigan-only*
//!    candidates (no nearer centre, but a size-weighted cost beats the removal gain);
//! 2. all Lloyd-type moves are applied together — by the identity
//!    ΔSSE = Σ_moves w(d_b² − d_a²) − Σ_j W'_j‖c'_j − c_j‖² any such batch lowers the SSE, also when
//!    it empties a cluster; a cluster left without weight is re-seeded at once (`relocate_empty`:
//!    scikit-learn's farthest points for Lloyd, the largest removal gain for Hartigan — both lower
//!    the SSE);
//! 3. (Hartigan) the candidates are re-checked one by one against the current means with exact
//!    distances and moved with O(d) mean updates (never out of a singleton);
//! 4. (Hartigan) Hartigan-Wong's quick transfer on the rows the bounds left uncertified: each is
//!    re-checked for a move between the two clusters it lies between, in passes until none moves
//!    (`quick_transfer`). On overlapping mixtures the moves of steps 2–3 make a few more boundary
//!    points movable, which without it cost one full pass each (140 iterations of 10–20 moves on
//!    a 5·10⁴ × 12, k = 48 mixture at sd 4, against 12 with it).
//!
//! Hartigan runs in two phases. While Lloyd-type moves remain it applies Lloyd's rule only (unit
//! size factors, no sequential phase, scikit-learn's relocation of emptied clusters), i.e. exactly
//! our Lloyd; once an iteration moves nothing (or the shift falls below `tol`) it switches to
//! Hartigan's rule for good. Why: Hartigan's joining factor W/(W+w) favours small clusters (½ for a
//! singleton), so applied from the start it keeps alive the small clusters that Lloyd would empty
//! and relocate to the points farthest from their centres — where, on well-separated mixtures,
//! the relocated centre gathers a whole true cluster that two merged clusters were sharing. Mixed
//! from the start it ended above scikit-learn's Lloyd from the same start on such mixtures (+0.4 %
//! on average over 8 seeds of 64 Gaussians in 64-d); in two phases it ends at Lloyd's fixed point
//! (the same one as scikit-learn's, step for step) and then only descends from it.
//!
//! The run stops when an iteration moves nothing (a Hartigan local optimum for Hartigan, a Lloyd fixed
//! point for Lloyd), when the centre shift falls below `tol`, or after `max_iter` iterations.
//! All reductions run over fixed blocks in a fixed order, so results do not depend on the thread count.
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::distance::{gemm_slack, scaled_min, small_d, sq_dist_f64, sq_norm, top2, Scratch, PREFETCH_AHEAD, TILE};
use super::matrix::{center_norms, Matrix};
use crate::error::{Result, ThriftyError};
use crate::scalar::Real;

/// Relative margin a sequential Hartigan move must clear (guards against cycling on rounding ties).
const MOVE_MARGIN: f64 = 1e-12;
/// Cap on the quick-transfer passes of one iteration (Hartigan-Wong's stage runs until a pass over
/// its live points moves nothing; the cap only bounds a pathological iteration).
const QUICK_PASSES: usize = 64;
/// The cluster sums are recomputed exactly once the incremental updates since the last exact sum
/// reach this fraction of n (rounding drift grows with the number of updates, not of iterations; the
/// recomputation then costs no more than the updates did).
const RESUM_AFTER_UPDATES_PER_POINT: f64 = 0.5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Lloyd,
    Hartigan,
}

/// What one iteration did (for monitoring, the monotonicity tests and the benchmark table).
#[derive(Clone, Debug, Default)]
pub struct IterStats {
    /// Points certified unmovable by their bounds (no distance row computed).
    pub certified: usize,
    /// Lloyd-type moves applied in the parallel batch.
    pub batch_moves: usize,
    /// Hartigan-only moves applied sequentially.
    pub sequential_moves: usize,
    /// Points moved into clusters the batch left without weight (see `relocate_empty`).
    pub relocated: usize,
    /// Weighted SSE after the batch and after the sequential phase.
    pub sse_after_batch: f64,
    pub sse_after_sequential: f64,
}

#[derive(Clone, Debug)]
pub struct Run<T> {
    pub centers: Vec<T>,
    pub labels: Vec<u32>,
    pub inertia: f64,
    pub n_iter: usize,
    pub converged: bool,
    pub stats: Vec<IterStats>,
}

/// Shared read-only data of a run.
pub struct Data<'a, T> {
    /// Dense rows or CSR (see `matrix`).
    pub x: Matrix<'a, T>,
    pub d: usize,
    pub xx: &'a [f64],
    pub w: &'a [f64],
    /// Largest sample weight (the certificate's size factors are taken at it).
    pub w_max: f64,
    /// Raised by the caller to stop the run at the next iteration (`Err(Interrupted)`).
    pub cancel: &'a AtomicBool,
}

impl<T: Real> Data<'_, T> {
    fn n(&self) -> usize {
        self.xx.len()
    }
    /// ‖x_i − c‖² for a centre `c` (f64) of squared norm `cn` (used by sparse rows only).
    #[inline]
    fn dist2(&self, i: usize, c: &[f64], cn: f64) -> f64 {
        self.x.dist2(i, self.d, self.xx[i], c, cn)
    }
}

/// Cluster memberships and means, updated incrementally.
struct Clusters {
    k: usize,
    d: usize,
    counts: Vec<usize>,
    wsum: Vec<f64>,
    sums: Vec<f64>,
    means: Vec<f64>,
    /// ‖mean_j‖², kept with the means (sparse rows measure distances through it).
    mnorm: Vec<f64>,
}

impl Clusters {
    /// Exact sums from the labels (parallel over fixed blocks, reduced in order). With `with_sse`
    /// the same pass returns the exact weighted SSE of the partition about its new means, via
    /// Σ w‖x − c̃_j‖² = Σ w‖x − c_j‖² + W_j‖c_j − c̃_j‖² with c̃ = `old_means` (close to c, so no
    /// cancellation).
    // the row index addresses labels, weights and rows together
    #[allow(clippy::needless_range_loop)]
    fn from_labels<T: Real>(
        data: &Data<'_, T>,
        labels: &[u32],
        k: usize,
        old_means: &[f64],
        with_sse: bool,
    ) -> (Self, f64) {
        let (d, n) = (data.d, data.n());
        let old_norms = center_norms(old_means, d);
        let (n_blocks, block) = Self::blocks(n, k, d);
        // per block: counts, weight sums, coordinate sums (k×d) and the SSE about `old_means`
        type BlockSums = (Vec<usize>, Vec<f64>, Vec<f64>, f64);
        let partial: Vec<BlockSums> = (0..n_blocks)
            .into_par_iter()
            .map(|b| {
                let mut counts = vec![0usize; k];
                let mut wsum = vec![0.0; k];
                let mut sums = vec![0.0; k * d];
                let mut sse = 0.0;
                for i in b * block..((b + 1) * block).min(n) {
                    let j = labels[i] as usize;
                    let wi = data.w[i];
                    counts[j] += 1;
                    wsum[j] += wi;
                    data.x.axpy(i, d, wi, &mut sums[j * d..(j + 1) * d]);
                    if with_sse {
                        sse += wi * data.dist2(i, &old_means[j * d..(j + 1) * d], old_norms[j]);
                    }
                }
                (counts, wsum, sums, sse)
            })
            .collect();
        let mut c = Clusters {
            k,
            d,
            counts: vec![0; k],
            wsum: vec![0.0; k],
            sums: vec![0.0; k * d],
            means: old_means.to_vec(),
            mnorm: old_norms,
        };
        let mut sse = 0.0;
        for (counts, wsum, sums, part) in partial {
            for j in 0..k {
                c.counts[j] += counts[j];
                c.wsum[j] += wsum[j];
            }
            for (s, v) in c.sums.iter_mut().zip(&sums) {
                *s += v;
            }
            sse += part;
        }
        for j in 0..k {
            c.refresh_mean(j);
            if with_sse {
                sse -= c.wsum[j] * sq_dist_f64(&c.means[j * d..(j + 1) * d], &old_means[j * d..(j + 1) * d]);
            }
        }
        (c, sse.max(0.0))
    }

    /// Fixed blocks of rows for the exact sums (the same on any thread count), few enough that their
    /// partial sums stay within ~256 MiB for large k·d: (number of blocks, rows per block).
    fn blocks(n: usize, k: usize, d: usize) -> (usize, usize) {
        let n_blocks = n.div_ceil(4096).clamp(1, 64).min(((1usize << 28) / (8 * k * d).max(1)).max(1));
        (n_blocks, n.div_ceil(n_blocks))
    }

    /// The SSE [`Clusters::from_labels`] returns when its sums would come out unchanged — `self`
    /// was built by it from these labels, nothing moved since and the means are fresh — without
    /// recomputing the sums: the same per-block sums in the same order, and the correction term is
    /// zero (new means = old means).
    // the row index addresses labels, weights and rows together
    #[allow(clippy::needless_range_loop)]
    fn sse_of_fresh<T: Real>(&self, data: &Data<'_, T>, labels: &[u32]) -> f64 {
        let (d, n) = (data.d, data.n());
        let (n_blocks, block) = Self::blocks(n, self.k, d);
        let norms = center_norms(&self.means, d);
        let partial: Vec<f64> = (0..n_blocks)
            .into_par_iter()
            .map(|b| {
                let mut sse = 0.0;
                for i in b * block..((b + 1) * block).min(n) {
                    let j = labels[i] as usize;
                    sse += data.w[i] * data.dist2(i, &self.means[j * d..(j + 1) * d], norms[j]);
                }
                sse
            })
            .collect();
        let mut sse = 0.0;
        for part in partial {
            sse += part;
        }
        sse.max(0.0)
    }

    /// Mean of cluster j from its sums; a cluster whose members all weigh 0 keeps its centre.
    fn refresh_mean(&mut self, j: usize) {
        let wj = self.wsum[j];
        if wj > 0.0 {
            let mut nrm = 0.0;
            for (m, s) in
                self.means[j * self.d..(j + 1) * self.d].iter_mut().zip(&self.sums[j * self.d..(j + 1) * self.d])
            {
                *m = s / wj;
                nrm += *m * *m;
            }
            self.mnorm[j] = nrm;
        }
    }

    fn move_point<T: Real>(&mut self, data: &Data<'_, T>, i: usize, from: usize, to: usize) {
        let (d, w) = (self.d, data.w[i]);
        self.counts[from] -= 1;
        self.counts[to] += 1;
        self.wsum[from] -= w;
        self.wsum[to] += w;
        data.x.axpy(i, d, -w, &mut self.sums[from * d..(from + 1) * d]);
        data.x.axpy(i, d, w, &mut self.sums[to * d..(to + 1) * d]);
        if self.counts[from] == 0 {
            // Emptied: exact zeros, not the rounding residue of the removals.
            self.wsum[from] = 0.0;
            self.sums[from * d..(from + 1) * d].iter_mut().for_each(|s| *s = 0.0);
        } else if self.wsum[from] <= 0.0 {
            self.wsum[from] = 0.0; // only zero-weight members left: rounding must not go negative
        }
    }

    /// Means of every cluster from its sums. A cluster without weight keeps its centre, or with
    /// `weightless_at` (Lloyd, as scikit-learn) moves there.
    /// All means from the sums. A cluster without weight keeps its last mean, except under Lloyd
    /// (`lloyd`), where it goes to the heaviest cluster's mean (lowest index on ties), as
    /// scikit-learn's `_average_centers` does (it only happens when relocating was pointless: every
    /// point sits on its centre).
    fn refresh_means(&mut self, lloyd: bool) {
        for j in 0..self.k {
            self.refresh_mean(j);
        }
        if !lloyd {
            return;
        }
        let heaviest = (0..self.k).fold(0, |b, j| if self.wsum[j] > self.wsum[b] { j } else { b });
        let d = self.d;
        for j in 0..self.k {
            if self.wsum[j] <= 0.0 && j != heaviest {
                self.means.copy_within(heaviest * d..(heaviest + 1) * d, j * d);
                self.mnorm[j] = self.mnorm[heaviest];
            }
        }
    }

    /// Clusters without weight (no members, or only zero-weight ones), in index order.
    fn weightless(&self) -> Vec<usize> {
        (0..self.k).filter(|&j| self.wsum[j] <= 0.0).collect()
    }

    /// Weighted SSE from the sums: Σ w‖x‖² − Σ_j ‖S_j‖²/W_j.
    fn sse(&self, total_wxx: f64) -> f64 {
        let mut s = total_wxx;
        for j in 0..self.k {
            if self.wsum[j] > 0.0 {
                let sj = &self.sums[j * self.d..(j + 1) * self.d];
                s -= sj.iter().map(|v| v * v).sum::<f64>() / self.wsum[j];
            }
        }
        s.max(0.0)
    }
}

/// Per-cluster quantities the certificate needs, refreshed once per iteration.
struct Geometry<T> {
    centers: Vec<T>,
    /// The centres transposed (`d × k`) for the sparse and small-d tile kernels, else empty.
    ct: Vec<T>,
    cc: Vec<T>,
    cc_max: f64,
    /// ‖c_T − c_f64‖: the rounding of the data-type copy of each centre (0 for f64).
    round: f64,
    /// Half the distance from each centre to its nearest other centre.
    half_sep: Vec<f64>,
}

impl<T: Real> Geometry<T> {
    fn new(x: &Matrix<'_, T>, means: &[f64], k: usize, d: usize) -> Self {
        let (centers, cc) = typed_centers::<T>(means, d);
        let ct = x.transpose_centers(&centers, k, d);
        let round = centers
            .chunks_exact(d)
            .zip(means.chunks_exact(d))
            .map(|(c, m)| sq_dist_f64(c, m).sqrt())
            .fold(0.0, f64::max);
        let cc_max = cc.iter().fold(0.0f64, |m, v| m.max(v.as_f64()));
        let half_sep = half_separations(means, k, d);
        Geometry { centers, ct, cc, cc_max, round, half_sep }
    }
}

/// The centres in the data type and their squared norms (of the rounded copy), as the tiles use them.
fn typed_centers<T: Real>(means: &[f64], d: usize) -> (Vec<T>, Vec<T>) {
    let centers: Vec<T> = means.iter().map(|&v| T::of(v)).collect();
    let cc: Vec<T> = centers.chunks_exact(d).map(|r| T::of(sq_norm(r))).collect();
    (centers, cc)
}

/// Half the distance from each centre to its nearest other centre (∞ when k = 1).
///
/// O(k²·d) per iteration, so vectorised: the centres are transposed (`d × k`, padded to whole
/// groups) and each centre is compared with `SEP_LANES` others at once. Every squared distance is
/// still the sum Σ_l (c_j,l − c_o,l)² in coordinate order, and a minimum does not depend on the
/// order it is taken in.
fn half_separations(means: &[f64], k: usize, d: usize) -> Vec<f64> {
    const SEP_LANES: usize = 16;
    let groups = k.div_ceil(SEP_LANES);
    let mut mt = vec![[0.0f64; SEP_LANES]; groups * d]; // [group][coordinate] → lanes
    for (o, c) in means.chunks_exact(d).enumerate() {
        for (l, &v) in c.iter().enumerate() {
            mt[(o / SEP_LANES) * d + l][o % SEP_LANES] = v;
        }
    }
    (0..k)
        .into_par_iter()
        .map(|j| {
            let cj = &means[j * d..(j + 1) * d];
            let mut best = [f64::INFINITY; SEP_LANES];
            for (g, block) in mt.chunks_exact(d).enumerate() {
                let mut acc = [0.0f64; SEP_LANES];
                for (&a, b) in cj.iter().zip(block) {
                    for p in 0..SEP_LANES {
                        let t = a - b[p];
                        acc[p] += t * t;
                    }
                }
                for (p, (m, &v)) in best.iter_mut().zip(&acc).enumerate() {
                    let o = g * SEP_LANES + p;
                    if o != j && o < k && v < *m {
                        *m = v;
                    }
                }
            }
            0.5 * best.iter().fold(f64::INFINITY, |m, &v| m.min(v)).sqrt()
        })
        .collect()
}

/// Centre drift summed over the iterations, per cluster, so that the bounds need no update pass.
///
/// Hamerly's bounds move every iteration: u += drift of the own centre, l −= largest drift of the
/// others. Writing both for every point is most of the cost of a tail iteration, in which almost
/// every point is certified. Instead a bound is stored relative to these sums when it is set —
/// u_stored = u − grow_a, l_stored = l + shrink_a — and read as u_stored + grow_a, l_stored −
/// shrink_a: the same values, with no store for a certified point. A point keeps its cluster
/// between two resets of its bounds (a move resets them), so the per-cluster sums apply.
struct DriftSums {
    /// Σ over iterations of the drift of centre a.
    grow: Vec<f64>,
    /// Σ over iterations of the largest drift among the centres other than a.
    shrink: Vec<f64>,
}

impl DriftSums {
    fn new(k: usize) -> Self {
        DriftSums { grow: vec![0.0; k], shrink: vec![0.0; k] }
    }

    fn add(&mut self, drift: &[f64]) {
        let mut dm = (0usize, 0.0f64, 0.0f64);
        for (j, &v) in drift.iter().enumerate() {
            if v > dm.1 {
                dm = (j, v, dm.1);
            } else if v > dm.2 {
                dm.2 = v;
            }
        }
        for (a, &v) in drift.iter().enumerate() {
            self.grow[a] += v;
            self.shrink[a] += if a == dm.0 { dm.2 } else { dm.1 };
        }
    }
}

/// Hartigan's size factors W/(W−w) (leaving) and W/(W+w) (joining); Lloyd uses 1 for both.
#[derive(Clone, Copy)]
struct Factors {
    hartigan: bool,
}

impl Factors {
    #[inline]
    fn leave(self, wa: f64, w: f64) -> f64 {
        if self.hartigan {
            if wa - w > 0.0 {
                wa / (wa - w)
            } else {
                f64::INFINITY
            }
        } else {
            1.0
        }
    }
    #[inline]
    fn join(self, wb: f64, w: f64) -> f64 {
        if self.hartigan && wb + w > 0.0 {
            wb / (wb + w)
        } else {
            1.0
        }
    }
}

#[derive(Default)]
struct ChunkOut {
    moves: Vec<(u32, u32)>,
    candidates: Vec<u32>,
    /// (Hartigan) every row the bounds did not certify, with the two clusters it lies between:
    /// its cluster after the batch and the best other one by the tile's distances. The
    /// quick-transfer passes re-check these pairs (see `quick_transfer`).
    boundary: Vec<(u32, u32, u32)>,
    certified: usize,
}

/// Per-cluster constants of the no-move certificate, so that the per-point test is four loads and
/// a multiply: point x of cluster a cannot move when `ratio_a · max(l, 2s_a − u) ≥ u`, with
/// `ratio_a = √(W_min/(W_min+w)) / √(W_a/(W_a−w))` (W_min: lightest other cluster) taken at the
/// heaviest point weight w_max, which makes it a valid (conservative) bound for every point.
struct Certificate {
    /// Per cluster: [grow_a, shrink_a (see [`DriftSums`]), 2·half-separation, ratio]; a cluster
    /// that must keep its last point gets 2s = ∞ (every member certified).
    per_cluster: Vec<[f64; 4]>,
}

impl Certificate {
    fn new<T: Real>(
        geo: &Geometry<T>,
        sums: &DriftSums,
        cl: &Clusters,
        f: Factors,
        min_w: (usize, f64, f64),
        w_max: f64,
    ) -> Self {
        let per_cluster = (0..cl.k)
            .map(|a| {
                let wm = if a == min_w.0 { min_w.2 } else { min_w.1 };
                let fa = f.leave(cl.wsum[a], w_max).sqrt();
                let stuck = f.hartigan && cl.counts[a] <= 1; // Hartigan never empties a singleton
                let ratio = if stuck {
                    1.0
                } else if fa.is_finite() {
                    f.join(wm, w_max).sqrt() / fa
                } else {
                    0.0
                };
                let two_s = if stuck { f64::INFINITY } else { 2.0 * geo.half_sep[a] };
                [sums.grow[a], sums.shrink[a], two_s, ratio]
            })
            .collect();
        Certificate { per_cluster }
    }
}

/// The parallel pass: bounds, certificates, one GEMM tile for the uncertified rows, classification.
#[allow(clippy::too_many_arguments)]
fn assign_pass<T: Real>(
    data: &Data<'_, T>,
    geo: &Geometry<T>,
    sums: &DriftSums,
    cl: &Clusters,
    labels: &[u32],
    upper: &mut [f64],
    lower: &mut [f64],
    f: Factors,
    min_w: (usize, f64, f64),
) -> Vec<ChunkOut> {
    let (d, k) = (data.d, cl.k);
    let cert = Certificate::new(geo, sums, cl, f, min_w, data.w_max);
    let join_heavy: Vec<f64> = cl.wsum.iter().map(|&wb| f.join(wb, data.w_max)).collect();
    let means = &cl.means;
    upper
        .par_chunks_mut(TILE)
        .zip(lower.par_chunks_mut(TILE))
        .enumerate()
        .map_init(
            || (Scratch::<T>::new(d, k), Vec::<f64>::with_capacity(TILE)),
            |(s, da2s), (t, (up, lo))| {
                let base = t * TILE;
                let mut out = ChunkOut::default();
                if data.cancel.load(Ordering::Relaxed) {
                    return out; // the run returns Err(Interrupted) after the pass
                }
                // Both passes compact the kept rows without a branch (write every row, advance by
                // the test): which rows stay uncertified looks random, and a branch per row
                // mispredicted often enough to cost more than the test itself.
                let m = up.len();
                s.rows.clear();
                s.rows.resize(m, 0);
                da2s.clear();
                da2s.resize(m, 0.0);
                // Pass 1, read-only: the bounds as of now (stored + drift sums), keep the
                // uncertified rows. A negative l is no information, like 0.
                let lab = &labels[base..base + m];
                // local slices: stores through them cannot alias the vectors' headers, so their
                // pointers and lengths stay in registers
                let (rows, kept_da2) = (&mut s.rows[..m], &mut da2s[..m]);
                let per_cluster = &cert.per_cluster[..];
                let mut kept = 0;
                for (r, (&a, (&u, &l))) in lab.iter().zip(up.iter().zip(lo.iter())).enumerate() {
                    let [grow, shrink, two_s, ratio] = per_cluster[a as usize];
                    let (u, l) = (u + grow, l - shrink);
                    rows[kept] = base + r;
                    kept += usize::from(ratio * l.max(two_s - u) < u);
                }
                // Pass 2: tighten u to the exact distance; keep the rows still uncertified. The
                // kept rows are scattered, so each row read is prefetched a few rows ahead.
                let pass1 = kept;
                kept = 0;
                for q in 0..pass1 {
                    if q + PREFETCH_AHEAD < pass1 {
                        data.x.prefetch_row(rows[q + PREFETCH_AHEAD], d);
                    }
                    let i = rows[q];
                    let (r, a) = (i - base, lab[i - base] as usize);
                    let [grow, shrink, two_s, ratio] = per_cluster[a];
                    let da2 = data.dist2(i, &means[a * d..(a + 1) * d], cl.mnorm[a]);
                    let u = da2.sqrt();
                    up[r] = u - grow;
                    rows[kept] = i;
                    kept_da2[kept] = da2;
                    kept += usize::from(ratio * (lo[r] - shrink).max(two_s - u) < u);
                }
                s.rows.truncate(kept);
                out.certified = up.len() - kept;
                if s.rows.is_empty() {
                    return out;
                }
                data.x.tile_partial(d, &geo.centers, &geo.ct, &geo.cc, k, s);
                for (r, &i) in s.rows.iter().enumerate() {
                    let row = &mut s.dots[r * k..(r + 1) * k];
                    let a = labels[i] as usize;
                    let w = data.w[i];
                    let da2 = da2s[r];
                    let xi2 = data.xx[i];
                    let slack = gemm_slack::<T>(xi2, geo.cc_max, d);
                    let (j1, p1, p2) = top2(row);
                    let (v1, v2) = (xi2 + p1.as_f64(), xi2 + p2.as_f64());
                    let lower_of = |v: f64| ((v - slack).max(0.0).sqrt() - geo.round).max(0.0);
                    let local = i - base;
                    if j1 != a {
                        let db2 = data.dist2(i, &means[j1 * d..(j1 + 1) * d], cl.mnorm[j1]);
                        if db2 < da2 {
                            out.moves.push((i as u32, j1 as u32));
                            if f.hartigan {
                                out.boundary.push((i as u32, j1 as u32, a as u32));
                            }
                            let [grow, shrink, _, _] = cert.per_cluster[j1];
                            up[local] = db2.sqrt() - grow;
                            // Nearest centre other than j1 is the second smallest overall.
                            lo[local] = lower_of(v2) + shrink;
                            continue;
                        }
                    }
                    // Nearest other than a: v1 unless a itself is the nearest.
                    let other = if j1 == a { v2 } else { v1 };
                    // (up[local] holds ‖x − c_a‖ − grow_a from pass 2 already)
                    let shrink = cert.per_cluster[a][1];
                    lo[local] = lower_of(other) + shrink;
                    if f.hartigan {
                        if k > 1 {
                            let alt = scaled_argmin_other(row, &join_heavy, xi2 - slack, a);
                            out.boundary.push((i as u32, a as u32, alt as u32));
                        }
                        // A Hartigan-only move needs join_b·d_b² < leave_a·d_a² for some b ≠ a; with
                        // the smallest joining factor this is impossible when the nearest other
                        // centre is already too far, which settles most rows without a scan.
                        let gain = f.leave(cl.wsum[a], w) * da2;
                        let wm = if a == min_w.0 { min_w.2 } else { min_w.1 };
                        if f.join(wm, w) * (other - slack).max(0.0) < gain {
                            // Joining factors taken at the heaviest weight are the smallest, so
                            // this keeps a superset of the true candidates (exact for equal
                            // weights); each is re-checked exactly in the sequential phase.
                            let base = xi2 - slack;
                            let best = scaled_min(&row[..a], &join_heavy[..a], base).min(scaled_min(
                                &row[a + 1..],
                                &join_heavy[a + 1..],
                                base,
                            ));
                            if best < gain {
                                out.candidates.push(i as u32);
                            }
                        }
                    }
                }
                out
            },
        )
        .collect()
}

/// Lloyd with at most this many centre coordinates (k·d) skips the bounds: all k distances of a row
/// cost less than reading and writing its two bounds.
const DENSE_MAX_KD: usize = 32;

/// Lloyd's assignment without bounds for tiny k·d: exact distances to every centre (see
/// [`dense_scan`]), a move wherever another centre is strictly nearer than the current one (to the
/// first nearest).
fn dense_lloyd_pass<T: Real>(data: &Data<'_, T>, x: &[T], means: &[f64], k: usize, labels: &[u32]) -> Vec<ChunkOut> {
    let d = data.d;
    labels
        .par_chunks(TILE)
        .enumerate()
        .map(|(t, lab)| {
            let mut out = ChunkOut::default();
            if data.cancel.load(Ordering::Relaxed) {
                return out;
            }
            let base = t * TILE;
            dense_scan(x, means, k, d, base, lab.len(), |r, row, b, best| {
                let a = lab[r] as usize;
                if b != a && best < exact_sq_dist(row, &means[a * d..(a + 1) * d]) {
                    out.moves.push(((base + r) as u32, b as u32));
                }
            });
            out
        })
        .collect()
}

/// Nearest centre of every row (first on ties) by exact distances, for tiny k·d (see
/// [`dense_scan`]): the first assignment and the final E-step of runs that use the dense pass —
/// the labels `predict` gives for the same centres.
fn dense_labels<T: Real>(data: &Data<'_, T>, x: &[T], means: &[f64], k: usize, labels: &mut [u32]) {
    let d = data.d;
    labels.par_chunks_mut(TILE).enumerate().for_each(|(t, lab)| {
        if data.cancel.load(Ordering::Relaxed) {
            return;
        }
        dense_scan(x, means, k, d, t * TILE, lab.len(), |r, _, b, _| lab[r] = b as u32);
    });
}

/// Whether a run assigns with [`dense_lloyd_pass`] while Lloyd's rule applies (then the first
/// assignment needs no bounds: they are reset before Hartigan's rule would read them).
fn dense_eligible<'a, T>(x: &Matrix<'a, T>, k: usize, d: usize) -> Option<&'a [T]> {
    match *x {
        Matrix::Dense(x) if k * d <= DENSE_MAX_KD => Some(x),
        _ => None,
    }
}

/// Lloyd's rule runs bound-free on the fused small-d kernel ([`small_d::nearest`]) until an
/// iteration moves fewer than this fraction of the points; then the bounds take over. While many
/// points move (the first iterations from a random start), the bounds certify few rows and their
/// reads, writes and exact distances cost more than a full fused pass (issue 21, d = 16 against
/// faiss); near the fixed point they certify almost every row.
const FUSED_UNTIL_MOVES: f64 = 0.01;

/// float64 switches to the fused pass (while many points move) after a bounded Lloyd iteration
/// that certified fewer than this fraction of the rows. On an overlapping mixture (5·10⁴ × 12,
/// k = 48, sd 4) the bounds certify 2–50 % in the first ~9 iterations and the fused pass saves
/// 15 % of the fit; on well-separated blobs they certify most rows at once, and the fused pass
/// from the start cost 10–20 %.
const FUSED_BELOW_CERTIFIED: f64 = 0.35;

/// The data as one dense slice when Lloyd's rule can use [`fused_lloyd_pass`] (dense, not tiny,
/// float32 or float64 with d within the AVX-512 small-d kernel).
fn fused_eligible<'a, T: Real>(x: &Matrix<'a, T>, k: usize, d: usize) -> Option<&'a [T]> {
    match *x {
        Matrix::Dense(x) if k * d > DENSE_MAX_KD && small_d::tiles_available::<T>(d) => Some(x),
        _ => None,
    }
}

/// First nearest centre of each row of the tile at `base` (`lab.len()` rows) by the fused kernel:
/// the argmin [`top2`] gives on the same tile.
fn fused_nearest<T: Real>(x: &[T], d: usize, ct: &[T], cc: &[T], k: usize, base: usize, near: &mut [u32]) {
    let m = near.len();
    let used = small_d::nearest(&x[base * d..(base + m) * d], m, d, ct, cc, k, near);
    debug_assert!(used, "fused_eligible checked the kernel");
}

/// Lloyd's assignment without bounds: the fused argmin j of every row, and a move wherever j is not
/// the current centre and is strictly nearer by exact distances — the decision the bounded
/// [`assign_pass`] takes for every row it does not certify (a certified row cannot pass the test).
fn fused_lloyd_pass<T: Real>(data: &Data<'_, T>, x: &[T], cl: &Clusters, labels: &[u32]) -> Vec<ChunkOut> {
    let (d, k) = (data.d, cl.k);
    let (centers, cc) = typed_centers::<T>(&cl.means, d);
    let ct = super::distance::transpose(&centers, k, d);
    labels
        .par_chunks(TILE)
        .enumerate()
        .map_init(
            || vec![0u32; TILE],
            |near, (t, lab)| {
                let mut out = ChunkOut::default();
                if data.cancel.load(Ordering::Relaxed) {
                    return out;
                }
                let base = t * TILE;
                let near = &mut near[..lab.len()];
                fused_nearest(x, d, &ct, &cc, k, base, near);
                for (r, (&a, &j)) in lab.iter().zip(near.iter()).enumerate() {
                    let (a, j) = (a as usize, j as usize);
                    if j != a {
                        let i = base + r;
                        let da2 = data.dist2(i, &cl.means[a * d..(a + 1) * d], cl.mnorm[a]);
                        let db2 = data.dist2(i, &cl.means[j * d..(j + 1) * d], cl.mnorm[j]);
                        if db2 < da2 {
                            out.moves.push((i as u32, j as u32));
                        }
                    }
                }
                out
            },
        )
        .collect()
}

/// Σ_l (x_l − c_l)² in coordinate order, from 0 — the sum [`nearest_lanes`] forms per lane.
#[inline(always)]
fn exact_sq_dist<T: Real>(row: &[T], c: &[f64]) -> f64 {
    let mut s = 0.0f64;
    for (&v, &cl) in row.iter().zip(c) {
        let diff = v.as_f64() - cl;
        s += diff * diff;
    }
    s
}

/// Rows per group of [`dense_scan`] (two AVX registers of f64 lanes).
const P: usize = 8;

/// Exact nearest centre (first on ties) of the rows `base..base + len` for tiny k·d (≤
/// `DENSE_MAX_KD`): calls `found(r, row, nearest, its squared distance)` for each row `base + r`.
///
/// Vectorised across rows, not centres: a group of `P` rows is transposed into `d × P` f64 lanes,
/// and for each centre in turn the `P` distances and the running minimum / argmin are updated
/// lane-wise (no branch, no horizontal reduction). Each distance is the sum of
/// [`exact_sq_dist`], so the decisions are those of a per-row scan.
#[inline(always)]
fn dense_scan<T: Real>(
    x: &[T],
    means: &[f64],
    k: usize,
    d: usize,
    base: usize,
    len: usize,
    found: impl FnMut(usize, &[T], usize, f64),
) {
    debug_assert!(k * d <= DENSE_MAX_KD);
    match d {
        1 => dense_scan_d::<T, 1>(x, means, k, 1, base, len, found),
        2 => dense_scan_d::<T, 2>(x, means, k, 2, base, len, found),
        3 => dense_scan_d::<T, 3>(x, means, k, 3, base, len, found),
        4 => dense_scan_d::<T, 4>(x, means, k, 4, base, len, found),
        _ => dense_scan_d::<T, 0>(x, means, k, d, base, len, found),
    }
}

/// [`dense_scan`] for `D` dimensions when known at compile time (1–4: the transposition and the
/// coordinate loop unroll into registers), else `D = 0` and `d` is used.
#[inline(always)]
fn dense_scan_d<T: Real, const D: usize>(
    x: &[T],
    means: &[f64],
    k: usize,
    d: usize,
    base: usize,
    len: usize,
    mut found: impl FnMut(usize, &[T], usize, f64),
) {
    let d = if D > 0 { D } else { d };
    let means = &means[..k * d];
    for g in (0..len).step_by(P) {
        let m = P.min(len - g);
        let rows = &x[(base + g) * d..(base + g + m) * d];
        let (best, best_j) = if m == P && D > 0 {
            let rows = &rows[..P * D];
            let xt: [[f64; P]; D] = std::array::from_fn(|l| std::array::from_fn(|p| rows[p * D + l].as_f64()));
            nearest_lanes(&xt, means, d)
        } else {
            // a partial group (padded with zeros, ignored) or a dimension not known at compile time
            let mut xt = [[0.0f64; P]; DENSE_MAX_KD]; // d ≤ k·d ≤ DENSE_MAX_KD
            for (p, row) in rows.chunks_exact(d).enumerate() {
                for (xl, &v) in xt.iter_mut().zip(row) {
                    xl[p] = v.as_f64();
                }
            }
            nearest_lanes(&xt[..d], means, d)
        };
        for (p, row) in rows.chunks_exact(d).enumerate() {
            found(g + p, row, best_j[p] as usize, best[p]);
        }
    }
}

/// Nearest centre (first on ties) and its squared distance for the `P` rows of `xt` (`d × P`,
/// transposed): per centre the `P` distances Σ_l (x_l − c_l)², then a lane-wise compare and select.
#[inline(always)]
fn nearest_lanes(xt: &[[f64; P]], means: &[f64], d: usize) -> ([f64; P], [f64; P]) {
    let mut best = [f64::INFINITY; P];
    let mut best_j = [0.0f64; P];
    for (j, c) in means.chunks_exact(d).enumerate() {
        let mut acc = [0.0f64; P];
        for (xl, &cl) in xt.iter().zip(c) {
            for p in 0..P {
                let diff = xl[p] - cl;
                acc[p] += diff * diff;
            }
        }
        // j only grows, so "take j where nearer" is a max with j-or-0 (cheaper than a select)
        let jf = j as f64;
        for p in 0..P {
            let cand = if acc[p] < best[p] { jf } else { 0.0 };
            best_j[p] = if cand > best_j[p] { cand } else { best_j[p] };
            best[p] = if acc[p] < best[p] { acc[p] } else { best[p] };
        }
    }
    (best, best_j)
}

/// Two smallest cluster weights with the index of the smallest.
fn min_weights(wsum: &[f64]) -> (usize, f64, f64) {
    let mut m = (0usize, f64::INFINITY, f64::INFINITY);
    for (j, &v) in wsum.iter().enumerate() {
        if v < m.1 {
            m = (j, v, m.1);
        } else if v < m.2 {
            m.2 = v;
        }
    }
    m
}

/// Run from initial centres `init` (k × d, centred coordinates) to convergence.
pub fn run<T: Real>(
    data: &Data<'_, T>,
    init: &[T],
    k: usize,
    algorithm: Algorithm,
    max_iter: usize,
    tol: f64,
    total_wxx: f64,
) -> Result<Run<T>> {
    let (n, d) = (data.n(), data.d);
    // Hartigan starts with Lloyd's rule and switches to Hartigan's once Lloyd is at a fixed point
    // (or below `tol`): see the module doc for why.
    let mut f = Factors { hartigan: false };
    let mut lloyd_phase = algorithm == Algorithm::Hartigan;
    let mut dense_pass_used = false;
    let mut hartigan_iters = 0usize;
    let init64: Vec<f64> = init.iter().map(|v| v.as_f64()).collect();

    // Iteration 0: nearest-centre assignment with exact bounds (every point starts uncertified).
    let mut labels = super::try_filled("the labels", n, 0u32)?;
    let mut upper = super::try_filled("the distance bounds", n, f64::INFINITY)?;
    let mut lower = super::try_filled("the distance bounds", n, 0.0f64)?;
    // The bound-free fused pass while Lloyd's rule applies and many points move. The bounds stay
    // ∞ / 0 meanwhile (no information, valid at any time), so the bounded pass can take over later.
    // float32 starts on it; float64 (half the lanes per register, so a full pass costs twice as
    // much against the bounds) only once a bounded iteration certifies few rows (see
    // FUSED_BELOW_CERTIFIED), and at most once.
    let fused_kernel = fused_eligible(&data.x, k, d);
    let mut fused = fused_kernel.filter(|_| small_d::available::<T>(d));
    let mut fused_left = false;
    if let Some(x) = dense_eligible(&data.x, k, d) {
        dense_labels(data, x, &init64, k, &mut labels); // the bounds stay ∞ / 0: the dense pass needs none
    } else if let Some(x) = fused {
        let (centers, cc) = typed_centers::<T>(&init64, d);
        let ct = super::distance::transpose(&centers, k, d);
        labels.par_chunks_mut(TILE).enumerate().for_each(|(t, lab)| {
            if !data.cancel.load(Ordering::Relaxed) {
                fused_nearest(x, d, &ct, &cc, k, t * TILE, lab);
            }
        });
    } else {
        let geo = Geometry::<T>::new(&data.x, &init64, k, d);
        let nearest = nearest_with_bounds(data, &geo, k, &mut upper, &mut lower);
        labels.copy_from_slice(&nearest);
    }
    if data.cancel.load(Ordering::Relaxed) {
        return Err(ThriftyError::Interrupted);
    }
    let (mut cl, _) = Clusters::from_labels(data, &labels, k, &init64, false);
    // Whether cl's sums are exact for the current labels (nothing moved since `from_labels`): then
    // the final exact sums are these, and only the SSE needs a pass.
    let mut sums_fresh = true;
    for i in relocate_empty(data, &mut cl, &mut labels, f, &init64) {
        (upper[i], lower[i]) = (f64::INFINITY, 0.0);
        sums_fresh = false;
    }
    cl.refresh_means(!f.hartigan);
    let mut prev_means = init64;
    let mut stats = Vec::new();
    let mut converged = false;
    let mut n_iter = 1;
    let mut updates_since_resum = 0usize;
    // The bounds from the first assignment are exact with zero sums.
    let mut drift_sums = DriftSums::new(k);

    loop {
        if data.cancel.load(Ordering::Relaxed) {
            return Err(ThriftyError::Interrupted);
        }
        let drift = center_drift(&cl.means, &prev_means, d);
        let shift: f64 = drift.iter().map(|v| v * v).sum();
        // scikit-learn's rule, also after the first assignment (its iteration 0).
        if shift <= tol {
            if lloyd_phase {
                switch_to_hartigan(&mut f, &mut lloyd_phase, dense_pass_used, &mut upper, &mut lower);
            } else if f.hartigan && hartigan_iters == 0 {
                // the shift is still Lloyd's last one: give Hartigan's rule one iteration
            } else {
                converged = true;
                break;
            }
        }
        if n_iter >= max_iter {
            break;
        }
        n_iter += 1;
        drift_sums.add(&drift);
        prev_means = cl.means.clone();

        let outs = if let (false, Some(x)) = (f.hartigan, dense_eligible(&data.x, k, d)) {
            dense_pass_used = true;
            dense_lloyd_pass(data, x, &cl.means, k, &labels)
        } else if let (false, Some(x)) = (f.hartigan, fused) {
            fused_lloyd_pass(data, x, &cl, &labels)
        } else {
            let geo = Geometry::<T>::new(&data.x, &cl.means, k, d);
            assign_pass(data, &geo, &drift_sums, &cl, &labels, &mut upper, &mut lower, f, min_weights(&cl.wsum))
        };
        if data.cancel.load(Ordering::Relaxed) {
            return Err(ThriftyError::Interrupted); // the pass skipped its remaining tiles
        }
        let mut st = IterStats::default();
        // Lloyd-type batch (it may empty a cluster: the relocation below re-seeds it).
        for out in &outs {
            st.certified += out.certified;
            for &(i, to) in &out.moves {
                let (i, to) = (i as usize, to as usize);
                cl.move_point(data, i, labels[i] as usize, to);
                labels[i] = to as u32;
            }
            st.batch_moves += out.moves.len();
        }
        updates_since_resum += st.batch_moves;
        let many_moves = (st.batch_moves as f64) >= FUSED_UNTIL_MOVES * n as f64;
        if !many_moves && fused.is_some() {
            fused = None; // from the next iteration on, the bounds (still ∞ / 0) take over
            fused_left = true;
        } else if fused.is_none()
            && !fused_left
            && !f.hartigan
            && many_moves
            && (st.certified as f64) < FUSED_BELOW_CERTIFIED * n as f64
        {
            // the bounds certify too few rows to pay for themselves: the fused pass until few
            // points move; it keeps no bounds, so they restart from ∞ / 0 (valid at any time)
            fused = fused_kernel;
            forget_bounds(&mut upper, &mut lower);
        }
        if updates_since_resum as f64 >= RESUM_AFTER_UPDATES_PER_POINT * n as f64 {
            cl = Clusters::from_labels(data, &labels, k, &cl.means, false).0;
            updates_since_resum = 0;
            sums_fresh = true;
        } else if f.hartigan {
            cl.refresh_means(false); // Hartigan's relocation ranks points against the new means
        }
        let relocated = relocate_empty(data, &mut cl, &mut labels, f, &prev_means);
        for &i in &relocated {
            (upper[i], lower[i]) = (f64::INFINITY, 0.0);
        }
        st.relocated = relocated.len();
        updates_since_resum += st.relocated;
        cl.refresh_means(!f.hartigan);
        st.sse_after_batch = cl.sse(total_wxx);
        // Hartigan-only moves, one at a time against the current means.
        if f.hartigan {
            hartigan_iters += 1;
            for out in &outs {
                for &i in &out.candidates {
                    let i = i as usize;
                    if sequential_move(data, &mut cl, &mut labels, i, f) {
                        upper[i] = f64::INFINITY;
                        lower[i] = 0.0;
                        st.sequential_moves += 1;
                    }
                }
            }
            st.sequential_moves += quick_transfer(data, &mut cl, &mut labels, &outs, f, &mut upper, &mut lower);
        }
        updates_since_resum += st.sequential_moves;
        if updates_since_resum > 0 {
            sums_fresh = false;
        }
        st.sse_after_sequential = cl.sse(total_wxx);
        let moved = st.batch_moves + st.sequential_moves;
        stats.push(st);
        if moved == 0 {
            if lloyd_phase {
                switch_to_hartigan(&mut f, &mut lloyd_phase, dense_pass_used, &mut upper, &mut lower);
                continue;
            }
            converged = true;
            break;
        }
    }

    // Final state: exact sums; Lloyd stopped by tol/max_iter gets a final E-step like scikit-learn.
    let e_step = algorithm == Algorithm::Lloyd && !converged_strict(&stats);
    let (cl, mut inertia) = if sums_fresh {
        let sse = if e_step { 0.0 } else { cl.sse_of_fresh(data, &labels) };
        (cl, sse)
    } else {
        Clusters::from_labels(data, &labels, k, &cl.means, !e_step)
    };
    if e_step {
        match (dense_eligible(&data.x, k, d), fused) {
            (Some(x), _) => dense_labels(data, x, &cl.means, k, &mut labels),
            (None, Some(x)) => {
                for out in fused_lloyd_pass(data, x, &cl, &labels) {
                    for (i, to) in out.moves {
                        labels[i as usize] = to;
                    }
                }
                if data.cancel.load(Ordering::Relaxed) {
                    return Err(ThriftyError::Interrupted);
                }
            }
            (None, None) => {
                let mut bounds = Bounds { upper: &mut upper, lower: &mut lower, drift_sums: &mut drift_sums };
                nearest_from_bounds(data, &cl, &prev_means, &mut labels, &mut bounds);
                if data.cancel.load(Ordering::Relaxed) {
                    return Err(ThriftyError::Interrupted);
                }
            }
        }
        inertia = self::inertia(data, &cl.means, &labels);
    }
    let centers: Vec<T> = cl.means.iter().map(|&v| T::of(v)).collect();
    Ok(Run { centers, labels, inertia, n_iter, converged, stats })
}

/// ‖c_j − c'_j‖ for every centre (the drift that moves the bounds).
fn center_drift(means: &[f64], prev: &[f64], d: usize) -> Vec<f64> {
    means
        .chunks_exact(d)
        .zip(prev.chunks_exact(d))
        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt())
        .collect()
}

/// Lloyd's Hamerly bounds as the run keeps them (stored relative to the drift sums).
struct Bounds<'a> {
    upper: &'a mut [f64],
    lower: &'a mut [f64],
    drift_sums: &'a mut DriftSums,
}

/// Lloyd's final E-step from the bounds the run kept: the labels become the nearest of the final
/// means `cl.means` (the bounds are valid for `assigned`, the centres of the last assignment, and are
/// moved by the drift to the final means). The bounds certify most rows; only the rest get a
/// distance tile — instead of a full pass over every row.
fn nearest_from_bounds<T: Real>(
    data: &Data<'_, T>,
    cl: &Clusters,
    assigned: &[f64],
    labels: &mut [u32],
    bounds: &mut Bounds<'_>,
) {
    let d = data.d;
    bounds.drift_sums.add(&center_drift(&cl.means, assigned, d));
    let geo = Geometry::<T>::new(&data.x, &cl.means, cl.k, d);
    let lloyd = Factors { hartigan: false };
    let outs = assign_pass(
        data,
        &geo,
        bounds.drift_sums,
        cl,
        labels,
        bounds.upper,
        bounds.lower,
        lloyd,
        min_weights(&cl.wsum),
    );
    for out in &outs {
        for &(i, to) in &out.moves {
            labels[i as usize] = to;
        }
    }
}

/// Hartigan's run leaves its Lloyd phase: from now on the size factors apply. The bounds stay valid
/// (they are distances), except after the bound-free dense Lloyd pass, which did not keep them.
fn switch_to_hartigan(
    f: &mut Factors,
    lloyd_phase: &mut bool,
    dense_pass_used: bool,
    upper: &mut [f64],
    lower: &mut [f64],
) {
    *f = Factors { hartigan: true };
    *lloyd_phase = false;
    if dense_pass_used {
        forget_bounds(upper, lower);
    }
}

/// Every row's bounds back to ∞ / 0: no information, valid for any centres.
fn forget_bounds(upper: &mut [f64], lower: &mut [f64]) {
    upper.iter_mut().for_each(|u| *u = f64::INFINITY);
    lower.iter_mut().for_each(|l| *l = 0.0);
}

fn converged_strict(stats: &[IterStats]) -> bool {
    stats.last().is_some_and(|s| s.batch_moves + s.sequential_moves == 0)
}

/// Hartigan-Wong's quick-transfer stage on the rows the bounds left uncertified: each such row is
/// re-checked, with exact distances against the current means, for a move between the two
/// clusters it lies between, in passes over the rows until a pass moves nothing (at most
/// `QUICK_PASSES`). Every move lowers the SSE exactly like a sequential one (the bounds of a moved
/// row are dropped). Why: in the tail a batch-then-sequential iteration moves a few boundary points
/// and the next full pass is needed only to find the ones those moves made movable — which are
/// almost always boundary rows of the same pair of clusters; the pairs cost 2 distances a row
/// instead of a full pass. The run still stops only when a full pass moves nothing.
fn quick_transfer<T: Real>(
    data: &Data<'_, T>,
    cl: &mut Clusters,
    labels: &mut [u32],
    outs: &[ChunkOut],
    f: Factors,
    upper: &mut [f64],
    lower: &mut [f64],
) -> usize {
    let mut total = 0;
    // Hartigan-Wong's live sets, per row: a pair is re-checked only when one of its clusters
    // changed since the row's last check (`changed[j]` and `checked[e]` are move-clock stamps).
    let mut changed = vec![0u64; cl.k];
    let mut checked = vec![0u64; outs.iter().map(|o| o.boundary.len()).sum()];
    let mut clock = 0u64;
    for _ in 0..QUICK_PASSES {
        let mut moved = 0;
        let mut e = 0;
        for out in outs {
            for (q, &(i, c1, c2)) in out.boundary.iter().enumerate() {
                if let Some(&(ahead, _, _)) = out.boundary.get(q + PREFETCH_AHEAD) {
                    data.x.prefetch_row(ahead as usize, data.d);
                }
                let seen = checked[e];
                e += 1;
                let (i, a) = (i as usize, labels[i as usize]);
                let b = if a == c1 {
                    c2
                } else if a == c2 {
                    c1
                } else {
                    continue;
                };
                if seen > 0 && changed[a as usize] < seen && changed[b as usize] < seen {
                    continue;
                }
                clock += 1;
                checked[e - 1] = clock;
                if pair_move(data, cl, labels, i, b as usize, f) {
                    (upper[i], lower[i]) = (f64::INFINITY, 0.0);
                    changed[a as usize] = clock + 1;
                    changed[b as usize] = clock + 1;
                    moved += 1;
                }
            }
        }
        total += moved;
        if moved == 0 {
            break;
        }
    }
    total
}

/// Exact Hartigan check of moving point i from its cluster to cluster b; applies the move.
fn pair_move<T: Real>(
    data: &Data<'_, T>,
    cl: &mut Clusters,
    labels: &mut [u32],
    i: usize,
    b: usize,
    f: Factors,
) -> bool {
    let d = data.d;
    let a = labels[i] as usize;
    let w = data.w[i];
    if a == b || b >= cl.k || cl.counts[a] <= 1 || w <= 0.0 {
        return false;
    }
    let gain = f.leave(cl.wsum[a], w) * data.dist2(i, &cl.means[a * d..(a + 1) * d], cl.mnorm[a]);
    let cost = f.join(cl.wsum[b], w) * data.dist2(i, &cl.means[b * d..(b + 1) * d], cl.mnorm[b]);
    apply_if_lower(data, cl, labels, i, (b, cost), gain)
}

/// Moves point i to `best.0` when its cost clears the removal gain by the margin.
fn apply_if_lower<T: Real>(
    data: &Data<'_, T>,
    cl: &mut Clusters,
    labels: &mut [u32],
    i: usize,
    best: (usize, f64),
    gain: f64,
) -> bool {
    if gain.is_finite() && best.1 < gain * (1.0 - MOVE_MARGIN) {
        let a = labels[i] as usize;
        cl.move_point(data, i, a, best.0);
        cl.refresh_mean(a);
        cl.refresh_mean(best.0);
        labels[i] = best.0 as u32;
        true
    } else {
        false
    }
}

/// The cluster b ≠ a of least `scale_b · (base + vals_b)` (the tile's size-scaled distances).
fn scaled_argmin_other<T: Real>(vals: &[T], scale: &[f64], base: f64, a: usize) -> usize {
    let mut best = (usize::from(a == 0), f64::INFINITY);
    for (b, (v, s)) in vals.iter().zip(scale).enumerate() {
        let c = s * (base + v.as_f64()).max(0.0);
        if b != a && c < best.1 {
            best = (b, c);
        }
    }
    best.0
}

/// One exact Hartigan check of point i; applies the move and returns true if it lowers the SSE.
fn sequential_move<T: Real>(data: &Data<'_, T>, cl: &mut Clusters, labels: &mut [u32], i: usize, f: Factors) -> bool {
    let d = data.d;
    let a = labels[i] as usize;
    let w = data.w[i];
    if cl.counts[a] <= 1 || w <= 0.0 {
        return false;
    }
    let gain = f.leave(cl.wsum[a], w) * data.dist2(i, &cl.means[a * d..(a + 1) * d], cl.mnorm[a]);
    if !gain.is_finite() {
        return false;
    }
    let mut best = (a, f64::INFINITY);
    for b in 0..cl.k {
        if b != a {
            let cost = f.join(cl.wsum[b], w) * data.dist2(i, &cl.means[b * d..(b + 1) * d], cl.mnorm[b]);
            if cost < best.1 {
                best = (b, cost);
            }
        }
    }
    apply_if_lower(data, cl, labels, i, best, gain)
}

/// Nearest centre of every row (ties → lowest index) with exact bounds u = ‖x − c_a‖ (f64) and
/// l ≤ min_{b≠a} ‖x − c_b‖ from the GEMM tile.
fn nearest_with_bounds<T: Real>(
    data: &Data<'_, T>,
    geo: &Geometry<T>,
    k: usize,
    upper: &mut [f64],
    lower: &mut [f64],
) -> Vec<u32> {
    let d = data.d;
    let n = data.n();
    let mut labels = vec![0u32; n];
    labels
        .par_chunks_mut(TILE)
        .zip(upper.par_chunks_mut(TILE))
        .zip(lower.par_chunks_mut(TILE))
        .enumerate()
        .for_each_init(
            || Scratch::<T>::new(d, k),
            |s, (t, ((lab, up), lo))| {
                if data.cancel.load(Ordering::Relaxed) {
                    return;
                }
                let base = t * TILE;
                s.rows.clear();
                s.rows.extend(base..base + lab.len());
                data.x.tile_partial(d, &geo.centers, &geo.ct, &geo.cc, k, s);
                for r in 0..lab.len() {
                    let i = base + r;
                    let (j1, p1, p2) = top2(&mut s.dots[r * k..(r + 1) * k]);
                    let slack = gemm_slack::<T>(data.xx[i], geo.cc_max, d);
                    lab[r] = j1 as u32;
                    up[r] = (data.xx[i] + p1.as_f64() + slack).max(0.0).sqrt() + geo.round;
                    lo[r] = if k > 1 {
                        ((data.xx[i] + p2.as_f64() - slack).max(0.0).sqrt() - geo.round).max(0.0)
                    } else {
                        f64::INFINITY
                    };
                }
            },
        );
    labels
}

/// Re-seed the clusters left without weight (by a batch, or by the first assignment) with one point
/// each, taken from another cluster; returns the points moved (their bounds must be reset).
///
/// Lloyd follows scikit-learn's `_relocate_empty_clusters_dense`: the m empty clusters take the m
/// points farthest from the centre they were just assigned to (`assigned`: the centres of the
/// assignment), whichever cluster they leave, and nothing moves when every point sits on its centre.
/// Hartigan takes, one empty cluster at a time, the point whose removal lowers the SSE most —
/// w·W_a/(W_a−w)·‖x − c_a‖² against the current means (`cl.means` must be fresh), re-checked exactly
/// before each move. Such a move lowers the SSE (the point becomes its own centre), so the
/// run stays monotone, and it never empties another cluster. Points already on their centre (gain
/// 0) are not moved: like scikit-learn when every point sits on its centre, a cluster stays empty
/// when moving a point into it would not lower the SSE (more clusters than distinct points).
fn relocate_empty<T: Real>(
    data: &Data<'_, T>,
    cl: &mut Clusters,
    labels: &mut [u32],
    f: Factors,
    assigned: &[f64],
) -> Vec<usize> {
    let empty = cl.weightless();
    if empty.is_empty() {
        return Vec::new();
    }
    let (d, n) = (data.d, data.n());
    let hartigan_gain = |cl: &Clusters, i: usize, a: usize| -> f64 {
        let w = data.w[i];
        if cl.counts[a] < 2 || w <= 0.0 {
            return -1.0; // not eligible
        }
        let g = w * f.leave(cl.wsum[a], w) * data.dist2(i, &cl.means[a * d..(a + 1) * d], cl.mnorm[a]);
        if g.is_finite() {
            g
        } else {
            -1.0
        }
    };
    let assigned_norms = if f.hartigan { Vec::new() } else { center_norms(assigned, d) };
    let score: Vec<f64> = {
        let cl = &*cl;
        labels
            .par_iter()
            .enumerate()
            .map(|(i, &a)| {
                let a = a as usize;
                if f.hartigan {
                    hartigan_gain(cl, i, a)
                } else {
                    data.dist2(i, &assigned[a * d..(a + 1) * d], assigned_norms[a])
                }
            })
            .collect()
    };
    if !f.hartigan && !score.iter().any(|&v| v > 0.0) {
        return Vec::new(); // more clusters than distinct points: relocating is pointless
    }
    // Highest score first (ties → lower index). Only the head of that order is normally used, so
    // select a few times more candidates than empty clusters and sort those; the full sort is the
    // fallback when Hartigan's re-checks exhaust the head.
    let before = |a: &usize, b: &usize| score[*b].total_cmp(&score[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..n).collect();
    let head = (4 * empty.len() + 64).min(n);
    if head < n {
        order.select_nth_unstable_by(head - 1, before);
        order.truncate(head);
    }
    order.sort_by(before);
    let mut moved = Vec::with_capacity(empty.len());
    if !f.hartigan {
        for (&j, &i) in empty.iter().zip(&order) {
            let a = labels[i] as usize;
            cl.move_point(data, i, a, j);
            labels[i] = j as u32;
            moved.push(i);
        }
        return moved;
    }
    let (mut next, mut full) = (0, head == n);
    'fill: for j in empty {
        loop {
            if next == order.len() {
                if full {
                    break 'fill; // no cluster can spare a point
                }
                order = (0..n).collect();
                order.sort_by(before);
                full = true;
            }
            let i = order[next];
            next += 1;
            if score[i] <= 0.0 {
                break 'fill; // sorted: no point whose move lowers the SSE is left
            }
            let a = labels[i] as usize;
            if hartigan_gain(cl, i, a) <= 0.0 {
                continue; // its cluster gave points away already
            }
            cl.move_point(data, i, a, j);
            cl.refresh_mean(a);
            cl.refresh_mean(j);
            labels[i] = j as u32;
            moved.push(i);
            break;
        }
    }
    moved
}

/// Exact weighted SSE of a partition against the given means (f64, parallel over fixed blocks).
pub fn inertia<T: Real>(data: &Data<'_, T>, means: &[f64], labels: &[u32]) -> f64 {
    let d = data.d;
    let norms = center_norms(means, d);
    let parts: Vec<f64> = labels
        .par_chunks(4096)
        .enumerate()
        .map(|(b, lab)| {
            lab.iter()
                .enumerate()
                .map(|(r, &j)| {
                    let i = b * 4096 + r;
                    data.w[i] * data.dist2(i, &means[j as usize * d..(j as usize + 1) * d], norms[j as usize])
                })
                .sum::<f64>()
        })
        .collect();
    parts.iter().sum()
}

#[cfg(test)]
mod kernel_tests {
    use super::*;

    fn lcg(state: &mut u64) -> f64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*state >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
    }

    /// Nearest centre (first on ties) and its distance, one row and one centre at a time.
    fn naive_nearest<T: Real>(row: &[T], means: &[f64], d: usize) -> (usize, f64) {
        means.chunks_exact(d).map(|c| exact_sq_dist(row, c)).enumerate().fold((0, f64::INFINITY), |b, (j, v)| {
            if v < b.1 {
                (j, v)
            } else {
                b
            }
        })
    }

    fn check_dense_scan<T: Real>() {
        let mut state = 7u64;
        // every compile-time dimension, the generic one, k·d up to DENSE_MAX_KD, ragged groups
        for (d, k) in [(1, 1), (1, 32), (2, 8), (2, 16), (3, 10), (4, 8), (5, 6), (8, 4), (16, 2), (32, 1)] {
            for len in [1usize, 7, 8, 9, 61] {
                let base = 3;
                // coarse values: many exact ties between centres
                let x: Vec<T> = (0..(base + len) * d).map(|_| T::of(lcg(&mut state).round())).collect();
                let means: Vec<f64> = (0..k * d).map(|_| lcg(&mut state).round() * 0.5).collect();
                let mut seen = vec![false; len];
                dense_scan(&x, &means, k, d, base, len, |r, row, b, best| {
                    let i = base + r;
                    assert_eq!(row, &x[i * d..(i + 1) * d]);
                    let (j, v) = naive_nearest(row, &means, d);
                    assert_eq!((b, best.to_bits()), (j, v.to_bits()), "d={d} k={k} len={len} r={r}");
                    seen[r] = true;
                });
                assert!(seen.iter().all(|&s| s), "every row reported once");
            }
        }
    }

    /// The bound-free fused Lloyd pass takes the bounded pass's decisions, step after step of a
    /// Lloyd run on float32 data (where the AVX-512 kernel exists; else there is no fused pass).
    #[test]
    fn fused_lloyd_pass_moves_what_the_bounded_pass_moves() {
        check_fused_lloyd_pass::<f32>();
        check_fused_lloyd_pass::<f64>();
    }

    fn check_fused_lloyd_pass<T: Real>() {
        for (n, d, k) in [(1000usize, 16usize, 40usize), (517, 3, 70), (300, 32, 5)] {
            let mut state = 5u64;
            // half the rows on a coarse grid: exact ties between centres occur
            let x: Vec<T> =
                (0..n * d).map(|i| T::of(if i % 2 == 0 { lcg(&mut state) } else { lcg(&mut state).round() })).collect();
            let xx: Vec<f64> = x.chunks_exact(d).map(sq_norm).collect();
            let w = vec![1.0; n];
            let cancel = AtomicBool::new(false);
            let data = Data { x: Matrix::Dense(&x), d, xx: &xx, w: &w, w_max: 1.0, cancel: &cancel };
            let Some(xs) = fused_eligible(&data.x, k, d) else {
                assert!(!small_d::tiles_available::<T>(d));
                continue;
            };
            let init: Vec<f64> = x[..k * d].iter().map(|&v| v.as_f64()).collect();
            let mut labels: Vec<u32> = (0..n).map(|i| (i % k) as u32).collect();
            let mut cl = Clusters::from_labels(&data, &labels, k, &init, false).0;
            cl.refresh_means(true);
            let lloyd = Factors { hartigan: false };
            let mut total = 0;
            for step in 0..6 {
                let fused: Vec<(u32, u32)> =
                    fused_lloyd_pass(&data, xs, &cl, &labels).into_iter().flat_map(|o| o.moves).collect();
                let (mut up, mut lo) = (vec![f64::INFINITY; n], vec![0.0; n]);
                let geo = Geometry::<T>::new(&data.x, &cl.means, k, d);
                let bounded: Vec<(u32, u32)> = assign_pass(
                    &data,
                    &geo,
                    &DriftSums::new(k),
                    &cl,
                    &labels,
                    &mut up,
                    &mut lo,
                    lloyd,
                    min_weights(&cl.wsum),
                )
                .into_iter()
                .flat_map(|o| o.moves)
                .collect();
                assert_eq!(fused, bounded, "n={n} d={d} k={k} step {step}");
                total += fused.len();
                for &(i, to) in &fused {
                    cl.move_point(&data, i as usize, labels[i as usize] as usize, to as usize);
                    labels[i as usize] = to;
                }
                cl.refresh_means(true);
            }
            assert!(total > 0, "the steps moved points");
        }
    }

    #[test]
    fn dense_scan_matches_a_per_row_scan_bit_for_bit() {
        check_dense_scan::<f64>();
        check_dense_scan::<f32>();
    }

    #[test]
    fn half_separations_match_the_pairwise_minimum() {
        let mut state = 11u64;
        for (k, d) in [(1, 3), (2, 1), (5, 7), (16, 4), (17, 33), (40, 2)] {
            let means: Vec<f64> = (0..k * d).map(|_| lcg(&mut state)).collect();
            let got = half_separations(&means, k, d);
            for j in 0..k {
                let cj = &means[j * d..(j + 1) * d];
                let best = (0..k)
                    .filter(|&o| o != j)
                    .map(|o| cj.iter().zip(&means[o * d..(o + 1) * d]).map(|(a, b)| (a - b) * (a - b)).sum::<f64>())
                    .fold(f64::INFINITY, f64::min);
                assert_eq!(got[j].to_bits(), (0.5 * best.sqrt()).to_bits(), "k={k} d={d} j={j}");
            }
        }
    }
}
