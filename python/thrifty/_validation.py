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
    a: Any, name: str, dtype: type[np.floating[Any]] | None = np.float64, *, min_rows: int = 1
) -> npt.NDArray[Any]:
    """Return ``a`` as a C-contiguous 2-D float array, or raise a ``ValueError``/``TypeError`` naming ``name``.

    ``dtype=None`` keeps float32/float64 as given (other inputs become float64).
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
    out = np.ascontiguousarray(arr, dtype=target)
    if not np.isfinite(out).all():
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
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return out


# ------------------------------------------------------------------------------------------------
# inference helpers (thrifty.inference): scalar checks that name the argument, allocation budgets,
# the inference n_jobs cap and exact power-of-two rescaling for badly scaled data


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


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 1 << 40


def check_allocation(name: str, count: int, bytes_each: int) -> None:
    """Refuse (``ValueError`` naming ``name``) a size whose arrays would not fit in physical memory,
    before anything is allocated."""
    need = count * bytes_each
    have = _physical_memory()
    if need > have:
        raise ValueError(
            f"{name}={count} needs about {need / 2**30:.3g} GiB, more than this machine's memory "
            f"({have / 2**30:.3g} GiB)"
        )


def check_inference_n_jobs(n_jobs: Any) -> int | None:
    """:func:`check_n_jobs` capped at the CPU count (more threads than cores only slows the core)."""
    jobs = check_n_jobs(n_jobs)
    if jobs is None:
        return None
    return min(jobs, os.cpu_count() or 1)


def power_of_two_scale(a: npt.NDArray[np.float64], axis: int | None = None) -> npt.NDArray[np.float64]:
    """Exponents e (per column with ``axis=0``, one for the array with ``axis=None``) such that
    ``a * 2.0**-e`` has max |value| in [0.5, 1): an exact rescaling that keeps sums of squares of
    1e±150-scaled data away from overflow and underflow. 0 where the values are all 0."""
    m = np.max(np.abs(a), axis=axis) if a.size else np.zeros(() if axis is None else a.shape[1 - axis])
    _, e = np.frexp(m)
    return np.asarray(e, dtype=np.float64)
