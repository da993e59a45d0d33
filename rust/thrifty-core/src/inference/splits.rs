//! Split primitives every inference module builds on: balanced splits (drawn or given), the
//! permutation streams, the Fisher z of a split correlation and the mean over splits, the
//! permutation p-value and the allocation budget. Below `nb`, `perm`, `blocks`, `route` and `run`;
//! it imports none of them.
use crate::error::{Result, ThriftyError};
use crate::rng;

/// Train and test index sets (each sorted) of one split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub train: Vec<usize>,
    pub test: Vec<usize>,
}

/// Balanced split sizes: `n_train = min(max(⌊n/2⌋, k+2), n−3)`. Needs `n ≥ k + 5`.
pub fn split_sizes(n: usize, k: usize) -> Result<(usize, usize)> {
    if n < k.saturating_add(5) {
        return Err(ThriftyError::invalid(
            "X",
            format!(
                "{n} rows are too few for n_components={k}: need at least n_components + 5 = {}",
                k.saturating_add(5)
            ),
        ));
    }
    let n_tr = (n / 2).max(k.saturating_add(2)).min(n - 3);
    Ok((n_tr, n - n_tr))
}

/// `n_splits` random balanced splits; split j draws from `rng::stream(seed, j)`.
pub fn draw_splits(n: usize, k: usize, n_splits: usize, seed: u64) -> Result<Vec<Split>> {
    if n_splits < 2 {
        return Err(ThriftyError::invalid("n_splits", "must be at least 2"));
    }
    let (n_tr, _) = split_sizes(n, k)?;
    // the splits hold n_splits * n indices: refuse a size that cannot be allocated instead of aborting
    check_budget("n_splits", n_splits, n)?;
    Ok((0..n_splits)
        .map(|j| {
            let mut r = rng::stream(seed, j as u64);
            let mut idx: Vec<usize> = (0..n).collect();
            for i in 0..n_tr {
                let pick = i + rng::below(&mut r, n - i);
                idx.swap(i, pick);
            }
            let mut train = idx[..n_tr].to_vec();
            let mut test = idx[n_tr..].to_vec();
            train.sort_unstable();
            test.sort_unstable();
            Split { train, test }
        })
        .collect())
}

/// Largest number of 8-byte entries one call of the inference core allocates for per-split or
/// per-permutation index and response copies (2^34 entries, 128 GiB). Larger user-chosen sizes are an
/// `InvalidArgument` naming the argument, never Rust's allocation-failure abort.
pub const MAX_ENTRIES: usize = 1 << 34;

/// `Err(InvalidArgument)` naming `arg` unless `count * per_item` entries stay within [`MAX_ENTRIES`]
/// and can be reserved.
pub fn check_budget(arg: &'static str, count: usize, per_item: usize) -> Result<()> {
    let total = count.checked_mul(per_item.max(1)).filter(|&t| t <= MAX_ENTRIES);
    let fits = total.is_some_and(|t| Vec::<u64>::new().try_reserve_exact(t).is_ok());
    if !fits {
        return Err(ThriftyError::invalid(
            arg,
            format!("{count} needs {count} x {per_item} entries, more than can be allocated"),
        ));
    }
    Ok(())
}

/// Build splits from user train-index arrays (test = complement), validating them.
pub fn splits_from_train(n: usize, k: usize, trains: &[Vec<i64>]) -> Result<Vec<Split>> {
    if trains.is_empty() {
        return Err(ThriftyError::invalid("splits", "need at least 1 split"));
    }
    let mut out = Vec::with_capacity(trains.len());
    for (j, t) in trains.iter().enumerate() {
        let mut seen = vec![false; n];
        for &i in t {
            if i < 0 || i as usize >= n {
                return Err(ThriftyError::invalid("splits", format!("split {j}: index {i} is out of range [0, {n})")));
            }
            if seen[i as usize] {
                return Err(ThriftyError::invalid("splits", format!("split {j}: index {i} appears twice")));
            }
            seen[i as usize] = true;
        }
        let train: Vec<usize> = (0..n).filter(|&i| seen[i]).collect();
        let test: Vec<usize> = (0..n).filter(|&i| !seen[i]).collect();
        if train.len() < k.saturating_add(2) {
            return Err(ThriftyError::invalid(
                "splits",
                format!(
                    "split {j}: {} train rows are too few for n_components={k} (need {})",
                    train.len(),
                    k.saturating_add(2)
                ),
            ));
        }
        if test.len() < 3 {
            return Err(ThriftyError::invalid(
                "splits",
                format!("split {j}: needs at least 3 test rows, got {}", test.len()),
            ));
        }
        out.push(Split { train, test });
    }
    Ok(out)
}

/// The mean test/train size ratio over the splits (n_te/n_tr for balanced splits).
pub fn size_ratio(splits: &[Split]) -> f64 {
    splits.iter().map(|s| s.test.len() as f64 / s.train.len() as f64).sum::<f64>() / splits.len() as f64
}

pub const R_CLAMP: f64 = 0.9999;

/// Fisher z of a split correlation, clamped to ±0.9999 first.
pub fn fisher_z(r: f64) -> f64 {
    r.clamp(-R_CLAMP, R_CLAMP).atanh()
}

/// Mean Fisher z over the defined correlations (NaN entries skipped; fixed summation order).
pub fn mean_z(rs: &[f64]) -> f64 {
    mean_z_defined(rs.iter().copied())
}

/// Stream offset of permutation streams (split streams use 0..J).
pub const PERM_STREAM: u64 = 1 << 40;

/// Permutation `b` of 0..n (Fisher–Yates on its own stream).
pub fn permutation(n: usize, seed: u64, b: u64) -> Vec<usize> {
    let mut r = rng::stream(seed, PERM_STREAM + b);
    let mut idx: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng::below(&mut r, i + 1);
        idx.swap(i, j);
    }
    idx
}

/// p = (1 + #{null ≥ observed or null non-finite}) / (B + 1).
pub fn permutation_p(observed: f64, null: &[f64]) -> f64 {
    let c = null.iter().filter(|&&v| !v.is_finite() || v >= observed).count();
    (1.0 + c as f64) / (null.len() as f64 + 1.0)
}

/// Marks a null replicate whose refit is rank deficient: its mean z is NaN, which counts as an
/// exceedance. An undefined r (NaN: constant response or prediction) is left out of the mean instead,
/// as on the observed side.
pub const RANK_DEFICIENT: f64 = f64::INFINITY;

/// Mean Fisher z over the defined split correlations (NaN skipped); NaN when a refit was rank
/// deficient or no split defines r.
pub fn mean_z_defined(rs: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for r in rs {
        if r == RANK_DEFICIENT {
            return f64::NAN;
        }
        if r.is_nan() {
            continue;
        }
        sum += fisher_z(r);
        count += 1;
    }
    if count == 0 {
        f64::NAN
    } else {
        sum / count as f64
    }
}

/// Mean Fisher z per permutation over the splits, in split order (`per_split[j][b]`), with the
/// single-machine rules: an undefined r (NaN) is skipped, a rank-deficient refit makes the mean NaN.
pub fn null_mean_z(per_split: &[Vec<f64>]) -> Result<Vec<f64>> {
    let count = per_split.first().map_or(0, |r| r.len());
    if per_split.iter().any(|r| r.len() != count) {
        return Err(ThriftyError::shape("r", "every split needs the same number of permutations"));
    }
    Ok((0..count).map(|b| mean_z_defined(per_split.iter().map(|rs| rs[b]))).collect())
}
