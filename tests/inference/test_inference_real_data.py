"""Acceptance 4: real data read at test time from Debian's R packages (Tecator, gasoline) and from
scikit-learn's bundled sets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from thrifty.inference import GateWarning, PLSInference, datasets, subspace_test


def _load(fn):
    try:
        return fn()
    except FileNotFoundError as exc:  # only when the Debian package truly is absent
        pytest.skip(str(exc))


def _run(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        return subspace_test(X, y, random_state=0, n_perm=1999, **kw)


def test_tecator_parsed():
    X, e = _load(datasets.load_tecator)
    assert X.shape == (215, 100) and e.shape == (215, 3)
    np.testing.assert_allclose(e.mean(axis=0), [63.2044, 18.1423, 17.6828], atol=1e-4)


def test_gasoline_parsed():
    X, y = _load(datasets.load_gasoline)
    assert X.shape == (60, 401) and y.shape == (60,)
    np.testing.assert_allclose(y[:3], [85.3, 85.25, 88.45])
    np.testing.assert_allclose(X[0, :3], [-0.050193, -0.045903, -0.042187])


@pytest.mark.parametrize("k", [1, 3])
def test_tecator_fat(k):
    X, e = _load(datasets.load_tecator)
    fat = e[:, 1]
    res = _run(X, fat, n_components=k)
    assert res.gate.reroute and res.method == "nb-permutation"  # NIR spectra: stable rank ~1
    assert res.p_value < 0.001
    forced = subspace_test(X, fat, n_components=k, random_state=0, force=True)
    assert forced.method == "nb" and forced.p_value < 0.001
    perm = _run(X, np.random.default_rng(1).permutation(fat), n_components=k)
    assert perm.p_value > 0.05


def test_gasoline_octane():
    X, y = _load(datasets.load_gasoline)
    res = _run(X, y)
    assert res.p_value < 0.001
    perm = _run(X, np.random.default_rng(1).permutation(y))
    assert perm.p_value > 0.05


def test_sklearn_diabetes_and_linnerud():
    from sklearn.datasets import load_diabetes, load_linnerud

    X, y = load_diabetes(return_X_y=True)
    res = _run(X, y, n_components=2)  # stable rank 2.48 < 3: rerouted to the permutation test
    assert res.gate.rerouted and res.p_value < 0.001
    assert _run(X, np.random.default_rng(2).permutation(y)).p_value > 0.05
    Xl, Yl = load_linnerud(return_X_y=True)
    with pytest.warns(GateWarning, match="columns"):
        r = subspace_test(Xl, Yl[:, 0], random_state=0, n_perm=199)
    assert r.gate.rerouted and r.method == "nb-permutation"


def test_estimator_on_tecator():
    X, e = _load(datasets.load_tecator)
    est = PLSInference(n_components=3, n_perm=199, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        est.fit(X, e[:, 1])
    assert est.test_ is not None and est.test_.p_value < 0.01
    assert est.score(X, e[:, 1]) > 0.5
