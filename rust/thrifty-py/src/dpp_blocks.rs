//! Bindings for the block-wise DPP pieces that the distributed (Dask) path runs on workers and on
//! the driver: TSQR nodes of a chunk, the tree reduction, the whitening, basis rows and leverages
//! of a chunk, the inverse-CDF lookup inside blocks, the proposal pairs and the sampler on fetched
//! rows. Conversion and error mapping only; the numerics are in `thrifty_core::dpp::{tsqr, remote}`.
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use thrifty_core::dpp::{ortho, remote, tsqr};

use crate::arrays::{slice2, with_matrix, FloatMatrix};
use crate::errors::{enter, CoreResultExt};

fn weights(w: &Option<PyReadonlyArray2<'_, f64>>, p: usize) -> PyResult<Option<(Vec<f64>, usize)>> {
    match w {
        None => Ok(None),
        Some(a) => {
            let (s, rows, r) = slice2(a, "W")?;
            if rows != p {
                return Err(PyValueError::new_err(format!("W must have {p} rows, got {rows}")));
            }
            Ok(Some((s.to_vec(), r)))
        }
    }
}

type Nodes<'py> = Vec<(usize, usize, Bound<'py, PyArray2<f64>>)>;

/// The maximal TSQR nodes (height, index, R) inside a block-aligned chunk of rows.
#[pyfunction]
#[pyo3(signature = (x, first_row, n_total, w=None))]
fn dpp_tsqr_chunk<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    first_row: usize,
    n_total: usize,
    w: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<Nodes<'py>> {
    let m = FloatMatrix::new(x, "x")?;
    let nodes = with_matrix!(m, "x", |s, n, p| {
        let wv = weights(&w, p)?;
        enter(py, None, |c| {
            tsqr::chunk_nodes(s, n, p, first_row, n_total, wv.as_ref().map(|(w, r)| (w.as_slice(), *r)), c)
        })?
    });
    nodes
        .into_iter()
        .map(|(h, k, r)| {
            let q = (r.len() as f64).sqrt() as usize;
            Ok((h, k, r.into_pyarray(py).reshape([q, q])?))
        })
        .collect()
}

/// The root R of the tree from nodes covering every logical block.
#[pyfunction]
fn dpp_tsqr_reduce<'py>(
    py: Python<'py>,
    nodes: Vec<(usize, usize, PyReadonlyArray2<'py, f64>)>,
    n_total: usize,
    p: usize,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let owned: Vec<tsqr::Node> =
        nodes.iter().map(|(h, k, r)| Ok((*h, *k, slice2(r, "R")?.0.to_vec()))).collect::<PyResult<_>>()?;
    let root = enter(py, None, |_| tsqr::reduce_nodes(owned, n_total, p))?;
    root.into_pyarray(py).reshape([p, p])
}

/// `(W, rank, kappa)` from a root R (see `tsqr::whiten`).
#[pyfunction]
fn dpp_tsqr_whiten<'py>(
    py: Python<'py>,
    r: PyReadonlyArray2<'py, f64>,
    rtol: f64,
    equilibrate: bool,
) -> PyResult<(Bound<'py, PyArray2<f64>>, usize, f64)> {
    let (s, p, _) = slice2(&r, "R")?;
    let (w, rank, kappa) = tsqr::whiten(s, p, rtol, equilibrate).py()?;
    Ok((w.into_pyarray(py).reshape([p, rank])?, rank, kappa))
}

/// `R₂⁻¹` after the second pass (the second stage of the whitening).
#[pyfunction]
fn dpp_tsqr_refine<'py>(py: Python<'py>, r2: PyReadonlyArray2<'py, f64>) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (s, r, _) = slice2(&r2, "R")?;
    tsqr::refine(s, r).py()?.into_pyarray(py).reshape([r, r])
}

fn whitening(w: &PyReadonlyArray2<'_, f64>, w2: &Option<PyReadonlyArray2<'_, f64>>) -> PyResult<tsqr::Whitening> {
    let (w1, p, r) = slice2(w, "W")?;
    let second = match w2 {
        None => None,
        Some(a) => {
            let (s, rows, cols) = slice2(a, "W2")?;
            if rows != r || cols != r {
                return Err(PyValueError::new_err(format!("W2 must be {r}×{r}")));
            }
            Some(s.to_vec())
        }
    };
    Ok(tsqr::Whitening { w1: w1.to_vec(), w2: second, p, r })
}

fn basis_of<T: thrifty_core::scalar::Real>(s: &[T], n: usize, wh: &tsqr::Whitening) -> thrifty_core::Result<Vec<T>> {
    let mut y: Vec<f64> = thrifty_core::alloc::try_zeroed("the basis rows (rows × rank)", n.saturating_mul(wh.r))?;
    wh.apply(s, n, &mut y);
    Ok(y.into_iter().map(T::of).collect())
}

/// Rows of the orthonormal basis for these rows of X, in the dtype of `x`.
#[pyfunction]
#[pyo3(signature = (x, w, w2=None))]
fn dpp_basis_rows<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    w: PyReadonlyArray2<'py, f64>,
    w2: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = FloatMatrix::new(x, "x")?;
    let wh = whitening(&w, &w2)?;
    with_matrix!(m, "x", |s, n, c| {
        if c != wh.p {
            return Err(PyValueError::new_err(format!("x must have {} columns, got {c}", wh.p)));
        }
        let out = py.detach(|| basis_of(s, n, &wh)).py()?;
        Ok(out.into_pyarray(py).reshape([n, wh.r])?.into_any())
    })
}

#[derive(IntoPyObject)]
struct ChunkLeverage<'py> {
    leverage: Bound<'py, PyArray1<f64>>,
    totals: Bound<'py, PyArray1<f64>>,
    last: i64,
}

/// Leverage scores of the basis rows of a chunk, their per-block totals and the last positive row.
#[pyfunction]
#[pyo3(signature = (x, w, w2=None))]
fn dpp_chunk_leverage<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    w: PyReadonlyArray2<'py, f64>,
    w2: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<ChunkLeverage<'py>> {
    let m = FloatMatrix::new(x, "x")?;
    let wh = whitening(&w, &w2)?;
    let lev = with_matrix!(m, "x", |s, n, c| {
        if c != wh.p {
            return Err(PyValueError::new_err(format!("x must have {} columns, got {c}", wh.p)));
        }
        py.detach(|| {
            let u = basis_of(s, n, &wh)?;
            ortho::leverage(&u, n, wh.r)
        })
        .py()
    })?;
    if lev.iter().any(|l| !l.is_finite()) {
        return Err(PyValueError::new_err("x contains NaN or infinity"));
    }
    let (totals, last) = tsqr::block_totals(&lev);
    Ok(ChunkLeverage {
        leverage: lev.into_pyarray(py),
        totals: totals.into_pyarray(py),
        last: last.map_or(-1, |l| l as i64),
    })
}

/// For each target, the first row i of its block (`blocks`, chunk-local block numbers) with
/// `starts + c_i > target`, as an index into the chunk (-1 when none).
#[pyfunction]
fn dpp_locate<'py>(
    py: Python<'py>,
    leverage: PyReadonlyArray1<'py, f64>,
    blocks: PyReadonlyArray1<'py, i64>,
    starts: PyReadonlyArray1<'py, f64>,
    targets: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let lev = leverage.as_slice()?;
    let (b, s, t) = (blocks.as_slice()?, starts.as_slice()?, targets.as_slice()?);
    if b.len() != s.len() || b.len() != t.len() {
        return Err(PyValueError::new_err("blocks, starts and targets must have the same length"));
    }
    let mut out = Vec::with_capacity(t.len());
    for k in 0..t.len() {
        let lo = usize::try_from(b[k]).map_err(|_| PyValueError::new_err("negative block"))? * tsqr::LEAF_ROWS;
        if lo >= lev.len() {
            return Err(PyValueError::new_err("block outside the chunk"));
        }
        let hi = (lo + tsqr::LEAF_ROWS).min(lev.len());
        let got = tsqr::locate_in_block(&lev[lo..hi], s[k], &[t[k]])[0];
        out.push(got.map_or(-1, |i| (lo + i) as i64));
    }
    Ok(out.into_pyarray(py))
}

/// Targets and acceptance uniforms, as two arrays.
type ArrayPair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// The first `count` (target, uniform) proposal pairs of sample `task` of the family `seed`.
#[pyfunction]
fn dpp_proposal_pairs<'py>(
    py: Python<'py>,
    seed: u64,
    task: u64,
    count: usize,
    total: f64,
) -> PyResult<ArrayPair<'py>> {
    let (t, u) = remote::proposal_pairs(seed, task, count, total).py()?;
    Ok((t.into_pyarray(py), u.into_pyarray(py)))
}

/// One sample from fetched basis rows (`rows` nc×r in float32/float64) and the proposals as compact
/// indices `items` with uniforms `us`; None when the proposals ran out.
#[pyfunction]
fn dpp_sample_fetched<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
    items: PyReadonlyArray1<'py, i64>,
    us: PyReadonlyArray1<'py, f64>,
) -> PyResult<Option<Bound<'py, PyArray1<i64>>>> {
    let m = FloatMatrix::new(rows, "rows")?;
    let it: Vec<usize> = items.as_slice()?.iter().map(|&i| i.max(0) as usize).collect();
    let u = us.as_slice()?;
    let got = with_matrix!(m, "rows", |s, nc, r| {
        enter(py, None, |c| {
            let lev = ortho::leverage(s, nc, r)?;
            remote::sample_from_rows(s, nc, r, &lev, &it, u, c)
        })?
    });
    Ok(got.map(|v| v.into_iter().map(|i| i as i64).collect::<Vec<_>>().into_pyarray(py)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("DPP_LEAF_ROWS", tsqr::LEAF_ROWS)?;
    m.add("DPP_ONE_PASS_KAPPA", tsqr::ONE_PASS_KAPPA)?;
    m.add_function(wrap_pyfunction!(dpp_tsqr_chunk, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_tsqr_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_tsqr_whiten, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_tsqr_refine, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_basis_rows, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_chunk_leverage, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_locate, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_proposal_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(dpp_sample_fetched, m)?)?;
    Ok(())
}
