//! Map the core's `ThriftyError` to Python exceptions. Messages already name the argument.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

use pyo3::exceptions::{
    PyArithmeticError, PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::PyErr;
use thrifty_core::ThriftyError;

pub fn to_py(err: ThriftyError) -> PyErr {
    let msg = err.to_string();
    match err {
        ThriftyError::Type { .. } => PyTypeError::new_err(msg),
        ThriftyError::Numerical { .. } => PyArithmeticError::new_err(msg),
        ThriftyError::Interrupted => PyKeyboardInterrupt::new_err(msg),
        ThriftyError::OutOfMemory { .. } => PyMemoryError::new_err(msg),
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

/// Run `work` without the GIL on a worker of rayon's global pool while this (Python's main) thread
/// polls for signals every 100 ms: on Ctrl-C the `cancel` flag is raised, the core stops at its next
/// check and the KeyboardInterrupt propagates. The pool's threads are already running, so a small
/// call pays no thread start (a fresh OS thread per call cost small calls 2–3× their wall time
/// under load). When the pool cannot be started (thread limits, an address-space limit) the error
/// says so instead of a panic.
pub fn detach_interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&AtomicBool) -> thrifty_core::Result<T> + Send,
) -> PyResult<T> {
    thrifty_core::threads::global_pool().py()?;
    let cancel = AtomicBool::new(false);
    let (tx, rx) = channel();
    rayon::in_place_scope(|scope| {
        let cancel = &cancel;
        scope.spawn(move |_| {
            let _ = tx.send(work(cancel));
        });
        let mut rx = rx;
        loop {
            // The receiver moves into the GIL-free closure and back (it is Send, not Sync).
            let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(100)), rx));
            rx = back;
            match got {
                Ok(result) => return result.py(),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        cancel.store(true, Ordering::Relaxed);
                        let _ = py.detach(move || rx.recv());
                        return Err(signal);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err("the worker thread stopped without a result"))
                }
            }
        }
    })
}

/// The one way into the core for long calls: [`detach_interruptible`] (GIL released, Ctrl-C raises
/// the core's cancel flag) inside a pool of `n_jobs` threads, capped at the machine's CPU count
/// (more threads than cores only slow the core down; `n_jobs = 0` is an error), with core errors
/// mapped to Python's.
pub fn enter<T: Send>(
    py: Python<'_>,
    n_jobs: Option<usize>,
    work: impl FnOnce(&AtomicBool) -> thrifty_core::Result<T> + Send,
) -> PyResult<T> {
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    // 0 is not raised to 1: `with_threads` refuses it (ValueError naming n_jobs)
    let n_jobs = n_jobs.map(|n| n.min(cpus));
    detach_interruptible(py, |cancel| thrifty_core::threads::with_threads(n_jobs, || work(cancel)).and_then(|r| r))
}
