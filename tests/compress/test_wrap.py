"""stac_r / unwrap: layer selection, copies vs in place, per-layer overrides, parameters and state_dicts."""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from thrifty.compress import CompressedLinear, stac_r, unwrap
from thrifty.compress import _kernels as K

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")


class Block(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _wrapped_names(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, CompressedLinear)]


def test_default_wraps_every_linear_except_mha_out_proj_and_copies() -> None:
    model = Net()
    before = copy.deepcopy(model.state_dict())
    out = stac_r(model, ratio=4)
    assert out is not model
    assert _wrapped_names(out) == [
        "blocks.0.fc1", "blocks.0.fc2", "blocks.1.fc1", "blocks.1.fc2", "head",
    ]  # fmt: skip
    assert _wrapped_names(model) == []  # the user's model is untouched
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key])
    assert list(out.state_dict()) == list(model.state_dict())  # same keys, same order
    x = torch.randn(3, 10, 32)
    out(x).square().mean().backward()
    assert all(p.grad is not None for p in out.parameters())
    assert all(p.grad is None for p in model.parameters())


def test_inplace_keeps_parameter_objects_and_optimizer_works() -> None:
    model = Net()
    params = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = stac_r(model, ratio=8, inplace=True)
    assert out is model
    assert [id(p) for p in out.parameters()] == [id(p) for p in params]
    w0 = model.head.weight.detach().clone()
    out(torch.randn(2, 12, 32)).square().mean().backward()
    opt.step()
    assert not torch.equal(model.head.weight.detach(), w0)


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        ("head", ["head"]),
        (["blocks.0.fc1", "head"], ["blocks.0.fc1", "head"]),
        ("blocks.*.fc2", ["blocks.0.fc2", "blocks.1.fc2"]),
        (lambda name, m: isinstance(m, nn.Linear) and m.out_features == 64, ["blocks.0.fc1", "blocks.1.fc1"]),
    ],
)
def test_layer_selection(layers: object, expected: list[str]) -> None:
    assert _wrapped_names(stac_r(Net(), layers=layers)) == expected  # type: ignore[arg-type]


def test_per_layer_overrides() -> None:
    model = stac_r(
        Net(), ratio=4, rank={"blocks.*.fc1": 4, "head": 2}, coef_dtype={"head": "fp32"}, residual_bits=4,
        residual_density={"blocks.0.*": 0.25},
    )  # fmt: skip
    layers = dict(model.named_modules())
    assert layers["blocks.0.fc1"].overrides["rank"] == 4
    assert layers["head"].overrides == {"rank": 2, "coef_dtype": "fp32", "residual_bits": 4}
    assert "rank" not in layers["blocks.0.fc2"].overrides
    assert layers["blocks.0.fc2"].overrides["residual_density"] == 0.25
    model(torch.randn(2, 16, 32)).sum().backward()
    head = layers["head"].config
    assert head is not None and head.rank == 2 and head.coef == "fp32"


def test_compute_budget_caps_the_planned_rank() -> None:
    """rank <= max(32, compute_budget * out_features); inf turns the cap off; per-layer values; bad values."""
    d_in, d_out = 512, 160
    lin = nn.Linear(d_in, d_out)
    # a decaying spectrum (variances 0.81^i) plus weak noise: the byte budget alone would buy int8 at rank
    # 252, and the capped ranks keep the signal (an isotropic batch would trip the cap's fidelity floor,
    # see test_codec)
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(d_in, 300, generator=g)).Q
    sd = 0.9 ** torch.arange(300, dtype=torch.float32)
    x = (torch.randn(256, 300, generator=g) * sd) @ basis.T + 0.01 * torch.randn(256, d_in, generator=g)
    ranks = {}
    for budget in (None, 0.25, 0.5, 0.01, math.inf):
        layer = CompressedLinear(copy.deepcopy(lin), ratio=8, compute_budget=budget)
        layer(x).sum().backward()
        assert layer.config is not None and layer.config.bytes_per_row(d_in) <= d_in * 4 / 8
        ranks[budget] = (layer.config.rank, layer.config.coef)
    assert ranks[None] == ranks[0.25] == (40, "bf16")
    assert ranks[0.5] == (80, "bf16")
    assert ranks[0.01] == (32, "bf16")  # the floor
    assert ranks[math.inf] == (252, "int8")
    model = stac_r(Net(), ratio=4, compute_budget={"head": math.inf, "blocks.0.*": 0.5})
    layers = dict(model.named_modules())
    assert layers["head"].compute_budget == math.inf and layers["blocks.0.fc1"].compute_budget == 0.5
    assert layers["blocks.1.fc1"].compute_budget == 0.25
    for bad, err in ((0.0, ValueError), (-1.0, ValueError), (math.nan, ValueError), ("1", TypeError)):
        with pytest.raises(err, match="compute_budget"):
            CompressedLinear(nn.Linear(8, 4), compute_budget=bad)  # type: ignore[arg-type]


def test_unwrap_restores_plain_linears_with_the_same_values() -> None:
    model = Net()
    wrapped = stac_r(model, exact=True)
    plain = unwrap(wrapped)
    assert _wrapped_names(plain) == [] and _wrapped_names(wrapped) != []
    assert type(plain.head) is nn.Linear
    for key, value in model.state_dict().items():
        assert torch.equal(plain.state_dict()[key], value)
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(plain(x), model(x), rtol=0, atol=0)
    same = unwrap(wrapped, inplace=True)
    assert same is wrapped and _wrapped_names(wrapped) == []
    assert type(unwrap(CompressedLinear(nn.Linear(4, 3), exact=True))) is nn.Linear


def test_wrapped_model_deepcopies_and_trains_the_same() -> None:
    wrapped = stac_r(Net(), ratio=4, seed=1)
    twin = copy.deepcopy(wrapped)
    x = torch.randn(2, 16, 32)
    wrapped(x).square().mean().backward()
    twin(x).square().mean().backward()
    for a, b in zip(wrapped.parameters(), twin.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)


def test_train_eval_mode_is_kept() -> None:
    model = Net().eval()
    assert not stac_r(model).head.training


def test_shared_layer_is_wrapped_everywhere_once() -> None:
    shared = nn.Linear(16, 16)
    model = nn.Sequential(shared, nn.Tanh(), shared)
    out = stac_r(model, ratio=4)
    assert isinstance(out[0], CompressedLinear) and out[0] is out[2]
    assert out[0].weight is out[2].weight
    x = torch.randn(8, 16)
    out(x).sum().backward()
    assert out[0].state.step == 2  # called twice per forward
    back = unwrap(out)
    assert type(back[0]) is nn.Linear and back[0] is back[2]
