"""The supervised direction shared by the word-level and the document-level runs.

One place turns rows of embedding-space vectors ``X`` and an outcome ``y`` into: the held-out test
(:func:`thrifty.inference.subspace_test`, PLS with k components), the full-data PLS fit
(:class:`thrifty.inference.PLSInference`), the unit direction ``beta`` in embedding coordinates (the
activation pattern ``X_c' ŷ`` of the fitted outcome, Haufe et al. 2014), its poles (nearest words of
``+beta`` / ``-beta``) and the varimax axes of the basis (their activation patterns).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty.inference import GateWarning, PLSInference, SubspaceTestResult, subspace_test, varimax
from thrifty.text._embeddings import Embeddings, unit_rows
from thrifty.text._results import Axis, FloatArray, Poles


@dataclass(frozen=True)
class Direction:
    """A fitted direction: the test, the unit ``beta`` and the varimax axes (embedding coordinates)."""

    test: SubspaceTestResult
    beta: FloatArray  # (dim,) unit activation pattern of the fitted outcome
    axes: FloatArray  # (dim, k) unit patterns of the varimax axis scores, signed to correlate non-negatively with y
    axes_r: FloatArray  # (k,) in-sample r of each axis score with y




def _well_scaled(a: FloatArray) -> FloatArray:
    """``a`` as it is, or times 2**-e when its largest |value| 2**e is outside 2**±64."""
    _, e = np.frexp(np.max(np.abs(a)) if a.size else 0.0)
    return a if abs(int(e)) < 64 else np.ldexp(a, -e)


def fit_direction(x: FloatArray, y: FloatArray, k: int, test_options: dict[str, Any]) -> Direction:
    """The test and the full-data PLS direction of ``y`` on ``x`` (float64, validated by the caller)."""
    # everything below is scale-free: badly scaled x and y are rescaled exactly by a power of two, so
    # that the covariances that give the patterns neither overflow nor underflow
    x, y = _well_scaled(x), _well_scaled(y)
    test = subspace_test(x, y, k, learner="pls", **test_options)
    if not isinstance(test, SubspaceTestResult):
        raise ValueError(f"method must be a split test ('auto', 'nb' or 'nb-permutation'), got {test.method!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fewer fitted components than k: the test says so too
        pls = PLSInference(n_components=k, test=False).fit(x, y)
    # Read the fit through activation patterns (Haufe et al. 2014): the covariance of the raw vectors with the
    # fitted outcome (beta) and with each varimax axis score. Unlike the coefficients (filters), patterns do
    # not blow up along near-constant dimensions (contextual encoders have some: std ~1e-30 for MiniLM, which
    # standardisation turns into unit-variance columns), so their cosines with word vectors mean something.
    xc = x - x.mean(axis=0)
    fitted = np.asarray(pls.predict(x), dtype=np.float64)
    beta = unit_rows(xc.T @ (fitted - fitted.mean()))
    scale = np.where(pls.x_std_ > 0, pls.x_std_, np.inf)
    basis = np.asarray(pls.x_rotations_, dtype=np.float64)
    if k > 1:
        basis = varimax(basis).loadings
    scores = (xc / scale) @ basis
    r = np.array([_pearson(scores[:, j], y) for j in range(k)])
    sign = np.where(r < 0, -1.0, 1.0)
    patterns = xc.T @ (scores - scores.mean(axis=0))
    axes = np.column_stack([unit_rows(patterns[:, j]) * sign[j] for j in range(k)])
    return Direction(test=test, beta=beta, axes=axes, axes_r=np.abs(r))


def select_k_one_se(x: FloatArray, y: FloatArray, k_max: int, options: dict[str, Any]) -> tuple[int, FloatArray]:
    """k by the one-standard-error rule on the NB mean Fisher z over k = 1..k_max (same splits).

    Returns the chosen k and the curve ``(k_max, 2)`` of (mean z, NB se). The test run after it on the same
    data is optimistic by the selection (the caller documents this).
    """
    curve = np.full((k_max, 2), np.nan)
    opts = {**options, "method": "nb", "force": True}
    for k in range(1, k_max + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateWarning)
            res = subspace_test(x, y, k, learner="pls", **opts)
        if not isinstance(res, SubspaceTestResult):  # pragma: no cover - method="nb" always is a split test
            raise TypeError("the NB test returned a baseline result")
        curve[k - 1] = (res.z_mean, res.se)
    best = int(np.nanargmax(curve[:, 0]))
    threshold = curve[best, 0] - curve[best, 1]
    chosen = next(k for k in range(1, best + 2) if curve[k - 1, 0] >= threshold)
    return chosen, curve


def _pearson(a: FloatArray, b: FloatArray) -> float:
    # unit vectors first: the product of two sums of squares leaves the float range at 1e±150
    return float(unit_rows(a - a.mean()) @ unit_rows(b - b.mean()))


def poles_of(emb: Embeddings, direction: FloatArray, topn: int, exclude: tuple[str, ...] = ()) -> Poles:
    """The ``topn`` words nearest ``+direction`` and ``-direction``."""
    pos = emb.similar_by_vector(direction, topn, exclude=exclude)
    neg = emb.similar_by_vector(-direction, topn, exclude=exclude)
    return Poles(pos=tuple(pos), neg=tuple(neg))


def axes_of(emb: Embeddings, d: Direction, topn: int, exclude: tuple[str, ...] = ()) -> tuple[Axis, ...]:
    """The varimax axes with their poles."""
    return tuple(
        Axis(index=j, vector=d.axes[:, j], r_outcome=float(d.axes_r[j]), poles=poles_of(emb, d.axes[:, j], topn, exclude))
        for j in range(d.axes.shape[1])
    )
