//! Bindings for the `kmeans` capability: fit / predict / transform over float32 or float64 arrays.
//! Arrays are borrowed read-only (no copy), the GIL is released around the core call.
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use thrifty_core::kmeans::{self, Algorithm, Init, Params};
use thrifty_core::scalar::Real;
use thrifty_core::threads::with_threads;

use crate::errors::{detach_interruptible, CoreResultExt};

fn algorithm(name: &str) -> PyResult<Algorithm> {
    match name {
        "hartigan" => Ok(Algorithm::Hartigan),
        "lloyd" => Ok(Algorithm::Lloyd),
        other => Err(PyValueError::new_err(format!("algorithm must be 'hartigan' or 'lloyd', got {other:?}"))),
    }
}

fn contiguous<'a, T: numpy::Element>(a: &'a PyReadonlyArray2<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be C-contiguous")))
}

#[allow(clippy::too_many_arguments)]
fn fit_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, T>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    init: &Bound<'py, PyAny>,
    params: Params,
    n_jobs: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let (n, d) = (x.shape()[0], x.shape()[1]);
    let xs = contiguous(&x, "X")?;
    let w = match &sample_weight {
        Some(w) => Some(w.as_slice().map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?),
        None => None,
    };
    let init_arr: Option<PyReadonlyArray2<'py, T>> = if init.is_instance_of::<pyo3::types::PyString>() { None } else {
        Some(init.extract().map_err(|_| PyTypeError::new_err("init must be 'k-means++', 'random' or an array of X's dtype"))?)
    };
    let init_kind: Init<'_, T> = match &init_arr {
        Some(a) => {
            if a.shape()[1] != d || a.shape()[0] != params.n_clusters {
                return Err(PyValueError::new_err(format!(
                    "init must have shape ({}, {d}), got ({}, {})",
                    params.n_clusters,
                    a.shape()[0],
                    a.shape()[1]
                )));
            }
            Init::Centers(contiguous(a, "init")?)
        }
        None => match init.extract::<String>()?.as_str() {
            "k-means++" => Init::KMeansPlusPlus,
            "random" => Init::Random,
            other => return Err(PyValueError::new_err(format!("init must be 'k-means++', 'random' or an array, got {other:?}"))),
        },
    };
    // A fit can run for seconds: Ctrl-C stops it at the next iteration.
    let fit = detach_interruptible(py, |cancel| {
        with_threads(n_jobs, || kmeans::fit_cancellable(xs, n, d, w, init_kind, &params, cancel)).and_then(|r| r)
    })?;

    let k = params.n_clusters;
    let (run, init_centers, best_run) = (fit.run, fit.init_centers, fit.best_run);
    let out = PyDict::new(py);
    out.set_item("cluster_centers", PyArray1::from_vec(py, run.centers).reshape([k, d])?)?;
    out.set_item("init_centers", PyArray1::from_vec(py, init_centers).reshape([k, d])?)?;
    out.set_item("labels", PyArray1::from_vec(py, run.labels.iter().map(|&l| l as i32).collect::<Vec<i32>>()))?;
    out.set_item("inertia", run.inertia)?;
    out.set_item("n_iter", run.n_iter)?;
    out.set_item("converged", run.converged)?;
    out.set_item("best_run", best_run)?;
    let col = |f: &dyn Fn(&kmeans::IterStats) -> f64| PyArray1::from_vec(py, run.stats.iter().map(f).collect::<Vec<f64>>());
    out.set_item("certified", col(&|s| s.certified as f64))?;
    out.set_item("batch_moves", col(&|s| s.batch_moves as f64))?;
    out.set_item("sequential_moves", col(&|s| s.sequential_moves as f64))?;
    out.set_item("relocated", col(&|s| s.relocated as f64))?;
    out.set_item("sse_after_batch", col(&|s| s.sse_after_batch))?;
    out.set_item("sse_after_sequential", col(&|s| s.sse_after_sequential))?;
    Ok(out)
}

/// Fit k-means; returns a dict of NumPy arrays and scalars (see `_core.pyi`).
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
) -> PyResult<Bound<'py, PyDict>> {
    let params = Params { n_clusters, n_init, max_iter, tol, algorithm: self::algorithm(algorithm)?, seed };
    if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f64>>() {
        fit_typed(py, a, sample_weight, init, params, n_jobs)
    } else if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f32>>() {
        fit_typed(py, a, sample_weight, init, params, n_jobs)
    } else {
        Err(PyTypeError::new_err("X must be a 2-D float32 or float64 NumPy array"))
    }
}

macro_rules! per_dtype {
    ($name:ident, $core:path, $doc:literal, |$py:ident, $v:ident, $n:ident, $k:ident| $wrap:expr) => {
        #[doc = $doc]
        #[pyfunction]
        #[pyo3(signature = (x, centers, n_jobs=None))]
        fn $name<'py>($py: Python<'py>, x: &Bound<'py, PyAny>, centers: &Bound<'py, PyAny>, n_jobs: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
            fn typed<'py, T: Real + numpy::Element>(
                $py: Python<'py>,
                x: PyReadonlyArray2<'py, T>,
                centers: &Bound<'py, PyAny>,
                n_jobs: Option<usize>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let c: PyReadonlyArray2<'py, T> = centers
                    .extract()
                    .map_err(|_| PyTypeError::new_err("cluster_centers must be a 2-D array of X's dtype"))?;
                let ($n, d, $k) = (x.shape()[0], x.shape()[1], c.shape()[0]);
                if c.shape()[1] != d {
                    return Err(PyValueError::new_err(format!("X has {d} features, cluster_centers has {}", c.shape()[1])));
                }
                let (xs, cs) = (contiguous(&x, "X")?, contiguous(&c, "cluster_centers")?);
                let $v = $py.detach(|| with_threads(n_jobs, || $core(xs, $n, d, cs, $k))).py()?.py()?;
                $wrap
            }
            if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f64>>() {
                typed($py, a, centers, n_jobs)
            } else if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f32>>() {
                typed($py, a, centers, n_jobs)
            } else {
                Err(PyTypeError::new_err("X must be a 2-D float32 or float64 NumPy array"))
            }
        }
    };
}

per_dtype!(kmeans_predict, kmeans::predict, "Index of the nearest centre of each row (int32).", |py, v, n, k| {
    let _ = (n, k);
    Ok(PyArray1::from_vec(py, v.into_iter().map(|l| l as i32).collect::<Vec<i32>>()).into_any())
});
per_dtype!(kmeans_transform, kmeans::transform, "Euclidean distances to every centre, shape (n, k), X's dtype.", |py, v, n, k| {
    Ok(PyArray1::from_vec(py, v).reshape([n, k])?.into_any())
});

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_predict, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_transform, m)?)?;
    Ok(())
}
