//! Array arguments shared by the capability bindings: NumPy arrays borrowed read-only as slices (no
//! copy), [`FloatMatrix`] (the one float32/float64 dispatch, with [`with_matrix!`]) and row-major
//! vectors handed back as 2-D arrays.
use numpy::{
    Element, IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A 2-D float array in either precision, borrowed read-only.
pub enum FloatMatrix<'py> {
    F64(PyReadonlyArray2<'py, f64>),
    F32(PyReadonlyArray2<'py, f32>),
}

impl<'py> FloatMatrix<'py> {
    pub fn new(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
        if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f64>>() {
            Ok(FloatMatrix::F64(a))
        } else if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f32>>() {
            Ok(FloatMatrix::F32(a))
        } else {
            Err(PyTypeError::new_err(format!("{name} must be a 2-D float32 or float64 array")))
        }
    }
}

/// `with_matrix!(m, "name", |s, rows, cols| body)`: `body` once per precision, `s` the typed slice.
macro_rules! with_matrix {
    ($m:expr, $name:expr, |$s:ident, $r:ident, $c:ident| $body:expr) => {
        match &$m {
            $crate::arrays::FloatMatrix::F64(a) => {
                let ($s, $r, $c) = $crate::arrays::slice2(a, $name)?;
                $body
            }
            $crate::arrays::FloatMatrix::F32(a) => {
                let ($s, $r, $c) = $crate::arrays::slice2(a, $name)?;
                $body
            }
        }
    };
}
pub(crate) use with_matrix;

/// The row-major values of a C-contiguous 2-D array and its shape.
pub fn slice2<'a, T: Element>(a: &'a PyReadonlyArray2<'_, T>, name: &str) -> PyResult<(&'a [T], usize, usize)> {
    let (r, c) = (a.shape()[0], a.shape()[1]);
    let s = a.as_slice().map_err(|_| {
        PyValueError::new_err(format!("{name} must be C-contiguous and aligned (np.require(a, requirements=\"CA\"))"))
    })?;
    Ok((s, r, c))
}

/// The values of a contiguous 1-D array.
pub fn slice1<'a, T: Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| {
        PyValueError::new_err(format!("{name} must be contiguous and aligned (np.require(a, requirements=\"CA\"))"))
    })
}

/// [`slice1`] of an optional array.
pub fn opt_slice1<'a, T: Element>(a: &'a Option<PyReadonlyArray1<'_, T>>, name: &str) -> PyResult<Option<&'a [T]>> {
    a.as_ref().map(|w| slice1(w, name)).transpose()
}

/// A row-major `rows × cols` vector as a 2-D NumPy array (no copy).
pub fn matrix<T: Element>(py: Python<'_>, v: Vec<T>, rows: usize, cols: usize) -> PyResult<Bound<'_, PyArray2<T>>> {
    v.into_pyarray(py).reshape([rows, cols])
}
