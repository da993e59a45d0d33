//! Bindings for the `inference` capability: argument conversion, GIL release and error mapping only.
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{detach_interruptible, CoreResultExt};
use thrifty_core::inference::{
    baselines, fit::Data, nb, perm, varimax, Learner, Rotation, Route, Spec,
};
use thrifty_core::threads::with_threads;
use thrifty_core::ThriftyError;

type Arr1<'py> = Bound<'py, PyArray1<f64>>;
type Arr2<'py> = Bound<'py, PyArray2<f64>>;

fn slice2<'a>(a: &'a PyReadonlyArray2<'_, f64>, name: &'static str) -> PyResult<(&'a [f64], usize, usize)> {
    let shape = a.shape();
    let s = a
        .as_slice()
        .map_err(|_| ThriftyError::shape(name, "must be a C-contiguous float64 array").into_err())?;
    Ok((s, shape[0], shape[1]))
}

trait IntoErr {
    fn into_err(self) -> PyErr;
}
impl IntoErr for ThriftyError {
    fn into_err(self) -> PyErr {
        crate::errors::to_py(self)
    }
}

fn slice1<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &'static str) -> PyResult<&'a [f64]> {
    a.as_slice().map_err(|_| ThriftyError::shape(name, "must be a contiguous float64 array").into_err())
}

fn opt_slice1<'a>(a: &'a Option<PyReadonlyArray1<'_, f64>>, name: &'static str) -> PyResult<Option<&'a [f64]>> {
    a.as_ref().map(|w| slice1(w, name)).transpose()
}

#[allow(clippy::too_many_arguments)]
fn make_spec(
    learner: &str,
    n_components: usize,
    basis: Option<PyReadonlyArray2<'_, f64>>,
    bases: Option<Vec<PyReadonlyArray2<'_, f64>>>,
    rotate: &str,
    ridge_alpha: f64,
    spca_n_features: usize,
) -> PyResult<Spec> {
    let learner = match learner {
        "pls" => Learner::Pls,
        "spca" => Learner::Spca { n_features: spca_n_features },
        "ridge" => Learner::Ridge { alpha: ridge_alpha },
        "basis" => {
            let b = basis.ok_or_else(|| ThriftyError::invalid("learner", "basis array missing").into_err())?;
            let (s, _, _) = slice2(&b, "learner")?;
            Learner::Basis { basis: s.to_vec() }
        }
        "bases" => {
            let bs = bases.ok_or_else(|| ThriftyError::invalid("bases", "per-split bases missing").into_err())?;
            let mut out = Vec::with_capacity(bs.len());
            for b in &bs {
                out.push(slice2(b, "bases")?.0.to_vec());
            }
            Learner::SplitBases { bases: out }
        }
        other => {
            return Err(ThriftyError::invalid(
                "learner",
                format!("unknown learner {other:?}; expected 'pls', 'spca', 'ridge', a basis array or a callable"),
            )
            .into_err())
        }
    };
    let rotate = match rotate {
        "none" => Rotation::None,
        "varimax" => Rotation::Varimax,
        other => {
            return Err(ThriftyError::invalid("rotate", format!("must be None or 'varimax', got {other:?}")).into_err())
        }
    };
    Ok(Spec { learner, k: n_components, rotate })
}

fn train_lists(train: Vec<PyReadonlyArray1<'_, i64>>) -> PyResult<Vec<Vec<i64>>> {
    train
        .iter()
        .map(|t| {
            t.as_slice()
                .map(|s| s.to_vec())
                .map_err(|_| ThriftyError::shape("splits", "train indices must be contiguous int64 arrays").into_err())
        })
        .collect()
}

/// Train-index arrays of `n_splits` random balanced splits.
#[pyfunction]
fn inference_draw_splits<'py>(
    py: Python<'py>,
    n: usize,
    n_components: usize,
    n_splits: usize,
    seed: u64,
) -> PyResult<Vec<Bound<'py, PyArray1<i64>>>> {
    let splits = nb::draw_splits(n, n_components, n_splits, seed).py()?;
    Ok(splits
        .into_iter()
        .map(|s| PyArray1::from_vec(py, s.train.into_iter().map(|i| i as i64).collect()))
        .collect())
}

/// Permutation `b` of 0..n as the core draws it.
#[pyfunction]
fn inference_permutation<'py>(py: Python<'py>, n: usize, seed: u64, b: u64) -> PyResult<Bound<'py, PyArray1<i64>>> {
    nb::check_budget("n", n, 1).py()?;
    Ok(PyArray1::from_vec(py, perm::permutation(n, seed, b).into_iter().map(|i| i as i64).collect()))
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, train, basis=None, bases=None, rotate="none", ridge_alpha=1.0, spca_n_features=0, n_jobs=None))]
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
    n_jobs: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let spec = make_spec(learner, n_components, basis, bases, rotate, ridge_alpha, spca_n_features)?;
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let trains = train_lists(train)?;
    let r = detach_interruptible(py, |cancel| -> thrifty_core::Result<Vec<f64>> {
        let data = Data::new(xs, n, p, ys, ws)?;
        let splits = nb::splits_from_train(n, n_components, &trains)?;
        with_threads(n_jobs, || nb::split_correlations_cancellable(&data, &spec, &splits, ys, cancel))?
    })?;
    Ok(PyArray1::from_vec(py, r))
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, train, seed, start, count, basis=None, bases=None, rotate="none", ridge_alpha=1.0, spca_n_features=0, refit=false, n_jobs=None))]
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
    refit: bool,
    n_jobs: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let spec = make_spec(learner, n_components, basis, bases, rotate, ridge_alpha, spca_n_features)?;
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let trains = train_lists(train)?;
    let route = if refit { Route::Refit } else { Route::Auto };
    let z = detach_interruptible(py, |cancel| -> thrifty_core::Result<Vec<f64>> {
        let data = Data::new(xs, n, p, ys, ws)?;
        let splits = nb::splits_from_train(n, n_components, &trains)?;
        with_threads(n_jobs, || {
            perm::nb_permutation_null_cancellable(&data, &spec, &splits, seed, start, count, route, cancel)
        })?
    })?;
    Ok(PyArray1::from_vec(py, z))
}

/// NB-asymptotic test on per-split r. `n_test` (mean test size) enables ρ̂ (unweighted only).
#[pyfunction]
#[pyo3(signature = (r, ratio, n_test, level=0.95))]
fn inference_nb_test<'py>(
    py: Python<'py>,
    r: PyReadonlyArray1<'py, f64>,
    ratio: f64,
    n_test: Option<f64>,
    level: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let res = nb::nb_test(slice1(&r, "r")?, ratio, n_test, level).py()?;
    let d = PyDict::new(py);
    d.set_item("z_mean", res.z_mean)?;
    d.set_item("z_sd", res.z_sd)?;
    d.set_item("se", res.se)?;
    d.set_item("statistic", res.statistic)?;
    d.set_item("t", res.t)?;
    d.set_item("df", res.df)?;
    d.set_item("p_value", res.p_value)?;
    d.set_item("rho_hat", res.rho_hat)?;
    d.set_item("ci_low", res.ci_low)?;
    d.set_item("ci_high", res.ci_high)?;
    Ok(d)
}

/// Mean Fisher z of per-split correlations (the permutation statistic).
#[pyfunction]
fn inference_mean_z(r: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let r = slice1(&r, "r")?;
    if r.is_empty() {
        return Err(ThriftyError::invalid("r", "must be non-empty").into_err());
    }
    Ok(nb::mean_z(r))
}

#[pyfunction]
#[pyo3(signature = (x, sample_weight=None))]
fn inference_gate<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    // the gate does not look at y; Data's checks need some non-constant response, so pass 0..n
    let dummy: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let g = py.detach(|| -> thrifty_core::Result<nb::Gate> {
        if n < 2 {
            return Err(ThriftyError::shape("X", "needs at least 2 rows"));
        }
        let data = Data::new(xs, n, p, &dummy, ws)?;
        Ok(nb::gate(&data))
    });
    let g = g.py()?;
    let d = PyDict::new(py);
    d.set_item("n_eff", g.n_eff)?;
    d.set_item("stable_rank", g.stable_rank)?;
    d.set_item("n_columns", g.n_columns)?;
    d.set_item("reroute", g.reroute)?;
    d.set_item("reasons", g.reasons)?;
    Ok(d)
}

fn mat<'py>(py: Python<'py>, v: Vec<f64>, r: usize, c: usize) -> PyResult<Bound<'py, PyArray2<f64>>> {
    PyArray1::from_vec(py, v).reshape([r, c])
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_pls_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let fit = py.detach(|| -> thrifty_core::Result<baselines::PlsFit> {
        let data = Data::new(xs, n, p, ys, ws)?;
        baselines::pls_fit(&data, n_components)
    });
    let f = fit.py()?;
    let k = f.k;
    let d = PyDict::new(py);
    d.set_item("coef", PyArray1::from_vec(py, f.coef))?;
    d.set_item("intercept", f.intercept)?;
    d.set_item("x_weights", mat(py, f.x_weights, p, k)?)?;
    d.set_item("x_loadings", mat(py, f.x_loadings, p, k)?)?;
    d.set_item("x_rotations", mat(py, f.x_rotations, p, k)?)?;
    d.set_item("y_loadings", PyArray1::from_vec(py, f.y_loadings))?;
    d.set_item("x_mean", PyArray1::from_vec(py, f.x_mean))?;
    d.set_item("x_std", PyArray1::from_vec(py, f.x_std))?;
    d.set_item("y_mean", f.y_mean)?;
    d.set_item("y_std", f.y_std)?;
    d.set_item("n_components_fitted", f.n_fitted)?;
    Ok(d)
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_deflate<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<(Arr2<'py>, Arr1<'py>)> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let out = py.detach(|| -> thrifty_core::Result<(Vec<f64>, Vec<f64>)> {
        let data = Data::new(xs, n, p, ys, ws)?;
        baselines::deflate(&data, n_components)
    });
    let (xr, yr) = out.py()?;
    Ok((mat(py, xr, n, p)?, PyArray1::from_vec(py, yr)))
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, n_folds, seed, start, count, pooled, basis=None, ridge_alpha=1.0, spca_n_features=0, n_jobs=None))]
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
    n_jobs: Option<usize>,
) -> PyResult<(f64, Bound<'py, PyArray1<f64>>)> {
    let spec = make_spec(learner, n_components, basis, None, "none", ridge_alpha, spca_n_features)?;
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let (obs, null) = detach_interruptible(py, |cancel| -> thrifty_core::Result<(f64, Vec<f64>)> {
        let data = Data::new(xs, n, p, ys, ws)?;
        with_threads(n_jobs, || {
            baselines::cv_permutation_cancellable(&data, &spec, n_folds, seed, start, count, pooled, cancel)
        })?
    })?;
    Ok((obs, PyArray1::from_vec(py, null)))
}

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
) -> PyResult<Bound<'py, PyDict>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let ys = slice1(&y, "y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let out = py.detach(|| -> thrifty_core::Result<baselines::Jackknife> {
        let data = Data::new(xs, n, p, ys, ws)?;
        with_threads(n_jobs, || baselines::jackknife(&data, n_components, n_segments, seed))?
    });
    let j = out.py()?;
    let d = PyDict::new(py);
    d.set_item("coef", PyArray1::from_vec(py, j.coef))?;
    d.set_item("se", PyArray1::from_vec(py, j.se))?;
    d.set_item("t", PyArray1::from_vec(py, j.t))?;
    d.set_item("p_values", PyArray1::from_vec(py, j.p_values))?;
    d.set_item("df", j.df)?;
    Ok(d)
}

#[pyfunction]
#[pyo3(signature = (loadings, normalize=true, max_iter=500, tol=1e-10))]
fn inference_varimax<'py>(
    py: Python<'py>,
    loadings: PyReadonlyArray2<'py, f64>,
    normalize: bool,
    max_iter: usize,
    tol: f64,
) -> PyResult<(Arr2<'py>, Arr2<'py>, f64, usize, bool)> {
    let (l, p, k) = slice2(&loadings, "loadings")?;
    let v = py.detach(|| varimax::varimax(l, p, k, normalize, max_iter, tol)).py()?;
    Ok((mat(py, v.rotated, p, k)?, mat(py, v.rotation, k, k)?, v.criterion, v.n_iter, v.converged))
}

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
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let (ys, ny, m) = slice2(&y, "Y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let trains = train_lists(train)?;
    // Data's own response is not used by PLS2; 0..n satisfies its checks
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let r = py.detach(|| -> thrifty_core::Result<Vec<f64>> {
        if ny != n {
            return Err(ThriftyError::shape("Y", format!("has {ny} rows, but X has {n}")));
        }
        let data = Data::new(xs, n, p, &index, ws)?;
        let splits = nb::splits_from_train(n, n_components, &trains)?;
        with_threads(n_jobs, || thrifty_core::inference::pls2::pls2_split_correlations(&data, ys, m, n_components, &splits))?
    });
    Ok(PyArray1::from_vec(py, r.py()?))
}

#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components))]
fn inference_pls2_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let (xs, n, p) = slice2(&x, "X")?;
    let (ys, ny, m) = slice2(&y, "Y")?;
    let ws = opt_slice1(&sample_weight, "sample_weight")?;
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let fit = py.detach(|| -> thrifty_core::Result<thrifty_core::inference::pls2::Pls2Fit> {
        if ny != n {
            return Err(ThriftyError::shape("Y", format!("has {ny} rows, but X has {n}")));
        }
        if n < 2 {
            return Err(ThriftyError::shape("X", "needs at least 2 rows"));
        }
        let data = Data::new(xs, n, p, &index, ws)?;
        thrifty_core::inference::pls2::pls2_fit(&data, ys, m, n_components)
    });
    let f = fit.py()?;
    let k = n_components;
    let d = PyDict::new(py);
    d.set_item("coef", mat(py, f.coef, p, m)?)?;
    d.set_item("intercept", PyArray1::from_vec(py, f.intercept))?;
    d.set_item("x_weights", mat(py, f.x_weights, p, k)?)?;
    d.set_item("x_loadings", mat(py, f.x_loadings, p, k)?)?;
    d.set_item("x_rotations", mat(py, f.x_rotations, p, k)?)?;
    d.set_item("y_loadings", mat(py, f.y_loadings, m, k)?)?;
    d.set_item("x_mean", PyArray1::from_vec(py, f.x_mean))?;
    d.set_item("x_std", PyArray1::from_vec(py, f.x_std))?;
    d.set_item("n_components_fitted", f.n_fitted)?;
    Ok(d)
}

/// One-sided Student-t survival function and the normal quantile used by the tests (exposed for checks).
#[pyfunction]
fn inference_t_sf(t: f64, df: f64) -> f64 {
    thrifty_core::inference::special::t_sf(t, df)
}

#[pyfunction]
fn inference_norm_ppf(q: f64) -> f64 {
    thrifty_core::inference::special::norm_ppf(q)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inference_draw_splits, m)?)?;
    m.add_function(wrap_pyfunction!(inference_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_split_correlations, m)?)?;
    m.add_function(wrap_pyfunction!(inference_nb_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_nb_test, m)?)?;
    m.add_function(wrap_pyfunction!(inference_mean_z, m)?)?;
    m.add_function(wrap_pyfunction!(inference_gate, m)?)?;
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
