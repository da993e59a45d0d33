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
//! cores are busy, e.g. right after a BLAS call whose threads still spin) and saves little, since
//! one core already reads memory nearly as fast as two.
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

/// `a·b + c`, fused when `FMA` (the probe's sums; never the leverage).
#[inline(always)]
fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA {
        a.mul_add(b, c)
    } else {
        c + a * b
    }
}

/// ‖row‖² (eight lanes, then the tail: the bits of [`leverage`]) and the K dot products row·z_c.
#[inline(always)]
fn norm_and_dots<T: Real, const K: usize, const FMA: bool>(row: &[T], z: &[&[f64]; K], y: &mut [f64; K]) -> f64 {
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
                d[l] = madd::<FMA>(c[l].as_f64(), z8[l], d[l]);
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
fn scan_rows<T: Real, const K: usize, const FMA: bool>(ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
    let zs: [&[f64]; K] = std::array::from_fn(|c| &z[c * p..(c + 1) * p]);
    if K == 0 {
        for (row, l) in ub.chunks_exact(p).zip(lb.iter_mut()) {
            *l = norm_and_dots::<T, K, FMA>(row, &zs, &mut [0.0; K]);
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
            *l = norm_and_dots::<T, K, FMA>(row, &zs, yr);
        }
        for (c, wc) in w.chunks_exact_mut(p).take(K).enumerate() {
            let (a, b, d, e) = (y[0][c], y[1][c], y[2][c], y[3][c]);
            for ((((wj, u0), u1), u2), u3) in wc.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
                let s = madd::<FMA>(a, u0.as_f64(), *wj);
                let s = madd::<FMA>(b, u1.as_f64(), s);
                let s = madd::<FMA>(d, u2.as_f64(), s);
                *wj = madd::<FMA>(e, u3.as_f64(), s);
            }
        }
    }
    for (row, l) in quads.remainder().chunks_exact(p).zip(levs.into_remainder()) {
        let mut y = [0.0f64; K];
        *l = norm_and_dots::<T, K, FMA>(row, &zs, &mut y);
        for (wc, &yc) in w.chunks_exact_mut(p).zip(&y) {
            for (wj, u) in wc.iter_mut().zip(row) {
                *wj = madd::<FMA>(yc, u.as_f64(), *wj);
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
    scan_rows::<T, K, false>(ub, p, z, lb, w)
}

/// [`scan_rows`] with AVX2 and fused multiply-adds (for the probe only).
///
/// # Safety
/// The CPU must support AVX2 and FMA (checked by the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scan_rows_fma<T: Real, const K: usize>(ub: &[T], p: usize, z: &[f64], lb: &mut [f64], w: &mut [f64]) {
    scan_rows::<T, K, true>(ub, p, z, lb, w)
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
        // SAFETY: AVX2 and FMA support were detected at run time (`isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Fma => unsafe { scan_rows_fma::<T, K>(ub, p, z, lb, w) },
        // SAFETY: AVX2 support was detected at run time (`isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { scan_rows_avx2::<T, K>(ub, p, z, lb, w) },
        Isa::Plain => scan_rows::<T, K, false>(ub, p, z, lb, w),
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

    #[test]
    fn absurd_row_counts_are_out_of_memory_errors() {
        let e = leverage_and_probe::<f64>(&[], usize::MAX / 2, 0, &[], 0).unwrap_err();
        assert!(e.to_string().contains("leverage scores"), "{e}");
    }
}
