//! k-means over the C ABI: fit (batched Hartigan or bounded Lloyd, weights, k-means++ / random /
//! explicit initial centres, seed, threads), predict and transform. float64. All three can be
//! interrupted (`thrifty_set_interrupt_check`).
use thrifty_core::kmeans::{self, Algorithm, Init, Params};

use crate::{enter, guard, matrix, opt_slice, out, put, size2, threads, write_matrix, Fail, Res};

/// Batched Hartigan (the default of the Python and R front ends).
pub const THRIFTY_KMEANS_HARTIGAN: i32 = 0;
/// Lloyd's algorithm with Hamerly bounds.
pub const THRIFTY_KMEANS_LLOYD: i32 = 1;

/// Greedy k-means++ seeding (scikit-learn's semantics), one per run.
pub const THRIFTY_INIT_KMEANSPP: i32 = 0;
/// k distinct rows drawn with probability proportional to the weights.
pub const THRIFTY_INIT_RANDOM: i32 = 1;
/// Explicit initial centres (`init_centers`, k × d).
pub const THRIFTY_INIT_CENTERS: i32 = 2;

/// Scalars of a k-means fit (all 8-byte fields, so the struct is easy to mirror in any FFI).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThriftyKmeansInfo {
    /// Weighted sum of squared distances to the assigned centre (R's `tot.withinss`).
    pub inertia: f64,
    /// Weighted total sum of squares about the weighted mean (R's `totss`).
    pub totss: f64,
    /// Iterations of the best run.
    pub n_iter: i64,
    /// 1 when the best run stopped at a fixed point or below `tol`, 0 at `max_iter`.
    pub converged: i64,
    /// Index of the winning run (0-based; its random stream is `(seed, best_run)`).
    pub best_run: i64,
    /// Number of distinct centres (below k when the data hold duplicate points).
    pub n_distinct_centers: i64,
}

fn algorithm(code: i32) -> Res<Algorithm> {
    match code {
        THRIFTY_KMEANS_HARTIGAN => Ok(Algorithm::Hartigan),
        THRIFTY_KMEANS_LLOYD => Ok(Algorithm::Lloyd),
        other => Err(Fail::kind(
            "algorithm",
            format!("must be THRIFTY_KMEANS_HARTIGAN (0) or THRIFTY_KMEANS_LLOYD (1), got {other}"),
        )),
    }
}

/// Fit k-means to `x` (n × d, `layout`).
///
/// - `weights`: n non-negative sample weights, not all zero, or NULL (all 1).
/// - `k` clusters (1 ≤ k ≤ n); `init` one of `THRIFTY_INIT_*`; `init_centers` (k × d, `layout`)
///   is read only for `THRIFTY_INIT_CENTERS` (may be NULL otherwise).
/// - `n_init` runs (≥ 1, the lowest inertia wins), `max_iter` ≥ 1, `tol` ≥ 0 (scikit-learn's rule:
///   stop when Σ‖Δc‖² ≤ tol · mean per-feature variance; 0 runs to a fixed point),
///   `algorithm` one of `THRIFTY_KMEANS_*`, `seed`, `n_threads` (0 = all cores).
///
/// Outputs (caller-allocated): `centers_out` k × d (`layout`); `labels_out` n cluster indices
/// (0-based); `withinss_out` k weighted within-cluster sums of squares, or NULL; `init_centers_out`
/// k × d initial centres of the winning run, or NULL; `info_out` the scalars.
///
/// Same seed and parameters as `thrifty.cluster.HartiganKMeans(k, random_state=seed, n_init=...,
/// max_iter=..., tol=...)` give identical labels and centres.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_kmeans_fit(
    x: *const f64,
    n: usize,
    d: usize,
    layout: i32,
    weights: *const f64,
    k: usize,
    init: i32,
    init_centers: *const f64,
    n_init: usize,
    max_iter: usize,
    tol: f64,
    algorithm: i32,
    seed: u64,
    n_threads: usize,
    centers_out: *mut f64,
    labels_out: *mut i32,
    withinss_out: *mut f64,
    init_centers_out: *mut f64,
    info_out: *mut ThriftyKmeansInfo,
) -> i32 {
    guard(|| {
        let xs = matrix(x, n, d, layout, "x")?;
        let w = opt_slice(weights, n);
        let alg = self::algorithm(algorithm)?;
        if k == 0 {
            return Err(Fail::invalid("k", "must be at least 1"));
        }
        let kd = size2("centers", k, d)?;
        let init_rm;
        let init_kind = match init {
            THRIFTY_INIT_KMEANSPP => Init::KMeansPlusPlus,
            THRIFTY_INIT_RANDOM => Init::Random,
            THRIFTY_INIT_CENTERS => {
                init_rm = matrix(init_centers, k, d, layout, "init_centers")?;
                Init::Centers(&init_rm[..])
            }
            other => {
                return Err(Fail::kind(
                    "init",
                    format!("must be one of THRIFTY_INIT_KMEANSPP/RANDOM/CENTERS (0/1/2), got {other}"),
                ))
            }
        };
        let centers = out(centers_out, kd, "centers_out")?;
        let labels = out(labels_out, n, "labels_out")?;
        if info_out.is_null() {
            return Err(Fail::null("info_out"));
        }
        let params = Params { n_clusters: k, n_init, max_iter, tol, algorithm: alg, seed };
        let fit = enter(threads(n_threads), |c| kmeans::fit_cancellable(&xs, n, d, w, init_kind, &params, c))?;
        let run = &fit.run;
        write_matrix(centers, &run.centers, k, d, layout);
        for (l, &v) in labels.iter_mut().zip(&run.labels) {
            *l = v as i32;
        }
        let wss = withinss(&xs, d, w, &run.centers, &run.labels, k);
        if !withinss_out.is_null() {
            out(withinss_out, k, "withinss_out")?.copy_from_slice(&wss);
        }
        if !init_centers_out.is_null() {
            write_matrix(out(init_centers_out, kd, "init_centers_out")?, &fit.init_centers, k, d, layout);
        }
        let mut distinct: Vec<&[f64]> = run.centers.chunks_exact(d).collect();
        distinct.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        distinct.dedup();
        let info = ThriftyKmeansInfo {
            inertia: run.inertia,
            totss: totss(&xs, d, w),
            n_iter: run.n_iter as i64,
            converged: run.converged as i64,
            best_run: fit.best_run as i64,
            n_distinct_centers: distinct.len() as i64,
        };
        put(info_out, info, "info_out")
    })
}

/// Weighted within-cluster sums of squares about the given centres.
fn withinss(x: &[f64], d: usize, w: Option<&[f64]>, centers: &[f64], labels: &[u32], k: usize) -> Vec<f64> {
    let mut out = vec![0.0; k];
    for (i, (row, &l)) in x.chunks_exact(d).zip(labels).enumerate() {
        let c = &centers[l as usize * d..(l as usize + 1) * d];
        let s: f64 = row.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
        out[l as usize] += w.map_or(1.0, |w| w[i]) * s;
    }
    out
}

/// Weighted total sum of squares about the weighted column means (two passes).
fn totss(x: &[f64], d: usize, w: Option<&[f64]>) -> f64 {
    let mut mean = vec![0.0; d];
    let mut wsum = 0.0;
    for (i, row) in x.chunks_exact(d).enumerate() {
        let wi = w.map_or(1.0, |w| w[i]);
        wsum += wi;
        for (m, v) in mean.iter_mut().zip(row) {
            *m += wi * v;
        }
    }
    mean.iter_mut().for_each(|m| *m /= wsum);
    x.chunks_exact(d)
        .enumerate()
        .map(|(i, row)| w.map_or(1.0, |w| w[i]) * row.iter().zip(&mean).map(|(a, m)| (a - m) * (a - m)).sum::<f64>())
        .sum()
}

/// Index of the nearest centre (0-based, ties → lowest index) of every row of `x` (n × d),
/// against `centers` (k × d); both in `layout`. `labels_out`: n values.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_kmeans_predict(
    x: *const f64,
    n: usize,
    d: usize,
    centers: *const f64,
    k: usize,
    layout: i32,
    n_threads: usize,
    labels_out: *mut i32,
) -> i32 {
    guard(|| {
        let xs = matrix(x, n, d, layout, "x")?;
        let cs = matrix(centers, k, d, layout, "centers")?;
        let labels = out(labels_out, n, "labels_out")?;
        let l = enter(threads(n_threads), |c| kmeans::predict(&xs, n, d, &cs, k, c))?;
        for (o, v) in labels.iter_mut().zip(l) {
            *o = v as i32;
        }
        Ok(())
    })
}

/// Euclidean distances of every row of `x` (n × d) to every centre (k × d): `dist_out` n × k,
/// all in `layout`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_kmeans_transform(
    x: *const f64,
    n: usize,
    d: usize,
    centers: *const f64,
    k: usize,
    layout: i32,
    n_threads: usize,
    dist_out: *mut f64,
) -> i32 {
    guard(|| {
        let xs = matrix(x, n, d, layout, "x")?;
        let cs = matrix(centers, k, d, layout, "centers")?;
        let dist = out(dist_out, size2("dist_out", n, k)?, "dist_out")?;
        let t = enter(threads(n_threads), |c| kmeans::transform(&xs, n, d, &cs, k, c))?;
        write_matrix(dist, &t, n, k, layout);
        Ok(())
    })
}
