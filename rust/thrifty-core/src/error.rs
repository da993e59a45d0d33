//! The one error type of the core. Every problem caused by user input is an `Err`, never a panic; the
//! Python binding maps `InvalidArgument`/`Shape`/`NotFinite` to `ValueError`, `Type` to `TypeError`
//! `Numerical` to `ArithmeticError`, `Interrupted` to `KeyboardInterrupt` and `OutOfMemory` to
//! `MemoryError` (see `thrifty-py/src/errors.rs`).
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ThriftyError {
    /// A parameter is out of range or inconsistent with another one. `arg` names the parameter.
    #[error("{arg}: {msg}")]
    InvalidArgument { arg: &'static str, msg: String },
    /// An array has the wrong shape (or is empty).
    #[error("{arg}: {msg}")]
    Shape { arg: &'static str, msg: String },
    /// An array holds NaN or infinity.
    #[error("{arg} contains NaN or infinity")]
    NotFinite { arg: &'static str },
    /// Wrong kind of value (e.g. a dtype the core does not handle).
    #[error("{arg}: {msg}")]
    Type { arg: &'static str, msg: String },
    /// The caller asked the computation to stop (Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,
    /// The computation broke down numerically (singular system, rank loss) despite valid input.
    #[error("numerical failure in {context}: {msg}")]
    Numerical { context: &'static str, msg: String },
    /// A buffer whose size follows the input could not be allocated (the allocator refused it, or it
    /// exceeds what the machine can give), or worker threads could not be started. `what` names the
    /// buffer, `detail` gives its size.
    #[error("cannot allocate {what}: {detail}")]
    OutOfMemory { what: &'static str, detail: String },
}

pub type Result<T> = std::result::Result<T, ThriftyError>;

impl ThriftyError {
    pub fn invalid(arg: &'static str, msg: impl Into<String>) -> Self {
        ThriftyError::InvalidArgument { arg, msg: msg.into() }
    }
    pub fn shape(arg: &'static str, msg: impl Into<String>) -> Self {
        ThriftyError::Shape { arg, msg: msg.into() }
    }
    pub fn numerical(context: &'static str, msg: impl Into<String>) -> Self {
        ThriftyError::Numerical { context, msg: msg.into() }
    }
}

/// `Err(NotFinite)` unless every value is finite.
pub fn ensure_finite<T: Copy + Into<f64>>(arg: &'static str, values: &[T]) -> Result<()> {
    if values.iter().all(|&v| v.into().is_finite()) {
        Ok(())
    } else {
        Err(ThriftyError::NotFinite { arg })
    }
}

/// `Err(Shape)` unless `values.len() == rows * cols` and the matrix is non-empty.
pub fn ensure_matrix<T>(arg: &'static str, values: &[T], rows: usize, cols: usize) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(ThriftyError::shape(arg, format!("must be non-empty, got shape ({rows}, {cols})")));
    }
    if values.len() != rows * cols {
        return Err(ThriftyError::shape(
            arg,
            format!("buffer of length {} does not hold a ({rows}, {cols}) matrix", values.len()),
        ));
    }
    Ok(())
}
