"""torch.compile of compressed models: each CompressedLinear is one custom op (``thrifty::stac_layer``), so the
compressed layers add no graph break, and compiled outputs and gradients equal eager ones."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from thrifty.compress import CompressedLinear, stac_r  # noqa: E402
from thrifty.compress._linear import stac_layer  # noqa: E402


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 96), nn.Tanh(), nn.Linear(96, 12))


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _run(model: Any, x: torch.Tensor, steps: int = 3) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    outs = []
    for _ in range(steps):
        model.zero_grad()
        y = model(x)
        y.square().mean().backward()
        outs.append(y.detach())
    return outs, _grads(model)


@pytest.mark.parametrize("warm", [False, True])
def test_compressed_layers_add_no_graph_break_and_match_eager(warm: bool) -> None:
    x = torch.randn(64, 48, generator=torch.Generator().manual_seed(1))
    eager = stac_r(_mlp(), 8)
    if warm:  # planned before compiling (static factor sizes) or planned inside the compiled graph's first run
        eager(x).sum().backward()
    compiled_model = copy.deepcopy(eager)
    explained = torch._dynamo.explain(copy.deepcopy(eager))(x)
    if warm:
        assert explained.graph_break_count == 0 and explained.graph_count == 1
    else:  # the planning step runs eagerly (the first call only)
        assert explained.graph_break_count > 0
    compiled = torch.compile(compiled_model, backend="aot_eager", fullgraph=warm)
    out_e, grad_e = _run(eager, x)
    out_c, _ = _run(compiled, x)
    grad_c = _grads(compiled_model)
    for a, b in zip(out_e, out_c, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert grad_e.keys() == grad_c.keys() and len(grad_e) == 6
    for name, g in grad_e.items():
        torch.testing.assert_close(grad_c[name], g, rtol=1e-5, atol=1e-6, msg=name)
    after = torch._dynamo.explain(copy.deepcopy(compiled_model))(x)  # planned now: one graph
    assert after.graph_break_count == 0 and after.graph_count == 1
    for a, b in zip(eager.modules(), compiled_model.modules(), strict=True):
        if isinstance(a, CompressedLinear):  # the policy ran inside the op: steps, plan, basis, monitor alike
            assert isinstance(b, CompressedLinear) and b.state == a.state and b.config == a.config
            assert torch.equal(b.codec.u, a.codec.u)


def test_gpt2_compiles_with_no_more_graph_breaks_than_the_plain_model() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    plain = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(2))
    comp = stac_r(plain, 8)
    eager_loss = comp(input_ids=ids, labels=ids).loss
    eager_loss.backward()
    ref = _grads(comp)
    base = torch._dynamo.explain(plain)(input_ids=ids, labels=ids).graph_break_count
    got = torch._dynamo.explain(copy.deepcopy(comp))(input_ids=ids, labels=ids).graph_break_count
    assert got == base  # transformers' own breaks only: 9 planned compressed projections add none
    twin = stac_r(plain, 8)
    compiled = torch.compile(twin, backend="aot_eager")
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-6)
    for name, g in ref.items():
        torch.testing.assert_close(_grads(twin)[name], g, rtol=1e-4, atol=1e-6, msg=name)


def test_layer_op_passes_opcheck() -> None:
    torch.manual_seed(0)
    layer = CompressedLinear(nn.Linear(40, 24), 4)
    x = torch.randn(32, 40)
    layer(x).sum().backward()  # planned: the fake kernel knows the factor sizes
    w = layer.weight.detach().requires_grad_(True)
    torch.library.opcheck(stac_layer, (x, w, layer.bias.detach(), layer._handle),
                          test_utils=("test_schema", "test_faketensor"))  # fmt: skip
