"""Write tests/inference/fixtures/inference_extra.json: inputs and results of the inference additions.

The cases cover sparse PLS1 in the subspace test (``learner="spls"``, ``result.basis``), the
two-block ``pls_svd_test``, ``select_n_components``, ``rotation_stability`` and
``coefficient_intervals``, on the data sets of ``make_inference_fixtures.inputs()`` (recorded in ``inference.json``).
``test_inference_extra_fixtures.py`` recomputes every case with today's code and requires every
field to be identical bit for bit; the R package's
``bindings/r/tests/testthat/test-inference-extra-fixtures.R`` recomputes every case through the C
ABI (the fields the core computes bit for bit; the summaries R computes from them, such as
percentile intervals, to 1e-12). Made with ``python tests/inference/make_inference_extra_fixtures.py``
(issue 20, point 2); do not regenerate the file to make a test pass: a difference is a change of results.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from make_inference_fixtures import encode, resolve, write

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "inference_extra.json"

# name -> (function, args, kwargs, R arguments); "@name" is an input array (R's splits 1-based).
CASES: dict[str, tuple[str, list[Any], dict[str, Any], dict[str, Any]]] = {
    "spls_keep2": ("subspace_test", ["@x", "@y"], {"learner": "spls", "spls_keep": 2, "n_perm": 49, "n_splits": 20,
                                                   "random_state": 60},
                   {"learner": "spls", "spls_keep": 2, "n_perm": 49, "n_splits": 20, "seed": 60}),
    "spls_cv": ("subspace_test", ["@x", "@y"], {"learner": "spls", "n_perm": 9, "n_splits": 8, "random_state": 61},
                {"learner": "spls", "n_perm": 9, "n_splits": 8, "seed": 61}),
    "spls_k2_weighted": (
        "subspace_test", ["@x", "@y_null", 2],
        {"learner": "spls", "spls_keep": 4, "sample_weight": "@w", "n_perm": 29, "n_splits": 10, "random_state": 62},
        {"ncomp": 2, "learner": "spls", "spls_keep": 4, "weights": "@w", "n_perm": 29, "n_splits": 10, "seed": 62},
    ),
    "spls_forced": ("subspace_test", ["@x", "@y"], {"learner": "spls", "spls_keep": 3, "method": "nb", "force": True,
                                                    "random_state": 63},
                    {"learner": "spls", "spls_keep": 3, "method": "nb", "force": True, "seed": 63}),
    "spls_rerouted": ("subspace_test", ["@x_scaled", "@y_scaled"], {"learner": "spls", "spls_keep": 5, "method": "nb",
                                                                    "n_perm": 19, "n_splits": 10, "random_state": 64},
                      {"x": "@x_scaled", "y": "@y_scaled", "learner": "spls", "spls_keep": 5, "method": "nb",
                       "n_perm": 19, "n_splits": 10, "seed": 64}),
    "plssvd": ("pls_svd_test", ["@x", "@y2"], {"n_perm": 99, "n_splits": 20, "random_state": 65},
               {"y": "@y2", "n_perm": 99, "n_splits": 20, "seed": 65}),
    "plssvd_k2_forced": ("pls_svd_test", ["@x", "@y2", 2], {"method": "nb", "force": True, "random_state": 66},
                         {"y": "@y2", "ncomp": 2, "method": "nb", "force": True, "seed": 66}),
    "plssvd_rerouted": ("pls_svd_test", ["@x_factor", "@y2"], {"method": "nb", "n_perm": 49, "n_splits": 10,
                                                                "confidence_level": 0.9, "random_state": 67},
                        {"x": "@x_factor", "y": "@y2", "method": "nb", "n_perm": 49, "n_splits": 10,
                         "conf.level": 0.9, "seed": 67}),
    "plssvd_splits_scaled": ("pls_svd_test", ["@x_scaled", "@y2"], {"splits": "@splits", "n_perm": 49, "random_state": 68},
                             {"x": "@x_scaled", "y": "@y2", "splits": "@splits", "n_perm": 49, "seed": 68}),
    "select_one_se": ("select_n_components", ["@x", "@y"], {"k_max": 6, "random_state": 69},
                      {"k_max": 6, "seed": 69}),
    "select_max_spls": ("select_n_components", ["@x", "@y"], {"k_max": 5, "rule": "max", "spls_keep": 4, "n_folds": 4,
                                                             "random_state": 70},
                        {"k_max": 5, "rule": "max", "spls_keep": 4, "n_folds": 4, "seed": 70}),
    "select_sequence": ("select_n_components", ["@x", "@y"], {"k_max": 4, "rule": "sequence", "n_splits": 20,
                                                             "n_perm": 49, "random_state": 71},
                        {"k_max": 4, "rule": "sequence", "n_splits": 20, "n_perm": 49, "seed": 71}),
    "stability": ("rotation_stability", ["@x", "@y", 2], {"n_boot": 60, "random_state": 72},
                  {"ncomp": 2, "n_boot": 60, "seed": 72}),
    "stability_k3": ("rotation_stability", ["@x_factor", "@y_factor", 3], {"n_boot": 40, "confidence_level": 0.9,
                                                                          "random_state": 73},
                     {"x": "@x_factor", "y": "@y_factor", "ncomp": 3, "n_boot": 40, "conf.level": 0.9, "seed": 73}),
    "stability_subsample": ("rotation_stability", ["@x", "@y", 2], {"n_boot": 50, "resample": "subsample",
                                                                   "subsample_rate": 0.8, "random_state": 76},
                            {"ncomp": 2, "n_boot": 50, "resample": "subsample", "subsample_rate": 0.8, "seed": 76}),
    "intervals": ("coefficient_intervals", ["@x", "@y"], {"n_boot": 80, "random_state": 74}, {"n_boot": 80, "seed": 74}),
    "intervals_k2_weighted": (
        "coefficient_intervals", ["@x", "@y", 2],
        {"n_boot": 60, "m_rate": 0.8, "confidence_level": 0.9, "sample_weight": "@w", "random_state": 75},
        {"ncomp": 2, "n_boot": 60, "m_rate": 0.8, "conf.level": 0.9, "weights": "@w", "seed": 75},
    ),
}


def run_case(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Run one case; returns the encoded result and the warning categories raised."""
    from thrifty import inference

    func, args, kwargs, _ = CASES[name]
    a = [resolve(v, data) for v in args]
    kw = {k: resolve(v, data) for k, v in kwargs.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = getattr(inference, func)(*a, **kw)
    return {"result": encode(res), "warnings": sorted({w.category.__name__ for w in caught})}


def main(path: Path) -> None:
    about = "made by tests/inference/make_inference_extra_fixtures.py; see its docstring (the inputs are those of inference.json)"
    write(path, about, CASES, run_case, with_inputs=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
