"""Coresets and minibatches from discrete DPP kernels, with unbiased weights."""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._dask_util import is_dask_array
from thrifty._validation import RandomState, seed_from_random_state
from thrifty._warn import warn
from thrifty.dpp import _dask
from thrifty.dpp._checks import (
    DeprecatedAlias,
    IntArray,
    ReducedRankWarning,
    check_int,
    check_matrix64,
    check_vector,
)
from thrifty.dpp._kernels import Density, Kernel, Split, StratifiedDPP, _discretize
from thrifty.dpp._projection import ProjectionDPP

#: Batches drawn per call into the core while iterating (constant memory whatever n_batches is).
_BATCH_CHUNK = 64

F64 = npt.NDArray[np.float64]


class Coreset:
    """A weighted DPP coreset of X: ``Σ_{i∈S} weights_i f(x_i)`` estimates ``Σ_i f(x_i)`` without bias.

    Construct it as ``Coreset(X, m, kernel=..., density=..., random_state=...)``. The kernel is made
    discrete on X (:func:`thrifty.dpp.discretize`), one exact sample S is drawn, and the weights are
    ``1/K_ii`` (Horvitz–Thompson: unbiased for every f). With the default Haar kernel the estimator
    integrates constants exactly (``Σ_S weights = n``); with ``kernel="daubechies"`` it does not,
    because the periodised Daubechies diagonal is not constant — ``weights="self_normalized"``
    rescales the weights to sum to n (exact for constants, no longer unbiased in general).

    Parameters
    ----------
    X : array-like of shape (n, d)
    m : int
        Requested coreset size (the rank of the kernel). It can come out smaller — Haar with
        ``split="volume"`` when some of the m boxes hold no data, OPE/Daubechies features that are
        numerically rank deficient on duplicated or heavy-tailed data —: then a
        :class:`~thrifty.dpp.ReducedRankWarning` is issued and :attr:`size` records the true size.
    kernel : {"haar", "ope", "daubechies"}, default "haar"
    density : None, "uniform", "histogram", "kde", callable or array of shape (n,)
        Estimate γ̃ of the data density used in the features ``√(q/γ̃)Φ``.
    random_state : None, int or numpy Generator
    weights : {"unbiased", "self_normalized"}, default "unbiased"
    **kernel_options
        ``domain``, ``split``, ``order``, ``jacobi_params`` (see :func:`thrifty.dpp.discretize`).

    Attributes
    ----------
    m : int
        The requested size.
    size : int
        The size of the coreset (the kernel's rank; ``size < m`` only with a warning).
    indices : ndarray of int64, shape (size,)
    weights : ndarray of float64, shape (size,)
    inclusion_probabilities : ndarray of shape (n,)
        ``K_ii`` for every point.
    dpp : ProjectionDPP or StratifiedDPP
        The discrete kernel (reuse it to draw more coresets).
    seed_ : int
        The seed used (pass it back as ``random_state`` to reproduce the coreset); ``seed`` is a
        deprecated alias.

    Notes
    -----
    Coresets pickle and deep-copy; the copy's ``dpp`` samples the same as the original's.

    ``X`` may be a tall ``dask.array`` (kernel ``"haar"`` with ``split="volume"`` and a constant or
    histogram density, or ``"ope"`` with a constant density): the coreset is then computed on the
    cluster — never collecting X — and equals the single-machine coreset for the same seed. Then
    ``inclusion_probabilities`` holds ``K_ii`` of the coreset points only (shape (size,)) and
    ``dpp`` is a :class:`~thrifty.dpp.DistributedProjectionDPP` (``"ope"``) or None (``"haar"``).

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import Coreset
    >>> X = np.random.default_rng(0).uniform(size=(5000, 2))
    >>> cs = Coreset(X, 64, random_state=0)
    >>> cs.indices.shape, float(np.round(cs.weights.sum()))
    ((64,), 5000.0)
    """

    seed = DeprecatedAlias[int]("seed_")

    def __init__(
        self,
        X: Any,
        m: int,
        kernel: Kernel = "haar",
        density: Density = None,
        random_state: RandomState = None,
        *,
        weights: str = "unbiased",
        **kernel_options: Any,
    ) -> None:
        allowed = {"domain", "split", "order", "jacobi_params"}
        unknown = set(kernel_options) - allowed
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        if weights not in ("unbiased", "self_normalized"):
            raise ValueError(f"weights must be 'unbiased' or 'self_normalized', got {weights!r}")
        if is_dask_array(X):
            self._init_distributed(X, m, kernel, density, random_state, weights, kernel_options)
            return
        x = check_matrix64(X, "X")
        opts = {"domain": None, "split": "volume", "order": 2, "jacobi_params": (0.0, 0.0), **kernel_options}
        dpp = _discretize(x, m, "m", kernel, density, opts["domain"], opts["split"], opts["order"], opts["jacobi_params"])
        seed = seed_from_random_state(random_state)
        idx = dpp.sample(seed)
        kdiag = dpp.inclusion_probabilities()
        w = 1.0 / kdiag[idx]
        if weights == "self_normalized":
            w = w * (x.shape[0] / w.sum())
        self.X: npt.NDArray[np.float64] = x
        self.m: int = int(m)
        self.kernel: str = str(kernel)
        self.weights_mode: str = weights
        self.kernel_options: dict[str, Any] = dict(kernel_options)
        self.indices: IntArray = idx
        self.size: int = int(idx.size)
        self.weights: F64 = w
        self.inclusion_probabilities: F64 = kdiag
        self.dpp: ProjectionDPP | StratifiedDPP = dpp
        self.seed_: int = seed

    def _init_distributed(
        self, X: Any, m: Any, kernel: Any, density: Any, random_state: RandomState, weights: str, options: dict[str, Any]
    ) -> None:
        """The coreset of a tall dask array: the single-machine result for the same seed (see ``_dask``)."""
        Xa = _dask.aligned(X, "X")
        n = int(Xa.shape[0])
        mm = check_int(m, "m", minimum=1)
        if mm > n:
            raise ValueError(f"m = {mm} exceeds the number of points ({n})")
        if options.get("domain") is not None:
            raise ValueError("domain must be None for a dask array (the data's bounding box is used)")
        seed = seed_from_random_state(random_state)
        if kernel == "haar":
            split = options.get("split", "volume")
            if split != "volume":
                raise ValueError(f"split must be 'volume' for a dask array (a quantile split sorts all rows), got {split!r}")
            if not (density is None or (isinstance(density, str) and density in ("uniform", "histogram"))):
                raise ValueError(f"density must be None, 'uniform' or 'histogram' for a dask array with kernel='haar', got {density!r}")
            idx, w, rank, _ = _dask.haar_coreset(Xa, mm, seed)
            dpp: Any = None
        elif kernel == "ope":
            if not (density is None or (isinstance(density, str) and density == "uniform")):
                raise ValueError(f"density must be None or 'uniform' for a dask array with kernel='ope', got {density!r}")
            a_, b_ = (float(v) for v in options.get("jacobi_params", (0.0, 0.0)))
            if not (a_ > -1 and b_ > -1):
                raise ValueError(f"jacobi_params must be > -1, got {options.get('jacobi_params')}")
            lo, hi = _dask.data_box(Xa)

            def feats(block: Any) -> Any:
                z = _dask._map_unit(block, lo, hi, -1.0, 1.0)
                return np.asarray(_core.dpp_jacobi_features(z, mm, a_, b_, np.ones(z.shape[0])))

            F = Xa.map_blocks(feats, chunks=(Xa.chunks[0], (mm,)), dtype=np.float64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ReducedRankWarning)
                dpp = ProjectionDPP.from_features(F)
            idx = dpp.sample(seed)
            w = 1.0 / dpp.leverage_of(idx)
            rank = dpp.rank
        else:
            raise ValueError(f"kernel must be 'haar' or 'ope' for a dask array, got {kernel!r}")
        if rank < mm:
            warn(
                f"kernel={kernel!r} has rank {rank} < m = {mm} on these data: the coreset has {rank} points",
                ReducedRankWarning,
            )
        kd = 1.0 / w
        if weights == "self_normalized":
            w = w * (n / w.sum())
        self.X = Xa
        self.m = mm
        self.kernel = str(kernel)
        self.weights_mode = weights
        self.kernel_options = dict(options)
        self.indices = np.asarray(idx, dtype=np.int64)
        self.size = int(self.indices.size)
        self.weights = np.asarray(w, dtype=np.float64)
        # Only the coreset's own K_ii: an (n,) array would not fit on the driver at this scale.
        self.inclusion_probabilities = np.asarray(kd, dtype=np.float64)
        self.dpp = dpp
        self.seed_ = seed

    def __repr__(self) -> str:
        return (
            f"Coreset(n={self.X.shape[0]}, m={self.m}, size={self.size}, kernel={self.kernel!r}, "
            f"weights={self.weights_mode!r}, seed_={self.seed_})"
        )

    def estimate(self, f: Any) -> float:
        """``Σ_{i∈S} weights_i f_i`` for values ``f`` at all n points (estimates ``Σ_i f_i``)."""
        fv = check_vector(f, "f", int(self.X.shape[0]))
        return float(np.dot(self.weights, fv[self.indices]))

    def exact_variance(self, f: Any) -> float:
        """Exact variance of :meth:`estimate` over the DPP (unbiased weights), without sampling."""
        return self.dpp.exact_variance(f)


class MinibatchSampler:
    """DPP minibatches with unbiased weights for the mean gradient, as an iterator (and a torch Sampler).

    Every batch is an exact sample of a discrete DPP of rank ``batch_size`` on X (default: the Haar
    kernel on an equal-count k-d partition, i.e. stratified minibatches with exactly ``batch_size``
    items). With ``weights_i = 1/(n K_ii)``, ``Σ_{i∈B} weights_i ∇ℓ_i`` is an unbiased estimate of
    the mean gradient ``(1/n) Σ_i ∇ℓ_i``, with lower variance than a uniform minibatch when the
    per-item gradients vary smoothly over X (use low-dimensional features for X, e.g. a PCA).

    Parameters
    ----------
    X : array-like of shape (n, d)
        The features that define the kernel (not necessarily the model inputs).
    batch_size : int
        Requested batch size (the kernel's rank; with ``kernel="ope"``/``"daubechies"`` on
        duplicated or heavy-tailed data the rank can be smaller: a
        :class:`~thrifty.dpp.ReducedRankWarning` says so and :attr:`batch_size` is the true size).
    kernel : {"haar", "ope", "daubechies"}, default "haar"
    n_batches : int, optional
        Batches per pass of the iterator; default ``ceil(n / batch_size)``. Batches are drawn
        lazily, 64 at a time: any number of batches iterates in constant memory.
    density, random_state, **kernel_options
        As in :class:`Coreset`; ``split`` defaults to ``"quantile"`` here.

    Attributes
    ----------
    batch_size : int
        Size of every batch (the kernel's rank).
    item_weights : ndarray of shape (n,)
        ``1/(n K_ii)``: the weight of item i whenever it is in a batch.
    dpp : ProjectionDPP or StratifiedDPP
    seed_ : int
        Seed of the sampler (epoch e draws from seed ``(seed_·1000003 + e) mod (2⁶³−1)``);
        ``seed`` is a deprecated alias.

    Notes
    -----
    The sampler pickles and deep-copies (with its epoch counter): the copy yields the same batches
    as the original would.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import MinibatchSampler
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> sampler = MinibatchSampler(X, 32, random_state=0)
    >>> idx, w = next(iter(sampler))
    >>> idx.shape, w.shape, len(sampler)
    ((32,), (32,), 32)
    """

    seed = DeprecatedAlias[int]("seed_")

    def __init__(
        self,
        X: Any,
        batch_size: int,
        kernel: Kernel = "haar",
        *,
        n_batches: int | None = None,
        density: Density = None,
        random_state: RandomState = None,
        **kernel_options: Any,
    ) -> None:
        x = check_matrix64(X, "X")
        allowed = {"domain", "split", "order", "jacobi_params"}
        unknown = set(kernel_options) - allowed
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        bs = check_int(batch_size, "batch_size", minimum=1)
        if bs > x.shape[0]:
            raise ValueError(f"batch_size = {bs} exceeds the number of points ({x.shape[0]})")
        nb = None if n_batches is None else check_int(n_batches, "n_batches", minimum=1, maximum=sys.maxsize)
        split: Split = kernel_options.get("split", "quantile" if kernel == "haar" else "volume")
        opts = {"domain": None, "order": 2, "jacobi_params": (0.0, 0.0), **kernel_options, "split": split}
        self.dpp: ProjectionDPP | StratifiedDPP = _discretize(
            x, bs, "batch_size", kernel, density, opts["domain"], opts["split"], opts["order"], opts["jacobi_params"]
        )
        self.n_items: int = int(x.shape[0])
        self.batch_size: int = int(self.dpp.rank)
        self.n_batches: int = math.ceil(self.n_items / bs) if nb is None else nb
        self.item_weights: F64 = 1.0 / (self.n_items * self.dpp.inclusion_probabilities())
        self.seed_: int = seed_from_random_state(random_state)
        self._epoch = 0

    def __len__(self) -> int:
        return self.n_batches

    def __repr__(self) -> str:
        return (
            f"MinibatchSampler(n_items={self.n_items}, batch_size={self.batch_size}, "
            f"n_batches={self.n_batches}, seed_={self.seed_})"
        )

    def _epoch_batches(self) -> Iterator[IntArray]:
        """The batches of the next epoch, drawn lazily in chunks (batch s from stream (seed, s))."""
        seed = (self.seed_ * 1_000_003 + self._epoch) % (2**63 - 1)
        self._epoch += 1
        for offset in range(0, self.n_batches, _BATCH_CHUNK):
            size = min(_BATCH_CHUNK, self.n_batches - offset)
            yield from self.dpp._sample_range(size, seed, offset)

    def __iter__(self) -> Iterator[tuple[IntArray, F64]]:
        """One pass: ``n_batches`` pairs (indices int64 (batch_size,), weights float64 (batch_size,)),
        drawn lazily (constant memory)."""
        for b in self._epoch_batches():
            yield b, self.item_weights[b]

    def torch_sampler(self) -> Any:
        """A ``torch.utils.data.Sampler`` yielding lists of indices (use as ``batch_sampler=``).

        Look the weights up with ``sampler.item_weights[indices]``. Requires torch (imported here,
        never at package import).

        Raises
        ------
        ImportError
            If torch is not installed.
        """
        import importlib

        Sampler: Any = importlib.import_module("torch.utils.data").Sampler
        outer = self

        class _DPPBatchSampler(Sampler):  # type: ignore[misc]
            item_weights = outer.item_weights

            def __init__(self) -> None:
                pass

            def __iter__(self) -> Iterator[list[int]]:
                for b in outer._epoch_batches():
                    yield b.tolist()

            def __len__(self) -> int:
                return outer.n_batches

        return _DPPBatchSampler()
