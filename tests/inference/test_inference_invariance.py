"""Acceptance 3: rotation invariance (random orthogonal and invertible R) and varimax against a
reference implementation of the criterion and the SVD iteration."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_invariance_ref import criterion, reference_varimax

from thrifty.inference import subspace_test, varimax

SET = settings(max_examples=25, deadline=None)


def _data(seed, n=60, p=12):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, :2].sum(axis=1) * 0.5 + rng.normal(size=n)
    return X, y


@SET
@given(seed=st.integers(0, 10_000), k=st.integers(1, 4), orthogonal=st.booleans())
def test_fixed_basis_rotation_invariance(seed, k, orthogonal):
    X, y = _data(seed)
    rng = np.random.default_rng(seed + 1)
    B = rng.normal(size=(X.shape[1], k))
    if orthogonal:
        R, _ = np.linalg.qr(rng.normal(size=(k, k)))
    else:
        R = rng.normal(size=(k, k)) + 2 * np.eye(k)
        if np.linalg.cond(R) > 1e6:
            R = np.eye(k) + 0.1 * R
    a = subspace_test(X, y, learner=B, n_splits=8, random_state=seed, force=True)
    b = subspace_test(X, y, learner=B @ R, n_splits=8, random_state=seed, force=True)
    np.testing.assert_allclose(a.r, b.r, atol=1e-10)
    assert abs(a.p_value - b.p_value) < 1e-10
    # the same through a callable learner that returns the rotated basis
    c = subspace_test(X, y, n_components=k, learner=lambda Xt, yt: B @ R, n_splits=8, random_state=seed, force=True)
    np.testing.assert_allclose(a.r, c.r, atol=1e-10)


@SET
@given(seed=st.integers(0, 10_000), k=st.integers(2, 4))
def test_varimax_rotation_leaves_pls_test_unchanged(seed, k):
    X, y = _data(seed)
    a = subspace_test(X, y, n_components=k, n_splits=8, random_state=seed, force=True)
    b = subspace_test(X, y, n_components=k, n_splits=8, random_state=seed, force=True, rotate="varimax")
    np.testing.assert_allclose(a.r, b.r, atol=1e-10)
    assert abs(a.p_value - b.p_value) < 1e-10
    s = subspace_test(X, y, n_components=k, learner="spca", n_splits=6, random_state=seed, force=True)
    s2 = subspace_test(X, y, n_components=k, learner="spca", n_splits=6, random_state=seed, force=True, rotate="varimax")
    np.testing.assert_allclose(s.r, s2.r, atol=1e-10)



@SET
@given(seed=st.integers(0, 10_000), extra=st.integers(2, 25), k=st.integers(2, 5), normalize=st.booleans())
def test_varimax_matches_reference(seed, extra, k, normalize):
    p = k + extra
    L = np.random.default_rng(seed).normal(size=(p, k))
    out = varimax(L, normalize=normalize)
    ref_L, ref_R, ref_c = reference_varimax(L, normalize)
    # columns are defined up to sign (a zero singular value of B leaves the sign of UV' free)
    sign = np.sign(np.sum(out.loadings * ref_L, axis=0))
    sign[sign == 0] = 1
    np.testing.assert_allclose(out.loadings * sign, ref_L, atol=1e-9)
    np.testing.assert_allclose(out.rotation * sign, ref_R, atol=1e-9)
    assert abs(out.criterion - ref_c) < 1e-10
    np.testing.assert_allclose(out.rotation @ out.rotation.T, np.eye(k), atol=1e-12)
    # a local maximum of the criterion once converged: small rotations do not improve it (the SVD
    # iteration converges linearly, so a run that used all max_iter sweeps is only checked against the
    # reference above)
    if out.n_iter >= 500:
        return
    h = np.sqrt((L**2).sum(axis=1)) if normalize else np.ones(p)
    base = out.loadings / h[:, None]
    rng = np.random.default_rng(seed + 7)
    for _ in range(5):
        A = rng.normal(size=(k, k)) * 1e-3
        Q, _ = np.linalg.qr(np.eye(k) + (A - A.T))
        assert criterion(base @ Q) <= out.criterion + 1e-7


def test_varimax_rejects_more_columns_than_rows():
    import pytest

    with pytest.raises(ValueError, match="more columns"):
        varimax(np.ones((3, 4)))


def test_varimax_recovers_simple_structure():
    simple = np.array([[1, 0], [0.9, 0], [0.8, 0], [0, 1], [0, 0.7], [0, 0.6]], float)
    c, s = np.cos(0.5), np.sin(0.5)
    out = varimax(simple @ np.array([[c, s], [-s, c]]), normalize=False, tol=1e-14)
    got = np.abs(out.loadings)
    if got[0, 1] > got[0, 0]:
        got = got[:, ::-1]
    np.testing.assert_allclose(got, simple, atol=1e-5)
