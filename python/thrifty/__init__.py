"""thrifty — cheaper machine learning on a Rust core.

Subpackages, one per capability (imported lazily on first attribute access, so ``import thrifty``
then ``thrifty.cluster`` works and costs nothing until used):

- :mod:`thrifty.cluster` — batched Hartigan k-means (:class:`~thrifty.cluster.HartiganKMeans`).
- :mod:`thrifty.inference` — held-out tests for supervised subspaces (PLS, SPCA, probes).
- :mod:`thrifty.dpp` — determinantal point process samplers, coresets and minibatches.
- :mod:`thrifty.compress` — activation compression for PyTorch training (needs ``torch``:
  ``pip install 'thrifty[torch]'``).

Extras: ``thrifty[torch]``, ``thrifty[dask]`` (the scale-out paths: dask[array] + distributed),
``thrifty[plots]`` (matplotlib), ``thrifty[text]``, ``thrifty[all]``; a missing one raises an ImportError
naming the extra.

:func:`show_versions` prints the versions of thrifty, its dependencies and its native backends,
for bug reports.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from thrifty._cpu_check import check_cpu

check_cpu()  # before the compiled core: an older CPU gets an ImportError naming what it lacks, not a SIGILL

from thrifty._core import __version__  # noqa: E402
from thrifty._show_versions import show_versions  # noqa: E402

if TYPE_CHECKING:
    # redundant aliases: explicit re-exports for type checkers (the runtime import is lazy, below)
    from thrifty import cluster as cluster
    from thrifty import compress as compress
    from thrifty import dpp as dpp
    from thrifty import inference as inference
    from thrifty import text as text

_SUBMODULES = ("cluster", "compress", "dpp", "inference", "text")

__all__ = ["__version__", "show_versions", *_SUBMODULES]


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        module = importlib.import_module(f"thrifty.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'thrifty' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
