"""Activation compression for training: STAC-R, a compressed ``nn.Linear`` whose backward never rebuilds
its input.

Training memory is dominated by the activations saved for backward. A Linear layer needs its input ``X``
only for the weight gradient ``Gᵀ·X``; STAC-R saves ``X`` as coefficients in a tracked low-rank basis plus a
sparse, quantized residual, and contracts the weight gradient straight from those factors.

- :func:`stac_r` wraps the selected ``nn.Linear`` layers of a model for a stored-bytes budget
  (``ratio=8``: one eighth of the dense input bytes); :func:`unwrap` restores plain layers.
- Linear-like modules are wrapped alike: ``nn.Linear``, transformers' ``Conv1D`` (GPT-2's projections, weight
  stored ``(in, out)``), and any class given to :func:`register_linear` (how to read its weight, layout, bias
  and input).
- :class:`CompressedLinear` is the wrapped layer (one custom op per layer, ``thrifty::stac_layer``: works with
  autocast, ``torch.compile`` without graph breaks, ``torch.utils.checkpoint``, DDP and FSDP2, and its STAC-R
  state rides in the ``state_dict``); ``exact=True`` reproduces the exact gradients.
- :func:`compression_report` reads per layer stored vs dense bytes, rank, residual, captured energy and the
  gradient-error estimate ε with its cosine bound √(1−ε²).
- :func:`predict` (the Saved-Surface Predictor) says before training, from one dry-run batch, how much of
  the peak STAC-R can take off (``SSP = A_C⁺/P``), which layers to wrap and which to refuse and why, the
  predicted reduction and overhead, and the gradient bridge; ``stac_r(model, plan=report)`` applies it.
- :func:`compress_saved` compresses what any other op saves for backward (saved-tensor hooks, eager only,
  one copy per storage); :func:`galore_turbo` runs GaLore on the compressed Linears reusing STAC-R's factors.
- :func:`lean_activations` replaces composite tanh-GELUs (GPT-2's ``gelu_new``: four saved tensors) by one op
  that saves its input once (exact to float rounding).
- :func:`linear_cross_entropy` / :func:`lean_loss` compute a causal LM's loss chunk by chunk of rows, never
  forming the full-vocabulary logits (exact: the same loss and gradients to float rounding).
- :class:`SavedBytesMeter` measures what autograd saves (storage-deduplicated); :func:`backends` says which
  kernels were built and run (C++ CPU kernels always, CUDA ones when compiled and a GPU is present).

Requires ``torch`` (``pip install thrifty[torch]``).
"""

from thrifty._optional import require

require("torch", "torch", "thrifty.compress")  # an ImportError naming the extra, not a bare "No module named"

from thrifty.compress._adapters import register_linear
from thrifty.compress._galore import (
    GaLoreAdamW,
    GaLoreProjector,
    TurboLinear,
    galore_turbo,
)
from thrifty.compress._hooks import SavedCompressor, compress_saved
from thrifty.compress._kernels import backends
from thrifty.compress._lean import lean_activations
from thrifty.compress._linear import CompressedLinear, LayerState
from thrifty.compress._loss import lean_loss, linear_cross_entropy
from thrifty.compress._meter import SavedBytesMeter, StorageRecord
from thrifty.compress._predict import LayerPrediction, PredictConfig, SSPReport, predict
from thrifty.compress._report import CompressionReport, LayerReport, compression_report
from thrifty.compress._wrap import stac_r, unwrap

__all__ = [
    "CompressedLinear",
    "CompressionReport",
    "GaLoreAdamW",
    "GaLoreProjector",
    "LayerPrediction",
    "LayerReport",
    "LayerState",
    "PredictConfig",
    "SSPReport",
    "SavedBytesMeter",
    "SavedCompressor",
    "StorageRecord",
    "TurboLinear",
    "backends",
    "compress_saved",
    "compression_report",
    "galore_turbo",
    "lean_activations",
    "lean_loss",
    "linear_cross_entropy",
    "predict",
    "register_linear",
    "stac_r",
    "unwrap",
]
