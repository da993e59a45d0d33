//! Thin helpers over faer shared by the capabilities. Dense matrices cross module boundaries as
//! row-major slices plus a shape (the NumPy C layout) or as `faer::Mat<f64>`.
use faer::{Mat, MatRef};
use std::sync::atomic::AtomicBool;

/// View a row-major `rows × cols` slice as a faer matrix (no copy).
pub fn view(values: &[f64], rows: usize, cols: usize) -> MatRef<'_, f64> {
    MatRef::from_row_major_slice(values, rows, cols)
}

/// Copy a faer matrix into a row-major vector (the NumPy C layout).
pub fn to_row_major(m: MatRef<'_, f64>) -> Vec<f64> {
    let mut out = Vec::with_capacity(m.nrows() * m.ncols());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            out.push(m[(i, j)]);
        }
    }
    out
}

/// Owned copy of a row-major slice as a faer matrix.
pub fn to_mat(values: &[f64], rows: usize, cols: usize) -> Mat<f64> {
    view(values, rows, cols).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_row_major() {
        let v: Vec<f64> = (0..6).map(f64::from).collect();
        let m = to_mat(&v, 2, 3);
        assert_eq!(m[(1, 0)], 3.0);
        assert_eq!(to_row_major(m.as_ref()), v);
    }
}

// ---- dpp helpers ----

/// Below this order an eigendecomposition takes well under a second and runs on the calling thread.
const EIGEN_DETACH_ORDER: usize = 500;

/// Eigendecomposition of a symmetric row-major `n × n` matrix (only the lower triangle is read):
/// eigenvalues in nondecreasing order and the eigenvectors as the columns of a row-major `n × n` matrix.
///
/// Every buffer is allocated fallibly after checking that the whole (about 3n² values plus faer's
/// workspace) fits the machine. faer's eigensolver is one uninterruptible call, so from order
/// [`EIGEN_DETACH_ORDER`] on (more than about a tenth of a second) it runs on a helper thread over an
/// owned copy while the caller watches `cancel`: Ctrl-C returns `Err(Interrupted)` at once and the
/// helper finishes on its own and frees its memory. When no thread can be started (memory limits)
/// the call runs on the calling thread instead.
pub fn sym_eigen(a: &[f64], n: usize, cancel: &AtomicBool) -> crate::Result<(Vec<f64>, Vec<f64>)> {
    use crate::alloc::{ensure_fits, try_buffer, try_mat};
    use faer::linalg::evd::{self, ComputeEigenvectors};
    let par = match rayon::current_num_threads() {
        1 => faer::Par::Seq,
        t => faer::Par::rayon(t),
    };
    let scratch = evd::self_adjoint_evd_scratch::<f64>(n, ComputeEigenvectors::Yes, par, Default::default());
    let what = "the eigendecomposition (3 n × n matrices and a workspace)";
    ensure_fits(what, 24.0 * (n as f64).powi(2) + scratch.size_bytes() as f64)?;
    let mut m = try_mat("a copy of the kernel for its eigendecomposition", n, n)?;
    for i in 0..n {
        for j in 0..=i {
            m[(i, j)] = a[i * n + j];
        }
    }
    let u = try_mat("the eigenvectors (n × n)", n, n)?;
    let mem = try_buffer("the eigendecomposition workspace", scratch)?;
    let job = move || -> crate::Result<(Vec<f64>, Vec<f64>)> {
        let (mut u, mut mem) = (u, mem);
        let mut s = faer::diag::Diag::<f64>::zeros(n);
        evd::self_adjoint_evd(
            m.as_ref(),
            s.as_mut(),
            Some(u.as_mut()),
            par,
            faer::dyn_stack::MemStack::new(&mut mem),
            Default::default(),
        )
        .map_err(|e| crate::ThriftyError::numerical("eigendecomposition", format!("{e:?}")))?;
        let vals: Vec<f64> = (0..n).map(|i| s.column_vector()[i]).collect();
        Ok((vals, try_row_major(u.as_ref())?))
    };
    if n < EIGEN_DETACH_ORDER {
        return job();
    }
    crate::threads::watch(job, cancel)
}

/// [`to_row_major`], allocated fallibly.
pub fn try_row_major(m: MatRef<'_, f64>) -> crate::Result<Vec<f64>> {
    let mut out = crate::alloc::try_with_capacity("a copy of a matrix", m.nrows() * m.ncols())?;
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            out.push(m[(i, j)]);
        }
    }
    Ok(out)
}

/// Lower Cholesky factor `L` (row-major) of a symmetric positive-definite matrix, or `None` when a
/// pivot is not positive.
pub fn cholesky_lower(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let llt = view(a, n, n).llt(faer::Side::Lower).ok()?;
    Some(to_row_major(llt.L()))
}

/// Inverse of a symmetric positive-definite matrix (row-major), `Ok(None)` when it is not SPD.
/// faer holds the factor and the inverse (two n × n matrices) besides the result: their total is
/// checked against the machine first and the result is allocated fallibly.
pub fn spd_inverse(a: &[f64], n: usize) -> crate::Result<Option<Vec<f64>>> {
    use faer::linalg::solvers::DenseSolveCore;
    crate::alloc::ensure_fits("the inverse of cov (three n × n matrices)", 24.0 * (n as f64).powi(2))?;
    let Ok(llt) = view(a, n, n).llt(faer::Side::Lower) else {
        return Ok(None);
    };
    try_row_major(llt.inverse().as_ref()).map(Some)
}

/// The full orthogonal factor Q (m×m) of the QR decomposition of `a` (m×n), computed on the
/// calling thread. faer's `Mat::qr` uses the global parallelism, which hands even a 100×50
/// factorisation to the rayon pool (about a millisecond of wake-up when called from outside it).
pub fn full_q_seq(a: MatRef<'_, f64>) -> Mat<f64> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::{householder, qr::no_pivoting::factor};
    use faer::{Conj, Par};
    let (m, n) = a.shape();
    let mut qr = a.to_owned();
    let bs = factor::recommended_block_size::<f64>(m, n);
    let mut coeff = Mat::<f64>::zeros(bs, m.min(n));
    let mut mem = MemBuffer::new(factor::qr_in_place_scratch::<f64>(m, n, bs, Par::Seq, Default::default()));
    factor::qr_in_place(qr.as_mut(), coeff.as_mut(), Par::Seq, MemStack::new(&mut mem), Default::default());
    let mut q = Mat::<f64>::identity(m, m);
    let mut mem =
        MemBuffer::new(householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(m, bs, m));
    householder::apply_block_householder_sequence_on_the_left_in_place_with_conj(
        qr.as_ref().subcols(0, m.min(n)),
        coeff.as_ref(),
        Conj::No,
        q.as_mut(),
        Par::Seq,
        MemStack::new(&mut mem),
    );
    q
}

#[cfg(test)]
mod qr_tests {
    use super::*;

    #[test]
    fn full_q_seq_matches_faer_and_is_orthogonal() {
        let (m, n) = (9, 4);
        let a = Mat::<f64>::from_fn(m, n, |i, j| ((i * 7 + j * 3) % 5) as f64 - 1.5 + (i == j) as u8 as f64);
        let q = full_q_seq(a.as_ref());
        let reference = a.qr().compute_Q();
        for i in 0..m {
            for j in 0..m {
                let qtq: f64 = (0..m).map(|r| q[(r, i)] * q[(r, j)]).sum();
                assert!((qtq - (i == j) as u8 as f64).abs() < 1e-12);
                assert!((q[(i, j)] - reference[(i, j)]).abs() < 1e-12);
            }
        }
    }
}

/// Dot product of a float row (f32 or f64) with an f64 vector, accumulated in f64 over four
/// independent lanes (the sum is bound by add latency otherwise).
#[inline]
pub fn dot_mixed<T: crate::scalar::Real>(a: &[T], b: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let chunks = a.len() / 4;
    for c in 0..chunks {
        for l in 0..4 {
            s[l] += a[4 * c + l].as_f64() * b[4 * c + l];
        }
    }
    let mut tot = s[0] + s[1] + s[2] + s[3];
    for k in 4 * chunks..a.len() {
        tot += a[k].as_f64() * b[k];
    }
    tot
}

// ---- small dense helpers on row-major f64 data (inference) ----
// Fixed summation orders: results are bit-for-bit reproducible on any thread count and machine.

/// Xᵀv for row-major X (n×p).
pub fn xt_v(x: &[f64], n: usize, p: usize, v: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; p];
    for i in 0..n {
        let vi = v[i];
        if vi != 0.0 {
            for (o, &xv) in out.iter_mut().zip(&x[i * p..(i + 1) * p]) {
                *o += vi * xv;
            }
        }
    }
    out
}

/// Xv for row-major X (n×p).
pub fn x_v(x: &[f64], n: usize, p: usize, v: &[f64]) -> Vec<f64> {
    (0..n).map(|i| dot(&x[i * p..(i + 1) * p], v)).collect()
}

#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    // eight independent accumulators over exact chunks: vectorises and keeps a fixed summation order
    let mut acc = [0.0f64; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// OLS of `y` on the columns of `s` (each of length n) without intercept (inputs are centred),
/// by modified Gram–Schmidt. Returns β, or `None` if the columns are (numerically) dependent.
pub fn ols(s: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let k = s.len();
    let mut q: Vec<Vec<f64>> = Vec::with_capacity(k);
    let mut r = vec![0.0; k * k];
    for a in 0..k {
        let mut v = s[a].clone();
        let norm0 = dot(&v, &v).sqrt();
        for b in 0..a {
            let c = dot(&q[b], &v);
            r[b * k + a] = c;
            for (vi, qi) in v.iter_mut().zip(&q[b]) {
                *vi -= c * qi;
            }
        }
        let nrm = dot(&v, &v).sqrt();
        if !(nrm > 1e-10 * norm0) || nrm == 0.0 {
            return None;
        }
        r[a * k + a] = nrm;
        v.iter_mut().for_each(|x| *x /= nrm);
        q.push(v);
    }
    let qty: Vec<f64> = q.iter().map(|qa| dot(qa, y)).collect();
    let mut beta = vec![0.0; k];
    for a in (0..k).rev() {
        let mut acc = qty[a];
        for b in a + 1..k {
            acc -= r[a * k + b] * beta[b];
        }
        beta[a] = acc / r[a * k + a];
    }
    Some(beta)
}

/// Inverse of an upper-triangular k×k matrix (row-major; the strict lower part is ignored).
pub fn invert_upper(u: &[f64], k: usize) -> Vec<f64> {
    let mut inv = vec![0.0; k * k];
    for col in 0..k {
        for row in (0..=col).rev() {
            let mut acc = if row == col { 1.0 } else { 0.0 };
            for m in row + 1..=col {
                acc -= u[row * k + m] * inv[m * k + col];
            }
            inv[row * k + col] = acc / u[row * k + row];
        }
    }
    inv
}
