"""Power-of-two rescaling of k-means data whose squared distances leave the floating-point range.

k-means' assignment is scale-free, but its arithmetic is not: for float64 data beyond about 2**±500
the squared distances overflow to inf (NaN centres, an ``inertia_`` of 0.0) or underflow to 0 (every
point in one cluster). Multiplying X by 2**-e is exact (only exponents change), so a fit on the
rescaled data gives the labels exact arithmetic would give, and its centres and inertia are scaled
back exactly: centres × 2**e, squared quantities × 4**e (an inertia beyond float64 then becomes inf
or 0.0 with a warning, which is the true value rounded). Data whose magnitudes span more than the
range itself (1e-200 next to 1e200) cannot be helped by one scale and keep the unscaled result.

The check costs nothing on ordinary data: only a fit whose result shows the symptoms (non-finite
centres or inertia, an inertia below :data:`_TINY`, centres beyond the safe range) reads X's
largest magnitude.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from thrifty._warn import warn

# Largest |value| left alone, as a power of two: squared distances summed over rows and features stay
# well inside the range (float64 2**±1022, float32 2**±126).
_SAFE_EXPONENT = {np.dtype(np.float64): 400, np.dtype(np.float32): 40}
# An inertia below this suggests underflowed squared distances (a gate for the check, not a verdict).
_TINY = {np.dtype(np.float64): 2.0**-600, np.dtype(np.float32): 2.0**-60}


def extreme_exponent(values: Any) -> int:
    """``e`` such that ``values · 2**-e`` has its largest magnitude in [0.5, 1), or 0 when the values
    are all zero or their largest magnitude is within ``2**±_SAFE_EXPONENT`` (no rescaling needed).
    ``values`` is a dense array, a CSR matrix (its stored values) or a dask array."""
    data = values.data if sp.issparse(values) else values
    if data.size == 0:
        return 0
    lo, hi = data.min(), data.max()  # two reads, no n × d temporary of |X|
    if hasattr(lo, "compute"):  # a dask array: both reductions in one pass
        import importlib

        dask: Any = importlib.import_module("dask")  # partial type information; used untyped
        lo, hi = dask.compute(lo, hi)
    amax = max(-float(lo), float(hi))
    safe = _SAFE_EXPONENT.get(np.dtype(data.dtype), 400)
    if amax == 0.0 or not np.isfinite(amax) or 2.0**-safe <= amax <= 2.0**safe:
        return 0
    return int(np.frexp(amax)[1])


def looks_out_of_range(inertia: float, centers: npt.NDArray[Any]) -> bool:
    """Whether a fit shows the symptoms of squared distances outside the range: non-finite centres
    or inertia, a tiny inertia, or centres beyond the safe range (float32 distances can overflow
    while the inertia, summed in float64, stays finite)."""
    tiny = _TINY.get(np.dtype(centers.dtype), 2.0**-600)
    if not (np.isfinite(inertia) and np.isfinite(centers).all()) or 0.0 <= inertia < tiny:
        return True
    return extreme_exponent(centers) != 0


def scaled(X: Any, e: int) -> Any:
    """``X · 2**-e`` (exact), same type and dtype; a new array, X untouched."""
    if sp.issparse(X):
        out = X.copy()
        out.data = np.ldexp(X.data, -e).astype(X.dtype, copy=False)
        return out
    if hasattr(X, "map_blocks"):  # dask: lazy
        a = -e // 2  # two factors: 2**-e alone can overflow for subnormal data (e down to -1073)
        return (X * 2.0**a * 2.0 ** (-e - a)).astype(X.dtype)
    return np.ldexp(X, -e).astype(X.dtype, copy=False)


def unscaled_sq(value: float, e: int) -> float:
    """A squared quantity of the rescaled fit (inertia, SSE) back in X's units: ``value · 4**e``;
    inf or 0.0 where the true value is beyond float64 (the caller warns)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(np.float64(value), 2 * e))


def warn_out_of_range(inertia: float, scaled_inertia: float | None) -> None:
    """Say so when ``inertia_`` is beyond float64 (scikit-learn reports inf too, silently).
    ``scaled_inertia``: the rescaled fit's own inertia when the fit was rescaled, else None."""
    exact = "the assignment and centres are exact (computed on X rescaled by a power of two)"
    if not np.isfinite(inertia):
        tail = exact if scaled_inertia is not None else "the assignment may be unreliable: rescale X"
        warn(
            "inertia_ overflows float64 (squared distances of X, times sample_weight, exceed 1.8e308); "
            f"it is reported as inf; {tail}",
            RuntimeWarning,
        )
    elif scaled_inertia is not None and inertia == 0.0 and scaled_inertia > 0.0:
        warn(
            "inertia_ underflows float64 (squared distances of X, times sample_weight, are below "
            f"2.2e-308); it is reported as 0.0; {exact}",
            RuntimeWarning,
        )
