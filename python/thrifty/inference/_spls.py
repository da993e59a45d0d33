"""Sparse PLS1 with a keep-count (``learner="spls"``): validation of ``spls_keep`` and the basis on all rows.

The learner itself runs in the core (``thrifty-core`` ``inference/spls.rs``): on every train part,
each weight vector keeps the ``keep`` entries of X̃ᵀỹ (deflated) of largest magnitude, so every
direction loads on exactly ``keep`` variables; ``keep = n_features`` is PLS1 bit for bit. With
``spls_keep="cv"`` the keep-count is chosen on every train part (and for every permutation) by
5-fold cross-validation over the grid 1, 2, 4, …, n_features with the one-standard-error rule (the
sparsest keep within one SE of the best mean R²), so the choice never sees held-out rows and the
test keeps its level.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np

from thrifty import _core
from thrifty.inference._results import FloatArray

SplsKeep = int | Literal["cv"]


def keep_argument(spls_keep: Any, learner: Any, p: int) -> int:
    """``spls_keep`` as the core's keep-count: 0 for ``"cv"`` (the default of ``learner="spls"``).

    Raises ``ValueError``/``TypeError`` naming ``spls_keep``; it must be left ``None`` for other learners.
    """
    is_spls = isinstance(learner, str) and learner == "spls"
    if not is_spls:
        if spls_keep is not None:
            raise ValueError(f"spls_keep is only used with learner='spls', got learner={learner!r}")
        return 0
    if spls_keep is None or (isinstance(spls_keep, str) and spls_keep == "cv"):
        return 0
    if isinstance(spls_keep, (bool, np.bool_)) or not isinstance(spls_keep, numbers.Integral):
        raise TypeError(f"spls_keep must be an int or 'cv', got {spls_keep!r}")
    keep = int(spls_keep)
    if not 1 <= keep <= p:
        raise ValueError(f"spls_keep must be in [1, n_features={p}] or 'cv', got {keep}")
    return keep


def fitted_basis(x: FloatArray, y: FloatArray, w: FloatArray | None, k: int, keep: int) -> FloatArray:
    """The sparse weights W (n_features, k) fitted on all rows (standardised X and y): column a is
    non-zero on exactly ``keep`` rows (the cross-validated keep-count when ``keep`` is 0)."""
    fit = _core.inference_spls_fit(x, y, w, k, keep)
    return np.asarray(fit["weights"])
