"""Hugging Face families as they ship (tiny configurations, random weights, nothing downloaded).

Every eligible projection is wrapped (GPT-2's ``Conv1D`` like ``nn.Linear``), the exactness switch reproduces
every gradient, ``predict`` equals what ``SavedBytesMeter`` measures, and a few compressed training steps track
the uncompressed loss.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from thrifty.compress import CompressedLinear, predict, register_linear, stac_r, unwrap
from thrifty.compress._meter import step_saved_peak

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)

V, T, B = 128, 32, 2  # vocabulary, tokens, sequences: 64 rows per projection


def _gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=V, n_positions=T, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def _neox() -> nn.Module:
    cfg = transformers.GPTNeoXConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                     vocab_size=V, max_position_embeddings=T, bos_token_id=0, eos_token_id=0)  # fmt: skip
    return transformers.GPTNeoXForCausalLM(cfg)


def _llama() -> nn.Module:
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, vocab_size=V, max_position_embeddings=T,
                                   bos_token_id=0, eos_token_id=0, pad_token_id=0)  # fmt: skip
    return transformers.LlamaForCausalLM(cfg)


def _qwen2() -> nn.Module:
    cfg = transformers.Qwen2Config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, vocab_size=V, max_position_embeddings=T,
                                   bos_token_id=0, eos_token_id=0)  # fmt: skip
    return transformers.Qwen2ForCausalLM(cfg)


def _opt() -> nn.Module:
    cfg = transformers.OPTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=128,
                                 word_embed_proj_dim=64, vocab_size=V, max_position_embeddings=T + 2, dropout=0.0,
                                 attention_dropout=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=1)  # fmt: skip
    return transformers.OPTForCausalLM(cfg)


def _bert() -> nn.Module:
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                  vocab_size=V, max_position_embeddings=T, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, pad_token_id=0)  # fmt: skip
    return transformers.BertForMaskedLM(cfg)


def _t5() -> nn.Module:
    cfg = transformers.T5Config(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128,
                                vocab_size=V, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                                eos_token_id=1)  # fmt: skip
    return transformers.T5ForConditionalGeneration(cfg)


def _lora() -> nn.Module:
    peft = pytest.importorskip("peft")
    base = _llama()
    cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = peft.get_peft_model(base, cfg)
    for name, p in model.named_parameters():  # peft initialises lora_B to zero; random B keeps every gradient alive
        if "lora_B" in name:
            with torch.no_grad():
                p.normal_(0.0, 0.02)
    return model


def _ids(seed: int) -> torch.Tensor:
    return torch.randint(2, V, (B, T), generator=torch.Generator().manual_seed(seed))


def _batch(family: str, seed: int = 1) -> dict[str, torch.Tensor]:
    ids = _ids(seed)
    if family == "t5":
        return {"input_ids": ids, "labels": _ids(seed + 100)}
    return {"input_ids": ids, "labels": ids}


FAMILIES: dict[str, Callable[[], nn.Module]] = {
    "gpt2": _gpt2, "gpt_neox": _neox, "llama": _llama, "qwen2": _qwen2, "opt": _opt, "bert": _bert, "t5": _t5,
    "lora": _lora,
}  # fmt: skip


def _make(family: str) -> nn.Module:
    torch.manual_seed(0)
    return FAMILIES[family]()


def _projections(model: nn.Module) -> list[str]:
    """Every Linear-like module (nn.Linear and transformers' Conv1D) of the model."""
    conv1d = transformers.pytorch_utils.Conv1D
    return [n for n, m in model.named_modules() if n and type(m) in (nn.Linear, conv1d)]


def _meter_peak(model: nn.Module, batch: dict[str, torch.Tensor]) -> int:
    return step_saved_peak(model, batch, lambda out: out.loss)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_projection_wrapped_and_exact_switch_reproduces_every_gradient(family: str) -> None:
    model = _make(family)
    keys = list(model.state_dict())
    comp = stac_r(model, exact=True)
    wrapped = [n for n, m in comp.named_modules() if isinstance(m, CompressedLinear)]
    assert wrapped == _projections(model)
    assert list(comp.state_dict()) == keys  # the same keys: checkpoints load either way
    batch = _batch(family)
    model(**batch).loss.backward()
    comp(**batch).loss.backward()
    ref = dict(model.named_parameters())
    for name, p in comp.named_parameters():
        if ref[name].grad is None:
            assert p.grad is None, name
            continue
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, ref[name].grad, rtol=1e-5, atol=1e-6, msg=name)
    back = unwrap(comp)
    assert [n for n, m in back.named_modules() if n and type(m) in (nn.Linear, transformers.pytorch_utils.Conv1D)] == wrapped
    assert not any(isinstance(m, CompressedLinear) for m in back.modules())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_predict_equals_measured(family: str) -> None:
    model = _make(family)
    batch = _batch(family)
    report = predict(model, batch, optimizer="adamw")
    base = _meter_peak(model, batch)
    assert report.saved_bytes == base
    assert report.accepted, str(report)
    comp = stac_r(model, plan=report)
    assert _meter_peak(comp, batch) - base == -report.predicted_saving
    assert 0 < report.predicted_reduction <= report.ssp


@pytest.mark.parametrize("family", list(FAMILIES))
def test_compressed_training_tracks_the_uncompressed_loss(family: str) -> None:
    losses: dict[bool, list[float]] = {}
    for compressed in (False, True):
        model = _make(family)
        if compressed:
            model = stac_r(model, ratio=8, inplace=True)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
        run = []
        for step in range(4):
            loss = model(**_batch(family, seed=step % 2)).loss  # two batches, seen twice each
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run.append(float(loss))
        losses[compressed] = run
    plain, comp = losses[False], losses[True]
    assert plain[-1] < plain[0] and comp[-1] < comp[0]  # both learn
    for a, b in zip(plain, comp):
        assert abs(a - b) <= 0.02 * a, (plain, comp)


def test_gpt2_conv1d_is_treated_like_linear() -> None:
    model = _gpt2()
    conv1d = transformers.pytorch_utils.Conv1D
    comp = stac_r(model, ratio=8)
    layer = comp.transformer.h[0].attn.c_attn
    assert isinstance(layer, CompressedLinear) and layer.weight_layout == "in_out"
    assert (layer.in_features, layer.out_features) == (64, 192)
    assert comp.lm_head.weight is comp.transformer.wte.weight  # weight tying kept
    for m in comp.modules():
        if isinstance(m, CompressedLinear) and m.weight_layout == "in_out":
            assert m.weight.shape == (m.in_features, m.out_features)
    comp(**_batch("gpt2")).loss.backward()
    assert layer.config is not None and layer.config.rank < 64  # compressed, not the dense input
    back = unwrap(comp, inplace=True)
    c_attn = back.transformer.h[0].attn.c_attn
    assert type(c_attn) is conv1d and c_attn.weight is layer.weight and c_attn.bias is layer.bias
    assert back.lm_head.weight is back.transformer.wte.weight
    out = back(**_batch("gpt2"))  # the Conv1D forward runs again
    assert torch.isfinite(out.loss)


def test_lora_wraps_the_adapters_and_leaves_the_frozen_base_uncompressed() -> None:
    model = _lora()
    comp = stac_r(model, ratio=8)
    q = comp.base_model.model.model.layers[0].self_attn.q_proj
    assert isinstance(q.lora_A["default"], CompressedLinear) and isinstance(q.lora_B["default"], CompressedLinear)
    comp(**_batch("lora")).loss.backward()
    assert q.lora_A["default"].state.step == 1 and q.lora_A["default"].state.stored_bytes > 0
    base = q.base_layer
    assert not base.weight.requires_grad and base.weight.grad is None
    assert not isinstance(base, CompressedLinear) or base.state.step == 0  # frozen: nothing saved, plain path


class _Dense(nn.Module):
    """A Linear-like module the library does not know: weight stored (in, out) under other names."""

    def __init__(self, d: int, m: int) -> None:
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(d, m) / d**0.5)
        self.offset = nn.Parameter(torch.randn(m) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.kernel + self.offset


def test_register_linear_adapter() -> None:
    class Dense(_Dense):  # registered here only (the registry is global)
        pass

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 48), nn.GELU(), Dense(48, 8))  # GELU saves its input, not its output
    with pytest.raises(TypeError, match=r"layers: '2' is a Dense"):
        stac_r(model, layers="2")
    register_linear(Dense, weight="kernel", bias="offset", layout="in_out")
    comp = stac_r(model, exact=True)
    assert isinstance(comp[2], CompressedLinear) and list(comp.state_dict()) == list(model.state_dict())
    x = torch.randn(4, 10, 16)
    model(x).square().sum().backward()
    comp(x).square().sum().backward()
    for (n, p), q in zip(model.named_parameters(), comp.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=n)
    back = unwrap(comp)
    assert type(back[2]) is Dense
    report = predict(model, x, optimizer="sgd")
    assert report["2"].in_features == 48 and report["2"].out_features == 8 and report["2"].accepted


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"layout": "row"}, ValueError, "layout: must be"),
        ({"weight": 3}, TypeError, "weight, bias"),
        ({"input": 3}, TypeError, "input: expected a callable"),
    ],
)
def test_register_linear_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        register_linear(_Dense, **kwargs)
    with pytest.raises(TypeError, match="cls: expected a subclass"):
        register_linear(int)  # type: ignore[arg-type]


def test_lean_activations_gpt2_same_gradients_fewer_saved_bytes() -> None:
    from thrifty.compress import lean_activations

    model = _gpt2()
    lean = lean_activations(model)
    assert type(model.transformer.h[0].mlp.act).__name__ == "NewGELUActivation"  # the original untouched
    assert isinstance(lean.transformer.h[0].mlp.act, nn.GELU) and list(lean.state_dict()) == list(model.state_dict())
    batch = _batch("gpt2")
    base, leaner = _meter_peak(model, batch), _meter_peak(lean, batch)
    # per block: gelu_new saved 4 tensors of (B*T, 4*64) float32, the single op saves 1
    assert base - leaner == 2 * 3 * B * T * 256 * 4
    model(**batch).loss.backward()
    lean(**batch).loss.backward()
    for (n, p), q in zip(model.named_parameters(), lean.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=n)
    report = predict(lean, batch, optimizer="adamw")
    assert report.saved_bytes == leaner and "PowBackward0" not in report.saved_by
    with pytest.raises(ValueError, match="no composite tanh-GELU"):
        lean_activations(lean)
