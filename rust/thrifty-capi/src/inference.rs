//! The supervised-subspace test and the per-component tests over the C ABI.
//!
//! Marshalling only: the options and result structs, integer codes to the core's enums, pointers to
//! slices. The route (gate, learner rule, method resolution) and the run (splits, per-split r, NB,
//! permutation null, baselines, PLS2, the per-component sequence) are `thrifty_core::inference::
//! route` and `run`, the same code the Python package calls, so the same seed gives the same
//! p-value in Python, R and Julia. Learners that need a Python callback (callables, scikit-learn
//! transformers) are Python-only; every other learner and method is here.
use thrifty_core::inference::route::Method;
use thrifty_core::inference::run::{self, TestOptions, TestOutcome};
use thrifty_core::inference::{Learner, Rotation};

use crate::{guard, matrix, opt_slice, out, put, slice, threads, Fail, Res};

/// PLS1 (NIPALS) directions.
pub const THRIFTY_LEARNER_PLS: i64 = 0;
/// Supervised PCA.
pub const THRIFTY_LEARNER_SPCA: i64 = 1;
/// The ridge probe direction (n_components = 1).
pub const THRIFTY_LEARNER_RIDGE: i64 = 2;
/// A fixed basis (`options.basis`, p × basis_cols) applied to X centred by the train mean.
pub const THRIFTY_LEARNER_BASIS: i64 = 3;
/// Sparse PLS1: every direction loads on `options.spls_keep` variables (0: the keep-count chosen by
/// 5-fold CV on every train part); the basis fitted on all rows is `thrifty_spls_basis`.
pub const THRIFTY_LEARNER_SPLS: i64 = 4;

/// NB-asymptotic where it is calibrated (PLS learner, one component, Kish n_eff ≥ 60, stable rank
/// of standardised X not in [3, 8), design gate passed), NB-permutation otherwise (unless `force`).
pub const THRIFTY_METHOD_AUTO: i64 = 0;
/// NB-asymptotic (same routing rule as AUTO; `gate_rerouted` says it was rerouted).
pub const THRIFTY_METHOD_NB: i64 = 1;
/// NB-permutation: the same splits, y permuted `n_perm` times.
pub const THRIFTY_METHOD_NB_PERMUTATION: i64 = 2;
/// Pooled K-fold Q² with permuted y.
pub const THRIFTY_METHOD_CV_PERMUTATION_Q2: i64 = 3;
/// Mean fold R² with permuted y (scikit-learn's permutation_test_score).
pub const THRIFTY_METHOD_PERMUTATION_SCORE: i64 = 4;
/// Jackknife t of the PLS coefficients (Bonferroni p; an indicator only).
pub const THRIFTY_METHOD_JACKKNIFE: i64 = 5;

/// No rotation of the learned basis.
pub const THRIFTY_ROTATE_NONE: i64 = 0;
/// Kaiser-normalised varimax rotation of the learned basis (r and p unchanged).
pub const THRIFTY_ROTATE_VARIMAX: i64 = 1;

/// Options of `thrifty_subspace_test` (and, for the fields that apply, `thrifty_component_tests`).
/// Fill it with `thrifty_subspace_options_init` and change what you need. Every field is 8 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThriftySubspaceOptions {
    /// Number of directions k (≥ 1). Default 1.
    pub n_components: i64,
    /// `THRIFTY_LEARNER_*`. Default PLS.
    pub learner: i64,
    /// `THRIFTY_METHOD_*`. Default AUTO.
    pub method: i64,
    /// Random balanced splits J (≥ 2), ignored with explicit splits. Default 50.
    pub n_splits: i64,
    /// Permutations B of the permutation methods (≥ 1). Default 1000.
    pub n_perm: i64,
    /// Folds of the CV baselines / segments of the jackknife (≥ 2). Default 5.
    pub n_folds: i64,
    /// `THRIFTY_ROTATE_*`. Default NONE.
    pub rotate: i64,
    /// Non-zero: run the NB-asymptotic test even when the gate would reroute. Default 0.
    pub force: i64,
    /// Features kept by supervised PCA (0 = default min(p, max(5k, ⌈p/10⌉))).
    pub spca_n_features: i64,
    /// Threads (0 = all cores). Results do not depend on it.
    pub n_threads: i64,
    /// Seed of the splits, permutations and folds.
    pub seed: u64,
    /// Level of the Wald interval, in (0, 1). Default 0.95.
    pub confidence_level: f64,
    /// Ridge penalty of the ridge probe (> 0). Default 1.
    pub ridge_alpha: f64,
    /// `THRIFTY_LEARNER_BASIS`: the basis, p × basis_cols in the call's layout (else NULL).
    pub basis: *const f64,
    /// Columns of `basis`.
    pub basis_cols: i64,
    /// Explicit splits: the 0-based train indices of every split, concatenated (NULL: random splits).
    pub train_indices: *const i64,
    /// Explicit splits: `n_explicit_splits + 1` offsets into `train_indices` (starting at 0).
    pub train_offsets: *const i64,
    /// Number of explicit splits (≥ 2 when `train_indices` is given).
    pub n_explicit_splits: i64,
    /// `THRIFTY_LEARNER_SPLS`: variables every direction keeps, in [1, p], or 0 (default) for the
    /// cross-validated keep-count. Must be 0 for other learners.
    pub spls_keep: i64,
}

impl Default for ThriftySubspaceOptions {
    fn default() -> Self {
        ThriftySubspaceOptions {
            n_components: 1,
            learner: THRIFTY_LEARNER_PLS,
            method: THRIFTY_METHOD_AUTO,
            n_splits: 50,
            n_perm: 1000,
            n_folds: 5,
            rotate: THRIFTY_ROTATE_NONE,
            force: 0,
            spca_n_features: 0,
            n_threads: 0,
            seed: 0,
            confidence_level: 0.95,
            ridge_alpha: 1.0,
            basis: std::ptr::null(),
            basis_cols: 0,
            train_indices: std::ptr::null(),
            train_offsets: std::ptr::null(),
            n_explicit_splits: 0,
            spls_keep: 0,
        }
    }
}

/// Result of `thrifty_subspace_test`. Fields that a method does not define are NaN (or 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThriftySubspaceResult {
    /// One-sided p-value.
    pub p_value: f64,
    /// NB methods: tanh of the mean Fisher z (the held-out correlation); CV methods: the observed
    /// score; jackknife: max |t|.
    pub statistic: f64,
    /// NB t statistic and its degrees of freedom (J − 1; the jackknife's df for JACKKNIFE).
    pub t: f64,
    pub df: f64,
    pub z_mean: f64,
    pub z_sd: f64,
    pub se: f64,
    /// Estimated fraction of split-to-split variance explained by the null (unweighted single y only).
    pub rho_hat: f64,
    /// statistic².
    pub r2: f64,
    /// Wald interval on the correlation scale at `confidence_level`.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Mean train and test sizes over the splits.
    pub n_train: f64,
    pub n_test: f64,
    /// The method that ran (`THRIFTY_METHOD_NB`, `_NB_PERMUTATION`, or the baseline asked for).
    pub method: i64,
    /// Splits used (the length of the per-split correlations), 0 for the baselines.
    pub n_splits: i64,
    /// Permutations used (the length of the null distribution), 0 for NB and the jackknife.
    pub n_perm: i64,
    /// Directions k used (the basis' columns for a basis learner).
    pub n_components: i64,
    /// Number of constant columns of X (they drop out of every fit).
    pub n_constant_columns: i64,
    /// The seed used.
    pub seed: u64,
    /// Pre-run gate: Kish effective n, stable rank of standardised X, columns of X; `gate_reroute`
    /// says the gate fired, `gate_rerouted` that it changed the method, `gate_forced` that `force`
    /// overrode it.
    pub gate_n_eff: f64,
    pub gate_stable_rank: f64,
    pub gate_n_columns: i64,
    pub gate_reroute: i64,
    pub gate_rerouted: i64,
    pub gate_forced: i64,
}

/// Result of `thrifty_component_tests`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThriftyComponentResult {
    /// Components claimed: the steps before the first p ≥ alpha.
    pub k_star: i64,
    /// Steps tested (the number of p-values written).
    pub n_steps: i64,
    /// The method of every step (`THRIFTY_METHOD_NB` or `_NB_PERMUTATION`).
    pub method: i64,
    /// The gate (decided once on the undeflated X).
    pub gate_reroute: i64,
    pub gate_rerouted: i64,
    pub seed: u64,
}

/// Fill `options` with the defaults (those of the Python function).
#[no_mangle]
pub unsafe extern "C" fn thrifty_subspace_options_init(options: *mut ThriftySubspaceOptions) -> i32 {
    guard(|| put(options, ThriftySubspaceOptions::default(), "options"))
}

pub(crate) fn at_least(v: i64, arg: &str, min: i64) -> Res<usize> {
    if v < min {
        return Err(Fail::invalid(arg, format!("must be >= {min}, got {v}")));
    }
    usize::try_from(v).map_err(|_| Fail::invalid(arg, "is too large"))
}

/// A count the core checks where it uses it (negative values become 0, which it refuses).
fn count(v: i64) -> usize {
    usize::try_from(v).unwrap_or(0)
}

/// The core's options from the C struct (codes checked here, values where the core uses them).
pub(crate) fn core_options(
    o: &ThriftySubspaceOptions,
    basis: Option<Vec<f64>>,
    trains: Option<Vec<Vec<i64>>>,
) -> Res<TestOptions> {
    let k = at_least(o.n_components, "n_components", 1)?;
    let method = usize::try_from(o.method)
        .ok()
        .and_then(|m| Method::ALL.get(m).copied())
        .ok_or_else(|| Fail::kind("method", format!("must be one of THRIFTY_METHOD_* (0..=5), got {}", o.method)))?;
    let rotate = match o.rotate {
        THRIFTY_ROTATE_NONE => Rotation::None,
        THRIFTY_ROTATE_VARIMAX => Rotation::Varimax,
        other => {
            return Err(Fail::kind("rotate", format!("must be THRIFTY_ROTATE_NONE (0) or _VARIMAX (1), got {other}")))
        }
    };
    if !(o.ridge_alpha.is_finite() && o.ridge_alpha > 0.0) {
        return Err(Fail::invalid("ridge_alpha", format!("must be in (0, inf), got {}", o.ridge_alpha)));
    }
    let nfeat = at_least(o.spca_n_features, "spca_n_features", 0)?;
    let keep = at_least(o.spls_keep, "spls_keep", 0)?;
    if keep > 0 && o.learner != THRIFTY_LEARNER_SPLS {
        return Err(Fail::invalid("spls_keep", "is only used with THRIFTY_LEARNER_SPLS; leave it 0"));
    }
    let jobs = threads(at_least(o.n_threads, "n_threads", 0)?);
    let learner = match o.learner {
        THRIFTY_LEARNER_PLS => Learner::Pls,
        THRIFTY_LEARNER_SPCA => Learner::Spca { n_features: nfeat },
        THRIFTY_LEARNER_RIDGE => Learner::Ridge { alpha: o.ridge_alpha },
        THRIFTY_LEARNER_BASIS => Learner::Basis { basis: basis.ok_or_else(|| Fail::null("options.basis"))? },
        THRIFTY_LEARNER_SPLS => Learner::Spls { keep },
        other => return Err(Fail::kind("learner", format!("must be one of THRIFTY_LEARNER_* (0..=4), got {other}"))),
    };
    Ok(TestOptions {
        k,
        learner,
        method,
        n_splits: count(o.n_splits),
        n_perm: count(o.n_perm),
        n_folds: count(o.n_folds),
        rotate,
        force: o.force != 0,
        seed: o.seed,
        level: o.confidence_level,
        trains,
        jobs,
    })
}

pub(crate) fn method_code(m: Method) -> i64 {
    Method::ALL.iter().position(|&a| a == m).unwrap_or(0) as i64
}

/// The C result of a core outcome.
pub(crate) fn result_of(oc: &TestOutcome, seed: u64) -> ThriftySubspaceResult {
    crate::note_route(&oc.route);
    let g = &oc.route.gate;
    let run = oc.route.run;
    ThriftySubspaceResult {
        p_value: oc.p_value,
        statistic: oc.statistic,
        t: oc.t,
        df: oc.df,
        z_mean: oc.z_mean,
        z_sd: oc.z_sd,
        se: oc.se,
        rho_hat: oc.rho_hat,
        r2: if run.is_split_test() { oc.statistic * oc.statistic } else { f64::NAN },
        ci_low: oc.ci_low,
        ci_high: oc.ci_high,
        n_train: oc.n_train,
        n_test: oc.n_test,
        method: method_code(run),
        n_splits: oc.r.len() as i64,
        n_perm: oc.null.len() as i64,
        n_components: oc.k as i64,
        n_constant_columns: oc.n_constant_columns as i64,
        seed,
        gate_n_eff: g.n_eff,
        gate_stable_rank: g.stable_rank,
        gate_n_columns: g.n_columns as i64,
        gate_reroute: g.reroute as i64,
        gate_rerouted: oc.route.rerouted as i64,
        gate_forced: oc.route.forced as i64,
    }
}

/// Explicit splits from the flat (indices, offsets) form, validated like the Python front end.
pub(crate) unsafe fn explicit_splits(o: &ThriftySubspaceOptions, n: usize) -> Res<Option<Vec<Vec<i64>>>> {
    if o.train_indices.is_null() {
        return Ok(None);
    }
    let count = at_least(o.n_explicit_splits, "n_explicit_splits", 2)?;
    let offsets = slice(o.train_offsets, count + 1, "train_offsets")?;
    if offsets[0] != 0 || offsets.windows(2).any(|w| w[1] < w[0]) {
        return Err(Fail::invalid("train_offsets", "must start at 0 and be non-decreasing"));
    }
    let total = usize::try_from(offsets[count]).map_err(|_| Fail::invalid("train_offsets", "is out of range"))?;
    let all = slice(o.train_indices, total, "train_indices")?;
    let mut out = thrifty_core::alloc::try_with_capacity("the splits", count)?;
    for j in 0..count {
        let t = &all[offsets[j] as usize..offsets[j + 1] as usize];
        if t.is_empty() {
            return Err(Fail::invalid("splits", format!("split {j} has no train indices")));
        }
        if n - t.len().min(n) < 3 {
            return Err(Fail::invalid(
                "splits",
                format!("split {j} leaves {} test rows; at least 3 are needed", n.saturating_sub(t.len())),
            ));
        }
        out.push(thrifty_core::alloc::try_collect("the splits", t.iter().copied())?);
    }
    Ok(Some(out))
}

/// X (row-major), y and the optional weights of a call.
#[allow(clippy::type_complexity)]
pub(crate) unsafe fn xyw<'a>(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
) -> Res<(std::borrow::Cow<'a, [f64]>, &'a [f64], Option<&'a [f64]>)> {
    Ok((matrix(x, n, p, layout, "x")?, slice(y, n, "y")?, opt_slice(weights, n)))
}

/// Read X (row-major), y, weights, the basis and the explicit splits of a call.
#[allow(clippy::type_complexity)]
unsafe fn inputs<'a>(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
    o: &ThriftySubspaceOptions,
) -> Res<(std::borrow::Cow<'a, [f64]>, &'a [f64], Option<&'a [f64]>, Option<Vec<f64>>, Option<Vec<Vec<i64>>>)> {
    let (xs, ys, w) = xyw(x, n, p, layout, y, weights)?;
    let basis = if o.learner == THRIFTY_LEARNER_BASIS {
        let cols = at_least(o.basis_cols, "basis_cols", 1)?;
        Some(matrix(o.basis, p, cols, layout, "options.basis")?.into_owned())
    } else {
        None
    };
    let trains = explicit_splits(o, n)?;
    Ok((xs, ys, w, basis, trains))
}

/// Test whether a supervised subspace of `x` (n × p, `layout`) predicts `y` (n), by held-out OLS
/// refits (see `thrifty.inference.subspace_test`).
///
/// `weights`: n non-negative sample weights or NULL. `options`: NULL for the defaults, or a struct
/// filled by `thrifty_subspace_options_init`. `result_out` receives the scalars. `r_out` (NULL or
/// `r_len` ≥ the number of splits) receives the per-split held-out correlations; `null_out` (NULL
/// or `null_len` ≥ n_perm) the permutation null (mean Fisher z for NB-permutation, the score for the
/// CV baselines). The same seed gives the same result as the Python function with
/// `random_state=seed`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_subspace_test(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
    options: *const ThriftySubspaceOptions,
    result_out: *mut ThriftySubspaceResult,
    r_out: *mut f64,
    r_len: usize,
    null_out: *mut f64,
    null_len: usize,
) -> i32 {
    guard(|| {
        let o = if options.is_null() { ThriftySubspaceOptions::default() } else { *options };
        if result_out.is_null() {
            return Err(Fail::null("result_out"));
        }
        let (xs, ys, w, basis, trains) = inputs(x, n, p, layout, y, weights, &o)?;
        let opts = core_options(&o, basis, trains)?;
        // on the caller's hook (R's Ctrl-C) through enter; the core sets its own thread count
        let oc = crate::enter(None, |cancel| run::subspace_test(&xs, n, p, ys, w, &opts, cancel))?;
        write_vectors(&oc, r_out, r_len, null_out, null_len)?;
        put(result_out, result_of(&oc, o.seed), "result_out")
    })
}

/// The subspace test for a multi-column response (PLS2): `y` is n × m in the call's `layout`
/// (m ≥ 1; m = 1 is the single-response test). The directions are fitted to all columns, every
/// column is refitted on the k train scores, and a split's r pools the columns (train-standardised
/// units). Only the PLS learner and methods AUTO, NB and NB_PERMUTATION apply; other arguments as
/// `thrifty_subspace_test`. Same seed, same result as the Python function with a 2-D `y`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_subspace_test_multi(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    m: usize,
    weights: *const f64,
    options: *const ThriftySubspaceOptions,
    result_out: *mut ThriftySubspaceResult,
    r_out: *mut f64,
    r_len: usize,
    null_out: *mut f64,
    null_len: usize,
) -> i32 {
    if m == 1 {
        return thrifty_subspace_test(
            x, n, p, layout, y, weights, options, result_out, r_out, r_len, null_out, null_len,
        );
    }
    guard(|| {
        let o = if options.is_null() { ThriftySubspaceOptions::default() } else { *options };
        if result_out.is_null() {
            return Err(Fail::null("result_out"));
        }
        let (xs, _, w, basis, trains) = inputs(x, n, p, layout, y, weights, &o)?;
        let ym = matrix(y, n, m, layout, "y")?;
        let oc = run::subspace_test_pls2(&xs, n, p, &ym, m, w, &core_options(&o, basis, trains)?)?;
        write_vectors(&oc, r_out, r_len, null_out, null_len)?;
        put(result_out, result_of(&oc, o.seed), "result_out")
    })
}

pub(crate) unsafe fn write_vectors(
    oc: &TestOutcome,
    r_out: *mut f64,
    r_len: usize,
    null_out: *mut f64,
    null_len: usize,
) -> Res<()> {
    if !r_out.is_null() {
        if r_len < oc.r.len() {
            return Err(Fail::shape("r_out", format!("holds {r_len} values, {} are needed", oc.r.len())));
        }
        out(r_out, oc.r.len(), "r_out")?.copy_from_slice(&oc.r);
    }
    if !null_out.is_null() {
        if null_len < oc.null.len() {
            return Err(Fail::shape("null_out", format!("holds {null_len} values, {} are needed", oc.null.len())));
        }
        out(null_out, oc.null.len(), "null_out")?.copy_from_slice(&oc.null);
    }
    Ok(())
}

/// Per-component fixed-sequence test over the PLS extraction order (see
/// `thrifty.inference.component_tests`): step h deflates h−1 PLS components from X and y (fitted on
/// all rows) and tests the residual with a one-component test on the same splits; the sequence
/// stops at the first p ≥ `alpha`.
///
/// From `options` (NULL = defaults) it uses `method` (AUTO, NB or NB_PERMUTATION), `n_splits` or
/// the explicit splits, `n_perm`, `force`, `seed`, `n_threads`. `max_components` ≤ 0 means
/// min(10, p, n − 6). `p_values_out` must hold `p_len` ≥ that many values; the first
/// `result_out->n_steps` are written.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn thrifty_component_tests(
    x: *const f64,
    n: usize,
    p: usize,
    layout: i32,
    y: *const f64,
    weights: *const f64,
    options: *const ThriftySubspaceOptions,
    max_components: i64,
    alpha: f64,
    result_out: *mut ThriftyComponentResult,
    p_values_out: *mut f64,
    p_len: usize,
) -> i32 {
    guard(|| {
        let mut o = if options.is_null() { ThriftySubspaceOptions::default() } else { *options };
        o.learner = THRIFTY_LEARNER_PLS;
        o.n_components = 1;
        if result_out.is_null() {
            return Err(Fail::null("result_out"));
        }
        let (xs, ys, w, _, trains) = inputs(x, n, p, layout, y, weights, &o)?;
        let hmax = run::component_steps(n, p, usize::try_from(max_components).ok().filter(|&h| h > 0))?;
        let pv = out(p_values_out, p_len, "p_values_out")?;
        if p_len < hmax {
            return Err(Fail::shape("p_values_out", format!("holds {p_len} values, {hmax} are needed")));
        }
        let opts = core_options(&o, None, trains)?;
        let oc = crate::enter(None, |cancel| run::component_tests(&xs, n, p, ys, w, &opts, Some(hmax), alpha, cancel))?;
        crate::note_route(&oc.route);
        pv[..oc.p_values.len()].copy_from_slice(&oc.p_values);
        let result = ThriftyComponentResult {
            k_star: oc.k_star as i64,
            n_steps: oc.p_values.len() as i64,
            method: method_code(oc.route.run),
            gate_reroute: oc.route.gate.reroute as i64,
            gate_rerouted: oc.route.rerouted as i64,
            seed: o.seed,
        };
        put(result_out, result, "result_out")
    })
}
