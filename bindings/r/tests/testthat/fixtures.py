"""Shared fixtures of the R package's parity tests, produced by the Python package at test time.

Usage: python fixtures.py OUT.json. Writes the inputs (as exactly round-tripping floats) and the
Python results for fixed seeds; tests/testthat/test-parity.R recomputes every result in R (through
the C ABI) and requires them to be identical. Indices are written 0-based.
"""

from __future__ import annotations

import json
import math
import sys
import warnings

import numpy as np
from thrifty.cluster import HartiganKMeans
from thrifty.dpp import (
    Coreset,
    LEnsemble,
    ProjectionDPP,
    greedy_map,
    select_entropy,
    select_mutual_information,
)
from thrifty.inference import component_tests, subspace_test


def mat(a: np.ndarray) -> list[list[float]]:
    return [[float(v) for v in row] for row in np.asarray(a, dtype=np.float64)]


def ints(a: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(a).ravel()]


def main(path: str) -> None:
    rng = np.random.default_rng(20260)
    out: dict[str, object] = {}

    # k-means: 4 blobs in 5-d, weights
    means = rng.normal(scale=4.0, size=(4, 5))
    xk = means[rng.integers(0, 4, size=600)] + rng.normal(size=(600, 5))
    wk = rng.uniform(0.5, 2.0, size=600)
    out["kmeans_x"], out["kmeans_w"] = mat(xk), [float(v) for v in wk]
    km = HartiganKMeans(4, random_state=11, n_init=3).fit(xk)
    out["kmeans_hartigan"] = {
        "labels": ints(km.labels_),
        "centers": mat(km.cluster_centers_),
        "inertia": km.inertia_,
        "n_iter": km.n_iter_,
    }
    kl = HartiganKMeans(
        4, random_state=12, algorithm="lloyd", max_iter=100, tol=0.0
    ).fit(xk, sample_weight=wk)
    out["kmeans_lloyd_weighted"] = {
        "labels": ints(kl.labels_),
        "centers": mat(kl.cluster_centers_),
        "inertia": kl.inertia_,
        "n_iter": kl.n_iter_,
    }
    init = xk[[0, 150, 300, 450]]
    ki = HartiganKMeans(4, init=init, n_init=1, tol=0.0).fit(xk)
    out["kmeans_init"] = {
        "init": mat(init),
        "labels": ints(ki.labels_),
        "centers": mat(ki.cluster_centers_),
        "inertia": ki.inertia_,
    }
    out["kmeans_predict"] = ints(km.predict(xk[:50] + 0.3))

    # subspace tests: n = 150, p = 15, two informative directions
    xs = rng.normal(size=(150, 15))
    ys = xs[:, 0] + 0.6 * xs[:, 1] + rng.normal(size=150)
    ws = rng.uniform(0.5, 1.5, size=150)
    out["sub_x"], out["sub_y"], out["sub_w"] = (
        mat(xs),
        [float(v) for v in ys],
        [float(v) for v in ws],
    )
    tests = {}
    cases = {
        "nb": {"random_state": 5},
        "nb_k2_weighted": {"n_components": 2, "sample_weight": ws, "random_state": 6},
        "nb_permutation": {
            "method": "nb-permutation",
            "n_perm": 199,
            "n_splits": 20,
            "random_state": 7,
        },
        "spca": {
            "learner": "spca",
            "n_components": 2,
            "random_state": 8,
            "n_splits": 30,
        },
        "ridge": {"learner": "ridge", "random_state": 9, "ridge_alpha": 3.0},
        "pls_varimax": {"n_components": 3, "rotate": "varimax", "random_state": 9},
        "cv_q2": {"method": "cv-permutation-q2", "n_perm": 99, "random_state": 10},
        "perm_score": {
            "method": "permutation-score",
            "n_perm": 99,
            "learner": "spca",
            "random_state": 10,
        },
        "jackknife": {
            "method": "jackknife",
            "n_components": 2,
            "n_folds": 10,
            "random_state": 11,
        },
        "basis": {"learner": np.eye(15)[:, :2], "random_state": 12},
    }
    for name, kw in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = subspace_test(xs, ys, **kw)
        tests[name] = {
            "p_value": res.p_value,
            "statistic": res.statistic,
            # the baselines return a BaselineResult (no t, per-split r or CI)
            "t": getattr(res, "t", None),
            "df": res.df,
            "r": [float(v) for v in getattr(res, "r", ())],
            "ci": [float(v) for v in getattr(res, "ci", ())],
            "method": res.method,
            "null": None
            if res.null_distribution is None
            else [float(v) for v in res.null_distribution],
        }
    splits = [np.sort(np.random.default_rng(s).permutation(150)[:90]) for s in range(4)]
    res = subspace_test(xs, ys, splits=splits, random_state=13)
    tests["explicit_splits"] = {
        "p_value": res.p_value,
        "statistic": res.statistic,
        "t": res.t,
        "df": res.df,
        "r": [float(v) for v in res.r],
        "ci": [float(v) for v in res.ci],
        "method": res.method,
        "null": None,
    }
    out["splits"] = [ints(s) for s in splits]
    # few columns: the gate reroutes to NB-permutation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = subspace_test(xs[:, :3], ys, random_state=14, n_perm=99)
    tests["gate"] = {
        "p_value": res.p_value,
        "statistic": res.statistic,
        "t": res.t,
        "df": res.df,
        "r": [float(v) for v in res.r],
        "ci": [float(v) for v in res.ci],
        "method": res.method,
        "null": [float(v) for v in res.null_distribution],
    }
    ym = np.column_stack([ys, xs[:, 2] + rng.normal(size=150)])
    out["sub_y2"] = mat(ym)
    for name, kw in {
        "pls2": {"n_components": 2, "random_state": 15},
        "pls2_perm": {
            "method": "nb-permutation",
            "n_perm": 49,
            "n_splits": 10,
            "sample_weight": ws,
            "random_state": 16,
        },
    }.items():
        res = subspace_test(xs, ym, **kw)
        tests[name] = {
            "p_value": res.p_value,
            "statistic": res.statistic,
            "t": res.t,
            "df": res.df,
            "r": [float(v) for v in res.r],
            "ci": [float(v) for v in res.ci],
            "method": res.method,
            "null": None
            if res.null_distribution is None
            else [float(v) for v in res.null_distribution],
        }
    out["subspace"] = tests
    ct = component_tests(xs, ys, random_state=3, n_splits=30)
    out["components"] = {
        "k_star": ct.k_star,
        "p_values": [float(v) for v in ct.p_values],
    }

    # DPPs
    f = rng.normal(size=(300, 6))
    out["dpp_f"] = mat(f)
    out["projection"] = ints(
        ProjectionDPP.from_features(f).sample_many(5, random_state=9)
    )
    out["projection_chain"] = ints(
        ProjectionDPP.from_features(f, method="chain").sample_many(3, random_state=10)
    )
    fl = rng.normal(size=(60, 4))
    out["dpp_fl"] = mat(fl)
    out["lensemble"] = [
        ints(s) for s in LEnsemble(features=fl).sample_many(6, random_state=4)
    ]
    lk = fl @ fl.T + 0.1 * np.eye(60)
    out["dpp_l"] = mat(lk)
    out["lensemble_kernel"] = [
        ints(s) for s in LEnsemble(L=lk).sample_many(4, random_state=5)
    ]
    out["kdpp"] = ints(LEnsemble(L=lk).sample_k_many(3, 5, random_state=2))
    xc = rng.uniform(size=(800, 2))
    out["coreset_x"] = mat(xc)
    cs = {}
    for name, kw in {
        "haar": {"random_state": 1},
        "haar_quantile": {"random_state": 2, "split": "quantile"},
        "ope": {"kernel": "ope", "random_state": 3},
        "ope_jacobi_selfnorm": {
            "kernel": "ope",
            "random_state": 4,
            "jacobi_params": (0.5, -0.5),
            "weights": "self_normalized",
        },
        "daubechies": {"kernel": "daubechies", "random_state": 5},
    }.items():
        m = 10 if kw.get("kernel") == "ope" else 16
        c = Coreset(xc, m, **kw)
        cs[name] = {
            "m": m,
            "indices": ints(c.indices),
            "weights": [float(v) for v in c.weights],
        }
    out["coresets"] = cs
    z = rng.normal(size=(50, 8))
    cov = z @ z.T
    out["cov"], out["dpp_z"] = mat(cov), mat(z)
    se = select_entropy(cov, 5)
    out["select_entropy"] = {
        "indices": ints(se.indices),
        "pivots": [float(v) for v in se.conditional_variances],
    }
    gm = greedy_map(features=z, k=4)
    out["greedy_map"] = {
        "indices": ints(gm.indices),
        "pivots": [float(v) for v in gm.conditional_variances],
    }
    mi = select_mutual_information(cov + np.eye(50), 4)
    out["select_mi"] = {
        "indices": ints(mi.indices),
        "gains": [float(v) for v in mi.gains],
    }
    with open(path, "w") as fh:
        json.dump(finite(out), fh, allow_nan=False)


def finite(v: object) -> object:
    """NaN -> null (JSON has no NaN; R reads null as NA)."""
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


if __name__ == "__main__":
    main(sys.argv[1])
