//! `n_jobs` → a rayon pool. `None` uses the global pool (all cores); `Some(n)` runs the closure
//! inside a pool of exactly `n` threads. Pools are built once per size and kept: building one spawns
//! its threads, which costs milliseconds — more than a small fit. Results never depend on the
//! thread count: every parallel reduction in the core works over fixed-size blocks combined in a
//! fixed order.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Result, ThriftyError};

fn pool(n: usize) -> Result<Arc<rayon::ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("thrifty-{n}-{i}"))
            .build()
            .map_err(|e| ThriftyError::numerical("thread pool", e.to_string()))?,
    );
    pools.insert(n, p.clone());
    Ok(p)
}

pub fn with_threads<R: Send>(n_jobs: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    match n_jobs {
        None => Ok(f()),
        Some(0) => Err(ThriftyError::invalid("n_jobs", "must be at least 1")),
        Some(n) if n > 4096 => Err(ThriftyError::invalid("n_jobs", format!("must be at most 4096, got {n}"))),
        Some(n) => Ok(pool(n)?.install(f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_have_the_requested_size_and_are_reused() {
        assert_eq!(with_threads(Some(3), rayon::current_num_threads).unwrap(), 3);
        assert!(Arc::ptr_eq(&pool(3).unwrap(), &pool(3).unwrap()));
        assert!(with_threads(Some(0), || ()).is_err());
    }
}
