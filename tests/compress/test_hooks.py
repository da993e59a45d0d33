"""compress_saved: the generic saved-tensor path (exactness switch, storage de-duplication, skips, checkpoint)."""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from thrifty.compress import compress_saved, stac_r
from thrifty.compress._codec import LayerCodec
from thrifty.compress._hooks import SavedCompressor


class _Block(nn.Module):
    """Attention (q/k/v views of one projection) + LayerNorm + SwiGLU-style gating: many non-Linear saves."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.ln(x)
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, n, d))
        g, u = self.up(x).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u * torch.tanh(u))


def _grads(model: nn.Module, x: torch.Tensor, wrap: Callable[[], Any] | None = None) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    if wrap is None:
        loss = model(x).square().mean()
    else:
        with wrap():
            loss = model(x).square().mean()
    loss.backward()
    return [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]


def _structured(n: int, d: int, rank: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g) + 0.01 * torch.randn(n, d, generator=g)


class _CountCompress:
    """Counts encodes (one STAC-R compression of a batch; planning's trial encodes are not counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.rows: list[int] = []
        real = LayerCodec.encode

        def counting(codec: LayerCodec, x: torch.Tensor, u: torch.Tensor) -> Any:
            self.calls += 1
            self.rows.append(int(x.shape[0]))
            return real(codec, x, u)

        monkeypatch.setattr(LayerCodec, "encode", counting)


def test_exact_switch_reproduces_gradients() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), _Block())
    x = torch.randn(2, 16, 32)
    ref = _grads(model, x)
    hooks = compress_saved(exact=True, min_bytes=0)
    got = _grads(model, x, lambda: hooks)
    assert hooks.compressed >= 10  # LayerNorm input, attention q/k/v storage and output, gates, ...
    assert hooks.skipped.get("parameter", 0) >= 8  # weight.t() of every Linear, LayerNorm weight/bias
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    assert hooks.stored_bytes == 0 and hooks.dense_bytes == 0  # released with the graph


def test_storage_saved_several_times_is_compressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    count = _CountCompress(monkeypatch)
    y = _structured(64, 48, 4, seed=1).requires_grad_(True)

    ones = torch.ones(3, 48, requires_grad=True)

    def f(v: torch.Tensor) -> torch.Tensor:
        z = v * 1.5  # one storage, saved below by mul (twice), sin and mm (as the transposed view z.t())
        return (z * z).sum() + z.sin().sum() + (ones @ z.t()).sum() + (z[:, 5:9] * 2.0).tanh().sum()

    with compress_saved(exact=True, min_bytes=1024) as hooks:
        out = f(y)
    # packs: z by mul (twice), sin and mm (z.t()); ones by mm (576 bytes: below min_bytes); tanh's output
    assert hooks.packs == 6
    assert hooks.skipped == {"small": 1}
    assert hooks.compressed == count.calls == 2  # z once for its four saves, and tanh's output
    assert count.rows == [64, 64]
    assert hooks.dense_bytes == 64 * 48 * 4 + 64 * 4 * 4
    ref_y = y.detach().clone().requires_grad_(True)
    f(ref_y).backward()
    out.backward()
    torch.testing.assert_close(y.grad, ref_y.grad, rtol=0, atol=1e-5)
    assert hooks.stored_bytes == 0


def test_dedup_counts_each_storage_once(monkeypatch: pytest.MonkeyPatch) -> None:
    count = _CountCompress(monkeypatch)
    y = _structured(128, 64, 4, seed=2).requires_grad_(True)
    with compress_saved(ratio=4, min_bytes=0) as hooks:
        z = y + 0.0
        q, k, v = z.view(128, 4, 16).unbind(1)[:3]  # three views of one storage (like q/k/v of one projection)
        out = (q * k * v).sum() + (z * z).sum()
    # q*k saves q and k, (q*k)*v saves q*k (a new storage) and v, z*z saves z twice: 6 packs, 2 storages
    assert hooks.packs == 6
    assert count.calls == hooks.compressed == 2
    assert hooks.dense_bytes == 128 * 64 * 4 + 128 * 16 * 4
    out.backward()
    assert y.grad is not None and bool(torch.isfinite(y.grad).all())


def test_reused_address_is_not_confused_with_a_freed_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    count = _CountCompress(monkeypatch)
    x = torch.randn(64, 32, requires_grad=True)
    outs = []
    with compress_saved(exact=True, min_bytes=0) as hooks:
        for i in range(4):
            outs.append(torch.tanh(x * float(i + 1)).sum())  # x*(i+1) is freed after tanh saved its output
    assert hooks.compressed == count.calls == 4
    sum(outs).backward()
    ref = x.detach().clone().requires_grad_(True)
    sum(torch.tanh(ref * float(i + 1)).sum() for i in range(4)).backward()
    torch.testing.assert_close(x.grad, ref.grad, rtol=0, atol=1e-6)


def test_lossy_path_compresses_and_gradients_stay_close() -> None:
    torch.manual_seed(3)
    x = _structured(512, 64, 6, seed=3)
    w = torch.randn(64, 64) / 8
    xa = x.clone().requires_grad_(True)
    ref = (F.gelu(xa @ w) * torch.tanh(xa)).square().mean()
    ref.backward()
    xb = x.clone().requires_grad_(True)
    with compress_saved(ratio=4) as hooks:
        out = (F.gelu(xb @ w) * torch.tanh(xb)).square().mean()
    # saved: w by mm (16 KiB: below min_bytes), x@w by gelu, gelu(x@w) and tanh(x) by mul, tanh(x) by tanh
    # (its output: the same storage), the product by square -> 4 storages compressed, one of them saved twice
    assert hooks.compressed == 4 and hooks.packs == 6
    assert hooks.peak_stored_bytes * 4 == hooks.peak_dense_bytes  # the planned budget is met exactly here
    out.backward()
    assert xa.grad is not None and xb.grad is not None
    cos = F.cosine_similarity(xa.grad.flatten(), xb.grad.flatten(), dim=0)
    # elementwise derivatives of rebuilt tensors are sensitive: 0.987 at 4x here (0.68 at 8x, see the docs)
    assert float(cos) > 0.98
    assert hooks.stored_bytes == 0


def test_parameters_and_excluded_and_small_are_skipped() -> None:
    torch.manual_seed(4)
    lin = nn.Linear(32, 32)
    buf = torch.randn(64, 32)
    x = torch.randn(64, 32, requires_grad=True)
    with compress_saved(exact=True, min_bytes=0, exclude=[buf]) as hooks:
        out = (lin(x) * buf).sum() + (x * lin.weight.sum()).sum()
    assert hooks.skipped.get("parameter", 0) >= 1  # weight.t() saved by addmm
    assert hooks.skipped.get("excluded", 0) == 1
    with compress_saved(exact=True, min_bytes=1 << 20) as big:
        out2 = (torch.tanh(x) * 2).sum()
    assert big.compressed == 0 and big.skipped.get("small", 0) >= 1
    (out + out2).backward()


def test_compressed_linear_factors_are_not_compressed_again() -> None:
    torch.manual_seed(5)
    base = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    wrapped = stac_r(base, ratio=4, seed=0)
    twin = copy.deepcopy(wrapped)
    x = _structured(256, 32, 4, seed=5)
    ref = _grads(twin, x)
    hooks = compress_saved(exact=True, min_bytes=0)
    got = _grads(wrapped, x, lambda: hooks)
    assert hooks.skipped.get("library", 0) >= 4  # weight, basis and factors of both layers
    assert hooks.compressed >= 1  # the GELU input
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)


@pytest.mark.parametrize("reentrant", [False, True])
def test_composes_with_checkpoint(reentrant: bool) -> None:
    torch.manual_seed(6)
    blocks = nn.ModuleList([_Block(), _Block()])

    def run(x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(blocks[0], x, use_reentrant=reentrant)
        return blocks[1](h).square().mean()  # type: ignore[no-any-return]

    x = torch.randn(2, 16, 32, requires_grad=True)
    loss = run(x)
    loss.backward()
    ref = [x.grad.clone()] + [p.grad.clone() for p in blocks.parameters()]  # type: ignore[union-attr]
    blocks.zero_grad(set_to_none=True)
    x.grad = None
    with compress_saved(exact=True, min_bytes=0) as hooks:
        loss = run(x)
        plain = hooks.compressed
        loss.backward()  # a reentrant checkpoint recomputes here, with grad enabled, inside the block
    got = [x.grad.clone()] + [p.grad.clone() for p in blocks.parameters()]  # type: ignore[union-attr]
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    # the checkpointed block saves nothing in forward: only block 1 (and the checkpoint output) is compressed
    solo = compress_saved(exact=True, min_bytes=0)
    with solo:
        blocks[1](torch.randn(2, 16, 32)).square().mean()
    assert plain <= solo.compressed + 1
    if reentrant:
        assert hooks.compressed > plain  # the recomputation saved (and compressed) block 0's tensors
    else:
        assert hooks.compressed == plain  # non-reentrant: the checkpoint's own hooks are innermost
    assert hooks.stored_bytes == 0


def test_one_compressor_tracks_sites_across_steps() -> None:
    torch.manual_seed(7)
    w = torch.randn(48, 48) / 7
    hooks = compress_saved(ratio=6, min_bytes=0)
    for step in range(3):
        x = _structured(256, 48, 5, seed=10 + step).requires_grad_(True)
        with hooks:
            out = torch.tanh(x @ w).square().sum()
        out.backward()
    assert len(hooks.codecs) == 2  # x (by matmul and tanh? no: x by mm) and tanh's output: same sites each step
    assert all(codec.step == 3 for codec in hooks.codecs.values())


def test_bad_arguments_and_misuse() -> None:
    with pytest.raises(ValueError, match="ratio"):
        compress_saved(ratio=1.0)
    with pytest.raises(TypeError, match="ratio"):
        compress_saved(ratio="8")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exact"):
        compress_saved(exact=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_bytes"):
        compress_saved(min_bytes=-1)
    with pytest.raises(TypeError, match="exclude"):
        compress_saved(exclude=3)  # type: ignore[arg-type]
    hooks = compress_saved()
    with hooks, pytest.raises(RuntimeError, match="already active"):
        hooks.__enter__()
    x = torch.randn(64, 64)
    x[3, 3] = float("nan")
    x.requires_grad_(True)
    with pytest.raises(ValueError, match="NaN"), compress_saved(ratio=4, min_bytes=0):
        torch.tanh(x * 1.0)
    gc.collect()


def test_refuses_under_torch_compile() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * x

    compiled = torch.compile(f, backend="aot_eager")
    x = torch.randn(64, 64, requires_grad=True)
    with pytest.raises(Exception, match="eager-only"), compress_saved(min_bytes=0):
        compiled(x)
    assert isinstance(compress_saved(), SavedCompressor)


def test_docstring_examples() -> None:
    import doctest

    from thrifty.compress import _hooks

    result = doctest.testmod(_hooks, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
