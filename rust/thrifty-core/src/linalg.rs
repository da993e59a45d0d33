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
