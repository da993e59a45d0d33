"""CSR input (issue 10, C13): the core reads CSR in place with sparse kernels (‖x‖² − 2x·c + ‖c‖²
with sparse dots, centre sums from the non-zeros), for Lloyd, bounded Lloyd ("elkan") and Hartigan,
float32 and float64, with sample weights. Results equal the dense results on the same data (same
labels, inertia to rounding) and scikit-learn's KMeans on CSR from the same start (Lloyd)."""

from __future__ import annotations

import resource

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from thrifty.cluster import HartiganKMeans


def _sparse_blobs(seed: int, dtype: type, n: int = 1500, d: int = 40, k: int = 8) -> sp.csr_matrix:
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.0, random_state=seed)
    X[np.random.default_rng(seed).random(X.shape) < 0.7] = 0.0  # ~30 % non-zeros
    return sp.csr_matrix(X.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ["lloyd", "elkan", "hartigan"])
@pytest.mark.parametrize("weighted", [False, True])
def test_csr_fit_equals_dense_fit(dtype: type, algorithm: str, weighted: bool) -> None:
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    for seed in (0, 1):
        Xs = _sparse_blobs(seed, dtype)
        Xd = Xs.toarray()
        before = (Xs.data.copy(), Xs.indices.copy(), Xs.indptr.copy())
        w = np.random.default_rng(seed).uniform(0.5, 2.0, Xs.shape[0]) if weighted else None
        # n_init=1: with several runs, two runs that reach the same partition tie on inertia up to
        # the last bit, and which of them wins is rounding, not a difference between the paths.
        for init in ("k-means++", "random"):
            a = HartiganKMeans(8, init=init, n_init=1, random_state=seed, tol=0, algorithm=algorithm).fit(Xs, sample_weight=w)
            b = HartiganKMeans(8, init=init, n_init=1, random_state=seed, tol=0, algorithm=algorithm).fit(Xd, sample_weight=w)
            np.testing.assert_array_equal(a.labels_, b.labels_)
            assert a.inertia_ == pytest.approx(b.inertia_, rel=rtol)
            assert a.cluster_centers_.dtype == dtype
            np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(a.predict(Xs), a.predict(Xd))
            np.testing.assert_allclose(a.transform(Xs), a.transform(Xd), rtol=1e-4, atol=1e-4)
            assert a.score(Xs, sample_weight=w) == pytest.approx(a.score(Xd, sample_weight=w), rel=rtol)
        for got, want in zip((Xs.data, Xs.indices, Xs.indptr), before):
            np.testing.assert_array_equal(got, want)  # never modified


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
def test_csr_lloyd_equals_sklearn_on_csr_from_the_same_start(dtype: type, algorithm: str) -> None:
    rtol = 2e-5 if dtype == np.float32 else 1e-9
    for seed in (0, 1, 2):
        Xs = _sparse_blobs(seed, dtype)
        w = np.random.default_rng(seed).uniform(0.5, 2.0, Xs.shape[0])
        init = Xs[np.random.default_rng(seed).choice(Xs.shape[0], 8, replace=False)].toarray()
        ours = HartiganKMeans(8, init=init, tol=0, algorithm=algorithm).fit(Xs, sample_weight=w)
        with threadpool_limits(1):
            ref = KMeans(8, init=init, n_init=1, tol=0, algorithm=algorithm).fit(Xs, sample_weight=w)
        np.testing.assert_array_equal(ours.labels_, ref.labels_)
        assert ours.inertia_ == pytest.approx(ref.inertia_, rel=rtol)
        assert ours.n_iter_ == ref.n_iter_


def test_csr_hartigan_ends_below_sklearn_lloyd_and_stays_monotone() -> None:
    for seed in range(3):
        Xs = _sparse_blobs(seed, np.float64, k=12)
        init = Xs[np.random.default_rng(seed).choice(Xs.shape[0], 12, replace=False)].toarray()
        ours = HartiganKMeans(12, init=init, tol=0).fit(Xs)
        with threadpool_limits(1):
            ref = KMeans(12, init=init, n_init=1, tol=0).fit(Xs)
        assert ours.inertia_ <= ref.inertia_ * (1 + 1e-9)
        sse = ours.iteration_stats_["sse_after_sequential"]
        assert np.all(np.diff(sse) <= 1e-9 * sse[:-1])


def test_non_canonical_csr_and_other_sparse_formats() -> None:
    Xs = _sparse_blobs(3, np.float64)
    coo = Xs.tocoo()
    # Every entry split in two halves: a CSR with duplicate entries (summed, not doubled in ‖x‖²).
    dup = sp.csr_matrix((np.r_[coo.data / 2, coo.data / 2], (np.r_[coo.row, coo.row], np.r_[coo.col, coo.col])),
                        shape=Xs.shape)
    dup.has_canonical_format = False
    ref = HartiganKMeans(8, random_state=0).fit(Xs)
    for other in (dup, Xs.tocsc(), sp.csr_array(Xs)):
        got = HartiganKMeans(8, random_state=0).fit(other)
        np.testing.assert_array_equal(got.labels_, ref.labels_)
        assert got.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)


@pytest.mark.parametrize("make", [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_matrix, "csr-int64", "csr-dup"])
def test_the_callers_sparse_matrix_comes_back_exactly_as_passed(make: object) -> None:
    # Byte for byte, its cached flags included: scipy caches the answer of has_canonical_format on
    # the object it asks, so asking the caller's CSR changed its pickle (found by a probe).
    import pickle

    Xs = _sparse_blobs(5, np.float64, n=300, d=6, k=3)
    if make == "csr-int64":
        M = sp.csr_matrix(Xs)
        M.indices, M.indptr = M.indices.astype(np.int64), M.indptr.astype(np.int64)
    elif make == "csr-dup":
        coo = Xs.tocoo()
        M = sp.csr_matrix((np.r_[coo.data / 2, coo.data / 2], (np.r_[coo.row, coo.row], np.r_[coo.col, coo.col])),
                          shape=Xs.shape)
    else:
        M = make(Xs)  # type: ignore[operator]
    before = pickle.dumps(M)
    km = HartiganKMeans(3, random_state=0).fit(M)
    km.predict(M), km.transform(M), km.score(M), HartiganKMeans(3, random_state=0).fit_predict(M)
    assert pickle.dumps(M) == before
    assert km.inertia_ == pytest.approx(HartiganKMeans(3, random_state=0).fit(Xs.toarray()).inertia_, rel=1e-10)


def test_bad_sparse_input_is_a_value_error() -> None:
    Xs = _sparse_blobs(0, np.float64)
    bad = Xs.copy()
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        HartiganKMeans(3).fit(bad)
    km = HartiganKMeans(3, random_state=0).fit(Xs)
    with pytest.raises(ValueError, match="NaN"):
        km.predict(bad)
    with pytest.raises(ValueError, match="features"):
        km.predict(Xs[:, :10])


def test_wide_csr_is_never_densified() -> None:
    """4000 × 50 000 with 20 non-zeros a row: a dense copy would take 1.6 GB; the fit stays far
    below that (only the k × d centres and their buffers are dense)."""
    n, d = 4000, 50_000
    rng = np.random.default_rng(0)
    cols = rng.integers(0, d, size=(n, 20))
    cols[: n // 2, :5] = np.arange(5)  # two groups sharing some columns
    cols[n // 2 :, :5] = np.arange(5, 10)
    Xs = sp.csr_matrix((rng.random(n * 20) + 1.0, cols.ravel(), np.arange(0, n * 20 + 1, 20)), shape=(n, d))
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    km = HartiganKMeans(2, random_state=0, n_init=1).fit(Xs)
    labels = km.predict(Xs)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak0) / 1024
    assert grown_mib < 300, grown_mib
    assert len(set(labels[: n // 2])) == 1 and len(set(labels[n // 2 :])) == 1 and labels[0] != labels[-1]
