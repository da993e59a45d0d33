"""Greedy log-det selection: MAP / entropy and mutual information."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._warn import warn
from thrifty.dpp._checks import (
    IntArray,
    ReducedRankWarning,
    check_int,
    check_matrix,
    check_positive_float,
)

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Selection:
    """Result of a greedy selection.

    Attributes
    ----------
    indices : ndarray of int64
        Chosen items in the order they were picked.
    log_det : float
        ``log det Σ_AA`` of the chosen set (with the nugget for mutual information).
    conditional_variances : ndarray of float64
        Variance of each chosen item given the previously chosen ones (the Cholesky pivots);
        ``log_det = Σ log conditional_variances``. For features scaled far outside 2^±200 (the
        selection is scale-free and runs rescaled by a power of two) a variance beyond the float
        range reads inf or 0; ``log_det`` stays exact.
    gains : ndarray of float64 or None
        Mutual-information gains ``½ log(σ²(y|A)/σ²(y|V∖(A∪y)))`` (mutual information only).
    requested : int
        The k asked for. ``indices.size < requested`` when the selection ran out of items with a
        positive gain (every remaining conditional variance below the rank tolerance); a
        :class:`~thrifty.dpp.ReducedRankWarning` is issued then.
    """

    indices: IntArray
    log_det: float
    conditional_variances: F64
    gains: F64 | None = None
    requested: int = 0

    @property
    def complete(self) -> bool:
        """Whether all ``requested`` items were selected."""
        return int(self.indices.size) >= self.requested


def _square(a: Any, name: str) -> npt.NDArray[Any]:
    # Finiteness and symmetry are checked by the core, as far as check_input asks.
    m = check_matrix(a, name, finite=False)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be square, got shape {m.shape}")
    return m


def _check_mode(check_input: Any) -> Literal["read", "full", "skip"]:
    if check_input is True or (isinstance(check_input, (bool, np.bool_)) and check_input):
        return "read"
    if check_input is False or isinstance(check_input, (bool, np.bool_)):
        return "skip"
    if isinstance(check_input, str) and check_input == "full":
        return "full"
    raise TypeError(f"check_input must be True, False or 'full', got {check_input!r}")


def _result(out: Any, k: int) -> Selection:
    p = np.asarray(out["pivots"], dtype=np.float64)
    log_det = float(np.sum(np.log(p)))
    # features far outside 2^±200 ran rescaled by a power of two: the variances are p · 2^e (inf or
    # 0 where not representable) and the log-determinant adds e·ln 2 per item exactly
    e = int(out.get("pivot_exponent", 0))
    if e:
        log_det += p.size * e * float(np.log(2.0))
        with np.errstate(over="ignore", under="ignore"):
            p = np.ldexp(p, e)
    gains = out.get("gains")
    sel = Selection(
        np.asarray(out["indices"], dtype=np.int64),
        log_det,
        p,
        None if gains is None else np.asarray(gains, dtype=np.float64),
        k,
    )
    if sel.indices.size < k:
        warn(
            f"selected {sel.indices.size} of k = {k} items: no remaining item has a positive gain (every "
            "conditional variance is below the rank tolerance); Selection.requested records k",
            ReducedRankWarning,
        )
    return sel


def select_entropy(
    cov: Any, k: int, *, tol: float = 1e-10, check_input: bool | Literal["full"] = True
) -> Selection:
    """Greedy maximum-entropy (log-det) selection of k items from a covariance matrix.

    Each step adds the item with the largest conditional variance given the chosen ones — the
    argmax mode of the core's pivoted-Cholesky loop: O(nk²) time, O(nk) extra memory. Stops early
    (fewer than k items) when every remaining conditional variance is below ``tol · max Σ_ii``.

    Parameters
    ----------
    cov : array-like of shape (n, n)
        Symmetric positive semi-definite (float32 or float64).
    k : int
        1 ≤ k ≤ n.
    tol : float
        Relative rank tolerance.
    check_input : bool or "full", default True
        The selection reads only the diagonal and the rows of the chosen items, O(nk) entries.
        ``True`` validates every entry it reads: the diagonal is finite and non-negative, each
        chosen row is finite and equals the matching column (to ``1e-8 ·`` the largest entry read),
        so the result is that of a valid covariance whatever the unread entries hold. ``"full"``
        validates the whole matrix (finite, symmetric, non-negative diagonal): O(n²) reads, several
        times the selection at n = 10⁴. ``False`` validates nothing — a NaN never crashes, but the
        result is then undefined.

    Returns
    -------
    Selection
        ``indices`` (int64, at most k), ``log_det``, the ``conditional_variances`` (pivots) and
        ``requested`` = k. Fewer than k items only with a :class:`~thrifty.dpp.ReducedRankWarning`.

    Raises
    ------
    ValueError
        Non-square or empty ``cov``, ``k`` outside [1, n], NaN/inf in an entry that is checked,
        a negative diagonal entry, or an asymmetry in the entries that are checked.
    TypeError
        Non-numeric ``cov`` or a ``check_input`` that is not a bool or ``"full"``.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import select_entropy
    >>> Z = np.random.default_rng(0).normal(size=(50, 8))
    >>> sel = select_entropy(Z @ Z.T, 3)
    >>> sel.indices.shape
    (3,)
    """
    c = _square(cov, "cov")
    kk = check_int(k, "k", minimum=1, maximum=c.shape[0])
    t = check_positive_float(tol, "tol")
    return _result(_core.dpp_greedy_entropy(c, kk, t, _check_mode(check_input)), kk)


def greedy_map(L: Any = None, *, features: Any = None, k: int, tol: float = 1e-10) -> Selection:
    """Greedy MAP of a DPP: approximately ``argmax_{|A|=k} det L_A`` (Chen, Zhang & Zhou 2018).

    Give ``L`` (n×n) or ``features`` Φ (n×d, ``L = ΦΦᵀ``; O(ndk) without forming L). Stops at the
    numerical rank of L (fewer than k items, with a :class:`~thrifty.dpp.ReducedRankWarning`;
    ``Selection.requested`` records k).

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import greedy_map
    >>> F = np.random.default_rng(0).normal(size=(100, 5))
    >>> greedy_map(features=F, k=5).indices.shape
    (5,)
    """
    if (L is None) == (features is None):
        raise ValueError("give exactly one of L and features")
    if L is not None:
        return select_entropy(L, k, tol=tol)
    f = check_matrix(features, "features")
    kk = check_int(k, "k", minimum=1, maximum=f.shape[0])
    t = check_positive_float(tol, "tol")
    return _result(_core.dpp_greedy_entropy_features(f, kk, t), kk)


def select_mutual_information(
    cov: Any, k: int, *, noise: float | None = None, check_input: bool = True
) -> Selection:
    """Greedy mutual-information selection (Krause, Singh & Guestrin 2008) on a covariance matrix.

    Maximises ``I(A; V∖A)`` greedily: the gain of y is ``½ log σ²(y|A) − ½ log σ²(y|V∖(A∪y))``.
    The first variance comes from the pivoted-Cholesky loop, the second from the inverse covariance
    of the remaining items, updated by rank-one downdates: O(n³ + kn²) time, O(n²) memory.

    Parameters
    ----------
    cov : array-like of shape (n, n)
    k : int
    noise : float, optional
        Nugget added to the diagonal (default ``1e-6 · mean(diag(cov))``), so no variance vanishes.
    check_input : bool, default True
        Validate the whole matrix first (finite, symmetric, non-negative diagonal): O(n²), small
        beside the O(n³) inverse that reads every entry.

    Notes
    -----
    Ctrl-C stops the selection between steps (not inside the initial O(n³) inverse).

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import select_mutual_information
    >>> x = np.linspace(0, 1, 40)
    >>> C = np.exp(-((x[:, None] - x[None, :]) ** 2) / 0.02)
    >>> select_mutual_information(C, 4).indices.shape
    (4,)
    """
    c = np.ascontiguousarray(_square(cov, "cov"), dtype=np.float64)
    kk = check_int(k, "k", minimum=1, maximum=c.shape[0])
    if noise is None:
        nz = 1e-6 * float(np.mean(np.diag(c)))
        nz = nz if nz > 0 else 1e-12
    else:
        nz = check_positive_float(noise, "noise")
    return _result(_core.dpp_greedy_mutual_information(c, kk, nz, bool(check_input)), kk)
