//! Step 1 of the subspace test, written once for every front end (Python, the C ABI, R): the
//! exact power-of-two rescaling of badly scaled input, the pre-run gate's rules, Kish's effective
//! n, where the NB-asymptotic test is calibrated (the learner rule and its `NB_MIN_*` thresholds),
//! and the resolution of `method` into the test that runs.
//!
//! Imports only [`crate::error`] and [`crate::alloc`]; `nb` (the gate's numbers) and `run` (the
//! test) build on it.
use crate::error::Result;
use std::borrow::Cow;

/// The design gate reroutes when Kish's n_eff is below this,
pub const GATE_MIN_NEFF: f64 = 25.0;
/// or the stable rank of the standardised X is below this,
pub const GATE_MIN_STABLE_RANK: f64 = 3.0;
/// or X has at most this many columns.
pub const GATE_MAX_COLUMNS: usize = 4;

/// Where the NB-asymptotic test is calibrated (benches/calibration_inference.py, two-sided, ≥ 2000
/// null replicates per cell): PLS1 with one component on n_eff ≥ `NB_MIN_N_EFF` rows. The
/// Nadeau–Bengio factor n_test/n_train is right when the split statistics of one data set are
/// correlated about 1/2 under the null; for PLS1 at k = 1 they are (0.47–0.51 at n ≥ 100). Ridge
/// probes, supervised PCA, fixed bases, callables and transformers learn directions that change more
/// from split to split (null correlation 0.14–0.36), PLS with k ≥ 2 and PLS2 less so (about 0.43),
/// and small samples are off too: the NB test is then conservative and loses power, so
/// `method = "auto"` runs the NB-permutation test for them. With a dominant factor (stable rank of
/// the standardised X below `NB_MIN_STABLE_RANK`) PLS1's null correlation drifts below 1/2 as well
/// and the NB test's power falls up to 3 points below the permutation test's.
pub const NB_MIN_N_EFF: f64 = 60.0;
/// See [`NB_MIN_N_EFF`].
pub const NB_MIN_STABLE_RANK: f64 = 8.0;

/// The pre-run gate: Kish n_eff, stable rank of the (weighted-)standardised X, its column count,
/// whether a rule fires and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub n_eff: f64,
    pub stable_rank: f64,
    pub n_columns: usize,
    pub reroute: bool,
    pub reasons: Vec<String>,
}

/// The gate's rules on its three numbers (the numbers come from [`crate::inference::nb::gate`], or
/// from a block summary of X on the dask-array route).
pub fn gate_rules(n_eff: f64, stable_rank: f64, n_columns: usize) -> Gate {
    let mut reasons = vec![];
    if n_eff < GATE_MIN_NEFF {
        reasons.push(format!("effective sample size n_eff = {n_eff:.1} < {GATE_MIN_NEFF}"));
    }
    if stable_rank < GATE_MIN_STABLE_RANK {
        reasons.push(format!("stable rank of standardised X = {stable_rank:.2} < {GATE_MIN_STABLE_RANK}"));
    }
    if n_columns <= GATE_MAX_COLUMNS {
        reasons.push(format!("X has {n_columns} <= {GATE_MAX_COLUMNS} columns"));
    }
    Gate { n_eff, stable_rank, n_columns, reroute: !reasons.is_empty(), reasons }
}

/// NumPy's `np.sum` of a contiguous float64 array (pairwise, eight accumulators per 128-block), so
/// that means and Kish's n agree bit for bit with the Python layer's.
pub fn numpy_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &v in a {
            res += v;
        }
        res
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        numpy_sum(&a[..n2]) + numpy_sum(&a[n2..])
    }
}

/// `np.mean` of a contiguous float64 array.
pub fn numpy_mean(a: &[f64]) -> f64 {
    numpy_sum(a) / a.len() as f64
}

/// Kish's effective sample size `(Σw)² / Σw²` (`n` without weights).
pub fn kish_n_eff(w: Option<&[f64]>, n: usize) -> f64 {
    match w {
        None => n as f64,
        Some(w) => {
            let s = numpy_sum(w);
            let sq: Vec<f64> = w.iter().map(|v| v * v).collect();
            s * s / numpy_sum(&sq)
        }
    }
}

/// The exponent e of `frexp(m)` (m = f·2^e, 0.5 ≤ |f| < 1); 0 for 0, NaN and ±inf (as NumPy).
fn frexp_exp(m: f64) -> i64 {
    if m == 0.0 || !m.is_finite() {
        return 0;
    }
    let (v, adj) = if m.abs() < f64::MIN_POSITIVE { (m * 2f64.powi(54), -54) } else { (m, 0) };
    ((v.to_bits() >> 52) & 0x7ff) as i64 - 1022 + adj
}

/// `v · 2^-e` exactly as `np.ldexp` (two steps when 2^-e itself is not a normal float).
fn ldexp_neg(v: f64, e: i64) -> f64 {
    let t = -e;
    if (-1000..=1000).contains(&t) {
        v * 2f64.powi(t as i32)
    } else {
        let h = t / 2;
        v * 2f64.powi(h as i32) * 2f64.powi((t - h) as i32)
    }
}

/// `a` (rows × cols, row-major) rescaled exactly by powers of two (per column, or globally) so that
/// its largest |value| is about 1: the data as the inference core sees them, so that 1e±150-scaled
/// input neither overflows nor underflows in sums of squares. A column far from the origin relative
/// to its spread (|midrange| > 1024 × half its range: y + 1e8, X + 1e12) is first shifted by its
/// midrange, exactly (Sterbenz: every value is within a factor 2 of it), so that sums of squares and
/// the constant-column tests see the spread and not the offset; every consumer centres the data (the
/// learners, the OLS refits with their intercept, the gate), so the shift changes nothing else.
/// Borrowed unchanged (no copy) when no column is shifted and every exponent is below 64 in
/// magnitude; a copy is allocated fallibly (it is as large as X).
pub fn power_of_two_scaled(a: &[f64], rows: usize, cols: usize, per_column: bool) -> Result<Cow<'_, [f64]>> {
    let shifts = location_shifts(a, rows, cols);
    if shifts.is_none() {
        let Some(e) = power_of_two_exponents(a, rows, cols, per_column) else {
            return Ok(Cow::Borrowed(a));
        };
        let mut out = crate::alloc::try_with_capacity("the rescaled copy of the data", a.len())?;
        out.extend(a.chunks_exact(cols).flat_map(|row| row.iter().zip(&e).map(|(&v, &ej)| ldexp_neg(v, ej))));
        return Ok(Cow::Owned(out));
    }
    let mut out = crate::alloc::try_copied("the shifted copy of the data", a)?;
    if let Some(m) = shifts {
        for row in out.chunks_exact_mut(cols) {
            row.iter_mut().zip(&m).for_each(|(v, &mj)| *v -= mj);
        }
    }
    if let Some(e) = power_of_two_exponents(&out, rows, cols, per_column) {
        for row in out.chunks_exact_mut(cols) {
            row.iter_mut().zip(&e).for_each(|(v, &ej)| *v = ldexp_neg(*v, ej));
        }
    }
    Ok(Cow::Owned(out))
}

/// The midrange of each column far from the origin relative to its spread, 0 for the others, or
/// `None` when no column is (ordinary data: nothing to shift). A constant column is left alone: it is
/// constant either way, and the data need no copy for it. Non-finite columns are left alone
/// (the finiteness checks that follow name them).
pub fn location_shifts(a: &[f64], rows: usize, cols: usize) -> Option<Vec<f64>> {
    if rows == 0 || cols == 0 {
        return None;
    }
    let mut lo = a[..cols].to_vec();
    let mut hi = lo.clone();
    for row in a.chunks_exact(cols).skip(1) {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(row) {
            *l = l.min(v);
            *h = h.max(v);
        }
    }
    let m: Vec<f64> = lo
        .iter()
        .zip(&hi)
        .map(|(&l, &h)| {
            let (mid, half) = (0.5 * l + 0.5 * h, 0.5 * h - 0.5 * l);
            // same sign and |mid| > 1024 half: every value lies in [mid/2, 2 mid], so v − mid is exact
            if l.is_finite() && h.is_finite() && (l > 0.0 || h < 0.0) && half > 0.0 && mid.abs() > 1024.0 * half {
                mid
            } else {
                0.0
            }
        })
        .collect();
    m.iter().any(|&v| v != 0.0).then_some(m)
}

/// The exponents [`power_of_two_scaled`] divides by (one per column), or `None` when the data are
/// left as they are.
fn power_of_two_exponents(a: &[f64], rows: usize, cols: usize, per_column: bool) -> Option<Vec<i64>> {
    if rows == 0 || cols == 0 {
        return None;
    }
    let absmax = |it: &mut dyn Iterator<Item = f64>| {
        it.fold(0.0f64, |m, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v.abs()) })
    };
    let e: Vec<i64> = if per_column {
        (0..cols).map(|j| frexp_exp(absmax(&mut (0..rows).map(|i| a[i * cols + j])))).collect()
    } else {
        vec![frexp_exp(absmax(&mut a.iter().copied())); cols]
    };
    if e.iter().all(|v| v.abs() < 64) {
        None
    } else {
        Some(e)
    }
}

/// What learned the directions. The learner rule ([`nb_reason`]) reads `nb_calibrated`; a new
/// learner (e.g. sparse PLS) is one more variant here and one more arm in `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnerKind {
    Pls,
    Spca,
    Ridge,
    /// Sparse PLS1 with a keep-count (`inference::spls`).
    Spls,
    Basis,
    Callable,
    Transformer,
    /// The two-block symmetric PLS-SVD test (`inference::plssvd`; neither block is the outcome).
    PlsSvd,
}

impl LearnerKind {
    /// The learner's name in messages and on results.
    pub fn name(self) -> &'static str {
        match self {
            LearnerKind::Pls => "pls",
            LearnerKind::Spca => "spca",
            LearnerKind::Ridge => "ridge",
            LearnerKind::Spls => "spls",
            LearnerKind::Basis => "basis",
            LearnerKind::Callable => "callable",
            LearnerKind::Transformer => "transformer",
            LearnerKind::PlsSvd => "pls-svd",
        }
    }

    /// The kind named `name` (None for an unknown name).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Pls, Self::Spca, Self::Ridge, Self::Spls, Self::Basis, Self::Callable, Self::Transformer, Self::PlsSvd]
            .into_iter()
            .find(|k| k.name() == name)
    }

    /// Whether the NB correction is calibrated for this learner (at k = 1, single response).
    pub fn nb_calibrated(self) -> bool {
        matches!(self, LearnerKind::Pls)
    }
}

/// Why the NB-asymptotic correction does not hold for this learner, size and spectrum (None: it
/// holds). `stable_rank`: the gate's, when it was computed.
pub fn nb_reason(multi: bool, kind: LearnerKind, k: usize, n_eff: f64, stable_rank: Option<f64>) -> Option<String> {
    let why = "the Nadeau-Bengio correction assumes split statistics correlated about 1/2 under the null";
    if multi {
        return Some(format!("PLS2 (multi-column y): {why}, which PLS2's are not"));
    }
    if kind == LearnerKind::PlsSvd {
        // benches/calibration_inference_extra.py --nb: null size about 1% at alpha = 5% (two-sided check)
        return Some(
            "PLS-SVD: the Nadeau-Bengio correction is not derived for two blocks and is conservative there \
             (null size about 1% at alpha = 5%)"
                .to_string(),
        );
    }
    if !kind.nb_calibrated() {
        return Some(format!(
            "learner='{}': {why}, which this learner's are not (its directions vary more between splits)",
            kind.name()
        ));
    }
    if k != 1 {
        return Some(format!("n_components={k}: {why}, which PLS's are only with one component"));
    }
    if n_eff < NB_MIN_N_EFF {
        return Some(format!(
            "n_eff = {n_eff:.1} < {NB_MIN_N_EFF}: {why}, which PLS's are only from about {NB_MIN_N_EFF} rows"
        ));
    }
    match stable_rank {
        Some(s) if (GATE_MIN_STABLE_RANK..NB_MIN_STABLE_RANK).contains(&s) => Some(format!(
            "stable rank = {s:.2} < {NB_MIN_STABLE_RANK}: {why}, which PLS's are not when one factor dominates X \
             (the NB test would lose power)"
        )),
        _ => None,
    }
}

/// The tests `subspace_test` can run (`method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Auto,
    Nb,
    NbPermutation,
    CvPermutationQ2,
    PermutationScore,
    Jackknife,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::Auto,
        Method::Nb,
        Method::NbPermutation,
        Method::CvPermutationQ2,
        Method::PermutationScore,
        Method::Jackknife,
    ];

    /// The method's name (Python's and R's `method` strings).
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Nb => "nb",
            Method::NbPermutation => "nb-permutation",
            Method::CvPermutationQ2 => "cv-permutation-q2",
            Method::PermutationScore => "permutation-score",
            Method::Jackknife => "jackknife",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// NB-asymptotic or NB-permutation (the split tests).
    pub fn is_split_test(self) -> bool {
        matches!(self, Method::Nb | Method::NbPermutation)
    }
}

/// Step 1's answer: the test to run and the gate decision with the learner rule folded in.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub run: Method,
    pub gate: Gate,
    /// `force` overrode a rule that fired.
    pub forced: bool,
    /// The requested NB-asymptotic test was replaced by the NB-permutation test.
    pub rerouted: bool,
    /// The front end's warning (Python's `GateWarning`), when a design rule rerouted or `"nb"` was
    /// asked for and rerouted.
    pub warning: Option<String>,
}

/// Resolve `"auto"` / `"nb"` through the gate and the learner rule. The design rules warn when they
/// reroute; the learner rule reroutes `"auto"` silently (the reason is in `gate.reasons`) and warns
/// when `"nb"` was asked for. `sequence`: the per-component tests (the warning says the whole
/// sequence is rerouted).
pub fn resolve(method: Method, force: bool, gate: Gate, learner_reason: Option<String>, sequence: bool) -> Route {
    if !matches!(method, Method::Auto | Method::Nb) {
        return Route { run: method, gate, forced: false, rerouted: false, warning: None };
    }
    let design = gate.reroute;
    let mut reasons = gate.reasons;
    reasons.extend(learner_reason);
    let fires = !reasons.is_empty();
    if fires && !force {
        let warning = (design || method == Method::Nb).then(|| {
            let tail = if sequence {
                "the whole sequence uses the NB-permutation test instead"
            } else {
                "running the NB-permutation test instead"
            };
            format!(
                "NB-asymptotic approximation not trusted for this design ({}): {tail} (force=True overrides)",
                reasons.join("; ")
            )
        });
        let gate = Gate { reroute: true, reasons, ..gate };
        return Route { run: Method::NbPermutation, gate, forced: false, rerouted: true, warning };
    }
    let gate = Gate { reroute: fires, reasons, ..gate };
    Route { run: Method::Nb, gate, forced: fires, rerouted: false, warning: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_sum_matches_the_reference_order() {
        let a = [0.1, 0.2, 0.3];
        assert_eq!(numpy_sum(&a), (0.0 + 0.1 + 0.2) + 0.3);
        let b: Vec<f64> = (0..50).map(|i| 1.0 / (i as f64 + 1.0)).collect();
        let mut r = [0.0; 8];
        r.copy_from_slice(&b[..8]);
        let mut i = 8;
        while i < 48 {
            for j in 0..8 {
                r[j] += b[i + j];
            }
            i += 8;
        }
        let want = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])) + b[48] + b[49];
        assert_eq!(numpy_sum(&b), want);
        // above 128: pairwise halves (close to the plain sum, not equal to it in general)
        let c: Vec<f64> = (0..1000).map(|i| (i as f64).sin()).collect();
        assert!((numpy_sum(&c) - c.iter().sum::<f64>()).abs() < 1e-12);
        assert_eq!(numpy_sum(&c), numpy_sum(&c[..496]) + numpy_sum(&c[496..]));
    }

    #[test]
    fn scaling_is_exact_and_skips_well_scaled_data() {
        let a = [1.5, -3.0, 0.25, 2.0];
        assert!(matches!(power_of_two_scaled(&a, 2, 2, true).unwrap(), Cow::Borrowed(_)));
        let big = [3.0 * 2f64.powi(300), 1.0, -2f64.powi(299), 0.5];
        let s = power_of_two_scaled(&big, 2, 2, true).unwrap().into_owned();
        // every column gets its own exponent once one of them is out of range: 2^302 and 2^1 here
        assert_eq!(s, vec![0.75, 0.5, -0.125, 0.25]);
        let tiny = [f64::MIN_POSITIVE / 8.0, 1e-300];
        let t = power_of_two_scaled(&tiny, 2, 1, false).unwrap();
        assert!(t.iter().all(|v| v.is_finite()) && t[1] > 0.5 && t[1] < 1.0);
    }

    #[test]
    fn far_offset_columns_are_shifted_exactly_and_others_left_alone() {
        // column 0 at 1e12 + a spread of ~1, column 1 ordinary and column 2 constant (both left alone)
        let (rows, cols) = (4, 3);
        let spread = [0.25, -1.5, 3.0, 0.5];
        let mut a = vec![0.0; rows * cols];
        for i in 0..rows {
            a[i * cols] = 1e12 + spread[i];
            a[i * cols + 1] = spread[i] * 2.0;
            a[i * cols + 2] = 7.0;
        }
        let s = power_of_two_scaled(&a, rows, cols, true).unwrap().into_owned();
        let mid = 0.5 * (1e12 - 1.5) + 0.5 * (1e12 + 3.0);
        for i in 0..rows {
            assert_eq!(s[i * cols], a[i * cols] - mid); // the shift, exactly, and no rescaling
            assert_eq!(s[i * cols] - s[cols], a[i * cols] - a[cols]); // the spread is kept as stored
            assert_eq!(s[i * cols + 1], a[i * cols + 1]);
            assert_eq!(s[i * cols + 2], 7.0);
        }
        // far in both senses: shifted, then rescaled by the spread's power of two
        let b: Vec<f64> = (0..4).map(|i| 2f64.powi(900) * (1.0 + i as f64 * 2f64.powi(-30))).collect();
        let t = power_of_two_scaled(&b, 4, 1, true).unwrap();
        assert!(t.iter().all(|v| v.is_finite() && v.abs() <= 1.0) && t.iter().any(|&v| v.abs() >= 0.5));
        let ratio = (t[3] - t[0]) / (b[3] - b[0]); // one exact power of two
        assert_eq!(ratio, 2f64.powi(frexp_exp(ratio) as i32 - 1));
    }

    #[test]
    fn the_learner_rule_and_the_design_rules_route_as_documented() {
        let ok = gate_rules(150.0, 12.0, 15);
        assert!(!ok.reroute);
        let r =
            resolve(Method::Auto, false, ok.clone(), nb_reason(false, LearnerKind::Pls, 1, 150.0, Some(12.0)), false);
        assert_eq!((r.run, r.rerouted, r.forced, r.warning.is_none()), (Method::Nb, false, false, true));
        // the learner rule reroutes "auto" silently and "nb" with a warning
        let why = nb_reason(false, LearnerKind::Ridge, 1, 150.0, Some(12.0));
        let r = resolve(Method::Auto, false, ok.clone(), why.clone(), false);
        assert_eq!((r.run, r.rerouted, r.warning.is_none()), (Method::NbPermutation, true, true));
        assert!(resolve(Method::Nb, false, ok.clone(), why.clone(), false).warning.is_some());
        let f = resolve(Method::Nb, true, ok.clone(), why, false);
        assert_eq!((f.run, f.forced, f.gate.reroute), (Method::Nb, true, true));
        // each threshold, on both sides
        assert!(nb_reason(false, LearnerKind::Pls, 1, 59.9, None).is_some());
        assert!(nb_reason(false, LearnerKind::Pls, 1, 60.0, None).is_none());
        assert!(nb_reason(false, LearnerKind::Pls, 1, 100.0, Some(7.99)).is_some());
        assert!(nb_reason(false, LearnerKind::Pls, 1, 100.0, Some(8.0)).is_none());
        assert!(nb_reason(false, LearnerKind::Pls, 2, 100.0, None).is_some());
        assert!(nb_reason(true, LearnerKind::Pls, 1, 100.0, None).is_some());
        let g = gate_rules(24.9, 2.9, 4);
        assert_eq!(g.reasons.len(), 3);
        let r = resolve(Method::Auto, false, g, None, true);
        assert!(r.warning.unwrap().contains("the whole sequence uses the NB-permutation test"));
        // the baselines are not rerouted
        let r = resolve(Method::Jackknife, false, gate_rules(10.0, 1.0, 2), None, false);
        assert_eq!((r.run, r.rerouted), (Method::Jackknife, false));
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
    }
}
