//! Bindings for the inference additions (sparse PLS1, the two-block PLS-SVD test, the CV choice of
//! the number of components, the rotation-stability study): argument conversion, GIL release and
//! error mapping only. The Python layer (`thrifty.inference._spls`, `_plssvd`, `_select`,
//! `_stability`) validates first and passes C-contiguous float64 arrays.
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::arrays::{matrix, slice2};
use crate::errors::enter;
use crate::inference::{train_lists, Xy};
use thrifty_core::inference::{intervals, plssvd, select, spls, stability};
use thrifty_core::ThriftyError;

type F64s<'py> = Bound<'py, PyArray1<f64>>;
type F64Matrix<'py> = Bound<'py, PyArray2<f64>>;

/// `inference_spls_fit` (`SplsFitDict`).
#[derive(IntoPyObject)]
struct SplsFit<'py> {
    weights: F64Matrix<'py>,
    rotations: F64Matrix<'py>,
    coef: F64s<'py>,
    intercept: f64,
    keep: usize,
}

/// `inference_plssvd_fit` (`PlsSvdFitDict`).
#[derive(IntoPyObject)]
struct PlsSvdFit<'py> {
    x_weights: F64Matrix<'py>,
    y_weights: F64Matrix<'py>,
    singular_values: F64s<'py>,
    x_mean: F64s<'py>,
    x_std: F64s<'py>,
    y_mean: F64s<'py>,
    y_std: F64s<'py>,
}

/// `inference_cv_curve` (`CvCurveDict`).
#[derive(IntoPyObject)]
struct CvCurve<'py> {
    scores: F64Matrix<'py>,
    mean: F64s<'py>,
    se: F64s<'py>,
    choice_max: Option<usize>,
    choice_one_se: Option<usize>,
}

/// `inference_rotation_stability` (`StabilityDict`).
#[derive(IntoPyObject)]
struct Stability<'py> {
    rotated: F64Matrix<'py>,
    unrotated: F64Matrix<'py>,
    axes: F64Matrix<'py>,
    weights: F64Matrix<'py>,
}

/// Sparse PLS1 on all rows (`keep = 0`: the cross-validated keep-count).
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components, keep))]
fn inference_spls_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
    keep: usize,
) -> PyResult<SplsFit<'py>> {
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let p = slice2(&x, "X")?.2;
    let f = enter(py, None, |_| spls::spls_fit(&xy.data()?, n_components, keep))?;
    Ok(SplsFit {
        weights: matrix(py, f.weights, p, n_components)?,
        rotations: matrix(py, f.rotations, p, n_components)?,
        coef: f.coef.into_pyarray(py),
        intercept: f.intercept,
        keep: f.keep,
    })
}

/// X and Y as row-major slices with n, p and q.
type BlockSlices<'a> = (&'a [f64], &'a [f64], usize, usize, usize);

fn blocks<'a>(x: &'a PyReadonlyArray2<'_, f64>, y: &'a PyReadonlyArray2<'_, f64>) -> PyResult<BlockSlices<'a>> {
    let (xs, n, p) = slice2(x, "X")?;
    let (ys, ny, q) = slice2(y, "Y")?;
    if ny != n {
        return Err(crate::errors::to_py(ThriftyError::shape("Y", format!("has {ny} rows, but X has {n}"))));
    }
    Ok((xs, ys, n, p, q))
}

/// Held-out latent correlation of the PLS-SVD pair on every split.
#[pyfunction]
#[pyo3(signature = (x, y, train, n_jobs=None))]
fn inference_plssvd_split_correlations<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    train: Vec<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<usize>,
) -> PyResult<F64s<'py>> {
    let (xs, ys, n, p, q) = blocks(&x, &y)?;
    let trains = train_lists(train)?;
    let r = enter(py, n_jobs, |cancel| {
        let bl = plssvd::Blocks::new(xs, ys, n, p, q)?;
        let splits = thrifty_core::inference::splits::splits_from_train(n, 1, &trains)?;
        plssvd::split_correlations(&bl, &splits, cancel)
    })?;
    Ok(r.into_pyarray(py))
}

/// Mean Fisher z of the PLS-SVD test for the row permutations `start .. start + count` of Y.
#[pyfunction]
#[pyo3(signature = (x, y, train, seed, start, count, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_plssvd_permutation<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    train: Vec<PyReadonlyArray1<'py, i64>>,
    seed: u64,
    start: u64,
    count: usize,
    n_jobs: Option<usize>,
) -> PyResult<F64s<'py>> {
    let (xs, ys, n, p, q) = blocks(&x, &y)?;
    let trains = train_lists(train)?;
    let z = enter(py, n_jobs, |cancel| {
        let bl = plssvd::Blocks::new(xs, ys, n, p, q)?;
        let splits = thrifty_core::inference::splits::splits_from_train(n, 1, &trains)?;
        plssvd::permutation_null(&bl, &splits, seed, start, count, cancel)
    })?;
    Ok(z.into_pyarray(py))
}

/// PLS-SVD on all rows: both blocks' weights and the latent covariances.
#[pyfunction]
#[pyo3(signature = (x, y, n_components))]
fn inference_plssvd_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    n_components: usize,
) -> PyResult<PlsSvdFit<'py>> {
    let (xs, ys, n, p, q) = blocks(&x, &y)?;
    let f = enter(py, None, |_| plssvd::fit(&plssvd::Blocks::new(xs, ys, n, p, q)?, n_components))?;
    Ok(PlsSvdFit {
        x_weights: matrix(py, f.x_weights, p, n_components)?,
        y_weights: matrix(py, f.y_weights, q, n_components)?,
        singular_values: f.singular_values.into_pyarray(py),
        x_mean: f.x_mean.into_pyarray(py),
        x_std: f.x_std.into_pyarray(py),
        y_mean: f.y_mean.into_pyarray(py),
        y_std: f.y_std.into_pyarray(py),
    })
}

/// K-fold CV R² of 1..=k_max (sparse) PLS1 components and the choice of each rule.
#[pyfunction]
#[pyo3(signature = (x, y, k_max, keep, n_folds, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_cv_curve<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    k_max: usize,
    keep: usize,
    n_folds: usize,
    seed: u64,
    n_jobs: Option<usize>,
) -> PyResult<CvCurve<'py>> {
    let xy = Xy::new(&x, &y, &None)?;
    let c = enter(py, n_jobs, |cancel| select::cv_curve(&xy.data()?, k_max, keep, n_folds, seed, cancel))?;
    let (max, one_se) = (c.choose(select::Rule::Max), c.choose(select::Rule::OneSe));
    let flat: Vec<f64> = c.scores.iter().flat_map(|s| s.iter().copied()).collect();
    Ok(CvCurve {
        scores: matrix(py, flat, k_max, n_folds)?,
        mean: c.mean.into_pyarray(py),
        se: c.se.into_pyarray(py),
        choice_max: max,
        choice_one_se: one_se,
    })
}

/// Resample congruences of the varimax axes (and of the unrotated weights) of a k-component PLS1 fit:
/// bootstrap (n rows with replacement) when `subsample_m` is None, else m-out-of-n subsamples.
#[pyfunction]
#[pyo3(signature = (x, y, n_components, n_boot, seed, n_jobs=None, subsample_m=None))]
#[allow(clippy::too_many_arguments)]
fn inference_rotation_stability<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    n_components: usize,
    n_boot: usize,
    seed: u64,
    n_jobs: Option<usize>,
    subsample_m: Option<usize>,
) -> PyResult<Stability<'py>> {
    let xy = Xy::new(&x, &y, &None)?;
    let p = slice2(&x, "X")?.2;
    let resample = match subsample_m {
        None => stability::Resample::Bootstrap,
        Some(m) => stability::Resample::Subsample { m },
    };
    let s = enter(py, n_jobs, |cancel| {
        stability::rotation_stability(&xy.data()?, n_components, n_boot, resample, seed, cancel)
    })?;
    Ok(Stability {
        rotated: matrix(py, s.rotated, n_boot, n_components)?,
        unrotated: matrix(py, s.unrotated, n_boot, n_components)?,
        axes: matrix(py, s.axes, p, n_components)?,
        weights: matrix(py, s.weights, p, n_components)?,
    })
}

/// `inference_subsample_replicates` (`ReplicatesDict`).
#[derive(IntoPyObject)]
struct Replicates<'py> {
    coef: F64s<'py>,
    leverage: F64s<'py>,
    coef_sub: F64Matrix<'py>,
    leverage_sub: F64Matrix<'py>,
}

/// m-out-of-n subsample replicates of PLS1's coefficients and per-variable leverage.
#[pyfunction]
#[pyo3(signature = (x, y, sample_weight, n_components, n_sub, m, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
fn inference_subsample_replicates<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_components: usize,
    n_sub: usize,
    m: usize,
    seed: u64,
    n_jobs: Option<usize>,
) -> PyResult<Replicates<'py>> {
    let xy = Xy::new(&x, &y, &sample_weight)?;
    let p = slice2(&x, "X")?.2;
    let r =
        enter(py, n_jobs, |cancel| intervals::subsample_replicates(&xy.data()?, n_components, n_sub, m, seed, cancel))?;
    Ok(Replicates {
        coef: r.coef.into_pyarray(py),
        leverage: r.leverage.into_pyarray(py),
        coef_sub: matrix(py, r.coef_sub, n_sub, p)?,
        leverage_sub: matrix(py, r.leverage_sub, n_sub, p)?,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(inference_spls_fit, m)?)?;
    m.add_function(wrap_pyfunction!(inference_plssvd_split_correlations, m)?)?;
    m.add_function(wrap_pyfunction!(inference_plssvd_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(inference_plssvd_fit, m)?)?;
    m.add_function(wrap_pyfunction!(inference_cv_curve, m)?)?;
    m.add_function(wrap_pyfunction!(inference_rotation_stability, m)?)?;
    m.add_function(wrap_pyfunction!(inference_subsample_replicates, m)?)?;
    Ok(())
}
