"""select_n_components: the number of PLS1 components by cross-validation or by the fixed-sequence test."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_inference_n_jobs,
    check_int,
    check_xy,
    seed_from_random_state,
)
from thrifty.inference._results import ComponentTestsResult, FloatArray

Rule = Literal["one-se", "max", "sequence"]


@dataclass(frozen=True)
class NComponentsResult:
    """Outcome of :func:`select_n_components`.

    Attributes
    ----------
    n_components : int
        The choice of ``rule`` (0 only for ``"sequence"`` when not even one component is claimed).
    rule : str
    k : ndarray of shape (k_max,)
        1, ..., k_max.
    cv_r2 : ndarray of shape (k_max,)
        Mean held-out R² over the folds for every k (−inf where a fold had fewer components; a
        ``UserWarning`` lists those k).
    cv_se : ndarray of shape (k_max,)
        Its standard error (SD over folds / sqrt(n_folds)).
    fold_r2 : ndarray of shape (k_max, n_folds)
        Held-out R² of every fold.
    sequence : ComponentTestsResult or None
        The fixed-sequence test for ``rule="sequence"``.
    seed_ : int
    """

    n_components: int
    rule: str
    k: npt.NDArray[np.int64]
    cv_r2: FloatArray
    cv_se: FloatArray
    fold_r2: FloatArray
    sequence: ComponentTestsResult | None
    seed_: int


def select_n_components(
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    k_max: int = 10,
    rule: Rule = "one-se",
    *,
    n_folds: int = 5,
    spls_keep: int | None = None,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    **sequence_options: Any,
) -> NComponentsResult:
    """Choose the number of PLS1 components.

    The CV curve: ``n_folds``-fold cross-validation (folds drawn from ``random_state``); every fold
    standardises its train rows, fits ``k_max`` components once and scores each k ≤ k_max on its
    held-out rows by R² = 1 − SSE/SST. ``rule="max"`` picks the k of the largest mean R²;
    ``"one-se"`` (the default, plskit's ``r2_se``) the smallest k within one standard error of it;
    ``"sequence"`` the ``k_star`` of :func:`component_tests` (the fixed-sequence test over the
    extraction order, family-wise error controlled; the CV curve is reported alongside).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    k_max : int, default=10
        Largest k (at most ``min(n_samples, n_features)``).
    rule : {"one-se", "max", "sequence"}, default="one-se"
    n_folds : int, default=5
    spls_keep : int, optional
        Use sparse PLS1 with this keep-count instead of PLS1 (the CV curve only).
    random_state : None, int or numpy Generator
        Seed of the folds (and of the sequence test's splits).
    n_jobs : int, optional
        Threads for the core.
    **sequence_options
        Passed to :func:`component_tests` for ``rule="sequence"`` (``alpha``, ``method``, ``n_splits``, ...).

    Returns
    -------
    NComponentsResult
        ``n_components`` and the CV curve (``k``, ``cv_r2``, ``cv_se``, ``fold_r2``).

    Raises
    ------
    ValueError, TypeError
        Bad data (NaN/inf, constant y, mismatched lengths), ``k_max`` or ``n_folds`` out of range,
        an unknown rule, ``spls_keep`` outside [1, n_features], or sequence options with another rule.

    Warns
    -----
    UserWarning
        Some k could not be fitted on every fold (``k_max`` above the rank of a fold's data): their
        ``cv_r2`` is −inf.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import select_n_components
    >>> rng = np.random.default_rng(0)
    >>> T = rng.normal(size=(300, 2)) * [4.0, 2.0]  # two latent scores of distinct variances
    >>> P, _ = np.linalg.qr(rng.normal(size=(20, 2)))
    >>> X = T @ P.T + 0.05 * rng.normal(size=(300, 20))
    >>> y = T @ [0.25, 0.5] + 0.5 * rng.normal(size=300)  # needs both components
    >>> select_n_components(X, y, k_max=6, random_state=0).n_components
    2
    """
    x, yv, _ = check_xy(X, y, None)
    n, p = x.shape
    kmax = check_int(k_max, "k_max", 1)
    if kmax > min(n, p):
        raise ValueError(f"k_max={kmax} exceeds min(n_samples, n_features) = {min(n, p)}")
    folds = check_int(n_folds, "n_folds", 2)
    if folds > n:
        raise ValueError(f"n_folds={folds} exceeds the number of samples ({n})")
    if rule not in ("one-se", "max", "sequence"):
        raise ValueError(f"rule must be 'one-se', 'max' or 'sequence', got {rule!r}")
    if sequence_options and rule != "sequence":
        raise ValueError(f"options {sorted(sequence_options)} are for rule='sequence' only")
    keep = p if spls_keep is None else check_int(spls_keep, "spls_keep", 1)
    if keep > p:
        raise ValueError(f"spls_keep must be in [1, n_features={p}], got {keep}")
    seed = seed_from_random_state(random_state)
    curve = _core.inference_cv_curve(x, yv, kmax, keep, folds, seed, check_inference_n_jobs(n_jobs))
    unscored = np.flatnonzero(~np.isfinite(np.asarray(curve["mean"]))) + 1
    if unscored.size:
        ks = ", ".join(map(str, unscored[:8])) + (", ..." if unscored.size > 8 else "")
        warnings.warn(
            f"k = {ks} could not be fitted on every fold (fewer components than that in a fold's data, "
            "or too few rows): their cv_r2 is -inf, and the cross-validated rules never choose them",
            UserWarning,
            stacklevel=2,
        )
    sequence = None
    if rule == "sequence":
        from thrifty.inference._api import component_tests

        sequence = component_tests(x, yv, max_components=kmax, random_state=seed, n_jobs=n_jobs, **sequence_options)
        choice = sequence.k_star
    else:
        picked = curve["choice_max"] if rule == "max" else curve["choice_one_se"]
        if picked is None:
            raise ValueError("no number of components could be scored by cross-validation (too few rows per fold)")
        choice = int(picked)
    return NComponentsResult(
        n_components=int(choice), rule=rule, k=np.arange(1, kmax + 1), cv_r2=np.asarray(curve["mean"]),
        cv_se=np.asarray(curve["se"]), fold_r2=np.asarray(curve["scores"]), sequence=sequence, seed_=seed,
    )
