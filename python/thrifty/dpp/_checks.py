"""Validation helpers of :mod:`thrifty.dpp` (friendly errors that name the argument)."""

from __future__ import annotations

import numbers
import time
from typing import Any, Callable, TypeVar

import numpy as np
import numpy.typing as npt

from thrifty._validation import check_finite_matrix, check_finite_vector

T = TypeVar("T")
FloatArray = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]


def check_int(value: Any, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum], or a TypeError/ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if v < minimum or (maximum is not None and v > maximum):
        hi = "" if maximum is None else f", {maximum}"
        raise ValueError(f"{name} must be in [{minimum}{hi}], got {v}")
    return v


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
    if finite:
        return check_finite_matrix(a, name, dtype=None)
    arr = np.asarray(a)
    if arr.dtype.kind in "OUSV" or np.iscomplexobj(arr):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got {arr.ndim}-D with shape {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least 1 row(s) and 1 column, got shape {arr.shape}")
    target = arr.dtype if arr.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    out: FloatArray = np.ascontiguousarray(arr, dtype=target)
    return out


def check_matrix64(a: Any, name: str) -> npt.NDArray[np.float64]:
    """A C-contiguous float64 array."""
    out: npt.NDArray[np.float64] = np.asarray(check_finite_matrix(a, name, dtype=np.float64), dtype=np.float64)
    return out


def check_vector(a: Any, name: str, length: int) -> npt.NDArray[np.float64]:
    return check_finite_vector(a, name, length)


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


def run_chunked(count: int, call: Callable[[int, int], T], progress: bool | None, desc: str) -> list[T]:
    """Run ``call(offset, size)`` over chunks of ``count`` samples.

    Sample ``s`` always draws from stream (seed, s), so chunking does not change the result. Between
    chunks Python regains control (Ctrl-C interrupts the work) and a tqdm progress bar is shown when
    ``progress`` is True, or when it is None and the work is estimated to take more than a second.
    """
    if count <= 256 and progress is not True:
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
            elif progress is not False and offset < count:
                if progress or (time.perf_counter() - start) * count / offset > 1.0:
                    from tqdm.auto import tqdm

                    bar = tqdm(total=count, initial=offset, desc=desc, unit="sample")
    finally:
        if bar is not None:
            bar.close()
    return out
