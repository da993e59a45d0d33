"""STAC-R kernels (thrifty.compress._kernels): the compiled CPU kernels against the NumPy reference.

Quantization and packing must match the reference bit for bit; the contraction and the dequantize-scatter to
1e-6 relative (Frobenius) against float64. Also: opcheck for every custom op, stochastic rounding
(reproducible, unbiased), the exactness switch, the subspace refresh and the error messages.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.compress import _kernels as K
from thrifty.compress import _reference as ref

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")

XDTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _orthonormal(d: int, r: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, r, generator=g, dtype=torch.float64))
    return q.to(torch.float32).contiguous()


def _activations(n: int, d: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Low-rank-plus-noise rows with a few heavy features (like a Linear's input)."""
    g = torch.Generator().manual_seed(seed)
    rank = max(1, min(d, 6))
    x = torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g)
    x = x + 0.3 * torch.randn(n, d, generator=g)
    x[:, :: max(1, d // 5)] *= 4.0
    return x.to(dtype)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _assert_packed_equal(got: K.Packed, want: tuple, coef: str) -> None:
    c, c_scale, vals, idx, scales = want
    if coef == "bf16":
        np.testing.assert_array_equal(_np(got.c.float()), c)
    else:
        np.testing.assert_array_equal(_np(got.c), c)
    np.testing.assert_array_equal(_np(got.c_scale), c_scale)
    np.testing.assert_array_equal(_np(got.idx), idx)
    np.testing.assert_array_equal(_np(got.vals), vals)
    np.testing.assert_array_equal(_np(got.scales), scales)


def _run_both(x, u, *, coef, block, k, bits, stochastic=False, seed=0):
    xu = torch.mm(x.float(), u)
    got = K.compress(x, u, coef=coef, block=block, k=k, bits=bits, stochastic=stochastic, seed=seed, xu=xu)
    want = ref.compress(
        _np(x.float()), _np(u), _np(xu), coef=coef, block=block, k=k, bits=bits, stochastic=stochastic, seed=seed
    )
    return got, want


# --------------------------------------------------------------------------------------------------------
# compress: bit for bit


@pytest.mark.parametrize("coef", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("stochastic", [False, True])
def test_compress_equals_reference(coef, bits, stochastic):
    x = _activations(53, 300, seed=1)
    u = _orthonormal(300, 7, seed=2)
    got, want = _run_both(x, u, coef=coef, block=128, k=9, bits=bits, stochastic=stochastic, seed=1234)
    _assert_packed_equal(got, want, coef)


@pytest.mark.parametrize("dtype", XDTYPES)
def test_compress_input_dtypes(dtype):
    x = _activations(40, 96, seed=3, dtype=dtype)
    u = _orthonormal(96, 5, seed=4)
    got, want = _run_both(x, u, coef="int8", block=32, k=5, bits=4)
    _assert_packed_equal(got, want, "int8")


def test_compress_ties_keep_lower_indices():
    g = torch.Generator().manual_seed(5)
    x = torch.randint(-2, 3, (30, 64), generator=g).float()
    u = torch.zeros(64, 1)
    u[0, 0] = 1.0
    got, want = _run_both(x, u, coef="fp32", block=16, k=5, bits=8)
    _assert_packed_equal(got, want, "fp32")
    # all-equal magnitudes: the first k columns of each block
    x = torch.ones(3, 32)
    got = K.compress(x, torch.zeros(32, 1), coef="fp32", block=16, k=4, bits=8)
    assert got.idx.tolist() == [[[0, 1, 2, 3], [0, 1, 2, 3]]] * 3


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 12),
    d=st.integers(1, 300),
    r=st.integers(1, 6),
    block=st.integers(1, 256),
    kfrac=st.floats(0, 1),
    bits=st.sampled_from([4, 8]),
    coef=st.sampled_from(["fp32", "bf16", "int8"]),
    stochastic=st.booleans(),
    seed=st.integers(0, 2**64 - 1),
)
def test_compress_property(n, d, r, block, kfrac, bits, coef, stochastic, seed):
    r = min(r, d)
    k = round(kfrac * block)
    x = _activations(n, d, seed=n + d)
    u = _orthonormal(d, r, seed=r)
    got, want = _run_both(x, u, coef=coef, block=block, k=k, bits=bits, stochastic=stochastic, seed=seed)
    _assert_packed_equal(got, want, coef)
    nb = -(-d // block)
    assert got.idx.shape == (n, nb, k)
    assert got.vals.shape == (n, nb, k if bits == 8 else (k + 1) // 2)
    # kept indices ascending and inside each block
    kk_last = min(k, d - (nb - 1) * block)
    idx = got.idx.long()
    if k > 1 and n > 0:
        full = idx[:, :-1] if nb > 1 else idx[:, :0]
        assert bool((full[..., 1:] > full[..., :-1]).all())
        last = idx[:, -1, :kk_last]
        assert bool((last[..., 1:] > last[..., :-1]).all())
        assert bool((last < d - (nb - 1) * block).all())


def test_compress_residual_is_topk_of_true_residual():
    """Independent of the reference: kept entries are the largest |x - deq(c) u^T| and dequantize within scale/2."""
    x = _activations(20, 64, seed=6)
    u = _orthonormal(64, 4, seed=7)
    p = K.compress(x, u, coef="fp32", block=64, k=6, bits=8)
    e = (x.double() - p.c.double() @ u.double().t()).numpy()
    for i in range(20):
        order = np.argsort(-np.abs(e[i]), kind="stable")[:6]
        assert sorted(order.tolist()) == p.idx[i, 0].tolist()
        deq = p.vals[i, 0].double().numpy() * float(p.scales[i, 0])
        assert np.all(np.abs(deq - e[i, p.idx[i, 0].numpy()]) <= float(p.scales[i, 0]) / 2 + 1e-6)


def test_compress_k0_and_row_stride_and_threads():
    wide = _activations(33, 80, seed=8)
    x = wide[:, 5:69]  # row stride 80
    u = _orthonormal(64, 3, seed=9)
    a = K.compress(x, u, coef="bf16", block=64, k=0, bits=8)
    assert a.vals.shape == (33, 1, 0) and a.idx.shape == (33, 1, 0) and a.scales.shape == (33, 0)
    assert a.c_scale.shape == (0,)
    torch.testing.assert_close(a.c.float(), (x @ u).bfloat16().float(), rtol=0, atol=0.02)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = K.compress(x, u, coef="int8", block=16, k=3, bits=4, stochastic=True, seed=3)
        torch.set_num_threads(2)
        two = K.compress(x.contiguous(), u, coef="int8", block=16, k=3, bits=4, stochastic=True, seed=3)
    finally:
        torch.set_num_threads(before)
    for f in K.Packed._fields:
        assert torch.equal(getattr(one, f), getattr(two, f)), f


def test_inputs_not_modified():
    x = _activations(10, 32, seed=10)
    u = _orthonormal(32, 4, seed=11)
    x0, u0 = x.clone(), u.clone()
    p = K.compress(x, u, coef="int8", block=16, k=4, bits=8)
    g = torch.randn(10, 5)
    g0 = g.clone()
    K.grad_weight(g, u, *p, d=32, block=16, bits=8)
    K.refresh(x, u)
    assert torch.equal(x, x0) and torch.equal(u, u0) and torch.equal(g, g0)


# --------------------------------------------------------------------------------------------------------
# stochastic rounding


def test_stochastic_rounding_reproducible_and_seeded():
    x = _activations(16, 128, seed=12)
    u = _orthonormal(128, 4, seed=13)
    kw = {"coef": "bf16", "block": 64, "k": 64, "bits": 4, "stochastic": True}
    a = K.compress(x, u, seed=7, **kw)
    b = K.compress(x, u, seed=7, **kw)
    c = K.compress(x, u, seed=8, **kw)
    assert torch.equal(a.vals, b.vals)
    assert not torch.equal(a.vals, c.vals)
    assert torch.equal(a.idx, c.idx) and torch.equal(a.scales, c.scales)


@pytest.mark.parametrize("stochastic", [True, False])
def test_stochastic_rounding_unbiased(stochastic):
    """Mean rounding error over 200 seeds as z-scores against the exact variance, two-sided at alpha=1e-3.

    u = e_1, so E = x with column 0 cleared; k = block keeps every entry and the grid position y = E/scale of
    each entry is fixed across seeds. Checked overall and separately for fractional parts below and above
    1/2 (round-to-nearest is biased in opposite directions there). Deterministic rounding is the power
    check: it must fail the same test.
    """
    g = torch.Generator().manual_seed(14)
    x = torch.randn(8, 64, generator=g)
    u = torch.zeros(64, 1)
    u[0, 0] = 1.0
    e = _np(x).copy()
    e[:, 0] = 0
    total = None
    scales = None
    for seed in range(200):
        p = K.compress(x, u, coef="fp32", block=64, k=64, bits=4, stochastic=stochastic, seed=seed)
        q = ref.unpack_vals(_np(p.vals), 64, 4)[:, 0, :].astype(np.float64)
        total = q if total is None else total + q
        scales = _np(p.scales)[:, 0]
    y = (e / scales[:, None]).astype(np.float32).astype(np.float64)
    keep = np.abs(y) < 6.99  # the clamp at +-7 only touches the block maximum (on the grid)
    frac = y - np.floor(y)
    var = frac * (1 - frac)  # variance of one stochastic rounding, in grid units
    err = total / 200 - y  # mean error per entry
    for sel in (keep, keep & (frac < 0.5), keep & (frac > 0.5)):
        z = err[sel].sum() / np.sqrt(var[sel].sum() / 200)
        if stochastic:
            assert abs(z) < 3.29, z
        else:
            assert abs(z) > 3.29 or sel is keep, z


# --------------------------------------------------------------------------------------------------------
# contraction and scatter


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("coef", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("gdtype", [torch.float32, torch.bfloat16])
def test_grad_weight_equals_reference(coef, bits, gdtype):
    n, d, m = 70, 200, 45
    x = _activations(n, d, seed=15)
    u = _orthonormal(d, 6, seed=16)
    p = K.compress(x, u, coef=coef, block=64, k=11, bits=bits)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(17)).to(gdtype)
    got = K.grad_weight(g, u, *p, d=d, block=64, bits=bits)
    assert got.dtype == torch.float32 and got.shape == (m, d)
    cdeq = ref.coef_dequant(_np(p.c.float()), _np(p.c_scale), coef)
    want = ref.grad_weight(_np(g.float()), _np(u), cdeq, _np(p.vals), _np(p.idx), _np(p.scales), d=d, block=64, bits=bits)
    assert _rel(_np(got), want) <= 1e-6


@pytest.mark.parametrize("bits", [8, 4])
def test_decompress_equals_reference(bits):
    n, d = 37, 150
    x = _activations(n, d, seed=18)
    u = _orthonormal(d, 5, seed=19)
    p = K.compress(x, u, coef="int8", block=100, k=13, bits=bits)
    got = K.decompress(u, *p, d=d, block=100, bits=bits)
    cdeq = ref.coef_dequant(_np(p.c), _np(p.c_scale), "int8")
    want = ref.decompress(_np(u), cdeq, _np(p.vals), _np(p.idx), _np(p.scales), d=d, block=100, bits=bits)
    assert _rel(_np(got), want) <= 1e-6
    # keeping the whole residual reconstructs x to the quantization step
    full = K.compress(x, u, coef="fp32", block=50, k=50, bits=8)
    xhat = K.decompress(u, *full, d=d, block=50, bits=8)
    step = full.scales.repeat_interleave(50, dim=1)[:, :d]
    assert bool(((xhat - x).abs() <= step / 2 + 1e-5).all())


def test_exactness_switch():
    """u = I, fp32 coefficients, no residual: the gradient is Gᵀ X (to 1e-5) and X̂ = X exactly."""
    n, d, m = 64, 48, 24
    x = _activations(n, d, seed=20)
    eye = torch.eye(d)
    p = K.compress(x, eye, coef="fp32", block=48, k=0, bits=8)
    g = torch.randn(n, m, generator=torch.Generator().manual_seed(21))
    torch.testing.assert_close(K.grad_weight(g, eye, *p, d=d, block=48, bits=8), g.t() @ x, rtol=1e-5, atol=1e-5)
    assert torch.equal(K.decompress(eye, *p, d=d, block=48, bits=8), x)


# --------------------------------------------------------------------------------------------------------
# refresh


def test_refresh_orthonormal_energy_and_convergence():
    g = torch.Generator().manual_seed(22)
    x = torch.randn(300, 4, generator=g) @ torch.randn(4, 40, generator=g)  # rank 4
    u = _orthonormal(40, 4, seed=23)
    energies = []
    for _ in range(4):
        u, e = K.refresh(x, u)
        energies.append(e)
    torch.testing.assert_close(u.t() @ u, torch.eye(4), rtol=0, atol=1e-5)
    assert energies[-1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= e <= 1.0 + 1e-6 for e in energies)
    res = K.refresh(x, u, return_projection=True)
    torch.testing.assert_close(res.xu, x @ res.u, rtol=1e-5, atol=1e-4)
    direct = float((x @ res.u).square().sum() / x.square().sum())
    assert res.energy == pytest.approx(direct, rel=1e-5)


def test_refresh_zero_and_rank_deficient_batches():
    u = _orthonormal(16, 3, seed=24)
    q, e = K.refresh(torch.zeros(10, 16), u)
    assert e == 1.0
    torch.testing.assert_close(q.t() @ q, torch.eye(3), rtol=0, atol=1e-5)
    x = torch.zeros(10, 16)
    x[:, 0] = 1.0  # rank 1 < r
    q, e = K.refresh(x, u)
    torch.testing.assert_close(q.t() @ q, torch.eye(3), rtol=0, atol=1e-5)
    assert e == pytest.approx(1.0, abs=1e-5)


# --------------------------------------------------------------------------------------------------------
# custom ops


def _factor_args():
    x = _activations(12, 40, seed=25)
    u = _orthonormal(40, 3, seed=26)
    p = K.compress(x, u, coef="int8", block=16, k=3, bits=4)
    return x, u, p


@pytest.mark.parametrize("xu_given", [False, True])
def test_opcheck_compress(xu_given):
    x, u, _ = _factor_args()
    xu = (x @ u) if xu_given else None
    torch.library.opcheck(torch.ops.thrifty.stac_compress.default, (x, u, xu, "bf16", 16, 3, 8, True, 5))


def test_opcheck_grad_weight_decompress_refresh():
    x, u, p = _factor_args()
    g = torch.randn(12, 7)
    torch.library.opcheck(torch.ops.thrifty.stac_grad_weight.default, (g, u, *p, 40, 16, 4))
    torch.library.opcheck(torch.ops.thrifty.stac_decompress.default, (u, *p, 40, 16, 4))
    torch.library.opcheck(torch.ops.thrifty.stac_refresh.default, (x, u))


def test_ops_trace_under_torch_compile():
    x, u, _ = _factor_args()

    def f(x, u):
        p = K.compress(x, u, coef="bf16", block=16, k=3, bits=8)
        return K.decompress(u, *p, d=40, block=16, bits=8)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, u), f(x, u), rtol=0, atol=0)


# --------------------------------------------------------------------------------------------------------
# backends and bad input


def test_backends_report():
    b = K.backends()
    assert b["cpu"] is True and b["cpu_simd"] in ("avx2", "generic")
    assert isinstance(b["cuda_built"], bool) and isinstance(b["cuda_available"], bool)
    assert b["cuda"] == (b["cuda_built"] and b["cuda_available"] and "_stac_cuda" not in b["errors"])
    if b["cuda_built"]:
        assert "90" in b["cuda_architectures"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "word"),
    [
        ({"block": 0}, ValueError, "block"),
        ({"block": 257}, ValueError, "block"),
        ({"k": 17}, ValueError, "k"),
        ({"k": -1}, ValueError, "k"),
        ({"bits": 5}, ValueError, "bits"),
        ({"coef": "fp8"}, ValueError, "coef"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"block": 16.0}, TypeError, "block"),
    ],
)
def test_compress_bad_parameters(kwargs, exc, word):
    x, u, _ = _factor_args()
    args = {"coef": "bf16", "block": 16, "k": 3, "bits": 8} | kwargs
    with pytest.raises(exc, match=word):
        K.compress(x, u, **args)


def test_compress_bad_tensors():
    x, u, _ = _factor_args()
    with pytest.raises(TypeError, match="x"):
        K.compress(x.to(torch.int32), u, k=1)
    with pytest.raises(TypeError, match="x"):
        K.compress(x.numpy(), u, k=1)
    with pytest.raises(TypeError, match="u"):
        K.compress(x, u.double(), k=1)
    with pytest.raises(ValueError, match="u"):
        K.compress(x, u[:-1], k=1)
    with pytest.raises(ValueError, match="x"):
        K.compress(x[0], u, k=1)
    with pytest.raises(ValueError, match="xu"):
        K.compress(x, u, k=1, xu=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="u"):
        K.compress(x, u.to("meta"), k=1)
    bad = x.clone()
    bad[3, 4] = float("nan")
    with pytest.raises(ValueError, match="x"):
        K.compress(bad, u, k=2)
    bad[3, 4] = float("inf")
    with pytest.raises(ValueError, match="x"):
        K.compress(bad, u, coef="int8", k=0)
    # a finite precomputed X·U does not hide a NaN in x: the residual check catches it
    bad[3, 4] = float("nan")
    with pytest.raises(ValueError, match="x"):
        K.compress(bad, u, k=2, xu=x @ u)


def test_factor_functions_bad_input():
    x, u, p = _factor_args()
    g = torch.randn(12, 7)
    with pytest.raises(ValueError, match="g"):
        K.grad_weight(g[:5], u, *p, d=40, block=16, bits=4)
    with pytest.raises(TypeError, match="g"):
        K.grad_weight(g.long(), u, *p, d=40, block=16, bits=4)
    with pytest.raises(TypeError, match="vals"):
        K.grad_weight(g, u, *p, d=40, block=16, bits=8)  # 4-bit storage read as 8-bit
    with pytest.raises(ValueError, match="idx"):
        K.decompress(u, *p, d=40, block=8, bits=4)
    with pytest.raises(ValueError, match="u"):
        K.decompress(u, *p, d=41, block=16, bits=4)
    with pytest.raises(ValueError, match="scales"):
        K.decompress(u, p.c, p.c_scale, p.vals, p.idx, p.scales[:, :1], d=40, block=16, bits=4)
    with pytest.raises(ValueError, match="c_scale"):
        K.decompress(u, p.c, p.c_scale[:3], p.vals, p.idx, p.scales, d=40, block=16, bits=4)
    with pytest.raises(ValueError, match="u"):
        K.refresh(x, torch.zeros(40, 41))
    nan = x.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="x"):
        K.refresh(nan, u)


@pytest.mark.parametrize("amp", [torch.bfloat16, torch.float16])
def test_ops_under_autocast_match_fp32(amp):
    """Custom-op bodies run with autocast active: the GEMMs inside must stay float32 (raw pointers are
    read as float32), so results under autocast equal those outside it."""
    x = _activations(64, 64, seed=27)
    u = _orthonormal(64, 8, seed=28)
    g = torch.randn(64, 5, generator=torch.Generator().manual_seed(29))
    want = K.compress(x, u, coef="int8", block=64, k=2, bits=8)
    want_g = K.grad_weight(g, u, *want, d=64, block=64, bits=8)
    want_x = K.decompress(u, *want, d=64, block=64, bits=8)
    want_u, want_e = K.refresh(x, u)
    with torch.autocast("cpu", dtype=amp):
        got = K.compress(x, u, coef="int8", block=64, k=2, bits=8)
        got_g = K.grad_weight(g, u, *got, d=64, block=64, bits=8)
        got_x = K.decompress(u, *got, d=64, block=64, bits=8)
        got_u, got_e = K.refresh(x, u)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert got_g.dtype == torch.float32 and torch.equal(got_g, want_g)
    assert got_x.dtype == torch.float32 and torch.equal(got_x, want_x)
    assert got_u.dtype == torch.float32 and torch.equal(got_u, want_u) and got_e == want_e
