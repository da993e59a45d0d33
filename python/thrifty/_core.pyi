"""Type stubs for the compiled extension ``thrifty._core`` (PyO3). One section per capability."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

# ---- kmeans (thrifty.cluster) ------------------------------------------------------------------

# ---- inference (thrifty.inference) -------------------------------------------------------------

_F1 = npt.NDArray[np.float64]
_F2 = npt.NDArray[np.float64]
_I1 = npt.NDArray[np.int64]

def inference_draw_splits(n: int, n_components: int, n_splits: int, seed: int) -> list[_I1]: ...
def inference_permutation(n: int, seed: int, b: int) -> _I1: ...
def inference_split_correlations(
    x: _F2,
    y: _F1,
    sample_weight: _F1 | None,
    learner: str,
    n_components: int,
    train: list[_I1],
    basis: _F2 | None = None,
    bases: list[_F2] | None = None,
    rotate: str = "none",
    ridge_alpha: float = 1.0,
    spca_n_features: int = 0,
    n_jobs: int | None = None,
) -> _F1: ...
def inference_nb_permutation(
    x: _F2,
    y: _F1,
    sample_weight: _F1 | None,
    learner: str,
    n_components: int,
    train: list[_I1],
    seed: int,
    start: int,
    count: int,
    basis: _F2 | None = None,
    bases: list[_F2] | None = None,
    rotate: str = "none",
    ridge_alpha: float = 1.0,
    spca_n_features: int = 0,
    refit: bool = False,
    n_jobs: int | None = None,
) -> _F1: ...
def inference_nb_test(r: _F1, ratio: float, n_test: float | None, level: float = 0.95) -> dict[str, float]: ...
def inference_mean_z(r: _F1) -> float: ...
def inference_gate(x: _F2, sample_weight: _F1 | None = None) -> dict[str, Any]: ...
def inference_pls_fit(x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int) -> dict[str, Any]: ...
def inference_deflate(x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int) -> tuple[_F2, _F1]: ...
def inference_cv_permutation(
    x: _F2,
    y: _F1,
    sample_weight: _F1 | None,
    learner: str,
    n_components: int,
    n_folds: int,
    seed: int,
    start: int,
    count: int,
    pooled: bool,
    basis: _F2 | None = None,
    ridge_alpha: float = 1.0,
    spca_n_features: int = 0,
    n_jobs: int | None = None,
) -> tuple[float, _F1]: ...
def inference_jackknife(
    x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int, n_segments: int, seed: int, n_jobs: int | None = None
) -> dict[str, Any]: ...
def inference_varimax(
    loadings: _F2, normalize: bool = True, max_iter: int = 500, tol: float = 1e-10
) -> tuple[_F2, _F2, float, int]: ...
def inference_pls2_split_correlations(
    x: _F2, y: _F2, sample_weight: _F1 | None, n_components: int, train: list[_I1], n_jobs: int | None = None
) -> _F1: ...
def inference_pls2_fit(x: _F2, y: _F2, sample_weight: _F1 | None, n_components: int) -> dict[str, Any]: ...
def inference_t_sf(t: float, df: float) -> float: ...
def inference_norm_ppf(q: float) -> float: ...

# ---- dpp (thrifty.dpp) -------------------------------------------------------------------------
