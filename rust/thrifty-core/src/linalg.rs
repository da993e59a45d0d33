//! Thin helpers over faer shared by the capabilities. Dense matrices cross module boundaries as
//! row-major slices plus a shape (the NumPy C layout) or as `faer::Mat<f64>`.
use faer::{Mat, MatRef};

/// View a row-major `rows × cols` slice as a faer matrix (no copy).
pub fn view(values: &[f64], rows: usize, cols: usize) -> MatRef<'_, f64> {
    MatRef::from_row_major_slice(values, rows, cols)
}

/// Copy a faer matrix into a row-major vector (the NumPy C layout).
pub fn to_row_major(m: MatRef<'_, f64>) -> Vec<f64> {
    let mut out = Vec::with_capacity(m.nrows() * m.ncols());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            out.push(m[(i, j)]);
        }
    }
    out
}

/// Owned copy of a row-major slice as a faer matrix.
pub fn to_mat(values: &[f64], rows: usize, cols: usize) -> Mat<f64> {
    view(values, rows, cols).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_row_major() {
        let v: Vec<f64> = (0..6).map(f64::from).collect();
        let m = to_mat(&v, 2, 3);
        assert_eq!(m[(1, 0)], 3.0);
        assert_eq!(to_row_major(m.as_ref()), v);
    }
}

// ---- dpp helpers ----

/// Eigendecomposition of a symmetric row-major `n × n` matrix (only the lower triangle is read):
/// eigenvalues in nondecreasing order and the eigenvectors as the columns of a row-major `n × n` matrix.
pub fn sym_eigen(a: &[f64], n: usize) -> crate::Result<(Vec<f64>, Vec<f64>)> {
    let m = view(a, n, n);
    let evd = m
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|e| crate::ThriftyError::numerical("eigendecomposition", format!("{e:?}")))?;
    let vals: Vec<f64> = (0..n).map(|i| evd.S().column_vector()[i]).collect();
    Ok((vals, to_row_major(evd.U())))
}

/// Lower Cholesky factor `L` (row-major) of a symmetric positive-definite matrix, or `None` when a
/// pivot is not positive.
pub fn cholesky_lower(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let llt = view(a, n, n).llt(faer::Side::Lower).ok()?;
    Some(to_row_major(llt.L()))
}

/// Inverse of a symmetric positive-definite matrix (row-major), or `None` when it is not SPD.
pub fn spd_inverse(a: &[f64], n: usize) -> Option<Vec<f64>> {
    use faer::linalg::solvers::DenseSolveCore;
    let llt = view(a, n, n).llt(faer::Side::Lower).ok()?;
    Some(to_row_major(llt.inverse().as_ref()))
}
