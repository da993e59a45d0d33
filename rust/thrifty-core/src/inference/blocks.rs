//! Pieces of the subspace tests that other processes or machines can run (issue 11): the per-split
//! null correlations of one block of permutations, the mean Fisher z that combines them in split
//! order, and the train membership of every row as a bit mask (the dask-array route).
//!
//! Any partition of the (split × permutation block) grid over workers gives the single-machine null
//! bit for bit: a split's null r for permutations `start .. start + count` depend only on the data,
//! the split, the seed and that block ([`crate::inference::perm::nb_permutation_null`] itself is
//! this function followed by [`null_mean_z`]), and the mean is taken in split order on the driver.
use crate::error::{Result, ThriftyError};
use crate::inference::splits::{check_budget, split_sizes};
use crate::rng;

/// Train membership of every row for the splits [`crate::inference::splits::draw_splits`] draws: bit j
/// of `mask[i]` is set when row i is in the train part of split j. Needs `2 <= n_splits <= 64`;
/// memory is two words per row (one split is drawn at a time), not `n_splits` index arrays.
pub fn train_mask(n: usize, k: usize, n_splits: usize, seed: u64) -> Result<Vec<u64>> {
    if !(2..=64).contains(&n_splits) {
        return Err(ThriftyError::invalid("n_splits", format!("must be in [2, 64] for a split mask, got {n_splits}")));
    }
    let (n_tr, _) = split_sizes(n, k)?;
    check_budget("X", 2, n)?;
    let mut mask = vec![0u64; n];
    let mut idx: Vec<usize> = Vec::with_capacity(n);
    for j in 0..n_splits {
        // the same partial Fisher-Yates draw as `draw_splits`
        let mut r = rng::stream(seed, j as u64);
        idx.clear();
        idx.extend(0..n);
        for i in 0..n_tr {
            let pick = i + rng::below(&mut r, n - i);
            idx.swap(i, pick);
        }
        for &i in &idx[..n_tr] {
            mask[i] |= 1u64 << j;
        }
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::fit::{Data, Learner, Rotation, Spec};
    use crate::inference::perm::Route;
    use crate::inference::perm::{nb_permutation_null, split_null_rs_cancellable};
    use crate::inference::splits::draw_splits;
    use crate::inference::splits::null_mean_z;
    use std::sync::atomic::AtomicBool;

    fn data(n: usize, p: usize) -> (Vec<f64>, Vec<f64>) {
        let mut r = rng::stream(7, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::below(&mut r, 1000) as f64 / 100.0).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * p] + rng::below(&mut r, 100) as f64 / 50.0).collect();
        (x, y)
    }

    #[test]
    fn pieces_reassemble_the_single_machine_null_bit_for_bit() {
        let (n, p) = (60, 8);
        let (x, y) = data(n, p);
        let d = Data::new(&x, n, p, &y, None).unwrap();
        let splits = draw_splits(n, 1, 6, 3).unwrap();
        for learner in [Learner::Pls, Learner::Ridge { alpha: 1.0 }, Learner::Spca { n_features: 4 }] {
            let spec = Spec { learner, k: 1, rotate: Rotation::None };
            let whole = nb_permutation_null(&d, &spec, &splits, 11, 5, 9, Route::Auto).unwrap();
            let cancel = AtomicBool::new(false);
            let mut per_split = vec![];
            for pair in splits.chunks(4) {
                per_split.extend(split_null_rs_cancellable(&d, &spec, pair, 11, 5, 9, Route::Auto, &cancel).unwrap());
            }
            let pieces = null_mean_z(&per_split).unwrap();
            assert_eq!(
                whole.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                pieces.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn train_mask_matches_draw_splits() {
        let (n, k, j, seed) = (101, 2, 7, 42);
        let mask = train_mask(n, k, j, seed).unwrap();
        for (s, split) in draw_splits(n, k, j, seed).unwrap().iter().enumerate() {
            let from_mask: Vec<usize> = (0..n).filter(|&i| mask[i] >> s & 1 == 1).collect();
            assert_eq!(from_mask, split.train);
        }
        assert!(train_mask(n, k, 65, seed).is_err());
        assert!(train_mask(n, k, 1, seed).is_err());
    }
}
