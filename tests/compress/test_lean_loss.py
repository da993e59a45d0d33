"""The chunked linear cross-entropy (``linear_cross_entropy`` / ``lean_loss``) and the lean pieces in ``predict``
(issue 18, point 3): exact against ``cross_entropy`` on the full logits, the full-vocabulary log-softmax no longer
saved, and ``predict(config lean=True)`` counting what the lean pieces free byte for byte."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from thrifty.compress import (
    PredictConfig,
    lean_activations,
    lean_loss,
    linear_cross_entropy,
    predict,
    stac_r,
)
from thrifty.compress._meter import step_saved_peak

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, D = 301, 24


def _reference(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, labels: torch.Tensor, **kw: object) -> torch.Tensor:
    logits = F.linear(h, w, b).float()
    targets = F.pad(labels, (0, 1), value=-100)[..., 1:].reshape(-1)
    return F.cross_entropy(logits.view(-1, w.shape[0]), targets, ignore_index=-100, **kw)  # type: ignore[arg-type]


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(3, 17, D, generator=g).requires_grad_()
    w = (0.3 * torch.randn(V, D, generator=g)).requires_grad_()
    b = (0.1 * torch.randn(V, generator=g)).requires_grad_()
    labels = torch.randint(0, V, (3, 17), generator=g)
    labels[0, :6] = -100  # ignored rows (padding / prompt)
    return h, w, b, labels


@pytest.mark.parametrize("chunk", [1, 7, 64, None])
def test_linear_cross_entropy_equals_full_logits_fp32(chunk: int | None) -> None:
    h, w, b, labels = _inputs()
    loss = linear_cross_entropy(h, w, labels, b, chunk_rows=chunk)
    ref = _reference(h, w, b, labels)
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    got = torch.autograd.grad(loss, (h, w, b))
    want = torch.autograd.grad(ref, (h, w, b))
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-7)


def test_linear_cross_entropy_sum_num_items_and_no_shift() -> None:
    h, w, b, labels = _inputs(1)
    torch.testing.assert_close(linear_cross_entropy(h, w, labels, b, reduction="sum", chunk_rows=5),
                               _reference(h, w, b, labels, reduction="sum"), rtol=1e-6, atol=1e-5)  # fmt: skip
    torch.testing.assert_close(linear_cross_entropy(h, w, labels, b, num_items_in_batch=torch.tensor(40)),
                               _reference(h, w, b, labels, reduction="sum") / 40, rtol=1e-6, atol=1e-6)  # fmt: skip
    flat = F.cross_entropy(F.linear(h, w).reshape(-1, V), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(linear_cross_entropy(h, w, labels, shift=False, chunk_rows=9), flat)
    everything_ignored = torch.full_like(labels, -100)
    assert torch.isnan(linear_cross_entropy(h, w, everything_ignored))  # as cross_entropy's mean over nothing
    assert torch.isnan(_reference(h, w, b, everything_ignored))


def test_linear_cross_entropy_bf16_autocast_matches_autocast_reference() -> None:
    h, w, b, labels = _inputs(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = linear_cross_entropy(h, w, labels, b, chunk_rows=11)
        ref = _reference(h, w, b, labels)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-4)
    got = torch.autograd.grad(loss, (h, w, b))
    want = torch.autograd.grad(ref, (h, w, b))
    for a, e in zip(got, want):
        assert a.dtype == e.dtype
        cos = F.cosine_similarity(a.flatten().double(), e.flatten().double(), dim=0)
        assert cos > 0.9999 and float((a - e).norm() / e.norm()) < 1e-2


def _gpt2(layers: int = 2, vocab: int = 1000) -> nn.Module:
    cfg = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=vocab, n_positions=64)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg)


def test_lean_loss_gpt2_same_loss_and_gradients_tied_weights_kept() -> None:
    model = _gpt2()
    lean = lean_loss(model, chunk_rows=13)
    assert "forward" not in model.__dict__  # the model passed in is untouched
    assert lean.lm_head.weight is lean.transformer.wte.weight and list(lean.state_dict()) == list(model.state_dict())
    ids = torch.randint(0, 1000, (2, 32), generator=torch.Generator().manual_seed(3))
    labels = ids.clone()
    labels[1, :10] = -100
    for autocast in (False, True):
        model.zero_grad()
        lean.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            torch.manual_seed(5)  # the same dropout masks
            ref = model(input_ids=ids, labels=labels)
            torch.manual_seed(5)
            out = lean(input_ids=ids, labels=labels)
        assert out.logits is None and ref.logits.shape == (2, 32, 1000)
        torch.testing.assert_close(out.loss, ref.loss, rtol=1e-5, atol=1e-5)
        ref.loss.backward()
        out.loss.backward()
        for (name, p), q in zip(model.named_parameters(), lean.parameters()):
            assert q.grad is not None and p.grad is not None
            assert float((q.grad - p.grad).norm() / p.grad.norm()) < (1e-4 if not autocast else 1e-2), name
    torch.manual_seed(9)
    logits = lean(input_ids=ids).logits  # no labels: the model's own forward
    torch.manual_seed(9)
    torch.testing.assert_close(logits, model(input_ids=ids).logits)


def test_lean_loss_removes_the_full_vocabulary_log_softmax() -> None:
    model = _gpt2()
    lean = lean_loss(model)
    ids = torch.randint(0, 1000, (2, 32), generator=torch.Generator().manual_seed(4))
    batch = {"input_ids": ids, "labels": ids}
    torch.manual_seed(0)
    base = step_saved_peak(model, batch, lambda o: o.loss)
    torch.manual_seed(0)
    got = step_saved_peak(lean, batch, lambda o: o.loss)
    rows = 2 * 32
    # the fp32 log-softmax (rows x vocab) and nll's 4-byte total weight go; one fp32 log-sum-exp per row comes
    assert base - got == rows * 1000 * 4 + 4 - rows * 4


@pytest.mark.parametrize("autocast", [False, True])
def test_predict_lean_counts_the_lean_pieces_byte_exactly(autocast: bool) -> None:
    model = _gpt2()
    ids = torch.randint(0, 1000, (2, 32), generator=torch.Generator().manual_seed(6))
    batch = {"input_ids": ids, "labels": ids}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        plain = predict(model, batch, optimizer="adamw", config=8.0)
        rep = predict(model, batch, optimizer="adamw", config=PredictConfig(ratio=8.0, lean=True))
        torch.manual_seed(0)
        base = step_saved_peak(model, batch, lambda o: o.loss)
        leaned = lean_loss(lean_activations(model))
        torch.manual_seed(0)
        lean_saved = step_saved_peak(leaned, batch, lambda o: o.loss)
    assert plain.lean == () and plain.lean_saving == 0
    assert rep.saved_bytes == base == plain.saved_bytes
    assert rep.lean_saving == base - lean_saved  # byte for byte, as the meter measures
    assert sorted(r.name for r in rep.lean) == ["loss", "transformer.h.0.mlp.act", "transformer.h.1.mlp.act"]
    assert all(r.fidelity.startswith("exact") and 0 < r.freed_bytes <= r.saved_bytes for r in rep.lean)
    assert not rep["lm_head"].accepted and "chunked loss" in rep["lm_head"].reason
    assert rep.predicted_reduction > plain.predicted_reduction and rep.predicted_reduction <= rep.ssp
    assert "lean pieces" in rep.summary()


def test_predict_lean_measured_within_half_a_point() -> None:
    model = _gpt2(layers=2)
    ids = torch.randint(0, 1000, (4, 64), generator=torch.Generator().manual_seed(7))
    batch = {"input_ids": ids, "labels": ids}
    rep = predict(model, batch, optimizer="adamw", config={"ratio": 8.0, "lean": True})
    torch.manual_seed(0)
    base = step_saved_peak(model, batch, lambda o: o.loss)
    with pytest.raises(ValueError, match="plan: counts the lean pieces"):
        stac_r(model, plan=rep)  # the shipped model: the report's lean saving would not happen
    comp = stac_r(lean_loss(lean_activations(model)), plan=rep)
    torch.manual_seed(0)
    got = step_saved_peak(comp, batch, lambda o: o.loss)
    measured = (base - got) / (rep.fixed_bytes + base)
    assert rep.predicted_reduction > 0.05
    assert abs(measured - rep.predicted_reduction) < 0.005, (measured, rep.predicted_reduction)


def test_predict_lean_on_fake_model_equals_real_run() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    ids = torch.randint(0, 1000, (2, 32), generator=torch.Generator().manual_seed(8))
    real = predict(_gpt2(), {"input_ids": ids, "labels": ids}, config={"lean": True})
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake_ids = torch.randint(0, 1000, (2, 32))
        fake = predict(_gpt2(), {"input_ids": fake_ids, "labels": fake_ids}, config={"lean": True})
    assert [(r.name, r.freed_bytes) for r in fake.lean] == [(r.name, r.freed_bytes) for r in real.lean]
    assert fake.peak_bytes == real.peak_bytes


def test_lean_loss_and_linear_cross_entropy_bad_input() -> None:
    h, w, b, labels = _inputs()
    with pytest.raises(TypeError, match="hidden"):
        linear_cross_entropy(h.long(), w, labels)
    with pytest.raises(TypeError, match="weight"):
        linear_cross_entropy(h, w[0], labels)
    with pytest.raises(ValueError, match="weight"):
        linear_cross_entropy(h, w[:, :5], labels)
    with pytest.raises(TypeError, match="labels"):
        linear_cross_entropy(h, w, labels.float())
    with pytest.raises(ValueError, match="labels"):
        linear_cross_entropy(h, w, labels[:, :3])
    bad = labels.clone()
    bad[1, 2] = V
    with pytest.raises(ValueError, match="labels"):
        linear_cross_entropy(h, w, bad)
    with pytest.raises(TypeError, match="bias"):
        linear_cross_entropy(h, w, labels, b[:3])
    with pytest.raises(ValueError, match="reduction"):
        linear_cross_entropy(h, w, labels, reduction="none")
    with pytest.raises(ValueError, match="chunk_rows"):
        linear_cross_entropy(h, w, labels, chunk_rows=0)
    with pytest.raises(TypeError, match="ignore_index"):
        linear_cross_entropy(h, w, labels, ignore_index=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model"):
        lean_loss(nn.Linear(3, 3))
    with pytest.raises(TypeError, match="model"):
        lean_loss("gpt2")  # type: ignore[type-var]
    with pytest.raises(ValueError, match="chunk_rows"):
        lean_loss(_gpt2(1), chunk_rows=-1)
    with pytest.raises(TypeError, match="config.lean"):
        predict(_gpt2(1), torch.zeros(1, 4, dtype=torch.long), config={"lean": 1})


def test_lean_loss_survives_deepcopy_and_torch_save() -> None:
    import copy
    import io

    from thrifty.compress._loss import has_lean_loss

    model = _gpt2(1).eval()
    lean = lean_loss(model)
    buf = io.BytesIO()
    torch.save(lean, buf)
    buf.seek(0)
    ids = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(9))
    for again in (copy.deepcopy(lean), torch.load(buf, weights_only=False)):
        assert has_lean_loss(again) and again.forward.args[0] is again  # bound to the copy, not to the original
        out = again(input_ids=ids, labels=ids)
        assert out.logits is None
        torch.testing.assert_close(out.loss, model(input_ids=ids, labels=ids).loss)
