//! Bindings for the `inference` capability: argument conversion, GIL release, error mapping, nothing
//! else. The Python layer (`thrifty.inference`) validates first and passes C-contiguous float64
//! arrays. Every core call that does real work goes through [`enter`] (GIL released, Ctrl-C raises
//! the core's cancel flag, `n_jobs` capped at the CPU count); results are `#[derive(IntoPyObject)]`
//! structs (dicts on the Python side, typed in `_core.pyi`).
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::arrays::{matrix, opt_slice1, slice1, slice2};
use crate::errors::{enter, to_py, CoreResultExt};
use thrifty_core::inference::{
    baselines, fit::Data, nb, perm, pls2, route, run, special, splits, varimax, Learner, Rotation, Route, Spec,
};
use thrifty_core::ThriftyError;

type F64s<'py> = Bound<'py, PyArray1<f64>>;
type F64Matrix<'py> = Bound<'py, PyArray2<f64>>;
type Idx<'py> = Bound<'py, PyArray1<i64>>;

// ---- results ---------------------------------------------------------------------------------

/// `inference_gate` (`GateDict`).
#[derive(IntoPyObject)]
struct Gate {
    n_eff: f64,
    stable_rank: f64,
    n_columns: usize,
    reroute: bool,
    reasons: Vec<String>,
}

/// `inference_route` / `inference_route_from_gate` (`RouteDict`): step 1's answer.
#[derive(IntoPyObject)]
struct RouteOut {
    run: &'static str,
    n_eff: f64,
    stable_rank: f64,
    n_columns: usize,
    reroute: bool,
    reasons: Vec<String>,
    forced: bool,
    rerouted: bool,
    warning: Option<String>,
}

impl From<route::Route> for RouteOut {
    fn from(r: route::Route) -> Self {
        RouteOut {
            run: r.run.name(),
            n_eff: r.gate.n_eff,
            stable_rank: r.gate.stable_rank,
            n_columns: r.gate.n_columns,
            reroute: r.gate.reroute,
            reasons: r.gate.reasons,
            forced: r.forced,
            rerouted: r.rerouted,
            warning: r.warning,
        }
    }
}

/// `inference_nb_outcome` (`NbOutcomeDict`).
#[derive(IntoPyObject)]
struct NbOutcomeOut {
    z_mean: f64,
    z_sd: f64,
    se: f64,
    statistic: f64,
    t: f64,
    df: f64,
    p_value: f64,
    rho_hat: f64,
    ci_low: f64,
    ci_high: f64,
    n_undefined: usize,
    n_train: f64,
    n_test: f64,
}

/// `inference_pls_fit` (`PlsFitDict`).
#[derive(IntoPyObject)]
struct PlsFit<'py> {
    coef: F64s<'py>,
    intercept: f64,
    x_weights: F64Matrix<'py>,
    x_loadings: F64Matrix<'py>,
    x_rotations: F64Matrix<'py>,
    y_loadings: F64s<'py>,
    x_mean: F64s<'py>,
    x_std: F64s<'py>,
    y_mean: f64,
    y_std: f64,
    n_components_fitted: usize,
}

/// `inference_pls2_fit` (`Pls2FitDict`).
#[derive(IntoPyObject)]
struct Pls2Fit<'py> {
    coef: F64Matrix<'py>,
    intercept: F64s<'py>,
    x_weights: F64Matrix<'py>,
    x_loadings: F64Matrix<'py>,
    x_rotations: F64Matrix<'py>,
    y_loadings: F64Matrix<'py>,
    x_mean: F64s<'py>,
    x_std: F64s<'py>,
    n_components_fitted: usize,
}

/// `inference_jackknife` (`JackknifeDict`).
#[derive(IntoPyObject)]
struct Jackknife<'py> {
    coef: F64s<'py>,
    se: F64s<'py>,
    t: F64s<'py>,
    p_values: F64s<'py>,
    df: f64,
}

// ---- arguments -------------------------------------------------------------------------------

/// X (n×p), y (n) and the optional weights as slices; `Data::new` validates them inside the core call.
pub(crate) struct Xy<'a> {
    x: &'a [f64],
    pub(crate) n: usize,
    p: usize,
    y: &'a [f64],
    w: Option<&'a [f64]>,
}

impl<'a> Xy<'a> {
    pub(crate) fn new(
        x: &'a PyReadonlyArray2<'_, f64>,
        y: &'a PyReadonlyArray1<'_, f64>,
        w: &'a Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<Self> {
        let (x, n, p) = slice2(x, "X")?;
        Ok(Xy { x, n, p, y: slice1(y, "y")?, w: opt_slice1(w, "sample_weight")? })
    }

    pub(crate) fn data(&self) -> thrifty_core::Result<Data<'a>> {
        Data::new(self.x, self.n, self.p, self.y, self.w)
    }
}

/// The learner, its number of components and the rotation, as the core's [`Spec`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_spec(
    learner: &str,
    n_components: usize,
    basis: Option<PyReadonlyArray2<'_, f64>>,
    bases: Option<Vec<PyReadonlyArray2<'_, f64>>>,
    rotate: &str,
    ridge_alpha: f64,
    spca_n_features: usize,
    spls_keep: usize,
) -> PyResult<Spec> {
    let learner = match learner {
        "pls" => Learner::Pls,
        "spca" => Learner::Spca { n_features: spca_n_features },
        "ridge" => Learner::Ridge { alpha: ridge_alpha },
        // sparse PLS1's keep-count (0: cross-validated)
        "spls" => Learner::Spls { keep: spls_keep },
        "basis" => {
            let b = basis.ok_or_else(|| to_py(ThriftyError::invalid("learner", "basis array missing")))?;
            Learner::Basis { basis: slice2(&b, "learner")?.0.to_vec() }
        }
        "bases" => {
            let bs = bases.ok_or_else(|| to_py(ThriftyError::invalid("bases", "per-split bases missing")))?;
            Learner::SplitBases {
                bases: bs.iter().map(|b| Ok(slice2(b, "bases")?.0.to_vec())).collect::<PyResult<_>>()?,
            }
        }
        other => {
            return Err(to_py(ThriftyError::invalid(
                "learner",
                format!("unknown learner {other:?}; expected 'pls', 'spca', 'ridge', a basis array or a callable"),
            )))
        }
    };
    let rotate = match rotate {
        "none" => Rotation::None,
        "varimax" => Rotation::Varimax,
        other => {
            return Err(to_py(ThriftyError::invalid("rotate", format!("must be None or 'varimax', got {other:?}"))))
        }
    };
    Ok(Spec { learner, k: n_components, rotate })
}

pub(crate) fn train_lists(train: Vec<PyReadonlyArray1<'_, i64>>) -> PyResult<Vec<Vec<i64>>> {
    train.iter().map(|t| Ok(slice1(t, "splits")?.to_vec())).collect()
}

/// 0..n as the response of a `Data` whose own y the core does not read (the gate, PLS2).
fn index_response(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn rows_match(ny: usize, n: usize) -> thrifty_core::Result<()> {
    if ny != n {
        return Err(ThriftyError::shape("Y", format!("has {ny} rows, but X has {n}")));
    }
    Ok(())
}

fn indices(v: Vec<usize>) -> Vec<i64> {
    v.into_iter().map(|i| i as i64).collect()
}

// ---- splits and permutations -----------------------------------------------------------------

/// Train-index arrays of `n_splits` random balanced splits.
#[pyfunction]
fn inference_draw_splits(
    py: Python<'_>,
    n: usize,
    n_components: usize,
    n_splits: usize,
    seed: u64,
) -> PyResult<Vec<Idx<'_>>> {
    let splits = splits::draw_splits(n, n_components, n_splits, seed).py()?;
    Ok(splits.into_iter().map(|s| indices(s.train).into_pyarray(py)).collect())
}

/// Permutation `b` of 0..n as the core draws it.
#[pyfunction]
fn inference_permutation(py: Python<'_>, n: usize, seed: u64, b: u64) -> PyResult<Idx<'_>> {
    splits::check_budget("n", n, 1).py()?;
    Ok(indices(splits::permutation(n, seed, b)).into_pyarray(py))
}

/// Held-out r of the learner on each split.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, train, basis=None, bases=None, rotate="none", ridge_alpha=1.0, spca_n_features=0, spls_keep=0, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_split_correlations<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    learner: &str,
    n_components: usize,
    train: Vec<PyReadonlyArray1<'py, i64>>,
    basis: Option<PyReadonlyArray2<'py, f64>>,
    bases: Option<Vec<PyReadonlyArray2<'py, f64>>>,
    rotate: &str,
    ridge_alpha: f64,
    spca_n_features: usize,
    spls_keep: usize,
    n_jobs: Option<usize>,
) -> PyResult<F64s<'py>> {
    let spec = make_spec(learner, n_components, basis, bases, rotate, ridge_alpha, spca_n_features, spls_keep)?;
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let trains = train_lists(train)?;
    let r = enter(py, n_jobs, |cancel| {
        let data = xy.data()?;
        let splits = splits::splits_from_train(xy.n, n_components, &trains)?;
        nb::split_correlations_cancellable(&data, &spec, &splits, xy.y, cancel)
    })?;
    Ok(r.into_pyarray(py))
}

/// Mean Fisher z of the permutations `start .. start + count` with the splits held fixed.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, train, seed, start, count, basis=None, bases=None, rotate="none", ridge_alpha=1.0, spca_n_features=0, spls_keep=0, refit=false, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_nb_permutation<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    learner: &str,
    n_components: usize,
    train: Vec<PyReadonlyArray1<'py, i64>>,
    seed: u64,
    start: u64,
    count: usize,
    basis: Option<PyReadonlyArray2<'py, f64>>,
    bases: Option<Vec<PyReadonlyArray2<'py, f64>>>,
    rotate: &str,
    ridge_alpha: f64,
    spca_n_features: usize,
    spls_keep: usize,
    refit: bool,
    n_jobs: Option<usize>,
) -> PyResult<F64s<'py>> {
    let spec = make_spec(learner, n_components, basis, bases, rotate, ridge_alpha, spca_n_features, spls_keep)?;
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let trains = train_lists(train)?;
    let route = if refit { Route::Refit } else { Route::Auto };
    let z = enter(py, n_jobs, |cancel| {
        let data = xy.data()?;
        let splits = splits::splits_from_train(xy.n, n_components, &trains)?;
        perm::nb_permutation_null_cancellable(&data, &spec, &splits, seed, start, count, route, cancel)
    })?;
    Ok(z.into_pyarray(py))
}

// ---- tests on per-split r --------------------------------------------------------------------

/// Mean Fisher z of per-split correlations (the permutation statistic).
#[pyfunction]
fn inference_mean_z(r: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let r = slice1(&r, "r")?;
    if r.is_empty() {
        return Err(to_py(ThriftyError::invalid("r", "must be non-empty")));
    }
    Ok(splits::mean_z(r))
}

/// The pre-run gate: effective sample size, stable rank and the reasons to reroute.
#[pyfunction]
#[pyo3(signature = (x, sample_weight=None))]
fn inference_gate(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    sample_weight: Option<PyReadonlyArray1<'_, f64>>,
) -> PyResult<Gate> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    // the gate does not look at y; Data's checks need some non-constant response, so pass 0..n
    let index = index_response(n);
    let g = enter(py, None, |_| {
        if n < 2 {
            return Err(ThriftyError::shape("X", "needs at least 2 rows"));
        }
        nb::gate(&Data::new(xs, n, p, &index, ws)?)
    })?;
    Ok(Gate {
        n_eff: g.n_eff,
        stable_rank: g.stable_rank,
        n_columns: g.n_columns,
        reroute: g.reroute,
        reasons: g.reasons,
    })
}

fn method_arg(method: &str) -> PyResult<route::Method> {
    route::Method::from_name(method)
        .ok_or_else(|| to_py(ThriftyError::invalid("method", format!("unknown method {method:?}"))))
}

fn learner_arg(learner: &str) -> PyResult<route::LearnerKind> {
    route::LearnerKind::from_name(learner)
        .ok_or_else(|| to_py(ThriftyError::invalid("learner", format!("unknown learner kind {learner:?}"))))
}

/// Step 1 of the test on `x` as the core sees it: the gate, Kish's n_eff of `sample_weight`, the
/// learner rule and the resolution of `method` (`sequence`: the per-component tests).
#[pyfunction]
#[pyo3(signature = (x, sample_weight, method, force, learner, n_components, multi, sequence=false))]
#[allow(clippy::too_many_arguments)]
fn inference_route(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    sample_weight: Option<PyReadonlyArray1<'_, f64>>,
    method: &str,
    force: bool,
    learner: &str,
    n_components: usize,
    multi: bool,
    sequence: bool,
) -> PyResult<RouteOut> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let (m, kind) = (method_arg(method)?, learner_arg(learner)?);
    let r = enter(py, None, |_| run::route_of(xs, n, p, ws, kind, n_components, multi, m, force, sequence))?;
    Ok(r.into())
}

/// Step 1 from the gate's numbers (the dask-array route computes them from a block summary of X).
#[pyfunction]
#[pyo3(signature = (n_eff, stable_rank, n_columns, method, force, learner, n_components, multi, sequence=false))]
#[allow(clippy::too_many_arguments)]
fn inference_route_from_gate(
    n_eff: f64,
    stable_rank: f64,
    n_columns: usize,
    method: &str,
    force: bool,
    learner: &str,
    n_components: usize,
    multi: bool,
    sequence: bool,
) -> PyResult<RouteOut> {
    let (m, kind) = (method_arg(method)?, learner_arg(learner)?);
    let gate = route::gate_rules(n_eff, stable_rank, n_columns);
    let why = route::nb_reason(multi, kind, n_components, n_eff, Some(stable_rank));
    Ok(route::resolve(m, force, gate, why, sequence).into())
}

/// The NB test on per-split r (NaN where undefined) with train sizes `n_train` out of `n` rows.
#[pyfunction]
fn inference_nb_outcome(
    r: PyReadonlyArray1<'_, f64>,
    n_train: PyReadonlyArray1<'_, f64>,
    n: usize,
    level: f64,
    rho_hat_defined: bool,
) -> PyResult<NbOutcomeOut> {
    let o = run::nb_outcome(slice1(&r, "r")?, slice1(&n_train, "n_train")?, n, level, rho_hat_defined).py()?;
    let nb = o.nb;
    Ok(NbOutcomeOut {
        z_mean: nb.z_mean,
        z_sd: nb.z_sd,
        se: nb.se,
        statistic: nb.statistic,
        t: nb.t,
        df: nb.df,
        p_value: nb.p_value,
        rho_hat: nb.rho_hat,
        ci_low: nb.ci_low,
        ci_high: nb.ci_high,
        n_undefined: o.n_undefined,
        n_train: o.n_train,
        n_test: o.n_test,
    })
}

/// p = (1 + #{null ≥ observed or non-finite}) / (B + 1).
#[pyfunction]
fn inference_permutation_p(observed: f64, null: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    Ok(splits::permutation_p(observed, slice1(&null, "null")?))
}

/// `a` rescaled exactly by powers of two (per column, or globally) as the core sees data; `None`
/// when the core takes `a` as it is.
#[pyfunction]
fn inference_power_of_two_scaled<'py>(
    py: Python<'py>,
    a: PyReadonlyArray2<'_, f64>,
    per_column: bool,
) -> PyResult<Option<F64Matrix<'py>>> {
    let (s, r, c) = slice2(&a, "a")?;
    match route::power_of_two_scaled(s, r, c, per_column).py()? {
        std::borrow::Cow::Borrowed(_) => Ok(None), // unchanged: the caller keeps its array (no copy)
        std::borrow::Cow::Owned(v) => matrix(py, v, r, c).map(Some),
    }
}

/// The midrange [`route::power_of_two_scaled`] subtracts from each column of `a` (0 where none;
/// `None` when no column is shifted).
#[pyfunction]
fn inference_location_shifts<'py>(py: Python<'py>, a: PyReadonlyArray2<'_, f64>) -> PyResult<Option<F64s<'py>>> {
    let (s, r, c) = slice2(&a, "a")?;
    Ok(route::location_shifts(s, r, c).map(|m| m.into_pyarray(py)))
}

// ---- fits and baselines ----------------------------------------------------------------------

/// PLS1 fit on the whole data (scikit-learn's `PLSRegression(scale=True)` attributes).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_pls_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<PlsFit<'py>> {
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let f = enter(py, None, |_| baselines::pls_fit(&xy.data()?, n_components))?;
    let (p, k) = (xy.p, f.k);
    Ok(PlsFit {
        coef: f.coef.into_pyarray(py),
        intercept: f.intercept,
        x_weights: matrix(py, f.x_weights, p, k)?,
        x_loadings: matrix(py, f.x_loadings, p, k)?,
        x_rotations: matrix(py, f.x_rotations, p, k)?,
        y_loadings: f.y_loadings.into_pyarray(py),
        x_mean: f.x_mean.into_pyarray(py),
        x_std: f.x_std.into_pyarray(py),
        y_mean: f.y_mean,
        y_std: f.y_std,
        n_components_fitted: f.n_fitted,
    })
}

/// X and y after `n_components` PLS deflations.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_deflate<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<(F64Matrix<'py>, F64s<'py>)> {
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let (xr, yr) = enter(py, None, |_| baselines::deflate(&xy.data()?, n_components))?;
    Ok((matrix(py, xr, xy.n, xy.p)?, yr.into_pyarray(py)))
}

/// Cross-validated Q² and its permutation null (permutations `start .. start + count`).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, n_folds, seed, start, count, pooled, basis=None, ridge_alpha=1.0, spca_n_features=0, spls_keep=0, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_cv_permutation<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    learner: &str,
    n_components: usize,
    n_folds: usize,
    seed: u64,
    start: u64,
    count: usize,
    pooled: bool,
    basis: Option<PyReadonlyArray2<'py, f64>>,
    ridge_alpha: f64,
    spca_n_features: usize,
    spls_keep: usize,
    n_jobs: Option<usize>,
) -> PyResult<(f64, F64s<'py>)> {
    let spec = make_spec(learner, n_components, basis, None, "none", ridge_alpha, spca_n_features, spls_keep)?;
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let (obs, null) = enter(py, n_jobs, |cancel| {
        baselines::cv_permutation_cancellable(&xy.data()?, &spec, n_folds, seed, start, count, pooled, cancel)
    })?;
    Ok((obs, null.into_pyarray(py)))
}

/// Jackknife (segment-deleted) standard errors of the PLS1 coefficients.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components, n_segments, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_jackknife<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
    n_segments: usize,
    seed: u64,
    n_jobs: Option<usize>,
) -> PyResult<Jackknife<'py>> {
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let j = enter(py, n_jobs, |_| baselines::jackknife(&xy.data()?, n_components, n_segments, seed))?;
    Ok(Jackknife {
        coef: j.coef.into_pyarray(py),
        se: j.se.into_pyarray(py),
        t: j.t.into_pyarray(py),
        p_values: j.p_values.into_pyarray(py),
        df: j.df,
    })
}

/// Varimax rotation: (rotated loadings, rotation, criterion, iterations, converged).
#[pyfunction]
#[pyo3(signature = (loadings, normalize=true, max_iter=500, tol=1e-10))]
fn inference_varimax<'py>(
    py: Python<'py>,
    loadings: PyReadonlyArray2<'py, f64>,
    normalize: bool,
    max_iter: usize,
    tol: f64,
) -> PyResult<(F64Matrix<'py>, F64Matrix<'py>, f64, usize, bool)> {
    let (l, p, k) = slice2(&loadings, "loadings")?;
    let v = enter(py, None, |_| varimax::varimax(l, p, k, normalize, max_iter, tol))?;
    Ok((matrix(py, v.rotated, p, k)?, matrix(py, v.rotation, k, k)?, v.criterion, v.n_iter, v.converged))
}

// ---- PLS2 (multi-column response) ------------------------------------------------------------

/// PLS2 held-out r per split for a multi-column response `y` (n×m).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components, train, n_jobs=None))]
fn inference_pls2_split_correlations<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
    train: Vec<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<usize>,
) -> PyResult<F64s<'py>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let (ys, ny, m) = slice2(&y, "Y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let trains = train_lists(train)?;
    // Data's own response is not used by PLS2; 0..n satisfies its checks
    let index = index_response(n);
    let r = enter(py, n_jobs, |_| {
        rows_match(ny, n)?;
        let data = Data::new(xs, n, p, &index, ws)?;
        let splits = splits::splits_from_train(n, n_components, &trains)?;
        pls2::pls2_split_correlations(&data, ys, m, n_components, &splits)
    })?;
    Ok(r.into_pyarray(py))
}

/// PLS2 fit on the whole data (scikit-learn's `PLSRegression(scale=True)` attributes).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_pls2_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<Pls2Fit<'py>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let (ys, ny, m) = slice2(&y, "Y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let index = index_response(n);
    let f = enter(py, None, |_| {
        rows_match(ny, n)?;
        if n < 2 {
            return Err(ThriftyError::shape("X", "needs at least 2 rows"));
        }
        pls2::pls2_fit(&Data::new(xs, n, p, &index, ws)?, ys, m, n_components)
    })?;
    let k = n_components;
    Ok(Pls2Fit {
        coef: matrix(py, f.coef, p, m)?,
        intercept: f.intercept.into_pyarray(py),
        x_weights: matrix(py, f.x_weights, p, k)?,
        x_loadings: matrix(py, f.x_loadings, p, k)?,
        x_rotations: matrix(py, f.x_rotations, p, k)?,
        y_loadings: matrix(py, f.y_loadings, m, k)?,
        x_mean: f.x_mean.into_pyarray(py),
        x_std: f.x_std.into_pyarray(py),
        n_components_fitted: f.n_fitted,
    })
}

// ---- special functions (exposed for checks) --------------------------------------------------

/// One-sided Student-t survival function.
#[pyfunction]
fn inference_t_sf(t: f64, df: f64) -> f64 {
    special::t_sf(t, df)
}

/// Standard normal quantile.
#[pyfunction]
fn inference_norm_ppf(q: f64) -> f64 {
    special::norm_ppf(q)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inference_draw_splits, m)?)?;
    m.add_function(wrap_pyfunction!(inference_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_split_correlations, m)?)?;
    m.add_function(wrap_pyfunction!(inference_nb_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_mean_z, m)?)?;
    m.add_function(wrap_pyfunction!(inference_gate, m)?)?;
    m.add_function(wrap_pyfunction!(inference_route, m)?)?;
    m.add_function(wrap_pyfunction!(inference_route_from_gate, m)?)?;
    m.add_function(wrap_pyfunction!(inference_nb_outcome, m)?)?;
    m.add_function(wrap_pyfunction!(inference_permutation_p, m)?)?;
    m.add_function(wrap_pyfunction!(inference_power_of_two_scaled, m)?)?;
    m.add_function(wrap_pyfunction!(inference_location_shifts, m)?)?;
    m.add_function(wrap_pyfunction!(inference_pls_fit, m)?)?;
    m.add_function(wrap_pyfunction!(inference_deflate, m)?)?;
    m.add_function(wrap_pyfunction!(inference_cv_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_jackknife, m)?)?;
    m.add_function(wrap_pyfunction!(inference_varimax, m)?)?;
    m.add_function(wrap_pyfunction!(inference_pls2_split_correlations, m)?)?;
    m.add_function(wrap_pyfunction!(inference_pls2_fit, m)?)?;
    m.add_function(wrap_pyfunction!(inference_t_sf, m)?)?;
    m.add_function(wrap_pyfunction!(inference_norm_ppf, m)?)?;
    Ok(())
}
