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

/// `core_call().py()?` converts a core error into the matching Python exception.
pub trait CoreResultExt<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> CoreResultExt<T> for thrifty_core::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
