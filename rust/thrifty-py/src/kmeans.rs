//! Bindings for the `kmeans` capability: fit / predict / transform / inertia over float32 or float64
//! arrays. Arrays are borrowed read-only (no copy); every core call goes through [`enter`] (GIL
//! released, Ctrl-C honoured, `n_jobs` capped at the CPU count); results are
//! `#[derive(IntoPyObject)]` structs (dicts on the Python side, typed in `_core.pyi`).
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use thrifty_core::kmeans::{self, Algorithm, Init, IterStats, Params};
use thrifty_core::scalar::Real;

use crate::errors::enter;

/// X (or centres) in either precision, borrowed read-only.
#[derive(FromPyObject)]
enum FloatMatrix<'py> {
    F64(PyReadonlyArray2<'py, f64>),
    F32(PyReadonlyArray2<'py, f32>),
}

impl<'py> FloatMatrix<'py> {
    fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        obj.extract().map_err(|_| PyTypeError::new_err("X must be a 2-D float32 or float64 NumPy array"))
    }
}

/// `dispatch!(matrix, |x| body)`: `body` once per precision, `x` the typed array.
macro_rules! dispatch {
    ($m:expr, |$x:ident| $body:expr) => {
        match $m {
            FloatMatrix::F64($x) => $body,
            FloatMatrix::F32($x) => $body,
        }
    };
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray2<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be C-contiguous")))
}

/// Centres of X's dtype and width.
fn centers_like<'py, T: numpy::Element>(c: &Bound<'py, PyAny>, name: &str, d: usize) -> PyResult<PyReadonlyArray2<'py, T>> {
    let c: PyReadonlyArray2<'py, T> = c.extract().map_err(|_| PyTypeError::new_err(format!("{name} must be a 2-D array of X's dtype")))?;
    if c.shape()[1] != d {
        return Err(PyValueError::new_err(format!("X has {d} features, {name} has {}", c.shape()[1])));
    }
    Ok(c)
}

fn algorithm(name: &str) -> PyResult<Algorithm> {
    match name {
        "hartigan" => Ok(Algorithm::Hartigan),
        "lloyd" => Ok(Algorithm::Lloyd),
        other => Err(PyValueError::new_err(format!("algorithm must be 'hartigan' or 'lloyd', got {other:?}"))),
    }
}

/// What `kmeans_fit` returns (a dict; see `_core.pyi`'s `KMeansFit`).
#[derive(IntoPyObject)]
struct FitResult<'py> {
    cluster_centers: Bound<'py, PyAny>,
    init_centers: Bound<'py, PyAny>,
    labels: Bound<'py, PyArray1<i32>>,
    inertia: f64,
    n_iter: usize,
    converged: bool,
    best_run: usize,
    certified: Bound<'py, PyArray1<f64>>,
    batch_moves: Bound<'py, PyArray1<f64>>,
    relocated: Bound<'py, PyArray1<f64>>,
    sequential_moves: Bound<'py, PyArray1<f64>>,
    sse_after_batch: Bound<'py, PyArray1<f64>>,
    sse_after_sequential: Bound<'py, PyArray1<f64>>,
}

fn fit_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, T>,
    sample_weight: Option<&[f64]>,
    init: &Bound<'py, PyAny>,
    params: Params,
    n_jobs: Option<usize>,
) -> PyResult<FitResult<'py>> {
    let (n, d, k) = (x.shape()[0], x.shape()[1], params.n_clusters);
    let xs = slice(&x, "X")?;
    let init_arr = if init.is_instance_of::<pyo3::types::PyString>() { None } else { Some(centers_like::<T>(init, "init", d)?) };
    let init_kind: Init<'_, T> = match &init_arr {
        Some(a) => Init::Centers(slice(a, "init")?),
        None => match init.extract::<String>()?.as_str() {
            "k-means++" => Init::KMeansPlusPlus,
            "random" => Init::Random,
            other => return Err(PyValueError::new_err(format!("init must be 'k-means++', 'random' or an array, got {other:?}"))),
        },
    };
    let fit = enter(py, n_jobs, |cancel| kmeans::fit_cancellable(xs, n, d, sample_weight, init_kind, &params, cancel))?;
    let (run, init_centers) = (fit.run, fit.init_centers);
    let col = |f: fn(&IterStats) -> f64| run.stats.iter().map(f).collect::<Vec<f64>>().into_pyarray(py);
    Ok(FitResult {
        certified: col(|s| s.certified as f64),
        batch_moves: col(|s| s.batch_moves as f64),
        relocated: col(|s| s.relocated as f64),
        sequential_moves: col(|s| s.sequential_moves as f64),
        sse_after_batch: col(|s| s.sse_after_batch),
        sse_after_sequential: col(|s| s.sse_after_sequential),
        cluster_centers: run.centers.into_pyarray(py).reshape([k, d])?.into_any(),
        init_centers: init_centers.into_pyarray(py).reshape([k, d])?.into_any(),
        labels: run.labels.iter().map(|&l| l as i32).collect::<Vec<i32>>().into_pyarray(py),
        inertia: run.inertia,
        n_iter: run.n_iter,
        converged: run.converged,
        best_run: fit.best_run,
    })
}

/// Fit k-means; returns a dict of NumPy arrays and scalars (`_core.pyi`: `KMeansFit`).
#[pyfunction]
#[pyo3(signature = (x, sample_weight, init, n_clusters, n_init, max_iter, tol, algorithm, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn kmeans_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    init: &Bound<'py, PyAny>,
    n_clusters: usize,
    n_init: usize,
    max_iter: usize,
    tol: f64,
    algorithm: &str,
    seed: u64,
    n_jobs: Option<usize>,
) -> PyResult<FitResult<'py>> {
    let params = Params { n_clusters, n_init, max_iter, tol, algorithm: self::algorithm(algorithm)?, seed };
    let w = sample_weight.as_ref().map(|w| w.as_slice()).transpose().map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?;
    dispatch!(FloatMatrix::new(x)?, |a| fit_typed(py, a, w, init, params, n_jobs))
}

/// Index of the nearest centre of each row (int32).
#[pyfunction]
#[pyo3(signature = (x, centers, n_jobs=None))]
fn kmeans_predict<'py>(py: Python<'py>, x: &Bound<'py, PyAny>, centers: &Bound<'py, PyAny>, n_jobs: Option<usize>) -> PyResult<Bound<'py, PyArray1<i32>>> {
    dispatch!(FloatMatrix::new(x)?, |a| {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        let c = centers_like(centers, "cluster_centers", d)?;
        let (xs, cs, k) = (slice(&a, "X")?, slice(&c, "cluster_centers")?, c.shape()[0]);
        let labels = enter(py, n_jobs, |cancel| kmeans::predict(xs, n, d, cs, k, cancel))?;
        Ok(labels.into_iter().map(|l| l as i32).collect::<Vec<i32>>().into_pyarray(py))
    })
}

/// Euclidean distances to every centre, shape (n, k), X's dtype.
#[pyfunction]
#[pyo3(signature = (x, centers, n_jobs=None))]
fn kmeans_transform<'py>(py: Python<'py>, x: &Bound<'py, PyAny>, centers: &Bound<'py, PyAny>, n_jobs: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
    dispatch!(FloatMatrix::new(x)?, |a| {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        let c = centers_like(centers, "cluster_centers", d)?;
        let (xs, cs, k) = (slice(&a, "X")?, slice(&c, "cluster_centers")?, c.shape()[0]);
        let dist = enter(py, n_jobs, |cancel| kmeans::transform(xs, n, d, cs, k, cancel))?;
        Ok(dist.into_pyarray(py).reshape([n, k])?.into_any())
    })
}

/// Weighted sum of squared distances to the nearest centre (float; no n × k matrix).
#[pyfunction]
#[pyo3(signature = (x, centers, sample_weight=None, n_jobs=None))]
fn kmeans_inertia<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: &Bound<'py, PyAny>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<usize>,
) -> PyResult<f64> {
    let w = sample_weight.as_ref().map(|w| w.as_slice()).transpose().map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?;
    dispatch!(FloatMatrix::new(x)?, |a| {
        let (n, d) = (a.shape()[0], a.shape()[1]);
        let c = centers_like(centers, "cluster_centers", d)?;
        let (xs, cs, k) = (slice(&a, "X")?, slice(&c, "cluster_centers")?, c.shape()[0]);
        enter(py, n_jobs, |cancel| kmeans::inertia(xs, n, d, w, cs, k, cancel))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_predict, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_transform, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_inertia, m)?)?;
    Ok(())
}
