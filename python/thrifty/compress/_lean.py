"""`lean_activations`: composite activations replaced by one op that saves its input once.

GPT-2's ``gelu_new`` (transformers' ``NewGELUActivation``, also ``FastGELUActivation``) is written as separate
elementwise ops, ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``, and autograd saves four tensors of the
activation's size for it (the input, ``x³``'s input, the tanh output and a product: 64 MiB per GPT-2-medium block
and 1024 tokens in fp32, against 24 MiB of Linear inputs). The same function is one op,
``torch.nn.functional.gelu(x, approximate="tanh")``, whose backward recomputes the derivative from the saved
input alone: the same values to float rounding, a quarter of the saved bytes, nothing approximated.
"""

from __future__ import annotations

import copy
from typing import TypeVar

from torch import nn

from thrifty.compress import _checks

__all__ = ["lean_activations"]

M = TypeVar("M", bound=nn.Module)
_TANH_GELU = ("NewGELUActivation", "FastGELUActivation")
_TANH_GELU_MODULES = ("transformers.activations",)


def _is_tanh_gelu(module: object) -> bool:
    cls = type(module)
    return cls.__name__ in _TANH_GELU and cls.__module__ in _TANH_GELU_MODULES


def lean_activations(model: M, *, inplace: bool = False) -> M:
    """Replace composite tanh-GELU activations by ``nn.GELU(approximate="tanh")``, which saves its input once.

    Every transformers ``NewGELUActivation`` (GPT-2's ``gelu_new``) and ``FastGELUActivation`` module becomes an
    ``nn.GELU(approximate="tanh")``: the same function (outputs and gradients equal to float rounding), one
    saved tensor instead of four. Parameter-free, so the ``state_dict`` is unchanged. Combine with
    :func:`~thrifty.compress.stac_r` (the Linear inputs) and plan both with :func:`~thrifty.compress.predict`
    on the leaned model.

    Parameters
    ----------
    model : torch.nn.Module
        Not modified unless ``inplace=True``.
    inplace : bool, default=False
        Modify ``model`` itself instead of a deep copy.

    Returns
    -------
    The model with lean activations (``model`` itself if ``inplace=True``).

    Raises
    ------
    TypeError
        ``model`` is not an ``nn.Module``; ``inplace`` is not a bool.
    ValueError
        The model holds no such activation (nothing to replace).

    Examples
    --------
    >>> import torch
    >>> from transformers.activations import NewGELUActivation
    >>> from thrifty.compress import SavedBytesMeter, lean_activations
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 32), NewGELUActivation(), torch.nn.Linear(32, 8))
    >>> lean = lean_activations(model)
    >>> type(lean[1]).__name__, type(model[1]).__name__
    ('GELU', 'NewGELUActivation')
    >>> x = torch.randn(16, 8)
    >>> with SavedBytesMeter(exclude=model) as before:
    ...     _ = model(x)
    >>> with SavedBytesMeter(exclude=lean) as after:
    ...     _ = lean(x)
    >>> before.peak_bytes - after.peak_bytes   # three (16, 32) float32 tensors fewer
    6144
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    _checks.check_bool("inplace", inplace)
    if _is_tanh_gelu(model):
        raise ValueError("model: is a bare activation; lean_activations replaces activations inside a model")
    if not any(_is_tanh_gelu(m) for m in model.modules()):
        raise ValueError(
            "model: has no composite tanh-GELU activation (transformers' NewGELUActivation / FastGELUActivation) "
            "to replace"
        )
    target = model if inplace else copy.deepcopy(model)
    for parent in list(target.modules()):
        for name, child in list(parent._modules.items()):
            if child is not None and _is_tanh_gelu(child):
                lean = nn.GELU(approximate="tanh")
                lean.train(child.training)
                setattr(parent, name, lean)
    return target
