//! Map the core's `ThriftyError` to Python exceptions. Messages already name the argument.
use pyo3::exceptions::{PyArithmeticError, PyTypeError, PyValueError};
use pyo3::PyErr;
use thrifty_core::ThriftyError;

pub fn to_py(err: ThriftyError) -> PyErr {
    let msg = err.to_string();
    match err {
        ThriftyError::Type { .. } => PyTypeError::new_err(msg),
        ThriftyError::Numerical { .. } => PyArithmeticError::new_err(msg),
        ThriftyError::InvalidArgument { .. } | ThriftyError::Shape { .. } | ThriftyError::NotFinite { .. } => {
            PyValueError::new_err(msg)
        }
    }
}

/// `?`-friendly conversion: `core_call().map_err(to_py)?` reads as `core_call().py()?`.
pub trait IntoPy<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for thrifty_core::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
