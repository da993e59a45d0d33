"""Type stubs for the compiled extension ``thrifty._core`` (PyO3). One section per capability."""

from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str

# ---- kmeans (thrifty.cluster) ------------------------------------------------------------------

class KMeansFit(TypedDict):
    """What ``kmeans_fit`` returns; the per-iteration arrays have one entry per iteration after the first."""

    cluster_centers: npt.NDArray[Any]  # (k, d), X's dtype
    init_centers: npt.NDArray[Any]  # (k, d), X's dtype
    labels: npt.NDArray[np.int32]
    inertia: float
    n_iter: int
    converged: bool
    best_run: int
    certified: npt.NDArray[np.float64]
    batch_moves: npt.NDArray[np.float64]
    relocated: npt.NDArray[np.float64]
    sequential_moves: npt.NDArray[np.float64]
    sse_after_batch: npt.NDArray[np.float64]
    sse_after_sequential: npt.NDArray[np.float64]

# CSR X is passed as its parts: ``x`` = the 1-D data (float32/float64) and
# ``csr = (indices (uint32), indptr (uint64), n_features)``; the core reads them in place.
_CsrParts = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint64], int]

def kmeans_fit(
    x: npt.NDArray[Any],
    sample_weight: npt.NDArray[np.float64] | None,
    init: str | npt.NDArray[Any],
    n_clusters: int,
    n_init: int,
    max_iter: int,
    tol: float,
    algorithm: Literal["hartigan", "lloyd"],
    seed: int,
    n_jobs: int | None = None,
    csr: _CsrParts | None = None,
) -> KMeansFit: ...
def kmeans_predict(
    x: npt.NDArray[Any], centers: npt.NDArray[Any], n_jobs: int | None = None, csr: _CsrParts | None = None
) -> npt.NDArray[np.int32]: ...
def kmeans_transform(
    x: npt.NDArray[Any], centers: npt.NDArray[Any], n_jobs: int | None = None, csr: _CsrParts | None = None
) -> npt.NDArray[Any]: ...
def kmeans_inertia(
    x: npt.NDArray[Any],
    centers: npt.NDArray[Any],
    sample_weight: npt.NDArray[np.float64] | None = None,
    n_jobs: int | None = None,
    csr: _CsrParts | None = None,
) -> float: ...

# ---- kmeans blocks (thrifty.cluster._blocked: per-block kernels of the scale-out k-means) --------

def kmeans_block_kpar_update(
    x: npt.NDArray[Any],
    closest: npt.NDArray[np.float64],
    owner: npt.NDArray[np.uint32],
    cands: npt.NDArray[np.float64],
    offset: int,
    total: int,
    sample_weight: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint32], float, npt.NDArray[np.float64]]: ...
def kmeans_block_kpar_sample(
    closest: npt.NDArray[np.float64],
    phi: float,
    ell: float,
    seed: int,
    round: int,
    block: int,
    sample_weight: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.uint32]: ...
def kmeans_block_lloyd(
    x: npt.NDArray[Any],
    labels: npt.NDArray[np.uint32] | None,
    upper: npt.NDArray[np.float64] | None,
    lower: npt.NDArray[np.float64] | None,
    centers: npt.NDArray[np.float64],
    drift: npt.NDArray[np.float64],
    half_sep: npt.NDArray[np.float64],
    sample_weight: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def kmeans_block_hartigan(
    x: npt.NDArray[Any],
    labels: npt.NDArray[np.uint32],
    prop_to: npt.NDArray[np.int32],
    prop_bucket: npt.NDArray[np.uint8],
    accepted: npt.NDArray[np.uint64],
    single: int,
    centers: npt.NDArray[np.float64],
    sizes: npt.NDArray[np.float64],
    scale: float,
    n_buckets: int,
    sample_weight: npt.NDArray[np.float64] | None = None,
) -> tuple[
    npt.NDArray[np.uint32],
    npt.NDArray[np.int32],
    npt.NDArray[np.uint8],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.float64],
    tuple[float, int, int, int, float],
]: ...

# ---- inference (thrifty.inference) -------------------------------------------------------------

from typing import TypedDict

_F1 = npt.NDArray[np.float64]
_F2 = npt.NDArray[np.float64]
_I1 = npt.NDArray[np.int64]

class GateDict(TypedDict):
    n_eff: float
    stable_rank: float
    n_columns: int
    reroute: bool
    reasons: list[str]

class RouteDict(TypedDict):
    run: str
    n_eff: float
    stable_rank: float
    n_columns: int
    reroute: bool
    reasons: list[str]
    forced: bool
    rerouted: bool
    warning: str | None

class NbOutcomeDict(TypedDict):
    z_mean: float
    z_sd: float
    se: float
    statistic: float
    t: float
    df: float
    p_value: float
    rho_hat: float
    ci_low: float
    ci_high: float
    n_undefined: int
    n_train: float
    n_test: float

class PlsFitDict(TypedDict):
    coef: _F1
    intercept: float
    x_weights: _F2
    x_loadings: _F2
    x_rotations: _F2
    y_loadings: _F1
    x_mean: _F1
    x_std: _F1
    y_mean: float
    y_std: float
    n_components_fitted: int

class Pls2FitDict(TypedDict):
    coef: _F2
    intercept: _F1
    x_weights: _F2
    x_loadings: _F2
    x_rotations: _F2
    y_loadings: _F2
    x_mean: _F1
    x_std: _F1
    n_components_fitted: int

class JackknifeDict(TypedDict):
    coef: _F1
    se: _F1
    t: _F1
    p_values: _F1
    df: float

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
    spls_keep: int = 0,
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
    spls_keep: int = 0,
    refit: bool = False,
    n_jobs: int | None = None,
) -> _F1: ...
def inference_mean_z(r: _F1) -> float: ...
def inference_gate(x: _F2, sample_weight: _F1 | None = None) -> GateDict: ...
def inference_route(
    x: _F2,
    sample_weight: _F1 | None,
    method: str,
    force: bool,
    learner: str,
    n_components: int,
    multi: bool,
    sequence: bool = False,
) -> RouteDict: ...
def inference_route_from_gate(
    n_eff: float,
    stable_rank: float,
    n_columns: int,
    method: str,
    force: bool,
    learner: str,
    n_components: int,
    multi: bool,
    sequence: bool = False,
) -> RouteDict: ...
def inference_nb_outcome(r: _F1, n_train: _F1, n: int, level: float, rho_hat_defined: bool) -> NbOutcomeDict: ...
def inference_permutation_p(observed: float, null: _F1) -> float: ...
def inference_power_of_two_scaled(a: _F2, per_column: bool) -> _F2 | None: ...
def inference_location_shifts(a: _F2) -> _F1 | None: ...
def inference_pls_fit(x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int) -> PlsFitDict: ...
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
    spls_keep: int = 0,
    n_jobs: int | None = None,
) -> tuple[float, _F1]: ...
def inference_jackknife(
    x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int, n_segments: int, seed: int, n_jobs: int | None = None
) -> JackknifeDict: ...
def inference_varimax(
    loadings: _F2, normalize: bool = True, max_iter: int = 500, tol: float = 1e-10
) -> tuple[_F2, _F2, float, int, bool]: ...
def inference_pls2_split_correlations(
    x: _F2, y: _F2, sample_weight: _F1 | None, n_components: int, train: list[_I1], n_jobs: int | None = None
) -> _F1: ...
def inference_pls2_fit(x: _F2, y: _F2, sample_weight: _F1 | None, n_components: int) -> Pls2FitDict: ...
def inference_t_sf(t: float, df: float) -> float: ...
def inference_norm_ppf(q: float) -> float: ...

# ---- dpp (thrifty.dpp) -------------------------------------------------------------------------

from typing import TypedDict  # kept inside the dpp section for easy merging

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_Float = npt.NDArray[Any]

class DppBasis(TypedDict):
    basis: _Float
    rank: int

class DppPath(TypedDict):
    indices: _I64
    pivots: _F64
    pivot_exponent: int  # conditional variances are pivots * 2**pivot_exponent (0 unless rescaled)
    gains: _F64 | None

class DppPartition(TypedDict):
    cells: _I64
    volumes: _F64

class DppHaarDiagonal(TypedDict):
    probabilities: _F64
    rank: int

class DppRagged(TypedDict):
    flat: _I64
    offsets: _I64

def dpp_orthonormalize(features: _Float, rtol: float, equilibrate: bool = True) -> DppBasis: ...
def dpp_orthonormality_error(u: _Float) -> float: ...
def dpp_exact_variance(w: _Float, g: _F64) -> float: ...
def dpp_partition(x: _F64, m: int, split: str) -> DppPartition: ...
def dpp_haar_diagonal(cells: _I64, n_cells: int, density: _F64) -> DppHaarDiagonal: ...
def dpp_daubechies_features(x: _F64, m: int, order: int, density: _F64) -> _F64: ...
def dpp_jacobi_features(x: _F64, m: int, a: float, b: float, density: _F64) -> _F64: ...
def dpp_daubechies_phi(t: _F64, order: int) -> _F64: ...
def dpp_greedy_entropy(cov: _Float, k: int, tol: float, check: Literal['read', 'full', 'skip'] = 'read') -> DppPath: ...
def dpp_greedy_entropy_features(features: _Float, k: int, tol: float) -> DppPath: ...
def dpp_greedy_mutual_information(cov: _F64, k: int, noise: float, check: bool = True) -> DppPath: ...

class DppProjection:
    def __init__(
        self,
        u: _Float,
        check: Literal['skip', 'randomized', 'exact'] = 'randomized',
        tol: float = 1e-6,
        probes: int = 2,
        seed: int = 0,
    ) -> None: ...
    def leverage(self) -> _F64: ...
    def sample_many(self, count: int, method: str, seed: int, n_jobs: int | None = None, offset: int = 0) -> _I64: ...

class DppEnsemble:
    @staticmethod
    def from_kernel(l: _F64, input_eps: float = ...) -> DppEnsemble: ...
    @staticmethod
    def from_features(features: _Float) -> DppEnsemble: ...
    @staticmethod
    def from_parts(eigenvectors: _F64, eigenvalues: _F64) -> DppEnsemble: ...
    @property
    def rank(self) -> int: ...
    def eigenvalues(self) -> _F64: ...
    def eigenvectors(self) -> _F64: ...
    def inclusion(self) -> _F64: ...
    def exact_variance(self, g: _F64) -> float: ...
    def sample_many(self, count: int, seed: int, n_jobs: int | None = None, offset: int = 0) -> DppRagged: ...
    def sample_k_many(self, k: int, count: int, seed: int, n_jobs: int | None = None, offset: int = 0) -> _I64: ...

class DppStratified:
    def __init__(self, cells: _I64, n_cells: int, kdiag: _F64) -> None: ...
    @property
    def rank(self) -> int: ...
    def sample_many(self, count: int, seed: int, n_jobs: int | None = None, offset: int = 0) -> _I64: ...

# ---- dpp, block-wise pieces of the distributed (Dask) path (rust/thrifty-py/src/dpp_blocks.rs) ----

class DppChunkLeverage(TypedDict):
    leverage: _F64
    totals: _F64
    last: int

DPP_LEAF_ROWS: int
DPP_ONE_PASS_KAPPA: float

def dpp_tsqr_chunk(
    x: _Float, first_row: int, n_total: int, w: npt.NDArray[np.float64] | None = None
) -> list[tuple[int, int, npt.NDArray[np.float64]]]: ...
def dpp_tsqr_reduce(nodes: list[tuple[int, int, npt.NDArray[np.float64]]], n_total: int, p: int) -> npt.NDArray[np.float64]: ...
def dpp_tsqr_whiten(r: npt.NDArray[np.float64], rtol: float, equilibrate: bool) -> tuple[npt.NDArray[np.float64], int, float]: ...
def dpp_tsqr_refine(r2: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...
def dpp_basis_rows(x: _Float, w: npt.NDArray[np.float64], w2: npt.NDArray[np.float64] | None = None) -> _Float: ...
def dpp_chunk_leverage(x: _Float, w: npt.NDArray[np.float64], w2: npt.NDArray[np.float64] | None = None) -> DppChunkLeverage: ...
def dpp_locate(leverage: _F64, blocks: _I64, starts: _F64, targets: _F64) -> _I64: ...
def dpp_proposal_pairs(seed: int, task: int, count: int, total: float) -> tuple[_F64, _F64]: ...
def dpp_sample_fetched(rows: _Float, items: _I64, us: _F64) -> _I64 | None: ...

# ---- inference pieces for distributed runs (issue 11; rust/thrifty-py/src/inference_blocks.rs) ----
def inference_split_null_rs(
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
    rotate: str = "none",
    ridge_alpha: float = 1.0,
    spca_n_features: int = 0,
    spls_keep: int = 0,
    n_jobs: int | None = None,
) -> _F2: ...
def inference_null_mean_z(r: _F2) -> _F1: ...
def inference_train_mask(n: int, n_components: int, n_splits: int, seed: int) -> npt.NDArray[np.uint64]: ...

# ---- inference additions (sparse PLS1, PLS-SVD, choosing k, rotation stability; inference_extra.rs) ----

from collections.abc import Sequence  # kept inside this section for easy merging

class SplsFitDict(TypedDict):
    weights: _F2
    rotations: _F2
    coef: _F1
    intercept: float
    keep: int

class PlsSvdFitDict(TypedDict):
    x_weights: _F2
    y_weights: _F2
    singular_values: _F1
    x_mean: _F1
    x_std: _F1
    y_mean: _F1
    y_std: _F1

class CvCurveDict(TypedDict):
    scores: _F2
    mean: _F1
    se: _F1
    choice_max: int | None
    choice_one_se: int | None

class StabilityDict(TypedDict):
    rotated: _F2
    unrotated: _F2
    axes: _F2
    weights: _F2

def inference_spls_fit(x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int, keep: int) -> SplsFitDict: ...
def inference_plssvd_split_correlations(x: _F2, y: _F2, train: Sequence[_I1], n_jobs: int | None = None) -> _F1: ...
def inference_plssvd_permutation(
    x: _F2, y: _F2, train: Sequence[_I1], seed: int, start: int, count: int, n_jobs: int | None = None
) -> _F1: ...
def inference_plssvd_fit(x: _F2, y: _F2, n_components: int) -> PlsSvdFitDict: ...
def inference_cv_curve(
    x: _F2, y: _F1, k_max: int, keep: int, n_folds: int, seed: int, n_jobs: int | None = None
) -> CvCurveDict: ...
def inference_rotation_stability(
    x: _F2, y: _F1, n_components: int, n_boot: int, seed: int, n_jobs: int | None = None,
    subsample_m: int | None = None,
) -> StabilityDict: ...

class ReplicatesDict(TypedDict):
    coef: _F1
    leverage: _F1
    coef_sub: _F2
    leverage_sub: _F2

def inference_subsample_replicates(
    x: _F2, y: _F1, sample_weight: _F1 | None, n_components: int, n_sub: int, m: int, seed: int,
    n_jobs: int | None = None,
) -> ReplicatesDict: ...
