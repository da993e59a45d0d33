//! `Real`: the floating-point types the core computes in (f32 and f64). k-means and the DPP samplers
//! keep the user's precision end to end; statistics run in f64.
use num_traits::Float;

pub trait Real: Float + Default + Send + Sync + std::fmt::Debug + std::iter::Sum + 'static {
    /// Machine epsilon as an f64 (for rounding slack in bound checks).
    const EPSILON_F64: f64;
    fn as_f64(self) -> f64;
    fn of(x: f64) -> Self;
    /// `out (m×n) = a (m×k, row-major) · b (n×k, row-major)ᵀ`, single-threaded (callers parallelise
    /// over tiles themselves so that results do not depend on the thread count).
    fn gemm_nt(a: &[Self], b: &[Self], m: usize, n: usize, k: usize, out: &mut [Self]);
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const EPSILON_F64: f64 = <$t>::EPSILON as f64;
            #[inline(always)]
            fn as_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn of(x: f64) -> Self {
                x as $t
            }
            fn gemm_nt(a: &[Self], b: &[Self], m: usize, n: usize, k: usize, out: &mut [Self]) {
                use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
                let lhs = MatRef::from_row_major_slice(&a[..m * k], m, k);
                let rhs = MatRef::from_row_major_slice(&b[..n * k], n, k).transpose();
                let dst = MatMut::from_row_major_slice_mut(&mut out[..m * n], m, n);
                matmul(dst, Accum::Replace, lhs, rhs, 1.0 as $t, Par::Seq);
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_nt_matches_naive() {
        let (m, n, k) = (5, 3, 4);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64).sin()).collect();
        let b: Vec<f64> = (0..n * k).map(|i| (i as f64).cos()).collect();
        let mut out = vec![0.0; m * n];
        f64::gemm_nt(&a, &b, m, n, k, &mut out);
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k).map(|l| a[i * k + l] * b[j * k + l]).sum();
                assert!((out[i * n + j] - s).abs() < 1e-12);
            }
        }
    }
}
