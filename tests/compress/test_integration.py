"""thrifty.compress inside real training machinery: exactness on a transformer block, opcheck of
thrifty::stac_linear, autocast (bf16), torch.compile through the custom op, torch.utils.checkpoint, and
DistributedDataParallel (gloo, two processes on this machine)."""

from __future__ import annotations

import copy
import math
import os
import socket
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F
from torch import nn

from thrifty.compress import CompressedLinear, compression_report, stac_r
from thrifty.compress import _kernels as K
from thrifty.compress._linear import stac_linear

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")

D, HEADS, T, B = 64, 4, 16, 4


class Block(nn.Module):
    """A pre-LayerNorm transformer block: causal self-attention (qkv, proj) and a GELU MLP (fc1, fc2)."""

    def __init__(self, d: int = D, heads: int = HEADS) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Tiny(nn.Module):
    def __init__(self, n_blocks: int = 2) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(n_blocks)])
        self.head = nn.Linear(D, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def _tiny(seed: int = 0, n_blocks: int = 2) -> Tiny:
    torch.manual_seed(seed)
    return Tiny(n_blocks)


def _batch(seed: int, b: int = B) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, T, 6, generator=g) @ torch.randn(6, D, generator=g) + 0.3 * torch.randn(b, T, D, generator=g)
    return x, torch.randn(b, T, 8, generator=g)


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(model(x), y)


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


# ---------------------------------------------------------------------------------------------------------
# acceptance 1: exactness


def test_exact_switch_reproduces_transformer_block_gradients() -> None:
    torch.manual_seed(0)
    plain = Block()
    wrapped = stac_r(plain, exact=True)
    assert sum(isinstance(m, CompressedLinear) for m in wrapped.modules()) == 4
    x, _ = _batch(1)
    x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    g = torch.randn(B, T, D, generator=torch.Generator().manual_seed(2))
    (plain(x1) * g).sum().backward()
    (wrapped(x2) * g).sum().backward()
    ref, got = _grads(plain), _grads(wrapped)
    assert ref.keys() == got.keys()
    worst = max(float((got[n] - ref[n]).abs().max()) for n in ref)
    worst = max(worst, float((x1.grad - x2.grad).abs().max()))
    print(f"exact=True transformer block: max |grad difference| = {worst:.2e}")
    assert worst <= 1e-5


# ---------------------------------------------------------------------------------------------------------
# opcheck


def _orthonormal(d: int, r: int) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(d, r, generator=torch.Generator().manual_seed(5))).Q.contiguous()


@pytest.mark.parametrize(
    ("coef", "k", "bits", "bias", "dtype"),
    [
        ("fp32", 0, 8, True, torch.float32),
        ("bf16", 3, 8, True, torch.float32),
        ("int8", 5, 4, False, torch.float32),
        ("bf16", 2, 8, True, torch.bfloat16),
    ],
)
def test_opcheck_stac_linear(coef: str, k: int, bits: int, bias: bool, dtype: torch.dtype) -> None:
    n, d, m = 24, 40, 12
    x = torch.randn(n, d, dtype=dtype, requires_grad=True)
    w = torch.randn(m, d, dtype=dtype, requires_grad=True)
    b = torch.randn(m, dtype=dtype, requires_grad=True) if bias else None
    u = _orthonormal(d, 6)
    torch.library.opcheck(stac_linear, (x, w, b, u, None, coef, 16, k, bits, False, 3))
    xu = (x.detach().float() @ u).contiguous()
    torch.library.opcheck(stac_linear, (x, w, b, u, xu, coef, 16, k, bits, True, 3))


# ---------------------------------------------------------------------------------------------------------
# autocast


def test_autocast_bf16_exact_matches_plain_autocast() -> None:
    plain = _tiny(1, 1)
    wrapped = stac_r(plain, exact=True)
    x, y = _batch(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_p, out_w = plain(x), wrapped(x)
        assert out_w.dtype == torch.bfloat16 and out_p.dtype == torch.bfloat16
        torch.testing.assert_close(out_w, out_p, rtol=0, atol=0)
        F.mse_loss(out_p.float(), y).backward()
        F.mse_loss(out_w.float(), y).backward()
    ref, got = _grads(plain), _grads(wrapped)
    for name in ref:
        assert got[name].dtype == torch.float32  # the master weights stay fp32
        assert _cos(got[name], ref[name]) > 0.9999, name
        torch.testing.assert_close(got[name], ref[name], rtol=2e-2, atol=2e-3)


def test_autocast_bf16_compressed_trains() -> None:
    plain = _tiny(2, 1)
    wrapped = stac_r(plain, ratio=4)
    x, y = _batch(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        F.mse_loss(plain(x).float(), y).backward()
        F.mse_loss(wrapped(x).float(), y).backward()
    ref, got = _grads(plain), _grads(wrapped)
    assert all(torch.isfinite(g).all() for g in got.values())
    cosines = [_cos(got[n], ref[n]) for n in ref if n.endswith("weight") and ref[n].dim() == 2]
    assert min(cosines) > 0.9
    report = compression_report(wrapped)
    assert all(row.dense_bytes == B * T * row.in_features * 2 for row in report)  # bf16 activations


# ---------------------------------------------------------------------------------------------------------
# torch.compile


@pytest.mark.parametrize(("exact", "stochastic"), [(True, False), (False, False), (False, True)])
def test_torch_compile_through_the_custom_op(exact: bool, stochastic: bool) -> None:
    torch._dynamo.reset()
    extra: dict[str, object] = {"residual_density": 1 / 16, "stochastic": True} if stochastic else {}
    base = stac_r(_tiny(3, 1), exact=exact, ratio=4, **extra)  # type: ignore[arg-type]
    eager, compiled_model = base, copy.deepcopy(base)
    compiled = torch.compile(compiled_model, backend="aot_eager")
    for step in range(2):
        x, y = _batch(10 + step)
        _loss(eager, x, y).backward()
        _loss(compiled, x, y).backward()
    ref, got = _grads(eager), _grads(compiled_model)
    assert ref.keys() == got.keys()
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-5, atol=1e-6)
    layer = compiled_model.blocks[0].fc1
    assert isinstance(layer, CompressedLinear) and layer.state.step == 2
    for ours, theirs in zip(compression_report(compiled_model), compression_report(eager)):
        assert ours.stored_bytes == theirs.stored_bytes > 0
        assert ours.eps == pytest.approx(theirs.eps, rel=1e-4, abs=1e-7)


def test_torch_compile_inductor_small() -> None:
    """Inductor generates C++ for the surrounding ops; the custom op stays an opaque call."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = stac_r(nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)), exact=True)
    ref = copy.deepcopy(model)
    compiled = torch.compile(model)
    x = torch.randn(20, 32)
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# checkpoint


class Checkpointed(nn.Module):
    def __init__(self, inner: Tiny) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for block in self.inner.blocks:
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False)
        return self.inner.head(h)


@pytest.mark.parametrize(("exact", "stochastic"), [(True, False), (False, False), (False, True)])
def test_checkpoint_non_reentrant(exact: bool, stochastic: bool) -> None:
    plain = _tiny(4)
    extra: dict[str, object] = {"residual_density": 1 / 16, "stochastic": True} if stochastic else {}
    wrapped = stac_r(plain, exact=exact, ratio=4, **extra)  # type: ignore[arg-type]
    twin = copy.deepcopy(wrapped)
    ckpt = Checkpointed(twin)
    for step in range(2):
        x, y = _batch(20 + step)
        _loss(wrapped, x, y).backward()
        _loss(ckpt, x, y).backward()
    ref, got = _grads(wrapped), _grads(twin)
    for name in ref:  # the recomputed forward reuses the basis and rounding key: identical gradients
        torch.testing.assert_close(got[name], ref[name], rtol=1e-6, atol=1e-7)
    layer = twin.blocks[0].qkv
    assert isinstance(layer, CompressedLinear)
    assert layer.state.step == 2 and layer.codec.step == 2  # the recomputation counted no step
    for ours, theirs in zip(compression_report(twin), compression_report(wrapped)):
        assert ours.eps == theirs.eps and ours.stored_bytes == theirs.stored_bytes  # monitor not rerun
    if exact:
        for _ in range(2):
            plain.zero_grad()
        x, y = _batch(30)
        twin.zero_grad()
        _loss(plain, x, y).backward()
        _loss(ckpt, x, y).backward()
        for name, g in _grads(plain).items():
            assert float((g - dict(twin.named_parameters())[name].grad).abs().max()) <= 1e-5


# ---------------------------------------------------------------------------------------------------------
# DistributedDataParallel (gloo)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import datetime

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        for exact in (True, False):
            model = DDP(stac_r(_tiny(7, 1), exact=exact, ratio=4))
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            shard = slice(2 * rank, 2 * rank + 2)
            x, y = _batch(40, b=2 * world)
            _loss(model, x[shard], y[shard]).backward()
            grads = _grads(model.module)
            opt.step()
            opt.zero_grad()
            x2, y2 = _batch(41, b=2 * world)
            _loss(model, x2[shard], y2[shard]).backward()
            opt.step()
            params = {n: p.detach().clone() for n, p in model.module.named_parameters()}
            torch.save({"grads": grads, "params": params}, os.path.join(out_dir, f"{exact}-rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_ddp_gloo_two_processes(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    world, timeout = 2, 240.0
    ctx = mp.start_processes(
        _ddp_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail(f"DDP workers did not finish within {timeout:.0f} s")
    exact = [torch.load(tmp_path / f"True-rank{r}.pt") for r in range(world)]
    compressed = [torch.load(tmp_path / f"False-rank{r}.pt") for r in range(world)]
    # reference: one process, the whole batch (DDP averages the two shards' gradients = the full-batch mean)
    ref_model = _tiny(7, 1)
    x, y = _batch(40, b=4)
    _loss(ref_model, x, y).backward()
    ref = _grads(ref_model)
    for res in exact:
        for name, g in ref.items():
            assert float((res["grads"][name] - g).abs().max()) <= 1e-5, name
    for runs in (exact, compressed):  # every rank keeps the same weights
        for name, p in runs[0]["params"].items():
            torch.testing.assert_close(p, runs[1]["params"][name], rtol=0, atol=0)
            assert torch.isfinite(p).all()
    cosines = [_cos(compressed[0]["grads"][n], ref[n]) for n in ref if ref[n].dim() == 2]
    assert min(cosines) > 0.9 and not math.isnan(sum(cosines))
