//! The inference additions over the C ABI: the sparse PLS1 basis of `THRIFTY_LEARNER_SPLS`, the
//! two-block PLS-SVD test, the CV curve of the number of components, the rotation-stability study
//! and the subsampling replicates of PLS1's β and leverage.
//!
//! Marshalling only, like `inference.rs`: the route (the learner rule of `LearnerKind::PlsSvd`
//! included) and the runs are `thrifty_core::inference::{run, select, stability, intervals}`, the
//! code the Python package calls, so the same seed gives the same numbers in Python, R and C.
//! Every call runs through `crate::enter` (thread pool, Ctrl-C).
use std::sync::atomic::AtomicBool;

use thrifty_core::inference::{intervals, run, select, stability, Data};

use crate::inference::{
    at_least, core_options, explicit_splits, result_of, write_vectors, xyw, ThriftySubspaceOptions,
    ThriftySubspaceResult,
};
use crate::{enter, guard, matrix, out, put, size2, threads, write_matrix, Fail, Res};

/// An optional output matrix (`rows × cols` in `layout`): NULL skips it.
unsafe fn put_matrix(dst: *mut f64, src: &[f64], rows: usize, cols: usize, layout: i32, arg: &str) -> Res<()> {
    if !dst.is_null() {
        write_matrix(out(dst, size2(arg, rows, cols)?, arg)?, src, rows, cols, layout);
    }
    Ok(())
}

/// The sparse PLS1 basis that `thrifty_subspace_test` with `THRIFTY_LEARNER_SPLS` fits on all rows
/// (Python's `result.basis`): `x` n × p in `layout`, `y` n, `weights` n or NULL, `n_components` k
/// in [1, min(n, p)], `spls_keep` in [1, p] or 0 for the cross-validated keep-count (then the
/// same count as the test's fit on all rows).
///
/// `basis_out` (p × k in `layout`) receives the weights W: column a is non-zero on exactly the
/// keep-count rows (fewer only on ties at 0). `keep_out` (NULL allowed) the keep-count used.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_spls_basis(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
    n_components: i64,
    spls_keep: i64,
    basis_out: *mut f64,
    keep_out: *mut i64,
) -> i32 {
    guard(|| {
        let (xs, ys, w) = xyw(x, n, p, layout, y, weights)?;
        let k = at_least(n_components, "n_components", 1)?;
        let keep = at_least(spls_keep, "spls_keep", 0)?;
        if basis_out.is_null() {
            return Err(Fail::null("basis_out"));
        }
        let fit = enter(None, |_| run::spls_basis(&xs, n, p, ys, w, k, keep))?;
        put_matrix(basis_out, &fit.weights, p, k, layout, "basis_out")?;
        if !keep_out.is_null() {
            put(keep_out, fit.keep as i64, "keep_out")?;
        }
        Ok(())
    })
}

/// The two-block PLS-SVD test (see `thrifty.inference.pls_svd_test`): `x` n × p and `y` n × q
/// (both in `layout`, n ≥ 6, neither all constant). On every split both blocks are standardised
/// with train moments, the first singular pair of X̃ᵀỸ (train rows) is found and the split is
/// scored by the held-out correlation of the two latent scores; the NB-asymptotic test averages
/// Fisher's z, the NB-permutation test permutes the rows of Y with the splits fixed.
///
/// From `options` (NULL = defaults) it uses `n_components` (the pairs reported, in [1, min(p, q)];
/// the test is of the first pair), `method` (AUTO, NB or NB_PERMUTATION; AUTO runs the
/// NB-permutation test: the core's learner rule for PLS-SVD, whose reason is in
/// `thrifty_last_gate_reasons`), `n_splits` or the explicit splits, `n_perm`, `force`, `seed`,
/// `confidence_level` and `n_threads`. The gate looks at X only.
///
/// `result_out`, `r_out` / `r_len` and `null_out` / `null_len` as `thrifty_subspace_test`. NULL or
/// buffers of k = `n_components` pairs: `x_weights_out` (p × k, `layout`), `y_weights_out`
/// (q × k, `layout`), `singular_values_out` (k: the covariances of the latent pairs) — the fit on
/// all rows (orthonormal columns, the largest-|entry| of each X column positive).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_pls_svd_test(
    x: *const f64,
    n: usize,
    p: usize,
    y: *const f64,
    q: usize,
    layout: i32,
    options: *const ThriftySubspaceOptions,
    result_out: *mut ThriftySubspaceResult,
    r_out: *mut f64,
    r_len: usize,
    null_out: *mut f64,
    null_len: usize,
    x_weights_out: *mut f64,
    y_weights_out: *mut f64,
    singular_values_out: *mut f64,
) -> i32 {
    guard(|| {
        let mut o = if options.is_null() { ThriftySubspaceOptions::default() } else { *options };
        o.learner = crate::inference::THRIFTY_LEARNER_PLS; // the learner is the PLS-SVD pair itself
        if result_out.is_null() {
            return Err(Fail::null("result_out"));
        }
        let xs = matrix(x, n, p, layout, "x")?;
        let ys = matrix(y, n, q, layout, "y")?;
        let trains = explicit_splits(&o, n)?;
        let opts = core_options(&o, None, trains)?;
        let k = opts.k;
        let oc = enter(opts.jobs, |cancel: &AtomicBool| run::pls_svd_test(&xs, n, p, &ys, q, k, &opts, cancel))?;
        write_vectors(&oc.test, r_out, r_len, null_out, null_len)?;
        put_matrix(x_weights_out, &oc.fit.x_weights, p, k, layout, "x_weights_out")?;
        put_matrix(y_weights_out, &oc.fit.y_weights, q, k, layout, "y_weights_out")?;
        if !singular_values_out.is_null() {
            out(singular_values_out, k, "singular_values_out")?.copy_from_slice(&oc.fit.singular_values);
        }
        put(result_out, result_of(&oc.test, o.seed), "result_out")
    })
}

/// Result of `thrifty_select_n_components`: the choice of each rule (1-based number of
/// components; 0 when no k could be scored, e.g. folds too small).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThriftyCvCurveResult {
    /// The k of the largest mean held-out R² (ties: the smaller k).
    pub choice_max: i64,
    /// The smallest k within one standard error of the best mean R² (plskit's `r2_se`).
    pub choice_one_se: i64,
}

/// The K-fold CV curve of the number of PLS1 components (see `thrifty.inference.
/// select_n_components`, rules "max" and "one-se"; its "sequence" rule is
/// `thrifty_component_tests`): `n_folds` folds drawn from `seed`; every fold standardises its
/// train rows, fits `k_max` components once and scores each k ≤ `k_max` by held-out
/// R² = 1 − SSE/SST. `k_max` in [1, min(n, p)]; `spls_keep` 0 for PLS1, else sparse PLS1 with
/// that keep-count (in [1, p]).
///
/// `fold_r2_out` (NULL or k_max × n_folds in `layout`): R² of every k and fold (−inf where a fold
/// had fewer components); `mean_out`, `se_out` (NULL or k_max): the mean over folds and its
/// standard error (SD / √n_folds).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_select_n_components(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    k_max: i64,
    spls_keep: i64,
    n_folds: i64,
    seed: u64,
    n_threads: i64,
    result_out: *mut ThriftyCvCurveResult,
    fold_r2_out: *mut f64,
    mean_out: *mut f64,
    se_out: *mut f64,
) -> i32 {
    guard(|| {
        let (xs, ys, _) = xyw(x, n, p, layout, y, std::ptr::null())?;
        let kmax = at_least(k_max, "k_max", 1)?;
        let keep = match at_least(spls_keep, "spls_keep", 0)? {
            0 => p,
            k => k,
        };
        let folds = at_least(n_folds, "n_folds", 2)?;
        let jobs = threads(at_least(n_threads, "n_threads", 0)?);
        if result_out.is_null() {
            return Err(Fail::null("result_out"));
        }
        let c =
            enter(jobs, |cancel| select::cv_curve(&Data::new(&xs, n, p, ys, None)?, kmax, keep, folds, seed, cancel))?;
        let pick = |r| c.choose(r).map_or(0, |v| v as i64);
        let res =
            ThriftyCvCurveResult { choice_max: pick(select::Rule::Max), choice_one_se: pick(select::Rule::OneSe) };
        let flat: Vec<f64> = c.scores.iter().flat_map(|s| s.iter().copied()).collect();
        put_matrix(fold_r2_out, &flat, kmax, folds, layout, "fold_r2_out")?;
        for (dst, src, arg) in [(mean_out, &c.mean, "mean_out"), (se_out, &c.se, "se_out")] {
            if !dst.is_null() {
                out(dst, kmax, arg)?.copy_from_slice(src);
            }
        }
        put(result_out, res, "result_out")
    })
}

/// Resampling stability of the varimax axes of a PLS1 fit (see `thrifty.inference.
/// rotation_stability`): the k = `n_components` PLS1 weights fitted on all rows (standardised) are
/// varimax-rotated into reference axes; every one of `n_boot` resamples (drawn from `seed`: n rows
/// with replacement when `subsample_m` is 0, else `subsample_m` rows without replacement) is refitted
/// and rotated, matched to the reference by the signed permutation maximising the summed |Tucker
/// congruence|, and the congruence of each matched axis recorded. `n_components` in
/// [2, min(8, p, n − 2)], `n_boot` ≥ 1, `subsample_m` 0 or in [k + 2, n] (Python uses m = ⌈n^rate⌉).
///
/// Outputs (NULL skips one), in `layout`: `congruence_out` and `congruence_unrotated_out`
/// (n_boot × k; NaN rows where a resample's fit degenerated), `axes_out` and `weights_out` (p × k:
/// the reference varimax axes and the unrotated weights).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_rotation_stability(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    n_components: i64,
    n_boot: i64,
    subsample_m: i64,
    seed: u64,
    n_threads: i64,
    congruence_out: *mut f64,
    congruence_unrotated_out: *mut f64,
    axes_out: *mut f64,
    weights_out: *mut f64,
) -> i32 {
    guard(|| {
        let (xs, ys, _) = xyw(x, n, p, layout, y, std::ptr::null())?;
        let k = at_least(n_components, "n_components", 2)?;
        let b = at_least(n_boot, "n_boot", 1)?;
        let resample = match at_least(subsample_m, "subsample_m", 0)? {
            0 => stability::Resample::Bootstrap,
            m if m < k + 2 || m > n => {
                return Err(Fail::invalid(
                    "subsample_m",
                    format!("must be 0 or in [n_components + 2, n] = [{}, {n}], got {m}", k + 2),
                ))
            }
            m => stability::Resample::Subsample { m },
        };
        let jobs = threads(at_least(n_threads, "n_threads", 0)?);
        let s = enter(jobs, |cancel: &AtomicBool| {
            stability::rotation_stability(&Data::new(&xs, n, p, ys, None)?, k, b, resample, seed, cancel)
        })?;
        put_matrix(congruence_out, &s.rotated, b, k, layout, "congruence_out")?;
        put_matrix(congruence_unrotated_out, &s.unrotated, b, k, layout, "congruence_unrotated_out")?;
        put_matrix(axes_out, &s.axes, p, k, layout, "axes_out")?;
        put_matrix(weights_out, &s.weights, p, k, layout, "weights_out")
    })
}

/// m-out-of-n subsample replicates of PLS1's coefficients β (original units) and per-variable
/// leverage h_j = Σ_a W_ja² (see `thrifty.inference.coefficient_intervals`, which turns them into
/// intervals and z statistics; Python uses m = min(n − 1, ⌈n^m_rate⌉)). Subsample b draws m rows
/// without replacement from `seed` and refits k = `n_components` components; m in [k + 2, n).
/// `weights` n or NULL.
///
/// Outputs (NULL skips one): `coef_out`, `leverage_out` (p: the fit on all rows) and, in
/// `layout`, `coef_sub_out`, `leverage_sub_out` (n_sub × p; NaN rows where a subsample's fit
/// degenerated).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_subsample_replicates(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
    n_components: i64,
    n_sub: i64,
    m: i64,
    seed: u64,
    n_threads: i64,
    coef_out: *mut f64,
    leverage_out: *mut f64,
    coef_sub_out: *mut f64,
    leverage_sub_out: *mut f64,
) -> i32 {
    guard(|| {
        let (xs, ys, w) = xyw(x, n, p, layout, y, weights)?;
        let k = at_least(n_components, "n_components", 1)?;
        let b = at_least(n_sub, "n_sub", 1)?;
        let m = at_least(m, "m", 1)?;
        let jobs = threads(at_least(n_threads, "n_threads", 0)?);
        let r = enter(jobs, |cancel: &AtomicBool| {
            intervals::subsample_replicates(&Data::new(&xs, n, p, ys, w)?, k, b, m, seed, cancel)
        })?;
        for (dst, src, arg) in [(coef_out, &r.coef, "coef_out"), (leverage_out, &r.leverage, "leverage_out")] {
            if !dst.is_null() {
                out(dst, p, arg)?.copy_from_slice(src);
            }
        }
        put_matrix(coef_sub_out, &r.coef_sub, b, p, layout, "coef_sub_out")?;
        put_matrix(leverage_sub_out, &r.leverage_sub, b, p, layout, "leverage_sub_out")
    })
}
