"""thrifty — cheaper machine learning on a Rust core.

Subpackages, one per capability:

- :mod:`thrifty.cluster` — batched Hartigan k-means (:class:`~thrifty.cluster.HartiganKMeans`).
- :mod:`thrifty.inference` — held-out tests for supervised subspaces (PLS, SPCA, probes).
- :mod:`thrifty.dpp` — determinantal point process samplers, coresets and minibatches.
"""

from thrifty._core import __version__

__all__ = ["__version__"]
