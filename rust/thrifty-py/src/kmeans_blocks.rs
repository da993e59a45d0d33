//! Bindings for the per-block kernels of the blocked (scale-out) k-means (`thrifty_core::kmeans::blocks`).
//! Each call handles one logical block (short), so it releases the GIL with `py.detach` (Dask runs
//! blocks on worker threads, where signals cannot be polled). The state arrays are copied, never
//! modified: a Dask future may be shared by several tasks and must stay valid for recomputation.
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use thrifty_core::kmeans::blocks;
use thrifty_core::scalar::Real;

use crate::arrays::{slice1, slice2, FloatMatrix};
use crate::errors::CoreResultExt;

macro_rules! dispatch {
    ($m:expr, |$x:ident| $body:expr) => {
        match $m {
            FloatMatrix::F64($x) => $body,
            FloatMatrix::F32($x) => $body,
        }
    };
}

fn vec1<T: numpy::Element + Copy>(a: &PyReadonlyArray1<'_, T>, name: &str) -> PyResult<Vec<T>> {
    Ok(a.as_slice().map_err(|_| PyValueError::new_err(format!("{name} must be contiguous")))?.to_vec())
}

fn weights<'a>(w: &'a Option<PyReadonlyArray1<'_, f64>>) -> PyResult<Option<&'a [f64]>> {
    w.as_ref().map(|a| slice1(a, "sample_weight")).transpose()
}

type KparOut<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<u32>>, f64, Bound<'py, PyArray1<f64>>);

/// k-means‖: fold new candidates into a block's nearest-candidate state; returns
/// (closest, owner, cost, counts per candidate). `sample_weight`: the block's weights (None: ones).
#[pyfunction]
#[pyo3(signature = (x, closest, owner, cands, offset, total, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
fn kmeans_block_kpar_update<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    closest: PyReadonlyArray1<'py, f64>,
    owner: PyReadonlyArray1<'py, u32>,
    cands: PyReadonlyArray2<'py, f64>,
    offset: usize,
    total: usize,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<KparOut<'py>> {
    let w = weights(&sample_weight)?;
    let mut cl = vec1(&closest, "closest")?;
    let mut ow = vec1(&owner, "owner")?;
    let c = cands.as_slice().map_err(|_| PyValueError::new_err("candidates must be C-contiguous"))?;
    let (cost, counts) = dispatch!(FloatMatrix::new(x, "X block")?, |a| {
        let (xs, n, d) = slice2(&a, "X block")?;
        if cands.shape()[1] != d && !c.is_empty() {
            return Err(PyValueError::new_err("candidates and X block differ in width"));
        }
        py.detach(|| blocks::kpar_update(xs, n, d, w, &mut cl, &mut ow, c, offset, total)).py()?
    });
    Ok((cl.into_pyarray(py), ow.into_pyarray(py), cost, counts.into_pyarray(py)))
}

/// k-means‖: indices of the rows a block keeps in round `round` (stream (seed, round, block)).
#[pyfunction]
#[pyo3(signature = (closest, phi, ell, seed, round, block, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
fn kmeans_block_kpar_sample<'py>(
    py: Python<'py>,
    closest: PyReadonlyArray1<'py, f64>,
    phi: f64,
    ell: f64,
    seed: u64,
    round: u64,
    block: u64,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let cl = slice1(&closest, "closest")?;
    let w = weights(&sample_weight)?;
    let kept = py.detach(|| blocks::kpar_sample(cl, w, phi, ell, seed, round, block)).py()?;
    Ok(kept.into_pyarray(py))
}

type LloydOut<'py> =
    (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

#[allow(clippy::too_many_arguments)]
fn lloyd_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    a: PyReadonlyArray2<'py, T>,
    w: Option<&[f64]>,
    state: (Vec<u32>, Vec<f64>, Vec<f64>),
    centers: &[f64],
    drift: &[f64],
    half_sep: &[f64],
    fresh: bool,
) -> PyResult<LloydOut<'py>> {
    let (xs, n, d) = slice2(&a, "X block")?;
    let (mut lab, mut up, mut lo) = state;
    if fresh {
        lab = vec![0; n];
        up = vec![0.0; n];
        lo = vec![0.0; n];
    }
    let part = py
        .detach(|| blocks::lloyd_block(xs, n, d, w, &mut lab, &mut up, &mut lo, centers, drift, half_sep, fresh))
        .py()?;
    Ok((lab.into_pyarray(py), up.into_pyarray(py), lo.into_pyarray(py), part.into_pyarray(py)))
}

/// One Lloyd step with Hamerly bounds on one block; returns (labels, upper, lower, partial totals).
/// With `labels=None` (first step) every row gets a distance row. `sample_weight`: the block's
/// weights (None: ones).
#[pyfunction]
#[pyo3(signature = (x, labels, upper, lower, centers, drift, half_sep, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
fn kmeans_block_lloyd<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    labels: Option<PyReadonlyArray1<'py, u32>>,
    upper: Option<PyReadonlyArray1<'py, f64>>,
    lower: Option<PyReadonlyArray1<'py, f64>>,
    centers: PyReadonlyArray2<'py, f64>,
    drift: PyReadonlyArray1<'py, f64>,
    half_sep: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<LloydOut<'py>> {
    let w = weights(&sample_weight)?;
    let fresh = labels.is_none();
    let state = match (labels, upper, lower) {
        (Some(l), Some(u), Some(lo)) => (vec1(&l, "labels")?, vec1(&u, "upper")?, vec1(&lo, "lower")?),
        (None, _, _) => (Vec::new(), Vec::new(), Vec::new()),
        _ => return Err(PyValueError::new_err("labels, upper and lower must be given together")),
    };
    let c = centers.as_slice().map_err(|_| PyValueError::new_err("centers must be C-contiguous"))?;
    let (dr, hs) = (slice1(&drift, "drift")?, slice1(&half_sep, "half_sep")?);
    dispatch!(FloatMatrix::new(x, "X block")?, |a| lloyd_typed(py, a, w, state, c, dr, hs, fresh))
}

type HartiganOut<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<u8>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<f64>>,
    (f64, u32, u32, u32, f64),
);

/// One round of the blocked Hartigan on one block; returns (labels, prop_to, prop_bucket, flat
/// totals, class keys, class values, best single move with its row's weight). `sample_weight`: the
/// block's weights (None: ones).
#[pyfunction]
#[pyo3(signature = (x, labels, prop_to, prop_bucket, accepted, single, centers, sizes, scale, n_buckets, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
fn kmeans_block_hartigan<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    labels: PyReadonlyArray1<'py, u32>,
    prop_to: PyReadonlyArray1<'py, i32>,
    prop_bucket: PyReadonlyArray1<'py, u8>,
    accepted: PyReadonlyArray1<'py, u64>,
    single: i64,
    centers: PyReadonlyArray2<'py, f64>,
    sizes: PyReadonlyArray1<'py, f64>,
    scale: f64,
    n_buckets: u32,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<HartiganOut<'py>> {
    let w = weights(&sample_weight)?;
    let (mut lab, mut pt, mut pb) =
        (vec1(&labels, "labels")?, vec1(&prop_to, "prop_to")?, vec1(&prop_bucket, "prop_bucket")?);
    let acc = slice1(&accepted, "accepted")?;
    let c = centers.as_slice().map_err(|_| PyValueError::new_err("centers must be C-contiguous"))?;
    let s = slice1(&sizes, "sizes")?;
    let out = dispatch!(FloatMatrix::new(x, "X block")?, |a| {
        let (xs, n, d) = slice2(&a, "X block")?;
        py.detach(|| {
            blocks::hartigan_block(xs, n, d, w, &mut lab, &mut pt, &mut pb, acc, single, c, s, scale, n_buckets)
        })
        .py()?
    });
    Ok((
        lab.into_pyarray(py),
        pt.into_pyarray(py),
        pb.into_pyarray(py),
        out.flat.into_pyarray(py),
        out.keys.into_pyarray(py),
        out.values.into_pyarray(py),
        out.best,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_block_kpar_update, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_block_kpar_sample, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_block_lloyd, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_block_hartigan, m)?)?;
    Ok(())
}
