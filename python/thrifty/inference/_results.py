"""Result dataclasses of :mod:`thrifty.inference` (frozen, with a readable ``repr``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from thrifty._warn import warn

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class ConfidenceInterval(NamedTuple):
    """A confidence interval ``(low, high)`` on the correlation scale (as scipy's results return)."""

    low: float
    high: float


def _deprecated_seed_alias(obj: Any) -> int:
    warn("seed_used is deprecated; use seed_ (one seed name across thrifty)", DeprecationWarning)
    return int(obj.seed_)


@dataclass(frozen=True)
class GateDecision:
    """The pre-run gate: whether the NB-asymptotic approximation is trusted for this design.

    Attributes
    ----------
    n_eff : float
        Kish effective sample size ``(sum w)**2 / sum w**2`` (``n`` without weights).
    stable_rank : float
        ``||X||_F**2 / sigma_1**2`` of the (weighted-)standardised X.
    n_columns : int
        Number of columns of X.
    reroute : bool
        True when any rule fires: ``n_eff < 25``, ``stable_rank < 3`` or ``n_columns <= 4``.
    reasons : tuple of str
        The rules that fired.
    forced : bool
        ``force=True`` was passed, so the NB-asymptotic test ran despite ``reroute``.
    rerouted : bool
        The requested NB-asymptotic test was replaced by the NB-permutation test.
    """

    n_eff: float
    stable_rank: float
    n_columns: int
    reroute: bool
    reasons: tuple[str, ...]
    forced: bool = False
    rerouted: bool = False


@dataclass(frozen=True, repr=False, eq=False)
class SubspaceTestResult:
    """Outcome of :func:`thrifty.inference.subspace_test`.

    Attributes
    ----------
    method : str
        The test that ran (``"nb"`` or ``"nb-permutation"``; the baselines return a
        :class:`BaselineResult`).
    requested_method : str
        The ``method`` argument (``"auto"`` resolves through the gate).
    pvalue : float
        One-sided p-value for H1: the subspace predicts y (rho > 0). ``p_value`` is an alias, and
        ``statistic, pvalue = result`` unpacks like scipy's results.
    statistic : float
        ``tanh(mean z)`` for the split tests; Q² / mean R² for the CV baselines; max ``|t|`` for the jackknife.
    t, df : float
        NB t statistic and its degrees of freedom ``J - 1`` (NaN for tests without them).
    r : ndarray of shape (n_splits,)
        Held-out Pearson r of every split (empty for the CV baselines and the jackknife).
    z_mean, z_sd, se : float
        Mean and SD (ddof=1) of ``atanh(r_j)`` and the NB standard error ``z_sd*sqrt(1/J + n_te/n_tr)``.
    rho_hat : float
        ``clip(1 - z_sd**2 (n_test - 3), 0, 1)`` (NaN with sample weights).
    r2 : float
        ``tanh(z_mean)**2``.
    ci : tuple of float
        Wald interval ``tanh(z_mean -/+ z_{(1+level)/2} se)`` on the correlation scale.
    confidence_level : float
    n_components : int
    learner : str
        ``"pls"``, ``"spca"``, ``"ridge"``, ``"basis"``, ``"callable"`` or ``"transformer"``.
    n_splits, n_perm : int
        Number of splits J and of permutations B (0 when no permutation ran).
    n_train, n_test : float
        Mean train and test sizes of the splits.
    null_distribution : ndarray or None
        The permutation null of the statistic (mean z for NB-permutation).
    gate : GateDecision
        Includes why ``method="auto"`` ran the permutation test (design or learner rule).
    seed_ : int
        Pass it back as ``random_state`` to reproduce the result exactly (``seed_used`` is a
        deprecated alias).
    train_indices : tuple of ndarray
        The train rows of every split (pass them as ``splits`` to reproduce).
    rotate : str or None
    details : dict
        Method-specific extras (jackknife coefficients, standard errors, t and p per coefficient).
    n_undefined : int
        Splits whose held-out r is undefined (constant test response or prediction); they are left
        out of the test (``r`` holds NaN there) and a :class:`UndefinedSplitWarning` says so.
    basis : ndarray of shape (n_features, n_components) or None
        ``learner="spls"``: the sparse weights fitted on all rows (each column non-zero on exactly
        ``spls_keep`` variables, so the selected variables show); None for the other learners.
    """

    method: str
    requested_method: str
    pvalue: float
    statistic: float
    t: float
    df: float
    r: FloatArray
    z_mean: float
    z_sd: float
    se: float
    rho_hat: float
    r2: float
    ci: tuple[float, float]
    confidence_level: float
    n_components: int
    learner: str
    n_splits: int
    n_perm: int
    n_train: float
    n_test: float
    null_distribution: FloatArray | None
    gate: GateDecision
    seed_: int
    train_indices: tuple[IntArray, ...]
    rotate: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    n_undefined: int = 0
    basis: FloatArray | None = None

    @property
    def p_value(self) -> float:
        """Alias of ``pvalue``."""
        return self.pvalue

    @property
    def seed_used(self) -> int:
        """Deprecated alias of ``seed_``."""
        return _deprecated_seed_alias(self)

    def __iter__(self) -> Iterator[float]:
        """``statistic, pvalue = result`` (as scipy's results unpack)."""
        return iter((self.statistic, self.pvalue))

    def confidence_interval(self, confidence_level: float | None = None) -> ConfidenceInterval:
        """Wald interval ``tanh(z_mean -/+ z_{(1+level)/2} se)`` on the correlation scale.

        Parameters
        ----------
        confidence_level : float, optional
            Level in (0, 1); the level of the test by default.

        Returns
        -------
        ConfidenceInterval
            Named ``(low, high)``; NaN for the baselines and when the splits do not vary.
        """
        if confidence_level is None:
            return ConfidenceInterval(*self.ci)
        level = float(confidence_level)
        if not 0.0 < level < 1.0:
            raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
        if not (self.se > 0.0 and math.isfinite(self.z_sd) and self.z_sd > 0.0):
            return ConfidenceInterval(math.nan, math.nan)
        from thrifty import _core

        zc = _core.inference_norm_ppf(0.5 + level / 2.0)
        return ConfidenceInterval(math.tanh(self.z_mean - zc * self.se), math.tanh(self.z_mean + zc * self.se))

    def __repr__(self) -> str:
        lines = [f"SubspaceTestResult(method={self.method!r}, learner={self.learner!r}, k={self.n_components})"]
        lines.append(f"  p-value            {self.pvalue:.4g}")
        if self.method in ("nb", "nb-permutation"):
            lines.append(f"  held-out r         {self.statistic:.4f}   (tanh of mean Fisher z over {self.n_splits} splits)")
            lines.append(
                f"  {round(self.confidence_level * 100)}% CI             [{self.ci[0]:.4f}, {self.ci[1]:.4f}]"
            )
            if self.method == "nb":
                lines.append(f"  t / df             {self.t:.3f} / {self.df:g}")
            else:
                lines.append(f"  permutations       {self.n_perm}")
            lines.append(f"  r^2                {self.r2:.4f}")
            if not np.isnan(self.rho_hat):
                lines.append(f"  rho_hat            {self.rho_hat:.3f}")
            if self.n_undefined:
                lines.append(f"  undefined splits   {self.n_undefined} (left out)")
            lines.append(f"  train/test sizes   {self.n_train:g} / {self.n_test:g}")
        g = self.gate
        gate = "passed" if not g.reroute else ("forced past" if g.forced else "rerouted") + ": " + "; ".join(g.reasons)
        lines.append(f"  gate               {gate}  (n_eff={g.n_eff:.1f}, stable rank={g.stable_rank:.2f})")
        lines.append(f"  seed_              {self.seed_}")
        return "\n".join(lines)


@dataclass(frozen=True, repr=False, eq=False)
class BaselineResult:
    """Outcome of :func:`thrifty.inference.subspace_test` for a baseline method
    (``"cv-permutation-q2"``, ``"permutation-score"`` or ``"jackknife"``), which has no splits,
    Fisher z or confidence interval.

    Attributes
    ----------
    method, requested_method : str
    pvalue : float
        ``(1 + #{null >= observed}) / (n_perm + 1)`` for the CV baselines; the Bonferroni minimum of
        the per-coefficient two-sided p-values for the jackknife (an indicator only). ``p_value`` is
        an alias; ``statistic, pvalue = result`` unpacks.
    statistic : float
        Pooled CV Q², mean fold R², or max ``|t|`` (jackknife).
    n_components : int
    learner : str
    n_folds : int
        Folds (CV baselines) or segments (jackknife).
    n_perm : int
        Permutations (0 for the jackknife).
    null_distribution : ndarray or None
        The permutation null of the statistic.
    df : float
        Degrees of freedom of the jackknife t (``n_folds - 1``); NaN for the CV baselines.
    gate : GateDecision
    seed_ : int
    details : dict
        Jackknife coefficients, standard errors, t and p per coefficient.
    """

    method: str
    requested_method: str
    pvalue: float
    statistic: float
    n_components: int
    learner: str
    n_folds: int
    n_perm: int
    null_distribution: FloatArray | None
    df: float
    gate: GateDecision
    seed_: int
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def p_value(self) -> float:
        """Alias of ``pvalue``."""
        return self.pvalue

    @property
    def seed_used(self) -> int:
        """Deprecated alias of ``seed_``."""
        return _deprecated_seed_alias(self)

    def __iter__(self) -> Iterator[float]:
        """``statistic, pvalue = result``."""
        return iter((self.statistic, self.pvalue))

    def __repr__(self) -> str:
        lines = [f"BaselineResult(method={self.method!r}, learner={self.learner!r}, k={self.n_components})"]
        lines.append(f"  p-value            {self.pvalue:.4g}")
        if self.method == "jackknife":
            lines.append(f"  max |t|            {self.statistic:.3f}   (jackknife, df={self.df:g}; Bonferroni p)")
        else:
            label = "pooled CV Q^2" if self.method == "cv-permutation-q2" else "mean fold R^2"
            lines.append(f"  {label:<18} {self.statistic:.4f}   ({self.n_perm} permutations, {self.n_folds} folds)")
        lines.append(f"  seed_              {self.seed_}")
        return "\n".join(lines)


@dataclass(frozen=True, repr=False, eq=False)
class ComponentTestsResult:
    """Outcome of :func:`thrifty.inference.component_tests` (fixed-sequence test over extraction order).

    Attributes
    ----------
    k_star : int
        Number of components rejected before the first ``p >= alpha``.
    p_values : ndarray
        p-value of every tested step (the sequence stops at the first non-rejection).
    alpha : float
    method : str
        The test used at every step (decided once by the gate on the undeflated X).
    steps : tuple of SubspaceTestResult
    gate : GateDecision
    seed_ : int
        ``seed_used`` is a deprecated alias.
    """

    k_star: int
    p_values: FloatArray
    alpha: float
    method: str
    steps: tuple[SubspaceTestResult, ...]
    gate: GateDecision
    seed_: int

    @property
    def seed_used(self) -> int:
        """Deprecated alias of ``seed_``."""
        return _deprecated_seed_alias(self)

    def __repr__(self) -> str:
        ps = ", ".join(f"{p:.3g}" for p in self.p_values)
        return (
            f"ComponentTestsResult(k_star={self.k_star}, alpha={self.alpha}, method={self.method!r},\n"
            f"  p_values=[{ps}], seed_={self.seed_})"
        )


@dataclass(frozen=True, repr=False, eq=False)
class VarimaxResult:
    """Outcome of :func:`thrifty.inference.varimax`.

    Attributes
    ----------
    loadings : ndarray of shape (p, k)
        Rotated loadings ``L @ rotation``.
    rotation : ndarray of shape (k, k)
        Orthogonal rotation matrix.
    criterion : float
        Varimax criterion of the (Kaiser-normalised, if requested) rotated loadings.
    n_iter : int
    converged : bool
        False when the iteration stopped at ``max_iter`` (a ``ConvergenceWarning`` says so).
    """

    loadings: FloatArray
    rotation: FloatArray
    criterion: float
    n_iter: int
    converged: bool = True

    def __repr__(self) -> str:
        p, k = self.loadings.shape
        return f"VarimaxResult(shape=({p}, {k}), criterion={self.criterion:.6g}, n_iter={self.n_iter})"
