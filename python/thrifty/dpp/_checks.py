"""Validation helpers of :mod:`thrifty.dpp` (friendly errors that name the argument)."""

from __future__ import annotations

import numbers
import sys
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from thrifty._validation import (
    check_finite_matrix,
    check_finite_vector,
    check_n_jobs_capped,
    from_pandas,
    physical_memory,
)
from thrifty._warn import warn

T = TypeVar("T")
FloatArray = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]


class ReducedRankWarning(UserWarning):
    """A DPP sample or a selection has fewer items than asked (the kernel's numerical rank, the
    number of non-empty cells or of positive gains is smaller); the result records the true size."""


A = TypeVar("A")


class DeprecatedAlias(Generic[A]):
    """A read-only attribute kept under an old name: reading it warns (FutureWarning) and returns
    the attribute ``new``; assigning to it raises AttributeError."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.name = new

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        warn(f"{self.name} is deprecated and will be removed; use {self.new}", FutureWarning)
        return getattr(obj, self.new)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is a read-only alias of {self.new}")


def check_int(value: Any, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum], or a TypeError/ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if maximum is None and v < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {v}")
    if maximum is not None and not minimum <= v <= maximum:
        raise ValueError(f"{name} must be between {minimum} and {maximum}, got {v}")
    return v


# the budget of check_result_size (a module-level name, so tests can lower it)
memory_budget = physical_memory


def check_result_size(count: int, width: int, name: str, *, itemsize: int = 8, what: str = "the result") -> None:
    """ValueError naming ``name`` when ``count × width`` values of ``itemsize`` bytes exceed the
    machine's physical memory (checked before anything is allocated)."""
    need = count * max(width, 1) * itemsize
    budget = memory_budget()
    if need > budget:
        raise ValueError(
            f"{name} = {count} asks for {need / 2**30:.3g} GiB for {what}, "
            f"more than this machine's {budget / 2**30:.3g} GiB of memory"
        )


# scikit-learn's ``n_jobs`` as a thread count, capped at the number of CPUs
check_jobs = check_n_jobs_capped


def as_array(a: Any, name: str) -> Any:
    """Array-likes as NumPy arrays, pandas objects (nullable dtypes, booleans, pd.NA) included."""
    return from_pandas(a, name, strict=True)


def check_positive_float(value: Any, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'} and finite, got {v}")
    return v


def check_matrix(a: Any, name: str, *, finite: bool = True) -> FloatArray:
    """A C-contiguous float32/float64 array (float32 kept; other dtypes become float64).

    ``finite=False`` leaves the NaN/inf check to the Rust core (same message, one pass less over
    large arrays).
    """
    return check_finite_matrix(as_array(a, name), name, dtype=None, finite=finite)


def check_matrix64(a: Any, name: str) -> npt.NDArray[np.float64]:
    """A C-contiguous float64 array."""
    out: npt.NDArray[np.float64] = check_finite_matrix(as_array(a, name), name, dtype=np.float64)
    return out


def check_vector(a: Any, name: str, length: int) -> npt.NDArray[np.float64]:
    return check_finite_vector(as_array(a, name), name, length)


def readonly_copy(a: FloatArray) -> FloatArray:
    """A private, read-only copy (user arrays are never modified nor aliased)."""
    out = np.array(a, copy=True, order="C")
    out.setflags(write=False)
    return out


def resolve_weights(weights: Any, kdiag: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
    """Per-item weights of a linear statistic: "unbiased" (1/K_ii), "none" (1) or an array."""
    if isinstance(weights, str):
        if weights == "unbiased":
            with np.errstate(divide="ignore"):
                w = np.where(kdiag > 0, 1.0 / np.where(kdiag > 0, kdiag, 1.0), 0.0)
            return np.asarray(w, dtype=np.float64)
        if weights == "none":
            return np.ones(n)
        raise ValueError(f"weights must be 'unbiased', 'none' or an array, got {weights!r}")
    return check_vector(weights, "weights", n)


def show_progress(progress: bool | None) -> bool | None:
    """``progress`` as asked; ``None`` (automatic) becomes False unless stderr is a terminal."""
    if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return False
    return progress


def run_chunked(count: int, call: Callable[[int, int], T], progress: bool | None, desc: str) -> list[T]:
    """Run ``call(offset, size)`` over chunks of ``count`` samples.

    Sample ``s`` always draws from stream (seed, s), so chunking does not change the result. Each
    call can be interrupted with Ctrl-C (the core checks a cancel flag between samples). A tqdm
    progress bar is shown when ``progress`` is True, or when it is None, stderr is a terminal and
    the work is estimated to take more than a second.
    """
    progress = show_progress(progress)
    if progress is not True and (count <= 256 or progress is False):
        return [call(0, count)]
    chunk = max(64, -(-count // 50))
    out: list[T] = []
    bar: Any = None
    start = time.perf_counter()
    offset = 0
    try:
        while offset < count:
            size = min(chunk, count - offset)
            out.append(call(offset, size))
            offset += size
            if bar is not None:
                bar.update(size)
            elif offset < count and (progress or (time.perf_counter() - start) * count / offset > 1.0):
                from tqdm.auto import tqdm

                bar = tqdm(total=count, initial=offset, desc=desc, unit="sample")
    finally:
        if bar is not None:
            bar.close()
    return out
