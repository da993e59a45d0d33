//! Exact sampling of projection DPPs K = UUᵀ (U n×p with orthonormal columns), one independent RNG
//! stream per sample, in parallel.
use super::guide::GuideTable;
use super::ortho;
use super::pivot::{self, FactorState, Mode};
use crate::error::{ensure_matrix, Result, ThriftyError};
use crate::rng;
use std::sync::atomic::AtomicBool;

/// Which pivot rule draws the sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Chain rule with a full residual update per step: O(n·p²) per sample.
    Chain,
    /// Accept/reject proposals from the leverage guide table: O(p³ log p) per sample after an O(np)
    /// setup.
    AcceptReject,
}

/// How `Projection::new` verifies that the columns of U are orthonormal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OrthoCheck {
    /// Trust the caller (bases from [`ortho::orthonormalize`]).
    Skip,
    /// O(Np): ‖(UᵀU − I)z‖ ≤ tol for `probes` random unit vectors z drawn from `seed`
    /// ([`ortho::orthonormality_probe`] states the false-accept probability).
    Randomized { tol: f64, probes: usize, seed: u64 },
    /// O(Np²): max |UᵀU − I| ≤ tol.
    Exact { tol: f64 },
}

/// A validated projection kernel with its leverage scores and their guide table.
pub struct Projection {
    pub n: usize,
    pub p: usize,
    pub leverage: Vec<f64>,
    table: GuideTable,
}

/// Rank tolerance of the samplers (relative residual treated as zero).
pub const TOL: f64 = 1e-10;

fn not_orthonormal(what: &str, err: f64, tol: f64) -> ThriftyError {
    ThriftyError::invalid(
        "U",
        format!("columns are not orthonormal ({what} = {err:.3e} > {tol:.1e}); use orthonormalize(U) first"),
    )
}

/// Accept/reject samples of rank at most this run on the calling thread one at a time: about
/// p³ ln p / 2 multiply-adds each, a few milliseconds at p = 250.
const INLINE_SAMPLE_RANK: usize = 250;

impl Projection {
    /// Whether [`Projection::new`] with this check is short enough (well under a second: one
    /// sequential O(Np) scan, see [`super::scan`]) for the bindings to run it on the calling thread
    /// instead of handing it to a worker that watches for Ctrl-C.
    pub fn new_runs_inline(n: usize, p: usize, check: OrthoCheck) -> bool {
        !matches!(check, OrthoCheck::Exact { .. }) && super::scan::runs_inline(n, p)
    }

    /// Whether `count` samples drawn with `method` are short enough to run on the calling thread:
    /// one accept/reject sample of moderate rank (its cost does not depend on n).
    pub fn sample_runs_inline(&self, count: usize, method: Method) -> bool {
        count == 1 && method == Method::AcceptReject && self.p <= INLINE_SAMPLE_RANK
    }

    pub fn new<T: ortho::Dense>(u: &[T], n: usize, p: usize, check: OrthoCheck) -> Result<Self> {
        ensure_matrix("U", u, n, p)?;
        if p > n {
            return Err(ThriftyError::shape(
                "U",
                format!("has more columns ({p}) than rows ({n}); columns cannot be orthonormal"),
            ));
        }
        // One pass over U (`scan`): the leverage scores, the probe of the randomized check, and the
        // finiteness check (a leverage score is finite iff its row is).
        let (leverage, probe_err) = match check {
            OrthoCheck::Randomized { probes, seed, .. } => {
                let (lev, err) = ortho::orthonormality_probe(u, n, p, probes, seed)?;
                (lev, Some(err))
            }
            _ => (ortho::leverage(u, n, p)?, None),
        };
        if leverage.iter().any(|l| !l.is_finite()) {
            return Err(ThriftyError::NotFinite { arg: "U" });
        }
        match (check, probe_err) {
            (OrthoCheck::Randomized { tol, .. }, Some(err)) if !(err <= tol) => {
                return Err(not_orthonormal("‖(UᵀU − I)z‖ for a random unit z", err, tol));
            }
            (OrthoCheck::Exact { tol }, _) => {
                let err = ortho::orthonormality_error(u, n, p)?;
                if !(err <= tol) {
                    return Err(not_orthonormal("max |UᵀU − I|", err, tol));
                }
            }
            _ => {}
        }
        let table = GuideTable::new(&leverage)?;
        Ok(Projection { n, p, leverage, table })
    }

    /// One sample of exactly p items from stream (seed, task) written into `out` (length p); `u`
    /// must be the matrix given to `new`.
    pub fn sample_into<T: ortho::Dense>(
        &self,
        u: &[T],
        method: Method,
        seed: u64,
        task: u64,
        out: &mut [usize],
        cancel: &AtomicBool,
    ) -> Result<()> {
        if u.len() != self.n * self.p {
            return Err(ThriftyError::shape("U", "does not match the sampler's shape"));
        }
        let mut r = rng::stream(seed, task);
        let mut st = FactorState::new(u, self.n, self.p, &self.leverage);
        let mode = match method {
            Method::Chain => Mode::Sample(&mut r),
            Method::AcceptReject => Mode::AcceptReject(&mut r, &self.table),
        };
        out.copy_from_slice(&pivot::run(&mut st, mode, self.p, TOL, cancel)?.items);
        Ok(())
    }

    /// One sample of exactly p items from stream (seed, task).
    pub fn sample<T: ortho::Dense>(&self, u: &[T], method: Method, seed: u64, task: u64) -> Result<Vec<usize>> {
        let mut out = vec![0; self.p];
        self.sample_into(u, method, seed, task, &mut out, super::never())?;
        Ok(out)
    }

    /// Samples number `offset .. offset + count` of the family seeded by `seed` (sample s uses
    /// stream (seed, s), so chunked calls and any thread count give the same result), row-major
    /// `count × p`. Stops with `Err(Interrupted)` soon after `cancel` is raised.
    pub fn sample_range<T: ortho::Dense>(
        &self,
        u: &[T],
        offset: usize,
        count: usize,
        method: Method,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<Vec<usize>> {
        super::per_sample_flat(offset, count, self.p, cancel, |s, row| {
            self.sample_into(u, method, seed, s, row, cancel)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_have_rank_many_distinct_items_and_right_marginals() {
        let (n, p) = (15, 4);
        let mut r = rng::stream(9, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let (u, rank) = ortho::orthonormalize(&x, n, p, 1e-8, true, crate::dpp::never()).unwrap();
        assert_eq!(rank, p);
        let proj = Projection::new(&u, n, p, OrthoCheck::Exact { tol: 1e-8 }).unwrap();
        for method in [Method::Chain, Method::AcceptReject] {
            let flat = proj.sample_range(&u, 0, 20_000, method, 11, crate::dpp::never()).unwrap();
            let s: Vec<Vec<usize>> = flat.chunks(p).map(|c| c.to_vec()).collect();
            let mut counts = vec![0usize; n];
            for smp in &s {
                let mut t = smp.clone();
                t.sort();
                t.dedup();
                assert_eq!(t.len(), p);
                for &i in smp {
                    counts[i] += 1;
                }
            }
            for (i, (&pi, &count)) in proj.leverage.iter().zip(&counts).enumerate() {
                let sd = (pi * (1.0 - pi) / 20_000.0).sqrt();
                assert!((count as f64 / 20_000.0 - pi).abs() < 5.0 * sd + 1e-9, "{method:?} item {i}");
            }
            // Same seed, same samples (and thread-count independence follows from per-sample streams).
            assert_eq!(proj.sample_range(&u, 0, 5, method, 11, crate::dpp::never()).unwrap(), flat[..5 * p].to_vec());
            assert_eq!(proj.sample(&u, method, 11, 3).unwrap(), s[3]);
        }
        let bad: Vec<f64> = x.clone();
        assert!(Projection::new(&bad, n, p, OrthoCheck::Exact { tol: 1e-8 }).is_err());
        assert!(Projection::new(&bad, n, p, OrthoCheck::Randomized { tol: 1e-8, probes: 2, seed: 1 }).is_err());
        assert!(Projection::new(&u, n, p, OrthoCheck::Randomized { tol: 1e-8, probes: 2, seed: 1 }).is_ok());
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use std::time::Instant;

    fn med(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    }

    /// `cargo test --release -p thrifty-core -q dpp::projection::timing -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn one_off_breakdown() {
        let (n, p) = (100_000, 100);
        let mut r = rng::stream(0, 0);
        let x: Vec<f64> = (0..n * p).map(|_| rng::uniform(&mut r) - 0.5).collect();
        let (u, _) = ortho::orthonormalize(&x, n, p, 1e-8, true, crate::dpp::never()).unwrap();
        let mut sweep = vec![1.0f64; 8_000_000];
        let reps = 21;
        let mut t: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
        let flush = |s: &mut Vec<f64>| {
            for v in s.iter_mut() {
                *v += 1.0;
            }
            std::hint::black_box(&s);
        };
        let z: Vec<f64> = (0..2 * p).map(|i| ((i % 7) as f64 - 3.0) / 10.0).collect();
        for _ in 0..reps {
            let mut time = |name: &'static str, f: &mut dyn FnMut()| {
                flush(&mut sweep);
                let t0 = Instant::now();
                f();
                t.entry(name).or_default().push(t0.elapsed().as_secs_f64() * 1e3);
            };
            time("0 plain read (8-lane sumsq)", &mut || {
                let mut acc = [0.0f64; 8];
                for c in u.chunks_exact(8) {
                    for l in 0..8 {
                        acc[l] += c[l] * c[l];
                    }
                }
                std::hint::black_box(acc);
            });
            time("1 leverage (K=0)", &mut || {
                std::hint::black_box(super::super::scan::leverage(&u, n, p).unwrap());
            });
            time("2 scan K=2", &mut || {
                std::hint::black_box(super::super::scan::leverage_and_probe(&u, n, p, &z, 2).unwrap());
            });
            let lev = super::super::scan::leverage(&u, n, p).unwrap();
            time("3 guide table", &mut || {
                std::hint::black_box(GuideTable::new(&lev).unwrap());
            });
            time("4 new Skip", &mut || {
                std::hint::black_box(Projection::new(&u, n, p, OrthoCheck::Skip).unwrap());
            });
            time("5 new Randomized", &mut || {
                std::hint::black_box(
                    Projection::new(&u, n, p, OrthoCheck::Randomized { tol: 1e-6, probes: 2, seed: 1 }).unwrap(),
                );
            });
            let pr = Projection::new(&u, n, p, OrthoCheck::Skip).unwrap();
            time("6 sample (cold cache)", &mut || {
                std::hint::black_box(pr.sample(&u, Method::AcceptReject, 4, 0).unwrap());
            });
            time("7 one-off Randomized+sample", &mut || {
                let pr = Projection::new(&u, n, p, OrthoCheck::Randomized { tol: 1e-6, probes: 2, seed: 1 }).unwrap();
                std::hint::black_box(pr.sample(&u, Method::AcceptReject, 4, 0).unwrap());
            });
        }
        let base = med(t["0 plain read (8-lane sumsq)"].clone());
        for (k, v) in t {
            let m = med(v.clone());
            println!("{k:<32} {m:7.3} ms  x{:.2}  min {:.3}", m / base, v.iter().cloned().fold(f64::MAX, f64::min));
        }
    }
}
