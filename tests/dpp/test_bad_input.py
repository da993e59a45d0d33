"""Acceptance 6: bad input gives clear ValueError/TypeError naming the argument; nothing panics."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty.dpp import (
    Coreset,
    LEnsemble,
    MinibatchSampler,
    ProjectionDPP,
    StratifiedDPP,
    discretize,
    greedy_map,
    orthonormalize,
    select_entropy,
    select_mutual_information,
)

rng = np.random.default_rng(0)
X2 = rng.uniform(size=(200, 2))
Q = np.linalg.qr(rng.normal(size=(30, 4)))[0]
F = rng.normal(size=(30, 4))
L = F @ F.T
NAN2 = X2.copy()
NAN2[3, 1] = np.nan


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # orthonormalize
        (lambda: orthonormalize(np.empty((0, 3))), ValueError, "features"),
        (lambda: orthonormalize(np.ones(5)), ValueError, "features"),
        (lambda: orthonormalize(NAN2), ValueError, "features contains NaN"),
        (lambda: orthonormalize(np.zeros((5, 2))), ValueError, "features"),
        (lambda: orthonormalize([["a", "b"]]), TypeError, "features"),
        (lambda: orthonormalize(X2, rtol=2.0), ValueError, "rtol"),
        # ProjectionDPP
        (lambda: ProjectionDPP(F), ValueError, "not orthonormal"),
        (lambda: ProjectionDPP(Q * 1.01), ValueError, "not orthonormal"),
        (lambda: ProjectionDPP(np.eye(3, 5)), ValueError, "U"),
        (lambda: ProjectionDPP(np.full((4, 2), np.inf)), ValueError, "U contains NaN"),
        (lambda: ProjectionDPP(Q, method="fast"), ValueError, "method"),
        (lambda: ProjectionDPP(Q).sample_many(0), ValueError, "n_samples"),
        (lambda: ProjectionDPP(Q).sample_many(2.5), TypeError, "n_samples"),
        (lambda: ProjectionDPP(Q).sample(random_state=-1), ValueError, "random_state"),
        (lambda: ProjectionDPP(Q).sample(random_state="x"), TypeError, "random_state"),
        (lambda: ProjectionDPP(Q).exact_variance(np.ones(5)), ValueError, "g"),
        (lambda: ProjectionDPP(Q).exact_variance(np.full(30, np.nan)), ValueError, "g contains NaN"),
        (lambda: ProjectionDPP(Q).exact_variance(np.ones(30), weights="x"), ValueError, "weights"),
        (lambda: ProjectionDPP(Q).sample_many(2, n_jobs=0), ValueError, "n_jobs"),
        # LEnsemble
        (lambda: LEnsemble(), ValueError, "exactly one"),
        (lambda: LEnsemble(L, features=F), ValueError, "exactly one"),
        (lambda: LEnsemble(L + np.triu(np.ones((30, 30)), 1)), ValueError, "symmetric"),
        (lambda: LEnsemble(np.diag([1.0, -0.5, 2.0])), ValueError, "positive semi-definite"),
        (lambda: LEnsemble(np.ones((3, 4))), ValueError, "square"),
        (lambda: LEnsemble(np.full((3, 3), np.nan)), ValueError, "L contains NaN"),
        (lambda: LEnsemble(np.empty((0, 0))), ValueError, "L"),
        (lambda: LEnsemble(features=np.empty((0, 2))), ValueError, "features"),
        (lambda: LEnsemble(features=F).sample_k(5), ValueError, "exceeds the rank"),
        (lambda: LEnsemble(L).sample_k(0), ValueError, "k"),
        (lambda: LEnsemble(features=F).exact_variance(np.ones(3)), ValueError, "g"),
        # StratifiedDPP
        (lambda: StratifiedDPP([0, 1], [0.5]), ValueError, "probabilities"),
        (lambda: StratifiedDPP([0.5, 1.0], [1.0, 1.0]), TypeError, "cells"),
        (lambda: StratifiedDPP([-1, 0], [1.0, 1.0]), ValueError, "cells"),
        (lambda: StratifiedDPP([0, 1], [0.0, 1.0]), ValueError, "positive total"),
        (lambda: StratifiedDPP([], []), ValueError, "cells"),
        # kernels, coresets, minibatches
        (lambda: discretize(X2, 16, kernel="sinc"), ValueError, "kernel"),
        (lambda: discretize(X2, 0), ValueError, "m"),
        (lambda: discretize(X2, 24, kernel="daubechies"), ValueError, "power of two"),
        (lambda: discretize(X2, 16, kernel="daubechies", order=9), ValueError, "order"),
        (lambda: discretize(X2, 16, kernel="ope", jacobi_params=(-1.5, 0)), ValueError, "jacobi_params"),
        (lambda: discretize(X2, 500, kernel="ope"), ValueError, "exceeds the number of points"),
        (lambda: discretize(X2, 500, kernel="haar"), ValueError, "exceeds the number of points"),
        (lambda: discretize(X2, 16, domain=[[0, 0.5], [0, 1]]), ValueError, "outside the kernel's domain"),
        (lambda: discretize(X2, 16, domain=[[0, 1]]), ValueError, "domain"),
        (lambda: discretize(X2, 16, density="magic"), ValueError, "density"),
        (lambda: discretize(X2, 16, density=-np.ones(200)), ValueError, "density"),
        (lambda: discretize(X2, 16, density=np.ones(3)), ValueError, "density"),
        (lambda: discretize(X2, 16, split="median"), ValueError, "split"),
        (lambda: discretize(NAN2, 16), ValueError, "X contains NaN"),
        (lambda: discretize(np.empty((0, 2)), 16), ValueError, "X"),
        (lambda: Coreset(X2, 16, weights="magic"), ValueError, "weights"),
        (lambda: Coreset(X2, 16, bandwidth=3), TypeError, "bandwidth"),
        (lambda: Coreset(np.ones((5, 2, 2)), 2), ValueError, "X"),
        (lambda: Coreset(X2, 16).estimate(np.ones(3)), ValueError, "f"),
        (lambda: MinibatchSampler(X2, 0), ValueError, "batch_size"),
        (lambda: MinibatchSampler(X2, 500), ValueError, "batch_size"),
        (lambda: MinibatchSampler(X2, 10, n_batches=0), ValueError, "n_batches"),
        # greedy
        (lambda: select_entropy(np.ones((3, 4)), 2), ValueError, "square"),
        (lambda: select_entropy(L, 0), ValueError, "k"),
        (lambda: select_entropy(L, 31), ValueError, "k"),
        (lambda: select_entropy(L + np.triu(np.ones((30, 30)), 1), 3), ValueError, "symmetric"),
        (lambda: select_entropy(np.full((3, 3), np.nan), 1), ValueError, "cov contains NaN"),
        (lambda: select_entropy(L + np.triu(np.ones((30, 30)), 1), 3, check_input="full"), ValueError, "symmetric"),
        (lambda: select_entropy(L, 3, check_input="some"), TypeError, "check_input"),
        (lambda: select_entropy(L - 2 * np.diag(np.diag(L)), 1), ValueError, "negative diagonal"),
        (lambda: select_mutual_information(L, 3, noise=0.0), ValueError, "noise"),
        (lambda: select_mutual_information(np.diag([1.0, -2.0, 1.0]), 1), ValueError, "cov"),
        (lambda: greedy_map(k=2), ValueError, "exactly one"),
        (lambda: greedy_map(features=F, k=0), ValueError, "k"),
        (lambda: greedy_map(features=NAN2, k=2), ValueError, "features contains NaN"),
    ],
)
def test_bad_input_raises_clear_error(call, exc, match) -> None:
    with pytest.raises(exc, match=match):
        call()


def test_outside_domain_of_low_level_kernels() -> None:
    from thrifty import _core

    with pytest.raises(ValueError, match="domain"):
        _core.dpp_partition(np.array([[1.2, 0.3]]), 1, "volume")
    with pytest.raises(ValueError, match="domain"):
        _core.dpp_jacobi_features(np.array([[1.2, 0.3]]), 1, 0.0, 0.0, np.ones(1))
    with pytest.raises(ValueError, match="infinite Jacobi weight"):
        _core.dpp_jacobi_features(np.array([[1.0, 0.3]]), 1, -0.5, -0.5, np.ones(1))
    with pytest.raises(ValueError, match="domain"):
        _core.dpp_daubechies_features(np.array([[-0.1, 0.3]]), 1, 2, np.ones(1))
    # Sizes that would allocate absurdly are refused, not attempted.
    with pytest.raises(ValueError, match="m"):
        _core.dpp_partition(np.array([[0.2, 0.3]]), 10**12, "volume")
    with pytest.raises(ValueError, match="n_cells"):
        _core.dpp_haar_diagonal(np.zeros(1, dtype=np.int64), 10**12, np.ones(1))
    with pytest.raises(ValueError, match="m"):
        _core.dpp_jacobi_features(np.array([[0.2, 0.3]]), 10**9, 0.0, 0.0, np.ones(1))


def test_user_arrays_are_not_modified() -> None:
    U = Q.copy()
    Xc = X2.copy()
    dpp = ProjectionDPP(U)
    dpp.sample_many(3, random_state=0)
    Coreset(Xc, 16, kernel="ope", random_state=0)
    LEnsemble(L.copy()).sample(0)
    assert np.array_equal(U, Q) and np.array_equal(Xc, X2)
    assert not dpp.U.flags.writeable
