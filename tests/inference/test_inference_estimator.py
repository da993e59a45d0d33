"""PLSInference: scikit-learn contract, Pipeline use, agreement with PLSRegression."""

from __future__ import annotations

import numpy as np
from sklearn.cross_decomposition import PLSRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from thrifty.inference import PLSInference


@parametrize_with_checks([PLSInference(test=False), PLSInference(n_splits=5, n_perm=19, random_state=0)])
def test_sklearn_contract(estimator, check):
    check(estimator)


def test_pipeline_and_transform():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 12))
    y = X[:, 0] - X[:, 1] + rng.normal(size=150)
    pipe = make_pipeline(StandardScaler(), PLSInference(n_components=2, random_state=0)).fit(X, y)
    est = pipe[-1]
    # k = 2: auto runs the NB-permutation test (B = 1000)
    assert est.test_ is not None and est.test_.method == "nb-permutation" and est.test_.pvalue < 2e-3
    sk = PLSRegression(n_components=2).fit(StandardScaler().fit_transform(X), y)
    np.testing.assert_allclose(pipe.predict(X), sk.predict(StandardScaler().fit_transform(X)).ravel(), atol=1e-8)
    T = est.transform(StandardScaler().fit_transform(X))
    assert T.shape == (150, 2)
    # scores are sklearn's up to sign and the population/sample SD factor
    Tsk = sk.transform(StandardScaler().fit_transform(X))
    for a in range(2):
        c = np.corrcoef(T[:, a], Tsk[:, a])[0, 1]
        assert abs(abs(c) - 1) < 1e-10
    scores = cross_val_score(make_pipeline(StandardScaler(), PLSInference(test=False)), X, y, cv=3)
    assert scores.mean() > 0.4


def test_sample_weight_fit():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6))
    y = X[:, 0] + rng.normal(size=80)
    w = np.ones(80)
    a = PLSInference(test=False).fit(X, y, sample_weight=w)
    b = PLSInference(test=False).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)
    # integer weights equal row duplication
    wi = rng.integers(1, 4, size=80).astype(float)
    c = PLSInference(n_components=2, test=False).fit(X, y, sample_weight=wi)
    d = PLSInference(n_components=2, test=False).fit(np.repeat(X, wi.astype(int), axis=0), np.repeat(y, wi.astype(int)))
    np.testing.assert_allclose(c.coef_, d.coef_, atol=1e-10)
