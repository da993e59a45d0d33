"""compression_report: exact byte accounting, the plan per layer, the ε estimate and its cosine bound."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from thrifty.compress import CompressedLinear, compression_report, stac_r
from thrifty.compress import _kernels as K

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 64), nn.GELU(), nn.Linear(64, 10))


def _inputs(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g) @ torch.randn(8, 64, generator=g) + 0.2 * torch.randn(n, 64, generator=g)


def _expected_bytes(n: int, d: int, rank: int, coef: str, block: int, k: int, bits: int) -> int:
    """Bytes of the packed layout, from the data contract (independent of the tensors)."""
    per_row = rank * {"fp32": 4, "bf16": 2, "int8": 1}[coef] + (4 if coef == "int8" else 0)
    if k:
        per_row += -(-d // block) * (k + (k if bits == 8 else (k + 1) // 2) + 4)
    return n * per_row


def test_report_bytes_plan_and_totals() -> None:
    model = stac_r(_mlp(), ratio=8, rank={"0": 6}, coef_dtype={"0": "int8"}, residual_density={"0": 1 / 32},
                   residual_bits={"0": 4})  # fmt: skip
    n = 300
    model(_inputs(n, 1)).square().mean().backward()
    report = compression_report(model)
    assert [row.name for row in report] == ["0", "2", "4"]
    first = report["0"]
    assert (first.rank, first.coef_dtype, first.residual_bits) == (6, "int8", 4)
    cfg = dict(model.named_modules())["0"].config
    assert first.residual_density == pytest.approx(cfg.k / cfg.block)
    assert first.stored_bytes == _expected_bytes(n, 64, 6, "int8", cfg.block, cfg.k, 4)
    for row in report:
        layer = dict(model.named_modules())[row.name]
        c = layer.config
        assert row.dense_bytes == n * row.in_features * 4
        assert row.stored_bytes == _expected_bytes(n, row.in_features, c.rank, c.coef, c.block, c.k, c.bits)
        assert row.ratio == pytest.approx(row.dense_bytes / row.stored_bytes)
        assert row.basis_bytes == row.in_features * c.rank * 4
        assert row.step == 1 and row.eps_step == 1 and row.rows == n
        assert 0.0 < row.captured_energy <= 1.0 + 1e-6
        assert row.cos_sample >= row.cos_bound - 1e-6
        assert row.cos_bound == pytest.approx(math.sqrt(max(0.0, 1 - row.eps**2)))
    for row in list(report)[1:]:  # planned from the budget: at least the target ratio
        assert row.ratio >= 8 * 0.999
    assert report.stored_bytes == sum(r.stored_bytes for r in report)
    assert report.ratio == pytest.approx(report.dense_bytes / report.stored_bytes)


def test_report_table_and_records() -> None:
    model = stac_r(_mlp(), ratio=4)
    empty = compression_report(model)
    assert len(empty) == 3 and empty[0].rank is None and math.isnan(empty[0].eps) and math.isnan(empty.ratio)
    assert "-" in repr(empty)
    model(_inputs(64, 2)).sum().backward()
    report = compression_report(model)
    text = repr(report)
    assert text.splitlines()[0] == "CompressionReport"
    assert all(name in text for name in ("layer", "eps", "cos>=", "ratio"))
    assert "total:" in text.splitlines()[-1]
    records = report.to_records()
    assert len(records) == 3 and records[1]["name"] == "2"
    assert set(records[0]) >= {"stored_bytes", "dense_bytes", "rank", "residual_density", "eps", "cos_bound"}
    with pytest.raises(KeyError):
        report["missing"]
    assert len(compression_report(_mlp())) == 0


def test_eps_matches_the_exact_gradient_error_on_a_block() -> None:
    """Monitor on every row: ε equals ‖ĝ − g‖/‖g‖ against the uncompressed model, layer by layer."""
    base = _mlp()
    model = stac_r(base, ratio=16)
    for layer in model.modules():
        if isinstance(layer, CompressedLinear):
            layer.monitor_rows = 10_000
    x = _inputs(200, 3)
    base(x).square().mean().backward()
    model(x).square().mean().backward()
    report = compression_report(model)
    # the first layer's input is the same in both models, so its gradient error is the layer's alone
    g, ghat = base[0].weight.grad.double(), model[0].weight.grad.double()
    eps = float((ghat - g).norm() / g.norm())
    assert report["0"].eps == pytest.approx(eps, rel=1e-3)
    cos = float((ghat * g).sum() / (ghat.norm() * g.norm()))
    assert cos >= report["0"].cos_bound - 1e-6
    assert report["0"].cos_sample == pytest.approx(cos, abs=1e-6)


def test_exact_layers_report_zero_error() -> None:
    model = stac_r(_mlp(), exact=True)
    model(_inputs(50, 4)).sum().backward()
    for row in compression_report(model):
        assert row.exact and row.eps == 0.0 and row.cos_bound == 1.0
        assert row.coef_dtype == "fp32" and row.residual_density == 0.0 and row.residual_bits is None
        assert row.rank == row.in_features and row.ratio == pytest.approx(1.0)


def test_monitor_every_and_sampled_estimate_close_to_truth() -> None:
    model = stac_r(_mlp(), ratio=8, layers="0")
    layer = model[0]
    layer.monitor_every = 2
    for step in range(3):
        model(_inputs(512, 10 + step)).square().mean().backward()
    assert layer.state.step == 3 and layer.state.eps_step == 3  # steps 1 and 3 are monitored
    assert 0.0 <= layer.state.eps < 1.0
