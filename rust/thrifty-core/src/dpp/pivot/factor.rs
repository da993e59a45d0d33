//! [`FactorState`]: the conditioning state of the pivot loop for K = VVᵀ (an orthonormal basis of
//! the chosen rows, classical Gram–Schmidt applied twice; a complement basis once more than half of
//! the rank is chosen).
use super::PivotState;
use crate::dpp::ortho::Dense;
use crate::linalg::dot_mixed;
use crate::scalar::Real;
use rayon::prelude::*;

const PAR_ROWS: usize = 16384;

/// K = VVᵀ, V row-major n×p (features or an orthonormal basis).
pub struct FactorState<'a, T: Dense> {
    v: &'a [T],
    n: usize,
    p: usize,
    /// Orthonormal basis of span{V_a : a ∈ A} in R^p, one contiguous p-vector per chosen item.
    q: Vec<f64>,
    t: usize,
    lev: &'a [f64],
    /// Orthonormal basis of the complement of span(q) in R^p (rows of length p), once switched.
    comp: Option<Vec<f64>>,
}

impl<'a, T: Dense> FactorState<'a, T> {
    /// `lev` must hold the squared row norms of `v`.
    pub fn new(v: &'a [T], n: usize, p: usize, lev: &'a [f64]) -> Self {
        FactorState { v, n, p, q: Vec::with_capacity(p * p.min(64)), t: 0, lev, comp: None }
    }

    fn comp_rows(&self) -> usize {
        self.comp.as_ref().map_or(0, |c| c.len() / self.p)
    }
    #[inline]
    fn row(&self, i: usize) -> &[T] {
        &self.v[i * self.p..(i + 1) * self.p]
    }
}

impl<'a, T: Dense> PivotState for FactorState<'a, T> {
    fn n(&self) -> usize {
        self.n
    }
    fn diagonal(&self) -> crate::Result<Vec<f64>> {
        crate::alloc::try_collect("the residual variances (one per item)", self.lev.iter().copied())
    }
    fn diagonal_at(&self, i: usize) -> f64 {
        self.lev[i]
    }
    fn residual(&self, i: usize) -> f64 {
        if self.comp.is_some() {
            let mut o = [0.0];
            self.residuals(&[i], &mut o);
            return o[0];
        }
        let r = self.row(i);
        let mut proj = 0.0;
        for s in 0..self.t {
            let c = dot_mixed(r, &self.q[s * self.p..(s + 1) * self.p]);
            proj += c * c;
        }
        (self.lev[i] - proj).max(0.0)
    }
    fn residuals(&self, idx: &[usize], out: &mut [f64]) {
        let (p, t, b) = (self.p, self.t, idx.len());
        if let Some(comp) = &self.comp {
            let m = comp.len() / p;
            if m == 0 {
                out[..b].iter_mut().for_each(|o| *o = 0.0);
                return;
            }
            let mut rows = Vec::with_capacity(b * p);
            for &i in idx {
                rows.extend(self.row(i).iter().map(|&v| Real::as_f64(v)));
            }
            let mut c = vec![0.0; b * m];
            f64::gemm_nt(&rows, comp, b, m, p, &mut c);
            for (a, o) in out.iter_mut().take(b).enumerate() {
                *o = c[a * m..(a + 1) * m].iter().map(|v| v * v).sum();
            }
            return;
        }
        if t == 0 {
            for (o, &i) in out.iter_mut().zip(idx) {
                *o = self.lev[i];
            }
            return;
        }
        let mut rows = Vec::with_capacity(b * p);
        for &i in idx {
            rows.extend(self.row(i).iter().map(|&v| Real::as_f64(v)));
        }
        let mut c = vec![0.0; b * t];
        f64::gemm_nt(&rows, &self.q[..t * p], b, t, p, &mut c);
        for (a, (o, &i)) in out.iter_mut().zip(idx).enumerate() {
            let proj: f64 = c[a * t..(a + 1) * t].iter().map(|v| v * v).sum();
            *o = (self.lev[i] - proj).max(0.0);
        }
    }
    fn add(&mut self, j: usize, tol: f64) -> Option<f64> {
        let p = self.p;
        if self.comp.is_some() {
            return self.add_complement(j, tol);
        }
        let mut x: Vec<f64> = self.row(j).iter().map(|&v| Real::as_f64(v)).collect();
        let norm0: f64 = x.iter().map(|v| v * v).sum();
        // Classical Gram–Schmidt, twice ("twice is enough"): the re-orthogonalisation guard.
        // x ← x − Qᵀ(Qx) as two GEMVs (faer, SIMD).
        if self.t > 0 {
            use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
            let t = self.t;
            let qm = MatRef::from_row_major_slice(&self.q[..t * p], t, p);
            let mut c = vec![0.0; t];
            for _ in 0..2 {
                matmul(
                    MatMut::from_column_major_slice_mut(&mut c, t, 1),
                    Accum::Replace,
                    qm,
                    MatRef::from_column_major_slice(&x, p, 1),
                    1.0,
                    Par::Seq,
                );
                matmul(
                    MatMut::from_row_major_slice_mut(&mut x, 1, p),
                    Accum::Add,
                    MatRef::from_row_major_slice(&c, 1, t),
                    qm,
                    -1.0,
                    Par::Seq,
                );
            }
        }
        let nrm2: f64 = x.iter().map(|v| v * v).sum();
        if !(nrm2 > tol * norm0.max(f64::MIN_POSITIVE)) || nrm2 <= 0.0 {
            return None;
        }
        let inv = 1.0 / nrm2.sqrt();
        self.q.extend(x.iter().map(|v| v * inv));
        self.t += 1;
        Some(nrm2)
    }
    fn use_complement(&mut self) {
        if self.comp.is_some() || self.t == 0 {
            return;
        }
        let (p, t) = (self.p, self.t);
        // The switch only saves time: when its p × p matrices do not fit, stay in the direct form.
        let bytes = 8.0 * (p as f64) * (2.0 * p as f64 + t as f64);
        if crate::alloc::ensure_fits("the complement basis", bytes).is_err() {
            return;
        }
        // Complete the chosen directions to an orthonormal basis of R^p (Householder QR of Qᵀ).
        let qt = faer::Mat::<f64>::from_fn(p, t, |i, s| self.q[s * p + i]);
        let full = crate::linalg::full_q_seq(qt.as_ref());
        let m = p - t;
        let mut comp = vec![0.0; m * p];
        for r in 0..m {
            for i in 0..p {
                comp[r * p + i] = full[(i, t + r)];
            }
        }
        self.comp = Some(comp);
    }
    fn update(&self, d: &mut [f64]) {
        let p = self.p;
        let q: Vec<T> = self.q[(self.t - 1) * p..self.t * p].iter().map(|&v| T::of(v)).collect();
        // c = V q blockwise (GEMV through the GEMM kernel), then d ← max(d − c², 0).
        let body = |(ci, dc): (usize, &mut [f64])| {
            let b = dc.len();
            let rows = &self.v[ci * PAR_ROWS * p..(ci * PAR_ROWS + b) * p];
            let mut c = vec![T::zero(); b];
            T::mul_block(rows, b, p, &q, 1, &mut c);
            for (di, cv) in dc.iter_mut().zip(c) {
                let cv = cv.as_f64();
                *di = (*di - cv * cv).max(0.0);
            }
        };
        if self.n >= 2 * PAR_ROWS {
            d.par_chunks_mut(PAR_ROWS).enumerate().for_each(body);
        } else {
            d.chunks_mut(PAR_ROWS).enumerate().for_each(body);
        }
    }
}

impl<'a, T: Dense> FactorState<'a, T> {
    /// `add` in complement form: w = P u_j is the residual in complement coordinates; a Householder
    /// reflection maps w/‖w‖ to e₁ and the remaining rows span the new complement.
    fn add_complement(&mut self, j: usize, tol: f64) -> Option<f64> {
        let p = self.p;
        let m = self.comp_rows();
        if m == 0 {
            return None;
        }
        let u: Vec<f64> = self.row(j).iter().map(|&v| Real::as_f64(v)).collect();
        let norm0: f64 = u.iter().map(|v| v * v).sum();
        let comp = self.comp.as_mut()?;
        let mut w = vec![0.0; m];
        f64::gemm_nt(comp, &u, m, 1, p, &mut w);
        let nrm2: f64 = w.iter().map(|v| v * v).sum();
        if !(nrm2 > tol * norm0.max(f64::MIN_POSITIVE)) || nrm2 <= 0.0 {
            return None;
        }
        let nrm = nrm2.sqrt();
        // v = w/‖w‖ + sign(w₀)e₁; H = I − 2vvᵀ/‖v‖² maps w/‖w‖ to −sign(w₀)e₁.
        let mut v: Vec<f64> = w.iter().map(|x| x / nrm).collect();
        let sgn = if v[0] >= 0.0 { 1.0 } else { -1.0 };
        v[0] += sgn;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        // y = vᵀP (length p), then P ← P − (2/vv) v yᵀ, and drop the first row.
        let mut y = vec![0.0; p];
        for (r, vr) in v.iter().enumerate() {
            if *vr != 0.0 {
                let row = &comp[r * p..(r + 1) * p];
                for (yi, ci) in y.iter_mut().zip(row) {
                    *yi += vr * ci;
                }
            }
        }
        let f = 2.0 / vv;
        for (r, vr) in v.iter().enumerate().skip(1) {
            let row = &mut comp[r * p..(r + 1) * p];
            let g = f * vr;
            for (ci, yi) in row.iter_mut().zip(&y) {
                *ci -= g * yi;
            }
        }
        comp.drain(..p);
        self.t += 1;
        Some(nrm2)
    }
}
