//! Fallible allocation of every buffer whose size follows the input.
//!
//! Rust's default reaction to a refused allocation is to abort the process; under an address-space
//! limit (`ulimit -v`) or on an overcommitted machine that turns a large input into a crash. Buffers
//! sized by the caller's data or parameters go through these helpers instead, and a refusal becomes
//! [`ThriftyError::OutOfMemory`] naming the buffer (Python: `MemoryError`). Algorithms that hold
//! several large buffers at once (an eigendecomposition, an SVD) first compare their total with what
//! the machine can give ([`ensure_fits`]), so they fail before the first allocation rather than
//! half-way through a factorisation.
use crate::error::{Result, ThriftyError};
use faer::dyn_stack::{MemBuffer, StackReq};
use faer::Mat;

/// The error for a buffer `what` of `bytes` bytes that cannot be had.
pub fn out_of_memory(what: &'static str, bytes: f64) -> ThriftyError {
    let gib = bytes / (1u64 << 30) as f64;
    let detail = format!("{bytes:.3e} bytes ({gib:.3} GiB); use a smaller input or raise the memory limit");
    ThriftyError::OutOfMemory { what, detail }
}

/// Bytes of `len` values of `T`, or the error when that overflows the address space.
fn bytes_of<T>(what: &'static str, len: usize) -> Result<usize> {
    let size = std::mem::size_of::<T>().max(1);
    len.checked_mul(size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| out_of_memory(what, len as f64 * size as f64))
}

/// `len` copies of `value`, allocated fallibly.
pub fn try_filled<V: Clone>(what: &'static str, len: usize, value: V) -> Result<Vec<V>> {
    let mut v = try_with_capacity(what, len)?;
    v.resize(len, value);
    Ok(v)
}

/// Resize the reusable buffer `v` to `len` copies of `value` (its old contents dropped), growing it
/// fallibly: a per-task scratch vector whose size follows the input.
pub fn try_refill<V: Clone>(what: &'static str, v: &mut Vec<V>, len: usize, value: V) -> Result<()> {
    v.clear();
    let bytes = bytes_of::<V>(what, len)?;
    v.try_reserve_exact(len).map_err(|_| out_of_memory(what, bytes as f64))?;
    v.resize(len, value);
    Ok(())
}

/// `len` default values (zeros), allocated fallibly.
pub fn try_zeroed<T: Clone + Default>(what: &'static str, len: usize) -> Result<Vec<T>> {
    try_filled(what, len, T::default())
}

/// An empty vector with room for `len` values, allocated fallibly (a large one is backed by huge
/// pages where the kernel offers them: [`advise_huge_pages`]).
pub fn try_with_capacity<T>(what: &'static str, len: usize) -> Result<Vec<T>> {
    let bytes = bytes_of::<T>(what, len)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| out_of_memory(what, bytes as f64))?;
    advise_huge_pages(v.as_mut_ptr() as *mut u8, bytes);
    Ok(v)
}

/// Buffers from this size on are advised to use transparent huge pages.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// Ask Linux to back the untouched buffer `[ptr, ptr + bytes)` with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)` on its whole 2 MiB pages), as NumPy does for its large arrays. Where
/// THP is in `madvise` mode (Debian's default) a large buffer otherwise gets 4 KiB pages: one page
/// fault per 4 KiB on first touch, and a TLB miss on most scattered row reads of a k-means
/// iteration once the data outgrow the TLB's reach (measured on a 2·10⁵ × 32 fit: 10 % of its
/// time; the C ABI's row-major copy of every R matrix is such a buffer). Only advice: a refusal,
/// another kernel or another OS changes nothing but speed.
pub fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE_MIN_BYTES {
        const HUGE: usize = 2 << 20;
        const MADV_HUGEPAGE: i32 = 14;
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + bytes) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE changes
            // no contents and no mapping, and its failure is ignored
            unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes, HUGE_PAGE_MIN_BYTES);
}

/// The items of `items` collected into a vector allocated fallibly (room for all of them at once).
pub fn try_collect<V>(what: &'static str, items: impl ExactSizeIterator<Item = V>) -> Result<Vec<V>> {
    let mut v = try_with_capacity(what, items.len())?;
    v.extend(items);
    Ok(v)
}

/// A copy of `values`, allocated fallibly.
pub fn try_copied<V: Clone>(what: &'static str, values: &[V]) -> Result<Vec<V>> {
    let mut v = try_with_capacity(what, values.len())?;
    v.extend_from_slice(values);
    Ok(v)
}

/// `rows × cols` zeros as a faer matrix, allocated fallibly.
pub fn try_mat(what: &'static str, rows: usize, cols: usize) -> Result<Mat<f64>> {
    let bytes = bytes_of::<f64>(what, rows.saturating_mul(cols))?;
    let mut m = Mat::<f64>::new();
    m.try_reserve(rows, cols).map_err(|_| out_of_memory(what, bytes as f64))?;
    m.resize_with(rows, cols, |_, _| 0.0);
    Ok(m)
}

/// A faer workspace (`MemBuffer`) for `req`, allocated fallibly.
pub fn try_buffer(what: &'static str, req: StackReq) -> Result<MemBuffer> {
    let bytes = req.size_bytes();
    MemBuffer::try_new(req).map_err(|_| out_of_memory(what, bytes as f64))
}

/// `Err(OutOfMemory)` when `bytes` more cannot fit in what this process may still use: the room left
/// under the address-space limit (`RLIMIT_AS`) and the machine's memory plus swap. Read from
/// `/proc` (Linux); elsewhere only the allocator decides.
pub fn ensure_fits(what: &'static str, bytes: f64) -> Result<()> {
    // a small request is left to the fallible allocation that follows it: reading /proc costs tens of
    // µs, which would dominate small calls made many times (per-split eigensolves of q×q Grams)
    if bytes < SMALL_REQUEST_BYTES {
        return Ok(());
    }
    match room() {
        Some(room) if bytes > room => Err(out_of_memory(what, bytes)),
        _ => Ok(()),
    }
}

/// Make this thread's matrix-product workspace, or `Err(OutOfMemory)` when it does not fit.
///
/// faer's products on x86 (private-gemm-x86) pack their operands into a thread-local buffer of twice
/// that crate's estimate of the L3 cache (64 MiB here), allocated infallibly by a thread's first
/// product above 16³ — also inside faer's decompositions. Under an address-space limit that first
/// product aborted the process ("memory allocation of 67108864 bytes failed"), whatever the call. So
/// every thread that runs core work makes the buffer first ([`crate::threads`] does it for each pool
/// once, the bindings for the calling thread of an inline call), after checking that it fits.
pub fn ensure_gemm_workspace() -> Result<()> {
    use std::cell::Cell;
    thread_local! {
        static READY: Cell<bool> = const { Cell::new(false) };
    }
    if READY.with(Cell::get) {
        return Ok(());
    }
    ensure_fits("the matrix-product workspace of a worker thread", gemm_workspace_bytes())?;
    // one product above nano-gemm's size takes private-gemm's packed path and makes the buffer now
    let a = Mat::<f64>::zeros(32, 32);
    let mut c = Mat::<f64>::zeros(32, 32);
    faer::linalg::matmul::matmul(c.as_mut(), faer::Accum::Replace, a.as_ref(), a.as_ref(), 1.0, faer::Par::Seq);
    READY.with(|r| r.set(true));
    Ok(())
}

/// Bytes of private-gemm-x86's per-thread buffer: two halves of its L3 estimate, which on Linux is
/// cpu0's L3 (sysfs) per sharing CPU × the CPUs sharing an L1 × the physical cores (its own
/// `cache.rs`, version 0.1.22). Elsewhere, or when sysfs says nothing, a generous 2 × 64 MiB.
fn gemm_workspace_bytes() -> f64 {
    static BYTES: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let l3 = sysfs_l3_estimate().unwrap_or(64 << 20);
        2.0 * (l3.div_ceil(4096) * 4096) as f64
    })
}

fn sysfs_l3_estimate() -> Option<usize> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let (mut l1_shared, mut l3) = (1usize, None);
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        if !path.file_name()?.to_str()?.starts_with("index") {
            continue;
        }
        let read = |name: &str| std::fs::read_to_string(path.join(name)).ok().map(|s| s.trim().to_string());
        let level: usize = read("level")?.parse().ok()?;
        let size = read("size")?;
        let (digits, unit) = size.split_at(size.trim_end_matches(['K', 'M', 'G']).len());
        let scale = match unit {
            "K" => 1 << 10,
            "M" => 1 << 20,
            "G" => 1 << 30,
            _ => 1,
        };
        let bytes = digits.parse::<usize>().ok()? * scale;
        let shared: usize = read("shared_cpu_list")?
            .split(',')
            .map(|item| match item.split_once('-') {
                Some((a, b)) => b.parse::<usize>().unwrap_or(0) + 1 - a.parse::<usize>().unwrap_or(0),
                None => 1,
            })
            .sum::<usize>()
            .max(1);
        match level {
            1 => l1_shared = shared,
            3 => l3 = Some(bytes / shared),
            _ => {}
        }
    }
    Some(l3? * l1_shared * num_cpus::get_physical().max(1))
}

/// Requests below this many bytes skip [`ensure_fits`]'s reading of `/proc`.
const SMALL_REQUEST_BYTES: f64 = (1u64 << 20) as f64;

/// Bytes this process can still allocate, as far as `/proc` tells (None when it does not).
fn room() -> Option<f64> {
    let kib = |text: &str, key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse::<f64>().ok().map(|v| v * 1024.0)
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let machine = kib(&meminfo, "MemTotal:")? + kib(&meminfo, "SwapTotal:").unwrap_or(0.0);
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let limit = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<f64>().ok());
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let under_limit = match (limit, kib(&status, "VmSize:")) {
        (Some(limit), Some(used)) => (limit - used).max(0.0),
        _ => f64::INFINITY,
    };
    Some(machine.min(under_limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_out_of_memory_errors_naming_the_buffer() {
        for e in [
            try_zeroed::<f64>("the samples", usize::MAX / 2).unwrap_err(),
            try_filled("the samples", isize::MAX as usize + 1, 0u8).unwrap_err(),
            try_mat("the samples", 1 << 40, 1 << 40).unwrap_err(),
            try_with_capacity::<f64>("the samples", usize::MAX).unwrap_err(),
            try_collect("the samples", 0..usize::MAX).unwrap_err(),
        ] {
            assert!(matches!(e, ThriftyError::OutOfMemory { what: "the samples", .. }), "{e}");
            assert!(e.to_string().starts_with("cannot allocate the samples"), "{e}");
        }
        assert_eq!(try_zeroed::<f64>("x", 3).unwrap(), vec![0.0; 3]);
        assert_eq!(try_collect("x", 1..4).unwrap(), vec![1, 2, 3]);
        let m = try_mat("x", 2, 3).unwrap();
        assert_eq!((m.nrows(), m.ncols(), m[(1, 2)]), (2, 3, 0.0));
        assert!(try_buffer("x", StackReq::new::<f64>(16)).is_ok());
    }

    #[test]
    fn the_machine_bounds_what_fits() {
        assert!(ensure_fits("x", 1024.0).is_ok());
        if room().is_some() {
            assert!(ensure_fits("a petabyte", 1e15).is_err());
        }
    }
}
