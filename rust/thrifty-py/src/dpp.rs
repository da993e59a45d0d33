//! Bindings for the `dpp` capability: argument conversion, GIL release, error mapping. The Python
//! layer (`thrifty.dpp`) validates first and always passes C-contiguous float32/float64 arrays.
use crate::errors::CoreResultExt;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use thrifty_core::dpp::ensemble::Spectrum;
use thrifty_core::dpp::kernels::{self, Split, Stratified};
use thrifty_core::dpp::projection::{Method, Projection};
use thrifty_core::dpp::{greedy, ortho, PivotPath};
use thrifty_core::threads::with_threads;

type Idx<'py> = Bound<'py, PyArray1<i64>>;

fn slice2<'a, T: numpy::Element>(a: &'a PyReadonlyArray2<'_, T>, name: &str) -> PyResult<(&'a [T], usize, usize)> {
    let (r, c) = (a.shape()[0], a.shape()[1]);
    let s = a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be C-contiguous")))?;
    Ok((s, r, c))
}

fn slice1<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be contiguous")))
}

fn is_f32(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    if obj.extract::<PyReadonlyArray2<'_, f64>>().is_ok() {
        Ok(false)
    } else if obj.extract::<PyReadonlyArray2<'_, f32>>().is_ok() {
        Ok(true)
    } else {
        Err(PyTypeError::new_err(format!("{name} must be a 2-D float32 or float64 array")))
    }
}

fn method(name: &str) -> PyResult<Method> {
    match name {
        "chain" => Ok(Method::Chain),
        "accept_reject" => Ok(Method::AcceptReject),
        _ => Err(PyValueError::new_err(format!("method must be 'chain' or 'accept_reject', got {name:?}"))),
    }
}

fn to_2d<'py>(py: Python<'py>, rows: Vec<Vec<usize>>, width: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let count = rows.len();
    let flat: Vec<i64> = rows.into_iter().flat_map(|r| r.into_iter().map(|i| i as i64)).collect();
    flat.into_pyarray(py).reshape([count, width])
}

fn ragged<'py>(py: Python<'py>, rows: Vec<Vec<usize>>) -> (Idx<'py>, Idx<'py>) {
    let mut offsets = Vec::with_capacity(rows.len() + 1);
    offsets.push(0i64);
    let mut flat = Vec::new();
    for r in rows {
        flat.extend(r.into_iter().map(|i| i as i64));
        offsets.push(flat.len() as i64);
    }
    (flat.into_pyarray(py), offsets.into_pyarray(py))
}

fn path_out<'py>(py: Python<'py>, p: PivotPath) -> (Idx<'py>, Bound<'py, PyArray1<f64>>) {
    let items: Vec<i64> = p.items.iter().map(|&i| i as i64).collect();
    (items.into_pyarray(py), p.pivots.into_pyarray(py))
}

// ---- orthonormalisation, leverage, variance --------------------------------------------------

fn orth_impl<'py, T: ortho::Dense + numpy::Element>(py: Python<'py>, a: PyReadonlyArray2<'py, T>, rtol: f64) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let (s, n, p) = slice2(&a, "features")?;
    let (q, r) = py.detach(|| ortho::orthonormalize(s, n, p, rtol)).py()?;
    Ok((q.into_pyarray(py).reshape([n, r])?.into_any(), r))
}

/// Orthonormal basis (n×r) of the column space of `features` and its numerical rank r.
#[pyfunction]
fn dpp_orthonormalize<'py>(py: Python<'py>, features: &Bound<'py, PyAny>, rtol: f64) -> PyResult<(Bound<'py, PyAny>, usize)> {
    if is_f32(features, "features")? {
        orth_impl(py, features.extract::<PyReadonlyArray2<'py, f32>>()?, rtol)
    } else {
        orth_impl(py, features.extract::<PyReadonlyArray2<'py, f64>>()?, rtol)
    }
}

/// max |UᵀU − I|.
#[pyfunction]
fn dpp_orthonormality_error(py: Python<'_>, u: &Bound<'_, PyAny>) -> PyResult<f64> {
    if is_f32(u, "U")? {
        let a = u.extract::<PyReadonlyArray2<'_, f32>>()?;
        let (s, n, p) = slice2(&a, "U")?;
        Ok(py.detach(|| ortho::orthonormality_error(s, n, p)))
    } else {
        let a = u.extract::<PyReadonlyArray2<'_, f64>>()?;
        let (s, n, p) = slice2(&a, "U")?;
        Ok(py.detach(|| ortho::orthonormality_error(s, n, p)))
    }
}

/// Exact variance of Σ_{i∈S} g_i for the DPP with marginal kernel K = WWᵀ.
#[pyfunction]
fn dpp_exact_variance(py: Python<'_>, w: &Bound<'_, PyAny>, g: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let gs = slice1(&g, "g")?;
    if is_f32(w, "U")? {
        let a = w.extract::<PyReadonlyArray2<'_, f32>>()?;
        let (s, n, p) = slice2(&a, "U")?;
        py.detach(|| ortho::exact_variance(s, n, p, gs)).py()
    } else {
        let a = w.extract::<PyReadonlyArray2<'_, f64>>()?;
        let (s, n, p) = slice2(&a, "U")?;
        py.detach(|| ortho::exact_variance(s, n, p, gs)).py()
    }
}

// ---- projection DPP ------------------------------------------------------------------------

/// A projection DPP K = UUᵀ: leverage scores and their guide table, with a reference to U (read-only).
#[pyclass(module = "thrifty._core", name = "DppProjection", frozen)]
struct DppProjection {
    u: Py<PyAny>,
    f32: bool,
    inner: Projection,
}

#[pymethods]
impl DppProjection {
    #[new]
    #[pyo3(signature = (u, check_tol=None))]
    fn new(py: Python<'_>, u: &Bound<'_, PyAny>, check_tol: Option<f64>) -> PyResult<Self> {
        let f32 = is_f32(u, "U")?;
        let inner = if f32 {
            let a = u.extract::<PyReadonlyArray2<'_, f32>>()?;
            let (s, n, p) = slice2(&a, "U")?;
            py.detach(|| Projection::new(s, n, p, check_tol)).py()?
        } else {
            let a = u.extract::<PyReadonlyArray2<'_, f64>>()?;
            let (s, n, p) = slice2(&a, "U")?;
            py.detach(|| Projection::new(s, n, p, check_tol)).py()?
        };
        Ok(DppProjection { u: u.clone().unbind(), f32, inner })
    }

    fn leverage<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.leverage.clone().into_pyarray(py)
    }

    /// `count` samples as a (count, p) int64 array; sample s uses stream (seed, s).
    #[pyo3(signature = (count, method, seed, n_jobs=None, offset=0))]
    fn sample_many<'py>(&self, py: Python<'py>, count: usize, method: &str, seed: u64, n_jobs: Option<usize>, offset: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let m = self::method(method)?;
        let u = self.u.bind(py);
        let inner = &self.inner;
        let rows = if self.f32 {
            let a = u.extract::<PyReadonlyArray2<'_, f32>>()?;
            let (s, _, _) = slice2(&a, "U")?;
            py.detach(|| with_threads(n_jobs, || inner.sample_range(s, offset, count, m, seed)).and_then(|r| r)).py()?
        } else {
            let a = u.extract::<PyReadonlyArray2<'_, f64>>()?;
            let (s, _, _) = slice2(&a, "U")?;
            py.detach(|| with_threads(n_jobs, || inner.sample_range(s, offset, count, m, seed)).and_then(|r| r)).py()?
        };
        to_2d(py, rows, self.inner.p)
    }
}

// ---- L-ensembles and k-DPPs ----------------------------------------------------------------

/// The spectrum of an L-ensemble (eigenpairs with λ > 0).
#[pyclass(module = "thrifty._core", name = "DppEnsemble", frozen)]
struct DppEnsemble {
    inner: Spectrum,
}

#[pymethods]
impl DppEnsemble {
    #[staticmethod]
    fn from_kernel(py: Python<'_>, l: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let (s, n, c) = slice2(&l, "L")?;
        if n != c {
            return Err(PyValueError::new_err(format!("L must be square, got shape ({n}, {c})")));
        }
        Ok(DppEnsemble { inner: py.detach(|| Spectrum::from_kernel(s, n)).py()? })
    }

    #[staticmethod]
    fn from_features(py: Python<'_>, features: &Bound<'_, PyAny>) -> PyResult<Self> {
        let inner = if is_f32(features, "features")? {
            let a = features.extract::<PyReadonlyArray2<'_, f32>>()?;
            let (s, n, d) = slice2(&a, "features")?;
            py.detach(|| Spectrum::from_features(s, n, d)).py()?
        } else {
            let a = features.extract::<PyReadonlyArray2<'_, f64>>()?;
            let (s, n, d) = slice2(&a, "features")?;
            py.detach(|| Spectrum::from_features(s, n, d)).py()?
        };
        Ok(DppEnsemble { inner })
    }

    #[getter]
    fn rank(&self) -> usize {
        self.inner.r
    }

    fn eigenvalues<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.lam.clone().into_pyarray(py)
    }

    fn eigenvectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.inner.v.clone().into_pyarray(py).reshape([self.inner.n, self.inner.r])
    }

    fn inclusion<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.inclusion().into_pyarray(py)
    }

    fn exact_variance(&self, py: Python<'_>, g: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
        let gs = slice1(&g, "g")?;
        py.detach(|| self.inner.exact_variance(gs)).py()
    }

    /// `count` DPP samples as (flat indices, offsets).
    #[pyo3(signature = (count, seed, n_jobs=None, offset=0))]
    fn sample_many<'py>(&self, py: Python<'py>, count: usize, seed: u64, n_jobs: Option<usize>, offset: usize) -> PyResult<(Idx<'py>, Idx<'py>)> {
        let inner = &self.inner;
        let rows = py.detach(|| with_threads(n_jobs, || inner.sample_many(offset, count, seed)).and_then(|r| r)).py()?;
        Ok(ragged(py, rows))
    }

    /// `count` k-DPP samples as a (count, k) array.
    #[pyo3(signature = (k, count, seed, n_jobs=None, offset=0))]
    fn sample_k_many<'py>(&self, py: Python<'py>, k: usize, count: usize, seed: u64, n_jobs: Option<usize>, offset: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let inner = &self.inner;
        let rows = py.detach(|| with_threads(n_jobs, || inner.sample_k_many(k, offset, count, seed)).and_then(|r| r)).py()?;
        to_2d(py, rows, k)
    }
}

// ---- kernels -------------------------------------------------------------------------------

/// Cell of every point and cell volumes of an m-cell box partition of [0,1]^d.
#[pyfunction]
fn dpp_partition<'py>(py: Python<'py>, x: PyReadonlyArray2<'py, f64>, m: usize, split: &str) -> PyResult<(Idx<'py>, Bound<'py, PyArray1<f64>>)> {
    let sp = match split {
        "volume" => Split::Volume,
        "quantile" => Split::Quantile,
        _ => return Err(PyValueError::new_err(format!("split must be 'volume' or 'quantile', got {split:?}"))),
    };
    let (s, n, d) = slice2(&x, "X")?;
    let (cell, vol) = py.detach(|| kernels::partition(s, n, d, m, sp)).py()?;
    let cell: Vec<i64> = cell.into_iter().map(|c| c as i64).collect();
    Ok((cell.into_pyarray(py), vol.into_pyarray(py)))
}

fn cells_of(cells: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    let c = slice1(cells, "cells")?;
    if c.iter().any(|&v| v < 0) {
        return Err(PyValueError::new_err("cells must be non-negative"));
    }
    Ok(c.iter().map(|&v| v as usize).collect())
}

/// K_ii of the discrete Haar kernel and its rank (number of non-empty cells).
#[pyfunction]
fn dpp_haar_diagonal<'py>(py: Python<'py>, cells: PyReadonlyArray1<'py, i64>, n_cells: usize, density: PyReadonlyArray1<'py, f64>) -> PyResult<(Bound<'py, PyArray1<f64>>, usize)> {
    let c = cells_of(&cells)?;
    let d = slice1(&density, "density")?;
    let (k, r) = kernels::haar_diagonal(&c, n_cells, d).py()?;
    Ok((k.into_pyarray(py), r))
}

/// Block-diagonal projection DPP sampler (one item per cell).
#[pyclass(module = "thrifty._core", name = "DppStratified", frozen)]
struct DppStratified {
    inner: Stratified,
}

#[pymethods]
impl DppStratified {
    #[new]
    fn new(cells: PyReadonlyArray1<'_, i64>, n_cells: usize, kdiag: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let c = cells_of(&cells)?;
        let k = slice1(&kdiag, "probabilities")?;
        Ok(DppStratified { inner: Stratified::new(&c, n_cells, k).py()? })
    }

    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    #[pyo3(signature = (count, seed, n_jobs=None, offset=0))]
    fn sample_many<'py>(&self, py: Python<'py>, count: usize, seed: u64, n_jobs: Option<usize>, offset: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let inner = &self.inner;
        let rows = py.detach(|| with_threads(n_jobs, || inner.sample_range(offset, count, seed))).py()?;
        to_2d(py, rows, self.inner.rank())
    }
}

/// Dense periodised tensor Daubechies features on [0,1]^d.
#[pyfunction]
fn dpp_daubechies_features<'py>(py: Python<'py>, x: PyReadonlyArray2<'py, f64>, m: usize, order: usize, density: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (s, n, d) = slice2(&x, "X")?;
    let g = slice1(&density, "density")?;
    let f = py.detach(|| kernels::daubechies_features(s, n, d, m, order, g)).py()?;
    f.into_pyarray(py).reshape([n, m])
}

/// Dense multivariate Jacobi features on [−1,1]^d.
#[pyfunction]
fn dpp_jacobi_features<'py>(py: Python<'py>, x: PyReadonlyArray2<'py, f64>, m: usize, a: f64, b: f64, density: PyReadonlyArray1<'py, f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (s, n, d) = slice2(&x, "X")?;
    let g = slice1(&density, "density")?;
    let f = py.detach(|| kernels::jacobi_features(s, n, d, m, a, b, g)).py()?;
    f.into_pyarray(py).reshape([n, m])
}

/// φ of the Daubechies wavelet of the given order at the points t.
#[pyfunction]
fn dpp_daubechies_phi<'py>(py: Python<'py>, t: PyReadonlyArray1<'py, f64>, order: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let ts = slice1(&t, "t")?;
    let phi = kernels::ScalingFunction::new(order, 12).py()?;
    Ok(ts.iter().map(|&v| phi.eval(v)).collect::<Vec<f64>>().into_pyarray(py))
}

// ---- greedy selection ----------------------------------------------------------------------

/// Greedy entropy selection on a full covariance (float32 or float64).
/// `check`: "read" (the entries the selection reads), "full" (the whole matrix) or "skip".
#[pyfunction]
#[pyo3(signature = (cov, k, tol, check="read"))]
fn dpp_greedy_entropy<'py>(py: Python<'py>, cov: &Bound<'py, PyAny>, k: usize, tol: f64, check: &str) -> PyResult<(Idx<'py>, Bound<'py, PyArray1<f64>>)> {
    let check = match check {
        "read" => greedy::Check::Read,
        "full" => greedy::Check::Full,
        "skip" => greedy::Check::Skip,
        other => return Err(PyValueError::new_err(format!("check must be 'read', 'full' or 'skip', got {other:?}"))),
    };
    let p = if is_f32(cov, "cov")? {
        let a = cov.extract::<PyReadonlyArray2<'_, f32>>()?;
        let (s, n, _) = slice2(&a, "cov")?;
        py.detach(|| greedy::entropy_kernel(s, n, k, tol, check)).py()?
    } else {
        let a = cov.extract::<PyReadonlyArray2<'_, f64>>()?;
        let (s, n, _) = slice2(&a, "cov")?;
        py.detach(|| greedy::entropy_kernel(s, n, k, tol, check)).py()?
    };
    Ok(path_out(py, p))
}

/// Greedy entropy / MAP selection on L = VVᵀ.
#[pyfunction]
fn dpp_greedy_entropy_features<'py>(py: Python<'py>, features: &Bound<'py, PyAny>, k: usize, tol: f64) -> PyResult<(Idx<'py>, Bound<'py, PyArray1<f64>>)> {
    let p = if is_f32(features, "features")? {
        let a = features.extract::<PyReadonlyArray2<'_, f32>>()?;
        let (s, n, d) = slice2(&a, "features")?;
        py.detach(|| greedy::entropy_factor(s, n, d, k, tol)).py()?
    } else {
        let a = features.extract::<PyReadonlyArray2<'_, f64>>()?;
        let (s, n, d) = slice2(&a, "features")?;
        py.detach(|| greedy::entropy_factor(s, n, d, k, tol)).py()?
    };
    Ok(path_out(py, p))
}

/// Greedy mutual-information selection; returns (items, conditional variances, gains).
#[pyfunction]
#[pyo3(signature = (cov, k, noise, check=true))]
fn dpp_greedy_mutual_information<'py>(py: Python<'py>, cov: PyReadonlyArray2<'py, f64>, k: usize, noise: f64, check: bool) -> PyResult<(Idx<'py>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>)> {
    let (s, n, _) = slice2(&cov, "cov")?;
    let (p, gains) = py.detach(|| greedy::mutual_information(s, n, k, noise, check)).py()?;
    let (a, b) = path_out(py, p);
    Ok((a, b, gains.into_pyarray(py)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DppProjection>()?;
    m.add_class::<DppEnsemble>()?;
    m.add_class::<DppStratified>()?;
    m.add_function(wrap_pyfunction!(dpp_orthonormalize, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_orthonormality_error, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_exact_variance, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_partition, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_haar_diagonal, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_daubechies_features, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_jacobi_features, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_daubechies_phi, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_greedy_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_greedy_entropy_features, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_greedy_mutual_information, m)?)?;
    Ok(())
}
