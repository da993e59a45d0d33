"""predict (the Saved-Surface Predictor): byte-exact agreement with SavedBytesMeter, refusals, the bridge."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from thrifty.compress import (
    CompressedLinear,
    PredictConfig,
    SavedBytesMeter,
    SSPReport,
    predict,
    stac_r,
)


def _lowrank(n: int, d: int, r: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, r, generator=g) @ torch.randn(r, d, generator=g) + 0.01 * torch.randn(n, d, generator=g)


def _meter_peak(model: nn.Module, batch: torch.Tensor, loss_fn=lambda out: out.sum()) -> int:  # type: ignore[no-untyped-def]
    """Saved-activation peak; parameters and the batch (alive in the caller anyway) not counted."""
    held = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), batch]}
    with SavedBytesMeter(exclude=lambda t: t.untyped_storage().data_ptr() in held) as meter:
        loss = loss_fn(model(batch))
    loss.backward()
    model.zero_grad(set_to_none=True)
    del loss
    gc.collect()
    return meter.peak_bytes


class Swiglu(nn.Module):
    """HF Llama/Qwen MLP: down(silu(gate(norm(h))) * up(norm(h))) + h."""

    def __init__(self, d: int, m: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d)
        self.gate = nn.Linear(d, m, bias=False)
        self.up = nn.Linear(d, m, bias=False)
        self.down = nn.Linear(m, d, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.norm(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


class CoConsumed(nn.Module):
    """fc's input is also saved by an elementwise op (x * scale saves x for scale's gradient)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.pre = nn.Linear(d, d)
        self.fc = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.pre(h))
        return self.fc(x) + x * self.scale


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 96), nn.GELU(), nn.Linear(96, 32))


def test_saved_bytes_and_predicted_change_match_the_meter() -> None:
    model = _mlp()
    x = _lowrank(512, 32)
    report = predict(model, x, optimizer="sgd")
    assert isinstance(report, SSPReport)
    base = _meter_peak(model, x)
    assert report.saved_bytes == base  # the graph walk sees exactly what autograd saves, storage-deduplicated
    # fc2's input (the GELU output) is saved by fc2 only; fc1's input is the batch, alive in the caller anyway
    assert report["2"].accepted and report["2"].input_bytes == 512 * 96 * 4
    assert not report["0"].accepted and report["0"].input_bytes == 0 and "the batch itself" in report["0"].reason
    assert report.batch_bytes == 512 * 32 * 4
    assert report.surface_bytes == 512 * 96 * 4
    comp = stac_r(model, plan=report)
    assert isinstance(comp[2], CompressedLinear) and isinstance(comp[0], nn.Linear)
    measured = _meter_peak(comp, x) - base
    assert measured == -report.predicted_saving
    assert 0 < report.predicted_reduction <= report.ssp <= 1
    assert report.peak_bytes == report.fixed_bytes + report.saved_bytes


def test_views_and_repeated_saves_count_one_storage() -> None:
    """Two Linears saving one input (and a view of it): one storage, both listed as sharing it."""

    class Twin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pre = nn.Linear(16, 48)
            self.a = nn.Linear(48, 8)
            self.b = nn.Linear(48, 8)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            x = F.gelu(self.pre(h)).view(4, -1, 48)
            return self.a(x) * self.b(x.reshape(-1, 48)).view(4, -1, 8)

    torch.manual_seed(0)
    model = Twin()
    x = _lowrank(256, 16)
    report = predict(model, x, optimizer="none", config=PredictConfig(ratio=8, plan_all=True))
    assert report.saved_bytes == _meter_peak(model, x)
    assert report["a"].shared_with == ("b",) and report["b"].shared_with == ("a",)
    assert report["a"].input_bytes == report["b"].input_bytes == 256 * 48 * 4
    cost = sum(report[n].stored_bytes + report[n].basis_bytes for n in ("a", "b"))
    assert report.predicted_change(["a", "b"]) == cost - 256 * 48 * 4
    assert report.predicted_change(["a"]) == report["a"].stored_bytes + report["a"].basis_bytes  # b keeps it


def test_co_consumer_is_refused_and_forcing_it_raises_memory_as_predicted() -> None:
    torch.manual_seed(0)
    model = CoConsumed(64)
    x = _lowrank(512, 64)
    report = predict(model, x, optimizer="adamw", config=PredictConfig(plan_all=True))
    row = report["fc"]
    assert not row.accepted
    assert "MulBackward0" in row.reason and "frees nothing" in row.reason
    assert row.co_consumers == ("MulBackward0.self", "TanhBackward0.result")
    base = _meter_peak(model, x)
    forced = stac_r(model, layers=["fc"])
    codec = report._codecs["fc"]
    assert isinstance(forced.fc, CompressedLinear)
    forced.fc.codec.config, forced.fc.codec.u = codec.config, codec.u.clone()  # type: ignore[union-attr]
    measured = _meter_peak(forced, x) - base
    predicted = report.predicted_change(["fc"])
    assert predicted == row.stored_bytes + row.basis_bytes > 0
    assert measured == predicted  # memory goes up by exactly the compressed copy and its basis


def test_swiglu_gate_up_input_net_loss_refused_and_forced_wrap_raises_memory() -> None:
    """gate and up share one input: two compressed copies and two bases must pay for one storage."""
    torch.manual_seed(0)
    model = Swiglu(64, 176)
    h = torch.randn(2, 24, 64)
    report = predict(model, h, optimizer="adamw", config=PredictConfig(ratio=8, plan_all=True))
    for name in ("gate", "up"):
        row = report[name]
        assert not row.accepted
        assert row.reason.startswith("net loss") and "2 compressed copies + 2 bases" in row.reason
    base = _meter_peak(model, h)
    assert report.saved_bytes == base
    forced = stac_r(model, layers=["gate", "up"])
    for name in ("gate", "up"):
        codec = report._codecs[name]
        mod = forced.get_submodule(name)
        assert isinstance(mod, CompressedLinear)
        mod.codec.config, mod.codec.u = codec.config, codec.u.clone()  # type: ignore[union-attr]
    measured = _meter_peak(forced, h) - base
    assert measured == report.predicted_change(["gate", "up"]) > 0


def test_attention_output_projection_is_kept_alive_by_sdpa() -> None:
    class Attn(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = (z.view(b, t, 2, c // 2).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    torch.manual_seed(0)
    model = Attn(32)
    x = torch.randn(2, 16, 32, requires_grad=True)
    report = predict(model, x, optimizer="sgd")
    assert report.saved_bytes == _meter_peak(model, x)
    row = report["proj"]
    if row.co_consumers:  # the SDPA backend saves its output, of which proj's input is a view
        assert not row.accepted and "ScaledDotProduct" in row.reason


def test_gradient_bridge_bound_holds_and_exact_low_rank_is_recovered() -> None:
    model = _mlp()
    report = predict(model, _lowrank(512, 32, seed=1), optimizer="sgd", config=PredictConfig(ratio=4, plan_all=True))
    bridged = [r for r in report if r.rank is not None]
    assert bridged
    for r in bridged:
        assert 0.0 <= r.eps and r.cos_bound <= r.cos + 1e-6 and r.cos <= 1.0 + 1e-9
    # an input of rank 2 < the planned rank: the basis captures it, the bridge sees no error
    torch.manual_seed(0)
    lin = nn.Sequential(nn.Linear(8, 48), nn.Linear(48, 16))
    with torch.no_grad():
        lin[0].weight.zero_()
        lin[0].weight[:2] = torch.randn(2, 8)
    rep = predict(lin, torch.randn(256, 8), optimizer="sgd", config=PredictConfig(ratio=4))
    row = rep["1"]
    assert row.rank is not None and row.rank >= 2
    assert row.rel_error < 1e-2 and row.cos > 0.9999


def test_nothing_changed_by_the_dry_run() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Dropout(0.5), nn.Linear(32, 4))
    model.eval()
    for p in model.parameters():
        p.grad = torch.full_like(p, 3.0)
    grads = [p.grad for p in model.parameters()]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(64, 16)
    rng = torch.get_rng_state()
    predict(model, x, optimizer="adam")
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert all(bool((p.grad == 3.0).all()) for p in model.parameters())  # type: ignore[union-attr]
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())  # BatchNorm stats restored
    assert torch.equal(torch.get_rng_state(), rng)
    assert not any(m.training for m in model.modules())


def test_optimizer_state_bytes() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 96), nn.Linear(96, 8))
    model[1].weight.requires_grad_(False)  # its input is saved by nobody; layer 0's input is the batch:
    model[1].bias.requires_grad_(False)  # nothing to plan, the test stays fast
    x = _lowrank(64, 32)
    nbytes = sum(p.numel() * 4 for p in model.parameters() if p.requires_grad)
    count = 2
    assert predict(model, x, optimizer="sgd").optimizer_bytes == 0
    assert predict(model, x, optimizer="sgd-momentum").optimizer_bytes == nbytes
    assert predict(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)).optimizer_bytes == nbytes
    assert predict(model, x, optimizer=torch.optim.AdamW(model.parameters())).optimizer_bytes == 2 * nbytes + 4 * count
    ams = torch.optim.Adam(model.parameters(), amsgrad=True)
    assert predict(model, x, optimizer=ams).optimizer_bytes == 3 * nbytes + 4 * count
    rep = predict(model, x)
    assert rep.optimizer_bytes == 2 * nbytes + 4 * count and "AdamW" in rep.optimizer
    assert rep.grad_bytes == nbytes and rep.param_bytes == sum(p.numel() * 4 for p in model.parameters())


def test_report_views_and_plan() -> None:
    model = _mlp()
    x = _lowrank(512, 32)
    report = predict(model, x, optimizer="sgd", config={"ratio": 8})
    recs = report.to_records()
    assert [r["name"] for r in recs] == ["0", "2"] and {"accepted", "reason", "net_saving", "cos"} <= set(recs[0])
    text = repr(report)
    assert "SSP = A_C+/P" in text and "refused:" in text and "the batch itself" in text
    assert len(report) == 2 and report[1] is report["2"] and [r.name for r in report] == ["0", "2"]
    import matplotlib

    matplotlib.use("Agg")
    ax = report.plot()
    assert len(ax.patches) == 4
    with pytest.raises(ValueError, match="layers"):
        stac_r(model, plan=report, layers="0")
    with pytest.raises(ValueError, match="ratio"):
        stac_r(model, ratio=4, plan=report)
    with pytest.raises(TypeError, match="plan"):
        stac_r(model, plan="report")
    with pytest.raises(ValueError, match="not a candidate"):
        report.predicted_change(["nope"])


def test_readme_predictor_example_and_docstrings_run(capsys: pytest.CaptureFixture[str]) -> None:
    import doctest
    import re
    from pathlib import Path

    from thrifty.compress import _predict

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = text.split("### Know before training: the Saved-Surface Predictor", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README example, run as written
    assert "SSPReport" in capsys.readouterr().out
    ssp = scope["ssp"]
    assert isinstance(ssp, SSPReport) and ssp.accepted == ("2",)
    result = doctest.testmod(_predict, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
