"""predict on the meta device (issue 18, point 2): the byte-exact plan of a model too large to run here."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from thrifty.compress import predict, stac_r
from thrifty.compress._meter import step_saved_peak

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)


def _gpt2(device: str) -> nn.Module:
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)  # fmt: skip
    cfg._attn_implementation = "eager"  # the meta device runs attention's math path; eager is that path everywhere
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.GPT2LMHeadModel(cfg)


def _neox(device: str) -> nn.Module:
    cfg = transformers.GPTNeoXConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256,
                                     vocab_size=128, max_position_embeddings=64, bos_token_id=0, eos_token_id=0)  # fmt: skip
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.GPTNeoXForCausalLM(cfg)


def _batch(device: str) -> dict[str, torch.Tensor]:
    ids = torch.randint(2, 128, (4, 64), generator=torch.Generator().manual_seed(1)).to(device)
    return {"input_ids": ids, "labels": ids}


def _meter_peak(model: nn.Module, batch: dict[str, torch.Tensor]) -> int:
    return step_saved_peak(model, batch, lambda out: out.loss)


@pytest.mark.parametrize("make", [_gpt2, _neox], ids=["gpt2", "gpt_neox"])
def test_meta_plan_is_byte_exact(make) -> None:  # type: ignore[no-untyped-def]
    real, meta = make("cpu"), make("meta")
    rep_real = predict(real, _batch("cpu"), optimizer="adamw")
    rep_meta = predict(meta, _batch("meta"), optimizer="adamw")
    assert rep_meta.layouts.startswith("byte budget") and rep_real.layouts == "planned on the batch"
    for term in ("param_bytes", "batch_bytes", "grad_bytes", "optimizer_bytes", "saved_bytes", "transient_bytes",
                 "surface_bytes", "peak_bytes", "base_flops"):  # fmt: skip
        assert getattr(rep_meta, term) == getattr(rep_real, term), term
    assert rep_meta.saved_by == rep_real.saved_by
    assert rep_meta.ssp > 0 and rep_meta.predicted_reduction > 0  # never a silent zero
    for a, b in zip(rep_meta.layers, rep_real.layers):
        assert (a.name, a.input_bytes, a.rows, a.shared_with, a.co_consumers) == (b.name, b.input_bytes, b.rows, b.shared_with, b.co_consumers)
        if a.rank is not None:
            assert a.stored_bytes <= a.rows * a.in_features * 4 / 8 and torch.isnan(torch.tensor(a.cos))
    # only the choice among layouts of one budget needs data (0.7 points apart on this tiny model)
    assert abs(rep_meta.predicted_reduction - rep_real.predicted_reduction) < 0.01
    # the meta plan applied to the real model: its layouts, bases from the first batch; the meter agrees exactly
    base = _meter_peak(real, _batch("cpu"))
    assert base == rep_meta.saved_bytes
    comp = stac_r(real, plan=rep_meta)
    assert _meter_peak(comp, _batch("cpu")) - base == -rep_meta.predicted_saving


def test_meta_run_that_saves_nothing_raises() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(16, 8))
    model.requires_grad_(False)
    model[0].bias.requires_grad_(True)  # a loss that requires grad, nothing saved (bias-only gradient)
    with pytest.raises(RuntimeError, match="saved nothing for backward"):
        predict(model, torch.empty(32, 16, device="meta"), optimizer="sgd")
