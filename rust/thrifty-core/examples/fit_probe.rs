use std::time::Instant;
use thrifty_core::kmeans::{fit, Algorithm, Init, Params};
fn main() {
    let (n, d, k) = (10000usize, 64usize, 8usize);
    let x: Vec<f64> = (0..n * d).map(|i| ((i * 7919 % 10007) as f64 / 1000.0).sin() * 3.0 + ((i / d) % k) as f64).collect();
    let init: Vec<f64> = x[..k * d].to_vec();
    for mi in [1usize, 2, 11] {
        let p = Params { n_clusters: k, n_init: 1, max_iter: mi, tol: 0.0, algorithm: Algorithm::Lloyd, seed: 0 };
        let mut best = f64::INFINITY;
        for _ in 0..25 {
            let t = Instant::now();
            let f = fit(&x, n, d, None, Init::Centers(&init), &p).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            std::hint::black_box(f);
        }
        println!("max_iter {mi}: {:.2} ms", best * 1e3);
    }
}
