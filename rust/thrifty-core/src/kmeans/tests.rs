//! Numerics of the k-means core against brute force on small inputs.
use super::*;
use crate::rng::{stream, uniform};
use std::sync::atomic::AtomicBool;

use crate::threads::with_threads;

fn gaussian_blobs(n: usize, d: usize, centers: usize, spread: f64, seed: u64) -> Vec<f64> {
    let mut r = stream(seed, 0);
    let mut normal = move || {
        let (u1, u2) = (uniform(&mut r).max(1e-300), uniform(&mut r));
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let means: Vec<f64> = (0..centers * d).map(|_| 5.0 * normal()).collect();
    let mut x = Vec::with_capacity(n * d);
    for i in 0..n {
        let c = i % centers;
        for l in 0..d {
            x.push(means[c * d + l] + spread * normal());
        }
    }
    x
}

fn weights(n: usize, seed: u64) -> Vec<f64> {
    let mut r = stream(seed, 9);
    (0..n).map(|_| 0.1 + 2.0 * uniform(&mut r)).collect()
}

fn params(k: usize, algorithm: Algorithm, seed: u64) -> Params {
    Params { n_clusters: k, n_init: 1, max_iter: 300, tol: 0.0, algorithm, seed }
}

fn weighted_sse(x: &[f64], d: usize, w: &[f64], labels: &[u32], k: usize) -> f64 {
    let n = labels.len();
    let mut sums = vec![0.0; k * d];
    let mut ws = vec![0.0; k];
    for i in 0..n {
        let j = labels[i] as usize;
        ws[j] += w[i];
        for l in 0..d {
            sums[j * d + l] += w[i] * x[i * d + l];
        }
    }
    (0..n)
        .map(|i| {
            let j = labels[i] as usize;
            (0..d).map(|l| (x[i * d + l] - sums[j * d + l] / ws[j]).powi(2)).sum::<f64>() * w[i]
        })
        .sum()
}

#[test]
fn sse_never_increases() {
    for (seed, (n, d, k)) in [(1u64, (500, 3, 7)), (2, (800, 20, 15)), (3, (300, 50, 40))] {
        for alg in [Algorithm::Hartigan, Algorithm::Lloyd] {
            for weighted in [false, true] {
                let x = gaussian_blobs(n, d, k / 2 + 1, 3.0, seed);
                let w = weights(n, seed);
                let fit =
                    super::fit(&x, n, d, weighted.then_some(&w[..]), Init::Random, &params(k, alg, seed)).unwrap();
                let mut prev = f64::INFINITY;
                for s in &fit.run.stats {
                    for v in [s.sse_after_batch, s.sse_after_sequential] {
                        assert!(v <= prev * (1.0 + 1e-10) + 1e-9, "{alg:?} weighted={weighted}: {v} > {prev}");
                        prev = v;
                    }
                }
                let f32x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                let fit32 =
                    super::fit(&f32x, n, d, weighted.then_some(&w[..]), Init::Random, &params(k, alg, seed)).unwrap();
                let mut prev = f64::INFINITY;
                for s in &fit32.run.stats {
                    for v in [s.sse_after_batch, s.sse_after_sequential] {
                        assert!(v <= prev * (1.0 + 1e-6) + 1e-6, "f32 {alg:?}: {v} > {prev}");
                        prev = v;
                    }
                }
            }
        }
    }
}

#[test]
fn hartigan_result_is_a_local_optimum() {
    for seed in 0..6u64 {
        let (n, d, k) = (60, 3, 5);
        let x = gaussian_blobs(n, d, 3, 2.5, seed);
        let w = weights(n, seed);
        for weighted in [false, true] {
            let fit = super::fit(
                &x,
                n,
                d,
                weighted.then_some(&w[..]),
                Init::KMeansPlusPlus,
                &params(k, Algorithm::Hartigan, seed),
            )
            .unwrap();
            assert!(fit.run.converged);
            let ww = if weighted { w.clone() } else { vec![1.0; n] };
            let base = weighted_sse(&x, d, &ww, &fit.run.labels, k);
            assert!((base - fit.run.inertia).abs() <= 1e-9 * base.max(1.0));
            let mut labels = fit.run.labels.clone();
            let mut counts = vec![0; k];
            labels.iter().for_each(|&l| counts[l as usize] += 1);
            assert!(counts.iter().all(|&c| c > 0), "empty cluster");
            for i in 0..n {
                let a = labels[i];
                if counts[a as usize] == 1 {
                    continue;
                }
                for b in 0..k as u32 {
                    if b == a {
                        continue;
                    }
                    labels[i] = b;
                    let moved = weighted_sse(&x, d, &ww, &labels, k);
                    assert!(moved >= base * (1.0 - 1e-9), "moving {i} {a}->{b} lowers SSE {base} -> {moved}");
                    labels[i] = a;
                }
            }
        }
    }
}

#[test]
fn lloyd_matches_naive_lloyd() {
    let (n, d, k) = (400, 4, 6);
    let x = gaussian_blobs(n, d, 6, 2.0, 11);
    let init: Vec<f64> = x[..k * d].to_vec();
    let fit = super::fit(&x, n, d, None, Init::Centers(&init), &params(k, Algorithm::Lloyd, 0)).unwrap();
    // Naive Lloyd from the same centres.
    let mut c = init.clone();
    let mut labels = vec![0u32; n];
    for _ in 0..300 {
        let new: Vec<u32> = (0..n)
            .map(|i| {
                (0..k)
                    .fold((0u32, f64::INFINITY), |b, j| {
                        let v = sq_dist(&x[i * d..(i + 1) * d], &c[j * d..(j + 1) * d]);
                        if v < b.1 {
                            (j as u32, v)
                        } else {
                            b
                        }
                    })
                    .0
            })
            .collect();
        let done = new == labels;
        labels = new;
        let mut sums = vec![0.0; k * d];
        let mut cnt = vec![0.0; k];
        for i in 0..n {
            let j = labels[i] as usize;
            cnt[j] += 1.0;
            for l in 0..d {
                sums[j * d + l] += x[i * d + l];
            }
        }
        for j in 0..k {
            if cnt[j] > 0.0 {
                for l in 0..d {
                    c[j * d + l] = sums[j * d + l] / cnt[j];
                }
            }
        }
        if done {
            break;
        }
    }
    assert_eq!(fit.run.labels, labels);
    for (a, b) in fit.run.centers.iter().zip(&c) {
        assert!((a - b).abs() < 1e-9);
    }
}

#[test]
fn identical_on_one_and_two_threads() {
    let (n, d, k) = (3000, 8, 12);
    let x = gaussian_blobs(n, d, 8, 3.0, 5);
    let w = weights(n, 5);
    for alg in [Algorithm::Hartigan, Algorithm::Lloyd] {
        let mut p = params(k, alg, 42);
        p.n_init = 3;
        let one = with_threads(Some(1), || fit(&x, n, d, Some(&w), Init::KMeansPlusPlus, &p).unwrap()).unwrap();
        let two = with_threads(Some(2), || fit(&x, n, d, Some(&w), Init::KMeansPlusPlus, &p).unwrap()).unwrap();
        assert_eq!(one.run.labels, two.run.labels);
        assert_eq!(one.run.centers, two.run.centers);
        assert_eq!(one.run.inertia.to_bits(), two.run.inertia.to_bits());
    }
}

#[test]
fn no_empty_cluster_even_from_duplicate_centres() {
    let (n, d, k) = (50, 2, 5);
    let x = gaussian_blobs(n, d, 2, 1.0, 3);
    let init: Vec<f64> = x[..d].iter().cycle().take(k * d).copied().collect();
    for alg in [Algorithm::Hartigan, Algorithm::Lloyd] {
        let fit = super::fit(&x, n, d, None, Init::Centers(&init), &params(k, alg, 0)).unwrap();
        let mut counts = vec![0; k];
        fit.run.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| c > 0), "{alg:?}: {counts:?}");
    }
}

#[test]
fn kmeans_plusplus_picks_distinct_spread_rows() {
    let (n, d, k) = (400, 2, 4);
    let x = gaussian_blobs(n, d, 4, 0.05, 8);
    let fit = super::fit(&x, n, d, None, Init::KMeansPlusPlus, &params(k, Algorithm::Lloyd, 1)).unwrap();
    // With four tight, far-apart blobs greedy k-means++ lands one centre in each blob.
    let mut blobs: Vec<usize> = fit
        .init_centers
        .chunks_exact(d)
        .map(|c| (0..n).find(|&i| sq_dist(&x[i * d..(i + 1) * d], c) < 1e-18).unwrap() % 4)
        .collect();
    blobs.sort();
    assert_eq!(blobs, vec![0, 1, 2, 3]);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let x = vec![0.0f64, 1.0, 2.0, 3.0];
    let p = params(2, Algorithm::Hartigan, 0);
    assert!(fit(&x, 2, 2, None, Init::KMeansPlusPlus, &Params { n_clusters: 3, ..p.clone() }).is_err());
    assert!(fit(&x, 2, 2, None, Init::KMeansPlusPlus, &Params { n_clusters: 0, ..p.clone() }).is_err());
    assert!(fit(&[f64::NAN, 0.0, 1.0, 1.0], 2, 2, None, Init::KMeansPlusPlus, &p).is_err());
    assert!(fit(&x, 2, 2, Some(&[0.0, 0.0]), Init::KMeansPlusPlus, &p).is_err());
    assert!(fit(&x, 2, 2, Some(&[-1.0, 2.0]), Init::KMeansPlusPlus, &p).is_err());
    assert!(fit(&x, 2, 2, None, Init::Centers(&[0.0, 1.0]), &p).is_err());
    assert!(fit(&x, 3, 2, None, Init::KMeansPlusPlus, &p).is_err());
    assert!(predict(&x, 2, 2, &[0.0; 3], 2, &AtomicBool::new(false)).is_err());
}

#[test]
fn a_raised_cancel_flag_stops_the_fit() {
    let (n, d, k) = (500, 3, 5);
    let x = gaussian_blobs(n, d, 3, 1.0, 4);
    for init in [Init::KMeansPlusPlus, Init::Random] {
        let r = fit_cancellable(&x, n, d, None, init, &params(k, Algorithm::Hartigan, 0), &AtomicBool::new(true));
        assert_eq!(r.err(), Some(ThriftyError::Interrupted));
    }
}

/// scikit-learn's Lloyd (`_kmeans_single_lloyd` with `_relocate_empty_clusters_dense`), written out
/// naively: E-step (nearest centre, lowest index on ties), weighted sums, the m weightless clusters
/// take the m points farthest from their assigned centre (the sums move, the labels stay), means,
/// weightless centres at the heaviest cluster's mean (`_average_centers`); a final E-step unless the labels
/// repeated. Returns the inertia after `iters` iterations.
fn reference_lloyd(x: &[f64], d: usize, w: &[f64], init: &[f64], k: usize, iters: usize) -> f64 {
    let n = w.len();
    let row = |i: usize| &x[i * d..(i + 1) * d];
    let mean: Vec<f64> = (0..d).map(|l| (0..n).map(|i| x[i * d + l]).sum::<f64>() / n as f64).collect();
    let nearest = |c: &[f64]| -> Vec<usize> {
        (0..n)
            .map(|i| {
                (0..k)
                    .fold((0, f64::INFINITY), |b, j| {
                        let v = sq_dist(row(i), &c[j * d..(j + 1) * d]);
                        if v < b.1 {
                            (j, v)
                        } else {
                            b
                        }
                    })
                    .0
            })
            .collect()
    };
    let mut c = init.to_vec();
    let mut labels_old = vec![usize::MAX; n];
    let mut strict = false;
    for _ in 0..iters {
        let labels = nearest(&c);
        let mut sums = vec![0.0; k * d]; // about the data mean, as scikit-learn's centred X
        let mut wts = vec![0.0; k];
        for i in 0..n {
            let j = labels[i];
            wts[j] += w[i];
            for l in 0..d {
                sums[j * d + l] += w[i] * (x[i * d + l] - mean[l]);
            }
        }
        let empty: Vec<usize> = (0..k).filter(|&j| wts[j] == 0.0).collect();
        if !empty.is_empty() {
            let dist: Vec<f64> = (0..n).map(|i| sq_dist(row(i), &c[labels[i] * d..(labels[i] + 1) * d])).collect();
            if dist.iter().any(|&v| v > 0.0) {
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&a, &b| dist[b].total_cmp(&dist[a]).then(a.cmp(&b)));
                for (&j, &i) in empty.iter().zip(&order) {
                    let a = labels[i];
                    for l in 0..d {
                        let v = w[i] * (x[i * d + l] - mean[l]);
                        sums[a * d + l] -= v;
                        sums[j * d + l] = v;
                    }
                    wts[j] = w[i];
                    wts[a] -= w[i];
                }
            }
        }
        for j in 0..k {
            let scale = if wts[j] > 0.0 { 1.0 / wts[j] } else { 1.0 };
            for l in 0..d {
                c[j * d + l] = mean[l] + sums[j * d + l] * scale;
            }
        }
        let heaviest = (0..k).fold(0, |b, j| if wts[j] > wts[b] { j } else { b });
        for j in (0..k).filter(|&j| wts[j] == 0.0) {
            let m = c[heaviest * d..(heaviest + 1) * d].to_vec();
            c[j * d..(j + 1) * d].copy_from_slice(&m);
        }
        if labels == labels_old {
            strict = true;
            break;
        }
        labels_old = labels;
    }
    let labels = if strict { labels_old } else { nearest(&c) };
    (0..n).map(|i| w[i] * sq_dist(row(i), &c[labels[i] * d..(labels[i] + 1) * d])).sum()
}

#[test]
fn lloyd_follows_scikit_learn_step_for_step_when_clusters_empty() {
    let mut relocated = 0;
    for (seed, (n, d, k, blobs)) in
        [(0u64, (600, 8, 12, 12)), (1, (500, 5, 16, 10)), (2, (800, 16, 20, 20)), (3, (300, 2, 9, 4))]
    {
        let x = gaussian_blobs(n, d, blobs, 0.6, seed);
        let mut r = stream(seed, 7);
        // Random rows, with the first row repeated: duplicate centres empty at the first step.
        let mut rows: Vec<usize> = (0..k).map(|_| (uniform(&mut r) * n as f64) as usize).collect();
        rows[1] = rows[0];
        let init: Vec<f64> = rows.iter().flat_map(|&i| x[i * d..(i + 1) * d].to_vec()).collect();
        let ones = vec![1.0; n];
        let mut w = weights(n, seed);
        w[rows[2]] = 0.0; // a zero-weight point can be a centre's only member
        for weighted in [false, true] {
            let ww = if weighted { &w } else { &ones };
            for iters in 1..=12 {
                let p = Params { max_iter: iters, ..params(k, Algorithm::Lloyd, 0) };
                let fit = super::fit(&x, n, d, weighted.then_some(&w[..]), Init::Centers(&init), &p).unwrap();
                let expected = reference_lloyd(&x, d, ww, &init, k, iters);
                assert!(
                    (fit.run.inertia - expected).abs() <= 1e-9 * expected,
                    "seed {seed} weighted={weighted} after {iters} iterations: {} vs scikit-learn's {expected}",
                    fit.run.inertia
                );
                if iters == 12 {
                    relocated += fit.run.stats.iter().map(|s| s.relocated).sum::<usize>();
                }
            }
        }
    }
    assert!(relocated > 0, "no cluster emptied after the first step: the test data must be changed");
}

#[test]
fn hartigan_reseeds_emptied_clusters_and_stays_monotone() {
    let (n, d, k) = (1000, 16, 24);
    let (mut relocated, mut ratio) = (0, 0.0);
    for seed in 0..8u64 {
        let x = gaussian_blobs(n, d, k, 0.6, seed);
        let mut r = stream(seed, 7);
        let init: Vec<f64> = (0..k)
            .flat_map(|_| {
                let i = (uniform(&mut r) * n as f64) as usize;
                x[i * d..(i + 1) * d].to_vec()
            })
            .collect();
        let fit = super::fit(&x, n, d, None, Init::Centers(&init), &params(k, Algorithm::Hartigan, 0)).unwrap();
        let mut counts = vec![0; k];
        fit.run.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| c > 0), "empty cluster: {counts:?}");
        let mut prev = f64::INFINITY;
        for s in &fit.run.stats {
            for v in [s.sse_after_batch, s.sse_after_sequential] {
                assert!(v <= prev * (1.0 + 1e-12), "{v} > {prev}");
                prev = v;
            }
            relocated += s.relocated;
        }
        let lloyd = super::fit(&x, n, d, None, Init::Centers(&init), &params(k, Algorithm::Lloyd, 0)).unwrap();
        ratio += fit.run.inertia / lloyd.run.inertia / 8.0;
    }
    assert!(relocated > 0, "no batch emptied a cluster: the test data must be changed");
    assert!(ratio < 1.0, "Hartigan's mean inertia is {ratio} times Lloyd's from the same starts");
}

#[test]
fn a_raised_cancel_flag_stops_predict_transform_and_inertia() {
    let (n, d, k) = (2000, 3, 4);
    let x = gaussian_blobs(n, d, 3, 1.0, 4);
    let c = &x[..k * d];
    let stop = AtomicBool::new(true);
    assert_eq!(predict(&x, n, d, c, k, &stop).err(), Some(ThriftyError::Interrupted));
    assert_eq!(transform(&x, n, d, c, k, &stop).err(), Some(ThriftyError::Interrupted));
    assert_eq!(inertia(&x, n, d, None, c, k, &stop).err(), Some(ThriftyError::Interrupted));
    let go = AtomicBool::new(false);
    let labels = predict(&x, n, d, c, k, &go).unwrap();
    let dist = transform(&x, n, d, c, k, &go).unwrap();
    let direct: f64 = (0..n).map(|i| dist[i * k + labels[i] as usize].powi(2)).sum();
    assert!((inertia(&x, n, d, None, c, k, &go).unwrap() - direct).abs() <= 1e-9 * direct);
}

#[test]
fn impossible_allocations_are_errors_naming_the_argument() {
    match try_filled("the distances", 1usize << 62, 0u64) {
        Err(ThriftyError::OutOfMemory { what, .. }) => assert_eq!(what, "the distances"),
        other => panic!("expected an error, got {:?}", other.map(|v| v.len())),
    }
}

#[test]
fn many_runs_keep_the_first_best_without_holding_them_all() {
    let (n, d, k) = (200, 2, 4);
    let x = gaussian_blobs(n, d, 4, 2.0, 6);
    let p = Params { n_init: 300, ..params(k, Algorithm::Lloyd, 3) };
    let many = fit(&x, n, d, None, Init::Random, &p).unwrap();
    // The winner is the lowest inertia, the first run on ties: it equals a single run with its stream.
    let alone = (0..300)
        .map(|r| {
            let mut rng = stream(3, r as u64);
            let init = init::random_rows(&Matrix::Dense(&x[..]), d, &[1.0; 200], k, &mut rng);
            fit(&x, n, d, None, Init::Centers(&init), &params(k, Algorithm::Lloyd, 0)).unwrap().run.inertia
        })
        .collect::<Vec<f64>>();
    let best = (0..300).fold(0, |b, r| if alone[r] < alone[b] { r } else { b });
    assert_eq!(many.best_run, best);
    assert!((many.run.inertia - alone[best]).abs() <= 1e-9 * alone[best]);
}

/// CSR parts of a dense row-major matrix (zeros dropped, columns stored in reverse order so that
/// nothing relies on sorted indices).
fn to_csr<T: Real>(x: &[T], d: usize) -> (Vec<usize>, Vec<u32>, Vec<T>) {
    let (mut indptr, mut indices, mut values) = (vec![0usize], Vec::new(), Vec::new());
    for row in x.chunks_exact(d) {
        for l in (0..d).rev() {
            if row[l] != T::zero() {
                indices.push(l as u32);
                values.push(row[l]);
            }
        }
        indptr.push(indices.len());
    }
    (indptr, indices, values)
}

/// Sparse blobs: each row keeps ~30 % of its coordinates (the rest exact zeros).
fn sparse_blobs(n: usize, d: usize, k: usize, seed: u64) -> Vec<f64> {
    let mut x = gaussian_blobs(n, d, k, 1.0, seed);
    let mut r = stream(seed, 3);
    x.iter_mut().for_each(|v| {
        if uniform(&mut r) > 0.3 {
            *v = 0.0;
        }
    });
    x
}

fn csr_equals_dense<T: Real>(x64: &[f64], n: usize, d: usize, k: usize, w: Option<&[f64]>, alg: Algorithm, rtol: f64) {
    let x: Vec<T> = x64.iter().map(|&v| T::of(v)).collect();
    let (indptr, indices, values) = to_csr(&x, d);
    let csr = Matrix::Csr(Csr { indptr: &indptr, indices: &indices, values: &values });
    let never = AtomicBool::new(false);
    for init in [0usize, 1] {
        let p = params(k, alg, 11);
        let mk = || if init == 0 { Init::KMeansPlusPlus } else { Init::Random };
        let dense = fit_matrix(Matrix::Dense(&x[..]), n, d, w, mk(), &p, &never).unwrap();
        let sparse = fit_matrix(csr, n, d, w, mk(), &p, &never).unwrap();
        assert_eq!(dense.init_centers, sparse.init_centers, "{alg:?} init {init}");
        assert_eq!(dense.run.labels, sparse.run.labels, "{alg:?} init {init}");
        assert!((dense.run.inertia - sparse.run.inertia).abs() <= rtol * dense.run.inertia, "{alg:?}");
        let c = &sparse.run.centers;
        assert_eq!(predict_matrix(csr, n, d, c, k, &never).unwrap(), predict(&x, n, d, c, k, &never).unwrap());
        let (a, b) = (inertia_matrix(csr, n, d, w, c, k, &never).unwrap(), inertia(&x, n, d, w, c, k, &never).unwrap());
        assert!((a - b).abs() <= rtol * b);
        let (a, b) = (transform_matrix(csr, n, d, c, k, &never).unwrap(), transform(&x, n, d, c, k, &never).unwrap());
        for (u, v) in a.iter().zip(&b) {
            assert!((u.as_f64() - v.as_f64()).abs() <= 1e-3 * (1.0 + v.as_f64()));
        }
    }
}

#[test]
fn csr_input_gives_the_dense_result() {
    // Sparse data are never centred and their distances go through ‖x‖² − 2x·c + ‖c‖²: the same
    // partition as the dense path, the inertia to rounding.
    let (n, d, k) = (600, 20, 6);
    let x = sparse_blobs(n, d, k, 5);
    let w = weights(n, 5);
    for alg in [Algorithm::Lloyd, Algorithm::Hartigan] {
        for wt in [None, Some(&w[..])] {
            csr_equals_dense::<f64>(&x, n, d, k, wt, alg, 1e-10);
            csr_equals_dense::<f32>(&x, n, d, k, wt, alg, 1e-5);
        }
    }
}

#[test]
fn malformed_csr_is_an_error_naming_x() {
    let (indptr, indices, values) = (vec![0usize, 2, 1], vec![0u32, 1], vec![1.0f64, 2.0]);
    let p = params(1, Algorithm::Lloyd, 0);
    let never = AtomicBool::new(false);
    let bad = |ip: &[usize], ix: &[u32], v: &[f64], d: usize| {
        let m = Matrix::Csr(Csr { indptr: ip, indices: ix, values: v });
        fit_matrix(m, ip.len() - 1, d, None, Init::Random, &p, &never).unwrap_err().to_string()
    };
    assert!(bad(&indptr, &indices, &values, 2).contains('X')); // indptr decreasing
    assert!(bad(&[0, 2], &[0, 5], &values, 2).contains('X')); // column out of range
    assert!(bad(&[0, 2], &[0, 1], &[1.0, f64::NAN], 2).contains('X'));
}

#[test]
fn hartigan_never_ends_above_lloyd_from_the_same_start() {
    // Hartigan runs Lloyd's rule (with its relocation of emptied clusters) to Lloyd's fixed point,
    // then only descends: from any start it ends at or below Lloyd's inertia.
    for seed in 0..6u64 {
        let (n, d, k) = (1500, 8, 20);
        let x = gaussian_blobs(n, d, k, 0.8, seed);
        for random in [true, false] {
            let again = || -> Init<'_, f64> {
                if random {
                    Init::Random
                } else {
                    Init::KMeansPlusPlus
                }
            };
            let h = super::fit(&x, n, d, None, again(), &params(k, Algorithm::Hartigan, seed)).unwrap();
            let l = super::fit(&x, n, d, None, again(), &params(k, Algorithm::Lloyd, seed)).unwrap();
            assert!(
                h.run.inertia <= l.run.inertia * (1.0 + 1e-12),
                "seed {seed}: {} > {}",
                h.run.inertia,
                l.run.inertia
            );
        }
    }
}

#[test]
fn quick_transfer_ends_at_a_hartigan_optimum_on_overlapping_mixtures() {
    // Heavily overlapping clusters (sd = centre spread) keep many rows on the boundary, where the
    // quick-transfer passes do most of the moving: the run must still end at a Hartigan local
    // optimum (no single move lowers the weighted SSE, by the exact move formula), below Lloyd's
    // fixed point, identically on one and on two threads, for f64 and f32 rows.
    for seed in 0..4u64 {
        let (n, d, k) = (3000, 4, 16);
        let x = gaussian_blobs(n, d, k, 5.0, seed);
        let w = weights(n, seed);
        for weighted in [false, true] {
            let sw = weighted.then_some(&w[..]);
            let p = params(k, Algorithm::Hartigan, seed);
            let fit = with_threads(Some(1), || super::fit(&x, n, d, sw, Init::KMeansPlusPlus, &p).unwrap()).unwrap();
            let two = with_threads(Some(2), || super::fit(&x, n, d, sw, Init::KMeansPlusPlus, &p).unwrap()).unwrap();
            assert_eq!(fit.run.labels, two.run.labels);
            assert!(fit.run.converged);
            assert!(fit.run.stats.iter().map(|s| s.sequential_moves).sum::<usize>() > 0);
            let lloyd = super::fit(&x, n, d, sw, Init::KMeansPlusPlus, &params(k, Algorithm::Lloyd, seed)).unwrap();
            assert!(fit.run.inertia <= lloyd.run.inertia * (1.0 + 1e-12));
            let ww = if weighted { w.clone() } else { vec![1.0; n] };
            let (labels, mut ws, mut sums) = (&fit.run.labels, vec![0.0; k], vec![0.0; k * d]);
            let mut counts = vec![0usize; k];
            for i in 0..n {
                let j = labels[i] as usize;
                (ws[j], counts[j]) = (ws[j] + ww[i], counts[j] + 1);
                (0..d).for_each(|l| sums[j * d + l] += ww[i] * x[i * d + l]);
            }
            let dist2 =
                |i: usize, j: usize| (0..d).map(|l| (x[i * d + l] - sums[j * d + l] / ws[j]).powi(2)).sum::<f64>();
            for i in 0..n {
                let a = labels[i] as usize;
                if counts[a] == 1 {
                    continue;
                }
                let gain = ww[i] * ws[a] / (ws[a] - ww[i]) * dist2(i, a);
                for b in (0..k).filter(|&b| b != a) {
                    let cost = ww[i] * ws[b] / (ws[b] + ww[i]) * dist2(i, b);
                    assert!(cost >= gain * (1.0 - 1e-9), "seed {seed}: moving {i} {a}->{b} lowers the SSE");
                }
            }
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let f32fit = super::fit(&x32, n, d, sw, Init::KMeansPlusPlus, &p).unwrap();
            assert!(f32fit.run.converged);
        }
    }
}
