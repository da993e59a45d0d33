//! Bindings for the `kmeans` capability: fit / predict / transform / inertia over float32 or float64
//! arrays, dense or CSR (passed as its parts: `x` = the 1-D data and `csr = (indices (uint32),
//! indptr (uint64), n_features)`; the core reads them in place). Arrays are borrowed read-only (no copy); every core call goes through [`enter`] (GIL
//! released, Ctrl-C honoured, `n_jobs` capped at the CPU count); results are
//! `#[derive(IntoPyObject)]` structs (dicts on the Python side, typed in `_core.pyi`).
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use thrifty_core::kmeans::{self, Algorithm, Csr, Init, IterStats, Matrix, Params};
use thrifty_core::scalar::Real;

use crate::arrays::FloatMatrix;
use crate::errors::enter;

/// The values of a CSR X in either precision, borrowed read-only.
#[derive(FromPyObject)]
enum FloatVector<'py> {
    F64(PyReadonlyArray1<'py, f64>),
    F32(PyReadonlyArray1<'py, f32>),
}

/// The structure of a CSR X: column indices, row pointers, shape.
struct CsrIndex<'py> {
    indices: PyReadonlyArray1<'py, u32>,
    indptr: Vec<usize>,
    n: usize,
    d: usize,
}

type CsrParts<'py> = (PyReadonlyArray1<'py, u32>, PyReadonlyArray1<'py, u64>, usize);

impl<'py> CsrIndex<'py> {
    fn new(parts: CsrParts<'py>) -> PyResult<Self> {
        let (indices, indptr, d) = parts;
        let indptr: Vec<usize> = indptr.as_slice()?.iter().map(|&v| v as usize).collect();
        let n = indptr.len().checked_sub(1).ok_or_else(|| PyValueError::new_err("X: CSR indptr is empty"))?;
        Ok(CsrIndex { indices, indptr, n, d })
    }

    fn matrix<'a, T: numpy::Element>(&'a self, values: &'a PyReadonlyArray1<'_, T>) -> PyResult<Matrix<'a, T>> {
        Ok(Matrix::Csr(Csr { indptr: &self.indptr, indices: self.indices.as_slice()?, values: values.as_slice()? }))
    }
}

/// `with_matrix!(x, csr, |m, n, d| body)`: `body` once per precision with `m` the core's
/// [`Matrix`] view of X (dense: `x` a 2-D array; CSR: `x` the 1-D data and `csr` its structure).
macro_rules! with_matrix {
    ($x:expr, $csr:expr, |$m:ident, $n:ident, $d:ident| $body:expr) => {
        match $csr {
            None => match FloatMatrix::new($x, "X")? {
                FloatMatrix::F64(a) => {
                    let ($n, $d) = (a.shape()[0], a.shape()[1]);
                    let $m = Matrix::Dense(slice(&a, "X")?);
                    $body
                }
                FloatMatrix::F32(a) => {
                    let ($n, $d) = (a.shape()[0], a.shape()[1]);
                    let $m = Matrix::Dense(slice(&a, "X")?);
                    $body
                }
            },
            Some(parts) => {
                let idx = CsrIndex::new(parts)?;
                let values: FloatVector<'_> =
                    $x.extract().map_err(|_| PyTypeError::new_err("X: CSR data must be a float32 or float64 array"))?;
                let ($n, $d) = (idx.n, idx.d);
                match values {
                    FloatVector::F64(v) => {
                        let $m = idx.matrix(&v)?;
                        $body
                    }
                    FloatVector::F32(v) => {
                        let $m = idx.matrix(&v)?;
                        $body
                    }
                }
            }
        }
    };
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray2<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be C-contiguous")))
}

/// Centres of X's dtype and width.
fn centers_like<'py, T: numpy::Element>(
    c: &Bound<'py, PyAny>,
    name: &str,
    d: usize,
) -> PyResult<PyReadonlyArray2<'py, T>> {
    let c: PyReadonlyArray2<'py, T> =
        c.extract().map_err(|_| PyTypeError::new_err(format!("{name} must be a 2-D array of X's dtype")))?;
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

#[allow(clippy::too_many_arguments)]
fn fit_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: Matrix<'_, T>,
    n: usize,
    d: usize,
    sample_weight: Option<&[f64]>,
    init: &Bound<'py, PyAny>,
    params: Params,
    n_jobs: Option<usize>,
) -> PyResult<FitResult<'py>> {
    let k = params.n_clusters;
    let init_arr =
        if init.is_instance_of::<pyo3::types::PyString>() { None } else { Some(centers_like::<T>(init, "init", d)?) };
    let init_kind: Init<'_, T> = match &init_arr {
        Some(a) => Init::Centers(slice(a, "init")?),
        None => match init.extract::<String>()?.as_str() {
            "k-means++" => Init::KMeansPlusPlus,
            "random" => Init::Random,
            other => {
                return Err(PyValueError::new_err(format!(
                    "init must be 'k-means++', 'random' or an array, got {other:?}"
                )))
            }
        },
    };
    let fit = enter(py, n_jobs, |cancel| kmeans::fit_matrix(x, n, d, sample_weight, init_kind, &params, cancel))?;
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
#[pyo3(signature = (x, sample_weight, init, n_clusters, n_init, max_iter, tol, algorithm, seed, n_jobs=None, csr=None))]
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
    csr: Option<CsrParts<'py>>,
) -> PyResult<FitResult<'py>> {
    let params = Params { n_clusters, n_init, max_iter, tol, algorithm: self::algorithm(algorithm)?, seed };
    let w = sample_weight
        .as_ref()
        .map(|w| w.as_slice())
        .transpose()
        .map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?;
    with_matrix!(x, csr, |m, n, d| fit_typed(py, m, n, d, w, init, params, n_jobs))
}

/// Index of the nearest centre of each row (int32).
#[pyfunction]
#[pyo3(signature = (x, centers, n_jobs=None, csr=None))]
fn kmeans_predict<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: &Bound<'py, PyAny>,
    n_jobs: Option<usize>,
    csr: Option<CsrParts<'py>>,
) -> PyResult<Bound<'py, PyArray1<i32>>> {
    with_matrix!(x, csr, |m, n, d| {
        let c = centers_like(centers, "cluster_centers", d)?;
        let (cs, k) = (slice(&c, "cluster_centers")?, c.shape()[0]);
        let labels = enter(py, n_jobs, |cancel| kmeans::predict_matrix(m, n, d, cs, k, cancel))?;
        Ok(labels.into_iter().map(|l| l as i32).collect::<Vec<i32>>().into_pyarray(py))
    })
}

/// Euclidean distances to every centre, shape (n, k), X's dtype.
#[pyfunction]
#[pyo3(signature = (x, centers, n_jobs=None, csr=None))]
fn kmeans_transform<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: &Bound<'py, PyAny>,
    n_jobs: Option<usize>,
    csr: Option<CsrParts<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    with_matrix!(x, csr, |m, n, d| {
        let c = centers_like(centers, "cluster_centers", d)?;
        let (cs, k) = (slice(&c, "cluster_centers")?, c.shape()[0]);
        let dist = enter(py, n_jobs, |cancel| kmeans::transform_matrix(m, n, d, cs, k, cancel))?;
        Ok(dist.into_pyarray(py).reshape([n, k])?.into_any())
    })
}

/// Weighted sum of squared distances to the nearest centre (float; no n × k matrix).
#[pyfunction]
#[pyo3(signature = (x, centers, sample_weight=None, n_jobs=None, csr=None))]
fn kmeans_inertia<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: &Bound<'py, PyAny>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<usize>,
    csr: Option<CsrParts<'py>>,
) -> PyResult<f64> {
    let w = sample_weight
        .as_ref()
        .map(|w| w.as_slice())
        .transpose()
        .map_err(|_| PyValueError::new_err("sample_weight must be contiguous"))?;
    with_matrix!(x, csr, |m, n, d| {
        let c = centers_like(centers, "cluster_centers", d)?;
        let (cs, k) = (slice(&c, "cluster_centers")?, c.shape()[0]);
        enter(py, n_jobs, |cancel| kmeans::inertia_matrix(m, n, d, w, cs, k, cancel))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_predict, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_transform, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_inertia, m)?)?;
    Ok(())
}
