"""subspace_test, component_tests and varimax: validation and orchestration over ``thrifty._core``."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_allocation,
    check_finite_matrix,
    check_float,
    check_inference_n_jobs,
    check_int,
    check_sample_weight,
    check_xy,
    from_pandas,
    power_of_two_scale,
    seed_from_random_state,
)
from thrifty._warn import warn
from thrifty.inference import _dask_array, _distributed, _spls
from thrifty.inference._problem import (
    LEARNERS,
    ConstantColumnWarning,
    GateWarning,
    Learner,
    LearnerArg,
    Problem,
    Route,
    UndefinedSplitWarning,
    check_splits,
    gate_decision,
    local_split_statistics,
    null_mean_z_refit,
    power_of_two_scaled,
    route_of,
    split_test_result,
)
from thrifty.inference._results import (
    BaselineResult,
    ComponentTestsResult,
    FloatArray,
    GateDecision,
    IntArray,
    SubspaceTestResult,
    VarimaxResult,
)

# the shared checks (thrifty._validation) under this module's names
_from_pandas, _check_xy, _check_weights = from_pandas, check_xy, check_sample_weight

Method = Literal["auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife"]
Backend = Literal["local", "joblib", "dask"]

METHODS = ("auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife")

__all__ = ["ConstantColumnWarning", "GateWarning", "UndefinedSplitWarning"]  # defined in _problem


# ------------------------------------------------------------------------------------------------
# validation helpers


def _warn_constant_columns(x: FloatArray) -> None:
    const = np.flatnonzero(np.ptp(x, axis=0) == 0.0)
    if const.size:
        shown = ", ".join(str(int(i)) for i in const[:10]) + (" …" if const.size > 10 else "")
        warn(
            f"X has {const.size} constant column(s) ({shown}); they carry no information and are dropped "
            "from every fit (standardised value 0)",
            ConstantColumnWarning,
        )
        if const.size == x.shape[1]:
            raise ValueError("every column of X is constant; there is nothing to learn from")


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
    x = check_finite_matrix(_from_pandas(X), "X", np.float64, min_rows=2)
    sample_weight = _from_pandas(sample_weight)
    # relative weights, rescaled exactly (1e308 or 1e-300 everywhere is the unit-weight gate)
    return gate_decision(power_of_two_scaled(x), _check_weights(sample_weight, x.shape[0]))


def _nb_permutation_null(pb: Problem, trains: list[IntArray], n_perm: int) -> FloatArray:
    """Mean Fisher z over the fixed splits for permutations 0..n_perm of y (permutation b as the core draws it)."""
    lr = pb.lr
    n = pb.x.shape[0]
    core_route = (lr.kind in LEARNERS or lr.kind == "basis") and not pb.multi
    if pb.backend is not None:
        return _distributed.nb_permutation_null(pb, trains, n_perm, _perm_chunk(n_perm, n, False), core_route)
    heavy = n_perm * len(trains) * pb.x.shape[1] > 5e7 or not core_route
    bar = _progress_bar(pb.progress, n_perm, "NB-permutation", heavy=heavy)
    # one core call amortises the per-split Gram blocks over a chunk of permutations
    chunk = _perm_chunk(n_perm, n, bar is not None) if core_route else 1
    out = np.empty(n_perm)
    try:
        start = 0
        while start < n_perm:
            count = min(chunk, n_perm - start)
            if core_route:
                out[start : start + count] = _core.inference_nb_permutation(
                    pb.xs, pb.ys, pb.w, lr.core, lr.k, trains, pb.seed, start, count, basis=lr.basis, rotate=pb.rot,
                    ridge_alpha=pb.ridge_alpha, spca_n_features=pb.spca_n_features, spls_keep=pb.spls_keep, n_jobs=pb.jobs,
                )
            else:
                out[start] = null_mean_z_refit(pb, trains, start)
            start += count
            if bar is not None:
                bar.update(count)
    finally:
        if bar is not None:
            bar.close()
    return out


def subspace_test(
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    n_components: int | None = None,
    *,
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
    confidence_level: float = 0.95,
    n_folds: int = 5,
    ridge_alpha: float = 1.0,
    spca_n_features: int | None = None,
    backend: Backend | None = None,
    spls_keep: _spls.SplsKeep | None = None,
) -> SubspaceTestResult | BaselineResult:
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
        Real-valued predictors (float64 internally; never modified). NaN/inf are rejected. A tall
        ``dask.array`` (one chunk across the features) runs the NB-asymptotic test of one-component
        PLS1 by block reductions (X is read twice, never gathered): ``learner="pls"``,
        ``n_components=1``, ``method`` "auto"/"nb", no ``sample_weight``, at most 64 splits; other
        options raise a ``TypeError``/``ValueError`` that says so.
    y : array-like of shape (n_samples,) or (n_samples, m)
        Real-valued response (not constant). With m > 1 columns the learner is PLS2 (``learner="pls"``
        only): the directions are fitted to all columns, every column is refitted on the k train
        scores, and a split's r is the Pearson r between predicted and observed test responses in
        train-standardised units, pooled over the columns. Constant columns drop out.
    n_components : int, optional
        Number of directions k (``1 <= k``; at most ``n_features``; ``n_samples >= k + 5``). Default:
        1 for the named learners, the basis' columns, a transformer's ``n_components`` or the number of
        scores it returns, a callable's basis columns. A transformer's or callable's output is checked
        against it. The arguments after it are keyword-only.
    learner : {"pls", "spca", "ridge", "spls"}, array of shape (n_features, k), callable or transformer, default="pls"
        ``"pls"``: PLS1. ``"spca"``: supervised PCA (the ``spca_n_features`` features most correlated
        with y on each train part, then their top-k principal directions). ``"ridge"``: the ridge
        probe direction (k=1). ``"spls"``: sparse PLS1, every direction loading on ``spls_keep``
        variables (the NB-permutation test under ``"auto"``). An array: a fixed basis (e.g. concept directions) applied to X centred
        by the train mean. A callable ``f(X_train, y_train) -> basis (n_features, k)`` called on every
        train part (raw units, centred by the train mean). A scikit-learn transformer (``fit``/``transform``)
        cloned and fitted on every train part; its k output scores are refitted by OLS.
    method : {"auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife"}, default="auto"
        ``"auto"``: the NB-asymptotic test where it is calibrated (PLS1 with one component and
        ``n_eff >= 60``, design gate passed), the NB-permutation test otherwise, with the reason in
        ``result.gate.reasons`` (a :class:`GateWarning` when a design rule fires). ``"nb"``: the
        NB-asymptotic test, rerouted the same way with a warning unless ``force``. ``"cv-permutation-q2"``: pooled K-fold Q² with permuted y.
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
    spls_keep : int or "cv", optional
        ``learner="spls"`` (sparse PLS1): every direction loads on exactly ``spls_keep`` variables
        (``n_features`` is PLS1). ``"cv"`` (the default) chooses it on every train part by 5-fold CV
        (grid 1, 2, 4, ..., n_features; one-SE rule). The weights fitted on all rows are ``result.basis``.
    backend : {None, "local", "joblib", "dask"}, default=None
        Where the split and permutation work runs. ``None``: in this process on the core's threads,
        unless a ``joblib.parallel_config``/``parallel_backend`` context is active (then on its
        backend). ``"dask"``: on the default ``dask.distributed`` client (Dask's joblib backend; X is
        scattered once to every worker, tasks are blocks of permutations × groups of splits, one core
        thread each). ``"joblib"``: the active joblib backend. The p-values are those of the local run
        for the same seed, on any number of workers. Ignored for a dask-array X (its own scheduler runs it).

    Returns
    -------
    SubspaceTestResult or BaselineResult
        For ``"nb"``/``"nb-permutation"``: ``pvalue`` (alias ``p_value``), ``statistic`` (tanh of mean
        z), ``t``, ``df``, per-split ``r``, ``rho_hat``, ``ci`` / ``confidence_interval()``, the gate
        decision (with the reason ``auto`` chose the test), ``seed_`` and the splits used; it unpacks as
        ``statistic, pvalue``. The baselines return a :class:`BaselineResult`.

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
    UndefinedSplitWarning
        When the held-out r is undefined on some splits (constant test response or prediction): they
        are left out and counted in ``n_undefined``; fewer than 2 defined splits is a ``ValueError``.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import subspace_test
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 30))
    >>> y = X[:, 0] + rng.normal(size=200)
    >>> res = subspace_test(X, y, random_state=0)
    >>> stat, p = res
    >>> p < 1e-6, res.method
    (True, 'nb')
    """
    if _dask_array.is_dask_collection(X) or _dask_array.is_dask_collection(y):
        if spls_keep is not None:  # the dask-array route is PLS1 only: never drop an argument silently
            raise ValueError("spls_keep is only used with learner='spls', which a dask-array X does not support")
        return _dask_array.subspace_test(
            X, y, n_components, learner=learner, method=method, n_splits=n_splits, splits=splits,
            sample_weight=sample_weight, rotate=rotate, force=force, random_state=random_state,
            confidence_level=confidence_level,
        )
    # validate, resolve the route through the gate (step 1), run the split test or a baseline (2, 3)
    pb = _prepare_problem(
        X, y, n_components, learner, sample_weight, rotate, confidence_level, ridge_alpha, spca_n_features,
        random_state, n_jobs, progress, backend, spls_keep=spls_keep,
    )
    route = _resolve_route(pb, method, force)
    result = _run(pb, route, n_splits, splits, n_perm, n_folds)
    if pb.lr.kind == "spls" and isinstance(result, SubspaceTestResult):  # the selected variables, on all rows
        result = dataclasses.replace(result, basis=_spls.fitted_basis(pb.xs, pb.ys, pb.w, pb.lr.k, pb.spls_keep))
    return result


def test_problem(
    x: FloatArray, y: FloatArray, k: int, learner: str, w: FloatArray | None, method: Any, n_splits: Any,
    n_perm: Any, force: Any, random_state: RandomState, n_jobs: Any, progress: Any,
) -> SubspaceTestResult | BaselineResult:
    """The steps of :func:`subspace_test` for validated arrays (used by ``PLSInference.fit``)."""
    pb = _prepare_problem(x, y, k, learner, w, None, 0.95, 1.0, None, random_state, n_jobs, progress, None)
    return _run(pb, _resolve_route(pb, method, force), n_splits, None, n_perm, 5)


test_problem.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


# ------------------------------------------------------------------------------------------------
# the named steps of subspace_test (shared with component_tests and PLSInference.fit)


def _prepare_problem(
    X: Any, y: Any, n_components: Any, learner: Any, sample_weight: Any, rotate: Any, confidence_level: Any,
    ridge_alpha: Any, spca_n_features: Any, random_state: RandomState, n_jobs: Any, progress: Any,
    backend: Any, spls_keep: Any = None,
) -> Problem:
    x, yv, w = _check_xy(X, y, sample_weight, allow_multi=True)
    n, p = x.shape
    k = None if n_components is None else check_int(n_components, "n_components", 1)
    multi = yv.ndim == 2
    if multi:
        if not (isinstance(learner, str) and learner == "pls"):
            raise ValueError("a multi-column y (PLS2) needs learner='pls'")
        if rotate is not None:
            raise ValueError("rotate is not supported with a multi-column y (PLS2); the test is rotation invariant anyway")
    if rotate not in (None, "varimax"):
        raise ValueError(f"rotate must be None or 'varimax', got {rotate!r}")
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be None or a bool, got {type(progress).__name__}")
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0)
    alpha_ridge = check_float(ridge_alpha, "ridge_alpha", 0.0, math.inf)
    nfeat = 0 if spca_n_features is None else check_int(spca_n_features, "spca_n_features", 1)
    keep = _spls.keep_argument(spls_keep, learner, p)
    jobs = check_inference_n_jobs(n_jobs)
    run_on = _distributed.resolve_backend(backend)
    seed = seed_from_random_state(random_state)
    lr = Learner(learner, k, p)
    if n < lr.k + 5:
        raise ValueError(
            f"X has {n} rows, too few for n_components={lr.k}: need at least n_components + 5 = {lr.k + 5}"
        )
    _warn_constant_columns(x)
    # standardising learners are invariant to per-column scaling, the others to a global one
    xs = power_of_two_scaled(x, lr.kind in LEARNERS)
    ys = power_of_two_scaled(yv, multi)
    show = None if progress is None else bool(progress)
    return Problem(x, yv, w, lr, xs, ys, multi, rotate, level, alpha_ridge, nfeat, seed, jobs, show, run_on, keep)


def _resolve_route(pb: Problem, method: Any, force: Any, sequence: bool = False) -> Route:
    """Step 1 of :func:`subspace_test` (and of :func:`component_tests` with ``sequence``): check
    ``method`` and ``force``, query the gate and resolve ``"auto"``/``"nb"``; warns
    (:class:`GateWarning`) when the route changes for a design reason or ``"nb"`` was asked for."""
    allowed = ("auto", "nb", "nb-permutation") if sequence else METHODS
    if method not in allowed:
        raise ValueError(f"method must be one of {allowed}, got {method!r}")
    if pb.multi and method not in ("auto", "nb", "nb-permutation"):
        raise ValueError(f"a multi-column y (PLS2) supports method 'auto', 'nb' or 'nb-permutation', got {method!r}")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    route, message = route_of(
        _core.inference_route(pb.xs, pb.w, method, bool(force), pb.lr.kind, pb.lr.k, pb.multi, sequence), method
    )
    if message is not None:
        warn(message, GateWarning)
    return route


def _run(
    pb: Problem, route: Route, n_splits: Any, splits: Any, n_perm: Any, n_folds: Any
) -> SubspaceTestResult | BaselineResult:
    """Steps 2 and 3 of :func:`subspace_test`: the split test on drawn or given splits, or a baseline."""
    # checked whichever method runs, as n_splits and n_perm are
    folds = check_int(n_folds, "n_folds", 2)
    if folds > pb.x.shape[0]:
        raise ValueError(f"n_folds={folds} exceeds the number of samples ({pb.x.shape[0]})")
    if route.run in ("nb", "nb-permutation"):
        trains = _draw_orcheck_splits(pb, n_splits, splits)
        B = _check_n_perm(n_perm, pb.x.shape[0]) if route.run == "nb-permutation" else 0
        return _run_split_test(pb, route, trains, B)
    return _run_baseline(pb, route, folds, n_perm)


def _draw_orcheck_splits(pb: Problem, n_splits: Any, splits: Any) -> list[IntArray]:
    n = pb.x.shape[0]
    if splits is not None:
        trains = check_splits(splits, n)
        if any(t.size < pb.lr.k + 2 for t in trains):
            raise ValueError(f"every split needs at least n_components + 2 = {pb.lr.k + 2} train rows")
        return trains
    nsp = check_int(n_splits, "n_splits", 2)
    check_allocation("n_splits", nsp, 8 * n)
    return list(_core.inference_draw_splits(n, pb.lr.k, nsp, pb.seed))


def _check_n_perm(n_perm: Any, n: int) -> int:
    B = check_int(n_perm, "n_perm", 1)
    check_allocation("n_perm", B, 16)
    return B


def _split_statistics(pb: Problem, trains: list[IntArray]) -> FloatArray:
    """Held-out r of every split (NaN where undefined)."""
    if pb.backend is not None:
        return _distributed.split_statistics(pb, trains)
    return local_split_statistics(pb, trains)


def _run_split_test(pb: Problem, route: Route, trains: list[IntArray], B: int) -> SubspaceTestResult:
    """Step 2: the NB-asymptotic (``B = 0``) or NB-permutation test on the given splits."""
    rs = _split_statistics(pb, trains)
    null = None if route.run != "nb-permutation" else lambda: _nb_permutation_null(pb, trains, B)
    return split_test_result(
        rs, np.array([t.size for t in trains], dtype=float), pb.x.shape[0], route, B, null,
        level=pb.level, rho_hat_defined=pb.w is None and not pb.multi, k=pb.lr.k,
        learner="pls2" if pb.multi else pb.lr.kind, seed=pb.seed, trains=tuple(trains), rotate=pb.rotate,
    )


def _run_baseline(pb: Problem, route: Route, folds: int, n_perm: Any) -> BaselineResult:
    """Step 3: one of the CV baselines or the jackknife (``folds`` checked by :func:`_run`)."""
    method = route.run
    x, yv, w, lr, k = pb.xs, pb.ys, pb.w, pb.lr, pb.lr.k
    n = x.shape[0]
    if lr.kind not in LEARNERS and lr.kind != "basis":
        raise ValueError(f"method={method!r} supports learner names and fixed bases, not a {lr.kind}")
    common: dict[str, Any] = {
        "requested_method": route.requested, "n_components": k, "learner": lr.kind, "n_folds": folds, "gate": route.gate,
        "seed_": pb.seed,
    }
    if method == "jackknife":
        if lr.kind != "pls":
            raise ValueError("method='jackknife' is defined for learner='pls' only")
        jk = _core.inference_jackknife(x, yv, w, k, folds, pb.seed, pb.jobs)
        pj = np.asarray(jk["p_values"])
        tj = np.asarray(jk["t"])
        return BaselineResult(
            method=method, pvalue=float(min(1.0, pj.min() * x.shape[1])), statistic=float(np.abs(tj).max()),
            df=float(jk["df"]), n_perm=0, null_distribution=None,
            details={"coef": np.asarray(jk["coef"]), "se": np.asarray(jk["se"]), "t": tj, "p_values": pj},
            **common,
        )
    B = _check_n_perm(n_perm, n)
    pooled = method == "cv-permutation-q2"
    if pb.backend is not None:
        observed, null_arr = _distributed.cv_permutation(pb, lr.core, folds, B, _perm_chunk(B, n, False), pooled)
        return BaselineResult(
            method=method, pvalue=_core.inference_permutation_p(float(observed), null_arr), statistic=float(observed), df=math.nan,
            n_perm=B, null_distribution=null_arr, **common,
        )
    bar = _progress_bar(pb.progress, B, method, heavy=B * folds * n * x.shape[1] > 1e8)
    chunk = _perm_chunk(B, n, bar is not None)
    null_arr = np.empty(B)
    observed = math.nan
    try:
        start = 0
        while start < B:
            count = min(chunk, B - start)
            observed, part = _core.inference_cv_permutation(
                x, yv, w, lr.core, k, folds, pb.seed, start, count, pooled, basis=lr.basis,
                ridge_alpha=pb.ridge_alpha, spca_n_features=pb.spca_n_features, spls_keep=pb.spls_keep, n_jobs=pb.jobs,
            )
            null_arr[start : start + count] = np.asarray(part)
            start += count
            if bar is not None:
                bar.update(count)
    finally:
        if bar is not None:
            bar.close()
    return BaselineResult(
        method=method, pvalue=_core.inference_permutation_p(float(observed), null_arr), statistic=float(observed), df=math.nan,
        n_perm=B, null_distribution=null_arr, **common,
    )


def _perm_chunk(B: int, n: int, with_bar: bool) -> int:
    """Permutations per core call: at most ~4M permuted entries at once (bounded memory), ten
    chunks with a progress bar. Permutation b always draws from its own stream, so chunking does not
    change the result."""
    chunk = max(1, min(B, (1 << 22) // max(n, 1)))
    if with_bar:
        chunk = min(chunk, max(1, -(-B // 10)))
    return chunk


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
    backend: Backend | None = None,
) -> ComponentTestsResult:
    """Per-component fixed-sequence test over the PLS extraction order.

    Step h fits h−1 PLS components on all rows (standardised), deflates X and y, and tests the
    residual with a one-component :func:`subspace_test` on the same splits. The sequence stops at the
    first ``p >= alpha``; ``k_star`` components are claimed. The gate is decided once on the
    undeflated X and frozen for the whole sequence. Controls the family-wise error at ``alpha``.

    Parameters
    ----------
    X, y, sample_weight, n_splits, n_perm, splits, force, random_state, n_jobs, progress, backend
        As in :func:`subspace_test` (a dask-array X is not supported here).
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
    if _dask_array.is_dask_collection(X) or _dask_array.is_dask_collection(y):
        raise TypeError(_dask_array.UNSUPPORTED.format(what="component_tests"))
    pb = _prepare_problem(X, y, 1, "pls", sample_weight, None, 0.95, 1.0, None, random_state, n_jobs, progress, backend)
    if pb.multi:
        raise ValueError("component_tests needs a single-column y")
    n, p = pb.x.shape
    a = check_float(alpha, "alpha", 0.0, 1.0)
    if method not in ("auto", "nb", "nb-permutation"):
        raise ValueError(f"method must be 'auto', 'nb' or 'nb-permutation', got {method!r}")
    hmax = min(10, p, n - 6) if max_components is None else check_int(max_components, "max_components", 1)
    if hmax < 1 or hmax > min(p, n - 6):
        raise ValueError(f"max_components must be in [1, min(n_features, n_samples - 6)] = [1, {min(p, n - 6)}]")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    # step 1 once, on the undeflated X (every step is a one-component PLS1 test)
    route = _resolve_route(pb, method, force, sequence=True)
    trains = _draw_orcheck_splits(pb, n_splits, splits)
    B = _check_n_perm(n_perm, n) if route.run == "nb-permutation" else 0
    steps: list[SubspaceTestResult] = []
    pvals: list[float] = []
    k_star = 0
    for h in range(1, hmax + 1):
        step = pb
        if h > 1:
            try:
                xr, yr = _core.inference_deflate(pb.xs, pb.ys, pb.w, h - 1)
            except ValueError:
                break  # the data are exhausted after h-1 components
            if np.ptp(yr) <= 1e-12 * np.abs(yr).max(initial=0.0):
                break
            xr, yr = np.asarray(xr), np.asarray(yr)
            step = dataclasses.replace(pb, x=xr, y=yr, xs=power_of_two_scaled(xr), ys=power_of_two_scaled(yr, False))
        try:
            res = _run_split_test(step, route, trains, B)
        except ValueError:
            break
        steps.append(res)
        pvals.append(res.pvalue)
        if res.pvalue >= a:
            break
        k_star = h
    return ComponentTestsResult(
        k_star=k_star, p_values=np.asarray(pvals), alpha=a, method=route.run, steps=tuple(steps), gate=route.gate,
        seed_=pb.seed,
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
    >>> c, s = np.cos(0.5), np.sin(0.5)
    >>> L = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]]) @ np.array([[c, -s], [s, c]])
    >>> out = varimax(L)  # rotates the simple structure back (to varimax's optimum)
    >>> np.round(np.abs(out.loadings), 3).tolist()
    [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]]
    >>> np.allclose(out.rotation @ out.rotation.T, np.eye(2))
    True
    """
    lm = check_finite_matrix(_from_pandas(loadings), "loadings", np.float64)
    if lm.shape[1] > lm.shape[0]:
        raise ValueError(f"loadings has more columns ({lm.shape[1]}) than rows ({lm.shape[0]}); the rotation is not identified")
    if not isinstance(normalize, (bool, np.bool_)):
        raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
    it = check_int(max_iter, "max_iter", 1)
    tl = check_float(tol, "tol", 0.0, math.inf)
    # the rotation is invariant to a global scale: rotate loadings rescaled exactly to max |value| ~ 1,
    # so 1e-200 and 1e155 loadings neither underflow nor overflow in the fourth powers
    e = int(power_of_two_scale(lm))
    rotated, rotation, crit, n_iter, converged = _core.inference_varimax(np.ldexp(lm, -e), bool(normalize), it, tl)
    if not converged:
        from sklearn.exceptions import ConvergenceWarning

        warn(
            f"varimax stopped at max_iter={it} before the criterion settled (tol={tl:g}); increase max_iter",
            ConvergenceWarning,
        )
    with np.errstate(over="ignore", under="ignore"):
        crit_out = float(crit) if normalize else float(np.ldexp(crit, 4 * e))
    return VarimaxResult(
        loadings=np.ldexp(np.asarray(rotated), e),
        rotation=np.asarray(rotation),
        criterion=crit_out,
        n_iter=int(n_iter),
        converged=bool(converged),
    )
