//! Bindings for the `dpp` capability: argument conversion, GIL release, error mapping, nothing else.
//! The Python layer (`thrifty.dpp`) validates first and passes C-contiguous float32/float64 arrays.
//! Every core call goes through [`enter`] (GIL released, Ctrl-C raises the core's cancel flag,
//! `n_jobs` capped at the CPU count); float32/float64 dispatch goes through [`FloatMatrix`]; results
//! are `#[derive(IntoPyObject)]` structs (dicts on the Python side, typed in `_core.pyi`).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use thrifty_core::dpp::ensemble::Spectrum;
use thrifty_core::dpp::kernels::{self, Split, Stratified};
use thrifty_core::dpp::projection::{Method, OrthoCheck, Projection};
use thrifty_core::dpp::{greedy, ortho, PivotPath};

use crate::arrays::{matrix, slice1, slice2, with_matrix, FloatMatrix};
use crate::errors::{enter, CoreResultExt};

type Idx<'py> = Bound<'py, PyArray1<i64>>;
type F64s<'py> = Bound<'py, PyArray1<f64>>;

fn indices(v: Vec<usize>) -> Vec<i64> {
    v.into_iter().map(|i| i as i64).collect()
}

fn rows<'py>(py: Python<'py>, flat: Vec<usize>, width: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
    let count = flat.len().checked_div(width).unwrap_or(0);
    indices(flat).into_pyarray(py).reshape([count, width])
}

// ---- results ---------------------------------------------------------------------------------

#[derive(IntoPyObject)]
struct Basis<'py> {
    basis: Bound<'py, PyAny>,
    rank: usize,
}

#[derive(IntoPyObject)]
struct Path<'py> {
    indices: Idx<'py>,
    pivots: F64s<'py>,
    /// the conditional variances are `pivots · 2^pivot_exponent` (0 unless the input was rescaled)
    pivot_exponent: i32,
    gains: Option<F64s<'py>>,
}

impl<'py> Path<'py> {
    fn new(py: Python<'py>, p: PivotPath, gains: Option<Vec<f64>>) -> Self {
        Path {
            indices: indices(p.items).into_pyarray(py),
            pivots: p.pivots.into_pyarray(py),
            pivot_exponent: p.pivot_exponent,
            gains: gains.map(|g| g.into_pyarray(py)),
        }
    }
}

#[derive(IntoPyObject)]
struct Partition<'py> {
    cells: Idx<'py>,
    volumes: F64s<'py>,
}

#[derive(IntoPyObject)]
struct HaarDiagonal<'py> {
    probabilities: F64s<'py>,
    rank: usize,
}

#[derive(IntoPyObject)]
struct Ragged<'py> {
    flat: Idx<'py>,
    offsets: Idx<'py>,
}

// ---- orthonormalisation, leverage, variance --------------------------------------------------

/// Orthonormal basis (n×r) of the column space of `features` and its numerical rank r.
#[pyfunction]
#[pyo3(signature = (features, rtol, equilibrate=true))]
fn dpp_orthonormalize<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    rtol: f64,
    equilibrate: bool,
) -> PyResult<Basis<'py>> {
    let m = FloatMatrix::new(features, "features")?;
    with_matrix!(m, "features", |s, n, p| {
        let (q, rank) = enter(py, None, |c| ortho::orthonormalize(s, n, p, rtol, equilibrate, c))?;
        Ok(Basis { basis: matrix(py, q, n, rank)?.into_any(), rank })
    })
}

/// max |UᵀU − I| (the exact O(np²) check).
#[pyfunction]
fn dpp_orthonormality_error(py: Python<'_>, u: &Bound<'_, PyAny>) -> PyResult<f64> {
    let m = FloatMatrix::new(u, "U")?;
    with_matrix!(m, "U", |s, n, p| enter(py, None, |_| ortho::orthonormality_error(s, n, p)))
}

/// Exact variance of Σ_{i∈S} g_i for the DPP with marginal kernel K = WWᵀ.
#[pyfunction]
fn dpp_exact_variance(py: Python<'_>, w: &Bound<'_, PyAny>, g: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    let gs = slice1(&g, "g")?;
    let m = FloatMatrix::new(w, "U")?;
    with_matrix!(m, "U", |s, n, p| enter(py, None, |_| ortho::exact_variance(s, n, p, gs)))
}

// ---- projection DPP ------------------------------------------------------------------------

/// A core call that the core says ends well under a second, on the calling thread with the GIL
/// released: no hand-off to a pool worker (a wake-up of a millisecond or more when the cores are
/// busy). A Ctrl-C meanwhile raises KeyboardInterrupt when it returns.
fn inline<T: Send>(py: Python<'_>, work: impl FnOnce() -> thrifty_core::Result<T> + Send) -> PyResult<T> {
    // the global pool, if it can be had, lends a worker to long scans (`dpp::scan`); without it the
    // call runs on this thread alone
    let _ = thrifty_core::threads::global_pool();
    py.detach(|| thrifty_core::alloc::ensure_gemm_workspace().and_then(|()| work())).py()
}

fn method(name: &str) -> PyResult<Method> {
    match name {
        "chain" => Ok(Method::Chain),
        "accept_reject" => Ok(Method::AcceptReject),
        _ => Err(PyValueError::new_err(format!("method must be 'chain' or 'accept_reject', got {name:?}"))),
    }
}

/// A projection DPP K = UUᵀ: leverage scores and their guide table, with a reference to U (read-only).
#[pyclass(module = "thrifty._core", name = "DppProjection", frozen)]
struct DppProjection {
    u: Py<PyAny>,
    inner: Projection,
}

#[pymethods]
impl DppProjection {
    /// `check`: "skip", "randomized" (O(np), `probes` random unit vectors from `seed`) or "exact"
    /// (O(np²)), each against `tol`.
    #[new]
    #[pyo3(signature = (u, check="randomized", tol=1e-6, probes=2, seed=0))]
    fn new(py: Python<'_>, u: &Bound<'_, PyAny>, check: &str, tol: f64, probes: usize, seed: u64) -> PyResult<Self> {
        let check = match check {
            "skip" => OrthoCheck::Skip,
            "randomized" => OrthoCheck::Randomized { tol, probes, seed },
            "exact" => OrthoCheck::Exact { tol },
            other => {
                return Err(PyValueError::new_err(format!(
                    "check must be 'skip', 'randomized' or 'exact', got {other:?}"
                )))
            }
        };
        let m = FloatMatrix::new(u, "U")?;
        let inner = with_matrix!(m, "U", |s, n, p| {
            if Projection::new_runs_inline(n, p, check) {
                inline(py, || Projection::new(s, n, p, check))?
            } else {
                enter(py, None, |_| Projection::new(s, n, p, check))?
            }
        });
        Ok(DppProjection { u: u.clone().unbind(), inner })
    }

    fn leverage<'py>(&self, py: Python<'py>) -> F64s<'py> {
        self.inner.leverage.clone().into_pyarray(py)
    }

    /// Samples number `offset .. offset + count` as a (count, p) int64 array; sample s uses stream (seed, s).
    #[pyo3(signature = (count, method, seed, n_jobs=None, offset=0))]
    fn sample_many<'py>(
        &self,
        py: Python<'py>,
        count: usize,
        method: &str,
        seed: u64,
        n_jobs: Option<usize>,
        offset: usize,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let (m, inner) = (self::method(method)?, &self.inner);
        let u = FloatMatrix::new(self.u.bind(py), "U")?;
        let flat = with_matrix!(u, "U", |s, _n, _p| {
            if inner.sample_runs_inline(count, m) && n_jobs != Some(0) {
                inline(py, || inner.sample_range(s, offset, count, m, seed, thrifty_core::dpp::never()))?
            } else {
                enter(py, n_jobs, |c| inner.sample_range(s, offset, count, m, seed, c))?
            }
        });
        rows(py, flat, inner.p)
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
    /// From a full kernel (float64 values; `input_eps` the precision the user's array had).
    #[staticmethod]
    #[pyo3(signature = (l, input_eps=f64::EPSILON))]
    fn from_kernel(py: Python<'_>, l: PyReadonlyArray2<'_, f64>, input_eps: f64) -> PyResult<Self> {
        let (s, n, c) = slice2(&l, "L")?;
        if n != c {
            return Err(PyValueError::new_err(format!("L must be square, got shape ({n}, {c})")));
        }
        Ok(DppEnsemble { inner: enter(py, None, |c| Spectrum::from_kernel(s, n, input_eps, c))? })
    }

    #[staticmethod]
    fn from_features(py: Python<'_>, features: &Bound<'_, PyAny>) -> PyResult<Self> {
        let m = FloatMatrix::new(features, "features")?;
        let inner = with_matrix!(m, "features", |s, n, d| enter(py, None, |_| Spectrum::from_features(s, n, d))?);
        Ok(DppEnsemble { inner })
    }

    /// From saved eigenpairs (`eigenvectors()` and `eigenvalues()` of another ensemble).
    #[staticmethod]
    fn from_parts(eigenvectors: PyReadonlyArray2<'_, f64>, eigenvalues: PyReadonlyArray1<'_, f64>) -> PyResult<Self> {
        let (v, n, r) = slice2(&eigenvectors, "eigenvectors")?;
        let lam = slice1(&eigenvalues, "eigenvalues")?;
        if lam.len() != r {
            return Err(PyValueError::new_err(format!("eigenvalues must have length {r}, got {}", lam.len())));
        }
        Ok(DppEnsemble { inner: Spectrum::from_parts(v.to_vec(), lam.to_vec(), n).py()? })
    }

    #[getter]
    fn rank(&self) -> usize {
        self.inner.r
    }

    fn eigenvalues<'py>(&self, py: Python<'py>) -> F64s<'py> {
        self.inner.lam.clone().into_pyarray(py)
    }

    fn eigenvectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        matrix(py, self.inner.v.clone(), self.inner.n, self.inner.r)
    }

    fn inclusion<'py>(&self, py: Python<'py>) -> PyResult<F64s<'py>> {
        Ok(self.inner.inclusion().py()?.into_pyarray(py))
    }

    fn exact_variance(&self, py: Python<'_>, g: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
        let gs = slice1(&g, "g")?;
        enter(py, None, |_| self.inner.exact_variance(gs))
    }

    /// DPP samples number `offset .. offset + count` as flat indices and offsets.
    #[pyo3(signature = (count, seed, n_jobs=None, offset=0))]
    fn sample_many<'py>(
        &self,
        py: Python<'py>,
        count: usize,
        seed: u64,
        n_jobs: Option<usize>,
        offset: usize,
    ) -> PyResult<Ragged<'py>> {
        let samples = enter(py, n_jobs, |c| self.inner.sample_many(offset, count, seed, c))?;
        let mut offsets = Vec::with_capacity(samples.len() + 1);
        offsets.push(0i64);
        let mut flat = Vec::new();
        for s in samples {
            flat.extend(s.into_iter().map(|i| i as i64));
            offsets.push(flat.len() as i64);
        }
        Ok(Ragged { flat: flat.into_pyarray(py), offsets: offsets.into_pyarray(py) })
    }

    /// k-DPP samples number `offset .. offset + count` as a (count, k) array.
    #[pyo3(signature = (k, count, seed, n_jobs=None, offset=0))]
    fn sample_k_many<'py>(
        &self,
        py: Python<'py>,
        k: usize,
        count: usize,
        seed: u64,
        n_jobs: Option<usize>,
        offset: usize,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let flat = enter(py, n_jobs, |c| self.inner.sample_k_many(k, offset, count, seed, c))?;
        rows(py, flat, k)
    }
}

// ---- kernels -------------------------------------------------------------------------------

/// Cell of every point and cell volumes of an m-cell box partition of [0,1]^d.
#[pyfunction]
fn dpp_partition<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    m: usize,
    split: &str,
) -> PyResult<Partition<'py>> {
    let sp = match split {
        "volume" => Split::Volume,
        "quantile" => Split::Quantile,
        _ => return Err(PyValueError::new_err(format!("split must be 'volume' or 'quantile', got {split:?}"))),
    };
    let (s, n, d) = slice2(&x, "X")?;
    let (cell, vol) = enter(py, None, |_| kernels::partition(s, n, d, m, sp))?;
    Ok(Partition { cells: indices(cell).into_pyarray(py), volumes: vol.into_pyarray(py) })
}

fn cells_of(cells: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    let c = slice1(cells, "cells")?;
    if c.iter().any(|&v| v < 0) {
        return Err(PyValueError::new_err("cells must be non-negative"));
    }
    thrifty_core::alloc::try_collect("cells", c.iter().map(|&v| v as usize)).py()
}

/// K_ii of the discrete Haar kernel and its rank (number of non-empty cells).
#[pyfunction]
fn dpp_haar_diagonal<'py>(
    py: Python<'py>,
    cells: PyReadonlyArray1<'py, i64>,
    n_cells: usize,
    density: PyReadonlyArray1<'py, f64>,
) -> PyResult<HaarDiagonal<'py>> {
    let c = cells_of(&cells)?;
    let d = slice1(&density, "density")?;
    let (k, rank) = kernels::haar_diagonal(&c, n_cells, d).py()?;
    Ok(HaarDiagonal { probabilities: k.into_pyarray(py), rank })
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
    fn sample_many<'py>(
        &self,
        py: Python<'py>,
        count: usize,
        seed: u64,
        n_jobs: Option<usize>,
        offset: usize,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let flat = enter(py, n_jobs, |c| self.inner.sample_range(offset, count, seed, c))?;
        rows(py, flat, self.inner.rank())
    }
}

/// Dense periodised tensor Daubechies features on [0,1]^d.
#[pyfunction]
fn dpp_daubechies_features<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    m: usize,
    order: usize,
    density: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (s, n, d) = slice2(&x, "X")?;
    let g = slice1(&density, "density")?;
    let f = enter(py, None, |c| kernels::daubechies_features(s, n, d, m, order, g, c))?;
    matrix(py, f, n, m)
}

/// Dense multivariate Jacobi features on [−1,1]^d.
#[pyfunction]
fn dpp_jacobi_features<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    m: usize,
    a: f64,
    b: f64,
    density: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (s, n, d) = slice2(&x, "X")?;
    let g = slice1(&density, "density")?;
    let f = enter(py, None, |c| kernels::jacobi_features(s, n, d, m, a, b, g, c))?;
    matrix(py, f, n, m)
}

/// φ of the Daubechies wavelet of the given order at the points t.
#[pyfunction]
fn dpp_daubechies_phi<'py>(py: Python<'py>, t: PyReadonlyArray1<'py, f64>, order: usize) -> PyResult<F64s<'py>> {
    let ts = slice1(&t, "t")?;
    let phi = kernels::ScalingFunction::new(order, 12).py()?;
    Ok(ts.iter().map(|&v| phi.eval(v)).collect::<Vec<f64>>().into_pyarray(py))
}

// ---- greedy selection ----------------------------------------------------------------------

/// Greedy entropy selection on a full covariance (float32 or float64).
/// `check`: "read" (the entries the selection reads), "full" (the whole matrix) or "skip".
#[pyfunction]
#[pyo3(signature = (cov, k, tol, check="read"))]
fn dpp_greedy_entropy<'py>(
    py: Python<'py>,
    cov: &Bound<'py, PyAny>,
    k: usize,
    tol: f64,
    check: &str,
) -> PyResult<Path<'py>> {
    let check = match check {
        "read" => greedy::Check::Read,
        "full" => greedy::Check::Full,
        "skip" => greedy::Check::Skip,
        other => return Err(PyValueError::new_err(format!("check must be 'read', 'full' or 'skip', got {other:?}"))),
    };
    let m = FloatMatrix::new(cov, "cov")?;
    let p = with_matrix!(m, "cov", |s, n, _c| enter(py, None, |c| greedy::entropy_kernel(s, n, k, tol, check, c))?);
    Ok(Path::new(py, p, None))
}

/// Greedy entropy / MAP selection on L = VVᵀ.
#[pyfunction]
fn dpp_greedy_entropy_features<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    k: usize,
    tol: f64,
) -> PyResult<Path<'py>> {
    let m = FloatMatrix::new(features, "features")?;
    let p = with_matrix!(m, "features", |s, n, d| enter(py, None, |c| greedy::entropy_factor(s, n, d, k, tol, c))?);
    Ok(Path::new(py, p, None))
}

/// Greedy mutual-information selection; returns indices, conditional variances and gains.
#[pyfunction]
#[pyo3(signature = (cov, k, noise, check=true))]
fn dpp_greedy_mutual_information<'py>(
    py: Python<'py>,
    cov: PyReadonlyArray2<'py, f64>,
    k: usize,
    noise: f64,
    check: bool,
) -> PyResult<Path<'py>> {
    let (s, n, _) = slice2(&cov, "cov")?;
    let (p, gains) = enter(py, None, |c| greedy::mutual_information(s, n, k, noise, check, c))?;
    Ok(Path::new(py, p, Some(gains)))
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
