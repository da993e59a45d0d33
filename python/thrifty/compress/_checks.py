"""Argument checks of thrifty.compress's public entry points (friendly errors that name the argument).

The kernels (``_kernels``) check tensors again for safety; these checks run first, before any module of the
user's model is touched, so a bad call never leaves a half-wrapped model behind.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor, nn

from thrifty.compress._adapters import LinearAdapter, adapter_for, own_forward_base

COEF_DTYPES = ("fp32", "bf16", "int8")
_COEF_ALIASES: dict[object, str] = {
    "fp32": "fp32",
    "float32": "fp32",
    torch.float32: "fp32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    torch.bfloat16: "bf16",
    "int8": "int8",
    torch.int8: "int8",
}
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INT64_MAX = 2**63 - 1


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).replace("torch.", "")


def check_ratio(ratio: object) -> float:
    """The stored-bytes budget: a finite real number > 1 (dense bytes / stored bytes)."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
        raise TypeError(f"ratio: expected a number > 1, got {type(ratio).__name__}")
    value = float(ratio)
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(f"ratio: must be a finite number > 1 (dense bytes / stored bytes), got {ratio!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return value


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    value = int(seed)
    if not 0 <= value <= _INT64_MAX:
        raise ValueError(f"seed: must be in [0, 2**63 - 1], got {value}")
    return value


def check_rank(rank: object, width: int, where: str) -> int | None:
    """Rank of the tracked basis: an int in [1, width - 1] (``rank >= width`` stores more than the input)."""
    if rank is None:
        return None
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank: expected an int, got {type(rank).__name__}{where}")
    value = int(rank)
    if value < 1:
        raise ValueError(f"rank: must be >= 1, got {value}{where}")
    if value >= width:
        raise ValueError(
            f"rank: {value} >= width {width}{where}; the basis must be narrower than the input "
            "(use exact=True to keep the whole activation)"
        )
    return value


def check_density(density: object, where: str) -> float | None:
    """Residual density: the kept share of entries per block, in (0, 1]."""
    if density is None:
        return None
    if isinstance(density, bool) or not isinstance(density, numbers.Real):
        raise TypeError(f"residual_density: expected a number in (0, 1], got {type(density).__name__}{where}")
    value = float(density)
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise ValueError(f"residual_density: must be in (0, 1], got {density!r}{where}")
    return value


def check_compute_budget(budget: object, where: str) -> float | None:
    """Compute cap rho > 0 (rank <= rho * out_features); ``math.inf`` turns the cap off."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise TypeError(f"compute_budget: expected a number > 0, got {type(budget).__name__}{where}")
    value = float(budget)
    if math.isnan(value) or value <= 0.0:
        raise ValueError(f"compute_budget: must be > 0 (math.inf = no cap), got {budget!r}{where}")
    return value


def check_bits(bits: object, where: str) -> int | None:
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or int(bits) not in (4, 8):
        raise ValueError(f"residual_bits: must be 4 or 8, got {bits!r}{where}")
    return int(bits)


def check_coef_dtype(coef: object, where: str) -> str | None:
    """``"fp32" | "bf16" | "int8"`` (also ``torch.float32`` / ``torch.bfloat16`` / ``torch.int8``)."""
    if coef is None:
        return None
    try:
        return _COEF_ALIASES[coef]
    except (KeyError, TypeError):
        raise ValueError(
            f"coef_dtype: must be one of 'fp32', 'bf16', 'int8' (or the torch dtypes), got {coef!r}{where}"
        ) from None


def check_refresh_every(refresh_every: object, where: str) -> int | None:
    if refresh_every is None:
        return None
    if isinstance(refresh_every, bool) or not isinstance(refresh_every, numbers.Integral):
        raise TypeError(f"refresh_every: expected an int, got {type(refresh_every).__name__}{where}")
    value = int(refresh_every)
    if value < 1:
        raise ValueError(f"refresh_every: must be >= 1 (steps between basis refreshes), got {value}{where}")
    return value


def check_linear(name: str, module: object) -> LinearAdapter:
    """A module that can be wrapped: Linear-like (``nn.Linear``, transformers' ``Conv1D`` or a class given to
    :func:`~thrifty.compress.register_linear`) with floating parameters on one device; returns its adapter."""
    adapter = adapter_for(module)
    if adapter is None:
        base = own_forward_base(module)
        if base is not None:
            raise ValueError(
                f"layers: {name!r} is a {type(module).__name__} with its own forward; only torch.nn.Linear "
                f"(or subclasses that keep its forward) can be compressed ({base.__name__} is registered, "
                "the subclass is not: register it with thrifty.compress.register_linear if it is Linear-like)"
            )
        raise TypeError(
            f"layers: {name!r} is a {type(module).__name__}; only torch.nn.Linear modules (and Linear-like "
            "ones: transformers' Conv1D, classes given to thrifty.compress.register_linear) can be compressed"
        )
    assert isinstance(module, nn.Module)
    weight = adapter.weight_of(module)
    if not isinstance(weight, nn.Parameter) or weight.dim() != 2:
        raise TypeError(f"layers: {name!r} has no 2-D weight Parameter {adapter.weight!r}")
    if weight.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"layers: {name!r} has weight dtype {dtype_name(weight.dtype)}; "
            "supported are float32, bfloat16 and float16"
        )
    bias = adapter.bias_of(module)
    if bias is not None:
        if not isinstance(bias, nn.Parameter) or bias.dim() != 1:
            raise TypeError(f"layers: {name!r} has a bias {adapter.bias!r} that is not a 1-D Parameter")
        if bias.dtype != weight.dtype:
            raise TypeError(
                f"layers: {name!r} has bias dtype {dtype_name(bias.dtype)} but weight dtype {dtype_name(weight.dtype)}"
            )
        if bias.device != weight.device:
            raise ValueError(
                f"layers: {name!r} has its bias on {bias.device} but its weight on {weight.device}; "
                "CPU and CUDA tensors cannot be mixed"
            )
    if weight.device.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"layers: {name!r} is on device {weight.device}; only cpu and cuda are supported")
    d, m = adapter.features(module)
    if d < 1 or m < 1:
        raise ValueError(f"layers: {name!r} has a zero-size weight {tuple(weight.shape)}")
    if bias is not None and bias.shape[0] != m:
        raise ValueError(f"layers: {name!r} has a bias of {bias.shape[0]} entries for {m} outputs")
    return adapter


def check_input(x: object, weight: Tensor) -> Tensor:
    """The forward input of a compressed Linear: a floating tensor (..., in_features) on the weight's device."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"x: dtype {dtype_name(x.dtype)} not supported; a compressed Linear takes float32, bfloat16 or float16"
        )
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x: expected shape (..., {weight.shape[1]}), got {tuple(x.shape)}")
    if x.device != weight.device:
        raise ValueError(
            f"x: on device {x.device} but the layer's weight is on {weight.device}; "
            "CPU and CUDA tensors cannot be mixed (move the input or the model)"
        )
    return x

