//! The one loop: residual-diagonal pivoted Cholesky with three pivot rules.
//!
//! State: the items chosen so far, A, and the residual diagonal d_i = K_ii − K_iA K_AA⁻¹ K_Ai (the
//! conditional variance of item i given A, i.e. the Schur complement). Each step picks a pivot j,
//! conditions on it, and updates d. The pivot rule is the [`Mode`]:
//! - `Sample`: j with probability d_j / Σd (the exact chain rule of a projection DPP; Σd is the
//!   *actual* sum after clamping, so the probabilities always sum to one);
//! - `Argmax`: j = argmax d (greedy MAP / entropy selection; log det K_AA = Σ log d_pivot);
//! - `AcceptReject`: propose j from a guide table over the leverage scores ℓ_j = K_jj, accept with
//!   probability d_j/ℓ_j (Barthelmé–Tremblay–Amblard 2023). Only d_j of the proposals is computed,
//!   so the cost per sample does not depend on N.
//!
//! Two states implement the conditioning: [`FactorState`] for K = VVᵀ with V an n×p factor (an
//! orthonormal basis of the chosen rows in R^p, built by classical Gram–Schmidt applied twice, the
//! re-orthogonalisation guard), and [`KernelState`] for a full symmetric n×n kernel (columns of the
//! Cholesky factor). Guards: residuals clamped at 0, renormalisation by the actual sum, a rank
//! tolerance below which the loop stops (argmax) or a residual is treated as 0 (sampling).
use super::guide::GuideTable;
use super::ortho::Dense;
use super::check_cancel;
use crate::error::{Result, ThriftyError};
use crate::linalg::dot_mixed;
use crate::rng::{self, Stream};
use crate::scalar::Real;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

const PAR_ROWS: usize = 16384;

/// Conditioning state of the loop.
pub trait PivotState: Sync {
    fn n(&self) -> usize;
    /// Initial residual diagonal (K_ii).
    fn diagonal(&self) -> Vec<f64>;
    /// K_ii of one item.
    fn diagonal_at(&self, i: usize) -> f64;
    /// Current residual of item i (O(p·t) for a factor, O(t) for a kernel).
    fn residual(&self, i: usize) -> f64;
    /// Residuals of several items at once (a GEMM for a factor).
    fn residuals(&self, idx: &[usize], out: &mut [f64]) {
        for (o, &i) in out.iter_mut().zip(idx) {
            *o = self.residual(i);
        }
    }
    /// Condition on item j; returns its residual before conditioning (the Cholesky pivot), or
    /// `None` if it is numerically zero (below `tol`).
    fn add(&mut self, j: usize, tol: f64) -> Option<f64>;
    /// d_i ← max(d_i − c_i², 0) for the newest Cholesky column c.
    fn update(&self, d: &mut [f64]);
    /// Accept/reject hint that more than half of the rank is chosen: a factor state then switches
    /// to a basis of the orthogonal complement, so a residual costs O(p·(p−t)) instead of O(p·t).
    /// After the switch only `residual(s)` and `add` are valid (not `update`).
    fn use_complement(&mut self) {}
}

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
    fn diagonal(&self) -> Vec<f64> {
        self.lev.to_vec()
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
    fn diagonal(&self) -> Vec<f64> {
        (0..self.n).map(|i| self.k[i * self.n + i].as_f64()).collect()
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

/// The pivot rule of [`run`].
pub enum Mode<'a> {
    Sample(&'a mut Stream),
    Argmax,
    AcceptReject(&'a mut Stream, &'a GuideTable),
}

/// The chosen items in order and their pivots (conditional variances); log det K_AA = Σ ln pivot.
#[derive(Clone, Debug, Default)]
pub struct PivotPath {
    pub items: Vec<usize>,
    pub pivots: Vec<f64>,
}

impl PivotPath {
    pub fn log_det(&self) -> f64 {
        self.pivots.iter().map(|p| p.ln()).sum()
    }
}

/// Run the loop for at most `k` steps. `tol` is the relative rank tolerance: argmax stops when the
/// largest residual is below `tol · max K_ii`; sampling treats such residuals as zero. The
/// `AcceptReject` mode needs a state whose diagonal is the guide table's weights and a projection
/// kernel (residuals ≤ leverage); it fails with a numerical error instead of looping forever.
/// Every step first checks `cancel` (`Err(Interrupted)` once raised).
pub fn run<S: PivotState>(state: &mut S, mode: Mode<'_>, k: usize, tol: f64, cancel: &AtomicBool) -> Result<PivotPath> {
    match mode {
        Mode::AcceptReject(rng, table) => accept_reject(state, rng, table, k, tol, cancel),
        Mode::Sample(rng) => chain_rule(state, rng, k, tol, cancel),
        Mode::Argmax => argmax(state, k, tol, cancel),
    }
}

/// Condition on `j` and record it; `false` when its residual is numerically zero.
fn take<S: PivotState>(state: &mut S, path: &mut PivotPath, j: usize, tol: f64) -> bool {
    match state.add(j, tol) {
        Some(piv) => {
            path.items.push(j);
            path.pivots.push(piv);
            true
        }
        None => false,
    }
}

/// Proposals from the guide table over the leverage scores, accepted with probability d_j/ℓ_j.
/// A projection of rank k has Σ K_ii = k; nothing of size n is touched per sample.
fn accept_reject<S: PivotState>(
    state: &mut S,
    rng: &mut Stream,
    table: &GuideTable,
    k: usize,
    tol: f64,
    cancel: &AtomicBool,
) -> Result<PivotPath> {
    let mut path = PivotPath::default();
    let rank = k as f64;
    let max_prop = 1000 * (k + 1) + 10_000;
    let mut idx: Vec<usize> = Vec::with_capacity(256);
    let mut us: Vec<f64> = Vec::with_capacity(256);
    let mut res = vec![0.0; 256];
    while path.items.len() < k {
        check_cancel(cancel)?;
        if 2 * path.items.len() >= k {
            state.use_complement();
        }
        let t = path.items.len() as f64;
        // Proposals are i.i.d.; draw a batch sized to the expected number needed (rank/(rank − t))
        // and take the first accepted one. Unused draws are discarded, which leaves the
        // distribution of the accepted item ∝ ℓ_j · d_j/ℓ_j = d_j.
        let expect = rank / (rank - t).max(1.0);
        let b = ((0.5 * expect).ceil() as usize).clamp(1, 256);
        let mut tries = 0usize;
        'step: loop {
            if tries > max_prop {
                return Err(ThriftyError::numerical(
                    "accept/reject sampler",
                    "no proposal accepted: the basis is not orthonormal or k exceeds the rank",
                ));
            }
            idx.clear();
            us.clear();
            for _ in 0..b {
                idx.push(table.draw(rng));
                us.push(rng::uniform(rng));
            }
            state.residuals(&idx, &mut res[..b]);
            tries += b;
            for a in 0..b {
                let j = idx[a];
                if us[a] * state.diagonal_at(j) < res[a] && take(state, &mut path, j, tol) {
                    break 'step;
                }
            }
        }
    }
    Ok(path)
}

/// The chain rule: j with probability d_j / Σd, Σd the actual sum after clamping (so the
/// probabilities always sum to one), then a full residual update.
fn chain_rule<S: PivotState>(state: &mut S, rng: &mut Stream, k: usize, tol: f64, cancel: &AtomicBool) -> Result<PivotPath> {
    let n = state.n();
    let mut path = PivotPath::default();
    let mut d = state.diagonal();
    let scale = d.iter().cloned().fold(0.0, f64::max);
    let floor = tol * scale;
    while path.items.len() < k {
        check_cancel(cancel)?;
        for v in d.iter_mut() {
            if !(*v > floor) {
                *v = 0.0;
            }
        }
        let total: f64 = d.iter().sum();
        if !(total > 0.0) {
            return Err(ThriftyError::numerical(
                "projection sampler",
                format!("residuals vanished after {} of {k} items (k exceeds the numerical rank)", path.items.len()),
            ));
        }
        let u = rng::uniform(rng) * total;
        let mut acc = 0.0;
        let mut j = n;
        for (i, &v) in d.iter().enumerate() {
            if v > 0.0 {
                acc += v;
                j = i;
                if acc > u {
                    break;
                }
            }
        }
        if take(state, &mut path, j, tol) {
            state.update(&mut d);
        }
        d[j] = 0.0;
    }
    Ok(path)
}

/// Greedy argmax of the residual; stops at the numerical rank (largest residual ≤ tol · max K_ii).
fn argmax<S: PivotState>(state: &mut S, k: usize, tol: f64, cancel: &AtomicBool) -> Result<PivotPath> {
    let n = state.n();
    let mut path = PivotPath::default();
    let mut d = state.diagonal();
    let scale = d.iter().cloned().fold(0.0, f64::max);
    while path.items.len() < k.min(n) {
        check_cancel(cancel)?;
        let (j, dj) = d.iter().enumerate().fold((n, f64::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        if j == n || !(dj > tol * scale) || dj <= 0.0 {
            break;
        }
        if take(state, &mut path, j, tol) {
            state.update(&mut d);
        }
        d[j] = 0.0;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(m: &[f64], k: usize) -> f64 {
        let mut a = m.to_vec();
        let mut d = 1.0;
        for c in 0..k {
            let piv = (c..k).max_by(|&x, &y| a[x * k + c].abs().partial_cmp(&a[y * k + c].abs()).unwrap()).unwrap();
            if a[piv * k + c] == 0.0 {
                return 0.0;
            }
            if piv != c {
                for j in 0..k {
                    a.swap(c * k + j, piv * k + j);
                }
                d = -d;
            }
            d *= a[c * k + c];
            for r in c + 1..k {
                let f = a[r * k + c] / a[c * k + c];
                for j in c..k {
                    a[r * k + j] -= f * a[c * k + j];
                }
            }
        }
        d
    }

    #[test]
    fn argmax_is_greedy_log_det_on_factor_and_kernel() {
        let (n, p) = (9, 4);
        let mut r = rng::stream(5, 0);
        let v: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let lev: Vec<f64> = (0..n).map(|i| (0..p).map(|c| v[i * p + c].powi(2)).sum()).collect();
        let kfull: Vec<f64> = (0..n * n)
            .map(|ij| (0..p).map(|c| v[(ij / n) * p + c] * v[(ij % n) * p + c]).sum())
            .collect();
        let a = run(&mut FactorState::new(&v, n, p, &lev), Mode::Argmax, 3, 1e-12, crate::dpp::never()).unwrap();
        let b = run(&mut KernelState::new(&kfull, n), Mode::Argmax, 3, 1e-12, crate::dpp::never()).unwrap();
        assert_eq!(a.items, b.items);
        // Brute-force greedy on determinants.
        let mut chosen: Vec<usize> = Vec::new();
        for _ in 0..3 {
            let best = (0..n)
                .filter(|i| !chosen.contains(i))
                .max_by(|&x, &y| {
                    let f = |c: usize| {
                        let mut s = chosen.clone();
                        s.push(c);
                        let k = s.len();
                        let sub: Vec<f64> = (0..k * k).map(|t| kfull[s[t / k] * n + s[t % k]]).collect();
                        det(&sub, k)
                    };
                    f(x).partial_cmp(&f(y)).unwrap()
                })
                .unwrap();
            chosen.push(best);
        }
        assert_eq!(a.items, chosen);
        let k = 3;
        let sub: Vec<f64> = (0..k * k).map(|t| kfull[chosen[t / k] * n + chosen[t % k]]).collect();
        assert!((a.log_det() - det(&sub, k).ln()).abs() < 1e-10);
        // Stops at the rank.
        let full = run(&mut FactorState::new(&v, n, p, &lev), Mode::Argmax, n, 1e-10, crate::dpp::never()).unwrap();
        assert_eq!(full.items.len(), p);
    }
}
