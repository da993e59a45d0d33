//! Walker/Vose alias table: O(N) construction, O(1) draws from a discrete distribution.
use crate::error::{Result, ThriftyError};
use crate::rng::{self, Stream};

#[derive(Clone, Debug)]
pub struct AliasTable {
    prob: Vec<f64>,
    alias: Vec<usize>,
}

impl AliasTable {
    /// Table for weights proportional to `w` (non-negative, finite, positive sum).
    pub fn new(w: &[f64]) -> Result<Self> {
        let n = w.len();
        if n == 0 {
            return Err(ThriftyError::shape("weights", "must be non-empty"));
        }
        if w.iter().any(|&x| !x.is_finite() || x < 0.0) {
            return Err(ThriftyError::invalid("weights", "must be finite and non-negative"));
        }
        let total: f64 = w.iter().sum();
        if !(total > 0.0) {
            return Err(ThriftyError::invalid("weights", "must have a positive sum"));
        }
        let mut prob: Vec<f64> = w.iter().map(|&x| x * n as f64 / total).collect();
        let mut alias = vec![0usize; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| prob[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s] = l;
            prob[l] -= 1.0 - prob[s];
            if prob[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        for i in large.into_iter().chain(small) {
            prob[i] = 1.0;
        }
        Ok(AliasTable { prob, alias })
    }

    #[inline]
    pub fn draw(&self, rng: &mut Stream) -> usize {
        let i = rng::below(rng, self.prob.len());
        if rng::uniform(rng) < self.prob[i] {
            i
        } else {
            self.alias[i]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_matches_weights() {
        let w = [0.5, 0.0, 2.0, 1.5, 0.25];
        let t = AliasTable::new(&w).unwrap();
        let mut r = rng::stream(3, 0);
        let mut c = [0usize; 5];
        let n = 200_000;
        for _ in 0..n {
            c[t.draw(&mut r)] += 1;
        }
        let tot: f64 = w.iter().sum();
        for i in 0..5 {
            let p = w[i] / tot;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((c[i] as f64 / n as f64 - p).abs() < 5.0 * sd + 1e-12, "item {i}");
        }
        assert!(AliasTable::new(&[0.0, 0.0]).is_err());
        assert!(AliasTable::new(&[f64::NAN]).is_err());
    }
}
