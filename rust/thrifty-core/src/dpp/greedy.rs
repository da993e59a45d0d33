//! Greedy log-det selection on a covariance matrix (or a rank-p factor of it).
//!
//! - Entropy / greedy MAP: the argmax mode of the pivoted-Cholesky loop; the chosen set's
//!   log det Σ_AA is the sum of the log pivots. O(nk²) on a full matrix, O(npk) on a factor.
//! - Mutual information (Krause, Singh & Guestrin 2008): maximise I(A; V∖A) greedily; the gain of y is
//!   ½[log σ²(y|A) − log σ²(y|V∖(A∪{y}))]. The first term is the loop's residual diagonal; the second
//!   is 1/P_yy with P = (Σ_RR)⁻¹ over the remaining items R, kept up to date by rank-one downdates
//!   when an item leaves R. A nugget σ_n² is added to the diagonal so neither variance vanishes.
//!   O(n³ + kn²) time, O(n²) memory.
use super::pivot::{self, FactorState, KernelState, Mode, PivotPath, PivotState};
use crate::error::{ensure_matrix, Result, ThriftyError};
use crate::linalg;
use crate::scalar::Real;
use std::sync::atomic::AtomicBool;

fn check_k(k: usize, n: usize) -> Result<()> {
    if k == 0 || k > n {
        return Err(ThriftyError::invalid("k", format!("must be in [1, {n}], got {k}")));
    }
    Ok(())
}

/// How much of a covariance matrix the greedy selections validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Nothing beyond the shape: the caller vouches for the matrix (NaN never panics).
    Skip,
    /// Every entry the selection reads: the diagonal (finite, ≥ 0) and the rows of the chosen items
    /// (finite, equal to the matching columns). O(nk) for entropy selection, which reads nothing else.
    Read,
    /// The whole matrix: finite, symmetric, diagonal ≥ 0. O(n²).
    Full,
}

fn symmetric_tol(amax: f64) -> f64 {
    1e-8 * amax
}

fn check_diagonal<T: Real>(cov: &[T], n: usize) -> Result<f64> {
    let mut amax = 0.0f64;
    for i in 0..n {
        let v = cov[i * n + i].as_f64();
        if !v.is_finite() {
            return Err(ThriftyError::NotFinite { arg: "cov" });
        }
        if v < 0.0 {
            return Err(ThriftyError::invalid("cov", "has a negative diagonal entry (not positive semi-definite)"));
        }
        amax = amax.max(v);
    }
    Ok(amax)
}

fn check_cov<T: Real>(cov: &[T], n: usize) -> Result<()> {
    use rayon::prelude::*;
    super::ortho::finite("cov", cov)?;
    check_diagonal(cov, n)?;
    let amax = cov
        .par_chunks(n.max(1))
        .map(|r| r.iter().fold(0.0f64, |a, b| a.max(Real::as_f64(*b).abs())))
        .reduce(|| 0.0, f64::max);
    // Symmetry, compared tile by tile (64×64) so both reads stay in cache; tiles in parallel.
    const TILE: usize = 64;
    let nt = n.div_ceil(TILE);
    let tol = symmetric_tol(amax);
    let asym = (0..nt).into_par_iter().any(|bi| {
        (0..=bi).any(|bj| {
            let (i0, j0) = (bi * TILE, bj * TILE);
            (i0..(i0 + TILE).min(n)).any(|i| {
                (j0..(j0 + TILE).min(n).min(i)).any(|j| (cov[i * n + j].as_f64() - cov[j * n + i].as_f64()).abs() > tol)
            })
        })
    });
    if asym {
        return Err(ThriftyError::invalid("cov", "must be symmetric"));
    }
    Ok(())
}

/// The rows `rows` are finite and equal (to the symmetry tolerance) to the matching columns.
/// The columns are gathered row by row (each row of the matrix contributes |rows| entries), in
/// parallel over row blocks: O(n·|rows|) reads, never the whole matrix.
fn check_rows<T: Real>(cov: &[T], n: usize, rows: &[usize], diag_max: f64) -> Result<()> {
    use rayon::prelude::*;
    let mut amax = diag_max;
    for &a in rows {
        let r = &cov[a * n..(a + 1) * n];
        super::ortho::finite("cov", r)?;
        amax = r.iter().fold(amax, |m, v| m.max(v.as_f64().abs()));
    }
    let tol = symmetric_tol(amax);
    let asym = cov.par_chunks(n * 256).enumerate().any(|(b, blk)| {
        blk.chunks(n).enumerate().any(|(di, row)| {
            let i = b * 256 + di;
            rows.iter().any(|&a| {
                let (c, r) = (row[a].as_f64(), cov[a * n + i].as_f64());
                !((c - r).abs() <= tol)
            })
        })
    });
    if asym {
        return Err(ThriftyError::invalid("cov", "must be symmetric (a chosen row differs from its column)"));
    }
    Ok(())
}

/// Greedy entropy (log-det) selection of up to `k` items from a full covariance; stops early when
/// the residual variances fall below `tol · max Σ_ii` (the numerical rank).
///
/// The selection reads only the diagonal and the rows of the chosen items; `check` says which
/// entries are validated (see [`Check`]). A NaN in a row that is read never panics: it is caught
/// by the check after the loop.
pub fn entropy_kernel<T: Real>(
    cov: &[T],
    n: usize,
    k: usize,
    tol: f64,
    check: Check,
    cancel: &AtomicBool,
) -> Result<PivotPath> {
    ensure_matrix("cov", cov, n, n)?;
    check_k(k, n)?;
    let diag_max = match check {
        Check::Skip => 0.0,
        Check::Read => check_diagonal(cov, n)?,
        Check::Full => {
            check_cov(cov, n)?;
            0.0
        }
    };
    let path = pivot::run(&mut KernelState::new(cov, n), Mode::Argmax, k, tol, cancel)?;
    if check == Check::Read {
        check_rows(cov, n, &path.items, diag_max)?;
    }
    Ok(path)
}

/// Greedy entropy / MAP selection on L = VVᵀ, V n×p.
pub fn entropy_factor<T: super::ortho::Dense>(
    v: &[T],
    n: usize,
    p: usize,
    k: usize,
    tol: f64,
    cancel: &AtomicBool,
) -> Result<PivotPath> {
    ensure_matrix("features", v, n, p)?;
    super::ortho::finite("features", v)?;
    check_k(k, n)?;
    // The selection is scale-free (det L_A scales by c^2k for V·c) but the squares of features
    // beyond 2^±200 over- or underflow (at 1e±300 nothing was selected): such input runs rescaled
    // by an exact power of two, and the path records the exponent of its pivots
    let e = super::ortho::extreme_exponent_of(v);
    if e == 0 {
        let lev = super::ortho::leverage(v, n, p)?;
        return pivot::run(&mut FactorState::new(v, n, p, &lev), Mode::Argmax, k, tol, cancel);
    }
    let mut scaled = crate::alloc::try_with_capacity("the rescaled copy of the features", v.len())?;
    scaled.extend(v.iter().map(|x| super::ortho::pow2_scale(x.as_f64(), e)));
    let lev = super::ortho::leverage(&scaled, n, p)?;
    let mut path = pivot::run(&mut FactorState::new(&scaled, n, p, &lev), Mode::Argmax, k, tol, cancel)?;
    path.pivot_exponent = 2 * e;
    Ok(path)
}

/// Greedy mutual-information selection (Krause et al.), with nugget `noise` > 0.
/// Returns the chosen items, their residual variances σ²(y|A) and the MI gains.
///
/// The O(n³) inverse reads every entry, so `check = true` validates the whole matrix (O(n²)).
pub fn mutual_information(
    cov: &[f64],
    n: usize,
    k: usize,
    noise: f64,
    check: bool,
    cancel: &AtomicBool,
) -> Result<(PivotPath, Vec<f64>)> {
    ensure_matrix("cov", cov, n, n)?;
    if check {
        check_cov(cov, n)?;
    }
    check_k(k, n)?;
    if !(noise > 0.0) || !noise.is_finite() {
        return Err(ThriftyError::invalid("noise", format!("must be positive and finite, got {noise}")));
    }
    let mut s: Vec<f64> = super::try_zeroed("cov", n * n)?;
    s.copy_from_slice(cov);
    for i in 0..n {
        s[i * n + i] += noise;
    }
    let mut p = linalg::spd_inverse(&s, n)?.ok_or_else(|| {
        ThriftyError::invalid("cov", "is not positive semi-definite (Cholesky of cov + noise·I failed)")
    })?;
    let mut state = KernelState::new(&s, n);
    let mut d = state.diagonal()?;
    let mut remaining = crate::alloc::try_filled("the remaining items", n, true)?;
    let mut path = PivotPath::default();
    let mut gains = Vec::with_capacity(k);
    for _ in 0..k {
        super::check_cancel(cancel)?;
        let mut best = (usize::MAX, f64::NEG_INFINITY);
        for y in 0..n {
            if !remaining[y] {
                continue;
            }
            let pyy = p[y * n + y];
            if !(d[y] > 0.0) || !(pyy > 0.0) {
                continue;
            }
            let g = 0.5 * (d[y] * pyy).ln();
            if g > best.1 {
                best = (y, g);
            }
        }
        let (a, g) = best;
        if a == usize::MAX {
            break;
        }
        let piv = state
            .add(a, 0.0)
            .ok_or_else(|| ThriftyError::numerical("mutual information", "zero conditional variance"))?;
        state.update(&mut d);
        d[a] = 0.0;
        remaining[a] = false;
        path.items.push(a);
        path.pivots.push(piv);
        gains.push(g);
        // P ← P − P[:,a] P[a,:] / P_aa: the inverse of Σ over the remaining items.
        let paa = p[a * n + a];
        let col: Vec<f64> = crate::alloc::try_collect("a column of the inverse", (0..n).map(|i| p[i * n + a]))?;
        for i in 0..n {
            if !remaining[i] || col[i] == 0.0 {
                continue;
            }
            let f = col[i] / paa;
            let row = &mut p[i * n..(i + 1) * n];
            for (j, v) in row.iter_mut().enumerate() {
                *v -= f * col[j];
            }
        }
    }
    Ok((path, gains))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(n: usize) -> Vec<f64> {
        // Squared-exponential covariance on points of a line.
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        (0..n * n).map(|ij| (-(xs[ij / n] - xs[ij % n]).powi(2)).exp()).collect()
    }

    fn logdet_sub(s: &[f64], n: usize, idx: &[usize]) -> f64 {
        let k = idx.len();
        let sub: Vec<f64> = (0..k * k).map(|t| s[idx[t / k] * n + idx[t % k]]).collect();
        let l = linalg::cholesky_lower(&sub, k).unwrap();
        2.0 * (0..k).map(|i| l[i * k + i].ln()).sum::<f64>()
    }

    #[test]
    fn mi_matches_brute_force_gains() {
        let n = 10;
        let c = cov(n);
        let noise = 1e-3;
        let (path, gains) = mutual_information(&c, n, 4, noise, true, crate::dpp::never()).unwrap();
        let mut s = c.clone();
        for i in 0..n {
            s[i * n + i] += noise;
        }
        // Conditional variance by brute force: σ²(y|B) = exp(logdet(B∪y) − logdet(B)).
        let cond = |y: usize, b: &[usize]| -> f64 {
            if b.is_empty() {
                return s[y * n + y];
            }
            let mut by = b.to_vec();
            by.push(y);
            (logdet_sub(&s, n, &by) - logdet_sub(&s, n, b)).exp()
        };
        let mut chosen: Vec<usize> = Vec::new();
        assert_eq!((path.items.len(), gains.len()), (4, 4));
        for (&item, &gain) in path.items.iter().zip(&gains) {
            let mut best = (0, f64::NEG_INFINITY);
            for y in 0..n {
                if chosen.contains(&y) {
                    continue;
                }
                let rest: Vec<usize> = (0..n).filter(|i| *i != y && !chosen.contains(i)).collect();
                let g = 0.5 * (cond(y, &chosen).ln() - cond(y, &rest).ln());
                if g > best.1 {
                    best = (y, g);
                }
            }
            assert_eq!(item, best.0);
            assert!((gain - best.1).abs() < 1e-8);
            chosen.push(best.0);
        }
        assert!((path.log_det() - logdet_sub(&s, n, &chosen)).abs() < 1e-9);
        assert!(mutual_information(&c, n, 11, noise, true, crate::dpp::never()).is_err());
        assert!(mutual_information(&c, n, 2, 0.0, true, crate::dpp::never()).is_err());
    }

    #[test]
    fn read_check_covers_exactly_the_entries_read() {
        let n = 12;
        let c = cov(n);
        let k = 3;
        let path = entropy_kernel(&c, n, k, 1e-10, Check::Read, crate::dpp::never()).unwrap();
        assert_eq!(path.items, entropy_kernel(&c, n, k, 1e-10, Check::Full, crate::dpp::never()).unwrap().items);
        let unread = (0..n).find(|i| !path.items.contains(i)).unwrap();
        let other = (0..n).find(|i| *i != unread && !path.items.contains(i)).unwrap();
        // Damage outside the rows read: the selection is unchanged, Read accepts, Full rejects.
        for bad in [f64::NAN, 7.0] {
            let mut d = c.clone();
            d[unread * n + other] = bad;
            assert_eq!(entropy_kernel(&d, n, k, 1e-10, Check::Read, crate::dpp::never()).unwrap().items, path.items);
            assert!(entropy_kernel(&d, n, k, 1e-10, Check::Full, crate::dpp::never()).is_err());
            assert!(entropy_kernel(&d, n, k, 1e-10, Check::Skip, crate::dpp::never()).is_ok());
        }
        // Damage in a chosen row (NaN, or a value that differs from its column): Read rejects.
        let a = path.items[1];
        for bad in [f64::NAN, 0.5] {
            let mut d = c.clone();
            d[a * n + unread] = bad;
            assert!(entropy_kernel(&d, n, k, 1e-10, Check::Read, crate::dpp::never()).is_err(), "{bad}");
        }
        // The diagonal is always read.
        let mut d = c.clone();
        d[unread * n + unread] = -1.0;
        assert!(entropy_kernel(&d, n, k, 1e-10, Check::Read, crate::dpp::never()).is_err());
        d[unread * n + unread] = f64::INFINITY;
        assert!(entropy_kernel(&d, n, k, 1e-10, Check::Read, crate::dpp::never()).is_err());
    }

    #[test]
    fn entropy_stops_at_rank() {
        let n = 6;
        let v: Vec<f64> = (0..n * 2).map(|i| (i as f64).cos()).collect();
        let path = entropy_factor(&v, n, 2, 5, 1e-10, crate::dpp::never()).unwrap();
        assert_eq!(path.items.len(), 2);
    }
}
