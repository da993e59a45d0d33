"""CompressedLinear and the op thrifty::stac_linear: exact gradients through the exactness switch, the weight
gradient contracted from the factors against an independent dense reference, what is saved for backward,
dtypes and shapes, the gradient-error monitor."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.compress import CompressedLinear, SavedBytesMeter
from thrifty.compress import _kernels as K
from thrifty.compress._linear import stac_linear

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")


def _structured(n: int, d: int, rank: int, noise: float, seed: int) -> torch.Tensor:
    """Rows near a rank-``rank`` subspace with a few heavy features (like a Linear's input)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g)
    x = x + noise * torch.randn(n, d, generator=g)
    x[:, :: max(1, d // 4)] *= 3.0
    return x


def _orthonormal(d: int, r: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, r, generator=g, dtype=torch.float64))
    return q.to(torch.float32).contiguous()


def _linear(d: int, m: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(d, m).to(dtype)


# ---------------------------------------------------------------------------------------------------------
# the op alone (fixed basis and format): backward = the dense formula on the dequantized factors


@pytest.mark.parametrize(
    ("coef", "k", "bits"), [("fp32", 0, 8), ("bf16", 4, 8), ("int8", 3, 4), ("bf16", 16, 8), ("int8", 0, 8)]
)
def test_op_backward_equals_dense_formula_on_factors(coef: str, k: int, bits: int) -> None:
    n, d, m, r, block = 70, 40, 24, 6, 16
    x = _structured(n, d, 4, 0.2, 1).requires_grad_(True)
    lin = _linear(d, m, 2)
    u = _orthonormal(d, r, 3)
    y, c, cs, vals, idx, scales = stac_linear(x, lin.weight, lin.bias, u, None, coef, block, k, bits, False, 0)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(4))
    (y * g).sum().backward()
    # independent reference in float64: Gᵀ·X̂ with X̂ the dequantized factors; G·W; ΣG
    xhat = K.decompress(u, c, cs, vals, idx, scales, d=d, block=block, bits=bits).double()
    ref_w = g.double().t() @ xhat
    rel = float((lin.weight.grad.double() - ref_w).norm() / ref_w.norm())
    assert rel < 1e-6
    torch.testing.assert_close(x.grad, g @ lin.weight.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(lin.bias.grad, g.sum(0), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(y, torch.nn.functional.linear(x.detach(), lin.weight, lin.bias))
    if k == 16:  # the whole block kept: only the int8 rounding of the residual is lost
        assert float((xhat.float() - x.detach()).norm() / x.detach().norm()) < 1e-2


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 40), d=st.integers(2, 70), m=st.integers(1, 9), r_frac=st.floats(0.05, 0.95),
    block=st.sampled_from([1, 7, 16, 64, 256]), k_frac=st.floats(0.0, 1.0), bits=st.sampled_from([4, 8]),
    coef=st.sampled_from(["fp32", "bf16", "int8"]), lead=st.sampled_from([(), (2,), (1, 3)]),
)
def test_op_backward_property(
    n: int, d: int, m: int, r_frac: float, block: int, k_frac: float, bits: int, coef: str, lead: tuple[int, ...]
) -> None:
    """Any shape/layout: grad_W = Gᵀ·X̂ (the factors' dequantization), grad_x = G·W, grad_b = ΣG."""
    r = max(1, min(d, round(r_frac * d)))
    k = round(k_frac * min(block, d))
    rows = n * (lead[0] * lead[1] if len(lead) == 2 else lead[0] if lead else 1)
    x = _structured(rows, d, min(3, d), 0.3, n + 7 * d).requires_grad_(True)
    lin = _linear(d, m, d)
    u = _orthonormal(d, r, m)
    y, c, cs, vals, idx, scales = stac_linear(x, lin.weight, lin.bias, u, None, coef, block, k, bits, False, 0)
    g = torch.randn(rows, m, generator=torch.Generator().manual_seed(n))
    (y * g).sum().backward()
    xhat = K.decompress(u, c, cs, vals, idx, scales, d=d, block=block, bits=bits).double()
    ref_w = g.double().t() @ xhat
    err = float((lin.weight.grad.double() - ref_w).norm())
    assert err <= 1e-6 * max(float(ref_w.norm()), 1e-30) + 1e-7
    torch.testing.assert_close(x.grad, g @ lin.weight.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lin.bias.grad, g.sum(0), rtol=1e-5, atol=1e-5)


def test_op_identity_basis_is_exact() -> None:
    n, d, m = 50, 20, 12
    x = _structured(n, d, 3, 0.5, 5).requires_grad_(True)
    lin = _linear(d, m, 6)
    eye = torch.eye(d)
    y = stac_linear(x, lin.weight, None, eye, None, "fp32", 20, 0, 8, False, 0)[0]
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(7))
    (y * g).sum().backward()
    ref = (g.double().t() @ x.detach().double()).float()
    assert float((lin.weight.grad - ref).abs().max()) < 1e-5


# ---------------------------------------------------------------------------------------------------------
# the module


@pytest.mark.parametrize("shape", [(64,), (5, 64), (3, 7, 64), (2, 2, 3, 64)])
def test_exact_module_reproduces_linear_gradients(shape: tuple[int, ...]) -> None:
    d, m = shape[-1], 48
    base = _linear(d, m, 11)
    ref = _linear(d, m, 11)
    layer = CompressedLinear(base, exact=True)
    assert layer.weight is base.weight and layer.bias is base.bias
    x = _structured(math.prod(shape[:-1]) or 1, d, 5, 0.3, 12).reshape(shape)
    x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    g = torch.randn(*shape[:-1], m, generator=torch.Generator().manual_seed(13))
    y1, y2 = layer(x1), ref(x2)
    assert y1.shape == y2.shape
    torch.testing.assert_close(y1, y2, rtol=0, atol=0)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    assert float((base.weight.grad - ref.weight.grad).abs().max()) <= 1e-5
    assert float((base.bias.grad - ref.bias.grad).abs().max()) <= 1e-5
    assert float((x1.grad - x2.grad).abs().max()) <= 1e-5


def test_state_dict_keys_and_values_match_the_linear() -> None:
    base = _linear(16, 8, 1)
    layer = CompressedLinear(base, ratio=4)
    assert set(layer.state_dict()) == {"weight", "bias"}
    for key, value in base.state_dict().items():
        assert torch.equal(layer.state_dict()[key], value)
    no_bias = CompressedLinear(torch.nn.Linear(16, 8, bias=False), exact=True)
    assert no_bias.bias is None and set(no_bias.state_dict()) == {"weight"}
    x = torch.randn(10, 16, requires_grad=True)
    no_bias(x).sum().backward()
    assert no_bias.weight.grad is not None and x.grad is not None


def test_input_is_not_saved_only_the_factors() -> None:
    n, d, m, r = 512, 64, 32, 8
    lin = _linear(d, m, 3)
    layer = CompressedLinear(lin, rank=r, coef_dtype="bf16", residual_density=1 / 16, residual_bits=8)
    x = _structured(n, d, 6, 0.1, 4).requires_grad_(True)
    with SavedBytesMeter(exclude=layer) as meter:
        y = layer(x)
    cfg = layer.config
    assert cfg is not None and cfg.rank == r and cfg.coef == "bf16" and cfg.bits == 8
    nb = -(-d // cfg.block)
    factors = n * r * 2 + n * nb * (cfg.k + cfg.k + 4)  # bf16 coefficients, int8 values, uint8 indices, scales
    assert layer.state.stored_bytes == factors
    basis = d * r * 4  # the tracked basis U is saved by reference (one storage, shared by all steps)
    assert meter.saved_bytes == factors + basis
    assert meter.saved_bytes < n * d * 4 / 4  # far below the dense input
    y.sum().backward()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_models(dtype: torch.dtype) -> None:
    d, m = 32, 16
    base = _linear(d, m, 21, dtype)
    ref = _linear(d, m, 21, dtype)
    layer = CompressedLinear(base, exact=True)
    x = _structured(40, d, 4, 0.3, 22).to(dtype)
    y1 = layer(x.clone().requires_grad_(True))
    y2 = ref(x.clone().requires_grad_(True))
    assert y1.dtype == dtype
    torch.testing.assert_close(y1, y2)
    y1.float().square().sum().backward()
    y2.float().square().sum().backward()
    assert base.weight.grad.dtype == dtype
    torch.testing.assert_close(base.weight.grad, ref.weight.grad, rtol=2e-2, atol=2e-2)


def test_low_rank_input_with_enough_rank_gives_near_exact_gradients() -> None:
    """X of rank 4 and a rank-8 basis tracked from the batch: X = (X·U)·Uᵀ, so fp32 coefficients are exact."""
    n, d, m = 256, 48, 20
    x = _structured(n, d, 4, 0.0, 31)
    base, ref = _linear(d, m, 32), _linear(d, m, 32)
    layer = CompressedLinear(base, rank=8, coef_dtype="fp32")
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(33))
    (layer(x) * g).sum().backward()
    (ref(x) * g).sum().backward()
    rel = float((base.weight.grad - ref.weight.grad).norm() / ref.weight.grad.norm())
    assert rel < 1e-4


def test_monitor_eps_is_the_exact_gradient_error_when_all_rows_are_sampled() -> None:
    n, d, m = 96, 64, 16
    x = _structured(n, d, 12, 0.5, 41)
    base, ref = _linear(d, m, 42), _linear(d, m, 42)
    layer = CompressedLinear(base, rank=4, coef_dtype="bf16")
    layer.monitor_rows = n  # every row: the estimate is the exact relative error of this batch's gradient
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(43))
    (layer(x) * g).sum().backward()
    (ref(x) * g).sum().backward()
    gw, gref = base.weight.grad.double(), ref.weight.grad.double()
    eps = float((gw - gref).norm() / gref.norm())
    cos = float((gw * gref).sum() / (gw.norm() * gref.norm()))
    st = layer.state
    assert 0.05 < eps < 1.0  # a rank-4 basis of rank-12 data loses something
    assert st.eps == pytest.approx(eps, rel=1e-4)
    assert st.cos_sample == pytest.approx(cos, rel=1e-5)
    assert st.cos_sample >= math.sqrt(1 - st.eps**2) - 1e-7
    assert 0.0 < st.captured_energy < 1.0 and st.eps_step == 1


def test_monitor_zero_in_exact_mode_and_can_be_switched_off() -> None:
    layer = CompressedLinear(_linear(32, 8, 51), exact=True)
    layer(torch.randn(20, 32)).sum().backward()
    assert layer.state.eps == 0.0 and layer.state.cos_sample == pytest.approx(1.0)
    assert layer.state.captured_energy == pytest.approx(1.0, abs=1e-6)
    off = CompressedLinear(_linear(32, 8, 51), exact=True)
    off.monitor_rows = 0
    off(torch.randn(20, 32)).sum().backward()
    assert math.isnan(off.state.eps) and off.state.eps_step == -1


def test_empty_batch_no_grad_and_frozen_weight_skip_compression() -> None:
    lin = _linear(8, 4, 61)
    layer = CompressedLinear(lin, ratio=2)
    y = layer(torch.randn(0, 3, 8))
    assert y.shape == (0, 3, 4)
    x = torch.randn(5, 8)
    with torch.no_grad():
        y = layer(x)
    assert y.shape == (5, 4) and not y.requires_grad
    torch.testing.assert_close(y, lin(x).detach(), rtol=0, atol=0)
    assert layer.state.step == 0 and layer.config is None  # inference does not plan, refresh or count steps
    lin.weight.requires_grad_(False)
    xg = x.clone().requires_grad_(True)
    layer(xg).sum().backward()
    torch.testing.assert_close(xg.grad, lin.weight.sum(0).expand(5, 8), rtol=1e-6, atol=1e-6)
    assert lin.bias.grad is not None and layer.state.step == 0


def test_repeated_steps_are_reproducible() -> None:
    def run() -> torch.Tensor:
        base = _linear(32, 8, 71)
        layer = CompressedLinear(base, ratio=4, seed=3)
        for step in range(3):
            x = _structured(64, 32, 5, 0.2, 100 + step)
            layer(x).square().sum().backward()
        return base.weight.grad.clone()

    torch.testing.assert_close(run(), run(), rtol=0, atol=0)


def test_non_contiguous_inputs() -> None:
    base, ref = _linear(32, 8, 81), _linear(32, 8, 81)
    layer = CompressedLinear(base, exact=True)
    x = _structured(64, 40, 4, 0.3, 82).t()[:32].t()  # (64, 32) view with strides (1, 64)
    assert not x.is_contiguous()
    layer(x).square().sum().backward()
    ref(x).square().sum().backward()
    assert float((base.weight.grad - ref.weight.grad).abs().max()) <= 1e-4
    xt = _structured(48, 32, 4, 0.3, 83).reshape(6, 8, 32).transpose(0, 1)  # (8, 6, 32), not contiguous
    squeezed = CompressedLinear(_linear(32, 8, 84), ratio=4)
    assert squeezed(xt).shape == (8, 6, 8)


def test_stochastic_rounding_is_keyed_by_seed_and_step() -> None:
    def grads(seed: int, stochastic: bool) -> list[torch.Tensor]:
        base = _linear(64, 8, 91)
        layer = CompressedLinear(base, rank=4, residual_density=1 / 8, residual_bits=4, stochastic=stochastic,
                                 seed=seed)  # fmt: skip
        out = []
        for _ in range(2):
            base.weight.grad = None
            layer(_structured(128, 64, 10, 0.5, 92)).square().sum().backward()  # the same batch twice
            out.append(base.weight.grad.clone())
        return out

    a, b, c = grads(1, True), grads(1, True), grads(2, True)
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)  # reproducible
    torch.testing.assert_close(a[1], b[1], rtol=0, atol=0)
    assert not torch.equal(a[0], c[0])  # another seed rounds differently
    assert not torch.equal(a[0], a[1])  # another step rounds differently (same batch, refreshed basis aside)
    d = grads(1, False)
    assert not torch.equal(a[0], d[0])
