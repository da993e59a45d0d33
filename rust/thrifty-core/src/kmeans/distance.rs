//! The fused distance kernel: squared distances of a tile of rows to all centres, computed as
//! ‖x‖² − 2·x·c + ‖c‖² with one small GEMM per tile, consumed inside the tile (argmin, top-2, the
//! Hartigan cost) so that an n×k matrix never exists. Exact per-pair distances (`sq_dist`) are used
//! wherever a decision must not depend on GEMM rounding.
use crate::scalar::Real;

/// Rows per tile: the GEMM output tile is `TILE × k`, small enough to stay in L2 for k ≤ 512.
pub const TILE: usize = 256;

/// Lanes of independent accumulators in the reductions below: a single running sum or minimum is
/// one long dependency chain (4 cycles per element); eight of them let the compiler vectorise.
const LANES: usize = 8;

/// Σ f(a_l, b_l) over two equal-length slices, accumulated in f64 over `LANES` lanes.
#[inline(always)]
fn lane_sum<A: Copy, B: Copy>(a: &[A], b: &[B], f: impl Fn(A, B) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..LANES {
            acc[l] += f(x[l], y[l]);
        }
    }
    let mut s = 0.0;
    for (x, y) in ar.iter().zip(br) {
        s += f(*x, *y);
    }
    acc.iter().sum::<f64>() + s
}

/// Exact squared distance, accumulated in f64.
#[inline]
pub fn sq_dist<T: Real>(x: &[T], c: &[T]) -> f64 {
    lane_sum(x, c, |a: T, b: T| {
        let t = a.as_f64() - b.as_f64();
        t * t
    })
}

/// Exact squared distance between a row in the data type and a centre kept in f64.
#[inline]
pub fn sq_dist_f64<T: Real>(x: &[T], c: &[f64]) -> f64 {
    lane_sum(x, c, |a: T, b: f64| {
        let t = a.as_f64() - b;
        t * t
    })
}

/// Squared norm ‖x‖² (f64 accumulation).
#[inline]
pub fn sq_norm<T: Real>(x: &[T]) -> f64 {
    lane_sum(x, x, |a: T, _: T| a.as_f64() * a.as_f64())
}

/// Squared row norms ‖x_i‖².
pub fn row_sq_norms<T: Real>(x: &[T], d: usize) -> Vec<f64> {
    x.chunks_exact(d).map(sq_norm).collect()
}

/// `min_j scale_j · max(base + v_j, 0)` over `LANES` lanes (∞ when empty): the smallest
/// size-weighted cost of a row of partial distances.
#[inline]
pub fn scaled_min<T: Real>(vals: &[T], scale: &[f64], base: f64) -> f64 {
    let mut acc = [f64::INFINITY; LANES];
    let (vc, sc) = (vals.chunks_exact(LANES), scale.chunks_exact(LANES));
    let (vr, sr) = (vc.remainder(), sc.remainder());
    for (v, f) in vc.zip(sc) {
        for l in 0..LANES {
            let c = f[l] * (base + v[l].as_f64()).max(0.0);
            acc[l] = if c < acc[l] { c } else { acc[l] };
        }
    }
    let m = vr.iter().zip(sr).fold(f64::INFINITY, |m, (v, f)| m.min(f * (base + v.as_f64()).max(0.0)));
    acc.iter().fold(m, |m, &v| m.min(v))
}

/// Reusable per-worker buffers for [`tile_sq_dists`].
pub struct Scratch<T> {
    pub packed: Vec<T>,
    pub dots: Vec<T>,
    pub rows: Vec<usize>,
}

impl<T: Real> Scratch<T> {
    pub fn new(d: usize, k: usize) -> Self {
        Scratch { packed: vec![T::zero(); TILE * d], dots: vec![T::zero(); TILE * k], rows: Vec::with_capacity(TILE) }
    }
}

/// Ask the cache for row i of the row-major `x` (d columns) ahead of its use (a no-op off x86-64
/// or out of range). The rows a bound pass keeps are scattered, so the hardware prefetcher does
/// not see them coming.
#[inline(always)]
pub fn prefetch_row<T>(x: &[T], i: usize, d: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = x.get(i * d..(i + 1) * d).filter(|r| !r.is_empty()) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(row);
        let p = row.as_ptr() as *const i8;
        // every cache line of the row (the last byte's too, for a row not aligned to lines), at
        // most 8: beyond that the hardware prefetcher follows the row on its own
        for off in (0..bytes.min(512)).step_by(64).chain(std::iter::once(bytes - 1)) {
            // SAFETY: a prefetch never faults, and every address lies inside row i
            unsafe { _mm_prefetch(p.add(off), _MM_HINT_T0) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, i, d);
}

/// Rows ahead that a gather of scattered rows prefetches (enough to cover an L3 miss).
pub const PREFETCH_AHEAD: usize = 8;

/// Partial squared distances `p_ij = ‖c_j‖² − 2·x_i·c_j` of the rows `scratch.rows` (indices into
/// `x`, at most `TILE`) to all `k` centres, row after row in `scratch.dots`; the squared distance is
/// `‖x_i‖² + p_ij`. Dropping ‖x‖² keeps the per-element work to one fused multiply-add, and the row
/// scans ([`top2`]) are branch-free reductions.
///
/// `ct` is [`small_d_centers`] of the centres: when it is not empty (float32, small d, AVX-512) the
/// tile goes through the register-blocked kernel [`small_d::partial_dists`] instead of the GEMM.
pub fn tile_partial_dists<T: Real>(
    x: &[T],
    d: usize,
    centers: &[T],
    ct: &[T],
    cc: &[T],
    k: usize,
    scratch: &mut Scratch<T>,
) {
    let m = scratch.rows.len();
    debug_assert!(m <= TILE);
    if m == 0 {
        return;
    }
    let first = scratch.rows[0];
    let rows: &[T] = if scratch.rows[m - 1] == first + m - 1 {
        // A contiguous run of rows (every row of a full pass): no packing copy.
        &x[first * d..(first + m) * d]
    } else {
        for (r, &i) in scratch.rows.iter().enumerate() {
            if let Some(&ahead) = scratch.rows.get(r + PREFETCH_AHEAD) {
                prefetch_row(x, ahead, d);
            }
            scratch.packed[r * d..(r + 1) * d].copy_from_slice(&x[i * d..(i + 1) * d]);
        }
        &scratch.packed[..m * d]
    };
    if !ct.is_empty() && small_d::partial_dists(rows, m, d, ct, cc, k, &mut scratch.dots) {
        return;
    }
    T::gemm_nt(rows, centers, m, k, d, &mut scratch.dots);
    let two = T::of(2.0);
    for row in scratch.dots[..m * k].chunks_exact_mut(k) {
        for (o, &c) in row.iter_mut().zip(cc) {
            *o = c - two * *o;
        }
    }
}

/// Largest dimension routed to [`small_d::partial_dists`]: with d ≤ 32 the GEMM's inner dimension is
/// too short for its packing to pay (measured at d = 16, k = 64: see the kernel's doc).
pub const SMALL_D_MAX: usize = 32;

/// The centres transposed (`d × k`, row l holding coordinate l of every centre) when the tiles of
/// this data type and dimension use [`small_d::partial_dists`], else empty (the GEMM path).
pub fn small_d_centers<T: Real>(centers: &[T], k: usize, d: usize) -> Vec<T> {
    if !small_d::tiles_available::<T>(d) {
        return Vec::new();
    }
    transpose(centers, k, d)
}

/// `centers` (`k × d`) transposed to `d × k`.
pub fn transpose<T: Real>(centers: &[T], k: usize, d: usize) -> Vec<T> {
    let mut ct = vec![T::zero(); d * k];
    for (j, c) in centers.chunks_exact(d).enumerate().take(k) {
        for (l, &v) in c.iter().enumerate() {
            ct[l * k + j] = v;
        }
    }
    ct
}

/// A float32 kernel for the distance tiles of small d (issue 21: Lloyd at d = 16 against faiss).
///
/// faer's GEMM packs both operands for any shape; with an inner dimension of 16 the packing and the
/// edge handling cost as much as the multiply-adds. Here the centres come transposed (`d × k`, built
/// once per pass), a block of `R` rows × 64 centres sits in 16 AVX-512 accumulators, and each
/// coordinate costs 4 loads, `R` broadcasts and `4R` fused multiply-adds; the result
/// `‖c‖² − 2·x·c` is formed in the registers (one `fnmadd`) and stored once, so the tile is written
/// once and never re-read before [`top2`]. Each dot product is a sequential FMA chain over the
/// coordinates: its rounding error is at most d·ε·‖x‖‖c‖, inside [`gemm_slack`].
pub mod small_d {
    /// The row loop of every kernel below: `$kernel::<R>(rows, r, …)` over whole register blocks
    /// of the module's `R` rows, then `$kernel::<1>` for the remaining rows one at a time.
    macro_rules! by_row_blocks {
        ($kernel:ident, $m:expr, $rows:expr; $($arg:expr),*) => {{
            let mut r = 0;
            while r + R <= $m {
                $kernel::<R>($rows, r, $($arg),*);
                r += R;
            }
            while r < $m {
                $kernel::<1>($rows, r, $($arg),*);
                r += 1;
            }
        }};
    }

    /// One column block of `$q` registers (1–4; more are clamped to 4): `$kernel::<RB, Q>(…)`
    /// with `Q` fixed at compile time, so a block's accumulators stay in registers.
    #[cfg(target_arch = "x86_64")]
    macro_rules! by_registers {
        ($kernel:ident, $rb:ident, $q:expr; $($arg:expr),*) => {
            match $q {
                1 => $kernel::<$rb, 1>($($arg),*),
                2 => $kernel::<$rb, 2>($($arg),*),
                3 => $kernel::<$rb, 3>($($arg),*),
                _ => $kernel::<$rb, 4>($($arg),*),
            }
        };
    }

    use super::SMALL_D_MAX;
    use crate::scalar::Real;
    use std::any::TypeId;

    /// Whether tiles of `T` in `d` dimensions use this kernel (float32, d ≤ [`SMALL_D_MAX`], a CPU
    /// with AVX-512F).
    pub fn available<T: Real>(d: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            TypeId::of::<T>() == TypeId::of::<f32>()
                && d <= SMALL_D_MAX
                && std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = d;
            false
        }
    }

    /// Whether the distance tiles of `T` in `d` dimensions use [`partial_dists`]: float32 as
    /// [`available`], and float64 too (issue 21: R's data are float64; at d = 8, k = 24 faer's
    /// packing and edge handling cost more than the multiply-adds, as for float32). The fused
    /// argmin ([`nearest`]) and the bound-free Lloyd pass over it stay float32 only.
    pub fn tiles_available<T: Real>(d: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            available::<T>(d)
                || (TypeId::of::<T>() == TypeId::of::<f64>()
                    && d <= SMALL_D_MAX
                    && std::arch::is_x86_feature_detected!("avx512f"))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = d;
            false
        }
    }

    /// `out[r·k + j] = cc_j − 2·rows_r·c_j` for the `m` rows (`m × d`, row-major) and the `k` centres
    /// given transposed in `ct` (`d × k`). Returns false (nothing written) when [`tiles_available`]
    /// does not hold for `T` and `d`.
    pub fn partial_dists<T: Real>(rows: &[T], m: usize, d: usize, ct: &[T], cc: &[T], k: usize, out: &mut [T]) -> bool {
        if !tiles_available::<T>(d) || rows.len() < m * d || ct.len() < d * k || cc.len() < k || out.len() < m * k {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if TypeId::of::<T>() == TypeId::of::<f64>() {
                // SAFETY: T is f64 (checked by TypeId), so the slices reinterpret exactly.
                let cast = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f64, s.len()) };
                let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f64, out.len()) };
                // SAFETY: AVX-512F was detected at run time; the bounds were checked above.
                unsafe { avx512_f64::partial_dists(cast(rows), m, d, cast(ct), cast(cc), k, out) };
                return true;
            }
            // SAFETY: T is f32 (`tiles_available` holds and T is not f64), so the slices
            // reinterpret exactly.
            let cast = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f32, s.len()) };
            let out = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len()) };
            // SAFETY: AVX-512F was detected at run time; the bounds were checked above.
            unsafe {
                avx512::partial_dists(cast(rows), m, d, cast(ct), cast(cc), k, out);
            }
        }
        true
    }

    /// `out[r]` = the first index j minimising `cc_j − 2·rows_r·c_j` (the values of
    /// [`partial_dists`], bit for bit), for the `m` rows: the argmin of [`super::top2`] on the tile,
    /// without writing the tile. Index 0 when no value is below ∞. Returns false (nothing written)
    /// when [`available`] does not hold for `T` and `d`.
    pub fn nearest<T: Real>(rows: &[T], m: usize, d: usize, ct: &[T], cc: &[T], k: usize, out: &mut [u32]) -> bool {
        if !tiles_available::<T>(d) || rows.len() < m * d || ct.len() < d * k || cc.len() < k || out.len() < m {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if TypeId::of::<T>() == TypeId::of::<f64>() {
                // SAFETY: T is f64 (checked by TypeId), so the slices reinterpret exactly.
                let cast = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f64, s.len()) };
                // SAFETY: AVX-512F was detected at run time; the bounds were checked above.
                unsafe { avx512_f64::nearest(cast(rows), m, d, cast(ct), cast(cc), k, out) };
                return true;
            }
            // SAFETY: T is f32 (`tiles_available` holds and T is not f64), so the slices
            // reinterpret exactly.
            let cast = |s: &[T]| unsafe { std::slice::from_raw_parts(s.as_ptr() as *const f32, s.len()) };
            // SAFETY: AVX-512F was detected at run time; the bounds were checked above.
            unsafe {
                avx512::nearest(cast(rows), m, d, cast(ct), cast(cc), k, out);
            }
        }
        true
    }

    /// [`avx512`]'s `partial_dists` for float64: 8 lanes per register, so a block is `R` rows ×
    /// 32 centres (16 accumulators, as for float32). Each dot product is the same sequential FMA
    /// chain over the coordinates, so its rounding is bounded as there (inside [`gemm_slack`]).
    ///
    /// [`gemm_slack`]: super::gemm_slack
    #[cfg(target_arch = "x86_64")]
    mod avx512_f64 {
        use std::arch::x86_64::*;

        /// Rows per register block.
        const R: usize = 4;
        /// Centres per block: 4 registers of 8 lanes.
        const C: usize = 32;

        /// Mask of the lanes of the 8-centre register starting at `j0` that exist (j < k).
        #[inline(always)]
        fn lanes(j0: usize, k: usize) -> __mmask8 {
            if j0 >= k {
                0
            } else {
                let w = (k - j0).min(8);
                ((1u32 << w) - 1) as __mmask8
            }
        }

        #[target_feature(enable = "avx512f")]
        pub unsafe fn partial_dists(
            rows: &[f64],
            m: usize,
            d: usize,
            ct: &[f64],
            cc: &[f64],
            k: usize,
            out: &mut [f64],
        ) {
            by_row_blocks!(block, m, rows; d, ct, cc, k, out);
        }

        /// Rows `r0..r0 + RB` against all centres, `C` centres (4 registers) at a time; the last
        /// block takes only the registers its centres fill (k = 48: 32 + 16 centres in 4 + 2
        /// registers, not 4 + 4 with two masked off, which were a quarter of the multiply-adds).
        #[inline(always)]
        unsafe fn block<const RB: usize>(
            rows: &[f64],
            r0: usize,
            d: usize,
            ct: &[f64],
            cc: &[f64],
            k: usize,
            out: &mut [f64],
        ) {
            let mut j0 = 0;
            while j0 < k {
                by_registers!(cols, RB, (k - j0).div_ceil(8); rows, r0, d, ct, cc, k, out, j0);
                j0 += C;
            }
        }

        /// Rows `r0..r0 + RB` against the centres `j0..j0 + 8·Q` (masked past k), `Q` registers
        /// per row.
        #[allow(clippy::too_many_arguments)]
        #[inline(always)]
        unsafe fn cols<const RB: usize, const Q: usize>(
            rows: &[f64],
            r0: usize,
            d: usize,
            ct: &[f64],
            cc: &[f64],
            k: usize,
            out: &mut [f64],
            j0: usize,
        ) {
            let x = rows.as_ptr().add(r0 * d);
            let two = _mm512_set1_pd(2.0);
            let (masks, acc) = dots::<RB, Q>(x, d, ct, k, j0);
            let ccv: [__m512d; Q] =
                std::array::from_fn(|q| _mm512_maskz_loadu_pd(masks[q], cc.as_ptr().wrapping_add(j0 + 8 * q)));
            for (rr, a) in acc.iter().enumerate() {
                let o = out.as_mut_ptr().add((r0 + rr) * k + j0);
                for q in 0..Q {
                    if masks[q] != 0 {
                        _mm512_mask_storeu_pd(o.add(8 * q), masks[q], _mm512_fnmadd_pd(two, a[q], ccv[q]));
                    }
                }
            }
        }

        /// The dot products of rows `x..x + RB·d` with the centres `j0..j0 + 8·Q` (lanes past k
        /// masked to 0), with the masks: one sequential FMA chain over the coordinates per product,
        /// the same for the tile ([`cols`]) and the fused argmin ([`nearest`]).
        #[inline(always)]
        unsafe fn dots<const RB: usize, const Q: usize>(
            x: *const f64,
            d: usize,
            ct: &[f64],
            k: usize,
            j0: usize,
        ) -> ([__mmask8; Q], [[__m512d; Q]; RB]) {
            let masks: [__mmask8; Q] = std::array::from_fn(|q| lanes(j0 + 8 * q, k));
            let mut acc = [[_mm512_setzero_pd(); Q]; RB];
            for l in 0..d {
                let c = ct.as_ptr().add(l * k + j0);
                // wrapping_add: a register past k is masked off entirely (no lane is read)
                let cv: [__m512d; Q] = std::array::from_fn(|q| _mm512_maskz_loadu_pd(masks[q], c.wrapping_add(8 * q)));
                for (rr, a) in acc.iter_mut().enumerate() {
                    let xv = _mm512_set1_pd(*x.add(rr * d + l));
                    for q in 0..Q {
                        a[q] = _mm512_fmadd_pd(xv, cv[q], a[q]);
                    }
                }
            }
            (masks, acc)
        }

        /// The first index minimising [`partial_dists`]' values of each row, without writing the
        /// tile: `out[r]` for the `m` rows (see `small_d::nearest`).
        #[target_feature(enable = "avx512f")]
        pub unsafe fn nearest(rows: &[f64], m: usize, d: usize, ct: &[f64], cc: &[f64], k: usize, out: &mut [u32]) {
            by_row_blocks!(nearest_block, m, rows; d, ct, cc, k, out);
        }

        /// [`block`]'s values for rows `r0..r0 + RB`, reduced in the registers: per lane the
        /// smallest value and the first index it occurs at (strictly smaller values replace it,
        /// and the indices grow), then across the lanes the smallest value at its lowest index.
        #[inline(always)]
        unsafe fn nearest_block<const RB: usize>(
            rows: &[f64],
            r0: usize,
            d: usize,
            ct: &[f64],
            cc: &[f64],
            k: usize,
            out: &mut [u32],
        ) {
            let mut best = [_mm512_set1_pd(f64::INFINITY); RB];
            let mut best_j = [_mm512_setzero_si512(); RB];
            let mut j0 = 0;
            while j0 < k {
                by_registers!(nearest_cols, RB, (k - j0).div_ceil(8); rows, r0, d, ct, cc, k, j0, &mut best, &mut best_j);
                j0 += C;
            }
            for rr in 0..RB {
                let min = _mm512_reduce_min_pd(best[rr]);
                let at = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(best[rr], _mm512_set1_pd(min));
                let j = _mm512_mask_reduce_min_epi64(at, best_j[rr]);
                // no value below ∞ (every lane ∞ or never set): index 0, as `top2` gives
                *out.get_unchecked_mut(r0 + rr) = if min < f64::INFINITY { j as u32 } else { 0 };
            }
        }

        /// One column block of [`nearest_block`]: the centres `j0..j0 + 8·Q` folded into the
        /// running per-lane minima.
        #[allow(clippy::too_many_arguments)]
        #[inline(always)]
        unsafe fn nearest_cols<const RB: usize, const Q: usize>(
            rows: &[f64],
            r0: usize,
            d: usize,
            ct: &[f64],
            cc: &[f64],
            k: usize,
            j0: usize,
            best: &mut [__m512d; RB],
            best_j: &mut [__m512i; RB],
        ) {
            let x = rows.as_ptr().add(r0 * d);
            let two = _mm512_set1_pd(2.0);
            let lane_idx = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
            let (masks, acc) = dots::<RB, Q>(x, d, ct, k, j0);
            let ccv: [__m512d; Q] =
                std::array::from_fn(|q| _mm512_maskz_loadu_pd(masks[q], cc.as_ptr().wrapping_add(j0 + 8 * q)));
            for q in 0..Q {
                let jv = _mm512_add_epi64(lane_idx, _mm512_set1_epi64((j0 + 8 * q) as i64));
                for rr in 0..RB {
                    let v = _mm512_fnmadd_pd(two, acc[rr][q], ccv[q]);
                    let lt = _mm512_mask_cmp_pd_mask::<_CMP_LT_OQ>(masks[q], v, best[rr]);
                    best[rr] = _mm512_mask_mov_pd(best[rr], lt, v);
                    best_j[rr] = _mm512_mask_mov_epi64(best_j[rr], lt, jv);
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod avx512 {
        use std::arch::x86_64::*;

        /// Rows per register block.
        const R: usize = 4;

        /// Mask of the lanes of the 16-centre block starting at `j0` that exist (j < k).
        #[inline(always)]
        fn lanes(j0: usize, k: usize) -> __mmask16 {
            let w = (k - j0).min(16);
            if w == 16 {
                0xFFFF
            } else {
                ((1u32 << w) - 1) as __mmask16
            }
        }

        #[target_feature(enable = "avx512f")]
        pub unsafe fn partial_dists(
            rows: &[f32],
            m: usize,
            d: usize,
            ct: &[f32],
            cc: &[f32],
            k: usize,
            out: &mut [f32],
        ) {
            by_row_blocks!(block, m, rows; d, ct, cc, k, out);
        }

        #[target_feature(enable = "avx512f")]
        pub unsafe fn nearest(rows: &[f32], m: usize, d: usize, ct: &[f32], cc: &[f32], k: usize, out: &mut [u32]) {
            by_row_blocks!(nearest_block, m, rows; d, ct, cc, k, out);
        }

        /// [`block`]'s values for rows `r0..r0 + RB`, reduced in the registers: per lane the
        /// smallest value and the first index it occurs at (strictly smaller values replace it, and
        /// the indices grow), then across the lanes the smallest value at its lowest index.
        #[inline(always)]
        unsafe fn nearest_block<const RB: usize>(
            rows: &[f32],
            r0: usize,
            d: usize,
            ct: &[f32],
            cc: &[f32],
            k: usize,
            out: &mut [u32],
        ) {
            let x = rows.as_ptr().add(r0 * d);
            let inf = _mm512_set1_ps(f32::INFINITY);
            let lane_idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let mut best = [inf; RB];
            let mut best_j = [_mm512_setzero_si512(); RB];
            let two = _mm512_set1_ps(2.0);
            let mut j0 = 0;
            while j0 < k {
                let (masks, acc) = dots::<RB>(x, d, ct, k, j0);
                let ccv: [__m512; 4] =
                    std::array::from_fn(|q| _mm512_maskz_loadu_ps(masks[q], cc.as_ptr().add(j0 + 16 * q)));
                for q in 0..4 {
                    if masks[q] == 0 {
                        continue;
                    }
                    let jv = _mm512_add_epi32(lane_idx, _mm512_set1_epi32((j0 + 16 * q) as i32));
                    for rr in 0..RB {
                        let v = _mm512_fnmadd_ps(two, acc[rr][q], ccv[q]);
                        let lt = _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(masks[q], v, best[rr]);
                        best[rr] = _mm512_mask_mov_ps(best[rr], lt, v);
                        best_j[rr] = _mm512_mask_mov_epi32(best_j[rr], lt, jv);
                    }
                }
                j0 += 64;
            }
            for rr in 0..RB {
                let min = _mm512_reduce_min_ps(best[rr]);
                let at = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(best[rr], _mm512_set1_ps(min));
                let j = _mm512_mask_reduce_min_epi32(at, best_j[rr]);
                // no value below ∞ (every lane ∞ or never set): index 0, as `top2` gives
                *out.get_unchecked_mut(r0 + rr) = if min < f32::INFINITY { j as u32 } else { 0 };
            }
        }

        /// The dot products of rows `x..x + RB·d` with the centres `j0..j0 + 64` (4 registers, lanes
        /// beyond k masked to 0): one sequential FMA chain over the coordinates per product.
        #[inline(always)]
        unsafe fn dots<const RB: usize>(
            x: *const f32,
            d: usize,
            ct: &[f32],
            k: usize,
            j0: usize,
        ) -> ([__mmask16; 4], [[__m512; 4]; RB]) {
            let masks: [__mmask16; 4] =
                std::array::from_fn(|q| if j0 + 16 * q < k { lanes(j0 + 16 * q, k) } else { 0 });
            let mut acc = [[_mm512_setzero_ps(); 4]; RB];
            for l in 0..d {
                let c = ct.as_ptr().add(l * k + j0);
                let cv: [__m512; 4] = std::array::from_fn(|q| _mm512_maskz_loadu_ps(masks[q], c.add(16 * q)));
                for (rr, a) in acc.iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*x.add(rr * d + l));
                    for q in 0..4 {
                        a[q] = _mm512_fmadd_ps(xv, cv[q], a[q]);
                    }
                }
            }
            (masks, acc)
        }

        /// Rows `r0..r0 + RB` against all centres, 64 centres (4 registers) at a time.
        #[inline(always)]
        unsafe fn block<const RB: usize>(
            rows: &[f32],
            r0: usize,
            d: usize,
            ct: &[f32],
            cc: &[f32],
            k: usize,
            out: &mut [f32],
        ) {
            let x = rows.as_ptr().add(r0 * d);
            let mut j0 = 0;
            while j0 < k {
                let (masks, acc) = dots::<RB>(x, d, ct, k, j0);
                let two = _mm512_set1_ps(2.0);
                let ccv: [__m512; 4] =
                    std::array::from_fn(|q| _mm512_maskz_loadu_ps(masks[q], cc.as_ptr().add(j0 + 16 * q)));
                for (rr, a) in acc.iter().enumerate() {
                    let o = out.as_mut_ptr().add((r0 + rr) * k + j0);
                    for q in 0..4 {
                        if masks[q] != 0 {
                            _mm512_mask_storeu_ps(o.add(16 * q), masks[q], _mm512_fnmadd_ps(two, a[q], ccv[q]));
                        }
                    }
                }
                j0 += 64;
            }
        }
    }
}

/// Lanes of [`top2`]: two AVX registers of f32 (four of f64), so that the running minima form
/// independent dependency chains (one chain per register hides the latency of min/select).
const TOP2_LANES: usize = 16;

/// Smallest value of a row with its first index, and the second smallest value (∞ if k = 1; equal
/// to the smallest when that occurs twice).
///
/// One branch-free pass keeping, per lane, the two smallest values and the chunk where the smallest
/// was first met (a lane keeps its first occurrence: it only takes strictly smaller values), then a
/// pairwise merge of the lanes. The same values as two minimum passes and a scan, without the scan.
///
/// float64 rows on a CPU with AVX-512F take [`top2_avx512::top2_f64`] (the same three values: they
/// do not depend on the order the row is read in), the rest the portable loop below.
#[inline]
pub fn top2<T: Real>(row: &mut [T]) -> (usize, T, T) {
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>() && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: T is f64 (checked by TypeId), so the slice reinterprets exactly.
        let r = unsafe { std::slice::from_raw_parts(row.as_ptr() as *const f64, row.len()) };
        // SAFETY: AVX-512F was detected at run time.
        let (j, p1, p2) = unsafe { top2_avx512::top2_f64(r) };
        return (j, T::of(p1), T::of(p2));
    }
    top2_portable(row)
}

/// [`top2`]'s portable loop (any type and CPU).
#[inline]
pub fn top2_portable<T: Real>(row: &mut [T]) -> (usize, T, T) {
    const L: usize = TOP2_LANES;
    let inf = T::infinity();
    let (mut m1, mut m2, mut at) = ([inf; L], [inf; L], [T::zero(); L]);
    // The chunk index is kept in T (exact below 2^24 chunks for f32, far beyond any k), so that
    // every select works on lanes of one width and vectorises.
    let push = |m1: &mut T, m2: &mut T, at: &mut T, v: T, c: T| {
        let lt = v < *m1;
        let hi = if lt { *m1 } else { v };
        *m2 = if hi < *m2 { hi } else { *m2 };
        *at = if lt { c } else { *at };
        *m1 = if lt { v } else { *m1 };
    };
    let chunks = row.chunks_exact(L);
    let rest = chunks.remainder();
    let n_chunks = chunks.len();
    for (c, ch) in chunks.enumerate() {
        let c = T::of(c as f64);
        for l in 0..L {
            push(&mut m1[l], &mut m2[l], &mut at[l], ch[l], c);
        }
    }
    let c = T::of(n_chunks as f64);
    for (l, &v) in rest.iter().enumerate() {
        push(&mut m1[l], &mut m2[l], &mut at[l], v, c);
    }
    // Lane l's minimum sits at index at_l · L + l. Merge the lanes pairwise (l with l + half),
    // halving the width each step: a log-depth tree of branch-free lane-wise selects (a serial scan
    // over the lanes, or short-circuit tests, would branch on the data and mispredict).
    let mut idx: [T; L] = std::array::from_fn(|l| at[l] * T::of(L as f64) + T::of(l as f64));
    merge_lanes(&mut m1, &mut m2, &mut idx, 8);
    merge_lanes(&mut m1, &mut m2, &mut idx, 4);
    merge_lanes(&mut m1, &mut m2, &mut idx, 2);
    merge_lanes(&mut m1, &mut m2, &mut idx, 1);
    let (p1, p2) = (m1[0], m2[0]);
    // Without any value below ∞ (an empty row, or NaN everywhere) index 0, as a scan would give.
    let j1 = if p1 < inf { idx[0].as_f64() as usize } else { 0 };
    (j1, p1, p2)
}

/// [`top2`] for float64 rows in AVX-512 registers (issue 21: the portable loop spilled its lanes to
/// the stack and merged them with scalar branches; it took a third of a small-d Hartigan run).
///
/// Two sets of 8 lanes (chunks of 8 values alternate between them, the last one masked with ∞)
/// keep per lane the smallest value, its index (the first one: a lane only takes strictly smaller
/// values, and its indices grow) and the second smallest value; then the 16 lanes are merged
/// pairwise as in [`merge_lanes`] (smaller minimum, lower index on ties; second value the smaller
/// of the winner's second and the loser's minimum). Any partition of the row into lanes gives the
/// same three values, so the result is [`top2_portable`]'s bit for bit.
#[cfg(target_arch = "x86_64")]
mod top2_avx512 {
    use std::arch::x86_64::*;

    struct Lanes {
        m1: __m512d,
        m2: __m512d,
        idx: __m512i,
    }

    #[inline(always)]
    unsafe fn push(s: &mut Lanes, v: __m512d, jv: __m512i) {
        let lt = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(v, s.m1);
        // the value that does not become the minimum: the old minimum where v takes its place
        let hi = _mm512_mask_blend_pd(lt, v, s.m1);
        // hi < m2 ? hi : m2 (vminpd returns its second operand unless the first is smaller)
        s.m2 = _mm512_min_pd(hi, s.m2);
        s.idx = _mm512_mask_mov_epi64(s.idx, lt, jv);
        s.m1 = _mm512_mask_mov_pd(s.m1, lt, v);
    }

    /// Lane l takes the better of lanes l and its partner in `b` (see [`super::merge_lanes`]).
    #[inline(always)]
    unsafe fn merge(a: &mut Lanes, b: &Lanes) {
        let a_wins = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(a.m1, b.m1)
            | (_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(a.m1, b.m1) & _mm512_cmplt_epi64_mask(a.idx, b.idx));
        // b wins where a does not
        let w2 = _mm512_mask_blend_pd(a_wins, b.m2, a.m2);
        let lose1 = _mm512_mask_blend_pd(a_wins, a.m1, b.m1);
        a.m1 = _mm512_mask_blend_pd(a_wins, b.m1, a.m1);
        a.idx = _mm512_mask_blend_epi64(a_wins, b.idx, a.idx);
        // lose1 < w2 ? lose1 : w2
        a.m2 = _mm512_min_pd(lose1, w2);
    }

    #[inline(always)]
    unsafe fn permuted(s: &Lanes, p: __m512i) -> Lanes {
        Lanes {
            m1: _mm512_permutexvar_pd(p, s.m1),
            m2: _mm512_permutexvar_pd(p, s.m2),
            idx: _mm512_permutexvar_epi64(p, s.idx),
        }
    }

    #[target_feature(enable = "avx512f")]
    pub unsafe fn top2_f64(row: &[f64]) -> (usize, f64, f64) {
        let k = row.len();
        let inf = _mm512_set1_pd(f64::INFINITY);
        let fresh = || Lanes { m1: inf, m2: inf, idx: _mm512_setzero_si512() };
        let (mut a, mut b) = (fresh(), fresh());
        let step = _mm512_set1_epi64(8);
        let mut jv = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
        let p = row.as_ptr();
        let mut j = 0;
        while j + 16 <= k {
            push(&mut a, _mm512_loadu_pd(p.add(j)), jv);
            jv = _mm512_add_epi64(jv, step);
            push(&mut b, _mm512_loadu_pd(p.add(j + 8)), jv);
            jv = _mm512_add_epi64(jv, step);
            j += 16;
        }
        if j + 8 <= k {
            push(&mut a, _mm512_loadu_pd(p.add(j)), jv);
            jv = _mm512_add_epi64(jv, step);
            j += 8;
        }
        if j < k {
            let mask = ((1u32 << (k - j)) - 1) as __mmask8;
            push(&mut b, _mm512_mask_loadu_pd(inf, mask, p.add(j)), jv);
        }
        merge(&mut a, &b);
        let partner = permuted(&a, _mm512_setr_epi64(4, 5, 6, 7, 0, 1, 2, 3));
        merge(&mut a, &partner);
        let partner = permuted(&a, _mm512_setr_epi64(2, 3, 0, 1, 6, 7, 4, 5));
        merge(&mut a, &partner);
        let partner = permuted(&a, _mm512_setr_epi64(1, 0, 3, 2, 5, 4, 7, 6));
        merge(&mut a, &partner);
        let p1 = _mm512_cvtsd_f64(a.m1);
        let p2 = _mm512_cvtsd_f64(a.m2);
        let j1 = _mm_cvtsi128_si64(_mm512_castsi512_si128(a.idx)) as usize;
        // Without any value below ∞ (an empty row, or NaN everywhere) index 0, as a scan would give.
        (if p1 < f64::INFINITY { j1 } else { 0 }, p1, p2)
    }
}

/// One level of [`top2`]'s merge: lane l takes the better of lanes l and l + `half` — the smaller
/// minimum, the lower index on ties — and as second value the smaller of the winner's second value
/// and the loser's minimum.
#[inline(always)]
fn merge_lanes<T: Real>(m1: &mut [T; TOP2_LANES], m2: &mut [T; TOP2_LANES], idx: &mut [T; TOP2_LANES], half: usize) {
    for l in 0..half {
        let (a1, a2, ai) = (m1[l], m2[l], idx[l]);
        let (b1, b2, bi) = (m1[l + half], m2[l + half], idx[l + half]);
        let a_wins = (a1 < b1) | ((a1 == b1) & (ai < bi));
        let w2 = if a_wins { a2 } else { b2 };
        let lose1 = if a_wins { b1 } else { a1 };
        m1[l] = if a_wins { a1 } else { b1 };
        idx[l] = if a_wins { ai } else { bi };
        m2[l] = if lose1 < w2 { lose1 } else { w2 };
    }
}

/// Rounding slack for a squared distance computed by [`tile_sq_dists`]: bounds derived from GEMM
/// distances are loosened by this much so that a certificate never rests on rounding.
#[inline]
pub fn gemm_slack<T: Real>(xx: f64, cc: f64, d: usize) -> f64 {
    (4.0 + d as f64) * T::EPSILON_F64 * (xx + cc) + f64::MIN_POSITIVE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_and_top2_match_direct_distances() {
        for &d in &[2usize, 7, 33] {
            let n = 40;
            let k = 5;
            let x: Vec<f64> = (0..n * d).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
            let c: Vec<f64> = (0..k * d).map(|i| ((i * 104729) % 97) as f64 / 9.0 - 5.0).collect();
            let xx = row_sq_norms(&x, d);
            let cc: Vec<f64> = row_sq_norms(&c, d);
            let mut s = Scratch::new(d, k);
            s.rows.extend([3usize, 0, 39, 17]);
            tile_partial_dists(&x, d, &c, &[], &cc, k, &mut s);
            for (r, &i) in s.rows.iter().enumerate() {
                let exact: Vec<f64> = (0..k).map(|j| sq_dist(&x[i * d..(i + 1) * d], &c[j * d..(j + 1) * d])).collect();
                for (j, &ex) in exact.iter().enumerate() {
                    assert!((xx[i] + s.dots[r * k + j] - ex).abs() <= 1e-9 * (1.0 + ex), "d={d}");
                }
                let (j1, p1, p2) = top2(&mut s.dots[r * k..(r + 1) * k]);
                let mut sorted = exact.clone();
                sorted.sort_by(f64::total_cmp);
                assert_eq!(exact[j1], sorted[0]);
                assert!((xx[i] + p1 - sorted[0]).abs() < 1e-9 && (xx[i] + p2 - sorted[1]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn top2_matches_sorting_with_ties_and_any_length() {
        let mut state = 12345u64;
        for len in 1..70 {
            for _ in 0..50 {
                let row: Vec<f64> = (0..len)
                    .map(|_| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ((state >> 33) % 7) as f64 // few distinct values: many ties
                    })
                    .collect();
                let mut sorted = row.clone();
                sorted.sort_by(f64::total_cmp);
                let (j1, p1, p2) = top2(&mut row.clone());
                assert_eq!((j1, p1, p2), top2_portable(&mut row.clone()));
                assert_eq!(p1, sorted[0]);
                assert_eq!(p2, if len > 1 { sorted[1] } else { f64::INFINITY });
                assert_eq!(j1, row.iter().position(|&v| v == sorted[0]).unwrap());
            }
        }
    }
}

#[cfg(test)]
mod small_d_tests {
    use super::*;

    #[test]
    fn small_d_kernel_matches_the_gemm_within_the_slack() {
        for &(m, d, k) in &[(256usize, 16usize, 64usize), (7, 3, 5), (37, 32, 130), (1, 1, 1), (9, 16, 17)] {
            let x: Vec<f32> = (0..m * d).map(|i| ((i * 7919) % 101) as f32 / 10.0 - 5.0).collect();
            let c: Vec<f32> = (0..k * d).map(|i| ((i * 104729) % 97) as f32 / 9.0 - 5.0).collect();
            let cc: Vec<f32> = c.chunks_exact(d).map(|r| sq_norm(r) as f32).collect();
            let mut a = Scratch::new(d, k);
            a.rows.extend(0..m);
            let mut b = Scratch::new(d, k);
            b.rows.extend(0..m);
            tile_partial_dists(&x, d, &c, &[], &cc, k, &mut a);
            let ct = transpose(&c, k, d);
            let used = small_d::partial_dists(&x, m, d, &ct, &cc, k, &mut b.dots);
            assert_eq!(used, small_d::available::<f32>(d));
            if !used {
                continue;
            }
            for r in 0..m {
                let xx = sq_norm(&x[r * d..(r + 1) * d]);
                for j in 0..k {
                    let exact = sq_dist(&x[r * d..(r + 1) * d], &c[j * d..(j + 1) * d]);
                    let slack = gemm_slack::<f32>(xx, cc[j] as f64, d);
                    assert!((xx + b.dots[r * k + j] as f64 - exact).abs() <= slack, "m={m} d={d} k={k}");
                }
            }
            // Through the tile entry point, with packed (non-contiguous) rows too.
            let mut s = Scratch::new(d, k);
            s.rows.extend((0..m).rev());
            tile_partial_dists(&x, d, &c, &ct, &cc, k, &mut s);
            for (r, &i) in s.rows.iter().enumerate() {
                assert_eq!(&s.dots[r * k..(r + 1) * k], &b.dots[i * k..(i + 1) * k]);
            }
            // The fused argmin is top2's first index on the same tile (ties included: the
            // patterned data repeats values).
            let mut j = vec![u32::MAX; m];
            assert!(small_d::nearest(&x, m, d, &ct, &cc, k, &mut j));
            for (r, &jr) in j.iter().enumerate() {
                let mut row = b.dots[r * k..(r + 1) * k].to_vec();
                assert_eq!(jr as usize, top2(&mut row).0, "m={m} d={d} k={k} row {r}");
            }
            // A tied row (every centre equal) gives index 0.
            let same: Vec<f32> = c[..d].repeat(k);
            let tsame = transpose(&same, k, d);
            let ccs = vec![cc[0]; k];
            assert!(small_d::nearest(&x, m, d, &tsame, &ccs, k, &mut j));
            assert!(j.iter().all(|&v| v == 0));
        }
        assert!(!small_d::available::<f64>(16));
    }

    #[test]
    fn small_d_f64_tiles_match_the_gemm_within_the_slack() {
        for &(m, d, k) in
            &[(256usize, 8usize, 24usize), (7, 3, 5), (37, 32, 130), (1, 1, 1), (9, 16, 17), (13, 12, 48), (11, 4, 9)]
        {
            let x: Vec<f64> = (0..m * d).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
            let c: Vec<f64> = (0..k * d).map(|i| ((i * 104729) % 97) as f64 / 9.0 - 5.0).collect();
            let cc: Vec<f64> = c.chunks_exact(d).map(sq_norm).collect();
            let ct = small_d_centers(&c, k, d);
            assert_eq!(ct.is_empty(), !small_d::tiles_available::<f64>(d));
            if ct.is_empty() {
                continue;
            }
            let mut g = Scratch::new(d, k);
            g.rows.extend(0..m);
            tile_partial_dists(&x, d, &c, &[], &cc, k, &mut g); // the GEMM
            let mut s = Scratch::new(d, k);
            s.rows.extend((0..m).rev()); // packed rows
            tile_partial_dists(&x, d, &c, &ct, &cc, k, &mut s);
            for (r, &i) in s.rows.iter().enumerate() {
                let xx = sq_norm(&x[i * d..(i + 1) * d]);
                for j in 0..k {
                    let exact = sq_dist(&x[i * d..(i + 1) * d], &c[j * d..(j + 1) * d]);
                    let slack = gemm_slack::<f64>(xx, cc[j], d);
                    let v = s.dots[r * k + j];
                    assert!((xx + v - exact).abs() <= slack, "m={m} d={d} k={k}");
                    assert!((v - g.dots[i * k + j]).abs() <= slack, "m={m} d={d} k={k}");
                }
            }
            // The fused argmin is top2's first index on the same tile, bit for bit (ties
            // included: the patterned data repeat values), for every width of the last block.
            let mut j = vec![u32::MAX; m];
            assert!(small_d::nearest(&x, m, d, &ct, &cc, k, &mut j));
            for (r, &i) in s.rows.iter().enumerate() {
                let mut row = s.dots[r * k..(r + 1) * k].to_vec();
                assert_eq!(j[i] as usize, top2(&mut row).0, "m={m} d={d} k={k} row {i}");
            }
            let same: Vec<f64> = c[..d].repeat(k);
            let ccs = vec![cc[0]; k];
            assert!(small_d::nearest(&x, m, d, &small_d_centers(&same, k, d), &ccs, k, &mut j));
            assert!(j.iter().all(|&v| v == 0), "a tied row gives index 0");
        }
        assert!(!small_d::tiles_available::<f64>(SMALL_D_MAX + 1));
    }

    #[test]
    #[ignore]
    fn time_small_d_f64_against_the_gemm() {
        for &(d, k) in &[(8usize, 24usize), (12, 48), (16, 64), (32, 32), (32, 64)] {
            let m = 256;
            let x: Vec<f64> = (0..m * d).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
            let c: Vec<f64> = (0..k * d).map(|i| ((i * 104729) % 97) as f64 / 9.0 - 5.0).collect();
            let cc: Vec<f64> = c.chunks_exact(d).map(sq_norm).collect();
            let ct = transpose(&c, k, d);
            let mut s = Scratch::new(d, k);
            s.rows.extend(0..m);
            let reps = 4000;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                tile_partial_dists(&x, d, &c, &[], &cc, k, &mut s);
                std::hint::black_box(&s.dots);
            }
            let tg = t.elapsed().as_secs_f64() / reps as f64;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                small_d::partial_dists(&x, m, d, &ct, &cc, k, &mut s.dots);
                std::hint::black_box(&s.dots);
            }
            let th = t.elapsed().as_secs_f64() / reps as f64;
            println!("f64 d={d} k={k}: gemm tile {:.2} us, small-d kernel {:.2} us", tg * 1e6, th * 1e6);
        }
    }

    #[test]
    #[ignore]
    fn time_small_d_against_the_gemm() {
        for &(d, k) in &[(16usize, 64usize), (32, 64), (64, 64)] {
            let m = 256;
            let x: Vec<f32> = (0..m * d).map(|i| ((i * 7919) % 101) as f32 / 10.0 - 5.0).collect();
            let c: Vec<f32> = (0..k * d).map(|i| ((i * 104729) % 97) as f32 / 9.0 - 5.0).collect();
            let cc: Vec<f32> = c.chunks_exact(d).map(|r| sq_norm(r) as f32).collect();
            let ct = transpose(&c, k, d);
            let mut s = Scratch::new(d, k);
            s.rows.extend(0..m);
            let reps = 4000;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                tile_partial_dists(&x, d, &c, &[], &cc, k, &mut s);
                std::hint::black_box(&s.dots);
            }
            let tg = t.elapsed().as_secs_f64() / reps as f64;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                small_d::partial_dists(&x, m, d, &ct, &cc, k, &mut s.dots);
                std::hint::black_box(&s.dots);
            }
            let th = t.elapsed().as_secs_f64() / reps as f64;
            println!("d={d} k={k}: gemm tile {:.2} us, small-d kernel {:.2} us", tg * 1e6, th * 1e6);
        }
    }
}
