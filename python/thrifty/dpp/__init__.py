"""Determinantal point processes: exact samplers, discrete wavelet/OPE kernels, coresets, minibatches
and greedy log-det selection.

- :class:`ProjectionDPP` (``K = UUᵀ``), :class:`LEnsemble` (full kernel or low-rank features;
  ``sample_k`` for k-DPPs), :class:`StratifiedDPP` (block-diagonal / Haar), :func:`orthonormalize`.
- :func:`discretize` turns a Haar, Daubechies or Jacobi/Legendre kernel into a projection DPP on a
  data set; :class:`Coreset` and :class:`MinibatchSampler` sample from it with unbiased weights.
- :func:`greedy_map`, :func:`select_entropy`, :func:`select_mutual_information`.

All samplers run in the Rust core, draw every sample from its own random stream (identical results
on any number of threads) and never form an n×n matrix unless given one. Long calls stop on Ctrl-C;
every object pickles; the seed of the last sampling call is ``seed_``. A sample or selection smaller
than asked comes with a :class:`ReducedRankWarning` and records its true size.
"""

from thrifty.dpp._checks import ReducedRankWarning
from thrifty.dpp._coreset import Coreset, MinibatchSampler
from thrifty.dpp._dask import DistributedProjectionDPP
from thrifty.dpp._ensemble import LEnsemble
from thrifty.dpp._greedy import (
    Selection,
    greedy_map,
    select_entropy,
    select_mutual_information,
)
from thrifty.dpp._kernels import (
    StratifiedDPP,
    daubechies_phi,
    discretize,
    estimate_density,
)
from thrifty.dpp._projection import ProjectionDPP, orthonormalize

__all__ = [
    "Coreset",
    "DistributedProjectionDPP",
    "LEnsemble",
    "MinibatchSampler",
    "ProjectionDPP",
    "ReducedRankWarning",
    "Selection",
    "StratifiedDPP",
    "daubechies_phi",
    "discretize",
    "estimate_density",
    "greedy_map",
    "orthonormalize",
    "select_entropy",
    "select_mutual_information",
]
