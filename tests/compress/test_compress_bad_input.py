"""Bad input to thrifty.compress's public API: clear TypeError/ValueError naming the argument, nothing crashes,
and the user's model is never modified (not even with inplace=True when the call fails)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from thrifty.compress import CompressedLinear, compression_report, stac_r, unwrap
from thrifty.compress import _kernels as K

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Conv1d(4, 4, 1), nn.Linear(32, 8))


def _snapshot(model: nn.Module) -> tuple[list[type], dict[str, torch.Tensor]]:
    return [type(m) for m in model.modules()], copy.deepcopy(model.state_dict())


def _unchanged(model: nn.Module, snap: tuple[list[type], dict[str, torch.Tensor]]) -> bool:
    types, state = snap
    return [type(m) for m in model.modules()] == types and all(
        torch.equal(v, state[k]) for k, v in model.state_dict().items()
    )


BAD_CALLS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"layers": "2"}, TypeError, r"layers: '2' is a Conv1d"),
    ({"layers": "nope*"}, ValueError, r"layers: 'nope\*' matches no module"),
    ({"layers": 3}, TypeError, r"layers:"),
    ({"layers": lambda n, m: False}, ValueError, r"layers: the predicate selected no module"),
    ({"layers": lambda n, m: n == "1"}, TypeError, r"layers: '1' is a ReLU"),
    ({"rank": 16, "layers": "0"}, ValueError, r"rank: 16 >= width 16 .*'0'"),
    ({"rank": {"3": 40}}, ValueError, r"rank: 40 >= width 32 .*'3'"),
    ({"rank": 0}, ValueError, r"rank: must be >= 1"),
    ({"rank": 2.5}, TypeError, r"rank: expected an int"),
    ({"rank": {"9": 2}}, ValueError, r"rank: '9' matches none of the selected layers"),
    ({"residual_density": 0.0}, ValueError, r"residual_density: must be in \(0, 1\]"),
    ({"residual_density": 1.5}, ValueError, r"residual_density: must be in \(0, 1\]"),
    ({"residual_density": -0.1}, ValueError, r"residual_density"),
    ({"residual_density": math.nan}, ValueError, r"residual_density"),
    ({"residual_density": "dense"}, TypeError, r"residual_density"),
    ({"residual_bits": 2}, ValueError, r"residual_bits: must be 4 or 8, got 2"),
    ({"residual_bits": 16}, ValueError, r"residual_bits: must be 4 or 8"),
    ({"residual_bits": True}, ValueError, r"residual_bits"),
    ({"coef_dtype": "fp8"}, ValueError, r"coef_dtype: must be one of"),
    ({"coef_dtype": torch.float64}, ValueError, r"coef_dtype"),
    ({"refresh_every": 0}, ValueError, r"refresh_every: must be >= 1"),
    ({"ratio": 0.5}, ValueError, r"ratio: must be a finite number > 1"),
    ({"ratio": math.inf}, ValueError, r"ratio"),
    ({"ratio": "8"}, TypeError, r"ratio: expected a number"),
    ({"seed": -1}, ValueError, r"seed: must be in"),
    ({"seed": 1.0}, TypeError, r"seed: expected an int"),
    ({"exact": 1}, TypeError, r"exact: expected a bool"),
    ({"stochastic": "yes"}, TypeError, r"stochastic: expected a bool"),
    ({"exact": True, "rank": 4}, ValueError, r"exact: cannot be combined with rank"),
    ({"inplace": "yes"}, TypeError, r"inplace: expected a bool"),
]


@pytest.mark.parametrize(("kwargs", "exc", "message"), BAD_CALLS)
@pytest.mark.parametrize("inplace", [False, True])
def test_bad_arguments_raise_and_leave_the_model_alone(
    kwargs: dict[str, Any], exc: type[Exception], message: str, inplace: bool
) -> None:
    model = _model()
    snap = _snapshot(model)
    kwargs = dict(kwargs)
    if "inplace" not in kwargs:
        kwargs["inplace"] = inplace
    kwargs.setdefault("layers", ["0", "3"])
    with pytest.raises(exc, match=message):
        stac_r(model, **kwargs)
    assert _unchanged(model, snap)


def test_not_a_module() -> None:
    with pytest.raises(TypeError, match="model: expected a torch.nn.Module"):
        stac_r([nn.Linear(2, 2)])  # type: ignore[type-var]
    with pytest.raises(TypeError, match="model:"):
        unwrap("model")  # type: ignore[type-var]
    with pytest.raises(TypeError, match="model:"):
        compression_report(None)  # type: ignore[arg-type]


def test_non_float_weights() -> None:
    lin = nn.Linear(8, 4).to(torch.float64)
    with pytest.raises(TypeError, match=r"layers: 'linear' has weight dtype float64"):
        CompressedLinear(lin)
    model = nn.Sequential(nn.Linear(8, 4)).to(torch.float64)
    with pytest.raises(TypeError, match=r"layers: '0' has weight dtype float64"):
        stac_r(model)


def test_subclass_with_own_forward_and_mha_out_proj_refused() -> None:
    class Odd(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    with pytest.raises(ValueError, match=r"'0' is a Odd with its own forward"):
        stac_r(nn.Sequential(Odd(4, 4)), layers="0")
    attn = nn.Sequential(nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match=r"output projection of an nn.MultiheadAttention"):
        stac_r(attn, layers="0.out_proj")
    with pytest.raises(ValueError, match=r"no torch.nn.Linear layer"):
        stac_r(attn)


def test_already_wrapped() -> None:
    model = stac_r(nn.Sequential(nn.Linear(8, 4)), exact=True)
    with pytest.raises(TypeError, match="already a CompressedLinear"):
        stac_r(model, layers="0")


FORWARD_BAD: list[tuple[Callable[[], torch.Tensor], type[Exception], str]] = [
    (lambda: torch.randint(0, 3, (5, 16)), TypeError, r"x: dtype int64 not supported"),
    (lambda: torch.ones(5, 16, dtype=torch.bool), TypeError, r"x: dtype bool"),
    (lambda: torch.randn(5, 16, dtype=torch.float64), TypeError, r"x: dtype float64"),
    (lambda: torch.randn(5, 16, dtype=torch.bfloat16), TypeError, r"x: dtype bfloat16 does not match .* float32"),
    (lambda: torch.randn(5, 15), ValueError, r"x: expected shape \(\.\.\., 16\)"),
    (lambda: torch.randn(()), ValueError, r"x: expected shape"),
    (lambda: torch.randn(5, 16, device="meta"), ValueError, r"x: on device meta but the layer's weight is on cpu"),
]


@pytest.mark.parametrize(("make", "exc", "message"), FORWARD_BAD)
def test_bad_forward_input(make: Callable[[], torch.Tensor], exc: type[Exception], message: str) -> None:
    layer = CompressedLinear(nn.Linear(16, 8), ratio=4)
    with pytest.raises(exc, match=message):
        layer(make())
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        layer([[1.0] * 16])  # type: ignore[arg-type]


def test_mixed_devices_in_one_layer() -> None:
    """A weight on one device and its bias on another (CPU + CUDA without a GPU: 'meta' stands in)."""
    lin = nn.Linear(8, 4)
    lin.bias = nn.Parameter(torch.zeros(4, device="meta"))
    with pytest.raises(ValueError, match=r"bias on meta but its weight on cpu; CPU and CUDA tensors cannot be mixed"):
        CompressedLinear(lin)
    model = nn.Sequential(lin)
    snap = [type(m) for m in model.modules()]
    with pytest.raises(ValueError, match=r"layers: '0' has its bias on meta"):
        stac_r(model, inplace=True)
    assert [type(m) for m in model.modules()] == snap


def test_input_on_the_other_device_as_cuda_would_be() -> None:
    """The device check compares torch.device objects; a model moved to 'meta' reproduces a CPU/CUDA mix."""
    layer = CompressedLinear(nn.Linear(8, 4, device="meta"), ratio=4)
    with pytest.raises(ValueError, match=r"x: on device cpu but the layer's weight is on meta"):
        layer(torch.randn(3, 8))


def test_kernel_errors_name_arguments() -> None:
    """The ops check their tensors too (what a user calling torch.ops.thrifty.stac_linear directly sees)."""
    from thrifty.compress._linear import stac_linear

    x, w = torch.randn(4, 8), torch.randn(3, 8)
    u = torch.linalg.qr(torch.randn(8, 2)).Q
    with pytest.raises(ValueError, match=r"bits: must be 4 or 8"):
        stac_linear(x, w, None, u, None, "bf16", 8, 2, 3, False, 0)
    with pytest.raises(ValueError, match=r"coef: must be one of"):
        stac_linear(x, w, None, u, None, "fp8", 8, 2, 8, False, 0)
    with pytest.raises(TypeError, match=r"u: dtype float64"):
        stac_linear(x, w, None, u.double(), None, "bf16", 8, 2, 8, False, 0)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_input_is_an_error_not_silent(value: float) -> None:
    layer = CompressedLinear(nn.Linear(8, 4), ratio=2)
    x = torch.randn(20, 8)
    x[3, 2] = value
    with pytest.raises(ValueError, match=r"x(_sample)?: contains NaN or infinity"):
        layer(x)  # the first batch (planning)
    layer(torch.randn(20, 8))
    with pytest.raises(ValueError, match=r"x: contains NaN or infinity"):
        layer(x)  # a later batch (refresh and compression)
    exact = CompressedLinear(nn.Linear(8, 4), exact=True)
    with pytest.raises(ValueError, match=r"x: contains NaN or infinity"):
        exact(x)
