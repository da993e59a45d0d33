//! Bindings for the `dpp` capability (filled in with the capability).
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
