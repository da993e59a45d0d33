"""Determinantal point processes: exact samplers, discrete wavelet/OPE kernels, coresets, minibatches
and greedy log-det selection.

- :class:`ProjectionDPP` (``K = UUᵀ``), :class:`LEnsemble` (full kernel or low-rank features;
  ``sample_k`` for k-DPPs), :class:`StratifiedDPP` (block-diagonal / Haar), :func:`orthonormalize`.
- :func:`discretize` turns a Haar, Daubechies or Jacobi/Legendre kernel into a projection DPP on a
  data set; :class:`Coreset` and :class:`MinibatchSampler` sample from it with unbiased weights.
- :func:`greedy_map`, :func:`select_entropy`, :func:`select_mutual_information`.

All samplers run in the Rust core, draw every sample from its own random stream (identical results
on any number of threads) and never form an n×n matrix unless given one.
"""

from thrifty.dpp._coreset import Coreset, MinibatchSampler
from thrifty.dpp._ensemble import LEnsemble
from thrifty.dpp._greedy import Selection, greedy_map, select_entropy, select_mutual_information
from thrifty.dpp._kernels import StratifiedDPP, daubechies_phi, discretize, estimate_density
from thrifty.dpp._projection import ProjectionDPP, orthonormalize

__all__ = [
    "Coreset",
    "LEnsemble",
    "MinibatchSampler",
    "ProjectionDPP",
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
