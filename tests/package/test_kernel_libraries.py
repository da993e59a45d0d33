"""The compiled STAC-R kernel libraries (issue 19 points 1-2, issue 18 point 6): a C ABI loaded with ctypes, the
CPU kernels dispatched at run time between a baseline and an AVX2 build that agree bit for bit, C-side argument
errors as ValueErrors naming the argument, and the fallback warning pointing at the caller without telling an
installed user to run a repository script."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
from thrifty.compress import _kernels as K  # noqa: E402
from thrifty.compress import _native  # noqa: E402

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="the CPU kernels are not built")
HAVE_AVX2 = os.path.isfile(_native.library_path("thrifty_stac_cpu_avx2")) and _native.load_cpu().simd == "avx2"


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(70, 5, generator=g) @ torch.randn(5, 200, generator=g) + 0.2 * torch.randn(70, 200, generator=g)
    x[:, 7] *= 9.0
    u = torch.linalg.qr(torch.randn(200, 6, generator=g)).Q.contiguous()
    return x, u, torch.randn(70, 33, generator=g)


def _run_all(x: torch.Tensor, u: torch.Tensor, grad: torch.Tensor, coef: str, k: int, bits: int, stochastic: bool):
    p = K.compress(x, u, coef=coef, block=64, k=k, bits=bits, stochastic=stochastic, seed=99)
    return (*p, K.grad_weight(grad, u, *p, d=200, block=64, bits=bits), K.decompress(u, *p, d=200, block=64, bits=bits))


@pytest.mark.skipif(not HAVE_AVX2, reason="needs the AVX2 build and an AVX2 CPU")
@pytest.mark.parametrize(("coef", "k", "bits", "stochastic"), [("int8", 5, 8, False), ("bf16", 9, 4, True), ("fp32", 0, 8, False)])
def test_baseline_and_avx2_builds_agree_bit_for_bit(coef: str, k: int, bits: int, stochastic: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    x, u, grad = _inputs(k + bits)
    fast = _run_all(x, u, grad, coef, k, bits, stochastic)
    monkeypatch.setitem(K._modules, "_stac_cpu", _native.Library("thrifty_stac_cpu"))
    assert K.backends()["cpu_simd"] == "generic"
    base = _run_all(x, u, grad, coef, k, bits, stochastic)
    for a, b in zip(fast, base):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_forcing_the_baseline_and_bad_settings() -> None:
    code = "from thrifty.compress import _native; print(_native.load_cpu().simd)"
    env = dict(os.environ, THRIFTY_CPU_KERNELS="generic")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    assert out.strip() == "generic"
    env["THRIFTY_CPU_KERNELS"] = "sse9"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "THRIFTY_CPU_KERNELS: must be 'auto', 'generic' or 'avx2'" in bad.stderr


def test_c_side_errors_are_value_errors_naming_the_argument() -> None:
    lib = K._cpu()
    with pytest.raises(ValueError, match=r"^block: must be in \[1, 256\]$"):
        lib.residual_grad_workspace(4, 16, 0, 1, 3)
    with pytest.raises(ValueError, match=r"^m: must be >= 0$"):
        lib.residual_grad_workspace(4, 16, 8, 1, -1)
    assert lib.residual_grad_workspace(4, 16, 8, 1, 3) == 0
    with pytest.raises(ValueError, match=r"^bits: must be 4 or 8$"):  # a raw call: no pointers are touched
        lib.residual_scatter(0, 0, 0, 4, 16, 8, 1, 5, 0, 16, where=_native.Exec(1, 0, None))


def test_missing_library_is_an_os_error_naming_the_file() -> None:
    with pytest.raises(OSError, match=r"libthrifty_stac_nothing\.so not found"):
        _native.Library("thrifty_stac_nothing")


def test_fallback_warning_points_at_the_caller_and_fits_an_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> object:
        raise RuntimeError("thrifty's CPU kernels (_stac_cpu) are not available: test; " + _native.rebuild_hint() + ".")

    monkeypatch.setattr(_native, "source_tree", lambda: False)
    monkeypatch.setattr(K, "_cpu", missing)
    monkeypatch.setattr(K, "_warned_fallback", False)
    x, u, _ = _inputs(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        K.compress(x, u, coef="int8", block=64, k=2, bits=8)  # the user's line
    (w,) = [c for c in caught if issubclass(c.category, RuntimeWarning)]
    assert w.filename == __file__, w.filename
    assert "NumPy reference" in str(w.message) and "reinstall" in str(w.message)
    assert "scripts/" not in str(w.message)


def test_rebuild_hint_in_a_source_tree_names_setup() -> None:
    assert _native.source_tree()  # the suite runs from the checkout
    assert "scripts/setup.sh" in _native.rebuild_hint()
