//! Varimax rotation (Kaiser-normalised) by the SVD iteration: with Λ = L R,
//! B = Lᵀ(Λ³ − Λ·diag(1ᵀΛ²)/p), (U, S, Vᵀ) = svd(B), R = U Vᵀ, until ΣS stops growing by more than
//! a factor (1 + tol). The criterion is V(Λ) = Σⱼ[(1/p)Σᵢλᵢⱼ⁴ − ((1/p)Σᵢλᵢⱼ²)²].
use crate::error::{Result, ThriftyError};

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
    let mut d = 0.0;
    let mut n_iter = 0;
    let mut converged = k < 2;
    let mut lam = vec![0.0; p * k];
    if k >= 2 {
        for it in 0..max_iter {
            n_iter = it + 1;
            mat_mul(&ln, &r, p, k, k, &mut lam);
            let mut colsq = vec![0.0; k];
            for i in 0..p {
                for j in 0..k {
                    colsq[j] += lam[i * k + j] * lam[i * k + j];
                }
            }
            let mut target = vec![0.0; p * k];
            for i in 0..p {
                for j in 0..k {
                    let x = lam[i * k + j];
                    target[i * k + j] = x * x * x - x * colsq[j] / p as f64;
                }
            }
            // B = Lᵀ target (k×k)
            let b = faer::Mat::<f64>::from_fn(k, k, |a, c| (0..p).map(|i| ln[i * k + a] * target[i * k + c]).sum());
            let svd = b.svd().map_err(|_| ThriftyError::numerical("varimax", "SVD did not converge"))?;
            let (u, v) = (svd.U(), svd.V());
            for a in 0..k {
                for c in 0..k {
                    r[a * k + c] = (0..k).map(|m| u[(a, m)] * v[(c, m)]).sum();
                }
            }
            let d_old = d;
            d = (0..k).map(|m| svd.S()[m]).sum::<f64>();
            if it > 0 && d < d_old * (1.0 + tol) {
                converged = true;
                break;
            }
        }
    }
    mat_mul(&ln, &r, p, k, k, &mut lam);
    let crit = criterion(&lam, p, k);
    for i in 0..p {
        lam[i * k..(i + 1) * k].iter_mut().for_each(|v| *v *= h[i]);
    }
    Ok(Varimax { rotated: lam, rotation: r, criterion: crit, n_iter, converged })
}

fn mat_mul(a: &[f64], b: &[f64], m: usize, kk: usize, n: usize, out: &mut [f64]) {
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..kk).map(|l| a[i * kk + l] * b[l * n + j]).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
