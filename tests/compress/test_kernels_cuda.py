"""STAC-R CUDA kernels against their CPU twins (skipped without a GPU; run by benches/gpu_check.sh).

compress must agree bit for bit (coefficients, indices, packed values, scales) given the same X·U; the
contraction and the dequantize-scatter to 1e-5 relative (the dense GEMMs run on different libraries).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from thrifty.compress import _kernels as K

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and K.backends()["cuda"]), reason="needs a GPU and thrifty._stac_cuda"
)


def _orthonormal(d: int, r: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, r, generator=g, dtype=torch.float64))
    return q.to(torch.float32).contiguous()


def _activations(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    rank = max(1, min(d, 8))
    x = torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g) + 0.3 * torch.randn(n, d, generator=g)
    x[:, :: max(1, d // 7)] *= 5.0
    return x


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a64, b64 = a.double().cpu(), b.double().cpu()
    return float((a64 - b64).norm() / b64.norm().clamp_min(1e-30))


CASES = [
    # n, d, r, block, k, bits, coef, stochastic, dtype
    (1000, 300, 7, 128, 9, 8, "fp32", False, torch.float32),
    (1000, 300, 7, 128, 9, 4, "bf16", True, torch.bfloat16),
    (777, 512, 33, 256, 17, 8, "int8", True, torch.float16),
    (513, 1024, 64, 64, 64, 4, "int8", False, torch.float32),
    (300, 96, 5, 1, 1, 8, "bf16", False, torch.float32),
    (4096, 1024, 128, 128, 6, 8, "bf16", True, torch.bfloat16),
]


@pytest.mark.parametrize(("n", "d", "r", "block", "k", "bits", "coef", "stochastic", "dtype"), CASES)
def test_cuda_compress_bitwise_equals_cpu(n, d, r, block, k, bits, coef, stochastic, dtype):
    x = _activations(n, d, seed=n + d).to(dtype)
    u = _orthonormal(d, r, seed=r)
    xu = torch.mm(x.float(), u)
    kw = {"coef": coef, "block": block, "k": k, "bits": bits, "stochastic": stochastic, "seed": 2**63 + 5}
    cpu = K.compress(x, u, xu=xu, **kw)
    gpu = K.compress(x.cuda(), u.cuda(), xu=xu.cuda(), **kw)
    for name in K.Packed._fields:
        a, b = getattr(cpu, name), getattr(gpu, name).cpu()
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert torch.equal(a.view(torch.uint8) if a.dtype == torch.bfloat16 else a, b.view(torch.uint8) if b.dtype == torch.bfloat16 else b), name


@pytest.mark.parametrize(
    ("n", "d", "m", "block", "k", "bits", "gdtype"),
    [
        (700, 300, 90, 128, 9, 8, torch.float32),  # few CTAs: row splits + workspace reduction
        (700, 300, 90, 128, 9, 4, torch.bfloat16),
        (256, 4096, 2048, 256, 8, 8, torch.float32),  # many CTAs: one split, written in place
    ],
)
def test_cuda_grad_weight_and_decompress_equal_cpu(n, d, m, block, k, bits, gdtype):
    x = _activations(n, d, seed=1)
    u = _orthonormal(d, 16, seed=2)
    p = K.compress(x, u, coef="int8", block=block, k=k, bits=bits)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(3)).to(gdtype)
    want = K.grad_weight(g, u, *p, d=d, block=block, bits=bits)
    pc = [t.cuda() for t in p]
    got = K.grad_weight(g.cuda(), u.cuda(), *pc, d=d, block=block, bits=bits)
    assert _rel(got, want) <= 1e-5
    again = K.grad_weight(g.cuda(), u.cuda(), *pc, d=d, block=block, bits=bits)
    assert torch.equal(got, again)  # deterministic
    xd = K.decompress(u, *p, d=d, block=block, bits=bits)
    xg = K.decompress(u.cuda(), *pc, d=d, block=block, bits=bits)
    assert _rel(xg, xd) <= 1e-5


def test_cuda_residual_alone_bitwise():
    """With u = I and no coefficient GEMM error (c = 0 rows), the residual scatter is identical on both."""
    n, d = 64, 256
    x = _activations(n, d, seed=4)
    u = torch.zeros(d, 1)
    p = K.compress(x, u, coef="fp32", block=128, k=20, bits=8)
    a = K.decompress(u, *p, d=d, block=128, bits=8)
    b = K.decompress(u.cuda(), *[t.cuda() for t in p], d=d, block=128, bits=8)
    assert torch.equal(a, b.cpu())


def test_cuda_refresh_and_streams():
    x = _activations(2000, 256, seed=5)
    u = _orthonormal(256, 16, seed=6)
    _, ec = K.refresh(x, u)
    qg, eg = K.refresh(x.cuda(), u.cuda())
    torch.testing.assert_close(qg.t() @ qg, torch.eye(16, device="cuda"), rtol=0, atol=1e-4)
    assert eg == pytest.approx(ec, rel=1e-4)
    s = torch.cuda.Stream()
    xg, ug = x.cuda(), u.cuda()
    xu = xg @ ug
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        p = K.compress(xg, ug, coef="bf16", block=128, k=8, bits=8, stochastic=True, seed=1, xu=xu)
    s.synchronize()
    q = K.compress(xg, ug, coef="bf16", block=128, k=8, bits=8, stochastic=True, seed=1, xu=xu)
    for a, b in zip(p, q):
        assert torch.equal(a, b)


def test_cuda_row_stride_input():
    wide = _activations(300, 200, seed=9)
    x = wide[:, 7:135]  # row stride 200
    u = _orthonormal(128, 6, seed=10)
    xu = x @ u
    cpu = K.compress(x, u, coef="int8", block=64, k=5, bits=4, xu=xu)
    gpu = K.compress(x.cuda(), u.cuda(), coef="int8", block=64, k=5, bits=4, xu=xu.cuda())
    for a, b in zip(cpu, gpu):
        assert torch.equal(a, b.cpu())


def test_cuda_opcheck_and_mixed_devices():
    x = _activations(40, 64, seed=7).cuda()
    u = _orthonormal(64, 4, seed=8).cuda()
    p = K.compress(x, u, coef="int8", block=32, k=4, bits=4)
    g = torch.randn(40, 9, device="cuda")
    torch.library.opcheck(torch.ops.thrifty.stac_compress.default, (x, u, None, "bf16", 32, 4, 8, True, 3))
    torch.library.opcheck(torch.ops.thrifty.stac_grad_weight.default, (g, u, *p, 64, 32, 4))
    torch.library.opcheck(torch.ops.thrifty.stac_decompress.default, (u, *p, 64, 32, 4))
    torch.library.opcheck(torch.ops.thrifty.stac_refresh.default, (x, u))
    with pytest.raises(ValueError, match="u"):
        K.compress(x, u.cpu(), k=2)
    with pytest.raises(ValueError, match="g"):
        K.grad_weight(g.cpu(), u, *p, d=64, block=32, bits=4)
