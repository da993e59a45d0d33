use std::time::Instant;
use thrifty_core::scalar::Real;
fn main() {
    for &(m, n, k) in &[(256usize, 64usize, 16usize), (256, 8, 2), (256, 256, 64), (256, 64, 64), (256, 8, 16)] {
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64).sin()).collect();
        let b: Vec<f64> = (0..n * k).map(|i| (i as f64).cos()).collect();
        let mut out = vec![0.0; m * n];
        let reps = 2000;
        let t = Instant::now();
        for _ in 0..reps { f64::gemm_nt(&a, &b, m, n, k, &mut out); }
        let dt = t.elapsed().as_secs_f64() / reps as f64;
        // naive
        let t = Instant::now();
        for _ in 0..reps {
            for i in 0..m { for j in 0..n { let mut s = 0.0; for l in 0..k { s += a[i*k+l]*b[j*k+l]; } out[i*n+j] = s; } }
        }
        let dn = t.elapsed().as_secs_f64() / reps as f64;
        println!("{m}x{n}x{k}: faer {:.1} us ({:.1} GF/s), naive {:.1} us ({:.1} GF/s)", dt*1e6, 2.0*(m*n*k) as f64/dt/1e9, dn*1e6, 2.0*(m*n*k) as f64/dn/1e9);
    }
}
