//! [`KernelState`]: the conditioning state of the pivot loop for a full symmetric kernel (columns of
//! the Cholesky factor).
use super::PivotState;
use crate::scalar::Real;

/// A full symmetric kernel (row-major n×n); only rows of chosen items are read.
pub struct KernelState<'a, T: Real> {
    k: &'a [T],
    n: usize,
    /// Cholesky columns, one contiguous n-vector per chosen item.
    c: Vec<f64>,
    t: usize,
}

impl<'a, T: Real> KernelState<'a, T> {
    pub fn new(k: &'a [T], n: usize) -> Self {
        KernelState { k, n, c: Vec::new(), t: 0 }
    }
}

impl<'a, T: Real> PivotState for KernelState<'a, T> {
    fn n(&self) -> usize {
        self.n
    }
    fn diagonal(&self) -> crate::Result<Vec<f64>> {
        let what = "the residual variances (one per item)";
        crate::alloc::try_collect(what, (0..self.n).map(|i| self.k[i * self.n + i].as_f64()))
    }
    fn diagonal_at(&self, i: usize) -> f64 {
        self.k[i * self.n + i].as_f64()
    }
    fn residual(&self, i: usize) -> f64 {
        let n = self.n;
        let s: f64 = (0..self.t).map(|s| self.c[s * n + i] * self.c[s * n + i]).sum();
        (self.k[i * n + i].as_f64() - s).max(0.0)
    }
    fn add(&mut self, j: usize, tol: f64) -> Option<f64> {
        let n = self.n;
        let mut col: Vec<f64> = self.k[j * n..(j + 1) * n].iter().map(|&v| Real::as_f64(v)).collect();
        for s in 0..self.t {
            let cs = &self.c[s * n..(s + 1) * n];
            let f = cs[j];
            for (a, b) in col.iter_mut().zip(cs) {
                *a -= f * b;
            }
        }
        let piv = col[j];
        let kjj = self.k[j * n + j].as_f64();
        if !(piv > tol * kjj.max(f64::MIN_POSITIVE)) || piv <= 0.0 {
            return None;
        }
        let inv = 1.0 / piv.sqrt();
        self.c.extend(col.iter().map(|v| v * inv));
        self.t += 1;
        Some(piv)
    }
    fn update(&self, d: &mut [f64]) {
        let n = self.n;
        let c = &self.c[(self.t - 1) * n..self.t * n];
        for (di, ci) in d.iter_mut().zip(c) {
            *di = (*di - ci * ci).max(0.0);
        }
    }
}
