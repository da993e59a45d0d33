"""subspace_test, component_tests and varimax: validation and orchestration over ``thrifty._core``."""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_finite_matrix,
    check_finite_vector,
    check_n_jobs,
    seed_from_random_state,
)
from thrifty.inference._results import (
    ComponentTestsResult,
    FloatArray,
    GateDecision,
    IntArray,
    SubspaceTestResult,
    VarimaxResult,
)

Method = Literal["auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife"]
LearnerArg = Union[str, npt.ArrayLike, Callable[[FloatArray, FloatArray], Any], Any]

METHODS = ("auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife")
LEARNERS = ("pls", "spca", "ridge")


class GateWarning(UserWarning):
    """The pre-run gate rerouted the NB-asymptotic test to the NB-permutation test."""


class ConstantColumnWarning(UserWarning):
    """X has constant columns; they are dropped from every fit (their standardised values are 0)."""


# ------------------------------------------------------------------------------------------------
# validation helpers


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(value)}")
    return int(value)


def _check_float(value: Any, name: str, low: float, high: float, *, open_low: bool = True) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    ok = (v > low if open_low else v >= low) and v < high
    if not (math.isfinite(v) and ok):
        raise ValueError(f"{name} must be in {'(' if open_low else '['}{low}, {high}), got {v}")
    return v


def _check_xy(
    X: Any, y: Any, sample_weight: Any, allow_multi: bool = False
) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    x = check_finite_matrix(X, "X", np.float64, min_rows=1)
    yv = np.asarray(y)
    if yv.ndim == 2 and yv.shape[1] == 1:
        yv = yv[:, 0]
    if yv.ndim == 2 and yv.shape[1] > 1 and allow_multi:
        ym = check_finite_matrix(yv, "y", np.float64, min_rows=1)
        if ym.shape[0] != x.shape[0]:
            raise ValueError(f"X and y have different lengths: X has {x.shape[0]} rows, y has {ym.shape[0]}")
        if np.all(np.ptp(ym, axis=0) == 0.0):
            raise ValueError("every column of y is constant (zero variance); there is nothing to predict")
        return x, ym, _check_weights(sample_weight, x.shape[0])
    yarr = check_finite_vector(yv, "y")
    if yarr.shape[0] != x.shape[0]:
        raise ValueError(f"X and y have different lengths: X has {x.shape[0]} rows, y has {yarr.shape[0]} values")
    if np.ptp(yarr) == 0.0:
        raise ValueError("y is constant (zero variance); there is nothing to predict")
    # copies are never modified; C-contiguous float64 copies made above only when needed
    return x, yarr, _check_weights(sample_weight, x.shape[0])


def _check_weights(sample_weight: Any, n: int) -> FloatArray | None:
    if sample_weight is None:
        return None
    w = check_finite_vector(sample_weight, "sample_weight", length=n)
    if (w < 0).any():
        raise ValueError("sample_weight must be non-negative")
    if not w.sum() > 0:
        raise ValueError("sample_weight must have a positive sum")
    return w


def _warn_constant_columns(x: FloatArray) -> None:
    const = np.flatnonzero(np.ptp(x, axis=0) == 0.0)
    if const.size:
        shown = ", ".join(str(int(i)) for i in const[:10]) + (" …" if const.size > 10 else "")
        warnings.warn(
            f"X has {const.size} constant column(s) ({shown}); they carry no information and are dropped "
            "from every fit (standardised value 0)",
            ConstantColumnWarning,
            stacklevel=3,
        )
        if const.size == x.shape[1]:
            raise ValueError("every column of X is constant; there is nothing to learn from")


def _is_transformer(obj: Any) -> bool:
    return hasattr(obj, "fit") and hasattr(obj, "transform")


class _Learner:
    """Normalised ``learner`` argument."""

    def __init__(self, learner: LearnerArg, n_components: int, p: int) -> None:
        self.basis: FloatArray | None = None
        self.func: Callable[[FloatArray, FloatArray], Any] | None = None
        self.transformer: Any = None
        self.k = n_components
        if isinstance(learner, str):
            if learner not in LEARNERS:
                raise ValueError(f"learner must be one of {LEARNERS}, a basis array, a callable or a transformer, got {learner!r}")
            self.kind = learner
            self.core = learner
        elif _is_transformer(learner):
            self.kind = "transformer"
            self.core = "basis"
            self.transformer = learner
        elif callable(learner):
            self.kind = "callable"
            self.core = "bases"
            self.func = learner
        else:
            b = np.asarray(learner)
            if b.dtype.kind not in "biuf":
                raise TypeError(f"learner must be a name, a basis array, a callable or a transformer, got {type(learner).__name__}")
            if b.ndim == 1:
                b = b[:, None]
            if b.ndim != 2 or b.shape[0] != p:
                raise ValueError(f"a basis learner must have shape (n_features={p}, k), got {b.shape}")
            if n_components not in (1, b.shape[1]):
                raise ValueError(f"n_components={n_components} does not match the basis' {b.shape[1]} columns")
            self.basis = check_finite_matrix(b, "learner", np.float64)
            self.k = b.shape[1]
            self.kind = "basis"
            self.core = "basis"
        if self.k > p:
            raise ValueError(f"n_components={self.k} exceeds the number of features ({p})")

    def call_basis(self, x_tr: FloatArray, y_tr: FloatArray) -> FloatArray:
        assert self.func is not None
        b = np.asarray(self.func(x_tr.copy(), y_tr.copy()), dtype=np.float64)
        if b.ndim == 1:
            b = b[:, None]
        if b.shape != (x_tr.shape[1], self.k):
            raise ValueError(
                f"the learner callable must return a basis of shape ({x_tr.shape[1]}, {self.k}), got {b.shape}"
            )
        if not np.isfinite(b).all():
            raise ValueError("the learner callable returned NaN or infinity")
        return np.ascontiguousarray(b)


def _check_splits(splits: Any, n: int) -> list[IntArray]:
    if isinstance(splits, np.ndarray) and splits.ndim == 2:
        items = list(splits)
    elif isinstance(splits, (list, tuple)):
        items = list(splits)
    else:
        raise TypeError("splits must be a sequence of train-index arrays")
    if len(items) < 2:
        raise ValueError(f"splits must hold at least 2 train-index arrays, got {len(items)}")
    out = []
    for j, t in enumerate(items):
        a = np.asarray(t)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"splits[{j}] must be a non-empty 1-D array of train indices")
        if a.dtype.kind not in "iu":
            raise TypeError(f"splits[{j}] must hold integer indices, got dtype {a.dtype}")
        if (a < 0).any() or (a >= n).any():
            raise ValueError(f"splits[{j}] has indices outside [0, {n})")
        if np.unique(a).size != a.size:
            raise ValueError(f"splits[{j}] repeats an index")
        if n - a.size < 3:
            raise ValueError(f"splits[{j}] leaves {n - a.size} test rows; at least 3 are needed")
        out.append(np.ascontiguousarray(a, dtype=np.int64))
    return out


def _progress_bar(progress: bool | None, total: int, desc: str, heavy: bool) -> Any:
    show = progress if progress is not None else (heavy and sys.stderr.isatty())
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


def check_gate(X: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> GateDecision:
    """Query the pre-run gate without running a test.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Float data (NaN/inf rejected).
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights.

    Returns
    -------
    GateDecision
        ``reroute`` is True when ``n_eff < 25``, the stable rank of the standardised X is below 3, or
        X has at most 4 columns.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import check_gate
    >>> check_gate(np.random.default_rng(0).normal(size=(100, 20))).reroute
    False
    """
    x = check_finite_matrix(X, "X", np.float64, min_rows=2)
    w = None if sample_weight is None else check_finite_vector(sample_weight, "sample_weight", length=x.shape[0])
    g = _core.inference_gate(x, w)
    return GateDecision(
        n_eff=float(g["n_eff"]),
        stable_rank=float(g["stable_rank"]),
        n_columns=int(g["n_columns"]),
        reroute=bool(g["reroute"]),
        reasons=tuple(g["reasons"]),
    )


# ------------------------------------------------------------------------------------------------
# per-split statistic for every learner kind


def _split_rs(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray | None,
    lr: _Learner,
    trains: list[IntArray],
    rotate: str,
    ridge_alpha: float,
    spca_n_features: int,
    n_jobs: int | None,
) -> FloatArray:
    if lr.kind in LEARNERS or lr.kind == "basis":
        return _core.inference_split_correlations(
            x, y, w, lr.core, lr.k, trains, basis=lr.basis, rotate=rotate, ridge_alpha=ridge_alpha,
            spca_n_features=spca_n_features, n_jobs=n_jobs,
        )
    if lr.kind == "callable":
        bases = [lr.call_basis(x[t], y[t]) for t in trains]
        return _core.inference_split_correlations(
            x, y, w, "bases", lr.k, trains, bases=bases, rotate=rotate, n_jobs=n_jobs
        )
    from sklearn.base import clone

    rs = np.empty(len(trains))
    for j, t in enumerate(trains):
        est = clone(lr.transformer).fit(x[t], y[t])
        s = np.ascontiguousarray(np.asarray(est.transform(x), dtype=np.float64))
        if s.ndim != 2 or s.shape[0] != x.shape[0]:
            raise ValueError(f"the transformer must return scores of shape (n_samples, k), got {s.shape}")
        if not np.isfinite(s).all():
            raise ValueError("the transformer returned NaN or infinity")
        eye = np.eye(s.shape[1])
        rs[j] = _core.inference_split_correlations(s, y, w, "basis", s.shape[1], [t], basis=eye, n_jobs=n_jobs)[0]
    return rs


def _nb_permutation_null(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray | None,
    lr: _Learner,
    trains: list[IntArray],
    seed: int,
    n_perm: int,
    rotate: str,
    ridge_alpha: float,
    spca_n_features: int,
    n_jobs: int | None,
    progress: bool | None,
) -> FloatArray:
    core_route = lr.kind in LEARNERS or lr.kind == "basis"
    bar = _progress_bar(progress, n_perm, "NB-permutation", heavy=n_perm * len(trains) * x.shape[1] > 5e7 or not core_route)
    # one core call amortises the per-split Gram blocks over all permutations; with a progress bar
    # the work goes in ten chunks (permutation b always draws from its own stream, so chunking does
    # not change the result)
    chunk = (n_perm if bar is None else max(1, -(-n_perm // 10))) if core_route else 1
    out = np.empty(n_perm)
    try:
        start = 0
        while start < n_perm:
            count = min(chunk, n_perm - start)
            if core_route:
                out[start : start + count] = _core.inference_nb_permutation(
                    x, y, w, lr.core, lr.k, trains, seed, start, count, basis=lr.basis, rotate=rotate,
                    ridge_alpha=ridge_alpha, spca_n_features=spca_n_features, n_jobs=n_jobs,
                )
            else:
                perm = _core.inference_permutation(x.shape[0], seed, start)
                rs = _split_rs(x, np.ascontiguousarray(y[perm]), w, lr, trains, rotate, ridge_alpha, spca_n_features, n_jobs)
                out[start] = _core.inference_mean_z(np.ascontiguousarray(rs, dtype=np.float64))
            start += count
            if bar is not None:
                bar.update(count)
    finally:
        if bar is not None:
            bar.close()
    return out


def _pls2_permutation_null(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray | None,
    k: int,
    trains: list[IntArray],
    seed: int,
    n_perm: int,
    n_jobs: int | None,
    progress: bool | None,
) -> FloatArray:
    """Mean Fisher z of PLS2 refits with the rows of Y permuted (permutation b as the core draws it)."""
    bar = _progress_bar(progress, n_perm, "NB-permutation (PLS2)", heavy=n_perm * len(trains) * x.shape[1] > 5e6)
    out = np.empty(n_perm)
    try:
        for b in range(n_perm):
            perm = _core.inference_permutation(x.shape[0], seed, b)
            rs = _core.inference_pls2_split_correlations(x, np.ascontiguousarray(y[perm]), w, k, trains, n_jobs)
            out[b] = _core.inference_mean_z(np.ascontiguousarray(rs, dtype=np.float64))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


# ------------------------------------------------------------------------------------------------


def subspace_test(
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    n_components: int = 1,
    learner: LearnerArg = "pls",
    method: Method = "auto",
    n_splits: int = 50,
    n_perm: int = 1000,
    splits: Sequence[npt.ArrayLike] | None = None,
    sample_weight: npt.ArrayLike | None = None,
    rotate: Literal["varimax"] | None = None,
    force: bool = False,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    progress: bool | None = None,
    *,
    confidence_level: float = 0.95,
    n_folds: int = 5,
    ridge_alpha: float = 1.0,
    spca_n_features: int | None = None,
) -> SubspaceTestResult:
    """Test whether a supervised subspace of X predicts y, by held-out OLS refits.

    On each of ``n_splits`` balanced random splits the learner fits ``n_components`` directions on
    the train part (X standardised with train moments only), y is refitted on the train scores by
    OLS, the test part is predicted and scored by the Pearson r. The NB-asymptotic test (default)
    averages ``z_j = atanh(r_j)`` and uses the Nadeau–Bengio corrected
    ``t = mean(z) / (sd(z) * sqrt(1/J + n_test/n_train))`` with ``J - 1`` degrees of freedom
    (one-sided). The NB-permutation test keeps the same splits and permutes y ``n_perm`` times:
    ``p = (1 + #{mean z* >= mean z}) / (n_perm + 1)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Real-valued predictors (float64 internally; never modified). NaN/inf are rejected.
    y : array-like of shape (n_samples,) or (n_samples, m)
        Real-valued response (not constant). With m > 1 columns the learner is PLS2 (``learner="pls"``
        only): the directions are fitted to all columns, every column is refitted on the k train
        scores, and a split's r is the Pearson r between predicted and observed test responses in
        train-standardised units, pooled over the columns. Constant columns drop out.
    n_components : int, default=1
        Number of directions k (``1 <= k``; at most ``n_features``; ``n_samples >= k + 5``).
    learner : {"pls", "spca", "ridge"}, array of shape (n_features, k), callable or transformer, default="pls"
        ``"pls"``: PLS1. ``"spca"``: supervised PCA (the ``spca_n_features`` features most correlated
        with y on each train part, then their top-k principal directions). ``"ridge"``: the ridge
        probe direction (k=1). An array: a fixed basis (e.g. concept directions) applied to X centred
        by the train mean. A callable ``f(X_train, y_train) -> basis (n_features, k)`` called on every
        train part (raw units, centred by the train mean). A scikit-learn transformer (``fit``/``transform``)
        cloned and fitted on every train part; its k output scores are refitted by OLS.
    method : {"auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife"}, default="auto"
        ``"auto"``/``"nb"``: NB-asymptotic, rerouted to NB-permutation (with a :class:`GateWarning`)
        when the gate fires unless ``force``. ``"cv-permutation-q2"``: pooled K-fold Q² with permuted y.
        ``"permutation-score"``: mean fold R² with permuted y (scikit-learn's ``permutation_test_score``).
        ``"jackknife"``: per-coefficient jackknife t over ``n_folds`` segments (R ``pls::jack.test``;
        the reported p is Bonferroni over coefficients, an indicator only).
    n_splits : int, default=50
        Number of random splits J (>= 2). Ignored when ``splits`` is given.
    n_perm : int, default=1000
        Number of permutations B for the permutation tests.
    splits : sequence of int arrays, optional
        Train indices of every split (test = the other rows); reproduces any result exactly.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative weights: weighted standardisation, sqrt(w) row scaling, weighted test r,
        Kish n_eff in the gate. Each part's weights are renormalised to mean 1.
    rotate : {None, "varimax"}, default=None
        Rotate the learned basis (Kaiser-normalised varimax) before the refit; r and p are unchanged.
    force : bool, default=False
        Run the NB-asymptotic test even when the gate would reroute.
    random_state : None, int or numpy Generator
        Seed of the splits and permutations (recorded in ``seed_used``).
    n_jobs : int, optional
        Threads for the core (None: all cores, -1: all cores). Results do not depend on it.
    progress : bool, optional
        Show a progress bar for permutation runs (None: only for long runs on a terminal).
    confidence_level : float, default=0.95
        Level of the Wald interval on the correlation scale.
    n_folds : int, default=5
        Folds of the CV baselines and segments of the jackknife (10 is R's usual choice).
    ridge_alpha : float, default=1.0
        Ridge penalty of the ridge probe (standardised units).
    spca_n_features : int, optional
        Features kept by supervised PCA (default ``min(p, max(5k, ceil(p/10)))``).

    Returns
    -------
    SubspaceTestResult
        Frozen dataclass: ``p_value``, ``statistic`` (tanh of mean z), ``t``, ``df``, per-split ``r``,
        ``rho_hat``, ``ci``, the gate decision, ``seed_used`` and the splits used.

    Raises
    ------
    ValueError
        NaN/inf, mismatched lengths, constant y, all-constant X, too few rows for k, k above the
        rank of the data, invalid splits or out-of-range parameters.
    TypeError
        Non-numeric arrays or wrongly typed parameters.

    Warns
    -----
    GateWarning
        When the gate reroutes the NB-asymptotic test to the permutation test.
    ConstantColumnWarning
        When X has constant columns (they drop out of every fit).

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import subspace_test
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 30))
    >>> y = X[:, 0] + rng.normal(size=200)
    >>> res = subspace_test(X, y, random_state=0)
    >>> res.p_value < 1e-6
    True
    """
    x, yv, w = _check_xy(X, y, sample_weight, allow_multi=True)
    n, p = x.shape
    k = _check_int(n_components, "n_components", 1)
    multi = yv.ndim == 2
    if multi:
        if not (isinstance(learner, str) and learner == "pls"):
            raise ValueError("a multi-column y (PLS2) needs learner='pls'")
        if method not in ("auto", "nb", "nb-permutation"):
            raise ValueError(f"a multi-column y (PLS2) supports method 'auto', 'nb' or 'nb-permutation', got {method!r}")
        if rotate is not None:
            raise ValueError("rotate is not supported with a multi-column y (PLS2); the test is rotation invariant anyway")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if rotate not in (None, "varimax"):
        raise ValueError(f"rotate must be None or 'varimax', got {rotate!r}")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    level = _check_float(confidence_level, "confidence_level", 0.0, 1.0)
    alpha_ridge = _check_float(ridge_alpha, "ridge_alpha", 0.0, math.inf)
    nfeat = 0 if spca_n_features is None else _check_int(spca_n_features, "spca_n_features", 1)
    jobs = check_n_jobs(n_jobs)
    seed = seed_from_random_state(random_state)
    lr = _Learner(learner, k, p)
    k = lr.k
    if n < k + 5:
        raise ValueError(f"X has {n} rows, too few for n_components={k}: need at least n_components + 5 = {k + 5}")
    _warn_constant_columns(x)
    rot = "none" if rotate is None else rotate

    g = check_gate(x, w)
    requested = method
    if method in ("auto", "nb"):
        if g.reroute and not force:
            warnings.warn(
                "NB-asymptotic approximation not trusted for this design ("
                + "; ".join(g.reasons)
                + "): running the NB-permutation test instead (force=True overrides)",
                GateWarning,
                stacklevel=2,
            )
            method = "nb-permutation"
            g = GateDecision(**{**g.__dict__, "rerouted": True})
        else:
            method = "nb"
            g = GateDecision(**{**g.__dict__, "forced": bool(g.reroute and force)})

    if method in ("nb", "nb-permutation"):
        if splits is None:
            nsp = _check_int(n_splits, "n_splits", 2)
            trains = list(_core.inference_draw_splits(n, k, nsp, seed))
        else:
            trains = _check_splits(splits, n)
            if any(t.size < k + 2 for t in trains):
                raise ValueError(f"every split needs at least n_components + 2 = {k + 2} train rows")
        n_tr = np.array([t.size for t in trains], dtype=float)
        n_te = n - n_tr
        ratio = float(np.mean(n_te / n_tr))
        if multi:
            rs = np.asarray(_core.inference_pls2_split_correlations(x, yv, w, k, trains, jobs), dtype=np.float64)
        else:
            rs = np.asarray(_split_rs(x, yv, w, lr, trains, rot, alpha_ridge, nfeat, jobs), dtype=np.float64)
        # rho_hat's Fisher null variance 1/(n_test - 3) holds for a single unweighted response only
        nb = _core.inference_nb_test(rs, ratio, None if (w is not None or multi) else float(np.mean(n_te)), level)
        null = None
        p_value = float(nb["p_value"])
        t_stat, df = float(nb["t"]), float(nb["df"])
        B = 0
        if method == "nb-permutation":
            B = _check_int(n_perm, "n_perm", 1)
            if multi:
                null = _pls2_permutation_null(x, yv, w, k, trains, seed, B, jobs, progress)
            else:
                null = _nb_permutation_null(x, yv, w, lr, trains, seed, B, rot, alpha_ridge, nfeat, jobs, progress)
            zobs = float(nb["z_mean"])
            exceed = np.count_nonzero(~np.isfinite(null) | (null >= zobs))
            p_value = (1.0 + exceed) / (B + 1.0)
        return SubspaceTestResult(
            method=method,
            requested_method=requested,
            p_value=p_value,
            statistic=float(nb["statistic"]),
            t=t_stat,
            df=df,
            r=rs,
            z_mean=float(nb["z_mean"]),
            z_sd=float(nb["z_sd"]),
            se=float(nb["se"]),
            rho_hat=float(nb["rho_hat"]),
            r2=float(nb["statistic"]) ** 2,
            ci=(float(nb["ci_low"]), float(nb["ci_high"])),
            confidence_level=level,
            n_components=k,
            learner="pls2" if multi else lr.kind,
            n_splits=len(trains),
            n_perm=B,
            n_train=float(n_tr.mean()),
            n_test=float(n_te.mean()),
            null_distribution=null,
            gate=g,
            seed_used=seed,
            train_indices=tuple(trains),
            rotate=rotate,
        )

    # baselines
    if lr.kind not in LEARNERS and lr.kind != "basis":
        raise ValueError(f"method={method!r} supports learner names and fixed bases, not a {lr.kind}")
    folds = _check_int(n_folds, "n_folds", 2)
    if folds > n:
        raise ValueError(f"n_folds={folds} exceeds the number of samples ({n})")
    nan = float("nan")
    empty = np.empty(0)
    common: dict[str, Any] = dict(
        requested_method=requested, r=empty, z_mean=nan, z_sd=nan, se=nan, rho_hat=nan, r2=nan,
        ci=(nan, nan), confidence_level=level, n_components=k, learner=lr.kind, n_splits=0,
        n_train=nan, n_test=nan, gate=g, seed_used=seed, train_indices=(), rotate=rotate,
    )
    if method == "jackknife":
        if lr.kind != "pls":
            raise ValueError("method='jackknife' is defined for learner='pls' only")
        jk = _core.inference_jackknife(x, yv, w, k, folds, seed, jobs)
        pj = np.asarray(jk["p_values"])
        tj = np.asarray(jk["t"])
        return SubspaceTestResult(
            method=method, p_value=float(min(1.0, pj.min() * p)), statistic=float(np.abs(tj).max()), t=nan,
            df=float(jk["df"]), n_perm=0, null_distribution=None,
            details={"coef": np.asarray(jk["coef"]), "se": np.asarray(jk["se"]), "t": tj, "p_values": pj},
            **common,
        )
    B = _check_int(n_perm, "n_perm", 1)
    pooled = method == "cv-permutation-q2"
    bar = _progress_bar(progress, B, method, heavy=B * folds * n * p > 1e8)
    chunk = B if bar is None else max(1, -(-B // 10))
    null_parts = []
    observed = nan
    try:
        start = 0
        while start < B:
            count = min(chunk, B - start)
            observed, part = _core.inference_cv_permutation(
                x, yv, w, lr.core, k, folds, seed, start, count, pooled, basis=lr.basis,
                ridge_alpha=alpha_ridge, spca_n_features=nfeat, n_jobs=jobs,
            )
            null_parts.append(np.asarray(part))
            start += count
            if bar is not None:
                bar.update(count)
    finally:
        if bar is not None:
            bar.close()
    null_arr = np.concatenate(null_parts)
    exceed = np.count_nonzero(~np.isfinite(null_arr) | (null_arr >= observed))
    return SubspaceTestResult(
        method=method, p_value=(1.0 + exceed) / (B + 1.0), statistic=float(observed), t=nan, df=nan,
        n_perm=B, null_distribution=null_arr, **common,
    )


def component_tests(
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    max_components: int | None = None,
    alpha: float = 0.05,
    method: Literal["auto", "nb", "nb-permutation"] = "auto",
    n_splits: int = 50,
    n_perm: int = 1000,
    splits: Sequence[npt.ArrayLike] | None = None,
    sample_weight: npt.ArrayLike | None = None,
    force: bool = False,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    progress: bool | None = None,
) -> ComponentTestsResult:
    """Per-component fixed-sequence test over the PLS extraction order.

    Step h fits h−1 PLS components on all rows (standardised), deflates X and y, and tests the
    residual with a one-component :func:`subspace_test` on the same splits. The sequence stops at the
    first ``p >= alpha``; ``k_star`` components are claimed. The gate is decided once on the
    undeflated X and frozen for the whole sequence. Controls the family-wise error at ``alpha``.

    Parameters
    ----------
    X, y, sample_weight, n_splits, n_perm, splits, force, random_state, n_jobs, progress
        As in :func:`subspace_test`.
    max_components : int, optional
        Longest sequence (default ``min(10, n_features, n_samples - 6)``).
    alpha : float, default=0.05
        Level of every step.
    method : {"auto", "nb", "nb-permutation"}, default="auto"

    Returns
    -------
    ComponentTestsResult
        ``k_star``, the p-value of every tested step and the step results.

    Raises
    ------
    ValueError, TypeError
        As :func:`subspace_test`; also for ``alpha`` outside (0, 1) or ``max_components < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import component_tests
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(300, 20))
    >>> y = X[:, 0] + X[:, 1] + rng.normal(size=300)
    >>> component_tests(X, y, random_state=0).k_star >= 1
    True
    """
    x, yv, w = _check_xy(X, y, sample_weight)
    n, p = x.shape
    a = _check_float(alpha, "alpha", 0.0, 1.0)
    if method not in ("auto", "nb", "nb-permutation"):
        raise ValueError(f"method must be 'auto', 'nb' or 'nb-permutation', got {method!r}")
    hmax = min(10, p, n - 6) if max_components is None else _check_int(max_components, "max_components", 1)
    if hmax < 1 or hmax > min(p, n - 6):
        raise ValueError(f"max_components must be in [1, min(n_features, n_samples - 6)] = [1, {min(p, n - 6)}]")
    seed = seed_from_random_state(random_state)
    jobs = check_n_jobs(n_jobs)
    _warn_constant_columns(x)
    g = check_gate(x, w)
    run: Method = "nb" if method == "nb" or method == "auto" else "nb-permutation"
    if run == "nb" and g.reroute and not force:
        warnings.warn(
            "NB-asymptotic approximation not trusted for this design (" + "; ".join(g.reasons)
            + "): the whole sequence uses the NB-permutation test (force=True overrides)",
            GateWarning,
            stacklevel=2,
        )
        run = "nb-permutation"
        g = GateDecision(**{**g.__dict__, "rerouted": True})
    else:
        g = GateDecision(**{**g.__dict__, "forced": bool(g.reroute and force and run == "nb")})
    trains = list(_core.inference_draw_splits(n, 1, _check_int(n_splits, "n_splits", 2), seed)) if splits is None else _check_splits(splits, n)
    steps: list[SubspaceTestResult] = []
    pvals: list[float] = []
    k_star = 0
    for h in range(1, hmax + 1):
        if h == 1:
            xr, yr = x, yv
        else:
            try:
                xr, yr = _core.inference_deflate(x, yv, w, h - 1)
            except ValueError:
                break  # the data are exhausted after h-1 components
            if np.ptp(yr) <= 1e-12 * np.abs(yr).max(initial=0.0):
                break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantColumnWarning)
            try:
                res = subspace_test(
                    xr, yr, 1, "pls", run, n_perm=n_perm, splits=trains, sample_weight=w, force=True,
                    random_state=seed, n_jobs=jobs, progress=progress,
                )
            except ValueError:
                break
        steps.append(res)
        pvals.append(res.p_value)
        if res.p_value >= a:
            break
        k_star = h
    return ComponentTestsResult(
        k_star=k_star, p_values=np.asarray(pvals), alpha=a, method=run, steps=tuple(steps), gate=g, seed_used=seed
    )


def varimax(
    loadings: npt.ArrayLike, normalize: bool = True, max_iter: int = 500, tol: float = 1e-10
) -> VarimaxResult:
    """Varimax rotation of a loading or basis matrix (Kaiser-normalised by default).

    Maximises ``V(L R) = sum_j [mean_i l_ij**4 - (mean_i l_ij**2)**2]`` over orthogonal R by the
    SVD iteration ``B = L'(Λ³ − Λ diag(1'Λ²)/p)``, ``R = U V'``, stopping when the sum of singular
    values grows by less than a factor ``1 + tol``. With ``normalize`` the rows are scaled to unit
    length before rotating and restored after (Kaiser).

    Parameters
    ----------
    loadings : array-like of shape (p, k)
        Real matrix (NaN/inf rejected).
    normalize : bool, default=True
        Kaiser row normalisation.
    max_iter : int, default=500
    tol : float, default=1e-10

    Returns
    -------
    VarimaxResult
        ``loadings`` (rotated, shape (p, k)), ``rotation`` (k, k), ``criterion``, ``n_iter``.

    Raises
    ------
    ValueError, TypeError
        Non-finite or non-2-D input, ``max_iter < 1``, ``tol <= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import varimax
    >>> L = np.array([[1.0, 1.0], [1.0, 0.9], [1.0, -1.0], [0.9, -1.0]])
    >>> out = varimax(L)
    >>> np.allclose(out.rotation @ out.rotation.T, np.eye(2))
    True
    """
    lm = check_finite_matrix(loadings, "loadings", np.float64)
    if lm.shape[1] > lm.shape[0]:
        raise ValueError(f"loadings has more columns ({lm.shape[1]}) than rows ({lm.shape[0]}); the rotation is not identified")
    if not isinstance(normalize, (bool, np.bool_)):
        raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
    it = _check_int(max_iter, "max_iter", 1)
    tl = _check_float(tol, "tol", 0.0, math.inf)
    rotated, rotation, crit, n_iter = _core.inference_varimax(lm, bool(normalize), it, tl)
    return VarimaxResult(loadings=rotated, rotation=rotation, criterion=float(crit), n_iter=int(n_iter))
