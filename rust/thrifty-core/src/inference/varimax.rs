//! Varimax rotation (Kaiser-normalised) by the SVD iteration: with Λ = L R,
//! B = Lᵀ(Λ³ − Λ·diag(1ᵀΛ²)/p), (U, S, Vᵀ) = svd(B), R = U Vᵀ, until ΣS stops growing by more than
//! a factor (1 + tol). The criterion is V(Λ) = Σⱼ[(1/p)Σᵢλᵢⱼ⁴ − ((1/p)Σᵢλᵢⱼ²)²].
//!
//! For k ≤ [`SMALL_K`] the iteration runs on stack arrays: R = U Vᵀ (the polar factor of B) and ΣS come
//! from a one-sided Jacobi SVD of the k×k B ([`polar_small`], exact to rounding), with no allocation per
//! iteration. A B of numerical rank below k (its polar factor is not unique) and k > [`SMALL_K`] take
//! faer's SVD instead.
use crate::error::{Result, ThriftyError};

/// Largest k of the stack-array iteration.
pub const SMALL_K: usize = 8;

pub struct Varimax {
    /// Rotated loadings L R (p×k, row-major), in the original row scale.
    pub rotated: Vec<f64>,
    /// The orthogonal rotation R (k×k, row-major).
    pub rotation: Vec<f64>,
    /// The varimax criterion of the (normalised, if requested) rotated loadings.
    pub criterion: f64,
    pub n_iter: usize,
    /// False when the iteration stopped at `max_iter` before the criterion settled.
    pub converged: bool,
}

/// The varimax criterion of a row-major p×k matrix.
pub fn criterion(l: &[f64], p: usize, k: usize) -> f64 {
    let mut v = 0.0;
    for j in 0..k {
        let (mut s2, mut s4) = (0.0, 0.0);
        for i in 0..p {
            let x2 = l[i * k + j] * l[i * k + j];
            s2 += x2;
            s4 += x2 * x2;
        }
        v += s4 / p as f64 - (s2 / p as f64).powi(2);
    }
    v
}

pub fn varimax(l: &[f64], p: usize, k: usize, normalize: bool, max_iter: usize, tol: f64) -> Result<Varimax> {
    crate::error::ensure_matrix("loadings", l, p, k)?;
    crate::error::ensure_finite("loadings", l)?;
    if k > p {
        return Err(ThriftyError::shape(
            "loadings",
            format!("has more columns ({k}) than rows ({p}); the rotation is not identified"),
        ));
    }
    if max_iter == 0 {
        return Err(ThriftyError::invalid("max_iter", "must be at least 1"));
    }
    if !(tol.is_finite() && tol > 0.0) {
        return Err(ThriftyError::invalid("tol", "must be a positive finite number"));
    }
    rotate_with(l, p, k, normalize, |ln, r, lam| {
        if k < 2 {
            Ok((0, true))
        } else if k <= SMALL_K {
            iterate_small(ln, p, k, max_iter, tol, r, lam)
        } else {
            iterate_faer(ln, p, k, max_iter, tol, r, lam)
        }
    })
}

/// Kaiser normalisation (if asked), the rotation R by `iterate(ln, R, scratch)` from the identity
/// (it returns the iteration count and whether it converged), then L R back in the row scale.
fn rotate_with(
    l: &[f64],
    p: usize,
    k: usize,
    normalize: bool,
    iterate: impl FnOnce(&[f64], &mut [f64], &mut [f64]) -> Result<(usize, bool)>,
) -> Result<Varimax> {
    let mut h = vec![1.0; p];
    let mut ln = l.to_vec();
    if normalize {
        for i in 0..p {
            let nrm = ln[i * k..(i + 1) * k].iter().map(|v| v * v).sum::<f64>().sqrt();
            if nrm > 0.0 {
                h[i] = nrm;
                ln[i * k..(i + 1) * k].iter_mut().for_each(|v| *v /= nrm);
            }
        }
    }
    let mut r = vec![0.0; k * k];
    for a in 0..k {
        r[a * k + a] = 1.0;
    }
    let mut lam = vec![0.0; p * k];
    let (n_iter, converged) = iterate(&ln, &mut r, &mut lam)?;
    mat_mul(&ln, &r, p, k, k, &mut lam);
    let crit = criterion(&lam, p, k);
    for i in 0..p {
        lam[i * k..(i + 1) * k].iter_mut().for_each(|v| *v *= h[i]);
    }
    Ok(Varimax { rotated: lam, rotation: r, criterion: crit, n_iter, converged })
}

/// The iteration for 2 ≤ k ≤ [`SMALL_K`] (k a compile-time constant, so the k-loops unroll); `r`
/// (k×k, row-major) starts at the identity and `lam` (p×k) is scratch.
fn iterate_small(
    ln: &[f64],
    p: usize,
    k: usize,
    max_iter: usize,
    tol: f64,
    r: &mut [f64],
    lam: &mut [f64],
) -> Result<(usize, bool)> {
    match k {
        2 => iterate_k::<2>(ln, p, max_iter, tol, r, lam),
        3 => iterate_k::<3>(ln, p, max_iter, tol, r, lam),
        4 => iterate_k::<4>(ln, p, max_iter, tol, r, lam),
        5 => iterate_k::<5>(ln, p, max_iter, tol, r, lam),
        6 => iterate_k::<6>(ln, p, max_iter, tol, r, lam),
        7 => iterate_k::<7>(ln, p, max_iter, tol, r, lam),
        8 => iterate_k::<8>(ln, p, max_iter, tol, r, lam),
        _ => unreachable!("iterate_small takes 2 <= k <= SMALL_K"),
    }
}

fn iterate_k<const K: usize>(
    ln: &[f64],
    p: usize,
    max_iter: usize,
    tol: f64,
    r: &mut [f64],
    lam: &mut [f64],
) -> Result<(usize, bool)> {
    let mut rm = [[0.0; K]; K];
    for (a, row) in rm.iter_mut().enumerate() {
        row.copy_from_slice(&r[a * K..(a + 1) * K]);
    }
    let mut d = 0.0;
    let mut result = (max_iter, false);
    // the right singular vectors of the last B start the next SVD (B changes little between iterations)
    let mut vwarm = identity::<K>();
    for it in 0..max_iter {
        // Λ = L R and its column sums of squares
        let mut colsq = [0.0; K];
        for (li, oi) in ln.chunks_exact(K).zip(lam.chunks_exact_mut(K)) {
            for j in 0..K {
                let mut v = 0.0;
                for l in 0..K {
                    v += li[l] * rm[l][j];
                }
                oi[j] = v;
                colsq[j] += v * v;
            }
        }
        // B = Lᵀ(Λ³ − Λ·diag(colsq/p)) (one division per column, not per entry)
        let mut cp = [0.0; K];
        for j in 0..K {
            cp[j] = colsq[j] / p as f64;
        }
        let mut b = [[0.0; K]; K];
        for (li, oi) in ln.chunks_exact(K).zip(lam.chunks_exact(K)) {
            let mut t = [0.0; K];
            for j in 0..K {
                let x = oi[j];
                t[j] = x * x * x - x * cp[j];
            }
            for a in 0..K {
                for c in 0..K {
                    b[a][c] += li[a] * t[c];
                }
            }
        }
        let d_old = d;
        d = match polar_from::<K>(&b, &mut vwarm, &mut rm) {
            Some(s) => s,
            None => {
                vwarm = identity::<K>();
                let s = polar_faer(faer::Mat::<f64>::from_fn(K, K, |a, c| b[a][c]), K, r)?;
                for (a, row) in rm.iter_mut().enumerate() {
                    row.copy_from_slice(&r[a * K..(a + 1) * K]);
                }
                s
            }
        };
        if it > 0 && d < d_old * (1.0 + tol) {
            result = (it + 1, true);
            break;
        }
    }
    for (a, row) in rm.iter().enumerate() {
        r[a * K..(a + 1) * K].copy_from_slice(row);
    }
    Ok(result)
}

fn identity<const K: usize>() -> [[f64; K]; K] {
    let mut v = [[0.0; K]; K];
    for (m, vm) in v.iter_mut().enumerate() {
        vm[m] = 1.0;
    }
    v
}

/// The iteration with faer's SVD (any k).
fn iterate_faer(
    ln: &[f64],
    p: usize,
    k: usize,
    max_iter: usize,
    tol: f64,
    r: &mut [f64],
    lam: &mut [f64],
) -> Result<(usize, bool)> {
    let mut d = 0.0;
    let mut colsq = vec![0.0; k];
    let mut target = vec![0.0; p * k];
    for it in 0..max_iter {
        mat_mul(ln, r, p, k, k, lam);
        colsq.fill(0.0);
        for i in 0..p {
            for j in 0..k {
                colsq[j] += lam[i * k + j] * lam[i * k + j];
            }
        }
        for i in 0..p {
            for j in 0..k {
                let x = lam[i * k + j];
                target[i * k + j] = x * x * x - x * colsq[j] / p as f64;
            }
        }
        // B = Lᵀ target (k×k)
        let b = faer::Mat::<f64>::from_fn(k, k, |a, c| (0..p).map(|i| ln[i * k + a] * target[i * k + c]).sum());
        let d_old = d;
        d = polar_faer(b, k, r)?;
        if it > 0 && d < d_old * (1.0 + tol) {
            return Ok((it + 1, true));
        }
    }
    Ok((max_iter, false))
}

/// R = U Vᵀ of B by faer's SVD (into `r`, k×k row-major); returns ΣS.
fn polar_faer(b: faer::Mat<f64>, k: usize, r: &mut [f64]) -> Result<f64> {
    let svd = b.svd().map_err(|_| ThriftyError::numerical("varimax", "SVD did not converge"))?;
    let (u, v) = (svd.U(), svd.V());
    for a in 0..k {
        for c in 0..k {
            r[a * k + c] = (0..k).map(|m| u[(a, m)] * v[(c, m)]).sum();
        }
    }
    Ok((0..k).map(|m| svd.S()[m]).sum::<f64>())
}

/// The polar factor Q = U Vᵀ of the k×k `b` (row-major `b[a][c]`, k ≤ [`SMALL_K`]) into `q`, and the
/// sum of its singular values; see [`polar_k`].
pub fn polar_small(b: &[[f64; SMALL_K]; SMALL_K], k: usize, q: &mut [[f64; SMALL_K]; SMALL_K]) -> Option<f64> {
    fn on<const K: usize>(b: &[[f64; SMALL_K]; SMALL_K], q: &mut [[f64; SMALL_K]; SMALL_K]) -> Option<f64> {
        let mut bk = [[0.0; K]; K];
        for (dst, src) in bk.iter_mut().zip(b) {
            dst.copy_from_slice(&src[..K]);
        }
        let mut qk = [[0.0; K]; K];
        let s = polar_k::<K>(&bk, &mut qk)?;
        for (dst, src) in q.iter_mut().zip(&qk) {
            dst[..K].copy_from_slice(src);
        }
        Some(s)
    }
    match k {
        2 => on::<2>(b, q),
        3 => on::<3>(b, q),
        4 => on::<4>(b, q),
        5 => on::<5>(b, q),
        6 => on::<6>(b, q),
        7 => on::<7>(b, q),
        8 => on::<8>(b, q),
        _ => None,
    }
}

/// The polar factor Q = U Vᵀ of the K×K `b` (row-major `b[a][c]`) into `q`, and the sum of its
/// singular values, by a one-sided (Hestenes) Jacobi SVD: plane rotations G orthogonalise the
/// columns of A = B·V (V = ΠG), then σₘ = ‖aₘ‖, uₘ = aₘ/σₘ. `None` (and `q` untouched) when B's
/// numerical rank is below K (the polar factor is then not unique) or the sweeps do not settle.
fn polar_k<const K: usize>(b: &[[f64; K]; K], q: &mut [[f64; K]; K]) -> Option<f64> {
    polar_from::<K>(b, &mut identity::<K>(), q)
}

/// [`polar_k`] with the sweeps started from the orthogonal `v` (columns `v[m]`; the right singular
/// vectors of a nearby B make them few) and the final V written back to it. The polar factor does
/// not depend on the start (up to rounding).
fn polar_from<const K: usize>(b: &[[f64; K]; K], v: &mut [[f64; K]; K], q: &mut [[f64; K]; K]) -> Option<f64> {
    // column-major: a[m] = B v[m] is column m of A = B V
    let mut a = [[0.0; K]; K];
    for m in 0..K {
        for i in 0..K {
            let mut s = 0.0;
            for c in 0..K {
                s += b[i][c] * v[m][c];
            }
            a[m][i] = s;
        }
    }
    let v = &mut *v;
    let mut settled = false;
    for _sweep in 0..60 {
        let mut rotated = false;
        for i in 0..K - 1 {
            for j in i + 1..K {
                let (mut al, mut be, mut ga) = (0.0, 0.0, 0.0);
                for t in 0..K {
                    al += a[i][t] * a[i][t];
                    be += a[j][t] * a[j][t];
                    ga += a[i][t] * a[j][t];
                }
                // |γ| > ε√(αβ), squared (no square root on the sweep that only checks)
                if !(ga * ga > f64::EPSILON * f64::EPSILON * (al * be)) {
                    continue;
                }
                rotated = true;
                let zeta = (be - al) / (2.0 * ga);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for m in [&mut a, &mut *v] {
                    for r in 0..K {
                        let (x, y) = (m[i][r], m[j][r]);
                        m[i][r] = c * x - s * y;
                        m[j][r] = s * x + c * y;
                    }
                }
            }
        }
        if !rotated {
            settled = true;
            break;
        }
    }
    if !settled {
        return None;
    }
    let mut sigma = [0.0; K];
    for m in 0..K {
        sigma[m] = a[m].iter().map(|x| x * x).sum::<f64>().sqrt();
    }
    let smax = sigma.iter().fold(0.0f64, |s, &x| s.max(x));
    if !(smax > 0.0) || sigma.iter().any(|&s| !(s > smax * (K as f64) * f64::EPSILON * 16.0)) {
        return None;
    }
    for m in 0..K {
        let inv = 1.0 / sigma[m];
        a[m].iter_mut().for_each(|x| *x *= inv);
    }
    for (r, qr) in q.iter_mut().enumerate() {
        for (c, qc) in qr.iter_mut().enumerate() {
            let mut s = 0.0;
            for m in 0..K {
                s += a[m][r] * v[m][c];
            }
            *qc = s;
        }
    }
    // Σσ in descending order, as faer reports S
    sigma.sort_by(|x, y| y.total_cmp(x));
    Some(sigma.iter().sum())
}

fn mat_mul(a: &[f64], b: &[f64], m: usize, kk: usize, n: usize, out: &mut [f64]) {
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..kk).map(|l| a[i * kk + l] * b[l * n + j]).sum();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The previous implementation (faer's SVD every iteration, allocating): the reference the stack
    /// iteration must agree with.
    pub(crate) fn varimax_faer(l: &[f64], p: usize, k: usize, normalize: bool, max_iter: usize, tol: f64) -> Varimax {
        rotate_with(l, p, k, normalize, |ln, r, lam| iterate_faer(ln, p, k, max_iter, tol, r, lam)).unwrap()
    }

    fn random(len: usize, seed: u64) -> Vec<f64> {
        let mut r = crate::rng::stream(seed, 11);
        (0..len).map(|_| crate::rng::uniform(&mut r) * 2.0 - 1.0).collect()
    }

    #[test]
    fn stack_iteration_agrees_with_the_faer_svd_version() {
        let mut worst = 0.0f64;
        for seed in 0..60u64 {
            let k = 2 + (seed as usize % 7);
            let p = k + 3 + (seed as usize * 7 % 40);
            let mut l = random(p * k, seed);
            if seed % 3 == 0 {
                // simple structure plus noise, the usual case
                for i in 0..p {
                    l[i * k + i % k] += 2.0;
                }
            }
            for normalize in [true, false] {
                let new = varimax(&l, p, k, normalize, 500, 1e-10).unwrap();
                let old = varimax_faer(&l, p, k, normalize, 500, 1e-10);
                assert_eq!(new.n_iter, old.n_iter, "seed {seed} k {k}");
                assert_eq!(new.converged, old.converged);
                for (a, b) in new.rotated.iter().zip(&old.rotated).chain(new.rotation.iter().zip(&old.rotation)) {
                    worst = worst.max((a - b).abs());
                }
                assert!(
                    (new.criterion - old.criterion).abs() < 1e-12 * old.criterion.abs().max(1.0),
                    "seed {seed} k {k} p {p} normalize {normalize}: n_iter {} converged {}, criterion {} vs {}",
                    new.n_iter,
                    new.converged,
                    new.criterion,
                    old.criterion
                );
            }
        }
        assert!(worst < 1e-12, "largest difference {worst:e}");
    }

    #[test]
    fn polar_small_is_the_polar_factor() {
        for seed in 0..200u64 {
            let k = 2 + (seed as usize % 7);
            let v = random(k * k, 1000 + seed);
            let mut b = [[0.0; SMALL_K]; SMALL_K];
            for a in 0..k {
                for c in 0..k {
                    b[a][c] = v[a * k + c] * if seed % 5 == 0 { 10f64.powi(c as i32 - 3) } else { 1.0 };
                }
            }
            let mut q = [[0.0; SMALL_K]; SMALL_K];
            let s = polar_small(&b, k, &mut q).unwrap();
            let mut r = vec![0.0; k * k];
            let s_faer = polar_faer(faer::Mat::<f64>::from_fn(k, k, |a, c| b[a][c]), k, &mut r).unwrap();
            assert!((s - s_faer).abs() <= 1e-13 * s_faer, "{s} vs {s_faer}");
            // Q orthogonal and QᵀB symmetric (the polar factor), and faer's to the conditioning of B
            let bn = (0..k).flat_map(|a| (0..k).map(move |c| (a, c))).map(|(a, c)| b[a][c].powi(2)).sum::<f64>().sqrt();
            let tol = if seed % 5 == 0 { 1e-8 } else { 1e-11 };
            for a in 0..k {
                for c in 0..k {
                    let qq: f64 = (0..k).map(|m| q[m][a] * q[m][c]).sum();
                    assert!((qq - if a == c { 1.0 } else { 0.0 }).abs() < 1e-13);
                    let h = |a: usize, c: usize| (0..k).map(|m| q[m][a] * b[m][c]).sum::<f64>();
                    assert!((h(a, c) - h(c, a)).abs() < 1e-13 * bn, "seed {seed}");
                    assert!((q[a][c] - r[a * k + c]).abs() < tol, "seed {seed}: {} vs {}", q[a][c], r[a * k + c]);
                }
            }
        }
        // rank below k: no unique polar factor, left to faer
        let mut b = [[0.0; SMALL_K]; SMALL_K];
        b[0][0] = 1.0;
        b[1][1] = 2.0;
        assert!(polar_small(&b, 3, &mut [[0.0; SMALL_K]; SMALL_K]).is_none());
    }

    #[test]
    fn large_k_takes_the_faer_path() {
        let (p, k) = (30, 10);
        let l = random(p * k, 5);
        let new = varimax(&l, p, k, true, 500, 1e-10).unwrap();
        let old = varimax_faer(&l, p, k, true, 500, 1e-10);
        assert_eq!(new.rotated, old.rotated);
    }

    #[test]
    fn varimax_is_orthogonal_and_increases_criterion() {
        let (p, k) = (12, 3);
        let l: Vec<f64> = (0..p * k).map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0 + (i as f64).sin()).collect();
        let out = varimax(&l, p, k, false, 500, 1e-12).unwrap();
        let r = &out.rotation;
        for a in 0..k {
            for b in 0..k {
                let s: f64 = (0..k).map(|m| r[a * k + m] * r[b * k + m]).sum();
                assert!((s - if a == b { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
        assert!(out.criterion >= criterion(&l, p, k) - 1e-12);
        // a simple-structure matrix rotated by 30° is rotated back (up to column sign/order)
        let (c, s) = ((30f64).to_radians().cos(), (30f64).to_radians().sin());
        let base = [1.0, 0.0, 0.9, 0.0, 0.8, 0.0, 0.0, 1.0, 0.0, 0.7, 0.0, 0.6];
        let mut mixed = vec![0.0; 12];
        for i in 0..6 {
            mixed[2 * i] = base[2 * i] * c - base[2 * i + 1] * s;
            mixed[2 * i + 1] = base[2 * i] * s + base[2 * i + 1] * c;
        }
        let out = varimax(&mixed, 6, 2, false, 500, 1e-12).unwrap();
        let mut got: Vec<f64> = out.rotated.iter().map(|v| v.abs()).collect();
        if got[1] > got[0] {
            for i in 0..6 {
                got.swap(2 * i, 2 * i + 1);
            }
        }
        for (g, b) in got.iter().zip(base) {
            assert!((g - b).abs() < 1e-5, "{g} vs {b}");
        }
    }
}
