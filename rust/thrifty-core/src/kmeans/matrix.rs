//! The data matrix of a k-means fit: dense row-major, or CSR (compressed sparse rows) read in
//! place — never densified. Every access the algorithms need goes through here:
//!
//! * distance tiles: ‖c‖² − 2·x·c for a tile of rows against all centres — one GEMM for dense
//!   rows; for a sparse row a sum over its non-zeros of `v · Cᵀ[col, :]` (centres transposed,
//!   `d × k`, so each non-zero reads one contiguous row of k values), i.e. O(nnz·k) per row;
//! * exact distances to one centre: per coordinate for dense rows; ‖x‖² − 2·x·c + ‖c‖² with a
//!   sparse dot and the centre's cached squared norm for sparse rows (as scikit-learn's sparse path);
//! * centre sums: `out += w·x` over the non-zeros.
use super::distance::{prefetch_row, small_d_centers, sq_dist_f64, tile_partial_dists, transpose, Scratch};
use crate::error::{Result, ThriftyError};
use crate::scalar::Real;

/// A CSR matrix borrowed read-only: row i holds `values[indptr[i]..indptr[i+1]]` at columns
/// `indices[..]` (any order; duplicates must have been summed by the caller).
#[derive(Clone, Copy, Debug)]
pub struct Csr<'a, T> {
    pub indptr: &'a [usize],
    pub indices: &'a [u32],
    pub values: &'a [T],
}

/// The data of a fit (or of predict / transform / inertia).
#[derive(Clone, Copy, Debug)]
pub enum Matrix<'a, T> {
    /// `n × d`, row-major.
    Dense(&'a [T]),
    Csr(Csr<'a, T>),
}

impl<T: Real> Csr<'_, T> {
    /// `Err` naming X unless this is a well-formed `n × d` CSR matrix with finite values.
    pub fn check(&self, n: usize, d: usize) -> Result<()> {
        let bad = |msg: String| Err(ThriftyError::shape("X", msg));
        if self.indptr.len() != n + 1 || self.indptr[0] != 0 {
            return bad(format!("CSR indptr must have n_samples + 1 = {} entries starting at 0", n + 1));
        }
        if self.indptr.windows(2).any(|p| p[1] < p[0]) {
            return bad("CSR indptr must be non-decreasing".into());
        }
        let nnz = self.indptr[n];
        if self.indices.len() < nnz || self.values.len() < nnz {
            return bad(format!("CSR indices and data must hold indptr[-1] = {nnz} entries"));
        }
        if self.indices[..nnz].iter().any(|&j| j as usize >= d) {
            return bad(format!("CSR column index out of range for {d} features"));
        }
        if self.values[..nnz].iter().any(|v| !v.is_finite()) {
            return Err(ThriftyError::NotFinite { arg: "X" });
        }
        Ok(())
    }

    #[inline]
    fn row(&self, i: usize) -> (&[u32], &[T]) {
        let (a, b) = (self.indptr[i], self.indptr[i + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }
}

impl<T: Real> Matrix<'_, T> {
    pub fn is_sparse(&self) -> bool {
        matches!(self, Matrix::Csr(_))
    }

    /// x_i · c (f64).
    #[inline]
    pub fn dot_f64(&self, i: usize, d: usize, c: &[f64]) -> f64 {
        match self {
            Matrix::Dense(x) => x[i * d..(i + 1) * d].iter().zip(c).map(|(a, b)| a.as_f64() * b).sum(),
            Matrix::Csr(m) => {
                let (idx, val) = m.row(i);
                idx.iter().zip(val).map(|(&j, v)| v.as_f64() * c[j as usize]).sum()
            }
        }
    }

    /// ‖x_i − c‖²: exact per coordinate for dense rows; for sparse rows from the row's squared norm
    /// `xx_i`, a sparse dot and the centre's squared norm `cn` (clamped at 0).
    #[inline(always)]
    pub fn dist2(&self, i: usize, d: usize, xx_i: f64, c: &[f64], cn: f64) -> f64 {
        match self {
            Matrix::Dense(x) => sq_dist_f64(&x[i * d..(i + 1) * d], c),
            Matrix::Csr(_) => (xx_i - 2.0 * self.dot_f64(i, d, c) + cn).max(0.0),
        }
    }

    /// Ask the cache for dense row i ahead of its use (a no-op for CSR rows): [`prefetch_row`].
    #[inline(always)]
    pub fn prefetch_row(&self, i: usize, d: usize) {
        if let Matrix::Dense(x) = self {
            prefetch_row(x, i, d);
        }
    }

    /// `out += w · x_i` (out has length d).
    #[inline]
    pub fn axpy(&self, i: usize, d: usize, w: f64, out: &mut [f64]) {
        match self {
            Matrix::Dense(x) => {
                for (o, v) in out.iter_mut().zip(&x[i * d..(i + 1) * d]) {
                    *o += w * v.as_f64();
                }
            }
            Matrix::Csr(m) => {
                let (idx, val) = m.row(i);
                for (&j, v) in idx.iter().zip(val) {
                    out[j as usize] += w * v.as_f64();
                }
            }
        }
    }

    /// Row i written densely into `out` (length d).
    pub fn copy_row(&self, i: usize, d: usize, out: &mut [T]) {
        match self {
            Matrix::Dense(x) => out.copy_from_slice(&x[i * d..(i + 1) * d]),
            Matrix::Csr(m) => {
                out.iter_mut().for_each(|o| *o = T::zero());
                let (idx, val) = m.row(i);
                for (&j, &v) in idx.iter().zip(val) {
                    out[j as usize] = out[j as usize] + v;
                }
            }
        }
    }

    /// Row i appended densely to `out`.
    pub fn push_row(&self, i: usize, d: usize, out: &mut Vec<T>) {
        let start = out.len();
        out.resize(start + d, T::zero());
        self.copy_row(i, d, &mut out[start..]);
    }

    /// Partial squared distances `‖c_j‖² − 2·x_i·c_j` of the rows `s.rows` to the `k` centres, row
    /// after row in `s.dots` (see [`tile_partial_dists`]). `ct` is the centres transposed (`d × k`),
    /// for sparse rows and the small-d dense kernel ([`transpose_centers`]; else empty).
    pub fn tile_partial(&self, d: usize, centers: &[T], ct: &[T], cc: &[T], k: usize, s: &mut Scratch<T>) {
        match self {
            Matrix::Dense(x) => tile_partial_dists(x, d, centers, ct, cc, k, s),
            Matrix::Csr(m) => {
                debug_assert_eq!(ct.len(), d * k);
                let two = T::of(2.0);
                for (r, &i) in s.rows.iter().enumerate() {
                    let out = &mut s.dots[r * k..(r + 1) * k];
                    out.iter_mut().for_each(|o| *o = T::zero());
                    let (idx, val) = m.row(i);
                    for (&j, &v) in idx.iter().zip(val) {
                        let col = &ct[j as usize * k..(j as usize + 1) * k];
                        for (o, &c) in out.iter_mut().zip(col) {
                            *o = *o + v * c;
                        }
                    }
                    for (o, &c) in out.iter_mut().zip(cc) {
                        *o = c - two * *o;
                    }
                }
            }
        }
    }

    /// The centres transposed (`d × k`) when the tile kernel needs them (sparse data, or dense data
    /// on the small-d kernel: [`small_d_centers`]), else empty.
    pub fn transpose_centers(&self, centers: &[T], k: usize, d: usize) -> Vec<T> {
        if !self.is_sparse() {
            return small_d_centers(centers, k, d);
        }
        transpose(centers, k, d)
    }

    /// Squared norm of row i and its contribution to the column sums (`sums += x_i`).
    #[inline]
    pub fn norm_and_sum(&self, i: usize, d: usize, sums: &mut [f64]) -> f64 {
        self.axpy(i, d, 1.0, sums);
        self.row_sq_norm(i, d)
    }

    /// ‖x_i‖² (f64 accumulation).
    #[inline]
    pub fn row_sq_norm(&self, i: usize, d: usize) -> f64 {
        match self {
            Matrix::Dense(x) => super::distance::sq_norm(&x[i * d..(i + 1) * d]),
            Matrix::Csr(m) => m.row(i).1.iter().map(|v| v.as_f64() * v.as_f64()).sum(),
        }
    }
}

/// Squared norms of f64 centres (`k × d`).
pub fn center_norms(c: &[f64], d: usize) -> Vec<f64> {
    c.chunks_exact(d).map(|r| r.iter().map(|v| v * v).sum()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_kernels_match_the_dense_ones() {
        let (n, d, k) = (9usize, 7usize, 4usize);
        let dense: Vec<f64> =
            (0..n * d).map(|i| if (i * 7) % 3 == 0 { ((i * 13) % 11) as f64 - 5.0 } else { 0.0 }).collect();
        let (mut indptr, mut indices, mut values) = (vec![0usize], Vec::new(), Vec::new());
        for i in 0..n {
            for l in (0..d).rev() {
                // reversed column order: kernels must not assume sorted indices
                if dense[i * d + l] != 0.0 {
                    indices.push(l as u32);
                    values.push(dense[i * d + l]);
                }
            }
            indptr.push(indices.len());
        }
        let sp = Matrix::Csr(Csr { indptr: &indptr, indices: &indices, values: &values });
        let de = Matrix::Dense(&dense[..]);
        let Matrix::Csr(csr) = sp else { unreachable!() };
        csr.check(n, d).unwrap();
        let c: Vec<f64> = (0..k * d).map(|i| ((i * 5) % 7) as f64 * 0.5 - 1.0).collect();
        let cn = center_norms(&c, d);
        let cc: Vec<f64> = cn.clone();
        let (mut s1, mut s2) = (Scratch::new(d, k), Scratch::new(d, k));
        s1.rows.extend([0usize, 4, 8, 2]);
        s2.rows.extend([0usize, 4, 8, 2]);
        de.tile_partial(d, &c, &[], &cc, k, &mut s1);
        sp.tile_partial(d, &c, &sp.transpose_centers(&c, k, d), &cc, k, &mut s2);
        for (a, b) in s1.dots[..4 * k].iter().zip(&s2.dots[..4 * k]) {
            assert!((a - b).abs() < 1e-12);
        }
        for i in 0..n {
            let (mut a, mut b) = (vec![0.0; d], vec![0.0; d]);
            let xx = de.norm_and_sum(i, d, &mut a);
            assert_eq!(xx, sp.norm_and_sum(i, d, &mut b));
            assert_eq!(a, b);
            for j in 0..k {
                let cj = &c[j * d..(j + 1) * d];
                assert!((de.dist2(i, d, xx, cj, cn[j]) - sp.dist2(i, d, xx, cj, cn[j])).abs() < 1e-12);
            }
            let (mut r1, mut r2) = (vec![0.0; d], vec![9.0; d]);
            de.copy_row(i, d, &mut r1);
            sp.copy_row(i, d, &mut r2);
            assert_eq!(r1, r2);
        }
        let bad = Csr { indptr: &indptr, indices: &indices, values: &values };
        assert!(bad.check(n, d - 1).is_err() || indices.iter().all(|&j| (j as usize) < d - 1));
        assert!(bad.check(n + 1, d).is_err());
    }
}
