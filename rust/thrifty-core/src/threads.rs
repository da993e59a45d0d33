//! `n_jobs` → a rayon pool. `None` uses the global pool (all cores); `Some(n)` runs the closure
//! inside a pool of exactly `n` threads. Pools are built once per size and kept: building one spawns
//! its threads, which costs milliseconds — more than a small fit. Results never depend on the
//! thread count: every parallel reduction in the core works over fixed-size blocks combined in a
//! fixed order.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Result, ThriftyError};

/// A pool of `n` threads and whether each of its threads has its matrix-product workspace.
type Pool = (Arc<rayon::ThreadPool>, Arc<AtomicBool>);

fn pool(n: usize) -> Result<Pool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Pool>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("thrifty-{n}-{i}"))
            .build()
            .map_err(threads_failed)?,
    );
    pools.insert(n, (p.clone(), Arc::new(AtomicBool::new(false))));
    Ok((p, pools[&n].1.clone()))
}

/// Every thread of a pool makes its matrix-product workspace once ([`crate::alloc::ensure_gemm_workspace`]):
/// a thread's first product would otherwise allocate it infallibly, an abort under a memory limit.
/// Not marked done after a failure, so a later call tries again.
fn warm(ready: &AtomicBool, broadcast: impl FnOnce() -> Vec<Result<()>>) -> Result<()> {
    if ready.load(Ordering::Acquire) {
        return Ok(());
    }
    broadcast().into_iter().collect::<Result<()>>()?;
    ready.store(true, Ordering::Release);
    Ok(())
}

/// Start rayon's global pool (all cores) if it is not running yet, as an error instead of rayon's
/// panic when its threads cannot be spawned. rayon tries only once: after a failure every later
/// call gets the same error.
static STARTED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// The threads rayon would use from here — the current pool's, or the global pool's once
/// [`global_pool`] started it — without starting the global pool (rayon panics when it cannot):
/// 1 outside any pool before that.
pub fn available_threads() -> usize {
    if rayon::current_thread_index().is_some() || matches!(STARTED.get(), Some(Ok(()))) {
        rayon::current_num_threads()
    } else {
        1
    }
}

pub fn global_pool() -> Result<()> {
    let started = STARTED.get_or_init(|| match rayon::ThreadPoolBuilder::new().build_global() {
        Ok(()) => Ok(()),
        // Someone else (a test harness, another library) started it first: it is running.
        Err(e) if e.to_string().contains("already") => Ok(()),
        Err(e) => Err(e.to_string()),
    });
    started.clone().map_err(threads_failed)?;
    static READY: AtomicBool = AtomicBool::new(false);
    warm(&READY, || rayon::broadcast(|_| crate::alloc::ensure_gemm_workspace()))
}

fn threads_failed(e: impl std::fmt::Display) -> ThriftyError {
    ThriftyError::OutOfMemory { what: "the worker threads", detail: format!("they could not be started ({e})") }
}

pub fn with_threads<R: Send>(n_jobs: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R> {
    match n_jobs {
        None => {
            // the calling thread and the global pool's threads run the work
            crate::alloc::ensure_gemm_workspace()?;
            global_pool()?;
            Ok(f())
        }
        Some(0) => Err(ThriftyError::invalid("n_jobs", "must be at least 1")),
        Some(n) if n > 4096 => Err(ThriftyError::invalid("n_jobs", format!("must be at most 4096, got {n}"))),
        Some(n) => {
            let (pool, ready) = pool(n)?;
            warm(&ready, || pool.broadcast(|_| crate::alloc::ensure_gemm_workspace()))?;
            Ok(pool.install(f))
        }
    }
}

/// Run the uninterruptible `job` on a helper thread while the calling thread watches `cancel` (every
/// 20 ms): its result, or `Err(Interrupted)` as soon as `cancel` is raised — the helper then finishes
/// on its own and drops what it owns. The job's rayon work runs in the global pool. When no thread
/// can be started (an address-space limit), the job runs on the calling thread.
pub fn watch<R: Send + 'static>(job: impl FnOnce() -> Result<R> + Send + 'static, cancel: &AtomicBool) -> Result<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    let slot = Arc::new(Mutex::new(Some(job)));
    let helper_slot = slot.clone();
    let spawned = std::thread::Builder::new().name("thrifty-watch".into()).spawn(move || {
        let job = helper_slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(job) = job {
            let _ = tx.send(crate::alloc::ensure_gemm_workspace().and_then(|()| job()));
        }
    });
    if spawned.is_err() {
        let job = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        return job.map_or(Err(ThriftyError::Interrupted), |job| job());
    }
    loop {
        // A pool worker that waits runs the pool's pending jobs meanwhile (the helper's parallel
        // work may be among them: in a one-thread pool nobody else would run it).
        let waited = match rayon::yield_now() {
            Some(rayon::Yield::Executed) => rx.try_recv().map_err(|e| match e {
                std::sync::mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                std::sync::mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            }),
            _ => rx.recv_timeout(std::time::Duration::from_millis(20)),
        };
        match waited {
            Ok(result) => return result,
            Err(RecvTimeoutError::Timeout) if cancel.load(Ordering::Relaxed) => return Err(ThriftyError::Interrupted),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ThriftyError::numerical("helper thread", "stopped without a result"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_have_the_requested_size_and_are_reused() {
        assert_eq!(with_threads(Some(3), rayon::current_num_threads).unwrap(), 3);
        assert!(Arc::ptr_eq(&pool(3).unwrap().0, &pool(3).unwrap().0));
        assert!(pool(3).unwrap().1.load(Ordering::Acquire), "its threads made their product workspace");
        assert!(with_threads(Some(0), || ()).is_err());
    }

    #[test]
    fn watched_jobs_return_their_result_or_stop_at_once_on_cancel() {
        let go = AtomicBool::new(false);
        assert_eq!(watch(|| Ok(7), &go).unwrap(), 7);
        let stop = AtomicBool::new(true);
        let t = std::time::Instant::now();
        let slow = || {
            std::thread::sleep(std::time::Duration::from_secs(2));
            Ok(1)
        };
        assert_eq!(watch(slow, &stop).unwrap_err(), ThriftyError::Interrupted);
        assert!(t.elapsed().as_millis() < 500);
    }
}
