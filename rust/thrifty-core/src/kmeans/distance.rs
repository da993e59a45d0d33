//! The fused distance kernel: squared distances of a tile of rows to all centres, computed as
//! ‖x‖² − 2·x·c + ‖c‖² with one small GEMM per tile, consumed inside the tile (argmin, top-2, the
//! Hartigan cost) so that an n×k matrix never exists. Exact per-pair distances (`sq_dist`) are used
//! wherever a decision must not depend on GEMM rounding.
use crate::scalar::Real;

/// Rows per tile: the GEMM output tile is `TILE × k`, small enough to stay in L2 for k ≤ 512.
pub const TILE: usize = 256;

/// Below this dimension a direct loop beats the GEMM call overhead.
const DIRECT_MAX_D: usize = 4;

/// Exact squared distance, accumulated in f64.
#[inline]
pub fn sq_dist<T: Real>(x: &[T], c: &[T]) -> f64 {
    let mut s = 0.0f64;
    for (a, b) in x.iter().zip(c) {
        let t = a.as_f64() - b.as_f64();
        s += t * t;
    }
    s
}

/// Exact squared distance between a row in the data type and a centre kept in f64.
#[inline]
pub fn sq_dist_f64<T: Real>(x: &[T], c: &[f64]) -> f64 {
    let mut s = 0.0f64;
    for (a, b) in x.iter().zip(c) {
        let t = a.as_f64() - *b;
        s += t * t;
    }
    s
}

/// Squared row norms ‖x_i‖² (f64 accumulation).
pub fn row_sq_norms<T: Real>(x: &[T], d: usize) -> Vec<f64> {
    x.chunks_exact(d).map(|r| r.iter().map(|v| v.as_f64() * v.as_f64()).sum()).collect()
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

/// Squared distances of the rows `scratch.rows` (indices into `x`, at most `TILE`) to all `k`
/// centres, written row after row into `scratch.dots` (`rows.len() × k`, clamped at 0).
/// `xx` and `cc` are the squared norms of the rows of `x` and of `centers`.
pub fn tile_sq_dists<T: Real>(
    x: &[T],
    d: usize,
    xx: &[f64],
    centers: &[T],
    cc: &[f64],
    k: usize,
    scratch: &mut Scratch<T>,
) {
    let m = scratch.rows.len();
    debug_assert!(m <= TILE);
    if d <= DIRECT_MAX_D {
        for (r, &i) in scratch.rows.iter().enumerate() {
            let xi = &x[i * d..(i + 1) * d];
            let out = &mut scratch.dots[r * k..(r + 1) * k];
            for (j, o) in out.iter_mut().enumerate() {
                *o = T::of(sq_dist(xi, &centers[j * d..(j + 1) * d]));
            }
        }
        return;
    }
    for (r, &i) in scratch.rows.iter().enumerate() {
        scratch.packed[r * d..(r + 1) * d].copy_from_slice(&x[i * d..(i + 1) * d]);
    }
    T::gemm_nt(&scratch.packed, centers, m, k, d, &mut scratch.dots);
    for (r, &i) in scratch.rows.iter().enumerate() {
        let xi = xx[i];
        let out = &mut scratch.dots[r * k..(r + 1) * k];
        for (o, &c) in out.iter_mut().zip(cc) {
            let v = xi - 2.0 * o.as_f64() + c;
            *o = T::of(if v > 0.0 { v } else { 0.0 });
        }
    }
}

/// Rounding slack for a squared distance computed by [`tile_sq_dists`]: bounds derived from GEMM
/// distances are loosened by this much so that a certificate never rests on rounding.
#[inline]
pub fn gemm_slack<T: Real>(xx: f64, cc: f64, d: usize) -> f64 {
    (4.0 + d as f64) * T::EPSILON_F64 * (xx + cc) + f64::MIN_POSITIVE
}

/// Index of the nearest centre and the squared distance (ties go to the lowest index).
#[inline]
pub fn argmin(row: &[impl Real]) -> (usize, f64) {
    let mut best = 0;
    let mut bv = f64::INFINITY;
    for (j, v) in row.iter().enumerate() {
        let v = v.as_f64();
        if v < bv {
            bv = v;
            best = j;
        }
    }
    (best, bv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_matches_direct_distances() {
        for &d in &[2usize, 7, 33] {
            let n = 40;
            let k = 5;
            let x: Vec<f64> = (0..n * d).map(|i| ((i * 7919) % 101) as f64 / 10.0 - 5.0).collect();
            let c: Vec<f64> = (0..k * d).map(|i| ((i * 104729) % 97) as f64 / 9.0 - 5.0).collect();
            let xx = row_sq_norms(&x, d);
            let cc = row_sq_norms(&c, d);
            let mut s = Scratch::new(d, k);
            s.rows.extend([3usize, 0, 39, 17]);
            tile_sq_dists(&x, d, &xx, &c, &cc, k, &mut s);
            for (r, &i) in s.rows.iter().enumerate() {
                for j in 0..k {
                    let exact = sq_dist(&x[i * d..(i + 1) * d], &c[j * d..(j + 1) * d]);
                    assert!((s.dots[r * k + j] - exact).abs() <= 1e-9 * (1.0 + exact), "d={d}");
                }
            }
        }
    }
}
