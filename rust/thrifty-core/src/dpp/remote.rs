//! The accept/reject projection sampler run on the driver over fetched rows only (the distributed
//! path): the proposals are drawn up front, the rows they hit are fetched from the workers, and the
//! same loop as the single-machine sampler runs on that compact set of rows.
//!
//! Why this works: the single-machine loop ([`super::pivot`]) draws (proposal, uniform) pairs from
//! stream (seed, s) and nothing else; the batch schedule only decides how many of them are used. So
//! pair k is a fixed function of (seed, s, k), and running the loop on the fetched rows with the same
//! arithmetic (the same [`FactorState`], the same batch sizes) gives the same sample bit for bit.
//! Both samplers run the one loop [`pivot::accept_reject_with`], fed here from the fetched pairs;
//! the test below compares the two end to end.
use super::ortho::Dense;
use super::pivot::{self, FactorState};
use super::projection::TOL;
use crate::error::{Result, ThriftyError};
use crate::rng;
use std::sync::atomic::AtomicBool;

/// The first `count` proposal pairs of sample `task`: targets `u₁·total` (to be mapped to items
/// through the prefix sums of the leverage scores) and the acceptance uniforms `u₂`.
/// `count` follows the caller (the proposals a sample may need): both buffers are allocated fallibly.
pub fn proposal_pairs(seed: u64, task: u64, count: usize, total: f64) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut r = rng::stream(seed, task);
    let mut t = crate::alloc::try_with_capacity("count", count)?;
    let mut u = crate::alloc::try_with_capacity("count", count)?;
    for _ in 0..count {
        t.push(rng::uniform(&mut r) * total);
        u.push(rng::uniform(&mut r));
    }
    Ok((t, u))
}

/// One sample of `p` items (indices into the compact rows) from the proposals `items[k]` (compact
/// index of the k-th proposal) with acceptance uniforms `us[k]`; `rows` (nc×p) are the fetched rows of
/// U and `lev` their leverage scores. `Ok(None)` when the proposals run out before the sample is
/// complete (fetch more and call again).
pub fn sample_from_rows<T: Dense>(
    rows: &[T],
    nc: usize,
    p: usize,
    lev: &[f64],
    items: &[usize],
    us: &[f64],
    cancel: &AtomicBool,
) -> Result<Option<Vec<usize>>> {
    if rows.len() != nc * p || lev.len() != nc || items.len() != us.len() || items.iter().any(|&i| i >= nc) {
        return Err(ThriftyError::shape("rows", "fetched rows, leverages and proposals do not match"));
    }
    let mut state = FactorState::new(rows, nc, p, lev);
    let mut next = 0usize;
    let replay = |b: usize, idx: &mut Vec<usize>, u: &mut Vec<f64>| {
        if next + b > items.len() {
            return false;
        }
        idx.extend_from_slice(&items[next..next + b]);
        u.extend_from_slice(&us[next..next + b]);
        next += b;
        true
    };
    Ok(pivot::accept_reject_with(&mut state, p, TOL, cancel, replay)?.map(|path| path.items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpp::projection::{Method, OrthoCheck, Projection};
    use crate::dpp::{never, tsqr, GuideTable};

    #[test]
    fn fetched_rows_give_the_single_machine_sample() {
        let (n, p) = (2 * tsqr::LEAF_ROWS + 999, 12);
        let mut r = rng::stream(4, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let (u, rank) = tsqr::orthonormalize(&x, n, p, 1e-8, true, never()).unwrap();
        let proj = Projection::new(&u, n, rank, OrthoCheck::Skip).unwrap();
        let table = GuideTable::new(&proj.leverage).unwrap();
        let (totals, last) = tsqr::block_totals(&proj.leverage);
        let mut ends = Vec::new();
        let mut acc = 0.0;
        for t in &totals {
            acc += t;
            ends.push(acc);
        }
        for s in 0..20u64 {
            let want = proj.sample(&u, Method::AcceptReject, 77, s).unwrap();
            let (targets, us) = proposal_pairs(77, s, 2000, acc).unwrap();
            // Map the targets to items the distributed way: block from the totals, then the block.
            let global: Vec<usize> = targets
                .iter()
                .map(|&t| {
                    let b = ends.partition_point(|&e| e <= t);
                    if b == ends.len() {
                        return last.unwrap();
                    }
                    let start = if b == 0 { 0.0 } else { ends[b - 1] };
                    let lo = b * tsqr::LEAF_ROWS;
                    let hi = (lo + tsqr::LEAF_ROWS).min(n);
                    lo + tsqr::locate_in_block(&proj.leverage[lo..hi], start, &[t])[0].unwrap()
                })
                .collect();
            // The table draws the same items.
            let mut rr = rng::stream(77, s);
            for &g in global.iter().take(50) {
                assert_eq!(table_draw(&table, &mut rr), g);
            }
            let mut uniq = global.clone();
            uniq.sort();
            uniq.dedup();
            let rows: Vec<f64> = uniq.iter().flat_map(|&i| u[i * rank..(i + 1) * rank].to_vec()).collect();
            let lev: Vec<f64> = uniq.iter().map(|&i| proj.leverage[i]).collect();
            let items: Vec<usize> = global.iter().map(|g| uniq.binary_search(g).unwrap()).collect();
            let got = sample_from_rows(&rows, uniq.len(), rank, &lev, &items, &us, never()).unwrap().unwrap();
            let got: Vec<usize> = got.into_iter().map(|c| uniq[c]).collect();
            assert_eq!(got, want, "sample {s}");
            assert!(sample_from_rows(&rows, uniq.len(), rank, &lev, &items[..3], &us[..3], never()).unwrap().is_none());
        }
    }

    fn table_draw(t: &GuideTable, r: &mut crate::rng::Stream) -> usize {
        let i = t.draw(r);
        let _ = rng::uniform(r);
        i
    }
}
