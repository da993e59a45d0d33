//! Cross-checks of the inference core: closed forms, brute force, route agreement, thread independence.
use super::baselines::{cv_permutation, deflate, jackknife, pls_fit};
use super::fit::{prepare, split_r, train_response, wcorr, Data, Learner, Rotation, Spec};
use super::nb::{gate, split_correlations};
use super::perm::{nb_permutation_null, Route};
use super::splits::draw_splits;
use crate::linalg::{dot, x_v, xt_v};
use crate::rng;

fn normals(n: usize, seed: u64) -> Vec<f64> {
    let mut r = rng::stream(seed, 0);
    (0..n)
        .map(|_| {
            let u1 = rng::uniform(&mut r).max(1e-300);
            let u2 = rng::uniform(&mut r);
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect()
}

fn problem(n: usize, p: usize, seed: u64, signal: f64) -> (Vec<f64>, Vec<f64>) {
    let mut x = normals(n * p, seed);
    // give columns different scales and offsets
    for i in 0..n {
        for j in 0..p {
            x[i * p + j] = x[i * p + j] * (1.0 + j as f64 * 0.3) + j as f64;
        }
    }
    let e = normals(n, seed + 1);
    let y: Vec<f64> = (0..n).map(|i| signal * (x[i * p] - 0.5 * x[i * p + 1]) + e[i]).collect();
    (x, y)
}

fn spec(learner: Learner, k: usize) -> Spec {
    Spec { learner, k, rotate: Rotation::None }
}

#[test]
fn pls_coef_equals_krylov_ols() {
    // PLS1 with k components = OLS of ỹ on X̃ restricted to span{X̃ᵀỹ, (X̃ᵀX̃)X̃ᵀỹ, …}
    let (n, p) = (40, 7);
    let (x, y) = problem(n, p, 3, 0.7);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let all: Vec<usize> = (0..n).collect();
    let prep = prepare(&data, &all, &[], true).unwrap();
    let ytr = train_response(&prep, &y).unwrap();
    for k in 1..=3 {
        let mut xs = prep.xs_tr.clone();
        let mut yy = ytr.clone();
        let coef = super::fit::nipals(&mut xs, &mut yy, n, p, k, false).unwrap().coef();
        let mut basis = vec![xt_v(&prep.xs_tr, n, p, &ytr)];
        for a in 1..k {
            let t = x_v(&prep.xs_tr, n, p, &basis[a - 1]);
            basis.push(xt_v(&prep.xs_tr, n, p, &t));
        }
        let s: Vec<Vec<f64>> = basis.iter().map(|b| x_v(&prep.xs_tr, n, p, b)).collect();
        let beta = crate::linalg::ols(&s, &ytr).unwrap();
        for j in 0..p {
            let c: f64 = (0..k).map(|a| beta[a] * basis[a][j]).sum();
            assert!((c - coef[j]).abs() < 1e-9 * (1.0 + c.abs()), "k={k} j={j}: {c} vs {}", coef[j]);
        }
    }
}

#[test]
fn k1_split_r_is_the_linear_map() {
    let (n, p) = (30, 12);
    let (x, y) = problem(n, p, 5, 0.5);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = draw_splits(n, 1, 3, 11).unwrap();
    let prep = prepare(&data, &sp[0].train, &sp[0].test, true).unwrap();
    let r = split_r(&spec(Learner::Pls, 1), &prep, &y, 0).unwrap();
    let ytr = train_response(&prep, &y).unwrap();
    let w = xt_v(&prep.xs_tr, prep.n_tr, p, &ytr);
    let pred = x_v(&prep.xs_te, prep.n_te, p, &w);
    let yte: Vec<f64> = sp[0].test.iter().map(|&i| y[i]).collect();
    assert!((r - wcorr(&pred, &yte, &vec![1.0; yte.len()])).abs() < 1e-12);
}

#[test]
fn fused_pls1_equals_the_refit_path() {
    for &(n, p, weighted) in &[(40usize, 12usize, false), (40, 12, true), (30, 80, true), (50, 5, false)] {
        let (x, y) = problem(n, p, 13 + p as u64, 0.4);
        let w: Vec<f64> = (0..n).map(|i| 0.3 + (i % 7) as f64 * 0.25).collect();
        let data = Data::new(&x, n, p, &y, if weighted { Some(&w) } else { None }).unwrap();
        for s in draw_splits(n, 1, 4, 5).unwrap() {
            let prep = prepare(&data, &s.train, &s.test, true).unwrap();
            let slow = split_r(&spec(Learner::Pls, 1), &prep, &y, 0).unwrap();
            let fast = super::fit::pls1_split_r(&data, &s.train, &s.test, &y).unwrap();
            assert!((slow - fast).abs() < 1e-12, "{slow} vs {fast}");
        }
    }
}

fn check_routes(n: usize, p: usize, learner: Learner, k: usize, weighted: bool) {
    let (x, y) = problem(n, p, 7 + k as u64, 0.3);
    let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 5) as f64 * 0.3).collect();
    let data = Data::new(&x, n, p, &y, if weighted { Some(&w) } else { None }).unwrap();
    let sp = draw_splits(n, k, 4, 1).unwrap();
    let s = spec(learner, k);
    let fast = nb_permutation_null(&data, &s, &sp, 99, 0, 20, Route::Auto).unwrap();
    let slow = nb_permutation_null(&data, &s, &sp, 99, 0, 20, Route::Refit).unwrap();
    for (a, b) in fast.iter().zip(&slow) {
        assert!((a - b).abs() < 1e-9, "n={n} p={p} k={k} weighted={weighted}: {a} vs {b}");
    }
}

#[test]
fn permutation_routes_agree_with_refits() {
    for &weighted in &[false, true] {
        for k in 1..=3 {
            check_routes(40, 60, Learner::Pls, k, weighted); // n-space (p ≥ n_tr)
            check_routes(80, 6, Learner::Pls, k, weighted); // p-space (n_tr > p)
        }
        check_routes(40, 60, Learner::Ridge { alpha: 2.0 }, 1, weighted);
        check_routes(80, 6, Learner::Ridge { alpha: 0.5 }, 1, weighted);
        let basis: Vec<f64> = normals(6 * 2, 4);
        check_routes(50, 6, Learner::Basis { basis }, 2, weighted);
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let (n, p) = (60, 30);
    let (x, y) = problem(n, p, 2, 0.3);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = draw_splits(n, 2, 8, 3).unwrap();
    let s = spec(Learner::Pls, 2);
    let one = crate::threads::with_threads(Some(1), || nb_permutation_null(&data, &s, &sp, 5, 0, 30, Route::Auto))
        .unwrap()
        .unwrap();
    let two = crate::threads::with_threads(Some(2), || nb_permutation_null(&data, &s, &sp, 5, 0, 30, Route::Auto))
        .unwrap()
        .unwrap();
    assert_eq!(one, two);
    let r1 = crate::threads::with_threads(Some(1), || split_correlations(&data, &s, &sp, &y)).unwrap().unwrap();
    let r2 = crate::threads::with_threads(Some(2), || split_correlations(&data, &s, &sp, &y)).unwrap().unwrap();
    assert_eq!(r1, r2);
    // chunking permutations does not change them
    let head = nb_permutation_null(&data, &s, &sp, 5, 0, 10, Route::Auto).unwrap();
    let tail = nb_permutation_null(&data, &s, &sp, 5, 10, 20, Route::Auto).unwrap();
    assert_eq!([head, tail].concat(), one);
}

#[test]
fn basis_rotation_leaves_r_unchanged() {
    let (n, p, k) = (50, 8, 3);
    let (x, y) = problem(n, p, 8, 0.4);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = draw_splits(n, k, 5, 2).unwrap();
    let b = normals(p * k, 21);
    let r = normals(k * k, 22); // a random (invertible with probability 1) k×k
    let mut br = vec![0.0; p * k];
    for i in 0..p {
        for a in 0..k {
            br[i * k + a] = (0..k).map(|m| b[i * k + m] * r[m * k + a]).sum();
        }
    }
    let r0 = split_correlations(&data, &spec(Learner::Basis { basis: b }, k), &sp, &y).unwrap();
    let r1 = split_correlations(&data, &spec(Learner::Basis { basis: br }, k), &sp, &y).unwrap();
    for (a, c) in r0.iter().zip(&r1) {
        assert!((a - c).abs() < 1e-10);
    }
    // varimax on the PLS basis gives the same r
    let pls = split_correlations(&data, &spec(Learner::Pls, k), &sp, &y).unwrap();
    let rot =
        split_correlations(&data, &Spec { learner: Learner::Pls, k, rotate: Rotation::Varimax }, &sp, &y).unwrap();
    for (a, c) in pls.iter().zip(&rot) {
        assert!((a - c).abs() < 1e-10);
    }
}

#[test]
fn standardisation_is_scale_invariant() {
    let (n, p) = (40, 6);
    let (x, y) = problem(n, p, 9, 0.5);
    let sp = draw_splits(n, 2, 4, 2).unwrap();
    let base = split_correlations(&Data::new(&x, n, p, &y, None).unwrap(), &spec(Learner::Pls, 2), &sp, &y).unwrap();
    for &s in &[1e-150, 1e150] {
        let xs: Vec<f64> = x.iter().map(|v| v * s).collect();
        let ys: Vec<f64> = y.iter().map(|v| v * s).collect();
        let r =
            split_correlations(&Data::new(&xs, n, p, &ys, None).unwrap(), &spec(Learner::Pls, 2), &sp, &ys).unwrap();
        for (a, b) in base.iter().zip(&r) {
            assert!((a - b).abs() < 1e-10, "scale {s}: {a} vs {b}");
        }
    }
}

#[test]
fn constant_columns_drop_out() {
    let (n, p) = (40, 5);
    let (mut x, y) = problem(n, p, 4, 0.5);
    let sp = draw_splits(n, 1, 4, 2).unwrap();
    let r_full = split_correlations(&Data::new(&x, n, p, &y, None).unwrap(), &spec(Learner::Pls, 1), &sp, &y).unwrap();
    for i in 0..n {
        x[i * p + 4] = 3.0;
    }
    let r_const = split_correlations(&Data::new(&x, n, p, &y, None).unwrap(), &spec(Learner::Pls, 1), &sp, &y).unwrap();
    // dropping column 4 entirely gives the same r as making it constant
    let x4: Vec<f64> = (0..n).flat_map(|i| x[i * p..i * p + 4].to_vec()).collect();
    let r_drop = split_correlations(&Data::new(&x4, n, 4, &y, None).unwrap(), &spec(Learner::Pls, 1), &sp, &y).unwrap();
    for (a, b) in r_const.iter().zip(&r_drop) {
        assert!((a - b).abs() < 1e-12);
    }
    assert_ne!(r_full, r_const);
}

#[test]
fn bad_input_is_an_error() {
    let x = vec![1.0, 2.0, 3.0, 4.0];
    assert!(Data::new(&x, 2, 2, &[1.0, 2.0, 3.0], None).is_err());
    assert!(Data::new(&x, 2, 2, &[1.0, 1.0], None).is_err());
    assert!(Data::new(&[f64::NAN, 1.0, 2.0, 3.0], 2, 2, &[1.0, 2.0], None).is_err());
    assert!(Data::new(&x, 2, 2, &[1.0, 2.0], Some(&[-1.0, 1.0])).is_err());
    assert!(draw_splits(5, 1, 10, 0).is_err());
    assert!(draw_splits(50, 1, 1, 0).is_err());
    let (n, p) = (30, 3);
    let (x, y) = problem(n, p, 1, 0.5);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = draw_splits(n, 1, 3, 0).unwrap();
    assert!(split_correlations(&data, &spec(Learner::Pls, 4), &sp, &y).is_err());
    assert!(split_correlations(&data, &spec(Learner::Ridge { alpha: 1.0 }, 2), &sp, &y).is_err());
    assert!(split_correlations(&data, &spec(Learner::Ridge { alpha: -1.0 }, 1), &sp, &y).is_err());
    assert!(split_correlations(&data, &spec(Learner::Basis { basis: vec![1.0; 5] }, 2), &sp, &y).is_err());
    assert!(super::splits::splits_from_train(n, 1, &[vec![0, 1, 2, 40], vec![1, 2, 3, 4]]).is_err());
    assert!(super::splits::splits_from_train(n, 1, &[vec![0, 0, 2, 3], vec![1, 2, 3, 4]]).is_err());
    // rank: duplicated columns give rank 1, so k = 2 fails cleanly
    let xd: Vec<f64> = (0..n).flat_map(|i| vec![x[i * p]; 3]).collect();
    let dd = Data::new(&xd, n, 3, &y, None).unwrap();
    assert!(split_correlations(&dd, &spec(Learner::Pls, 2), &sp, &y).is_err());
}

#[test]
fn gate_and_baselines_run() {
    let (n, p) = (60, 10);
    let (x, y) = problem(n, p, 6, 0.8);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let g = gate(&data).unwrap();
    assert_eq!(g.n_eff, 60.0);
    assert!(g.stable_rank > 1.0 && g.stable_rank <= 10.0);
    assert!(!g.reroute);
    // one-factor data has stable rank near 1 and trips the gate
    let f = normals(n, 77);
    let xf: Vec<f64> = (0..n * p).map(|i| f[i / p] + 0.05 * x[i]).collect();
    assert!(gate(&Data::new(&xf, n, p, &y, None).unwrap()).unwrap().reroute);
    let (q2, null) = cv_permutation(&data, &spec(Learner::Pls, 1), 5, 3, 0, 19, true).unwrap();
    assert!(q2 > 0.2 && null.iter().all(|&v| v < q2));
    let jk = jackknife(&data, 1, 10, 1).unwrap();
    assert_eq!(jk.df, 9.0);
    assert!(jk.t[0].abs() > 3.0);
    let fit = pls_fit(&data, 2).unwrap();
    assert_eq!(fit.coef.len(), p);
    let (xr, yr) = deflate(&data, 1).unwrap();
    assert_eq!(xr.len(), n * p);
    // the deflated y is orthogonal to the first score
    let t1: Vec<f64> = (0..n)
        .map(|i| dot(&xr[i * p..(i + 1) * p], &fit.x_weights.iter().step_by(2).copied().collect::<Vec<_>>()))
        .collect();
    assert!(dot(&t1, &yr).abs() < 1e-8 * (dot(&yr, &yr).sqrt() * dot(&t1, &t1).sqrt() + 1.0));
}

#[test]
fn undefined_split_correlations_are_nan_never_zero() {
    // y constant on a test part: r is undefined (NaN), not 0, on every route
    let (n, p) = (12, 3);
    let (x, _) = problem(n, p, 8, 0.0);
    let y: Vec<f64> = (0..n).map(|i| if i < 6 { 0.0 } else { i as f64 }).collect();
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = super::splits::splits_from_train(n, 1, &[(6..12).collect(), (0..6).collect()]).unwrap();
    for learner in [Learner::Pls, Learner::Ridge { alpha: 1.0 }, Learner::Basis { basis: vec![1.0, 0.0, 0.0] }] {
        let r = split_correlations(&data, &spec(learner.clone(), 1), &sp, &y).unwrap();
        assert!(r[0].is_nan() && r[1].is_nan(), "{learner:?}: {r:?}");
    }
    // the permutation statistic leaves undefined splits out and marks rank-deficient refits
    use super::splits::{mean_z_defined, RANK_DEFICIENT};
    let z = mean_z_defined([0.2, f64::NAN, 0.4].into_iter());
    assert!((z - (0.2f64.atanh() + 0.4f64.atanh()) / 2.0).abs() < 1e-15);
    assert!(mean_z_defined([0.2, RANK_DEFICIENT].into_iter()).is_nan());
    assert!(mean_z_defined([f64::NAN, f64::NAN].into_iter()).is_nan());
}

#[test]
fn varimax_reports_convergence() {
    let l: Vec<f64> = (0..30).map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0 + (i as f64).sin()).collect();
    assert!(super::varimax::varimax(&l, 10, 3, true, 500, 1e-10).unwrap().converged);
    assert!(!super::varimax::varimax(&l, 10, 3, true, 1, 1e-10).unwrap().converged);
}

#[test]
fn pls_fit_stops_like_sklearn_when_the_y_residual_vanishes() {
    // n = 8 rows, p = 12 columns: the centred data have rank 7, so at most 7 components are extracted
    let (n, p) = (8, 12);
    let (x, y) = problem(n, p, 9, 1.0);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let fit = pls_fit(&data, 8).unwrap();
    assert_eq!(fit.n_fitted, 7);
    assert_eq!(fit.x_weights.len(), p * 8);
    assert!(fit.coef.iter().all(|c| c.is_finite()));
    assert!(pls_fit(&data, 9).is_err()); // scikit-learn's bound min(n, p)
}

#[test]
fn absurd_sizes_are_errors_not_aborts() {
    use super::splits::check_budget;
    assert!(draw_splits(100, 1, usize::MAX / 2, 0).is_err());
    assert!(draw_splits(1 << 20, 1, 1 << 20, 0).is_err());
    assert!(check_budget("n_perm", usize::MAX, 3).is_err());
    assert!(check_budget("n_perm", 1000, 1000).is_ok());
    let (n, p) = (30, 3);
    let (x, y) = problem(n, p, 1, 0.5);
    let data = Data::new(&x, n, p, &y, None).unwrap();
    let sp = draw_splits(n, 1, 3, 0).unwrap();
    let e = nb_permutation_null(&data, &spec(Learner::Pls, 1), &sp, 1, 0, usize::MAX / 4, Route::Auto).unwrap_err();
    assert!(e.to_string().starts_with("n_perm"));
    assert!(cv_permutation(&data, &spec(Learner::Pls, 1), 5, 3, 0, usize::MAX, true).is_err());
}
