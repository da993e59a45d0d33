//! `n_jobs` → a scoped rayon pool. `None` uses the global pool (all cores); `Some(n)` runs the
//! closure inside a pool of exactly `n` threads. Results never depend on the thread count: every
//! parallel reduction in the core works over fixed-size blocks combined in a fixed order.
use crate::error::{Result, ThriftyError};

pub fn with_threads<R: Send>(n_jobs: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    match n_jobs {
        None => Ok(f()),
        Some(0) => Err(ThriftyError::invalid("n_jobs", "must be at least 1")),
        Some(n) => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| ThriftyError::numerical("thread pool", e.to_string()))?;
            Ok(pool.install(f))
        }
    }
}
