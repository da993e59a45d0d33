"""Type stubs for the compiled extension ``thrifty._core`` (PyO3). One section per capability."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

# ---- kmeans (thrifty.cluster) ------------------------------------------------------------------

def kmeans_fit(
    x: npt.NDArray[Any],
    sample_weight: npt.NDArray[np.float64] | None,
    init: str | npt.NDArray[Any],
    n_clusters: int,
    n_init: int,
    max_iter: int,
    tol: float,
    algorithm: str,
    seed: int,
    n_jobs: int | None = None,
) -> dict[str, Any]:
    """Fit k-means. Keys: cluster_centers, init_centers (k×d, X's dtype), labels (int32), inertia,
    n_iter, converged, best_run, and per-iteration arrays certified, batch_moves, sequential_moves,
    sse_after_batch, sse_after_sequential."""

def kmeans_predict(x: npt.NDArray[Any], centers: npt.NDArray[Any], n_jobs: int | None = None) -> npt.NDArray[np.int32]: ...
def kmeans_transform(x: npt.NDArray[Any], centers: npt.NDArray[Any], n_jobs: int | None = None) -> npt.NDArray[Any]: ...

# ---- inference (thrifty.inference) -------------------------------------------------------------

# ---- dpp (thrifty.dpp) -------------------------------------------------------------------------
