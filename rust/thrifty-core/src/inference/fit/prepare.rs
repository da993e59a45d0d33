//! One split, prepared: train moments, standardised (and √w-scaled) train rows, standardised test
//! rows, and the standardised train response.
use super::Data;
use crate::alloc::try_zeroed;
use crate::error::Result;

/// One split, prepared: standardised train rows (scaled by √w, row-major n_tr×p), standardised test
/// rows (row-major n_te×p), √w of the train rows and weights of the test rows (each part renormalised
/// to mean 1).
pub struct Prepared {
    pub n_tr: usize,
    pub n_te: usize,
    pub p: usize,
    pub xs_tr: Vec<f64>,
    pub xs_te: Vec<f64>,
    pub sw_tr: Vec<f64>,
    pub w_te: Vec<f64>,
    pub train: Vec<usize>,
    pub test: Vec<usize>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
}

/// Is a column constant on the train part (relative to its magnitude)?
#[inline]
pub(crate) fn is_constant(mean: f64, sd: f64) -> bool {
    !(sd > 1e-12 * mean.abs()) || sd == 0.0
}

pub fn prepare(data: &Data<'_>, train: &[usize], test: &[usize], standardize: bool) -> Result<Prepared> {
    prepare_with(data, train, test, standardize, true)
}

/// As [`prepare`]; with `with_test = false` the standardised test rows are not materialised (use
/// [`predict_test_raw`] for predictions). The standardised rows, as large as X together, are
/// allocated fallibly (`Err(OutOfMemory)`).
pub fn prepare_with(
    data: &Data<'_>,
    train: &[usize],
    test: &[usize],
    standardize: bool,
    with_test: bool,
) -> Result<Prepared> {
    let (n_tr, n_te, p) = (train.len(), test.len(), data.p);
    let norm = |idx: &[usize]| -> Vec<f64> {
        match data.w {
            None => vec![1.0; idx.len()],
            Some(w) => {
                let s: f64 = idx.iter().map(|&i| w[i]).sum();
                let m = if s > 0.0 { s / idx.len() as f64 } else { 1.0 };
                idx.iter().map(|&i| w[i] / m).collect()
            }
        }
    };
    let w_tr = norm(train);
    let w_te = norm(test);
    let sw_tr: Vec<f64> = w_tr.iter().map(|v| v.sqrt()).collect();
    let sw_total: f64 = w_tr.iter().sum();
    let inv = if sw_total > 0.0 { 1.0 / sw_total } else { 0.0 };
    // weighted train moments in one pass over shifted data (shift = the first train row, so the sums
    // stay on the scale of the spread)
    let shift: Vec<f64> = match train.first() {
        Some(&i) => data.x[i * p..(i + 1) * p].to_vec(),
        None => vec![0.0; p],
    };
    let mut s1 = vec![0.0; p];
    let mut s2 = vec![0.0; p];
    for (a, &i) in train.iter().enumerate() {
        let row = &data.x[i * p..(i + 1) * p];
        let wi = w_tr[a];
        for (((a1, a2), &v), &k) in s1.iter_mut().zip(s2.iter_mut()).zip(row).zip(&shift) {
            let d = v - k;
            *a1 += wi * d;
            *a2 += wi * d * d;
        }
    }
    let mut mean = vec![0.0; p];
    let mut scale = vec![1.0; p];
    for j in 0..p {
        let dm = s1[j] * inv;
        mean[j] = shift[j] + dm;
        if standardize {
            let sd = (s2[j] * inv - dm * dm).max(0.0).sqrt();
            // constant columns on the train part: standardised values are 0 (the column drops out)
            scale[j] = if is_constant(mean[j], sd) { f64::INFINITY } else { sd };
        }
    }
    let inv_scale: Vec<f64> = scale.iter().map(|s| 1.0 / s).collect();
    let mut xs_tr = try_zeroed("the standardised train rows of a split", n_tr.saturating_mul(p))?;
    for (a, &i) in train.iter().enumerate() {
        let row = &data.x[i * p..(i + 1) * p];
        let out = &mut xs_tr[a * p..(a + 1) * p];
        let s = sw_tr[a];
        for (((o, &v), &m), &is) in out.iter_mut().zip(row).zip(&mean).zip(&inv_scale) {
            *o = s * ((v - m) * is);
        }
    }
    let mut xs_te = vec![];
    if with_test {
        xs_te = try_zeroed("the standardised test rows of a split", n_te.saturating_mul(p))?;
        for (a, &i) in test.iter().enumerate() {
            let row = &data.x[i * p..(i + 1) * p];
            let out = &mut xs_te[a * p..(a + 1) * p];
            for (((o, &v), &m), &is) in out.iter_mut().zip(row).zip(&mean).zip(&inv_scale) {
                *o = (v - m) * is;
            }
        }
    }
    Ok(Prepared { n_tr, n_te, p, xs_tr, xs_te, sw_tr, w_te, train: train.to_vec(), test: test.to_vec(), mean, scale })
}

/// ỹ on the train part: weighted-standardised by train moments and scaled by √w. `y` is the full
/// (possibly permuted) response. Returns `None` when y is constant on the train part.
pub fn train_response(prep: &Prepared, y: &[f64]) -> Option<Vec<f64>> {
    let w2: Vec<f64> = prep.sw_tr.iter().map(|s| s * s).collect();
    let sw: f64 = w2.iter().sum();
    let m: f64 = prep.train.iter().zip(&w2).map(|(&i, w)| w * y[i]).sum::<f64>() / sw;
    let ss: f64 = prep.train.iter().zip(&w2).map(|(&i, w)| w * (y[i] - m).powi(2)).sum::<f64>() / sw;
    let sd = ss.sqrt();
    if is_constant(m, sd) {
        return None;
    }
    Some(prep.train.iter().zip(&prep.sw_tr).map(|(&i, s)| s * (y[i] - m) / sd).collect())
}
