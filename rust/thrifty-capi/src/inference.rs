//! The supervised-subspace test and the per-component tests over the C ABI.
//!
//! The core exposes the pieces (splits, per-split correlations, the NB test, permutation nulls, the
//! CV baselines, the jackknife, the gate); this module strings them together exactly as
//! `thrifty.inference.subspace_test` / `component_tests` do in Python (same validation, same gate
//! decision, same streams, NumPy's summation order for the split-size means), so the same seed
//! gives the same p-value in Python, R and Julia. Learners that need a Python callback (callables,
//! scikit-learn transformers) are Python-only; every other learner and method is here.
use thrifty_core::inference::{baselines, nb, perm, Data, Learner, Rotation, Route, Spec};
use thrifty_core::threads::with_threads;
use thrifty_core::ThriftyError;

use crate::{guard, matrix, numpy_mean, numpy_sum, opt_slice, out, put, slice, threads, Fail, Res};

/// PLS1 (NIPALS) directions.
pub const THRIFTY_LEARNER_PLS: i64 = 0;
/// Supervised PCA.
pub const THRIFTY_LEARNER_SPCA: i64 = 1;
/// The ridge probe direction (n_components = 1).
pub const THRIFTY_LEARNER_RIDGE: i64 = 2;
/// A fixed basis (`options.basis`, p × basis_cols) applied to X centred by the train mean.
pub const THRIFTY_LEARNER_BASIS: i64 = 3;

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

impl ThriftySubspaceResult {
    fn empty() -> Self {
        let nan = f64::NAN;
        ThriftySubspaceResult {
            p_value: nan,
            statistic: nan,
            t: nan,
            df: nan,
            z_mean: nan,
            z_sd: nan,
            se: nan,
            rho_hat: nan,
            r2: nan,
            ci_low: nan,
            ci_high: nan,
            n_train: nan,
            n_test: nan,
            method: 0,
            n_splits: 0,
            n_perm: 0,
            n_components: 0,
            n_constant_columns: 0,
            seed: 0,
            gate_n_eff: nan,
            gate_stable_rank: nan,
            gate_n_columns: 0,
            gate_reroute: 0,
            gate_rerouted: 0,
            gate_forced: 0,
        }
    }
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

fn at_least(v: i64, arg: &str, min: i64) -> Res<usize> {
    if v < min {
        return Err(Fail::invalid(arg, format!("must be >= {min}, got {v}")));
    }
    usize::try_from(v).map_err(|_| Fail::invalid(arg, "is too large"))
}

/// The exponent e of `frexp(m)` (m = f·2^e, 0.5 ≤ |f| < 1); 0 for 0, NaN and ±inf (as numpy).
fn frexp_exp(m: f64) -> i64 {
    if m == 0.0 || !m.is_finite() {
        return 0;
    }
    let (v, adj) = if m.abs() < f64::MIN_POSITIVE { (m * 2f64.powi(54), -54) } else { (m, 0) };
    ((v.to_bits() >> 52) & 0x7ff) as i64 - 1022 + adj
}

/// `v · 2^-e` exactly as `np.ldexp` (two steps when 2^-e itself is not a normal float).
fn ldexp_neg(v: f64, e: i64) -> f64 {
    let t = -e;
    if (-1000..=1000).contains(&t) {
        v * 2f64.powi(t as i32)
    } else {
        let h = t / 2;
        v * 2f64.powi(h as i32) * 2f64.powi((t - h) as i32)
    }
}

/// Python's `_scaled_by_power_of_two`: `a` (rows × cols, row-major) rescaled exactly by powers of
/// two (per column, or globally) so that its largest |value| is about 1 — unchanged when every
/// exponent is below 64 in magnitude.
fn pow2_scaled(a: &[f64], rows: usize, cols: usize, per_column: bool) -> Vec<f64> {
    let mut out = a.to_vec();
    if rows == 0 || cols == 0 {
        return out;
    }
    let absmax = |it: &mut dyn Iterator<Item = f64>| {
        it.fold(0.0f64, |m, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v.abs()) })
    };
    let e: Vec<i64> = if per_column {
        (0..cols).map(|j| frexp_exp(absmax(&mut (0..rows).map(|i| a[i * cols + j])))).collect()
    } else {
        vec![frexp_exp(absmax(&mut a.iter().copied())); cols]
    };
    if e.iter().all(|v| v.abs() < 64) {
        return out;
    }
    for row in out.chunks_exact_mut(cols) {
        for (v, &ej) in row.iter_mut().zip(&e) {
            *v = ldexp_neg(*v, ej);
        }
    }
    out
}

/// Kish effective sample size (Python's `_kish`).
fn kish(w: Option<&[f64]>, n: usize) -> f64 {
    match w {
        None => n as f64,
        Some(w) => {
            let s = numpy_sum(w);
            let sq: Vec<f64> = w.iter().map(|v| v * v).collect();
            s * s / numpy_sum(&sq)
        }
    }
}

/// Where the NB-asymptotic test is calibrated (Python's `NB_MIN_N_EFF`, `NB_MIN_STABLE_RANK`).
const NB_MIN_N_EFF: f64 = 60.0;
const NB_MIN_STABLE_RANK: f64 = 8.0;

/// Python's `_nb_learner_reason(...) is not None`: the NB correction does not hold for this
/// learner, size or spectrum, so `method = AUTO` runs the NB-permutation test.
fn learner_fires(pls: bool, k: usize, multi: bool, w: Option<&[f64]>, n: usize, g: &nb::Gate) -> bool {
    multi
        || !pls
        || k != 1
        || kish(w, n) < NB_MIN_N_EFF
        || (nb::GATE_MIN_STABLE_RANK..NB_MIN_STABLE_RANK).contains(&g.stable_rank)
}

/// Python's `_resolve_route` for AUTO / NB: (method to run, reroute, rerouted, forced).
fn resolve_route(method: i64, force: bool, g: &nb::Gate, learner: bool) -> (i64, bool, bool, bool) {
    if method != THRIFTY_METHOD_AUTO && method != THRIFTY_METHOD_NB {
        return (method, g.reroute, false, false);
    }
    let fires = g.reroute || learner;
    if fires && !force {
        (THRIFTY_METHOD_NB_PERMUTATION, true, true, false)
    } else {
        (THRIFTY_METHOD_NB, fires, false, fires)
    }
}

/// Data in row-major form plus the checks the Python front end makes before the core.
struct Problem<'a> {
    x: &'a [f64],
    n: usize,
    p: usize,
    y: &'a [f64],
    w: Option<&'a [f64]>,
}

impl Problem<'_> {
    fn data(&self) -> Res<Data<'_>> {
        Ok(Data::new(self.x, self.n, self.p, self.y, self.w)?)
    }

    fn constant_columns(&self) -> usize {
        (0..self.p)
            .filter(|&j| {
                let first = self.x[j];
                (0..self.n).all(|i| self.x[i * self.p + j] == first)
            })
            .count()
    }

    fn gate(&self) -> Res<nb::Gate> {
        // The gate does not look at y; Data's checks need a non-constant response: 0..n (as in Python).
        let dummy: Vec<f64> = (0..self.n).map(|i| i as f64).collect();
        Ok(nb::gate(&Data::new(self.x, self.n, self.p, &dummy, self.w)?))
    }
}

/// Explicit splits from the flat (indices, offsets) form, validated like the Python front end.
unsafe fn explicit_splits(o: &ThriftySubspaceOptions, n: usize) -> Res<Option<Vec<Vec<i64>>>> {
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
    let mut out = Vec::with_capacity(count);
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
        out.push(t.to_vec());
    }
    Ok(Some(out))
}

/// Per-split correlations, NB test and optional permutation null: the NB branch of Python's
/// `subspace_test`.
struct NbOutcome {
    r: Vec<f64>,
    null: Vec<f64>,
    res: nb::NbResult,
    p_value: f64,
    n_train: f64,
    n_test: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_nb(
    prob: &Problem<'_>,
    spec: &Spec,
    trains: &[Vec<i64>],
    permute: bool,
    n_perm: usize,
    seed: u64,
    level: f64,
    jobs: Option<usize>,
) -> Res<NbOutcome> {
    let data = prob.data()?;
    let splits = nb::splits_from_train(prob.n, spec.k, trains)?;
    let r = with_threads(jobs, || nb::split_correlations(&data, spec, &splits, prob.y))??;
    // As Python: splits whose held-out r is undefined (NaN) are left out of the test.
    let defined: Vec<bool> = r.iter().map(|v| v.is_finite()).collect();
    let n_def = defined.iter().filter(|&&d| d).count();
    if n_def < 2 {
        return Err(Fail::invalid(
            "splits",
            format!(
                "the held-out correlation is undefined on {} of {} splits (a constant test response or prediction); at least 2 splits must define it",
                r.len() - n_def,
                r.len()
            ),
        ));
    }
    let r_def: Vec<f64> = r.iter().copied().filter(|v| v.is_finite()).collect();
    let n_tr: Vec<f64> = trains.iter().zip(&defined).filter(|(_, &d)| d).map(|(t, _)| t.len() as f64).collect();
    let n_te: Vec<f64> = n_tr.iter().map(|&t| prob.n as f64 - t).collect();
    let ratios: Vec<f64> = n_te.iter().zip(&n_tr).map(|(a, b)| a / b).collect();
    let ratio = numpy_mean(&ratios);
    // rho_hat's Fisher null variance 1/(n_test − 3) holds for a single unweighted response only
    let n_te_mean = numpy_mean(&n_te);
    let mut res = nb::nb_test(&r_def, ratio, if prob.w.is_some() { None } else { Some(n_te_mean) }, level)?;
    if !(res.z_sd > 0.0) {
        // no variation between splits: the NB standard error is 0, the CI undefined
        res.ci_low = f64::NAN;
        res.ci_high = f64::NAN;
    }
    let (null, p_value) = if permute {
        let null =
            with_threads(jobs, || perm::nb_permutation_null(&data, spec, &splits, seed, 0, n_perm, Route::Auto))??;
        let p = perm::permutation_p(res.z_mean, &null);
        (null, p)
    } else {
        (Vec::new(), res.p_value)
    };
    Ok(NbOutcome { r, null, p_value, n_train: numpy_mean(&n_tr), n_test: n_te_mean, res })
}

fn gate_into(res: &mut ThriftySubspaceResult, g: &nb::Gate) {
    res.gate_n_eff = g.n_eff;
    res.gate_stable_rank = g.stable_rank;
    res.gate_n_columns = g.n_columns as i64;
    res.gate_reroute = g.reroute as i64;
}

struct Outcome {
    res: ThriftySubspaceResult,
    r: Vec<f64>,
    null: Vec<f64>,
}

fn subspace(
    prob: &Problem<'_>,
    o: &ThriftySubspaceOptions,
    basis: Option<Vec<f64>>,
    user_trains: Option<Vec<Vec<i64>>>,
) -> Res<Outcome> {
    let (n, p) = (prob.n, prob.p);
    let mut k = at_least(o.n_components, "n_components", 1)?;
    if !(THRIFTY_METHOD_AUTO..=THRIFTY_METHOD_JACKKNIFE).contains(&o.method) {
        return Err(Fail::kind("method", format!("must be one of THRIFTY_METHOD_* (0..=5), got {}", o.method)));
    }
    let rotate = match o.rotate {
        THRIFTY_ROTATE_NONE => Rotation::None,
        THRIFTY_ROTATE_VARIMAX => Rotation::Varimax,
        other => {
            return Err(Fail::kind("rotate", format!("must be THRIFTY_ROTATE_NONE (0) or _VARIMAX (1), got {other}")))
        }
    };
    let level = o.confidence_level;
    if !(level.is_finite() && level > 0.0 && level < 1.0) {
        return Err(Fail::invalid("confidence_level", format!("must be in (0, 1), got {level}")));
    }
    if !(o.ridge_alpha.is_finite() && o.ridge_alpha > 0.0) {
        return Err(Fail::invalid("ridge_alpha", format!("must be in (0, inf), got {}", o.ridge_alpha)));
    }
    let nfeat = at_least(o.spca_n_features, "spca_n_features", 0)?;
    let jobs = threads(at_least(o.n_threads, "n_threads", 0)?);
    let learner = match o.learner {
        THRIFTY_LEARNER_PLS => Learner::Pls,
        THRIFTY_LEARNER_SPCA => Learner::Spca { n_features: nfeat },
        THRIFTY_LEARNER_RIDGE => Learner::Ridge { alpha: o.ridge_alpha },
        THRIFTY_LEARNER_BASIS => {
            let b = basis.ok_or_else(|| Fail::null("options.basis"))?;
            let cols = b.len() / p;
            if k != 1 && k != cols {
                return Err(Fail::invalid("n_components", format!("{k} does not match the basis' {cols} columns")));
            }
            k = cols;
            Learner::Basis { basis: b }
        }
        other => return Err(Fail::kind("learner", format!("must be one of THRIFTY_LEARNER_* (0..=3), got {other}"))),
    };
    if k > p {
        return Err(Fail::invalid("n_components", format!("{k} exceeds the number of features ({p})")));
    }
    if n < k + 5 {
        return Err(Fail::invalid(
            "x",
            format!("has {n} rows, too few for n_components={k}: need at least n_components + 5 = {}", k + 5),
        ));
    }
    // As Python: x and y as the core sees them, rescaled exactly by powers of two (badly scaled
    // data); standardising learners are invariant to per-column scaling, the others to a global one.
    let pls = matches!(learner, Learner::Pls);
    let xs_v = pow2_scaled(prob.x, n, p, !matches!(learner, Learner::Basis { .. }));
    let ys_v = pow2_scaled(prob.y, n, 1, false);
    let scaled = Problem { x: &xs_v, n, p, y: &ys_v, w: prob.w };
    let prob = &scaled;
    prob.data()?; // X, y, weights: finite, shapes, non-constant y, valid weights
    let n_const = prob.constant_columns();
    if n_const == p {
        return Err(Fail::invalid("x", "every column is constant; there is nothing to learn from"));
    }
    let spec = Spec { learner, k, rotate };
    let g = prob.gate()?;
    let mut res = ThriftySubspaceResult::empty();
    gate_into(&mut res, &g);
    res.seed = o.seed;
    res.n_components = k as i64;
    res.n_constant_columns = n_const as i64;
    let lf = learner_fires(pls, k, false, prob.w, n, &g);
    let (method, reroute, rerouted, forced) = resolve_route(o.method, o.force != 0, &g, lf);
    res.gate_reroute = reroute as i64;
    res.gate_rerouted = rerouted as i64;
    res.gate_forced = forced as i64;
    res.method = method;

    if method == THRIFTY_METHOD_NB || method == THRIFTY_METHOD_NB_PERMUTATION {
        let trains: Vec<Vec<i64>> = match user_trains {
            None => {
                let nsp = at_least(o.n_splits, "n_splits", 2)?;
                nb::draw_splits(n, k, nsp, o.seed)?
                    .into_iter()
                    .map(|s| s.train.into_iter().map(|i| i as i64).collect())
                    .collect()
            }
            Some(t) => {
                if t.iter().any(|s| s.len() < k + 2) {
                    return Err(Fail::invalid(
                        "splits",
                        format!("every split needs at least n_components + 2 = {} train rows", k + 2),
                    ));
                }
                t
            }
        };
        let permute = method == THRIFTY_METHOD_NB_PERMUTATION;
        let b = if permute { at_least(o.n_perm, "n_perm", 1)? } else { 0 };
        let oc = run_nb(prob, &spec, &trains, permute, b, o.seed, level, jobs)?;
        let nb = &oc.res;
        res.p_value = oc.p_value;
        res.statistic = nb.statistic;
        res.t = nb.t;
        res.df = nb.df;
        res.z_mean = nb.z_mean;
        res.z_sd = nb.z_sd;
        res.se = nb.se;
        res.rho_hat = nb.rho_hat;
        res.r2 = nb.statistic * nb.statistic;
        res.ci_low = nb.ci_low;
        res.ci_high = nb.ci_high;
        res.n_train = oc.n_train;
        res.n_test = oc.n_test;
        res.n_splits = trains.len() as i64;
        res.n_perm = b as i64;
        return Ok(Outcome { res, r: oc.r, null: oc.null });
    }

    // baselines
    let folds = at_least(o.n_folds, "n_folds", 2)?;
    if folds > n {
        return Err(Fail::invalid("n_folds", format!("{folds} exceeds the number of samples ({n})")));
    }
    let data = prob.data()?;
    if method == THRIFTY_METHOD_JACKKNIFE {
        if !matches!(spec.learner, Learner::Pls) {
            return Err(Fail::invalid("method", "the jackknife is defined for the PLS learner only"));
        }
        let seed = o.seed;
        let jk = with_threads(jobs, || baselines::jackknife(&data, k, folds, seed))??;
        let pmin = if jk.p_values.iter().any(|v| v.is_nan()) {
            f64::NAN
        } else {
            jk.p_values.iter().cloned().fold(f64::INFINITY, f64::min)
        };
        let v = pmin * p as f64;
        res.p_value = if v < 1.0 { v } else { 1.0 };
        res.statistic = if jk.t.iter().any(|v| v.is_nan()) {
            f64::NAN
        } else {
            jk.t.iter().map(|v| v.abs()).fold(f64::NEG_INFINITY, f64::max)
        };
        res.df = jk.df;
        return Ok(Outcome { res, r: Vec::new(), null: Vec::new() });
    }
    let b = at_least(o.n_perm, "n_perm", 1)?;
    let pooled = method == THRIFTY_METHOD_CV_PERMUTATION_Q2;
    let cv_spec = Spec { rotate: Rotation::None, ..spec };
    let seed = o.seed;
    let (observed, null) =
        with_threads(jobs, || baselines::cv_permutation(&data, &cv_spec, folds, seed, 0, b, pooled))??;
    res.p_value = perm::permutation_p(observed, &null);
    res.statistic = observed;
    res.n_perm = b as i64;
    Ok(Outcome { res, r: Vec::new(), null })
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
    let xs = matrix(x, n, p, layout, "x")?;
    let ys = slice(y, n, "y")?;
    let w = opt_slice(weights, n);
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
        let prob = Problem { x: &xs, n, p, y: ys, w };
        let oc = subspace(&prob, &o, basis, trains)?;
        write_vectors(&oc, r_out, r_len, null_out, null_len)?;
        put(result_out, oc.res, "result_out")
    })
}

/// The PLS2 branch of Python's `subspace_test` (a response with m > 1 columns, row-major n × m).
fn subspace_pls2(
    prob: &Problem<'_>,
    y: &[f64],
    m: usize,
    o: &ThriftySubspaceOptions,
    user_trains: Option<Vec<Vec<i64>>>,
) -> Res<Outcome> {
    let (n, p) = (prob.n, prob.p);
    let k = at_least(o.n_components, "n_components", 1)?;
    if o.learner != THRIFTY_LEARNER_PLS {
        return Err(Fail::invalid("learner", "a multi-column y (PLS2) needs the PLS learner"));
    }
    if !(THRIFTY_METHOD_AUTO..=THRIFTY_METHOD_NB_PERMUTATION).contains(&o.method) {
        return Err(Fail::invalid(
            "method",
            "a multi-column y (PLS2) supports THRIFTY_METHOD_AUTO, _NB or _NB_PERMUTATION",
        ));
    }
    if o.rotate != THRIFTY_ROTATE_NONE {
        return Err(Fail::invalid("rotate", "is not supported with a multi-column y (PLS2)"));
    }
    let level = o.confidence_level;
    if !(level.is_finite() && level > 0.0 && level < 1.0) {
        return Err(Fail::invalid("confidence_level", format!("must be in (0, 1), got {level}")));
    }
    let jobs = threads(at_least(o.n_threads, "n_threads", 0)?);
    if y.iter().any(|v| !v.is_finite()) {
        return Err(ThriftyError::NotFinite { arg: "y" }.into());
    }
    let constant = |c: usize| (0..n).all(|i| y[i * m + c] == y[c]);
    if (0..m).all(constant) {
        return Err(Fail::invalid("y", "every column is constant (zero variance); there is nothing to predict"));
    }
    if k > p {
        return Err(Fail::invalid("n_components", format!("{k} exceeds the number of features ({p})")));
    }
    if n < k + 5 {
        return Err(Fail::invalid(
            "x",
            format!("has {n} rows, too few for n_components={k}: need at least n_components + 5 = {}", k + 5),
        ));
    }
    // As Python: x and Y rescaled exactly by powers of two, per column (badly scaled data).
    let xs_v = pow2_scaled(prob.x, n, p, true);
    let ys_v = pow2_scaled(y, n, m, true);
    let y = &ys_v[..];
    let scaled = Problem { x: &xs_v, n, p, y: prob.y, w: prob.w };
    let prob = &scaled;
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let data = Data::new(prob.x, n, p, &index, prob.w)?; // Data's own response is not used by PLS2
    let n_const = prob.constant_columns();
    if n_const == p {
        return Err(Fail::invalid("x", "every column is constant; there is nothing to learn from"));
    }
    let g = prob.gate()?;
    let mut res = ThriftySubspaceResult::empty();
    gate_into(&mut res, &g);
    res.seed = o.seed;
    res.n_components = k as i64;
    res.n_constant_columns = n_const as i64;
    let lf = learner_fires(true, k, true, prob.w, n, &g);
    let (method, reroute, rerouted, forced) = resolve_route(o.method, o.force != 0, &g, lf);
    res.gate_reroute = reroute as i64;
    res.gate_rerouted = rerouted as i64;
    res.gate_forced = forced as i64;
    res.method = method;
    let trains: Vec<Vec<i64>> = match user_trains {
        None => nb::draw_splits(n, k, at_least(o.n_splits, "n_splits", 2)?, o.seed)?
            .into_iter()
            .map(|s| s.train.into_iter().map(|i| i as i64).collect())
            .collect(),
        Some(t) => {
            if t.iter().any(|s| s.len() < k + 2) {
                return Err(Fail::invalid(
                    "splits",
                    format!("every split needs at least n_components + 2 = {} train rows", k + 2),
                ));
            }
            t
        }
    };
    let splits = nb::splits_from_train(n, k, &trains)?;
    let pls2 = |yy: &[f64]| {
        with_threads(jobs, || thrifty_core::inference::pls2::pls2_split_correlations(&data, yy, m, k, &splits))
    };
    let r = pls2(y)??;
    // As Python: splits whose held-out r is undefined (NaN) are left out of the test.
    let n_def = r.iter().filter(|v| v.is_finite()).count();
    if n_def < 2 {
        return Err(Fail::invalid(
            "splits",
            format!(
                "the held-out correlation is undefined on {} of {} splits (a constant test response or prediction); at least 2 splits must define it",
                r.len() - n_def,
                r.len()
            ),
        ));
    }
    let r_def: Vec<f64> = r.iter().copied().filter(|v| v.is_finite()).collect();
    let n_tr: Vec<f64> = trains.iter().zip(&r).filter(|(_, v)| v.is_finite()).map(|(t, _)| t.len() as f64).collect();
    let n_te: Vec<f64> = n_tr.iter().map(|&t| n as f64 - t).collect();
    let ratios: Vec<f64> = n_te.iter().zip(&n_tr).map(|(a, b)| a / b).collect();
    let mut t = nb::nb_test(&r_def, numpy_mean(&ratios), None, level)?;
    if !(t.z_sd > 0.0) {
        t.ci_low = f64::NAN;
        t.ci_high = f64::NAN;
    }
    let mut null = Vec::new();
    res.p_value = t.p_value;
    if method == THRIFTY_METHOD_NB_PERMUTATION {
        let b = at_least(o.n_perm, "n_perm", 1)?;
        // permutation b as the core draws it, rows of Y permuted (Python's _pls2_permutation_null)
        for pb in 0..b as u64 {
            let pi = perm::permutation(n, o.seed, pb);
            let yp: Vec<f64> = pi.iter().flat_map(|&i| y[i * m..(i + 1) * m].iter().copied()).collect();
            null.push(nb::mean_z(&pls2(&yp)??));
        }
        res.p_value = perm::permutation_p(t.z_mean, &null);
        res.n_perm = b as i64;
    }
    res.statistic = t.statistic;
    res.t = t.t;
    res.df = t.df;
    res.z_mean = t.z_mean;
    res.z_sd = t.z_sd;
    res.se = t.se;
    res.rho_hat = t.rho_hat;
    res.r2 = t.statistic * t.statistic;
    res.ci_low = t.ci_low;
    res.ci_high = t.ci_high;
    res.n_train = numpy_mean(&n_tr);
    res.n_test = numpy_mean(&n_te);
    res.n_splits = trains.len() as i64;
    Ok(Outcome { res, r, null })
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
        let (xs, _, w, _, trains) = inputs(x, n, p, layout, y, weights, &o)?;
        let ym = matrix(y, n, m, layout, "y")?;
        let prob = Problem { x: &xs, n, p, y: &[], w };
        let oc = subspace_pls2(&prob, &ym, m, &o, trains)?;
        write_vectors(&oc, r_out, r_len, null_out, null_len)?;
        put(result_out, oc.res, "result_out")
    })
}

unsafe fn write_vectors(oc: &Outcome, r_out: *mut f64, r_len: usize, null_out: *mut f64, null_len: usize) -> Res<()> {
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
        let (xs, ys, w, _, user_trains) = inputs(x, n, p, layout, y, weights, &o)?;
        // As Python: the problem as the core sees it (rescaled exactly by powers of two).
        let xs = pow2_scaled(&xs, n, p, true);
        let ys = pow2_scaled(ys, n, 1, false);
        let prob = Problem { x: &xs, n, p, y: &ys, w };
        prob.data()?;
        if !(alpha.is_finite() && alpha > 0.0 && alpha < 1.0) {
            return Err(Fail::invalid("alpha", format!("must be in (0, 1), got {alpha}")));
        }
        if !(THRIFTY_METHOD_AUTO..=THRIFTY_METHOD_NB_PERMUTATION).contains(&o.method) {
            return Err(Fail::invalid("method", "must be THRIFTY_METHOD_AUTO, _NB or _NB_PERMUTATION"));
        }
        let bound = p.min(n.saturating_sub(6));
        let hmax = if max_components <= 0 { 10.min(bound) } else { max_components as usize };
        if hmax < 1 || hmax > bound {
            return Err(Fail::invalid(
                "max_components",
                format!("must be in [1, min(n_features, n_samples - 6)] = [1, {bound}]"),
            ));
        }
        let pv = out(p_values_out, p_len, "p_values_out")?;
        if p_len < hmax {
            return Err(Fail::shape("p_values_out", format!("holds {p_len} values, {hmax} are needed")));
        }
        let _ = at_least(o.n_threads, "n_threads", 0)?;
        if prob.constant_columns() == p {
            return Err(Fail::invalid("x", "every column is constant; there is nothing to learn from"));
        }
        let g = prob.gate()?;
        // the route is decided once on the undeflated X (every step is a one-component PLS1 test)
        let lf = learner_fires(true, 1, false, prob.w, n, &g);
        let (run, reroute, rerouted, _) = resolve_route(o.method, o.force != 0, &g, lf);
        let mut result = ThriftyComponentResult {
            gate_reroute: reroute as i64,
            gate_rerouted: rerouted as i64,
            method: run,
            seed: o.seed,
            ..Default::default()
        };
        let trains: Vec<Vec<i64>> = match user_trains {
            Some(t) => t,
            None => nb::draw_splits(n, 1, at_least(o.n_splits, "n_splits", 2)?, o.seed)?
                .into_iter()
                .map(|s| s.train.into_iter().map(|i| i as i64).collect())
                .collect(),
        };
        let data = prob.data()?;
        let step_opts = ThriftySubspaceOptions { method: run, force: 1, ..o };
        let mut steps = 0usize;
        for h in 1..=hmax {
            let deflated;
            let (xr, yr): (&[f64], &[f64]) = if h == 1 {
                (prob.x, prob.y)
            } else {
                match baselines::deflate(&data, h - 1) {
                    Ok(v) => deflated = v,
                    Err(
                        ThriftyError::InvalidArgument { .. }
                        | ThriftyError::Shape { .. }
                        | ThriftyError::NotFinite { .. },
                    ) => break,
                    Err(e) => return Err(e.into()),
                }
                let ymax = deflated.1.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let (lo, hi) =
                    deflated.1.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
                if hi - lo <= 1e-12 * ymax {
                    break;
                }
                (&deflated.0, &deflated.1)
            };
            let step = Problem { x: xr, n, p, y: yr, w: prob.w };
            match subspace(&step, &step_opts, None, Some(trains.clone())) {
                Ok(oc) => {
                    pv[steps] = oc.res.p_value;
                    steps += 1;
                    if oc.res.p_value >= alpha {
                        break;
                    }
                    result.k_star = h as i64;
                }
                Err(f)
                    if f.status == crate::THRIFTY_ERR_INVALID_ARGUMENT
                        || f.status == crate::THRIFTY_ERR_SHAPE
                        || f.status == crate::THRIFTY_ERR_NOT_FINITE =>
                {
                    break
                }
                Err(f) => return Err(f),
            }
        }
        result.n_steps = steps as i64;
        put(result_out, result, "result_out")
    })
}
