//! Steps 2 and 3 of the subspace test, written once: the problem as the core sees it (exactly
//! rescaled), the route ([`crate::inference::route`]), the splits, the per-split held-out r, the
//! NB outcome (undefined splits left out, NumPy's summation order for the split-size means), the
//! NB-permutation null, the CV baselines, the jackknife, PLS2 and the per-component sequence. The
//! C ABI calls these whole; the Python layer calls [`nb_outcome`] and the route (it runs the
//! learners that need a Python callback itself). Same seed, same result in every front end.
use crate::error::{Result, ThriftyError};
use crate::inference::fit::{Data, Learner, Rotation, Spec};
use crate::inference::nb::{self, NbResult};
use crate::inference::route::{self, kish_n_eff, numpy_mean, power_of_two_scaled, Gate, LearnerKind, Method, Route};
use crate::inference::splits::{self, permutation, permutation_p};
use crate::inference::{baselines, perm, pls2, plssvd, spls};
use crate::threads::with_threads;
use std::sync::atomic::AtomicBool;

/// What a test needs besides the data (the front ends' options after marshalling).
#[derive(Clone, Debug)]
pub struct TestOptions {
    /// Directions k (a basis learner: its columns; 1 is taken as "the basis' columns").
    pub k: usize,
    pub learner: Learner,
    pub method: Method,
    pub n_splits: usize,
    pub n_perm: usize,
    pub n_folds: usize,
    pub rotate: Rotation,
    pub force: bool,
    pub seed: u64,
    pub level: f64,
    /// Explicit train indices of every split (None: `n_splits` random balanced splits).
    pub trains: Option<Vec<Vec<i64>>>,
    /// Threads (None: the current pool). Results do not depend on it.
    pub jobs: Option<usize>,
}

/// The outcome of one test (fields a method does not define are NaN, or empty).
#[derive(Clone, Debug)]
pub struct TestOutcome {
    pub route: Route,
    pub k: usize,
    pub n_constant_columns: usize,
    pub p_value: f64,
    /// NB methods: tanh of the mean Fisher z; CV methods: the observed score; jackknife: max |t|.
    pub statistic: f64,
    pub t: f64,
    pub df: f64,
    pub z_mean: f64,
    pub z_sd: f64,
    pub se: f64,
    pub rho_hat: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub n_train: f64,
    pub n_test: f64,
    /// Per-split held-out r (split tests), empty for the baselines.
    pub r: Vec<f64>,
    /// The permutation null (mean Fisher z, or the CV score), empty otherwise.
    pub null: Vec<f64>,
    /// Train indices of every split (split tests).
    pub trains: Vec<Vec<i64>>,
}

impl TestOutcome {
    fn empty(route: Route, k: usize, n_constant_columns: usize) -> Self {
        let nan = f64::NAN;
        TestOutcome {
            route,
            k,
            n_constant_columns,
            p_value: nan,
            statistic: nan,
            t: nan,
            df: nan,
            z_mean: nan,
            z_sd: nan,
            se: nan,
            rho_hat: nan,
            ci_low: nan,
            ci_high: nan,
            n_train: nan,
            n_test: nan,
            r: Vec::new(),
            null: Vec::new(),
            trains: Vec::new(),
        }
    }

    fn set_nb(&mut self, o: NbOutcome, p_value: f64) {
        let nb = o.nb;
        self.p_value = p_value;
        self.statistic = nb.statistic;
        self.t = nb.t;
        self.df = nb.df;
        self.z_mean = nb.z_mean;
        self.z_sd = nb.z_sd;
        self.se = nb.se;
        self.rho_hat = nb.rho_hat;
        self.ci_low = nb.ci_low;
        self.ci_high = nb.ci_high;
        self.n_train = o.n_train;
        self.n_test = o.n_test;
    }
}

/// The NB test on per-split correlations with the front ends' rules.
#[derive(Clone, Debug)]
pub struct NbOutcome {
    /// NB test on the defined splits; its CI is NaN when the split correlations do not vary.
    pub nb: NbResult,
    /// Splits whose held-out r is undefined (NaN), left out of the test.
    pub n_undefined: usize,
    /// Mean train and test sizes over the defined splits.
    pub n_train: f64,
    pub n_test: f64,
}

/// The NB test on `rs` (per split; NaN where undefined) with train sizes `n_train` out of `n` rows:
/// undefined splits are left out (at least 2 must remain), the size ratio is the mean of
/// n_test/n_train, and ρ̂ is defined only for a single unweighted response (`rho_hat_defined`).
pub fn nb_outcome(rs: &[f64], n_train: &[f64], n: usize, level: f64, rho_hat_defined: bool) -> Result<NbOutcome> {
    if rs.len() != n_train.len() {
        return Err(ThriftyError::shape("n_train", "needs one train size per split"));
    }
    let defined: Vec<bool> = rs.iter().map(|v| v.is_finite()).collect();
    let n_def = defined.iter().filter(|&&d| d).count();
    let n_undefined = rs.len() - n_def;
    if n_def < 2 {
        return Err(ThriftyError::invalid(
            "splits",
            format!(
                "the held-out correlation is undefined on {n_undefined} of {} splits (a constant test response or \
                 prediction); at least 2 splits must define it",
                rs.len()
            ),
        ));
    }
    let r_def: Vec<f64> = rs.iter().copied().filter(|v| v.is_finite()).collect();
    let n_tr: Vec<f64> = n_train.iter().zip(&defined).filter(|(_, &d)| d).map(|(&t, _)| t).collect();
    let n_te: Vec<f64> = n_tr.iter().map(|&t| n as f64 - t).collect();
    let ratios: Vec<f64> = n_te.iter().zip(&n_tr).map(|(a, b)| a / b).collect();
    let n_te_mean = numpy_mean(&n_te);
    let mut nb = nb::nb_test(&r_def, numpy_mean(&ratios), rho_hat_defined.then_some(n_te_mean), level)?;
    if !(nb.z_sd > 0.0) {
        // no variation between splits: the NB standard error is 0, the CI undefined
        nb.ci_low = f64::NAN;
        nb.ci_high = f64::NAN;
    }
    Ok(NbOutcome { nb, n_undefined, n_train: numpy_mean(&n_tr), n_test: n_te_mean })
}

/// The kind of a core learner (for the learner rule).
pub fn learner_kind(learner: &Learner) -> LearnerKind {
    match learner {
        Learner::Pls => LearnerKind::Pls,
        Learner::Spca { .. } => LearnerKind::Spca,
        Learner::Ridge { .. } => LearnerKind::Ridge,
        Learner::Basis { .. } => LearnerKind::Basis,
        Learner::SplitBases { .. } => LearnerKind::Callable,
        Learner::Spls { .. } => LearnerKind::Spls,
    }
}

/// The gate on `x` (already rescaled; the gate does not look at y).
pub fn gate_of(x: &[f64], n: usize, p: usize, w: Option<&[f64]>) -> Result<Gate> {
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    nb::gate(&Data::new(x, n, p, &index, w)?)
}

/// Step 1 on data as the core sees them: the gate, the learner rule, the method.
#[allow(clippy::too_many_arguments)]
pub fn route_of(
    x: &[f64],
    n: usize,
    p: usize,
    w: Option<&[f64]>,
    kind: LearnerKind,
    k: usize,
    multi: bool,
    method: Method,
    force: bool,
    sequence: bool,
) -> Result<Route> {
    let g = gate_of(x, n, p, w)?;
    let why = route::nb_reason(multi, kind, k, kish_n_eff(w, n), Some(g.stable_rank));
    Ok(route::resolve(method, force, g, why, sequence))
}

fn constant_columns(x: &[f64], n: usize, p: usize) -> usize {
    (0..p).filter(|&j| (0..n).all(|i| x[i * p + j] == x[j])).count()
}

/// `v` unless it is below `min` (the C ABI's message for a count option).
fn at_least(v: usize, arg: &'static str, min: usize) -> Result<usize> {
    if v < min {
        return Err(ThriftyError::invalid(arg, format!("must be >= {min}, got {v}")));
    }
    Ok(v)
}

fn check_level(level: f64) -> Result<()> {
    if !(level.is_finite() && level > 0.0 && level < 1.0) {
        return Err(ThriftyError::invalid("confidence_level", format!("must be in (0, 1), got {level}")));
    }
    Ok(())
}

fn check_rows(n: usize, p: usize, k: usize) -> Result<()> {
    if k > p {
        return Err(ThriftyError::invalid("n_components", format!("{k} exceeds the number of features ({p})")));
    }
    if n < k + 5 {
        return Err(ThriftyError::invalid(
            "x",
            format!("has {n} rows, too few for n_components={k}: need at least n_components + 5 = {}", k + 5),
        ));
    }
    Ok(())
}

/// The splits of a split test: the given ones (each with at least k + 2 train rows) or drawn.
fn trains_for(o: &TestOptions, n: usize, k: usize) -> Result<Vec<Vec<i64>>> {
    match &o.trains {
        Some(t) => {
            if t.iter().any(|s| s.len() < k + 2) {
                return Err(ThriftyError::invalid(
                    "splits",
                    format!("every split needs at least n_components + 2 = {} train rows", k + 2),
                ));
            }
            Ok(t.clone())
        }
        None => Ok(splits::draw_splits(n, k, at_least(o.n_splits, "n_splits", 2)?, o.seed)?
            .into_iter()
            .map(|s| s.train.into_iter().map(|i| i as i64).collect())
            .collect()),
    }
}

/// The subspace test of a single response: `x` n × p row-major, `y` n, `w` n weights or None. Stops
/// with `Err(Interrupted)` soon after `cancel` is raised (checked per split and per permutation).
pub fn subspace_test(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    w: Option<&[f64]>,
    o: &TestOptions,
    cancel: &AtomicBool,
) -> Result<TestOutcome> {
    check_level(o.level)?;
    if let Learner::Ridge { alpha } = o.learner {
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(ThriftyError::invalid("ridge_alpha", format!("must be in (0, inf), got {alpha}")));
        }
    }
    let mut k = o.k;
    if let Learner::Basis { basis } = &o.learner {
        let cols = basis.len() / p.max(1);
        if k != 1 && k != cols {
            return Err(ThriftyError::invalid("n_components", format!("{k} does not match the basis' {cols} columns")));
        }
        k = cols;
    }
    check_rows(n, p, k)?;
    // x and y as the core sees them, rescaled exactly by powers of two (badly scaled data);
    // standardising learners are invariant to per-column scaling, the others to a global one
    let xs = power_of_two_scaled(x, n, p, o.learner.standardizes())?;
    let ys = power_of_two_scaled(y, n, 1, false)?;
    let data = Data::new(&xs, n, p, &ys, w)?; // finite, shapes, non-constant y, valid weights
    let n_const = constant_columns(&xs, n, p);
    if n_const == p {
        return Err(ThriftyError::invalid("x", "every column is constant; there is nothing to learn from"));
    }
    let kind = learner_kind(&o.learner);
    let route = route_of(&xs, n, p, w, kind, k, false, o.method, o.force, false)?;
    let spec = Spec { learner: o.learner.clone(), k, rotate: o.rotate };
    let mut out = TestOutcome::empty(route, k, n_const);
    let run = out.route.run;
    if run.is_split_test() {
        let trains = trains_for(o, n, k)?;
        let sp = splits::splits_from_train(n, k, &trains)?;
        let r = with_threads(o.jobs, || nb::split_correlations_cancellable(&data, &spec, &sp, &ys, cancel))??;
        let sizes: Vec<f64> = trains.iter().map(|t| t.len() as f64).collect();
        let oc = nb_outcome(&r, &sizes, n, o.level, w.is_none())?;
        let mut p_value = oc.nb.p_value;
        if run == Method::NbPermutation {
            let (seed, b) = (o.seed, at_least(o.n_perm, "n_perm", 1)?);
            out.null = with_threads(o.jobs, || {
                perm::nb_permutation_null_cancellable(&data, &spec, &sp, seed, 0, b, perm::Route::Auto, cancel)
            })??;
            p_value = permutation_p(oc.nb.z_mean, &out.null);
        }
        out.set_nb(oc, p_value);
        out.r = r;
        out.trains = trains;
        return Ok(out);
    }
    baseline(&data, spec, o, n, p, out, cancel)
}

/// Step 3: a CV baseline or the jackknife.
fn baseline(
    data: &Data<'_>,
    spec: Spec,
    o: &TestOptions,
    n: usize,
    p: usize,
    mut out: TestOutcome,
    cancel: &AtomicBool,
) -> Result<TestOutcome> {
    let folds = at_least(o.n_folds, "n_folds", 2)?;
    if folds > n {
        return Err(ThriftyError::invalid("n_folds", format!("{folds} exceeds the number of samples ({n})")));
    }
    let seed = o.seed;
    if out.route.run == Method::Jackknife {
        if !matches!(spec.learner, Learner::Pls) {
            return Err(ThriftyError::invalid("method", "the jackknife is defined for the PLS learner only"));
        }
        let k = spec.k;
        let jk = with_threads(o.jobs, || baselines::jackknife(data, k, folds, seed))??;
        let pmin = if jk.p_values.iter().any(|v| v.is_nan()) {
            f64::NAN
        } else {
            jk.p_values.iter().cloned().fold(f64::INFINITY, f64::min)
        };
        let v = pmin * p as f64;
        out.p_value = if v < 1.0 { v } else { 1.0 };
        out.statistic = if jk.t.iter().any(|v| v.is_nan()) {
            f64::NAN
        } else {
            jk.t.iter().map(|v| v.abs()).fold(f64::NEG_INFINITY, f64::max)
        };
        out.df = jk.df;
        return Ok(out);
    }
    let pooled = out.route.run == Method::CvPermutationQ2;
    let cv_spec = Spec { rotate: Rotation::None, ..spec };
    let b = at_least(o.n_perm, "n_perm", 1)?;
    let (observed, null) = with_threads(o.jobs, || {
        baselines::cv_permutation_cancellable(data, &cv_spec, folds, seed, 0, b, pooled, cancel)
    })??;
    out.p_value = permutation_p(observed, &null);
    out.statistic = observed;
    out.null = null;
    Ok(out)
}

/// The subspace test of an n × m response (PLS2; m ≥ 2, row-major): the PLS learner, methods auto,
/// nb and nb-permutation, no rotation.
pub fn subspace_test_pls2(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    m: usize,
    w: Option<&[f64]>,
    o: &TestOptions,
) -> Result<TestOutcome> {
    let k = o.k;
    if !matches!(o.learner, Learner::Pls) {
        return Err(ThriftyError::invalid("learner", "a multi-column y (PLS2) needs the PLS learner"));
    }
    if !matches!(o.method, Method::Auto | Method::Nb | Method::NbPermutation) {
        return Err(ThriftyError::invalid(
            "method",
            "a multi-column y (PLS2) supports THRIFTY_METHOD_AUTO, _NB or _NB_PERMUTATION",
        ));
    }
    if o.rotate != Rotation::None {
        return Err(ThriftyError::invalid("rotate", "is not supported with a multi-column y (PLS2)"));
    }
    check_level(o.level)?;
    crate::error::ensure_finite("y", y)?;
    if (0..m).all(|c| (0..n).all(|i| y[i * m + c] == y[c])) {
        return Err(ThriftyError::invalid(
            "y",
            "every column is constant (zero variance); there is nothing to predict",
        ));
    }
    check_rows(n, p, k)?;
    // x and Y rescaled exactly by powers of two, per column (badly scaled data)
    let xs = power_of_two_scaled(x, n, p, true)?;
    let ys = power_of_two_scaled(y, n, m, true)?;
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let data = Data::new(&xs, n, p, &index, w)?; // Data's own response is not used by PLS2
    let n_const = constant_columns(&xs, n, p);
    if n_const == p {
        return Err(ThriftyError::invalid("x", "every column is constant; there is nothing to learn from"));
    }
    let route = route_of(&xs, n, p, w, LearnerKind::Pls, k, true, o.method, o.force, false)?;
    let mut out = TestOutcome::empty(route, k, n_const);
    let trains = trains_for(o, n, k)?;
    let sp = splits::splits_from_train(n, k, &trains)?;
    let pls2 = |yy: &[f64]| with_threads(o.jobs, || pls2::pls2_split_correlations(&data, yy, m, k, &sp));
    let r = pls2(&ys)??;
    let sizes: Vec<f64> = trains.iter().map(|t| t.len() as f64).collect();
    let oc = nb_outcome(&r, &sizes, n, o.level, false)?;
    let mut p_value = oc.nb.p_value;
    if out.route.run == Method::NbPermutation {
        // permutation b as the core draws it, rows of Y permuted
        for b in 0..at_least(o.n_perm, "n_perm", 1)? as u64 {
            let pi = permutation(n, o.seed, b);
            let yp: Vec<f64> = pi.iter().flat_map(|&i| ys[i * m..(i + 1) * m].iter().copied()).collect();
            out.null.push(splits::mean_z(&pls2(&yp)??));
        }
        p_value = permutation_p(oc.nb.z_mean, &out.null);
    }
    out.set_nb(oc, p_value);
    out.r = r;
    out.trains = trains;
    Ok(out)
}

/// The per-component fixed-sequence test.
#[derive(Clone, Debug)]
pub struct ComponentsOutcome {
    /// The route, decided once on the undeflated X.
    pub route: Route,
    pub k_star: usize,
    /// p-value of every tested step.
    pub p_values: Vec<f64>,
}

/// The longest sequence: `max_components`, or min(10, p, n − 6) for None; it must lie in
/// [1, min(p, n − 6)].
pub fn component_steps(n: usize, p: usize, max_components: Option<usize>) -> Result<usize> {
    let bound = p.min(n.saturating_sub(6));
    let hmax = max_components.unwrap_or(10.min(bound));
    if hmax < 1 || hmax > bound {
        return Err(ThriftyError::invalid(
            "max_components",
            format!("must be in [1, min(n_features, n_samples - 6)] = [1, {bound}]"),
        ));
    }
    Ok(hmax)
}

/// Step h deflates h − 1 PLS components from X and y (fitted on all rows) and tests the residual
/// with a one-component test on the same splits; the sequence stops at the first p ≥ `alpha`.
/// `max_components` None: min(10, p, n − 6). Uses `o.method` (auto, nb, nb-permutation), the
/// splits, `n_perm`, `force`, `seed`, `jobs`.
#[allow(clippy::too_many_arguments)]
pub fn component_tests(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    w: Option<&[f64]>,
    o: &TestOptions,
    max_components: Option<usize>,
    alpha: f64,
    cancel: &AtomicBool,
) -> Result<ComponentsOutcome> {
    let xs = power_of_two_scaled(x, n, p, true)?;
    let ys = power_of_two_scaled(y, n, 1, false)?;
    let data = Data::new(&xs, n, p, &ys, w)?;
    if !(alpha.is_finite() && alpha > 0.0 && alpha < 1.0) {
        return Err(ThriftyError::invalid("alpha", format!("must be in (0, 1), got {alpha}")));
    }
    if !matches!(o.method, Method::Auto | Method::Nb | Method::NbPermutation) {
        return Err(ThriftyError::invalid("method", "must be THRIFTY_METHOD_AUTO, _NB or _NB_PERMUTATION"));
    }
    let hmax = component_steps(n, p, max_components)?;
    if constant_columns(&xs, n, p) == p {
        return Err(ThriftyError::invalid("x", "every column is constant; there is nothing to learn from"));
    }
    // the route is decided once on the undeflated X (every step is a one-component PLS1 test)
    let route = route_of(&xs, n, p, w, LearnerKind::Pls, 1, false, o.method, o.force, true)?;
    let trains = match &o.trains {
        Some(t) => t.clone(),
        None => trains_for(o, n, 1)?,
    };
    let step_opts =
        TestOptions { k: 1, learner: Learner::Pls, method: route.run, force: true, trains: Some(trains), ..o.clone() };
    let (mut k_star, mut p_values) = (0, Vec::new());
    for h in 1..=hmax {
        let deflated;
        let (xr, yr): (&[f64], &[f64]) = if h == 1 {
            (&xs, &ys)
        } else {
            match baselines::deflate(&data, h - 1) {
                Ok(v) => deflated = v,
                Err(
                    ThriftyError::InvalidArgument { .. } | ThriftyError::Shape { .. } | ThriftyError::NotFinite { .. },
                ) => break,
                Err(e) => return Err(e),
            }
            let ymax = deflated.1.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let (lo, hi) =
                deflated.1.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
            if hi - lo <= 1e-12 * ymax {
                break;
            }
            (&deflated.0, &deflated.1)
        };
        match subspace_test(xr, n, p, yr, w, &step_opts, cancel) {
            Ok(oc) => {
                p_values.push(oc.p_value);
                if oc.p_value >= alpha {
                    break;
                }
                k_star = h;
            }
            Err(ThriftyError::InvalidArgument { .. } | ThriftyError::Shape { .. } | ThriftyError::NotFinite { .. }) => {
                break
            }
            Err(e) => return Err(e),
        }
    }
    Ok(ComponentsOutcome { route, k_star, p_values })
}

/// The two-block PLS-SVD test ([`pls_svd_test`]): the split test of the first latent pair and the
/// pairs fitted on all rows.
pub struct PlsSvdOutcome {
    /// The split test (`k` = 1, the learner rule of [`LearnerKind::PlsSvd`]).
    pub test: TestOutcome,
    /// `k` pairs on all rows: both blocks' weights and the singular values.
    pub fit: plssvd::PlsSvdFit,
}

/// The two-block PLS-SVD test of `x` (n × p) against `y` (n × q), both row-major: the held-out
/// latent correlation of the first pair on every split, the NB outcome (ρ̂ defined) and, on the
/// NB-permutation route, the null with the rows of Y permuted; `k` pairs reported from the fit on
/// all rows. Uses `o.method` (auto, nb, nb-permutation), the splits, `n_perm`, `force`, `seed` and
/// `level`; the gate looks at X only. Same steps as Python's `pls_svd_test`.
#[allow(clippy::too_many_arguments)]
pub fn pls_svd_test(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    q: usize,
    k: usize,
    o: &TestOptions,
    cancel: &AtomicBool,
) -> Result<PlsSvdOutcome> {
    if !matches!(o.method, Method::Auto | Method::Nb | Method::NbPermutation) {
        return Err(ThriftyError::invalid("method", "the PLS-SVD test supports auto, nb or nb-permutation"));
    }
    check_level(o.level)?;
    plssvd::Blocks::new(x, y, n, p, q)?; // shapes, finite values, n >= 6
    for (name, a, c) in [("X", x, p), ("Y", y, q)] {
        if constant_columns(a, n, c) == c {
            return Err(ThriftyError::invalid(name, "every column is constant; there is no covariance to find"));
        }
    }
    if k == 0 || k > p.min(q) {
        return Err(ThriftyError::invalid(
            "n_components",
            format!("must be in [1, min(p, q)] = [1, {}], got {k}", p.min(q)),
        ));
    }
    let xs = power_of_two_scaled(x, n, p, true)?;
    let ys = power_of_two_scaled(y, n, q, true)?;
    let bl = plssvd::Blocks::new(&xs, &ys, n, p, q)?;
    let route = route_of(&xs, n, p, None, LearnerKind::PlsSvd, 1, false, o.method, o.force, false)?;
    let mut out = TestOutcome::empty(route, 1, constant_columns(&xs, n, p));
    let trains = trains_for(o, n, 1)?;
    let sp = splits::splits_from_train(n, 1, &trains)?;
    let r = plssvd::split_correlations(&bl, &sp, cancel)?;
    let sizes: Vec<f64> = trains.iter().map(|t| t.len() as f64).collect();
    let oc = nb_outcome(&r, &sizes, n, o.level, true)?;
    let mut p_value = oc.nb.p_value;
    if out.route.run == Method::NbPermutation {
        // in chunks of at most ~4M permuted entries (Python's chunks; permutation b has its own stream)
        let b = at_least(o.n_perm, "n_perm", 1)?;
        let chunk = b.min((1usize << 22) / (n * q).max(1)).max(1);
        for start in (0..b).step_by(chunk) {
            let count = chunk.min(b - start);
            out.null.extend(plssvd::permutation_null(&bl, &sp, o.seed, start as u64, count, cancel)?);
        }
        p_value = permutation_p(oc.nb.z_mean, &out.null);
    }
    out.set_nb(oc, p_value);
    out.r = r;
    out.trains = trains;
    // the blocks are standardised, so the exact power-of-two rescaling of their columns cancels
    let fit = plssvd::fit(&bl, k)?;
    Ok(PlsSvdOutcome { test: out, fit })
}

/// The sparse PLS1 basis of `learner = spls` fitted on all rows, on the data as the test sees them
/// (exactly rescaled by powers of two): the `result.basis` of Python's `subspace_test`. `keep` 0:
/// the cross-validated keep-count.
pub fn spls_basis(
    x: &[f64],
    n: usize,
    p: usize,
    y: &[f64],
    w: Option<&[f64]>,
    k: usize,
    keep: usize,
) -> Result<spls::SplsFit> {
    let xs = power_of_two_scaled(x, n, p, true)?;
    let ys = power_of_two_scaled(y, n, 1, false)?;
    spls::spls_fit(&Data::new(&xs, n, p, &ys, w)?, k, keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nb_outcome_leaves_undefined_splits_out_and_needs_two() {
        let rs = [0.3, f64::NAN, 0.1, 0.25];
        let sizes = [50.0, 50.0, 48.0, 52.0];
        let o = nb_outcome(&rs, &sizes, 100, 0.95, true).unwrap();
        assert_eq!(o.n_undefined, 1);
        let ratio = (50.0 / 50.0 + 52.0 / 48.0 + 48.0 / 52.0) / 3.0;
        let want = nb::nb_test(&[0.3, 0.1, 0.25], ratio, Some(50.0), 0.95).unwrap();
        assert!((o.nb.t - want.t).abs() < 1e-15 && o.nb.p_value == want.p_value);
        assert_eq!((o.n_train, o.n_test), (50.0, 50.0));
        assert!(nb_outcome(&[0.3, f64::NAN, f64::NAN], &[50.0; 3], 100, 0.95, true).is_err());
        // no variation between splits: the CI is undefined, the test is not
        let flat = nb_outcome(&[0.2, 0.2, 0.2], &[50.0; 3], 100, 0.95, false).unwrap();
        assert!(flat.nb.ci_low.is_nan() && flat.nb.ci_high.is_nan() && flat.nb.rho_hat.is_nan());
    }

    #[test]
    fn pls_svd_test_is_the_split_test_of_the_first_pair_routed_by_the_learner_rule() {
        let (n, p, q) = (60, 6, 3); // more than 4 columns: no design rule fires
        let mut r = crate::rng::stream(8, 0);
        let z: Vec<f64> = (0..n).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
        let x: Vec<f64> =
            (0..n * p).map(|i| crate::rng::uniform(&mut r) + if i % p == 1 { 2.0 * z[i / p] } else { 0.0 }).collect();
        let y: Vec<f64> =
            (0..n * q).map(|i| crate::rng::uniform(&mut r) + if i % q == 0 { 2.0 * z[i / q] } else { 0.0 }).collect();
        let o = TestOptions {
            k: 2,
            learner: Learner::Pls,
            method: Method::Auto,
            n_splits: 12,
            n_perm: 29,
            n_folds: 5,
            rotate: Rotation::None,
            force: false,
            seed: 6,
            level: 0.95,
            trains: None,
            jobs: Some(1),
        };
        let cancel = AtomicBool::new(false);
        let a = pls_svd_test(&x, n, p, &y, q, 2, &o, &cancel).unwrap();
        // "auto" is the NB-permutation test, silently, with the learner rule's reason
        let t = &a.test;
        assert_eq!((t.route.run, t.route.rerouted, t.route.warning.is_none()), (Method::NbPermutation, true, true));
        assert!(t.route.gate.reasons.iter().any(|s| s.contains("PLS-SVD")));
        // the steps composed by hand on the same splits give the same numbers
        let bl = plssvd::Blocks::new(&x, &y, n, p, q).unwrap();
        let sp = splits::splits_from_train(n, 1, &t.trains).unwrap();
        let rs = plssvd::split_correlations(&bl, &sp, &cancel).unwrap();
        assert_eq!(rs, t.r);
        let null = plssvd::permutation_null(&bl, &sp, 6, 0, 29, &cancel).unwrap();
        assert_eq!(null, t.null);
        assert_eq!(t.p_value, permutation_p(t.z_mean, &null));
        assert_eq!(t.p_value, 1.0 / 30.0); // a strong shared latent variable
        assert_eq!((a.fit.x_weights.len(), a.fit.y_weights.len(), a.fit.singular_values.len()), (p * 2, q * 2, 2));
        // forced NB-asymptotic; bad input is an error naming the argument
        let nb =
            pls_svd_test(&x, n, p, &y, q, 1, &TestOptions { method: Method::Nb, force: true, ..o.clone() }, &cancel)
                .unwrap();
        assert!(nb.test.route.forced && nb.test.null.is_empty() && nb.test.p_value < 0.05, "{}", nb.test.p_value);
        let bad =
            |k: usize, m: Method| pls_svd_test(&x, n, p, &y, q, k, &TestOptions { method: m, ..o.clone() }, &cancel);
        assert!(matches!(bad(4, Method::Auto), Err(ThriftyError::InvalidArgument { .. }))); // k > min(p, q)
        assert!(matches!(bad(1, Method::Jackknife), Err(ThriftyError::InvalidArgument { .. })));
        let flat = vec![1.0; n * q];
        assert!(pls_svd_test(&x, n, p, &flat, q, 1, &o, &cancel).is_err());
    }

    #[test]
    fn the_run_reroutes_as_the_route_says_and_reproduces_itself() {
        let (n, p) = (80, 6);
        let mut r = crate::rng::stream(3, 0);
        let x: Vec<f64> = (0..n * p).map(|_| crate::rng::below(&mut r, 1000) as f64 / 100.0).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * p] + crate::rng::below(&mut r, 100) as f64 / 20.0).collect();
        let o = TestOptions {
            k: 1,
            learner: Learner::Ridge { alpha: 1.0 },
            method: Method::Auto,
            n_splits: 10,
            n_perm: 19,
            n_folds: 5,
            rotate: Rotation::None,
            force: false,
            seed: 4,
            level: 0.95,
            trains: None,
            jobs: Some(1),
        };
        let no = AtomicBool::new(false);
        let a = subspace_test(&x, n, p, &y, None, &o, &no).unwrap();
        assert_eq!((a.route.run, a.route.rerouted, a.null.len(), a.r.len()), (Method::NbPermutation, true, 19, 10));
        assert_eq!(a.p_value, permutation_p(a.z_mean, &a.null));
        let given = TestOptions { trains: Some(a.trains.clone()), ..o.clone() };
        let b = subspace_test(&x, n, p, &y, None, &given, &no).unwrap();
        assert_eq!((a.p_value.to_bits(), a.t.to_bits()), (b.p_value.to_bits(), b.t.to_bits()));
        let forced =
            subspace_test(&x, n, p, &y, None, &TestOptions { force: true, method: Method::Nb, ..o }, &no).unwrap();
        assert!(forced.route.forced && forced.null.is_empty() && forced.p_value < 0.05);
    }
}
