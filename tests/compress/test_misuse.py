"""Misuse found trying the library as a new user would (issue 18, point 7): a clear error naming the argument,
or the right answer, and the model untouched."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from thrifty.compress import CompressedLinear, SavedBytesMeter, predict, stac_r


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 96), nn.GELU(), nn.Linear(96, 32), nn.GELU(), nn.Linear(32, 8))


def _lowrank(n: int = 256, d: int = 32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 6, generator=g) @ torch.randn(6, d, generator=g) + 0.01 * torch.randn(n, d, generator=g)


def test_stac_r_on_a_bare_linear_names_the_model() -> None:
    lin = nn.Linear(16, 8)
    before = copy.deepcopy(lin.state_dict())
    with pytest.raises(TypeError, match=r"model: is a bare Linear.*CompressedLinear\(layer, ratio\)"):
        stac_r(lin)
    assert type(lin) is nn.Linear and all(torch.equal(v, lin.state_dict()[k]) for k, v in before.items())
    with pytest.raises(TypeError, match=r"model: is a bare CompressedLinear"):
        stac_r(CompressedLinear(nn.Linear(16, 8)))


def test_nested_meters_both_count() -> None:
    model = _mlp()
    x = _lowrank()
    with SavedBytesMeter(exclude=model) as alone:
        loss = model(x).sum()
    del loss
    with SavedBytesMeter(exclude=model) as outer:
        h = model[1](model[0](x))  # saved in the outer block only
        with SavedBytesMeter(exclude=model) as inner:
            loss = model[4](model[3](model[2](h))).sum()
        assert inner.saved_bytes > 0 and outer.saved_bytes == alone.peak_bytes  # the outer one saw it all
    assert inner.peak_bytes == 32 * 4 * 256 * 2 + 256 * 96 * 4  # fc2's input, fc2's output, fc3's input
    assert outer.peak_bytes == alone.peak_bytes
    loss.backward()
    assert outer.saved_bytes == inner.saved_bytes == 0


@pytest.mark.parametrize("scale", [3e17, 1e18])
def test_finite_but_huge_input_is_compressed_like_any_other(scale: float) -> None:
    """Plans, refreshes and monitors are scale-free (a power-of-two rescaling, exact), so x·3e17 and x·1e18
    compress as faithfully as x: no "contains NaN or infinity", no "min() arg is an empty sequence"."""
    model = _mlp()
    x = _lowrank() * scale
    comp = stac_r(model, ratio=8)
    ref = copy.deepcopy(model)
    for _ in range(3):  # step 1 plans, steps 2-3 refresh the basis
        for m in (comp, ref):
            m.zero_grad(set_to_none=True)
            (m(x) / scale).square().sum().backward()
        for name in ("2", "4"):
            g, gh = ref.get_submodule(name).weight.grad, comp.get_submodule(name).weight.grad
            assert torch.isfinite(gh).all()
            assert float(F.cosine_similarity(g.flatten(), gh.flatten(), dim=0)) > 0.99
    layer = comp.get_submodule("2")
    assert 0.9 < layer.state.captured_energy <= 1.0 + 1e-6 and layer.state.eps < 0.2
    report = predict(model, x.requires_grad_(False), optimizer="sgd")
    assert report["2"].accepted and report["2"].cos > 0.99


def test_subnormal_activations_are_planned_and_compressed_like_the_same_at_unit_scale() -> None:
    """Found by a probe: a first layer fed x·1e-40 (subnormal float32) raised "x: contains NaN or
    infinity" - the plan multiplied by 2.0**134, which is inf in float32, and the encoder's quantisation
    step overflowed. Now the plan is that of x at unit scale, exactly, and the encoder retries rescaled."""
    from thrifty.compress import _kernels
    from thrifty.compress._codec import plan_layer

    x = _lowrank()
    e = _kernels.pow2_exponent(x)
    for shift in (-140, -60, 100):  # subnormal, tiny, huge
        xs = _kernels.ldexp(x, shift)
        assert bool(torch.isfinite(xs).all()) and xs.abs().max() > 0
        assert _kernels.pow2_exponent(xs) == e + shift
        assert plan_layer(xs, 8) == plan_layer(x, 8)
    u = torch.linalg.qr(torch.randn(32, 6, generator=torch.Generator().manual_seed(1)))[0].contiguous()
    full = _kernels.decompress(u, *_kernels.compress(x, u, coef="int8", block=32, k=4, bits=8), d=32, block=32, bits=8)
    for shift in (-60, -140):
        xs = _kernels.ldexp(x, shift)
        got = _kernels.decompress(u, *_kernels.compress(xs, u, coef="int8", block=32, k=4, bits=8), d=32, block=32,
                                  bits=8)  # fmt: skip
        back = _kernels.ldexp(got.double(), -shift)
        err = float((back - full.double()).norm() / full.double().norm())
        # -60: the same factors to rounding; -140: float32 keeps ~9 bits there (and the per-row scales
        # fewer), so the decoded batch is as coarse as the subnormal numbers themselves (measured 5%)
        assert err < (1e-6 if shift == -60 else 0.1), (shift, err)
    model = _mlp()
    comp, ref = stac_r(model, ratio=8), copy.deepcopy(model)
    for m in (comp, ref):
        m(x * 1e-40).sum().backward()
    g, gh = (m.get_submodule("0").weight.grad.double().flatten() * 1e40 for m in (ref, comp))
    assert torch.isfinite(gh).all() and float(F.cosine_similarity(g, gh, dim=0)) > 0.9


def test_tiny_activations_keep_the_gradient_after_a_refresh() -> None:
    """Found by a probe: at x·1e-30 the first step's gradient had cos 0.999994 with the exact one but
    every step after the first basis refresh 0.52 - the refresh's float32 Gram sums underflowed. Tiny
    batches now refresh at unit scale (exact powers of two), so each step matches the unit-scale run."""
    x = _lowrank()
    for scale in (1e-30, 1e-40):
        ref, comp = _mlp(), stac_r(_mlp(), ratio=8)
        for _step in range(4):  # step 1 plans, later steps refresh the basis
            for m in (ref, comp):
                m.zero_grad(set_to_none=True)
                m(x * scale).sum().backward()
            # in units of the scale (cosine_similarity clamps norms below 1e-8)
            g, gh = (m.get_submodule("0").weight.grad.double().flatten() / scale for m in (ref, comp))
            assert torch.isfinite(gh).all()
            assert float(F.cosine_similarity(g, gh, dim=0)) > 0.999, (scale, _step)
        layer = comp.get_submodule("0")
        assert 0.99 < layer.state.captured_energy <= 1.0 + 1e-6


def test_meta_model_with_a_real_batch_names_the_batch() -> None:
    with torch.device("meta"):
        model = _mlp()
    with pytest.raises(ValueError, match=r"batch: .*on cpu.*the model is on meta"):
        predict(model, torch.randn(64, 32))
    assert all(p.grad is None and p.device.type == "meta" for p in model.parameters())
    with pytest.raises(ValueError, match=r"batch: .*on meta.*the model is on cpu"):
        predict(_mlp(), torch.randn(64, 32, device="meta"))
