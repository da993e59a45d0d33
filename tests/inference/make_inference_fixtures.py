"""Write tests/inference/fixtures/inference.json: inputs and results of a grid of inference calls.

How the committed file was made: ``python tests/inference/make_inference_fixtures.py`` at commit
d813748 (main, before issue 20 moved the route and the run into thrifty-core), with the native
module built from that commit. ``test_inference_fixtures.py`` recomputes every case with today's
code and requires every field to be identical bit for bit; the R package's
``bindings/r/tests/testthat/test-inference-fixtures.R`` recomputes the cases marked with ``r`` (the
ones the C ABI serves) through the C ABI. Do not regenerate the file to make a test pass: a
difference is a change of results.

The cases that pass through NumPy's BLAS (the callable and transformer learners, component tests'
deflation, the Dask-array gate) depend on the kernels OpenBLAS picks for the CPU (its DYNAMIC_ARCH build),
so both this script and the test run the cases under ``OPENBLAS_CORETYPE=Haswell`` (the AVX2 kernels every
x86-64-v3 CPU runs, the floor thrifty is built for): the record is the same on every machine. The file was
first recorded on an AVX-512 machine (SkylakeX kernels; today's code reproduced all 57 cases bit for bit
there, 2026-12-02) and re-recorded with the Haswell kernels from the native module built at d813748.

Floats are written with ``repr`` (exact round trip); NaN and infinities as the strings "NaN",
"Infinity", "-Infinity"; integer arrays as lists of ints.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "inference.json"


def _f(v: float) -> Any:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def encode(obj: Any) -> Any:
    """JSON form of a result field (recursively; dataclasses by field)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iub":
            return {"dtype": obj.dtype.kind, "shape": list(obj.shape), "data": [int(v) for v in obj.ravel()]}
        return {"dtype": "f", "shape": list(obj.shape), "data": [_f(v) for v in obj.ravel()]}
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _f(obj)
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, str):
        return obj
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _decode_f(v: Any) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v] if isinstance(v, str) else float(v)


def array(d: dict[str, Any]) -> np.ndarray:
    """An array written by :func:`encode`."""
    if d["dtype"] == "f":
        return np.array([_decode_f(v) for v in d["data"]], dtype=np.float64).reshape(d["shape"])
    return np.array(d["data"], dtype=np.int64).reshape(d["shape"])


def inputs() -> dict[str, np.ndarray]:
    """The data sets of the grid: those recorded in the fixture file (bit for bit what the recorded results
    were computed from), or freshly drawn (:func:`draw_inputs`) while there is none. The recorded arrays, not
    a re-draw, because a re-draw's last bits follow the CPU: NumPy computes ``u ** 6`` with SVML's (not
    correctly rounded) power on AVX-512 CPUs and with libm's elsewhere."""
    if FIXTURE.exists():
        return {k: array(v) for k, v in json.loads(FIXTURE.read_text())["inputs"].items()}
    return draw_inputs()


def draw_inputs() -> dict[str, np.ndarray]:
    """The data sets of the grid, drawn from fixed seeds (written into the fixture file)."""
    rng = np.random.default_rng(20)
    d: dict[str, np.ndarray] = {}
    x = rng.normal(size=(150, 15))
    d["x"] = x
    d["y"] = x[:, 0] + 0.6 * x[:, 1] + rng.normal(size=150)
    d["y_null"] = rng.normal(size=150)
    d["w"] = rng.uniform(0.5, 1.5, size=150)
    d["w_skew"] = rng.uniform(0.0, 1.0, size=150) ** 6  # Kish n_eff well below 60
    d["y2"] = np.column_stack([d["y"], x[:, 2] + rng.normal(size=150)])
    # badly scaled columns and response: the power-of-two rescaling
    d["x_scaled"] = x * np.ldexp(1.0, np.array([-300, 200, 0, 70, -70] * 3))[None, :]
    d["y_scaled"] = np.ldexp(d["y"], 150)
    # a dominant factor: stable rank of the standardised X between 3 and 8
    f = rng.normal(size=(150, 1))
    d["x_factor"] = 0.35 * f @ rng.uniform(0.5, 1.5, size=(1, 15)) + rng.normal(size=(150, 15))
    d["y_factor"] = d["x_factor"][:, 0] + rng.normal(size=150)
    # small n (n_eff < 60 and < 25) and a constant column
    xs = rng.normal(size=(40, 12))
    d["x_small"] = xs
    d["y_small"] = xs[:, 0] + rng.normal(size=40)
    xc = x.copy()
    xc[:, 4] = 3.0
    d["x_const"] = xc
    d["basis2"] = np.eye(15)[:, :2]
    d["splits"] = np.stack([np.sort(np.random.default_rng(s).permutation(150)[:90]) for s in range(4)])
    return d


def _callable_basis(x_tr: np.ndarray, y_tr: np.ndarray) -> np.ndarray:
    """A per-split learner: the train covariance direction of X with y, and the first column axis."""
    xc = x_tr - x_tr.mean(axis=0)
    v = xc.T @ (y_tr - y_tr.mean())
    e = np.zeros_like(v)
    e[0] = 1.0
    return np.column_stack([v / np.linalg.norm(v), e])


def _transformer() -> Any:
    from sklearn.cross_decomposition import PLSRegression

    return PLSRegression(n_components=1, scale=True)


# Each case: name -> (function, args as data names / literals, kwargs, R arguments or None).
# In args/kwargs a string starting with "@" names an input array; "@callable" and "@transformer"
# the learners above. R arguments use the R package's names (1-based splits are derived there).
CASES: dict[str, tuple[str, list[Any], dict[str, Any], dict[str, Any] | None]] = {
    "gate": ("check_gate", ["@x"], {}, None),
    "gate_weighted": ("check_gate", ["@x"], {"sample_weight": "@w_skew"}, None),
    "gate_factor": ("check_gate", ["@x_factor"], {}, None),
    "nb_auto": ("subspace_test", ["@x", "@y"], {"random_state": 5}, {"seed": 5}),
    "nb_null": ("subspace_test", ["@x", "@y_null"], {"random_state": 6, "n_splits": 30}, {"seed": 6, "n_splits": 30}),
    "nb_weighted": ("subspace_test", ["@x", "@y"], {"sample_weight": "@w", "random_state": 7}, {"weights": "@w", "seed": 7}),
    "nb_level": ("subspace_test", ["@x", "@y"], {"confidence_level": 0.8, "random_state": 8}, {"conf.level": 0.8, "seed": 8}),
    "auto_k2": ("subspace_test", ["@x", "@y", 2], {"n_perm": 99, "random_state": 9}, {"ncomp": 2, "n_perm": 99, "seed": 9}),
    "nb_k2_forced": (
        "subspace_test", ["@x", "@y", 2], {"method": "nb", "force": True, "sample_weight": "@w", "random_state": 10},
        {"ncomp": 2, "method": "nb", "force": True, "weights": "@w", "seed": 10},
    ),
    "nb_rerouted": ("subspace_test", ["@x", "@y", 2], {"method": "nb", "n_perm": 49, "random_state": 11},
                    {"ncomp": 2, "method": "nb", "n_perm": 49, "seed": 11}),
    "nb_perm": ("subspace_test", ["@x", "@y"], {"method": "nb-permutation", "n_perm": 199, "n_splits": 20, "random_state": 12},
                {"method": "nb-permutation", "n_perm": 199, "n_splits": 20, "seed": 12}),
    "nb_perm_null": ("subspace_test", ["@x", "@y_null"], {"method": "nb-permutation", "n_perm": 199, "random_state": 13},
                     {"method": "nb-permutation", "n_perm": 199, "seed": 13}),
    "nb_perm_k2_weighted": (
        "subspace_test", ["@x", "@y_null", 2],
        {"method": "nb-permutation", "n_perm": 99, "sample_weight": "@w", "random_state": 14},
        {"ncomp": 2, "method": "nb-permutation", "n_perm": 99, "weights": "@w", "seed": 14},
    ),
    "nb_perm_k3": ("subspace_test", ["@x", "@y", 3], {"method": "nb-permutation", "n_perm": 49, "n_splits": 10, "random_state": 15},
                   {"ncomp": 3, "method": "nb-permutation", "n_perm": 49, "n_splits": 10, "seed": 15}),
    "gate_columns": ("subspace_test", ["@x[:, :3]", "@y"], {"n_perm": 99, "random_state": 16},
                     {"x": "@x[:, :3]", "n_perm": 99, "seed": 16}),
    "gate_columns_forced": ("subspace_test", ["@x[:, :3]", "@y"], {"force": True, "random_state": 17},
                            {"x": "@x[:, :3]", "force": True, "seed": 17}),
    "gate_small_n": ("subspace_test", ["@x_small", "@y_small"], {"n_perm": 99, "random_state": 18},
                     {"x": "@x_small", "y": "@y_small", "n_perm": 99, "seed": 18}),
    "gate_small_forced": ("subspace_test", ["@x_small", "@y_small"], {"method": "nb", "force": True, "random_state": 19},
                          {"x": "@x_small", "y": "@y_small", "method": "nb", "force": True, "seed": 19}),
    "gate_kish": ("subspace_test", ["@x", "@y"], {"sample_weight": "@w_skew", "n_perm": 99, "random_state": 20},
                  {"weights": "@w_skew", "n_perm": 99, "seed": 20}),
    "gate_factor_auto": ("subspace_test", ["@x_factor", "@y_factor"], {"n_perm": 99, "random_state": 21},
                         {"x": "@x_factor", "y": "@y_factor", "n_perm": 99, "seed": 21}),
    "scaled": ("subspace_test", ["@x_scaled", "@y_scaled"], {"random_state": 22},
               {"x": "@x_scaled", "y": "@y_scaled", "seed": 22}),
    "scaled_perm_k2": ("subspace_test", ["@x_scaled", "@y_scaled", 2], {"n_perm": 49, "random_state": 23},
                       {"x": "@x_scaled", "y": "@y_scaled", "ncomp": 2, "n_perm": 49, "seed": 23}),
    "const_column": ("subspace_test", ["@x_const", "@y"], {"random_state": 24}, {"x": "@x_const", "seed": 24}),
    "spca": ("subspace_test", ["@x", "@y", 2], {"learner": "spca", "n_perm": 49, "n_splits": 30, "random_state": 25},
             {"ncomp": 2, "learner": "spca", "n_perm": 49, "n_splits": 30, "seed": 25}),
    "spca_features": ("subspace_test", ["@x", "@y"], {"learner": "spca", "spca_n_features": 4, "method": "nb", "force": True,
                                                       "random_state": 26},
                      {"learner": "spca", "spca_n_features": 4, "method": "nb", "force": True, "seed": 26}),
    "ridge": ("subspace_test", ["@x", "@y"], {"learner": "ridge", "ridge_alpha": 3.0, "n_perm": 99, "random_state": 27},
              {"learner": "ridge", "ridge_alpha": 3, "n_perm": 99, "seed": 27}),
    "ridge_weighted_null": (
        "subspace_test", ["@x", "@y_null"],
        {"learner": "ridge", "sample_weight": "@w", "method": "nb-permutation", "n_perm": 99, "random_state": 28},
        {"learner": "ridge", "weights": "@w", "method": "nb-permutation", "n_perm": 99, "seed": 28},
    ),
    "basis": ("subspace_test", ["@x", "@y"], {"learner": "@basis2", "n_perm": 99, "random_state": 29},
              {"learner": "@basis2", "n_perm": 99, "seed": 29}),
    "basis_scaled_forced": ("subspace_test", ["@x_scaled", "@y_scaled"], {"learner": "@basis2", "force": True, "random_state": 30},
                            {"x": "@x_scaled", "y": "@y_scaled", "learner": "@basis2", "force": True, "seed": 30}),
    "varimax": ("subspace_test", ["@x", "@y", 3], {"rotate": "varimax", "n_perm": 49, "random_state": 31},
                {"ncomp": 3, "rotate": "varimax", "n_perm": 49, "seed": 31}),
    "splits": ("subspace_test", ["@x", "@y"], {"splits": "@splits", "random_state": 32}, {"splits": "@splits", "seed": 32}),
    "splits_perm_k2": ("subspace_test", ["@x", "@y", 2], {"splits": "@splits", "n_perm": 49, "random_state": 33},
                       {"ncomp": 2, "splits": "@splits", "n_perm": 49, "seed": 33}),
    "cv_q2": ("subspace_test", ["@x", "@y"], {"method": "cv-permutation-q2", "n_perm": 99, "random_state": 34},
              {"method": "cv-permutation-q2", "n_perm": 99, "seed": 34}),
    "cv_q2_k2_weighted": (
        "subspace_test", ["@x", "@y_null", 2],
        {"method": "cv-permutation-q2", "n_perm": 49, "n_folds": 4, "sample_weight": "@w", "random_state": 35},
        {"ncomp": 2, "method": "cv-permutation-q2", "n_perm": 49, "n_folds": 4, "weights": "@w", "seed": 35},
    ),
    "perm_score_spca": ("subspace_test", ["@x", "@y"], {"method": "permutation-score", "learner": "spca", "n_perm": 49,
                                                        "random_state": 36},
                        {"method": "permutation-score", "learner": "spca", "n_perm": 49, "seed": 36}),
    "perm_score_ridge": ("subspace_test", ["@x", "@y"], {"method": "permutation-score", "learner": "ridge", "n_perm": 49,
                                                         "random_state": 37},
                         {"method": "permutation-score", "learner": "ridge", "n_perm": 49, "seed": 37}),
    "cv_basis": ("subspace_test", ["@x", "@y"], {"method": "cv-permutation-q2", "learner": "@basis2", "n_perm": 49,
                                                 "random_state": 38},
                 {"method": "cv-permutation-q2", "learner": "@basis2", "n_perm": 49, "seed": 38}),
    "jackknife": ("subspace_test", ["@x", "@y", 2], {"method": "jackknife", "n_folds": 10, "random_state": 39},
                  {"ncomp": 2, "method": "jackknife", "n_folds": 10, "seed": 39}),
    "jackknife_weighted": ("subspace_test", ["@x", "@y"], {"method": "jackknife", "sample_weight": "@w", "random_state": 40},
                           {"method": "jackknife", "weights": "@w", "seed": 40}),
    "callable": ("subspace_test", ["@x", "@y"], {"learner": "@callable", "n_perm": 19, "n_splits": 10, "random_state": 41},
                 None),
    "callable_forced": ("subspace_test", ["@x", "@y_null"], {"learner": "@callable", "method": "nb", "force": True,
                                                              "random_state": 42}, None),
    "transformer": ("subspace_test", ["@x", "@y"], {"learner": "@transformer", "method": "nb", "force": True, "n_splits": 20,
                                                    "random_state": 43}, None),
    "transformer_perm": ("subspace_test", ["@x", "@y_null"], {"learner": "@transformer", "n_perm": 9, "n_splits": 8,
                                                              "random_state": 44}, None),
    "pls2": ("subspace_test", ["@x", "@y2", 2], {"n_perm": 49, "n_splits": 20, "random_state": 45},
             {"y": "@y2", "ncomp": 2, "n_perm": 49, "n_splits": 20, "seed": 45}),
    "pls2_forced": ("subspace_test", ["@x", "@y2"], {"method": "nb", "force": True, "random_state": 46},
                    {"y": "@y2", "method": "nb", "force": True, "seed": 46}),
    "pls2_perm_weighted": (
        "subspace_test", ["@x", "@y2"],
        {"method": "nb-permutation", "n_perm": 29, "n_splits": 10, "sample_weight": "@w", "random_state": 47},
        {"y": "@y2", "method": "nb-permutation", "n_perm": 29, "n_splits": 10, "weights": "@w", "seed": 47},
    ),
    "components": ("component_tests", ["@x", "@y"], {"random_state": 48, "n_splits": 30, "n_perm": 49},
                   {"n_splits": 30, "n_perm": 49, "seed": 48}),
    "components_nb_forced": ("component_tests", ["@x", "@y"], {"method": "nb", "force": True, "random_state": 49},
                             {"method": "nb", "force": True, "seed": 49}),
    "components_perm_weighted": (
        "component_tests", ["@x", "@y"],
        {"method": "nb-permutation", "n_perm": 29, "n_splits": 10, "sample_weight": "@w", "max_components": 3,
         "random_state": 50},
        {"method": "nb-permutation", "n_perm": 29, "n_splits": 10, "weights": "@w", "max_components": 3, "seed": 50},
    ),
    "estimator": ("PLSInference", ["@x", "@y"], {"n_components": 1, "random_state": 51}, None),
    "estimator_k2_perm": ("PLSInference", ["@x", "@y"], {"n_components": 2, "n_perm": 49, "random_state": 52}, None),
    "joblib_perm": ("joblib:subspace_test", ["@x", "@y"], {"method": "nb-permutation", "n_perm": 99, "n_splits": 12,
                                                           "backend": "joblib", "random_state": 53}, None),
    "joblib_cv": ("joblib:subspace_test", ["@x", "@y"], {"method": "cv-permutation-q2", "n_perm": 49, "backend": "joblib",
                                                         "random_state": 54}, None),
    "joblib_callable": ("joblib:subspace_test", ["@x", "@y"], {"learner": "@callable", "n_perm": 9, "n_splits": 6,
                                                               "backend": "joblib", "random_state": 55}, None),
    "dask_array": ("dask:subspace_test", ["@x", "@y"], {"random_state": 56, "n_splits": 20}, None),
    "dask_array_null": ("dask:subspace_test", ["@x", "@y_null"], {"random_state": 57}, None),
}


def resolve(v: Any, data: dict[str, np.ndarray]) -> Any:
    if isinstance(v, str) and v.startswith("@"):
        name = v[1:]
        if name == "callable":
            return _callable_basis
        if name == "transformer":
            return _transformer()
        if name.endswith("[:, :3]"):
            return data[name[: -len("[:, :3]")]][:, :3]
        return data[name]
    return v


def run_case(name: str, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """Run one case; returns the encoded result and the warning categories raised."""
    from thrifty import inference

    func, args, kwargs, _ = CASES[name]
    a = [resolve(v, data) for v in args]
    kw = {k: resolve(v, data) for k, v in kwargs.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if func == "PLSInference":
            est = inference.PLSInference(**kw).fit(a[0], a[1])
            res: Any = {"test_": est.test_, "coef_": np.asarray(est.coef_, dtype=np.float64),
                        "predict": np.asarray(est.predict(a[0][:10]), dtype=np.float64)}
        elif func.startswith("joblib:"):
            from joblib import parallel_config

            with parallel_config(backend="threading", n_jobs=2):
                res = getattr(inference, func.split(":")[1])(*a, **kw)
        elif func.startswith("dask:"):
            import dask
            import dask.array as da

            with dask.config.set(scheduler="synchronous"):
                res = inference.subspace_test(da.from_array(a[0], chunks=(40, a[0].shape[1])),
                                              da.from_array(a[1], chunks=40), **kw)
        else:
            res = getattr(inference, func)(*a, **kw)
    cats = sorted({w.category.__name__ for w in caught})
    return {"result": encode(res), "warnings": cats}


BLAS_CORETYPE = "Haswell"


def run_pinned(names: list[str]) -> dict[str, Any]:
    """``run_case`` of every name, in a child process with OpenBLAS's kernels pinned (``BLAS_CORETYPE``)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cases.json"
        code = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); from make_inference_fixtures import inputs, run_case; "
            "d = inputs(); json.dump({n: run_case(n, d) for n in sys.argv[3:]}, open(sys.argv[2], 'w'), allow_nan=False)"
        )
        env = {**os.environ, "OPENBLAS_CORETYPE": BLAS_CORETYPE}
        subprocess.run([sys.executable, "-c", code, str(HERE), str(out), *names], env=env, check=True)
        result: dict[str, Any] = json.loads(out.read_text())
    return result


def write(path: Path, about: str, cases: dict[str, Any], run: Any, with_inputs: bool = True) -> None:
    """Run every case of ``cases`` with ``run(name, data)`` and write them (and the inputs) to ``path``."""
    if os.environ.get("OPENBLAS_CORETYPE") != BLAS_CORETYPE:  # numpy is loaded: re-run the script pinned
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "OPENBLAS_CORETYPE": BLAS_CORETYPE})
    data = draw_inputs() if with_inputs else inputs()
    out: dict[str, Any] = {"about": about}
    if with_inputs:
        out["inputs"] = {k: encode(v) for k, v in data.items()}
    out["cases"] = {}
    for name, (func, args, kwargs, r_args) in cases.items():
        entry = run(name, data)
        entry["call"] = {"function": func, "args": args, "kwargs": kwargs, "r": r_args}
        out["cases"][name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, allow_nan=False, indent=None, separators=(",", ":")) + "\n")


def main(path: Path) -> None:
    write(path, "made by tests/inference/make_inference_fixtures.py; see its docstring", CASES, run_case)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
