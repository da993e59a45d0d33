//! DPP sampling and greedy selection over the C ABI: orthonormalisation, projection DPPs,
//! L-ensembles and k-DPPs, Haar / OPE / Daubechies coresets with unbiased weights, and greedy
//! entropy / MAP / mutual-information selection. float64. Every call that computes can be
//! interrupted (`thrifty_set_interrupt_check`).
//!
//! Each function mirrors the Python class or function named in its comment, with the same streams:
//! sample s of a call seeded with `seed` draws from the core's stream (seed, s).
use std::sync::atomic::AtomicBool;
use thrifty_core::dpp::ensemble::Spectrum;
use thrifty_core::dpp::greedy::{self, Check};
use thrifty_core::dpp::kernels::{self, Split, Stratified};
use thrifty_core::dpp::ortho;
use thrifty_core::dpp::projection::{Method, OrthoCheck, Projection};
use thrifty_core::dpp::PivotPath;

use crate::{
    enter, fill_ragged, guard, matrix, opt_slice, out, put, size2, symmetric, threads, write_matrix, Fail, Res,
    ThriftyRagged,
};

/// Projection sampler: accept/reject proposals from the leverage scores (the default).
pub const THRIFTY_DPP_ACCEPT_REJECT: i32 = 0;
/// Projection sampler: the chain rule with a full residual update per step.
pub const THRIFTY_DPP_CHAIN: i32 = 1;

/// Coreset kernel: Haar wavelets on a k-d box partition (stratified sampling).
pub const THRIFTY_KERNEL_HAAR: i32 = 0;
/// Coreset kernel: the multivariate Jacobi / Legendre orthogonal-polynomial ensemble.
pub const THRIFTY_KERNEL_OPE: i32 = 1;
/// Coreset kernel: periodised tensor Daubechies scaling functions (m a power of two).
pub const THRIFTY_KERNEL_DAUBECHIES: i32 = 2;

/// Haar split: equal-volume boxes.
pub const THRIFTY_SPLIT_VOLUME: i32 = 0;
/// Haar split: equal-count boxes.
pub const THRIFTY_SPLIT_QUANTILE: i32 = 1;

/// Greedy selection: validate nothing beyond the shape.
pub const THRIFTY_CHECK_SKIP: i32 = 0;
/// Greedy selection: validate the entries the selection reads (the default).
pub const THRIFTY_CHECK_READ: i32 = 1;
/// Greedy selection: validate the whole matrix.
pub const THRIFTY_CHECK_FULL: i32 = 2;

fn method(code: i32) -> Res<Method> {
    match code {
        THRIFTY_DPP_ACCEPT_REJECT => Ok(Method::AcceptReject),
        THRIFTY_DPP_CHAIN => Ok(Method::Chain),
        other => Err(Fail::kind(
            "method",
            format!("must be THRIFTY_DPP_ACCEPT_REJECT (0) or THRIFTY_DPP_CHAIN (1), got {other}"),
        )),
    }
}

fn positive(v: usize, arg: &str) -> Res<()> {
    if v == 0 {
        return Err(Fail::invalid(arg, "must be at least 1"));
    }
    Ok(())
}

/// Orthonormal basis Q (n × r) of the column space of `features` (n × p), r ≤ p the numerical
/// rank (singular values below `rtol`·σ_max of the column-equilibrated matrix dropped, as the
/// Python default `equilibrate=True`; `rtol` ≤ 0 means the default 1e-6).
/// `q_out` must hold n × p values; its first n × r are written (in `layout`, leading dimension n
/// for column-major). (`thrifty.dpp.orthonormalize`)
#[no_mangle]
pub unsafe extern "C" fn thrifty_dpp_orthonormalize(
    features: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    rtol: f64,
    q_out: *mut f64,
    rank_out: *mut usize,
) -> i32 {
    guard(|| {
        let f = matrix(features, n, p, layout, "features")?;
        let q_buf = out(q_out, size2("q_out", n, p)?, "q_out")?;
        if rank_out.is_null() {
            return Err(Fail::null("rank_out"));
        }
        let tol = if rtol <= 0.0 { 1e-6 } else { rtol };
        // As thrifty.dpp.orthonormalize: columns equilibrated before the rank decision.
        let (q, r) = enter(None, |c| ortho::orthonormalize(&f[..], n, p, tol, true, c))?;
        write_matrix(q_buf, &q, n, r, layout);
        put(rank_out, r, "rank_out")
    })
}

fn write_flat(dst: &mut [i64], flat: &[usize]) {
    for (o, v) in dst.iter_mut().zip(flat) {
        *o = *v as i64;
    }
}

/// The orthonormality check of `thrifty.dpp.ProjectionDPP(U, check=True)`: exact (to 1e-6) when
/// n·p² ≤ 2e6, else randomized with 2 probes (their seed drawn from `seed`; the check's outcome,
/// not the samples, depends on it).
fn ortho_check(on: bool, n: usize, p: usize, seed: u64) -> OrthoCheck {
    if !on {
        OrthoCheck::Skip
    } else if (n as f64) * (p as f64) * (p as f64) <= 2_000_000.0 {
        OrthoCheck::Exact { tol: 1e-6 }
    } else {
        OrthoCheck::Randomized { tol: 1e-6, probes: 2, seed }
    }
}

/// `count` exact samples of the projection DPP K = UUᵀ, `u` n × p with orthonormal columns
/// (checked to 1e-6 when `check` ≠ 0: exactly when n·p² ≤ 2e6, else by 2 random probes). Every
/// sample has exactly p items: `samples_out` holds count × p indices, sample s at
/// `samples_out[s*p .. (s+1)*p]` (in order of selection).
/// `leverage_out` (n, or NULL) receives K_ii. (`thrifty.dpp.ProjectionDPP(U).sample_many`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_projection_sample(
    u: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    check: i32,
    method: i32,
    count: usize,
    seed: u64,
    n_threads: usize,
    samples_out: *mut i64,
    leverage_out: *mut f64,
) -> i32 {
    guard(|| {
        let us = matrix(u, n, p, layout, "u")?;
        let m = self::method(method)?;
        positive(count, "count")?;
        let dst = out(samples_out, size2("samples_out", count, p)?, "samples_out")?;
        let proj = Projection::new(&us[..], n, p, ortho_check(check != 0, n, p, seed))?;
        let flat = enter(threads(n_threads), |c| proj.sample_range(&us[..], 0, count, m, seed, c))?;
        write_flat(dst, &flat);
        if !leverage_out.is_null() {
            out(leverage_out, n, "leverage_out")?.copy_from_slice(&proj.leverage);
        }
        Ok(())
    })
}

unsafe fn spectrum(l: *const f64, features: *const f64, n: usize, d: usize, layout: i32) -> Res<Spectrum> {
    match (l.is_null(), features.is_null()) {
        (false, true) => {
            Ok(Spectrum::from_kernel(symmetric(l, n, layout, "l")?, n, f64::EPSILON, thrifty_core::dpp::never())?)
        }
        (true, false) => {
            let f = matrix(features, n, d, layout, "features")?;
            Ok(Spectrum::from_features(&f[..], n, d)?)
        }
        _ => Err(Fail::invalid("l", "give exactly one of l (n x n) and features (n x d); the other must be NULL")),
    }
}

/// `count` exact samples of the L-ensemble P(S) ∝ det L_S, from `l` (n × n symmetric PSD; `d`
/// ignored) or from `features` Φ (n × d, L = ΦΦᵀ) — exactly one of them non-NULL. Samples have
/// random sizes: they come back in `out` (release with `thrifty_ragged_free`).
/// `inclusion_out` (n, or NULL) receives P(i ∈ S). (`thrifty.dpp.LEnsemble(...).sample_many`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_lensemble_sample(
    l: *const f64,
    features: *const f64,
    n: usize,
    d: usize,
    layout: i32,
    count: usize,
    seed: u64,
    n_threads: usize,
    out_samples: *mut ThriftyRagged,
    inclusion_out: *mut f64,
) -> i32 {
    guard(|| {
        if out_samples.is_null() {
            return Err(Fail::null("out_samples"));
        }
        positive(count, "count")?;
        let spec = spectrum(l, features, n, d, layout)?;
        let rows = enter(threads(n_threads), |c| spec.sample_many(0, count, seed, c))?;
        if !inclusion_out.is_null() {
            out(inclusion_out, n, "inclusion_out")?.copy_from_slice(&spec.inclusion()?);
        }
        fill_ragged(out_samples, rows)
    })
}

/// `count` exact k-DPP samples (the L-ensemble restricted to |S| = k, 1 ≤ k ≤ rank of L), from
/// `l` or `features` as in `thrifty_dpp_lensemble_sample`. `samples_out` holds count × k indices,
/// sample s at `samples_out[s*k ..]`. (`thrifty.dpp.LEnsemble(...).sample_k_many`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_kdpp_sample(
    l: *const f64,
    features: *const f64,
    n: usize,
    d: usize,
    layout: i32,
    k: usize,
    count: usize,
    seed: u64,
    n_threads: usize,
    samples_out: *mut i64,
) -> i32 {
    guard(|| {
        positive(k, "k")?;
        positive(count, "count")?;
        let dst = out(samples_out, size2("samples_out", count, k)?, "samples_out")?;
        let spec = spectrum(l, features, n, d, layout)?;
        let flat = enter(threads(n_threads), |c| spec.sample_k_many(k, 0, count, seed, c))?;
        write_flat(dst, &flat);
        Ok(())
    })
}

/// Options of `thrifty_dpp_coreset`. Fill with `thrifty_coreset_options_init`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThriftyCoresetOptions {
    /// `THRIFTY_KERNEL_*`. Default HAAR.
    pub kernel: i32,
    /// Haar: `THRIFTY_SPLIT_*`. Default VOLUME.
    pub split: i32,
    /// Daubechies order, 1..=4. Default 2.
    pub order: i32,
    /// Non-zero: rescale the weights to sum to n (exact for constants, no longer unbiased).
    pub self_normalized: i32,
    /// OPE: Jacobi exponents (> −1) of the weight Π(1−x)^a(1+x)^b. Default 0, 0 (Legendre).
    pub jacobi_a: f64,
    pub jacobi_b: f64,
    /// n positive values of the data density γ̃ at the points, or NULL (uniform).
    pub density: *const f64,
    /// d × 2 box (low, high per axis; the call's layout) mapped onto the kernel's domain, or NULL
    /// (the data's bounding box, enlarged by 1e-6 of its span).
    pub domain: *const f64,
}

impl Default for ThriftyCoresetOptions {
    fn default() -> Self {
        ThriftyCoresetOptions {
            kernel: THRIFTY_KERNEL_HAAR,
            split: THRIFTY_SPLIT_VOLUME,
            order: 2,
            self_normalized: 0,
            jacobi_a: 0.0,
            jacobi_b: 0.0,
            density: std::ptr::null(),
            domain: std::ptr::null(),
        }
    }
}

/// Fill `options` with the defaults (those of `thrifty.dpp.Coreset`).
#[no_mangle]
pub unsafe extern "C" fn thrifty_coreset_options_init(options: *mut ThriftyCoresetOptions) -> i32 {
    guard(|| put(options, ThriftyCoresetOptions::default(), "options"))
}

/// Affine map of the data box onto [lo, hi]^d, exactly as `thrifty.dpp._kernels.map_to_domain`.
fn map_to_domain(x: &[f64], n: usize, d: usize, domain: Option<Vec<f64>>, lo: f64, hi: f64) -> Res<Vec<f64>> {
    let (a, b): (Vec<f64>, Vec<f64>) = match domain {
        None => {
            let mut a = vec![f64::INFINITY; d];
            let mut b = vec![f64::NEG_INFINITY; d];
            for row in x.chunks_exact(d) {
                for j in 0..d {
                    a[j] = a[j].min(row[j]);
                    b[j] = b[j].max(row[j]);
                }
            }
            let span: Vec<f64> = (0..d).map(|j| if b[j] > a[j] { b[j] - a[j] } else { 1.0 }).collect();
            ((0..d).map(|j| a[j] - 1e-6 * span[j]).collect(), (0..d).map(|j| b[j] + 1e-6 * span[j]).collect())
        }
        Some(bx) => {
            if bx.iter().any(|v| !v.is_finite()) || (0..d).any(|j| !(bx[2 * j + 1] > bx[2 * j])) {
                return Err(Fail::invalid(
                    "domain",
                    format!("must be a finite array of shape ({d}, 2) with low < high on every axis"),
                ));
            }
            let a: Vec<f64> = (0..d).map(|j| bx[2 * j]).collect();
            let b: Vec<f64> = (0..d).map(|j| bx[2 * j + 1]).collect();
            let outside = x.chunks_exact(d).filter(|r| (0..d).any(|j| r[j] < a[j] || r[j] > b[j])).count();
            if outside > 0 {
                return Err(Fail::invalid("x", format!("has {outside} point(s) outside the kernel's domain")));
            }
            (a, b)
        }
    };
    let mut z = thrifty_core::alloc::try_zeroed("the points mapped to the kernel's domain", n * d)?;
    for (zr, xr) in z.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        for j in 0..d {
            let v = lo + (hi - lo) * (xr[j] - a[j]) / (b[j] - a[j]);
            zr[j] = v.clamp(lo, hi);
        }
    }
    Ok(z)
}

/// The scalar choices of `ThriftyCoresetOptions` (its pointers read beforehand), which can travel
/// to the worker thread of [`enter`].
#[derive(Clone, Copy)]
struct CoresetChoice {
    kernel: i32,
    split: i32,
    order: i32,
    jacobi_a: f64,
    jacobi_b: f64,
}

/// One coreset draw: indices, their inclusion probabilities, and K_ii of every point.
#[allow(clippy::too_many_arguments)]
fn coreset_draw(
    x: &[f64],
    n: usize,
    d: usize,
    m: usize,
    o: &CoresetChoice,
    density: Option<&[f64]>,
    domain: Option<Vec<f64>>,
    seed: u64,
    cancel: &AtomicBool,
) -> Res<(Vec<usize>, Vec<f64>)> {
    if m > n {
        return Err(Fail::invalid("m", format!("m = {m} exceeds the number of points ({n})")));
    }
    let ones = thrifty_core::alloc::try_filled("the unit density", n, 1.0)?;
    let g: &[f64] = density.unwrap_or(&ones);
    match o.kernel {
        THRIFTY_KERNEL_HAAR => {
            let split = match o.split {
                THRIFTY_SPLIT_VOLUME => Split::Volume,
                THRIFTY_SPLIT_QUANTILE => Split::Quantile,
                other => {
                    return Err(Fail::kind(
                        "split",
                        format!("must be THRIFTY_SPLIT_VOLUME (0) or _QUANTILE (1), got {other}"),
                    ))
                }
            };
            let z = map_to_domain(x, n, d, domain, 0.0, 1.0)?;
            let (cells, _vol) = kernels::partition(&z, n, d, m, split)?;
            let g = if split == Split::Quantile { &ones[..] } else { g };
            let (kdiag, _rank) = kernels::haar_diagonal(&cells, m, g)?;
            // As thrifty.dpp.StratifiedDPP: relabel the cells 0..rank-1 (sorted) and renormalise.
            let mut used: Vec<usize> = cells.clone();
            used.sort_unstable();
            used.dedup();
            let mut label = thrifty_core::alloc::try_filled("the cell labels", m, usize::MAX)?;
            for (l, &c) in used.iter().enumerate() {
                label[c] = l;
            }
            let lab = thrifty_core::alloc::try_collect("the cell labels", cells.iter().map(|&c| label[c]))?;
            let mut tot = vec![0.0; used.len()];
            for (i, &l) in lab.iter().enumerate() {
                tot[l] += kdiag[i];
            }
            if tot.iter().any(|&t| !(t > 0.0)) {
                return Err(Fail::invalid("density", "every cell needs a positive total probability"));
            }
            let kd: Vec<f64> = (0..n).map(|i| kdiag[i] / tot[lab[i]]).collect();
            let strat = Stratified::new(&lab, used.len(), &kd)?;
            let idx = strat.sample_range(0, 1, seed, cancel)?;
            Ok((idx, kd))
        }
        THRIFTY_KERNEL_OPE | THRIFTY_KERNEL_DAUBECHIES => {
            let feats = if o.kernel == THRIFTY_KERNEL_DAUBECHIES {
                if !(1..=4).contains(&o.order) {
                    return Err(Fail::invalid("order", format!("must be in [1, 4], got {}", o.order)));
                }
                if !m.is_power_of_two() {
                    return Err(Fail::invalid(
                        "m",
                        format!("must be a power of two for the Daubechies kernel, got {m}"),
                    ));
                }
                let z = map_to_domain(x, n, d, domain, 0.0, 1.0)?;
                kernels::daubechies_features(&z, n, d, m, o.order as usize, g, cancel)?
            } else {
                if !(o.jacobi_a > -1.0 && o.jacobi_b > -1.0) {
                    return Err(Fail::invalid(
                        "jacobi",
                        format!("exponents must be > -1, got ({}, {})", o.jacobi_a, o.jacobi_b),
                    ));
                }
                let z = map_to_domain(x, n, d, domain, -1.0, 1.0)?;
                kernels::jacobi_features(&z, n, d, m, o.jacobi_a, o.jacobi_b, g, cancel)?
            };
            // ProjectionDPP.from_features: orthonormalise (rtol 1e-6, equilibrated), no
            // orthonormality check.
            let (q, r) = ortho::orthonormalize(&feats, n, m, 1e-6, true, cancel)?;
            let proj = Projection::new(&q, n, r, OrthoCheck::Skip)?;
            let idx = proj.sample_range(&q, 0, 1, Method::AcceptReject, seed, cancel)?;
            Ok((idx, proj.leverage))
        }
        other => Err(Fail::kind(
            "kernel",
            format!("must be THRIFTY_KERNEL_HAAR (0), _OPE (1) or _DAUBECHIES (2), got {other}"),
        )),
    }
}

/// A weighted DPP coreset of `x` (n × d, `layout`) of size `m` (at most m: Haar with equal-volume
/// boxes returns one point per non-empty box): Σ_{i∈S} w_i f(x_i) estimates Σ_i f(x_i) without
/// bias (w_i = 1/K_ii). `options`: NULL for the defaults. Outputs: `indices_out` and `weights_out`
/// (m values each; the first `*size_out` are written), `inclusion_out` (n, or NULL) K_ii of every
/// point. Same seed as `thrifty.dpp.Coreset(X, m, ..., random_state=seed)`, same coreset.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_coreset(
    x: *const f64,
    n: usize,
    d: usize,
    layout: i32,
    m: usize,
    options: *const ThriftyCoresetOptions,
    seed: u64,
    indices_out: *mut i64,
    weights_out: *mut f64,
    size_out: *mut usize,
    inclusion_out: *mut f64,
) -> i32 {
    guard(|| {
        let o = if options.is_null() { ThriftyCoresetOptions::default() } else { *options };
        let xs = matrix(x, n, d, layout, "x")?;
        positive(m, "m")?;
        let idx_buf = out(indices_out, m, "indices_out")?;
        let w_buf = out(weights_out, m, "weights_out")?;
        if size_out.is_null() {
            return Err(Fail::null("size_out"));
        }
        if xs.iter().any(|v| !v.is_finite()) {
            return Err(Fail::from(thrifty_core::ThriftyError::NotFinite { arg: "x" }));
        }
        let density = opt_slice(o.density, n);
        let domain =
            if o.domain.is_null() { None } else { Some(matrix(o.domain, d, 2, layout, "domain")?.into_owned()) };
        let choice = CoresetChoice {
            kernel: o.kernel,
            split: o.split,
            order: o.order,
            jacobi_a: o.jacobi_a,
            jacobi_b: o.jacobi_b,
        };
        let (idx, kd) = enter(None, |c| coreset_draw(&xs, n, d, m, &choice, density, domain, seed, c))?;
        let mut w: Vec<f64> = idx.iter().map(|&i| 1.0 / kd[i]).collect();
        if o.self_normalized != 0 {
            let c = n as f64 / crate::numpy_sum(&w);
            w.iter_mut().for_each(|v| *v *= c);
        }
        for (o, &i) in idx_buf.iter_mut().zip(&idx) {
            *o = i as i64;
        }
        w_buf[..w.len()].copy_from_slice(&w);
        if !inclusion_out.is_null() {
            out(inclusion_out, n, "inclusion_out")?.copy_from_slice(&kd);
        }
        put(size_out, idx.len(), "size_out")
    })
}

unsafe fn write_path(
    path: &PivotPath,
    items_out: *mut i64,
    pivots_out: *mut f64,
    k: usize,
    n_out: *mut usize,
) -> Res<()> {
    let items = out(items_out, k, "items_out")?;
    let piv = out(pivots_out, k, "pivots_out")?;
    for (o, &i) in items.iter_mut().zip(&path.items) {
        *o = i as i64;
    }
    piv[..path.pivots.len()].copy_from_slice(&path.conditional_variances());
    put(n_out, path.items.len(), "n_selected_out")
}

fn check_mode(code: i32) -> Res<Check> {
    match code {
        THRIFTY_CHECK_SKIP => Ok(Check::Skip),
        THRIFTY_CHECK_READ => Ok(Check::Read),
        THRIFTY_CHECK_FULL => Ok(Check::Full),
        other => Err(Fail::kind("check", format!("must be THRIFTY_CHECK_SKIP/READ/FULL (0/1/2), got {other}"))),
    }
}

fn check_tol(tol: f64) -> Res<f64> {
    if !(tol.is_finite() && tol > 0.0) {
        return Err(Fail::invalid("tol", format!("must be positive and finite, got {tol}")));
    }
    Ok(tol)
}

/// Greedy maximum-entropy (log-det) selection of up to k items from the covariance `cov` (n × n,
/// symmetric: read in place in either layout). Stops early when every conditional variance falls
/// below `tol`·max Σ_ii. `items_out` / `pivots_out` hold k values (chosen items in order, their
/// conditional variances); `*n_selected_out` are written. `check`: `THRIFTY_CHECK_*`.
/// (`thrifty.dpp.select_entropy`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_select_entropy(
    cov: *const f64,
    n: usize,
    layout: i32,
    k: usize,
    tol: f64,
    check: i32,
    items_out: *mut i64,
    pivots_out: *mut f64,
    n_selected_out: *mut usize,
) -> i32 {
    guard(|| {
        let c = symmetric(cov, n, layout, "cov")?;
        let mode = check_mode(check)?;
        let tol = check_tol(tol)?;
        positive(k, "k")?;
        let path = enter(None, |cancel| greedy::entropy_kernel(c, n, k, tol, mode, cancel))?;
        write_path(&path, items_out, pivots_out, k, n_selected_out)
    })
}

/// Greedy DPP MAP (≈ argmax_{|A|=k} det L_A) for L = ΦΦᵀ given the features Φ (n × d, `layout`),
/// without forming L. Outputs as `thrifty_dpp_select_entropy`, plus `*log_det_out` (may be NULL):
/// log det L_A, exact even where features far outside 2^±200 give conditional variances beyond the
/// float64 range (written as inf or 0). (`thrifty.dpp.greedy_map(features=)`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_greedy_map(
    features: *const f64,
    n: usize,
    d: usize,
    layout: i32,
    k: usize,
    tol: f64,
    items_out: *mut i64,
    pivots_out: *mut f64,
    n_selected_out: *mut usize,
    log_det_out: *mut f64,
) -> i32 {
    guard(|| {
        let f = matrix(features, n, d, layout, "features")?;
        let tol = check_tol(tol)?;
        positive(k, "k")?;
        let path = enter(None, |c| greedy::entropy_factor(&f[..], n, d, k, tol, c))?;
        write_path(&path, items_out, pivots_out, k, n_selected_out)?;
        if !log_det_out.is_null() {
            put(log_det_out, path.log_det(), "log_det_out")?;
        }
        Ok(())
    })
}

/// Greedy mutual-information selection (Krause, Singh & Guestrin) of k items from `cov` (n × n,
/// symmetric, either layout). `noise`: nugget added to the diagonal (0 = default 1e-6 · mean
/// diagonal). `check` ≠ 0 validates the whole matrix. Outputs as `thrifty_dpp_select_entropy`
/// plus `gains_out` (k MI gains). (`thrifty.dpp.select_mutual_information`)
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_dpp_select_mutual_information(
    cov: *const f64,
    n: usize,
    layout: i32,
    k: usize,
    noise: f64,
    check: i32,
    items_out: *mut i64,
    pivots_out: *mut f64,
    gains_out: *mut f64,
    n_selected_out: *mut usize,
) -> i32 {
    guard(|| {
        let c = symmetric(cov, n, layout, "cov")?;
        positive(k, "k")?;
        if k > n {
            return Err(Fail::invalid("k", format!("must be in [1, {n}], got {k}")));
        }
        let nz = if noise == 0.0 {
            let diag: Vec<f64> = (0..n).map(|i| c[i * n + i]).collect();
            let v = 1e-6 * crate::numpy_mean(&diag);
            if v > 0.0 {
                v
            } else {
                1e-12
            }
        } else if noise.is_finite() && noise > 0.0 {
            noise
        } else {
            return Err(Fail::invalid(
                "noise",
                format!("must be positive and finite (0 for the default), got {noise}"),
            ));
        };
        let gains = out(gains_out, k, "gains_out")?;
        let (path, g) = enter(None, |cancel| greedy::mutual_information(c, n, k, nz, check != 0, cancel))?;
        gains[..g.len()].copy_from_slice(&g);
        write_path(&path, items_out, pivots_out, k, n_selected_out)
    })
}
