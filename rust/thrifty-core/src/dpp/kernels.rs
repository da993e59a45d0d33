//! Kernels made discrete: features √(q/γ̃)(x_i)·Φ_k(x_i) on a data set, for
//! - Haar / stratified wavelets on a box partition with an arbitrary number m of cells
//!   (anisotropic levels: a k-d split of the longest side, at the volume fraction ⌊m/2⌋/m or at the
//!   matching data quantile); the discrete kernel is block-diagonal, so its sampler is O(m log n);
//! - periodised tensor Daubechies scaling functions on [0,1]^d (filters db1–db4 from in-house
//!   tables, φ by the cascade algorithm), with anisotropic levels Σ J_a = log₂ m;
//! - multivariate Jacobi (Legendre for a = b = 0) orthonormal polynomials on [−1,1]^d in the
//!   Bardenet–Hardy ordering (layers of equal maximal degree, lexicographic inside a layer).
//!
//! The dense features are orthonormalised by [`super::ortho::orthonormalize`] into K = UUᵀ.
use super::{checked_size, try_zeroed};
use crate::alloc::{try_collect, try_with_capacity};
use crate::error::{ensure_finite, ensure_matrix, Result, ThriftyError};
use crate::rng;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

fn check_points(x: &[f64], n: usize, d: usize, lo: f64, hi: f64) -> Result<()> {
    ensure_matrix("X", x, n, d)?;
    ensure_finite("X", x)?;
    if let Some(v) = x.iter().find(|v| **v < lo || **v > hi) {
        return Err(ThriftyError::invalid(
            "X",
            format!("points must lie in the kernel's domain [{lo}, {hi}]^d; found coordinate {v}"),
        ));
    }
    Ok(())
}

fn check_density(density: &[f64], n: usize) -> Result<()> {
    if density.len() != n {
        return Err(ThriftyError::shape("density", format!("has length {}, expected {n}", density.len())));
    }
    if density.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(ThriftyError::invalid("density", "values at the data must be positive and finite"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Haar / stratified

/// How a cell is split in two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Longest side, at the volume fraction ⌊m/2⌋/m: m cells of equal volume 1/m (for m = 2^{Jd}
    /// the dyadic grid of level J).
    Volume,
    /// Widest data spread, at the data quantile ⌊m/2⌋/m: m cells with (almost) equal counts.
    Quantile,
}

/// Cell index of every point and the volume of every cell, for a partition of [0,1]^d into m boxes.
pub fn partition(x: &[f64], n: usize, d: usize, m: usize, split: Split) -> Result<(Vec<usize>, Vec<f64>)> {
    check_points(x, n, d, 0.0, 1.0)?;
    if m == 0 {
        return Err(ThriftyError::invalid("m", "must be at least 1"));
    }
    if m > n {
        return Err(ThriftyError::invalid("m", format!("must not exceed the number of points ({n}), got {m}")));
    }
    // every buffer here follows n or m (≤ n): allocated fallibly (a refusal is a MemoryError)
    let mut cell: Vec<usize> = try_zeroed("X", n)?;
    let mut volume = try_with_capacity("m", m)?;
    let mut idx: Vec<usize> = try_collect("X", 0..n)?;
    // the right-hand side of a split, kept in order while the left side is compacted in place
    let mut right: Vec<usize> = try_with_capacity("X", n)?;
    // (lower corner, upper corner, cells to make, first and end position in `idx`) of a pending box
    type Pending = (Vec<f64>, Vec<f64>, usize, usize, usize);
    let mut stack: Vec<Pending> = vec![(vec![0.0; d], vec![1.0; d], m, 0, n)];
    // Depth-first, left child first: cell ids are assigned in a fixed order.
    let mut leaves: Vec<(usize, usize, f64)> = try_with_capacity("m", m)?;
    while let Some((lo, hi, mm, a, b)) = stack.pop() {
        if mm == 1 {
            let vol: f64 = (0..d).map(|k| hi[k] - lo[k]).product();
            leaves.push((a, b, vol));
            continue;
        }
        let ml = mm / 2;
        let frac = ml as f64 / mm as f64;
        let pts = &mut idx[a..b];
        let (axis, cut, nl) = match split {
            Split::Volume => {
                let axis = (0..d).fold(0, |best, k| if hi[k] - lo[k] > hi[best] - lo[best] + 1e-15 { k } else { best });
                let cut = lo[axis] + (hi[axis] - lo[axis]) * frac;
                // Stable partition by x < cut (the last cell along an axis is closed on the right):
                // the left points move down in order, the right ones wait in `right`.
                right.clear();
                let mut nl = 0;
                for k in 0..pts.len() {
                    let i = pts[k];
                    if x[i * d + axis] < cut {
                        pts[nl] = i;
                        nl += 1;
                    } else {
                        right.push(i);
                    }
                }
                pts[nl..].copy_from_slice(&right);
                (axis, cut, nl)
            }
            Split::Quantile => {
                let axis = (0..d)
                    .map(|k| {
                        let (mn, mx) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(mn, mx), &i| {
                            (mn.min(x[i * d + k]), mx.max(x[i * d + k]))
                        });
                        (k, mx - mn)
                    })
                    .fold((0, f64::NEG_INFINITY), |b, (k, s)| if s > b.1 { (k, s) } else { b })
                    .0;
                let cnt = pts.len();
                // Counts proportional to the cell numbers, each child keeping at least one point per cell.
                let nl = ((cnt as f64 * frac).round() as usize).clamp(ml, cnt - (mm - ml));
                // the keys are distinct (ties broken by index), so the in-place unstable sort gives the
                // stable order without the stable sort's O(n) scratch allocation
                pts.sort_unstable_by(|&i, &j| x[i * d + axis].partial_cmp(&x[j * d + axis]).unwrap().then(i.cmp(&j)));
                let cut = if nl > 0 && nl < cnt {
                    0.5 * (x[pts[nl - 1] * d + axis] + x[pts[nl] * d + axis])
                } else {
                    lo[axis]
                };
                (axis, cut, nl)
            }
        };
        let (mut hl, mut lr) = (hi.clone(), lo.clone());
        hl[axis] = cut;
        lr[axis] = cut;
        stack.push((lr, hi, mm - ml, a + nl, b));
        stack.push((lo, hl, ml, a, a + nl));
    }
    for (c, &(a, b, vol)) in leaves.iter().enumerate() {
        for &i in &idx[a..b] {
            cell[i] = c;
        }
        volume.push(vol);
    }
    Ok((cell, volume))
}

/// The discrete Haar kernel on a partition: U_i = w_i / √(Σ_{cell(i)} w²) with w = √(q/γ̃), q = 1 on
/// [0,1]^d. Returns K_ii = U_i² (each non-empty cell's K_ii sum to 1) and the number of non-empty
/// cells (the rank, i.e. the sample size).
pub fn haar_diagonal(cell: &[usize], n_cells: usize, density: &[f64]) -> Result<(Vec<f64>, usize)> {
    let n = cell.len();
    check_density(density, n)?;
    if n_cells > n {
        return Err(ThriftyError::invalid("n_cells", format!("must not exceed the number of points ({n})")));
    }
    if cell.iter().any(|&c| c >= n_cells) {
        return Err(ThriftyError::invalid("cells", "cell index out of range"));
    }
    let mut tot: Vec<f64> = try_zeroed("n_cells", n_cells)?;
    for i in 0..n {
        tot[cell[i]] += 1.0 / density[i];
    }
    let rank = tot.iter().filter(|t| **t > 0.0).count();
    Ok((try_collect("density", (0..n).map(|i| (1.0 / density[i]) / tot[cell[i]]))?, rank))
}

/// Exact sampler of a block-diagonal projection DPP: one item per non-empty cell, drawn with
/// probability K_ii inside its cell. O(n) setup, O(m log n) per sample.
pub struct Stratified {
    order: Vec<usize>,
    starts: Vec<usize>,
    cum: Vec<f64>,
}

impl Stratified {
    pub fn new(cell: &[usize], n_cells: usize, kdiag: &[f64]) -> Result<Self> {
        let n = cell.len();
        if kdiag.len() != n {
            return Err(ThriftyError::shape("probabilities", "must have one entry per point"));
        }
        ensure_finite("probabilities", kdiag)?;
        if kdiag.iter().any(|v| *v < 0.0) || cell.iter().any(|&c| c >= n_cells) {
            return Err(ThriftyError::invalid("probabilities", "must be non-negative with valid cell indices"));
        }
        let mut order: Vec<usize> = try_collect("cells", 0..n)?;
        // distinct keys: the in-place unstable sort (no O(n) scratch) gives the stable order
        order.sort_unstable_by_key(|&i| (cell[i], i));
        let mut starts: Vec<usize> = try_with_capacity("n_cells", n_cells.min(n) + 1)?;
        starts.push(0);
        let mut cum: Vec<f64> = try_zeroed("cells", n)?;
        let mut acc = 0.0;
        for (k, &i) in order.iter().enumerate() {
            if k > 0 && cell[order[k - 1]] != cell[i] {
                starts.push(k);
                acc = 0.0;
            }
            acc += kdiag[i];
            cum[k] = acc;
        }
        starts.push(n);
        if n == 0 {
            return Err(ThriftyError::shape("cells", "no points"));
        }
        Ok(Stratified { order, starts, cum })
    }

    pub fn rank(&self) -> usize {
        self.starts.len() - 1
    }

    /// One sample (one item per cell, ordered by cell) from stream (seed, task) into `out`.
    pub fn sample_into(&self, seed: u64, task: u64, out: &mut [usize]) {
        let mut r = rng::stream(seed, task);
        for (c, o) in out.iter_mut().enumerate().take(self.rank()) {
            let (a, b) = (self.starts[c], self.starts[c + 1]);
            // Renormalise by the actual cell total.
            let u = rng::uniform(&mut r) * self.cum[b - 1];
            let k = a + self.cum[a..b].partition_point(|&v| v <= u).min(b - a - 1);
            *o = self.order[k];
        }
    }

    /// Samples number `offset .. offset + count` of the family seeded by `seed`, row-major
    /// count × rank; `Err(Interrupted)` soon after `cancel` is raised.
    pub fn sample_range(&self, offset: usize, count: usize, seed: u64, cancel: &AtomicBool) -> Result<Vec<usize>> {
        super::per_sample_flat(offset, count, self.rank(), cancel, |s, row| {
            self.sample_into(seed, s, row);
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Daubechies

/// Low-pass filters (Σh = √2, Σh² = 1) of the Daubechies wavelets with 1..4 vanishing moments.
#[allow(clippy::excessive_precision)] // the coefficients are quoted as published
pub fn daubechies_filter(order: usize) -> Result<&'static [f64]> {
    const DB1: [f64; 2] = [std::f64::consts::FRAC_1_SQRT_2, std::f64::consts::FRAC_1_SQRT_2];
    const DB2: [f64; 4] = [0.48296291314469025, 0.83651630373746899, 0.22414386804185735, -0.12940952255092145];
    const DB3: [f64; 6] = [
        0.3326705529500827,
        0.8068915093110928,
        0.45987750211849154,
        -0.13501102001025464,
        -0.08544127388202666,
        0.03522629188570956,
    ];
    const DB4: [f64; 8] = [
        0.23037781330885523,
        0.71484657055254153,
        0.63088076792959036,
        -0.02798376941698385,
        -0.18703481171888114,
        0.03084138183598697,
        0.03288301166698295,
        -0.01059740178499728,
    ];
    match order {
        1 => Ok(&DB1),
        2 => Ok(&DB2),
        3 => Ok(&DB3),
        4 => Ok(&DB4),
        _ => Err(ThriftyError::invalid("order", format!("Daubechies order must be 1..=4, got {order}"))),
    }
}

/// φ tabulated on the grid j/2^res of its support [0, L−1] by the cascade algorithm (exact at
/// dyadic points up to rounding), L = filter length.
pub struct ScalingFunction {
    res: u32,
    support: usize,
    values: Vec<f64>,
}

impl ScalingFunction {
    pub fn new(order: usize, res: u32) -> Result<Self> {
        let h = daubechies_filter(order)?;
        let len = h.len();
        let support = len - 1;
        let s2 = std::f64::consts::SQRT_2;
        if support == 1 {
            // Haar: φ = 1 on [0,1).
            let m = 1usize << res;
            let mut values = vec![1.0; m + 1];
            values[m] = 0.0;
            return Ok(ScalingFunction { res, support, values });
        }
        // Integer values φ(1..L−2) solve φ(i) = √2 Σ_k h_k φ(2i − k) with Σ φ(i) = 1.
        let q = support - 1;
        let mut a = vec![0.0; q * (q + 1)];
        for r in 0..q {
            let i = r + 1;
            for c in 0..q {
                let j = c + 1;
                let k = 2 * i as isize - j as isize;
                let v = if k >= 0 && (k as usize) < len { s2 * h[k as usize] } else { 0.0 };
                a[r * (q + 1) + c] = v - if r == c { 1.0 } else { 0.0 };
            }
        }
        // Replace the last equation by the normalisation.
        for c in 0..q {
            a[(q - 1) * (q + 1) + c] = 1.0;
        }
        a[(q - 1) * (q + 1) + q] = 1.0;
        // Gaussian elimination with partial pivoting on the augmented matrix.
        for c in 0..q {
            let piv = (c..q)
                .max_by(|&x, &y| a[x * (q + 1) + c].abs().partial_cmp(&a[y * (q + 1) + c].abs()).unwrap())
                .unwrap();
            for j in 0..=q {
                a.swap(c * (q + 1) + j, piv * (q + 1) + j);
            }
            for r in 0..q {
                if r != c {
                    let f = a[r * (q + 1) + c] / a[c * (q + 1) + c];
                    for j in c..=q {
                        a[r * (q + 1) + j] -= f * a[c * (q + 1) + j];
                    }
                }
            }
        }
        let mut values = vec![0.0; support + 1];
        for r in 0..q {
            values[r + 1] = a[r * (q + 1) + q] / a[r * (q + 1) + r];
        }
        for level in 1..=res {
            let step = 1usize << (level - 1);
            let m = support << level;
            let mut next = vec![0.0; m + 1];
            for (i, nv) in next.iter_mut().enumerate() {
                if i % 2 == 0 {
                    *nv = values[i / 2];
                    continue;
                }
                // φ(i/2^level) = √2 Σ_k h_k φ(2·i/2^level − k): index i − k·2^{level−1} on the
                // previous grid.
                let prev_max = support << (level - 1);
                let mut s = 0.0;
                for (k, hk) in h.iter().enumerate() {
                    if i >= k * step && i - k * step <= prev_max {
                        s += hk * values[i - k * step];
                    }
                }
                *nv = s2 * s;
            }
            values = next;
        }
        Ok(ScalingFunction { res, support, values })
    }

    /// φ(t), linear interpolation between grid points; 0 outside [0, L−1].
    #[inline]
    pub fn eval(&self, t: f64) -> f64 {
        if !(t >= 0.0) || t >= self.support as f64 {
            return 0.0;
        }
        let s = t * (1u64 << self.res) as f64;
        let i = s.floor() as usize;
        let f = s - i as f64;
        let a = self.values[i];
        let b = if i + 1 < self.values.len() { self.values[i + 1] } else { 0.0 };
        a + f * (b - a)
    }
}

/// Levels J_a with Σ J_a = log₂ m, as even as possible (earlier axes get the extra levels).
pub fn dyadic_levels(m: usize, d: usize) -> Result<Vec<u32>> {
    if m == 0 || !m.is_power_of_two() {
        return Err(ThriftyError::invalid("m", format!("must be a power of two for Daubechies wavelets, got {m}")));
    }
    let j = m.trailing_zeros() as usize;
    Ok((0..d).map(|a| (j / d + usize::from(a < j % d)) as u32).collect())
}

/// Dense features (n×m, row-major) √(1/γ̃)(x_i) Π_a φ^per_{J_a,k_a}(x_ia) of periodised tensor
/// Daubechies scaling functions on [0,1]^d, m = 2^{Σ J_a}.
pub fn daubechies_features(
    x: &[f64],
    n: usize,
    d: usize,
    m: usize,
    order: usize,
    density: &[f64],
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    check_points(x, n, d, 0.0, 1.0)?;
    check_density(density, n)?;
    if m > n {
        return Err(ThriftyError::invalid("m", format!("must not exceed the number of points ({n}), got {m}")));
    }
    let levels = dyadic_levels(m, d)?;
    let phi = ScalingFunction::new(order, 12)?;
    let sup = phi.support as isize;
    let mut out: Vec<f64> = try_zeroed("m", checked_size("m", n, m)?)?;
    out.par_chunks_mut(m).enumerate().try_for_each(|(i, row)| {
        if i % 1024 == 0 {
            super::check_cancel(cancel)?;
        }
        let mut acc = vec![1.0];
        for a in 0..d {
            let ja = levels[a];
            let na = 1usize << ja;
            let mut v: Vec<f64> = try_zeroed("m", na)?;
            let s = x[i * d + a].min(1.0 - 1e-15) * na as f64;
            let scale = (na as f64).sqrt();
            let f = s.floor() as isize;
            for c in (f - sup + 1)..=f {
                let k = c.rem_euclid(na as isize) as usize;
                v[k] += scale * phi.eval(s - c as f64);
            }
            let mut next = try_with_capacity("m", acc.len() * na)?;
            for &p in &acc {
                for &q in &v {
                    next.push(p * q);
                }
            }
            acc = next;
        }
        let w = (1.0 / density[i]).sqrt();
        for (o, v) in row.iter_mut().zip(acc) {
            *o = w * v;
        }
        Ok(())
    })?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Jacobi / Legendre

/// ln Γ(x) for x > 0 (Lanczos, g = 7; relative error ~1e-15).
#[allow(clippy::excessive_precision)] // the coefficients are quoted as published
pub fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.99999999999980993,
        676.5203681218851,
        -1259.1392167224028,
        771.32342877765313,
        -176.61502916214059,
        12.507343278686905,
        -0.13857109526572012,
        9.9843695780195716e-6,
        1.5056327351493116e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Orthonormal Jacobi polynomials p_0..p_{deg} at t, w.r.t. (1−t)^a (1+t)^b on [−1,1].
pub fn jacobi_orthonormal(t: f64, deg: usize, a: f64, b: f64, out: &mut [f64]) {
    let ab = a + b;
    let beta0 =
        ((ab + 1.0) * std::f64::consts::LN_2 + ln_gamma(a + 1.0) + ln_gamma(b + 1.0) - ln_gamma(ab + 2.0)).exp();
    let alpha = |k: usize| -> f64 {
        if k == 0 {
            (b - a) / (ab + 2.0)
        } else {
            let s = 2.0 * k as f64 + ab;
            (b * b - a * a) / (s * (s + 2.0))
        }
    };
    let beta = |k: usize| -> f64 {
        let kf = k as f64;
        if k == 1 {
            4.0 * (1.0 + a) * (1.0 + b) / ((2.0 + ab).powi(2) * (3.0 + ab))
        } else {
            let s = 2.0 * kf + ab;
            4.0 * kf * (kf + a) * (kf + b) * (kf + ab) / (s * s * (s + 1.0) * (s - 1.0))
        }
    };
    out[0] = 1.0 / beta0.sqrt();
    if deg == 0 {
        return;
    }
    out[1] = (t - alpha(0)) * out[0] / beta(1).sqrt();
    for k in 1..deg {
        out[k + 1] = ((t - alpha(k)) * out[k] - beta(k).sqrt() * out[k - 1]) / beta(k + 1).sqrt();
    }
}

/// The first m multi-indices of N^d in the Bardenet–Hardy order.
pub fn ope_multi_indices(m: usize, d: usize) -> Result<Vec<Vec<usize>>> {
    let mut out: Vec<Vec<usize>> = try_with_capacity("m", m)?;
    let mut layer = 0usize;
    while out.len() < m {
        // All indices with max entry == layer, in lexicographic order.
        let mut idx = vec![0usize; d];
        loop {
            if idx.iter().copied().max().unwrap_or(0) == layer {
                out.push(idx.clone());
                if out.len() == m {
                    break;
                }
            }
            // Increment (last axis fastest) within [0, layer]^d.
            let mut pos = d;
            loop {
                if pos == 0 {
                    break;
                }
                pos -= 1;
                if idx[pos] < layer {
                    idx[pos] += 1;
                    for q in idx.iter_mut().skip(pos + 1) {
                        *q = 0;
                    }
                    break;
                } else if pos == 0 {
                    pos = usize::MAX;
                    break;
                }
            }
            if pos == usize::MAX || (d == 0) {
                break;
            }
        }
        layer += 1;
    }
    Ok(out)
}

/// Dense features (n×m) √(q/γ̃)(x_i) Π_a p_{k_a}(x_ia) of the multivariate Jacobi ensemble on
/// [−1,1]^d, q = Π(1−x_a)^a(1+x_a)^b. Points on the boundary are rejected when an exponent is < 0.
#[allow(clippy::too_many_arguments)]
pub fn jacobi_features(
    x: &[f64],
    n: usize,
    d: usize,
    m: usize,
    a: f64,
    b: f64,
    density: &[f64],
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    check_points(x, n, d, -1.0, 1.0)?;
    check_density(density, n)?;
    if m == 0 || m > n {
        return Err(ThriftyError::invalid("m", format!("must be in [1, {n}] (the number of points), got {m}")));
    }
    if !(a > -1.0 && b > -1.0 && a.is_finite() && b.is_finite()) {
        return Err(ThriftyError::invalid("jacobi_params", format!("exponents must be > -1, got a = {a}, b = {b}")));
    }
    if (a < 0.0 && x.iter().any(|v| *v >= 1.0)) || (b < 0.0 && x.iter().any(|v| *v <= -1.0)) {
        return Err(ThriftyError::invalid(
            "X",
            "points on the boundary of [-1, 1]^d have infinite Jacobi weight for negative exponents",
        ));
    }
    let idx = ope_multi_indices(m, d)?;
    let deg = idx.iter().flat_map(|v| v.iter().copied()).max().unwrap_or(0);
    let mut out: Vec<f64> = try_zeroed("m", checked_size("m", n, m)?)?;
    out.par_chunks_mut(m).enumerate().try_for_each(|(i, row)| {
        if i % 1024 == 0 {
            super::check_cancel(cancel)?;
        }
        let mut polys = vec![0.0; d * (deg + 1)];
        let mut logq = 0.0;
        for ax in 0..d {
            let t = x[i * d + ax];
            jacobi_orthonormal(t, deg, a, b, &mut polys[ax * (deg + 1)..(ax + 1) * (deg + 1)]);
            if a != 0.0 {
                logq += a * (1.0 - t).ln();
            }
            if b != 0.0 {
                logq += b * (1.0 + t).ln();
            }
        }
        let w = (0.5 * (logq - density[i].ln())).exp();
        for (o, k) in row.iter_mut().zip(&idx) {
            let mut v = w;
            for ax in 0..d {
                v *= polys[ax * (deg + 1) + k[ax]];
            }
            *o = v;
        }
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_volume_is_dyadic_grid_and_handles_any_m() {
        let g = 64;
        let x: Vec<f64> =
            (0..g * g).flat_map(|k| [((k / g) as f64 + 0.5) / g as f64, ((k % g) as f64 + 0.5) / g as f64]).collect();
        let (cell, vol) = partition(&x, g * g, 2, 1024, Split::Volume).unwrap();
        assert_eq!(vol.len(), 1024);
        assert!(vol.iter().all(|v| (v - 1.0 / 1024.0).abs() < 1e-15));
        let mut counts = vec![0; 1024];
        for c in cell {
            counts[c] += 1;
        }
        assert!(counts.iter().all(|&c| c == 4));
        for m in [3usize, 7, 100, 1000] {
            let (cell, vol) = partition(&x, g * g, 2, m, Split::Volume).unwrap();
            assert_eq!(vol.len(), m);
            assert!((vol.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(cell.iter().all(|&c| c < m));
            let (cq, _) = partition(&x, g * g, 2, m, Split::Quantile).unwrap();
            let mut cnt = vec![0usize; m];
            for c in cq {
                cnt[c] += 1;
            }
            assert!(cnt.iter().all(|&c| c > 0));
        }
        assert!(partition(&[1.5, 0.2], 1, 2, 1, Split::Volume).is_err());
    }

    #[test]
    fn daubechies_filters_and_scaling_function() {
        for order in 1..=4 {
            let h = daubechies_filter(order).unwrap();
            let s: f64 = h.iter().sum();
            assert!((s - 2f64.sqrt()).abs() < 1e-12, "sum db{order}");
            for shift in 1..order {
                let c: f64 = (0..h.len() - 2 * shift).map(|k| h[k] * h[k + 2 * shift]).sum();
                assert!(c.abs() < 1e-11, "orthogonality db{order}");
            }
            let e: f64 = h.iter().map(|v| v * v).sum();
            assert!((e - 1.0).abs() < 1e-12);
            // Partition of unity Σ_k φ(t − k) = 1 and orthonormality ∫φ(t)φ(t−k) = δ_k.
            let phi = ScalingFunction::new(order, 10).unwrap();
            for &t in &[0.1, 0.37, 0.5, 0.93] {
                let pu: f64 = (0..h.len()).map(|k| phi.eval(t + k as f64)).sum();
                assert!((pu - 1.0).abs() < 1e-6, "partition of unity db{order}");
            }
            let grid = 1 << 10;
            for k in 0..h.len() - 1 {
                let ip: f64 = (0..(h.len() - 1) * grid)
                    .map(|i| {
                        let t = i as f64 / grid as f64;
                        phi.eval(t) * phi.eval(t - k as f64)
                    })
                    .sum::<f64>()
                    / grid as f64;
                let want = if k == 0 { 1.0 } else { 0.0 };
                assert!((ip - want).abs() < 2e-3, "db{order} <phi, phi(.-{k})> = {ip}");
            }
        }
    }

    #[test]
    fn jacobi_polynomials_are_orthonormal() {
        for &(a, b) in &[(0.0, 0.0), (0.5, -0.3), (-0.5, -0.5)] {
            // Gauss-Chebyshev-like check by a fine midpoint rule with the weight.
            let deg = 5;
            let m = 200_000;
            let mut gram = vec![0.0; (deg + 1) * (deg + 1)];
            let mut p = vec![0.0; deg + 1];
            for i in 0..m {
                // substitute t = −cos θ to tame endpoint singularities
                let th = (i as f64 + 0.5) / m as f64 * std::f64::consts::PI;
                let t = -th.cos();
                let jac = th.sin() * std::f64::consts::PI / m as f64;
                let w = (1.0 - t).powf(a) * (1.0 + t).powf(b) * jac;
                jacobi_orthonormal(t, deg, a, b, &mut p);
                for r in 0..=deg {
                    for c in 0..=deg {
                        gram[r * (deg + 1) + c] += w * p[r] * p[c];
                    }
                }
            }
            for r in 0..=deg {
                for c in 0..=deg {
                    let want = if r == c { 1.0 } else { 0.0 };
                    assert!((gram[r * (deg + 1) + c] - want).abs() < 1e-3, "({a},{b}) [{r},{c}]");
                }
            }
        }
        let idx = ope_multi_indices(6, 2).unwrap();
        assert_eq!(idx, vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1], vec![0, 2], vec![1, 2]]);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn stratified_sampler_one_per_cell() {
        let cell = vec![0, 1, 0, 2, 1, 2, 2];
        let (k, rank) = haar_diagonal(&cell, 3, &[1.0, 2.0, 1.0, 1.0, 1.0, 0.5, 1.0]).unwrap();
        assert_eq!(rank, 3);
        let s = Stratified::new(&cell, 3, &k).unwrap();
        let flat = s.sample_range(0, 30_000, 4, crate::dpp::never()).unwrap();
        let mut c = [0usize; 7];
        for d in flat.chunks(3) {
            assert_eq!(d.len(), 3);
            for &i in d {
                c[i] += 1;
            }
        }
        for i in 0..7 {
            assert!((c[i] as f64 / 30_000.0 - k[i]).abs() < 0.02);
        }
    }
}
