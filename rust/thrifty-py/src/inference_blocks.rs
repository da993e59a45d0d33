//! Bindings for the distributed pieces of the subspace tests (issue 11; core: `inference::blocks`):
//! argument conversion, GIL release and error mapping only.
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{enter, to_py, CoreResultExt};
use crate::inference::{make_spec, train_lists, Xy};
use thrifty_core::inference::{blocks, perm, splits, Route};
use thrifty_core::ThriftyError;

fn slice2<'a>(a: &'a PyReadonlyArray2<'_, f64>, name: &'static str) -> PyResult<(&'a [f64], usize, usize)> {
    let shape = a.shape();
    let s = a.as_slice().map_err(|_| to_py(ThriftyError::shape(name, "must be a C-contiguous float64 array")))?;
    Ok((s, shape[0], shape[1]))
}

/// Null r of the given splits (rows) for permutations `start .. start + count` (columns), as the
/// single-machine NB-permutation test computes them (names and fixed bases; one y column).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, learner, n_components, train, seed, start, count, basis=None, rotate="none", ridge_alpha=1.0, spca_n_features=0, spls_keep=0, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_split_null_rs<'py>(
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
    rotate: &str,
    ridge_alpha: f64,
    spca_n_features: usize,
    spls_keep: usize,
    n_jobs: Option<usize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let spec = make_spec(learner, n_components, basis, None, rotate, ridge_alpha, spca_n_features, spls_keep)?;
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let trains = train_lists(train)?;
    let rs = enter(py, n_jobs, |cancel| {
        let data = xy.data()?;
        let splits = splits::splits_from_train(xy.n, n_components, &trains)?;
        perm::split_null_rs_cancellable(&data, &spec, &splits, seed, start, count, Route::Auto, cancel)
    })?;
    let rows = rs.len();
    let flat: Vec<f64> = rs.into_iter().flatten().collect();
    PyArray1::from_vec(py, flat).reshape([rows, count])
}

/// Mean Fisher z per permutation (column) over the splits (rows, in order), as the core combines them.
#[pyfunction]
fn inference_null_mean_z<'py>(py: Python<'py>, r: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (s, rows, cols) = slice2(&r, "r")?;
    let per_split: Vec<Vec<f64>> = (0..rows).map(|j| s[j * cols..(j + 1) * cols].to_vec()).collect();
    Ok(PyArray1::from_vec(py, splits::null_mean_z(&per_split).py()?))
}

/// Train membership bit masks (bit j of entry i: row i is in the train part of split j) of the
/// splits `inference_draw_splits` draws; 2 <= n_splits <= 64.
#[pyfunction]
fn inference_train_mask<'py>(
    py: Python<'py>,
    n: usize,
    n_components: usize,
    n_splits: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let mask = py.detach(|| blocks::train_mask(n, n_components, n_splits, seed)).py()?;
    Ok(PyArray1::from_vec(py, mask))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inference_split_null_rs, m)?)?;
    m.add_function(wrap_pyfunction!(inference_null_mean_z, m)?)?;
    m.add_function(wrap_pyfunction!(inference_train_mask, m)?)?;
    Ok(())
}
