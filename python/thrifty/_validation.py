"""Input normalisation shared by every capability (see DESIGN.md, "Data flow" and "Randomness").

Python validates for friendly messages; the Rust core validates again for safety.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

import numpy as np
import numpy.typing as npt

RandomState = None | int | np.random.Generator | np.random.RandomState

_SEED_BOUND = 2**63 - 1


def seed_from_random_state(random_state: RandomState) -> int:
    """Turn a scikit-learn style ``random_state`` into the 64-bit seed the core uses.

    ``None`` draws a fresh seed from the OS, an ``int`` is used as is (must be >= 0), a NumPy
    ``Generator``/``RandomState`` is advanced once to draw the seed. Results record the seed used,
    so any run can be reproduced by passing it back as an ``int``.

    Raises
    ------
    ValueError
        If the integer is negative or too large.
    TypeError
        If ``random_state`` is of another type.
    """
    if random_state is None:
        return int.from_bytes(os.urandom(8), "little") & _SEED_BOUND
    if isinstance(random_state, (bool, np.bool_)):
        raise TypeError("random_state must be None, an int or a numpy Generator, got a bool")
    if isinstance(random_state, numbers.Integral):
        seed = int(random_state)
        if seed < 0 or seed > _SEED_BOUND:
            raise ValueError(f"random_state must be in [0, 2**63 - 1], got {seed}")
        return seed
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, _SEED_BOUND, dtype=np.int64))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1)) * (2**31) + int(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator, got {type(random_state).__name__}"
    )


def check_n_jobs(n_jobs: int | None) -> int | None:
    """Map scikit-learn's ``n_jobs`` to a thread count for the core (``None`` = all cores).

    ``-1`` means all cores, ``-2`` all but one, and so on; ``0`` is an error.
    """
    if n_jobs is None:
        return None
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {type(n_jobs).__name__}")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs must be a non-zero int (None or -1 for all cores), got 0")
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return n_jobs


def check_finite_matrix(
    a: Any,
    name: str,
    dtype: type[np.floating[Any]] | None = np.float64,
    *,
    min_rows: int = 1,
    finite: bool = True,
) -> npt.NDArray[Any]:
    """Return ``a`` as a C-contiguous 2-D float array, or raise a ``ValueError``/``TypeError`` naming ``name``.

    ``dtype=None`` keeps float32/float64 as given (other inputs become float64). ``finite=False``
    leaves the NaN/inf check to the Rust core (same message there, one pass less over large arrays).
    """
    arr = np.asarray(a)
    if arr.dtype.kind in "OUSV" or np.iscomplexobj(arr):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got {arr.ndim}-D with shape {arr.shape}")
    if arr.shape[0] < min_rows or arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least {min_rows} row(s) and 1 column, got shape {arr.shape}")
    if dtype is None:
        target = arr.dtype if arr.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    else:
        target = np.dtype(dtype)
    # aligned too: arrays unpickled from another process (a Dask worker) can be unaligned
    out = np.require(arr, dtype=target, requirements=["C", "A"])
    if finite and not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return out


def check_finite_vector(a: Any, name: str, length: int | None = None) -> npt.NDArray[np.float64]:
    """Return ``a`` as a contiguous 1-D float64 array, or raise naming ``name``."""
    arr = np.asarray(a)
    if arr.dtype.kind in "OUSV" or np.iscomplexobj(arr):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} has length {arr.shape[0]}, expected {length}")
    out = np.require(arr, dtype=np.float64, requirements=["C", "A"])  # aligned: see check_finite_matrix
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return out


def from_pandas(a: Any, name: str = "the input", *, strict: bool = False) -> Any:
    """pandas objects as float NumPy arrays, like scikit-learn; anything else is returned unchanged.

    Nullable integer/float/boolean dtypes and ``pd.NA`` become NaN (which the finiteness checks then
    reject naming the argument). ``strict=True`` (:mod:`thrifty.dpp`): only pandas objects are
    converted, float32 frames stay float32 and a non-numeric column raises a ``TypeError`` naming
    ``name``. ``strict=False`` (:mod:`thrifty.inference`): any object with a pandas-like
    ``to_numpy(dtype=, na_value=)`` becomes float64; when that conversion fails (non-numeric
    columns) the object is returned unchanged so that the generic dtype check names the argument.
    """
    if isinstance(a, np.ndarray) or not hasattr(a, "to_numpy"):
        return a
    if not strict:
        if not (hasattr(a, "dtypes") or hasattr(a, "dtype")):
            return a
        try:
            return a.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            return a
    if not type(a).__module__.startswith("pandas"):
        return a
    import importlib

    ptypes: Any = importlib.import_module("pandas.api.types")
    is_bool_dtype, is_numeric_dtype = ptypes.is_bool_dtype, ptypes.is_numeric_dtype
    dtypes = list(a.dtypes) if hasattr(a, "columns") else [a.dtype]
    for dt in dtypes:
        if not (is_numeric_dtype(dt) or is_bool_dtype(dt)) or str(dt).startswith("complex"):
            raise TypeError(f"{name} must hold real numbers; it has a column of dtype {dt}")
    target = np.float32 if dtypes and all(str(dt) in ("float32", "Float32") for dt in dtypes) else np.float64
    return a.to_numpy(dtype=target, na_value=np.nan)


F64Array = npt.NDArray[np.float64]


def check_sample_weight(sample_weight: Any, n: int) -> F64Array | None:
    """``None``, or non-negative finite float64 weights of length ``n`` with a positive sum.

    Only relative weights matter, so they come back divided by the power of two nearest their
    maximum (exact): weights of 1e308 (whose sum overflows) or 1e-320 (subnormal, whose squares
    vanish) give the unit-weight result. A new array: the caller's is never modified."""
    if sample_weight is None:
        return None
    w = check_finite_vector(sample_weight, "sample_weight", length=n)
    if (w < 0).any():
        raise ValueError("sample_weight must be non-negative")
    if not w.max(initial=0.0) > 0:
        raise ValueError("sample_weight must have a positive sum")
    out: F64Array = np.ldexp(w, -power_of_two_scale(w).astype(np.int64))
    return out


def check_xy(
    X: Any, y: Any, sample_weight: Any, allow_multi: bool = False
) -> tuple[F64Array, F64Array, F64Array | None]:
    """Supervised data as float64 arrays (pandas accepted): X (n, p), y (n,) — or (n, m) with
    ``allow_multi`` — not constant, and checked weights. Errors name the argument."""
    X, y, sample_weight = from_pandas(X), from_pandas(y), from_pandas(sample_weight)
    x = check_finite_matrix(X, "X", np.float64, min_rows=1)
    yv = np.asarray(y)
    if yv.ndim == 2 and yv.shape[1] == 1:
        yv = yv[:, 0]
    if yv.ndim == 2 and yv.shape[1] > 1 and allow_multi:
        ym = check_finite_matrix(yv, "y", np.float64, min_rows=1)
        if ym.shape[0] != x.shape[0]:
            raise ValueError(f"X and y have different lengths: X has {x.shape[0]} rows, y has {ym.shape[0]}")
        if np.all(np.ptp(ym, axis=0) == 0.0):
            raise ValueError("every column of y is constant (zero variance); there is nothing to predict")
        return x, ym, check_sample_weight(sample_weight, x.shape[0])
    yarr = check_finite_vector(yv, "y")
    if yarr.shape[0] != x.shape[0]:
        raise ValueError(f"X and y have different lengths: X has {x.shape[0]} rows, y has {yarr.shape[0]} values")
    if np.ptp(yarr) == 0.0:
        raise ValueError("y is constant (zero variance); there is nothing to predict")
    # copies are never modified; C-contiguous float64 copies made above only when needed
    return x, yarr, check_sample_weight(sample_weight, x.shape[0])


# ------------------------------------------------------------------------------------------------
# scalar checks that name the argument, memory budgets, the capped n_jobs and exact power-of-two
# rescaling for badly scaled data (thrifty.inference; memory and n_jobs also thrifty.dpp and
# thrifty.cluster)


def check_int(value: Any, name: str, minimum: int) -> int:
    """Return ``value`` as an int ``>= minimum``; ``TypeError``/``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(value)}")
    return int(value)


def check_float(value: Any, name: str, low: float, high: float, *, open_low: bool = True) -> float:
    """Return ``value`` as a finite float in ``(low, high)`` (``[low, high)`` with ``open_low=False``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    ok = (v > low if open_low else v >= low) and v < high
    if not (math.isfinite(v) and ok):
        lo = f"{name} > {low:g}" if open_low else f"{name} >= {low:g}"
        hi = "" if high == math.inf else f" and {name} < {high:g}"
        raise ValueError(f"{name} must satisfy {lo}{hi}, got {v}")
    return v


def physical_memory() -> int:
    """Bytes of physical memory: the most any single allocation a user's sizes ask for may take."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 1 << 40


def check_allocation(name: str, count: int, bytes_each: int) -> None:
    """Refuse (``ValueError`` naming ``name``) a size whose arrays would not fit in physical memory,
    before anything is allocated."""
    need = count * bytes_each
    have = physical_memory()
    if need > have:
        raise ValueError(
            f"{name}={count} needs about {need / 2**30:.3g} GiB, more than this machine's memory "
            f"({have / 2**30:.3g} GiB)"
        )


def check_n_jobs_capped(n_jobs: Any) -> int | None:
    """:func:`check_n_jobs` capped at the CPU count (more threads than cores only slows the core)."""
    jobs = check_n_jobs(n_jobs)
    if jobs is None:
        return None
    return min(jobs, os.cpu_count() or 1)


# the name thrifty.inference imports
check_inference_n_jobs = check_n_jobs_capped


def power_of_two_scale(a: npt.NDArray[np.float64], axis: int | None = None) -> npt.NDArray[np.float64]:
    """Exponents e (per column with ``axis=0``, one for the array with ``axis=None``) such that
    ``a * 2.0**-e`` has max |value| in [0.5, 1): an exact rescaling that keeps sums of squares of
    1e±150-scaled data away from overflow and underflow. 0 where the values are all 0."""
    m = np.max(np.abs(a), axis=axis) if a.size else np.zeros(() if axis is None else a.shape[1 - axis])
    _, e = np.frexp(m)
    return np.asarray(e, dtype=np.float64)
