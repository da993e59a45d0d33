"""Dask helpers shared by the capability packages (private; imports nothing from them)."""

from __future__ import annotations

from typing import Any


def is_dask_array(x: Any) -> bool:
    """Whether ``x`` is a ``dask.array.Array``, without importing dask when ``x`` is not from it."""
    if type(x).__module__.split(".")[0] != "dask":
        return False
    import dask.array as da

    return isinstance(x, da.Array)
