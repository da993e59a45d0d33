"""The CPU fallback: without ``thrifty._stac_cpu`` (a wheel from ``pip install .`` builds no cpp/), the kernels
run the NumPy reference of the same contract - bit for bit on compress, to rounding error on the contractions -
say so once with a RuntimeWarning, and ``backends()`` reports it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from thrifty.compress import _kernels as K


def _missing() -> object:
    raise RuntimeError("thrifty._stac_cpu is not available: test")


@pytest.fixture
def no_cpu_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(K, "_cpu", _missing)
    monkeypatch.setattr(K, "_warned_fallback", False)


def _inputs(n: int, d: int, r: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g) @ torch.randn(6, d, generator=g) + 0.3 * torch.randn(n, d, generator=g)
    x[:, 3] *= 8.0  # an outlier feature for the residual to catch
    u = torch.linalg.qr(torch.randn(d, r, generator=g)).Q.contiguous()
    grad = torch.randn(n, 5, generator=g)
    return x, u, grad


@pytest.mark.parametrize(
    ("coef", "k", "bits", "stochastic"),
    [("int8", 3, 8, False), ("bf16", 5, 4, True), ("fp32", 0, 8, False), ("int8", 16, 4, False)],
)
def test_fallback_equals_the_compiled_kernels(
    coef: str, k: int, bits: int, stochastic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, u, grad = _inputs(37, 40, 4, seed=k + bits)
    kw = {"coef": coef, "block": 16, "k": k, "bits": bits, "stochastic": stochastic, "seed": 12345}
    want = K.compress(x, u, **kw)
    want_gw = K.grad_weight(grad, u, *want, d=40, block=16, bits=bits)
    want_x = K.decompress(u, *want, d=40, block=16, bits=bits)
    monkeypatch.setattr(K, "_cpu", _missing)
    monkeypatch.setattr(K, "_warned_fallback", False)
    with pytest.warns(RuntimeWarning, match="NumPy reference"):
        got = K.compress(x, u, **kw)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)  # bit for bit
    # float32 sums in another order (a dense GEMM against the segmented scatter): relative to the norm
    gw = K.grad_weight(grad, u, *got, d=40, block=16, bits=bits)
    assert float((gw - want_gw).norm() / want_gw.norm()) <= 1e-6
    torch.testing.assert_close(K.decompress(u, *got, d=40, block=16, bits=bits), want_x, rtol=0, atol=0)
    assert K.backends()["cpu_fallback"] == "numpy-reference" and K.backends()["cpu"] is False


def test_fallback_rejects_non_finite_input(no_cpu_kernels: None) -> None:
    x, u, _ = _inputs(8, 16, 2, seed=1)
    x[2, 5] = float("nan")
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="x: contains NaN"):
        K.compress(x, u, coef="int8", block=16, k=2, bits=8)


def test_backends_reports_no_fallback_when_built() -> None:
    b = K.backends()
    assert b["cpu"] is True and b["cpu_fallback"] == ""
