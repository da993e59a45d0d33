"""rotation_stability: resampling (bootstrap or m-out-of-n) congruence of the varimax axes of a PLS1 fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_allocation,
    check_float,
    check_inference_n_jobs,
    check_int,
    check_xy,
    seed_from_random_state,
)
from thrifty.inference._results import FloatArray


@dataclass(frozen=True)
class RotationStabilityResult:
    """Outcome of :func:`rotation_stability`.

    Attributes
    ----------
    axes : ndarray of shape (n_features, n_components)
        Varimax axes of the PLS1 weights fitted on all rows (the reference).
    weights : ndarray of shape (n_features, n_components)
        The unrotated PLS1 weights on all rows.
    congruence : ndarray of shape (n_boot, n_components)
        absolute Tucker congruence of every reference axis with its matched resample axis (NaN where a
        resample's fit degenerated).
    congruence_unrotated : ndarray of shape (n_boot, n_components)
        The same for the unrotated weights.
    mean, mean_unrotated : ndarray of shape (n_components,)
        Mean congruence per axis.
    ci : ndarray of shape (n_components, 2)
        Percentile interval of the congruence per axis at ``confidence_level``.
    share_fair : ndarray of shape (n_components,)
        Share of resamples with congruence >= 0.85 (fair similarity; >= 0.95: the same axis).
    confidence_level : float
    n_boot : int
    resample : {"bootstrap", "subsample"}
        How the resamples drew their rows.
    m : int
        Rows per resample: n_samples for the bootstrap, ``ceil(n_samples ** subsample_rate)`` for
        subsamples.
    seed_ : int
    """

    axes: FloatArray
    weights: FloatArray
    congruence: FloatArray
    congruence_unrotated: FloatArray
    mean: FloatArray
    mean_unrotated: FloatArray
    ci: FloatArray
    share_fair: FloatArray
    confidence_level: float
    n_boot: int
    resample: str
    m: int
    seed_: int


def rotation_stability(
    X: npt.ArrayLike,
    y: npt.ArrayLike,
    n_components: int,
    *,
    n_boot: int = 1000,
    confidence_level: float = 0.95,
    resample: Literal["bootstrap", "subsample"] = "bootstrap",
    subsample_rate: float = 0.7,
    random_state: RandomState = None,
    n_jobs: int | None = None,
) -> RotationStabilityResult:
    """Resampling stability of the varimax axes of a PLS1 fit, axis by axis.

    The test is rotation invariant, so a p-value belongs to the subspace, not to an axis; this
    diagnostic says whether the individual varimax axes replicate. The PLS1 weights of
    ``n_components`` components fitted on all rows (standardised) are varimax-rotated (Kaiser) into the
    reference axes. Every resample (a bootstrap of n rows with replacement, or with
    ``resample="subsample"`` an m-out-of-n subsample of ``m = ceil(n ** subsample_rate)`` rows without
    replacement, as plskit's ``pls1_rotation_stability``; each with its own standardisation) is
    refitted and rotated, its axes are matched to the reference by the signed permutation maximising
    the summed absolute Tucker congruence (all k! assignments), and the congruence of each matched axis is
    recorded; the unrotated weights are matched the same way for comparison.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    n_components : int
        Number of axes, 2 <= n_components <= min(8, n_features, n_samples - 2).
    n_boot : int, default=1000
        Number of resamples.
    confidence_level : float, default=0.95
        Level of the percentile interval per axis.
    resample : {"bootstrap", "subsample"}, default="bootstrap"
        ``"bootstrap"``: n rows with replacement; ``"subsample"``: m rows without replacement (each from
        its own random stream, so the two never share draws). Subsamples are smaller, so faster, and
        their congruences are lower than the bootstrap's at the same n (less data per fit).
    subsample_rate : float, default=0.7
        Exponent of the subsample size ``m = ceil(n_samples ** subsample_rate)``, 0 < rate <= 1, with
        ``n_components + 2 <= m <= n_samples``. Used only with ``resample="subsample"``.
    random_state : None, int or numpy Generator
        Seed of the resamples (recorded in ``seed_``).
    n_jobs : int, optional
        Threads for the core. Results do not depend on it.

    Returns
    -------
    RotationStabilityResult
        Per-axis congruences, their means, percentile intervals and share of fair similarity.

    Raises
    ------
    ValueError, TypeError
        Bad data (NaN/inf, constant y), ``n_components`` out of range, ``n_boot < 1``, an unknown
        ``resample``, a ``subsample_rate`` outside (0, 1] or giving m outside
        [n_components + 2, n_samples].

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import rotation_stability
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 12))
    >>> y = X[:, 0] + X[:, 6] + rng.normal(scale=0.5, size=300)
    >>> res = rotation_stability(X, y, 2, n_boot=200, random_state=0)
    >>> bool(res.mean[0] > 0.95), bool(res.mean[1] < 0.85)  # the first axis replicates, the second does not
    (True, True)
    >>> sub = rotation_stability(X, y, 2, n_boot=200, resample="subsample", random_state=0)
    >>> sub.m, bool(sub.mean[0] > 0.9), bool(sub.mean[1] < 0.85)
    (55, True, True)
    """
    x, yv, _ = check_xy(X, y, None)
    k = check_int(n_components, "n_components", 2)
    if k > min(8, x.shape[1], x.shape[0] - 2):
        raise ValueError(f"n_components must be in [2, min(8, n_features, n_samples - 2)], got {k}")
    B = check_int(n_boot, "n_boot", 1)
    check_allocation("n_boot", B, 2 * k + x.shape[0])
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0)
    if not isinstance(resample, str):
        raise TypeError(f"resample must be 'bootstrap' or 'subsample', got {type(resample).__name__}")
    if resample not in ("bootstrap", "subsample"):
        raise ValueError(f"resample must be 'bootstrap' or 'subsample', got {resample!r}")
    rate = check_float(subsample_rate, "subsample_rate", 0.0, math.inf)
    if rate > 1.0:
        raise ValueError(f"subsample_rate must satisfy 0 < subsample_rate <= 1, got {rate}")
    n = x.shape[0]
    m = n
    if resample == "subsample":
        m = math.ceil(n**rate)
        if not k + 2 <= m <= n:
            raise ValueError(
                f"subsample_rate={rate} gives m = ceil(n_samples ** subsample_rate) = {m} rows, outside "
                f"[n_components + 2, n_samples] = [{k + 2}, {n}]"
            )
    seed = seed_from_random_state(random_state)
    out = _core.inference_rotation_stability(
        x, yv, k, B, seed, check_inference_n_jobs(n_jobs), m if resample == "subsample" else None
    )
    rot, unrot = np.asarray(out["rotated"]), np.asarray(out["unrotated"])
    tail = (1.0 - level) / 2.0
    return RotationStabilityResult(
        axes=np.asarray(out["axes"]), weights=np.asarray(out["weights"]), congruence=rot, congruence_unrotated=unrot,
        mean=np.nanmean(rot, axis=0), mean_unrotated=np.nanmean(unrot, axis=0),
        ci=np.nanquantile(rot, [tail, 1.0 - tail], axis=0).T, share_fair=np.nanmean(rot >= 0.85, axis=0),
        confidence_level=level, n_boot=B, resample=resample, m=m, seed_=seed,
    )
