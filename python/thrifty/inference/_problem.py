"""The pieces of :mod:`thrifty.inference` that its front ends share (``_api``, ``_dask_array``,
``_distributed`` import them; this module imports none of those): the learner adapters that turn
names, bases, callables and scikit-learn transformers into per-split statistics, the validated
problem, the route and the NB outcome as results. The rules themselves (gate, learner rule, method
resolution, scaling, NB outcome) live in ``thrifty-core`` (``inference::route``, ``inference::run``).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import check_finite_matrix
from thrifty._warn import warn
from thrifty.inference._results import FloatArray, GateDecision, IntArray, SubspaceTestResult

LEARNERS = ("pls", "spca", "ridge", "spls")
LearnerArg = str | npt.ArrayLike | Callable[[FloatArray, FloatArray], Any] | Any


class GateWarning(UserWarning):
    """The pre-run gate rerouted the NB-asymptotic test to the NB-permutation test."""


class ConstantColumnWarning(UserWarning):
    """X has constant columns; they are dropped from every fit (their standardised values are 0)."""


class UndefinedSplitWarning(UserWarning):
    """The held-out correlation is undefined on some splits (constant test response or prediction)."""


def is_transformer(obj: Any) -> bool:
    return hasattr(obj, "fit") and hasattr(obj, "transform")


class Learner:
    """Normalised ``learner`` argument. ``k`` is the number of directions; for a transformer or a
    callable given without ``n_components`` it is read from the first fit (``k_known`` False until then)."""

    def __init__(self, learner: LearnerArg, n_components: int | None, p: int) -> None:
        self.basis: FloatArray | None = None
        self.func: Callable[[FloatArray, FloatArray], Any] | None = None
        self.transformer: Any = None
        self.k = 1 if n_components is None else n_components
        self.k_known = n_components is not None
        if isinstance(learner, str):
            if learner not in LEARNERS:
                raise ValueError(f"learner must be one of {LEARNERS}, a basis array, a callable or a transformer, got {learner!r}")
            self.kind = learner
            self.core = learner
            self.k_known = True
        elif is_transformer(learner):
            self.kind = "transformer"
            self.core = "basis"
            self.transformer = learner
            declared = getattr(learner, "n_components", None)
            if not self.k_known and isinstance(declared, numbers.Integral) and not isinstance(declared, bool):
                self.k, self.k_known = int(declared), True
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
            if n_components is not None and n_components != b.shape[1]:
                raise ValueError(f"n_components={n_components} does not match the basis' {b.shape[1]} columns")
            self.basis = check_finite_matrix(b, "learner", np.float64)
            self.k, self.k_known = b.shape[1], True
            self.kind = "basis"
            self.core = "basis"
        if self.k > p:
            raise ValueError(f"n_components={self.k} exceeds the number of features ({p})")

    def check_k(self, got: int, what: str) -> None:
        """Check a fitted learner's number of directions/scores against ``n_components``."""
        if not self.k_known:
            self.k, self.k_known = got, True
        elif got != self.k:
            raise ValueError(
                f"the {what} returned {got} directions/scores per sample, but n_components={self.k}; "
                "pass the matching n_components (or leave it None)"
            )

    def call_basis(self, x_tr: FloatArray, y_tr: FloatArray) -> FloatArray:
        assert self.func is not None
        b = np.asarray(self.func(x_tr.copy(), y_tr.copy()), dtype=np.float64)
        if b.ndim == 1:
            b = b[:, None]
        if b.ndim != 2 or b.shape[0] != x_tr.shape[1]:
            raise ValueError(
                f"the learner callable must return a basis of shape ({x_tr.shape[1]}, k), got {b.shape}"
            )
        self.check_k(b.shape[1], "learner callable")
        if not np.isfinite(b).all():
            raise ValueError("the learner callable returned NaN or infinity")
        return np.ascontiguousarray(b)


def check_splits(splits: Any, n: int) -> list[IntArray]:
    if isinstance(splits, np.ndarray) and splits.ndim == 2 or isinstance(splits, (list, tuple)):
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


def gate_decision(x: FloatArray, w: FloatArray | None) -> GateDecision:
    g = _core.inference_gate(x, w)
    return GateDecision(
        n_eff=float(g["n_eff"]),
        stable_rank=float(g["stable_rank"]),
        n_columns=int(g["n_columns"]),
        reroute=bool(g["reroute"]),
        reasons=tuple(g["reasons"]),
    )


def split_rs(pb: Problem, trains: list[IntArray], perm: IntArray | None = None) -> FloatArray:
    """Held-out r of every split (NaN where undefined) for y, or for y[perm]."""
    lr = pb.lr
    ys = pb.ys if perm is None else np.ascontiguousarray(pb.ys[perm])
    if lr.kind in LEARNERS or lr.kind == "basis":
        return np.asarray(_core.inference_split_correlations(
            pb.xs, ys, pb.w, lr.core, lr.k, trains, basis=lr.basis, rotate=pb.rot, ridge_alpha=pb.ridge_alpha,
            spca_n_features=pb.spca_n_features, spls_keep=pb.spls_keep, n_jobs=pb.jobs,
        ))
    yu = pb.y if perm is None else pb.y[perm]
    if lr.kind == "callable":
        bases = [lr.call_basis(pb.x[t], yu[t]) for t in trains]
        return np.asarray(_core.inference_split_correlations(
            pb.xs, ys, pb.w, "bases", lr.k, trains, bases=bases, rotate=pb.rot, n_jobs=pb.jobs
        ))
    from sklearn.base import clone

    rs = np.empty(len(trains))
    for j, t in enumerate(trains):
        est = clone(lr.transformer).fit(pb.x[t], yu[t])
        s = np.asarray(est.transform(pb.x), dtype=np.float64)
        if s.ndim == 1:
            s = s[:, None]
        if s.ndim != 2 or s.shape[0] != pb.x.shape[0]:
            raise ValueError(f"the transformer must return scores of shape (n_samples, k), got {s.shape}")
        lr.check_k(s.shape[1], "transformer")
        if not np.isfinite(s).all():
            raise ValueError("the transformer returned NaN or infinity")
        s = power_of_two_scaled(s)
        eye = np.eye(s.shape[1])
        rs[j] = _core.inference_split_correlations(s, ys, pb.w, "basis", s.shape[1], [t], basis=eye, n_jobs=pb.jobs)[0]
    return rs


def null_mean_z_refit(pb: Problem, trains: list[IntArray], b: int) -> float:
    """Mean Fisher z of permutation b, refitting every split (PLS2, callables, transformers)."""
    perm = _core.inference_permutation(pb.x.shape[0], pb.seed, b)
    if pb.multi:
        rs = np.asarray(_core.inference_pls2_split_correlations(
            pb.xs, np.ascontiguousarray(pb.ys[perm]), pb.w, pb.lr.k, trains, pb.jobs
        ))
    else:
        rs = split_rs(pb, trains, perm)
    return float(_core.inference_mean_z(np.ascontiguousarray(rs, dtype=np.float64)))


@dataclasses.dataclass
class Problem:
    """Validated data and options of one test (the output of :func:`_prepare_problem`)."""

    x: FloatArray
    y: FloatArray
    w: FloatArray | None
    lr: Learner
    xs: FloatArray  # x and y as the core sees them: rescaled exactly by powers of two (badly scaled data)
    ys: FloatArray
    multi: bool
    rotate: str | None
    level: float
    ridge_alpha: float
    spca_n_features: int
    seed: int
    jobs: int | None
    progress: bool | None
    backend: str | None = None  # None: this process; else the joblib backend of the split/permutation work
    spls_keep: int = 0  # learner="spls": the keep-count (0: cross-validated)

    @property
    def rot(self) -> str:
        return "none" if self.rotate is None else self.rotate


@dataclasses.dataclass(frozen=True)
class Route:
    """Step 1's answer: the test to run, the one the user asked for, and the gate decision."""

    run: str
    requested: str
    gate: GateDecision


def split_test_result(
    rs: FloatArray, n_train: FloatArray, n: int, route: Route, B: int, null_fn: Callable[[], FloatArray] | None, *,
    level: float, rho_hat_defined: bool, k: int, learner: str, seed: int, trains: tuple[IntArray, ...],
    rotate: str | None,
) -> SubspaceTestResult:
    """The NB test on the per-split ``rs`` (train sizes ``n_train``; the core's ``nb_outcome``), the
    permutation p-value from ``null_fn()`` when the route is the NB-permutation test."""
    method = route.run
    # aligned too: the Dask path's per-split values arrive from workers in unaligned buffers
    nb = _core.inference_nb_outcome(
        np.require(rs, np.float64, ["C", "A"]), np.require(n_train, np.float64, ["C", "A"]), n, level, rho_hat_defined,
    )
    n_undefined = int(nb["n_undefined"])
    if n_undefined:
        warn(
            f"the held-out correlation is undefined on {n_undefined} of {rs.size} splits (a constant test "
            "response or prediction); they are left out of the test (n_undefined on the result)",
            UndefinedSplitWarning,
        )
    if not float(nb["z_sd"]) > 0.0:
        warn(
            "the split correlations do not vary between splits, so the NB standard error is 0: "
            "the confidence interval is undefined (NaN)",
            UndefinedSplitWarning,
        )
    null = None
    p_value = float(nb["p_value"])
    if method == "nb-permutation" and null_fn is not None:
        null = null_fn()
        p_value = float(_core.inference_permutation_p(float(nb["z_mean"]), np.ascontiguousarray(null)))
    return SubspaceTestResult(
        method=method,
        requested_method=route.requested,
        pvalue=p_value,
        statistic=float(nb["statistic"]),
        t=float(nb["t"]),
        df=float(nb["df"]),
        r=rs,
        z_mean=float(nb["z_mean"]),
        z_sd=float(nb["z_sd"]),
        se=float(nb["se"]),
        rho_hat=float(nb["rho_hat"]),
        r2=float(nb["statistic"]) ** 2,
        ci=(float(nb["ci_low"]), float(nb["ci_high"])),
        confidence_level=level,
        n_components=k,
        learner=learner,
        n_splits=int(rs.size),
        n_perm=B,
        n_train=float(nb["n_train"]),
        n_test=float(nb["n_test"]),
        null_distribution=null,
        gate=route.gate,
        seed_=seed,
        train_indices=trains,
        rotate=rotate,
        n_undefined=n_undefined,
    )


def gate_of(route: _core.RouteDict) -> GateDecision:
    """The :class:`GateDecision` of the core's route dict."""
    return GateDecision(
        n_eff=float(route["n_eff"]), stable_rank=float(route["stable_rank"]), n_columns=int(route["n_columns"]),
        reroute=bool(route["reroute"]), reasons=tuple(route["reasons"]), forced=bool(route["forced"]),
        rerouted=bool(route["rerouted"]),
    )


def route_of(route: _core.RouteDict, requested: str) -> tuple[Route, str | None]:
    """The :class:`Route` of the core's route dict and its warning (None: no warning)."""
    warning = route["warning"]
    return Route(str(route["run"]), requested, gate_of(route)), None if warning is None else str(warning)


def power_of_two_scaled(a: FloatArray, per_column: bool = True) -> FloatArray:
    """``a`` (1-D or 2-D) as the core sees data: rescaled exactly by powers of two, per column or
    globally (``thrifty-core`` ``inference::route::power_of_two_scaled``). Well-scaled data come
    back as they are, not copied (a copy as large as X is what runs out of memory first)."""
    a2 = np.ascontiguousarray(a.reshape(a.shape[0], -1) if a.ndim == 2 else a.reshape(-1, 1), dtype=np.float64)
    out = _core.inference_power_of_two_scaled(a2, per_column)
    return (a2 if out is None else np.asarray(out)).reshape(a.shape)


def local_split_statistics(pb: Problem, trains: list[IntArray]) -> FloatArray:
    """Held-out r of every split (NaN where undefined), in this process."""
    if pb.multi:
        rs = _core.inference_pls2_split_correlations(pb.xs, pb.ys, pb.w, pb.lr.k, trains, pb.jobs)
    else:
        rs = split_rs(pb, trains)
    return np.asarray(rs, dtype=np.float64)
