//! The one O(Np) pass over a basis U: leverage scores ‖U_i‖² and, for up to four probe columns z_c,
//! the products UᵀU z_c (the randomized orthonormality check), read off each row while it is in
//! cache.
//!
//! Each row is read once from memory: one loop over it accumulates its squared norm and its k dot
//! products y_c = U_i·z_c; the updates w_c += y_c U_i are then applied four rows at a time, so the
//! accumulators w (k·p values, in L1) are loaded and stored once per four rows. The leverage is
//! summed exactly as [`leverage`] sums it (eight lanes, plain multiply and add), so a checked and an
//! unchecked sampler see the same bits and draw the same samples.
//!
//! Rows are cut into fixed blocks of [`SCAN_ROWS`]; each block gives one partial of `w`, and the
//! partials are added in block order, so the result does not depend on the thread count nor on
//! whether the blocks ran in parallel. Scans of at most [`INLINE_ELEMENTS`] values run on the
//! calling thread: handing them to pool workers costs a wake-up (a millisecond or more when the
//! cores are busy, e.g. right after a BLAS call whose threads still spin). From
//! [`HELPED_ROWS`] rows on, one pool worker may join such a scan and take blocks, but the calling
//! thread never waits for it to start ([`helped`]): with the probes the scan is partly
//! compute-bound on one core, and a second core takes about a millisecond off 10⁷ values when it
//! is free.
use crate::alloc::try_zeroed;
use crate::error::Result;
use crate::scalar::Real;
use rayon::prelude::*;

/// Rows per block. Every block is its own rayon task (`with_max_len(1)`), so idle threads steal the
/// blocks left when another library's threads hold a core (about 0.1 ms of work per block).
pub const SCAN_ROWS: usize = 2048;

/// Scans of at most this many values (128 MiB of f64, tens of milliseconds on one core) run
/// sequentially on the calling thread; the bindings call them without a hand-off to a worker.
pub const INLINE_ELEMENTS: usize = 1 << 24;

/// Whether a scan of an `n × p` matrix runs on the calling thread.
pub fn runs_inline(n: usize, p: usize) -> bool {
    n.saturating_mul(p) <= INLINE_ELEMENTS
}

/// `a·b + c` (the probe's sums of the portable kernel).
#[inline(always)]
fn madd(a: f64, b: f64, c: f64) -> f64 {
    c + a * b
}

/// ‖row‖² (eight lanes, then the tail: the bits of [`leverage`]) and the K dot products row·z_c.
#[inline(always)]
fn norm_and_dots<T: Real, const K: usize>(row: &[T], z: &[&[f64]; K], y: &mut [f64; K]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut dots = [[0.0f64; 8]; K];
    let mut chunks = row.chunks_exact(8);
    for (j, c) in (&mut chunks).enumerate() {
        for l in 0..8 {
            let v = c[l].as_f64();
            acc[l] += v * v;
        }
        for (d, zc) in dots.iter_mut().zip(z) {
            let z8 = &zc[8 * j..8 * j + 8];
            for l in 0..8 {
                d[l] = madd(c[l].as_f64(), z8[l], d[l]);
            }
        }
    }
    let rem = chunks.remainder();
    let start = row.len() - rem.len();
    for ((yc, d), zc) in y.iter_mut().zip(&dots).zip(z) {
        let tail: f64 = rem.iter().zip(&zc[start..]).map(|(a, b)| a.as_f64() * b).sum();
        *yc = d.iter().sum::<f64>() + tail;
    }
    let tail: f64 = rem.iter().map(|&v| v.as_f64() * v.as_f64()).sum();
    acc.iter().sum::<f64>() + tail
}

/// One block: leverage into `lb`, `w_c += Σ_i (U_i·z_c) U_i` into `w` (column c at `w[c*p..]`).
#[inline(always)]
fn scan_rows<T: Real, const K: usize>(ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
    let zs: [&[f64]; K] = std::array::from_fn(|c| &z[c * p..(c + 1) * p]);
    if K == 0 {
        for (row, l) in ub.chunks_exact(p).zip(lb.iter_mut()) {
            *l = norm_and_dots::<T, K>(row, &zs, &mut [0.0; K]);
        }
        return;
    }
    let mut quads = ub.chunks_exact(4 * p);
    let mut levs = lb.chunks_exact_mut(4);
    for (quad, lq) in (&mut quads).zip(&mut levs) {
        let (r0, rest) = quad.split_at(p);
        let (r1, rest) = rest.split_at(p);
        let (r2, r3) = rest.split_at(p);
        let mut y = [[0.0f64; K]; 4];
        for ((l, yr), row) in lq.iter_mut().zip(y.iter_mut()).zip([r0, r1, r2, r3]) {
            *l = norm_and_dots::<T, K>(row, &zs, yr);
        }
        for (c, wc) in w.chunks_exact_mut(p).take(K).enumerate() {
            let (a, b, d, e) = (y[0][c], y[1][c], y[2][c], y[3][c]);
            for ((((wj, u0), u1), u2), u3) in wc.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
                let s = madd(a, u0.as_f64(), *wj);
                let s = madd(b, u1.as_f64(), s);
                let s = madd(d, u2.as_f64(), s);
                *wj = madd(e, u3.as_f64(), s);
            }
        }
    }
    for (row, l) in quads.remainder().chunks_exact(p).zip(levs.into_remainder()) {
        let mut y = [0.0f64; K];
        *l = norm_and_dots::<T, K>(row, &zs, &mut y);
        for (wc, &yc) in w.chunks_exact_mut(p).zip(&y) {
            for (wj, u) in wc.iter_mut().zip(row) {
                *wj = madd(yc, u.as_f64(), *wj);
            }
        }
    }
}

/// [`scan_rows`] compiled for AVX2 (4 doubles per instruction instead of SSE2's 2), no FMA.
///
/// # Safety
/// The CPU must support AVX2 (checked by the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_rows_avx2<T: Real, const K: usize>(ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
    scan_rows::<T, K>(ub, p, z, lb, w)
}

/// Hand-scheduled AVX2 + FMA kernel of a block with probes (K ≥ 1), for f32 and f64 rows.
///
/// The portable [`scan_rows`] is compute-bound with probes (LLVM keeps the dot products in a
/// dependency chain per row and reloads every row once per probe in the update): about 7.5 ms of
/// arithmetic per 10⁷ values at K = 2 against 4 ms to stream them from memory. Here the dot
/// products of even and odd groups of eight values go to separate accumulators (two FMA chains
/// instead of one), and the update `w_c += y_c U_i` loads each group of four values of the four
/// rows once for all K probes instead of once per probe.
/// The leverage is summed exactly as in [`norm_and_dots`]: lanes l = j mod 8 (plain multiply,
/// then add), added in lane order, then the tail, so its bits do not change.
#[cfg(target_arch = "x86_64")]
// Indexed loops over the register arrays (rows r, probes c) read as the algebra and unroll fully.
#[allow(clippy::needless_range_loop)]
mod x86 {
    use crate::scalar::Real;
    use std::any::TypeId;
    use std::arch::x86_64::*;

    /// Whether the kernel handles this element type (f32 or f64).
    pub fn supports<T: Real>() -> bool {
        TypeId::of::<T>() == TypeId::of::<f64>() || TypeId::of::<T>() == TypeId::of::<f32>()
    }

    /// Four values at `p` as f64 (`T` is f32 or f64: [`supports`]).
    #[inline(always)]
    unsafe fn load4<T: Real>(p: *const T) -> __m256d {
        if std::mem::size_of::<T>() == 8 {
            _mm256_loadu_pd(p as *const f64)
        } else {
            _mm256_cvtps_pd(_mm_loadu_ps(p as *const f32))
        }
    }

    #[inline(always)]
    unsafe fn lanes(v: __m256d) -> [f64; 4] {
        let mut a = [0.0; 4];
        _mm256_storeu_pd(a.as_mut_ptr(), v);
        a
    }

    /// Leverage and the K dot products of R consecutive rows starting at `rows` (row-major, p
    /// values each), into `lev[..R]` and `y[..R]`.
    #[inline(always)]
    unsafe fn norm_dots<T: Real, const K: usize, const R: usize>(
        rows: &[T],
        p: usize,
        z: &[f64],
        lev: &mut [f64],
        y: &mut [[f64; K]],
    ) {
        debug_assert!(rows.len() >= R * p && z.len() >= K * p && lev.len() >= R && y.len() >= R);
        let zero = _mm256_setzero_pd();
        let mut acc = [[zero; 2]; R];
        // Two sets of dot accumulators (even and odd chunks of 8): their FMA chains interleave.
        let mut d = [[[zero; 2]; K]; R];
        let mut e = [[[zero; 2]; K]; R];
        let full = p / 8;
        let (rp, zp) = (rows.as_ptr(), z.as_ptr());
        #[inline(always)]
        unsafe fn chunk<T: Real, const K: usize>(
            row: *const T,
            zp: *const f64,
            p: usize,
            o: usize,
            acc: &mut [__m256d; 2],
            d: &mut [[__m256d; 2]; K],
        ) {
            let lo = load4(row.add(o));
            let hi = load4(row.add(o + 4));
            acc[0] = _mm256_add_pd(acc[0], _mm256_mul_pd(lo, lo));
            acc[1] = _mm256_add_pd(acc[1], _mm256_mul_pd(hi, hi));
            for (c, dc) in d.iter_mut().enumerate() {
                let zc = zp.add(c * p + o);
                dc[0] = _mm256_fmadd_pd(lo, _mm256_loadu_pd(zc), dc[0]);
                dc[1] = _mm256_fmadd_pd(hi, _mm256_loadu_pd(zc.add(4)), dc[1]);
            }
        }
        for j in 0..full / 2 {
            for r in 0..R {
                chunk::<T, K>(rp.add(r * p), zp, p, 16 * j, &mut acc[r], &mut d[r]);
                // With K > 2 a second set would not fit in the 16 registers: one chain then.
                let odd = if K <= 2 { &mut e[r] } else { &mut d[r] };
                chunk::<T, K>(rp.add(r * p), zp, p, 16 * j + 8, &mut acc[r], odd);
            }
        }
        if full % 2 == 1 {
            for r in 0..R {
                chunk::<T, K>(rp.add(r * p), zp, p, 8 * (full - 1), &mut acc[r], &mut d[r]);
            }
        }
        for r in 0..R {
            for c in 0..K {
                d[r][c][0] = _mm256_add_pd(d[r][c][0], e[r][c][0]);
                d[r][c][1] = _mm256_add_pd(d[r][c][1], e[r][c][1]);
            }
        }
        for r in 0..R {
            let row = &rows[r * p..(r + 1) * p];
            let rem = &row[8 * full..];
            let (a, b) = (lanes(acc[r][0]), lanes(acc[r][1]));
            let tail: f64 = rem.iter().map(|&v| v.as_f64() * v.as_f64()).sum();
            lev[r] = a.iter().chain(&b).sum::<f64>() + tail;
            for c in 0..K {
                let s = lanes(_mm256_add_pd(d[r][c][0], d[r][c][1]));
                let zt = &z[c * p + 8 * full..(c + 1) * p];
                let tail = rem.iter().zip(zt).fold(0.0, |t, (u, zv)| u.as_f64().mul_add(*zv, t));
                y[r][c] = (s[0] + s[1]) + (s[2] + s[3]) + tail;
            }
        }
    }

    /// `w_c += Σ_r y[r][c] · row_r` for the R rows at `rows`.
    #[inline(always)]
    unsafe fn update<T: Real, const K: usize, const R: usize>(rows: &[T], p: usize, y: &[[f64; K]], w: &mut [f64]) {
        debug_assert!(rows.len() >= R * p && w.len() >= K * p && y.len() >= R);
        let b: [[__m256d; K]; R] = std::array::from_fn(|r| std::array::from_fn(|c| _mm256_set1_pd(y[r][c])));
        let (rp, wp) = (rows.as_ptr(), w.as_mut_ptr());
        let p4 = p / 4 * 4;
        for j in (0..p4).step_by(4) {
            let u: [__m256d; R] = std::array::from_fn(|r| load4(rp.add(r * p + j)));
            for c in 0..K {
                let at = wp.add(c * p + j);
                let mut s = _mm256_loadu_pd(at);
                for r in 0..R {
                    s = _mm256_fmadd_pd(b[r][c], u[r], s);
                }
                _mm256_storeu_pd(at, s);
            }
        }
        for j in p4..p {
            for c in 0..K {
                let mut s = w[c * p + j];
                for r in 0..R {
                    s = y[r][c].mul_add(rows[r * p + j].as_f64(), s);
                }
                w[c * p + j] = s;
            }
        }
    }

    /// One block (see [`super::scan_rows`]) with K ≥ 1 probes.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA, and `T` must be f32 or f64 ([`supports`]).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scan_rows<T: Real, const K: usize>(ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
        assert!(K >= 1 && z.len() >= K * p && w.len() >= K * p && ub.len() == lb.len() * p);
        let mut quads = ub.chunks_exact(4 * p);
        let mut levs = lb.chunks_exact_mut(4);
        for (quad, lq) in (&mut quads).zip(&mut levs) {
            let mut y = [[0.0f64; K]; 4];
            // One row at a time (two rows interleaved spill registers with 16 ymm: measured slower).
            for r in 0..4 {
                norm_dots::<T, K, 1>(&quad[r * p..], p, z, &mut lq[r..], &mut y[r..]);
            }
            update::<T, K, 4>(quad, p, &y, w);
        }
        for (row, l) in quads.remainder().chunks_exact(p).zip(levs.into_remainder()) {
            let mut y = [[0.0f64; K]; 1];
            norm_dots::<T, K, 1>(row, p, z, std::slice::from_mut(l), &mut y);
            update::<T, K, 1>(row, p, &y, w);
        }
    }
}

/// The instruction set chosen once per process.
#[derive(Clone, Copy)]
enum Isa {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Fma,
}

fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            return if std::arch::is_x86_feature_detected!("fma") { Isa::Fma } else { Isa::Avx2 };
        }
    }
    Isa::Plain
}

fn scan_block_k<T: Real, const K: usize>(isa: Isa, ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
    match isa {
        // SAFETY: AVX2 and FMA support were detected at run time (`isa`), and the element type is
        // one the kernel reads (`x86::supports`).
        #[cfg(target_arch = "x86_64")]
        Isa::Fma if K > 0 && x86::supports::<T>() => unsafe { x86::scan_rows::<T, K>(ub, p, z, lb, w) },
        // SAFETY: AVX2 support was detected at run time (`isa`; FMA implies it here).
        #[cfg(target_arch = "x86_64")]
        Isa::Fma => unsafe { scan_rows_avx2::<T, K>(ub, p, z, lb, w) },
        // SAFETY: AVX2 support was detected at run time (`isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { scan_rows_avx2::<T, K>(ub, p, z, lb, w) },
        Isa::Plain => scan_rows::<T, K>(ub, p, z, lb, w),
    }
}

fn scan_block<T: Real>(isa: Isa, ub: &[T], p: usize, z: &[f64], k: usize, lb: &mut [f64], w: &mut [f64]) {
    match k {
        0 => scan_block_k::<T, 0>(isa, ub, p, z, lb, w),
        1 => scan_block_k::<T, 1>(isa, ub, p, z, lb, w),
        2 => scan_block_k::<T, 2>(isa, ub, p, z, lb, w),
        3 => scan_block_k::<T, 3>(isa, ub, p, z, lb, w),
        _ => scan_block_k::<T, 4>(isa, ub, p, z, lb, w),
    }
}

/// Leverage scores ‖U_i‖² of the row-major `n × p` matrix `u` and `UᵀU Z` for the `k ≤ 4` probe
/// columns `z` (column c at `z[c*p..]`; `k = 0`: leverage only), in one pass (module header).
/// Both are allocated fallibly (`Err(OutOfMemory)` naming them). O(Npk) time.
pub fn leverage_and_probe<T: Real>(u: &[T], n: usize, p: usize, z: &[f64], k: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let k = k.min(4);
    let mut lev: Vec<f64> = try_zeroed("the leverage scores (one per row of U)", n)?;
    if p == 0 || n == 0 {
        return Ok((lev, vec![0.0; p * k]));
    }
    let isa = isa();
    let block = |(lb, ub): (&mut [f64], &[T])| -> Result<Vec<f64>> {
        let mut w: Vec<f64> = try_zeroed("a partial of the orthonormality probe", p * k)?;
        scan_block(isa, ub, p, z, k, lb, &mut w);
        Ok(w)
    };
    let rows = &u[..n * p];
    if runs_inline(n, p) && n >= HELPED_ROWS && crate::threads::available_threads() > 1 {
        let partials = helped::scan(isa, rows, n, p, z, k, &mut lev)?;
        let mut w: Vec<f64> = try_zeroed("the orthonormality probe", p * k)?;
        if k > 0 {
            for part in partials.chunks_exact(p * k) {
                for (a, b) in w.iter_mut().zip(part) {
                    *a += b;
                }
            }
        }
        return Ok((lev, w));
    }
    let partials: Vec<Vec<f64>> = if runs_inline(n, p) {
        lev.chunks_mut(SCAN_ROWS).zip(rows.chunks(SCAN_ROWS * p)).map(block).collect::<Result<_>>()?
    } else {
        lev.par_chunks_mut(SCAN_ROWS)
            .zip(rows.par_chunks(SCAN_ROWS * p))
            .with_max_len(1)
            .map(block)
            .collect::<Result<_>>()?
    };
    let mut w: Vec<f64> = try_zeroed("the orthonormality probe", p * k)?;
    for part in partials {
        for (a, b) in w.iter_mut().zip(part) {
            *a += b;
        }
    }
    Ok((lev, w))
}

/// Inline scans of at least this many rows (four blocks) accept the help of one pool worker.
pub const HELPED_ROWS: usize = 4 * SCAN_ROWS;

/// An inline scan that a pool worker may join: the calling thread claims blocks one by one from a
/// shared counter and never waits for a worker that has not started (one that wakes up late finds
/// every block claimed, or the job closed, and leaves without touching U). So the scan costs what
/// it costs on the calling thread when the other cores are busy (e.g. BLAS threads still
/// spinning), and about half when one is free. Every block writes its own rows of the leverage and
/// its own partial of the probe (`p·k` values at `b·p·k`), summed in block order by the caller: the
/// same bits as the sequential scan, whoever ran which block.
mod helped {
    use super::{scan_block, Isa, SCAN_ROWS};
    use crate::alloc::try_zeroed;
    use crate::error::Result;
    use crate::scalar::Real;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Bit 0 of `state`: closed (no worker may enter); the rest: twice the workers inside.
    const CLOSED: usize = 1;
    const INSIDE: usize = 2;

    /// The scan's arguments as addresses, valid while the job is open or a worker is inside.
    struct Job<T> {
        next: AtomicUsize,
        state: AtomicUsize,
        isa: Isa,
        u: *const T,
        lev: *mut f64,
        w: *mut f64,
        z: Vec<f64>,
        n: usize,
        p: usize,
        k: usize,
    }

    // SAFETY: the pointers are only dereferenced for blocks claimed through `next` (each block by one
    // thread, disjoint rows of `lev` and disjoint partials of `w`; `u` is only read), and only while
    // the caller's borrows are alive: the caller closes the job and waits for the workers inside
    // before it returns (`scan`).
    unsafe impl<T: Sync> Send for Job<T> {}
    unsafe impl<T: Sync> Sync for Job<T> {}

    impl<T: Real> Job<T> {
        /// Claim and run blocks until none is left.
        ///
        /// # Safety
        /// The caller's slices behind the pointers must be alive (see the `Send` impl).
        unsafe fn work(&self) {
            let (n, p, k) = (self.n, self.p, self.k);
            loop {
                let b = self.next.fetch_add(1, Ordering::Relaxed);
                let start = b.saturating_mul(SCAN_ROWS);
                if start >= n {
                    return;
                }
                let rows = SCAN_ROWS.min(n - start);
                let ub = std::slice::from_raw_parts(self.u.add(start * p), rows * p);
                let lb = std::slice::from_raw_parts_mut(self.lev.add(start), rows);
                let wb = std::slice::from_raw_parts_mut(self.w.add(b * p * k), p * k);
                scan_block(self.isa, ub, p, &self.z, k, lb, wb);
            }
        }
    }

    /// The leverage into `lev` and the blocks' probe partials, `p·k` values per block in order.
    pub(super) fn scan<T: Real>(
        isa: Isa,
        u: &[T],
        n: usize,
        p: usize,
        z: &[f64],
        k: usize,
        lev: &mut [f64],
    ) -> Result<Vec<f64>> {
        let blocks = n.div_ceil(SCAN_ROWS);
        let mut w: Vec<f64> = try_zeroed("the partials of the orthonormality probe", blocks * p * k)?;
        let job = Arc::new(Job {
            next: AtomicUsize::new(0),
            state: AtomicUsize::new(0),
            isa,
            u: u.as_ptr(),
            lev: lev.as_mut_ptr(),
            w: w.as_mut_ptr(),
            z: z[..p * k].to_vec(),
            n,
            p,
            k,
        });
        let helper = Arc::clone(&job);
        rayon::spawn(move || {
            let mut s = helper.state.load(Ordering::Acquire);
            loop {
                if s & CLOSED != 0 {
                    return;
                }
                match helper.state.compare_exchange_weak(s, s + INSIDE, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
            // SAFETY: entered while open, so the caller waits for this worker before returning.
            unsafe { helper.work() };
            helper.state.fetch_sub(INSIDE, Ordering::Release);
        });
        // SAFETY: `u`, `lev` and `w` are borrowed or owned here until after the wait below.
        unsafe { job.work() };
        let mut s = job.state.fetch_or(CLOSED, Ordering::AcqRel);
        // A worker inside finishes the block it claimed (at most one block) and leaves.
        let mut spins = 0u32;
        while s & !CLOSED != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            s = job.state.load(Ordering::Acquire);
        }
        drop(job);
        Ok(w)
    }
}

/// Leverage scores ‖U_i‖² (the diagonal of K = UUᵀ), in f64, allocated fallibly.
pub fn leverage<T: Real>(u: &[T], n: usize, p: usize) -> Result<Vec<f64>> {
    Ok(leverage_and_probe(u, n, p, &[], 0)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definitions: Σ_j u_ij² and Σ_i (u_i·z) u_i.
    fn reference(u: &[f64], n: usize, p: usize, z: &[f64], k: usize) -> (Vec<f64>, Vec<f64>) {
        let lev = (0..n).map(|i| u[i * p..(i + 1) * p].iter().map(|v| v * v).sum()).collect();
        let mut w = vec![0.0; p * k];
        for i in 0..n {
            let row = &u[i * p..(i + 1) * p];
            for c in 0..k {
                let y: f64 = row.iter().zip(&z[c * p..(c + 1) * p]).map(|(a, b)| a * b).sum();
                for j in 0..p {
                    w[c * p + j] += y * row[j];
                }
            }
        }
        (lev, w)
    }

    #[test]
    fn one_pass_matches_the_definitions_for_every_shape_and_probe_count() {
        let mut r = crate::rng::stream(5, 0);
        // Row counts around the 4-row groups and the block size; widths around the 8 lanes.
        for &(n, p) in &[(1, 1), (3, 7), (4, 8), (5, 9), (2 * SCAN_ROWS + 3, 13), (SCAN_ROWS, 16), (77, 100)] {
            let u: Vec<f64> = (0..n * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
            let z: Vec<f64> = (0..4 * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
            for k in 0..=4 {
                let (lev, w) = leverage_and_probe(&u, n, p, &z, k).unwrap();
                let (lr, wr) = reference(&u, n, p, &z, k);
                assert!(lev.iter().zip(&lr).all(|(a, b)| (a - b).abs() <= 1e-13 * b.max(1.0)), "({n}, {p}) k={k}");
                assert!(w.iter().zip(&wr).all(|(a, b)| (a - b).abs() <= 1e-10), "({n}, {p}) k={k}");
                // The leverage has the same bits with or without probes.
                assert_eq!(lev, leverage(&u, n, p).unwrap());
            }
            let uf: Vec<f32> = u.iter().map(|&v| v as f32).collect();
            let (lf, _) = leverage_and_probe(&uf, n, p, &z, 2).unwrap();
            assert_eq!(lf, leverage(&uf, n, p).unwrap());
        }
    }

    #[test]
    fn sequential_and_parallel_blocks_give_the_same_bits() {
        // Above INLINE_ELEMENTS the blocks run in parallel; the partials are the same blocks added
        // in the same order, so a matrix just above the limit agrees with its two halves' blocks.
        let (n, p) = (INLINE_ELEMENTS / 4 + SCAN_ROWS, 4);
        assert!(!runs_inline(n, p) && runs_inline(n / 2, p));
        let u: Vec<f64> = (0..n * p).map(|i| ((i % 97) as f64 - 48.0) / 50.0).collect();
        let z = [0.5, -0.5, 0.5, 0.5];
        let (lev, w) = leverage_and_probe(&u, n, p, &z, 1).unwrap();
        // Same blocks one by one on this thread.
        let mut want = vec![0.0; p];
        let mut lw = vec![0.0; n];
        for (lb, ub) in lw.chunks_mut(SCAN_ROWS).zip(u.chunks(SCAN_ROWS * p)) {
            let mut part = vec![0.0; p];
            scan_block(isa(), ub, p, &z, 1, lb, &mut part);
            want.iter_mut().zip(part).for_each(|(a, b)| *a += b);
        }
        assert_eq!((lev, w), (lw, want));
    }

    /// The leverage and probe of the blocks one by one on this thread (the sequential scan).
    fn sequential<T: Real>(u: &[T], n: usize, p: usize, z: &[f64], k: usize) -> (Vec<f64>, Vec<f64>) {
        let mut lev = vec![0.0; n];
        let mut w = vec![0.0; p * k];
        for (lb, ub) in lev.chunks_mut(SCAN_ROWS).zip(u.chunks(SCAN_ROWS * p)) {
            let mut part = vec![0.0; p * k];
            scan_block(isa(), ub, p, z, k, lb, &mut part);
            w.iter_mut().zip(part).for_each(|(a, b)| *a += b);
        }
        (lev, w)
    }

    #[test]
    fn helped_scans_give_the_bits_of_the_sequential_scan() {
        // Whichever blocks the worker takes (none, some, most), and with 1, 2 or 3 threads.
        let mut r = crate::rng::stream(6, 0);
        for &(n, p) in &[(HELPED_ROWS, 8), (HELPED_ROWS + 4 * SCAN_ROWS + 5, 13), (6 * SCAN_ROWS + 1, 100)] {
            assert!(runs_inline(n, p));
            let u: Vec<f64> = (0..n * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
            let uf: Vec<f32> = u.iter().map(|&v| v as f32).collect();
            let z: Vec<f64> = (0..4 * p).map(|_| crate::rng::uniform(&mut r) - 0.5).collect();
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for k in [0, 1, 2, 4] {
                    let want = sequential(&u, n, p, &z, k);
                    let wantf = sequential(&uf, n, p, &z, k);
                    for _ in 0..8 {
                        assert_eq!(pool.install(|| leverage_and_probe(&u, n, p, &z, k).unwrap()), want, "{n} {p} {k}");
                        assert_eq!(pool.install(|| leverage_and_probe(&uf, n, p, &z, k).unwrap()), wantf);
                        // From a thread outside the pool (the bindings' case), the global pool helps.
                        assert_eq!(leverage_and_probe(&u, n, p, &z, k).unwrap(), want);
                    }
                }
            }
            // The direct helped scan with every worker busy: the caller runs every block itself.
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let gate = std::sync::Mutex::new(rx);
            pool.scope(|s| {
                s.spawn(|_| {
                    let _ = gate.lock().unwrap().recv();
                });
                s.spawn(|_| {
                    let _ = gate.lock().unwrap().recv();
                });
                let want = sequential(&u, n, p, &z, 2);
                let got = pool.install(|| leverage_and_probe(&u, n, p, &z, 2).unwrap());
                assert_eq!(got, want);
                tx.send(()).unwrap();
                tx.send(()).unwrap();
            });
        }
    }

    #[test]
    fn absurd_row_counts_are_out_of_memory_errors() {
        let e = leverage_and_probe::<f64>(&[], usize::MAX / 2, 0, &[], 0).unwrap_err();
        assert!(e.to_string().contains("leverage scores"), "{e}");
    }
}
