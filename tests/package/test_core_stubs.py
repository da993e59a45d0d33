"""The compiled bindings and their stubs agree (issue 10, item D18): every `_core` function whose stub
returns a TypedDict returns a dict with exactly the TypedDict's keys, and each value has the declared
kind (NumPy array, float, int, bool, list, or None where the stub allows it)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import thrifty
from thrifty import _core

STUB = Path(thrifty.__file__).with_name("_core.pyi")


def _typed_dicts() -> dict[str, dict[str, str]]:
    """TypedDict name -> {key: annotation source} parsed from _core.pyi."""
    tree = ast.parse(STUB.read_text())
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "TypedDict" for b in node.bases):
            out[node.name] = {
                stmt.target.id: ast.unparse(stmt.annotation)
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    return out


def _returns() -> dict[str, str]:
    """Function or Class.method -> return annotation source, parsed from _core.pyi."""
    tree = ast.parse(STUB.read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            out[node.name] = ast.unparse(node.returns)
        if isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.returns is not None:
                    out[f"{node.name}.{f.name}"] = ast.unparse(f.returns)
    return out


def _kind_ok(value: Any, annotation: str) -> bool:
    options = [a.strip() for a in annotation.split("|")]
    if value is None:
        return "None" in options
    if isinstance(value, np.ndarray):
        return any("NDArray" in a or a.startswith("_") for a in options)
    if isinstance(value, bool):
        return "bool" in options
    if isinstance(value, int):
        return "int" in options
    if isinstance(value, float):
        return "float" in options
    if isinstance(value, str):
        return "str" in options
    if isinstance(value, list):
        return any(a.startswith("list") for a in options)
    return False


rng = np.random.default_rng(0)
X = rng.normal(size=(40, 6))
Y = X[:, 0] + rng.normal(size=40)
Y2 = np.ascontiguousarray(np.c_[Y, X[:, 1] + rng.normal(size=40)])
COV = np.ascontiguousarray(X.T @ X + np.eye(6))
U01 = np.ascontiguousarray(rng.uniform(size=(30, 2)))

def _tsqr_whitening(x: Any) -> Any:
    """W with Q = X·W from the TSQR pieces (the dask path's basis)."""
    n, p = x.shape
    r = _core.dpp_tsqr_reduce(_core.dpp_tsqr_chunk(x, 0, n), n, p)
    return _core.dpp_tsqr_whiten(r, 1e-12, False)[0]


CALLS: dict[str, Any] = {
    "kmeans_fit": lambda: _core.kmeans_fit(X, None, "k-means++", 3, 1, 50, 0.0, "hartigan", 0),
    "inference_gate": lambda: _core.inference_gate(X),
    "inference_route": lambda: _core.inference_route(X, None, "auto", False, "pls", 1, False),
    "inference_route_from_gate": lambda: _core.inference_route_from_gate(40.0, 2.0, 6, "nb", False, "ridge", 1, False),
    "inference_nb_outcome": lambda: _core.inference_nb_outcome(
        np.array([0.3, np.nan, 0.2, 0.5]), np.full(4, 20.0), 40, 0.95, True
    ),
    "inference_pls_fit": lambda: _core.inference_pls_fit(X, Y, None, 2),
    "inference_pls2_fit": lambda: _core.inference_pls2_fit(X, Y2, None, 2),
    "inference_jackknife": lambda: _core.inference_jackknife(X, Y, None, 2, 5, 0),
    "dpp_orthonormalize": lambda: _core.dpp_orthonormalize(X, 1e-10),
    "dpp_partition": lambda: _core.dpp_partition(U01, 4, "volume"),
    "dpp_haar_diagonal": lambda: _core.dpp_haar_diagonal(np.array([0, 1, 1, 2], dtype=np.int64), 3, np.ones(4)),
    "dpp_greedy_entropy": lambda: _core.dpp_greedy_entropy(COV, 3, 1e-10),
    "dpp_greedy_entropy_features": lambda: _core.dpp_greedy_entropy_features(X, 3, 1e-10),
    "dpp_greedy_mutual_information": lambda: _core.dpp_greedy_mutual_information(COV, 3, 1e-3),
    "DppEnsemble.sample_many": lambda: _core.DppEnsemble.from_features(X).sample_many(3, 0),
    "dpp_chunk_leverage": lambda: _core.dpp_chunk_leverage(X, _tsqr_whitening(X)),
    # inference additions (inference_extra.rs)
    "inference_spls_fit": lambda: _core.inference_spls_fit(X, Y, None, 2, 3),
    "inference_plssvd_fit": lambda: _core.inference_plssvd_fit(X, Y2, 2),
    "inference_cv_curve": lambda: _core.inference_cv_curve(X, Y, 3, 6, 4, 0),
    "inference_rotation_stability": lambda: _core.inference_rotation_stability(X, Y, 2, 5, 0),
    "inference_subsample_replicates": lambda: _core.inference_subsample_replicates(X, Y, None, 1, 5, 20, 0),
}


def test_every_typed_dict_return_is_exercised() -> None:
    dicts = _typed_dicts()
    returning = {name for name, ret in _returns().items() if ret in dicts}
    assert returning == set(CALLS), "add a call for each _core function that returns a TypedDict"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_binding_matches_its_typed_dict(name: str) -> None:
    fields = _typed_dicts()[_returns()[name]]
    got = CALLS[name]()
    assert isinstance(got, dict)
    assert set(got) == set(fields), name
    for key, annotation in fields.items():
        assert _kind_ok(got[key], annotation), f"{name}[{key!r}] = {type(got[key]).__name__}, stub says {annotation}"
