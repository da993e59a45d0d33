//! `thrifty._core`: PyO3 bindings only — argument conversion, GIL release, error mapping.
//! Each capability registers its functions from its own file; no numerical logic lives here.
use pyo3::prelude::*;

mod arrays;
mod dpp;
mod dpp_blocks;
mod errors;
mod inference;
mod inference_blocks;
mod inference_extra;
mod kmeans;
mod kmeans_blocks;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    kmeans::register(m)?;
    kmeans_blocks::register(m)?;
    inference::register(m)?;
    inference_blocks::register(m)?;
    inference_extra::register(m)?;
    dpp::register(m)?;
    dpp_blocks::register(m)?;
    Ok(())
}
