"""The compiled STAC-R kernel libraries, loaded with ctypes over their C ABI (``cpp/include/thrifty/stac_capi.h``).

Three shared libraries sit next to the package (``thrifty/``), built by CMake (``CMakeLists.txt``) into every
wheel: ``libthrifty_stac_cpu`` (baseline instruction set), ``libthrifty_stac_cpu_avx2`` (x86-64-v3, chosen at
run time when the CPU has AVX2/FMA/BMI2; ``THRIFTY_CPU_KERNELS=generic`` forces the baseline) and
``libthrifty_stac_cuda`` (static CUDA runtime). Nothing here imports torch; :mod:`thrifty.compress._kernels`
loads a library on first use (the CUDA one only when a CUDA tensor arrives) and registers the torch ops.

A C ABI rather than a Python extension: one build serves every Python version (the wheel stays ``abi3``) and
every torch version. ctypes releases the GIL around each call.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_uint64, c_void_p

ABI_VERSION = 1  # THRIFTY_STAC_ABI_VERSION of stac_capi.h
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OK, _INVALID = 0, 1


class Exec(ctypes.Structure):
    """``thrifty_stac_exec``: where a kernel runs (CPU threads, or CUDA device and stream)."""

    _fields_ = [("nthreads", c_int32), ("device", c_int32), ("stream", c_void_p)]


_P = c_void_p
_I32, _I64 = c_int32, c_int64
_EXEC = POINTER(Exec)
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "thrifty_stac_abi_version": (c_int, []),
    "thrifty_stac_last_error": (c_char_p, []),
    "thrifty_stac_simd": (c_char_p, []),
    "thrifty_stac_cpu_supports_avx2": (c_int, []),
    "thrifty_stac_device_count": (c_int, []),
    "thrifty_stac_compress": (
        c_int,
        [_P, _I32, _I64, _I64, _I64, _P, _P, _I64, _I32, _P, _P, _I32, _I32, _I32, _I32, c_uint64, _P, _P, _P,
         _EXEC, POINTER(c_int64)],
    ),  # fmt: skip
    "thrifty_stac_residual_grad_workspace": (c_int, [_I64, _I64, _I32, _I32, _I64, POINTER(c_int64)]),
    "thrifty_stac_residual_grad": (
        c_int, [_P, _P, _P, _I64, _I64, _I32, _I32, _I32, _P, _I32, _I64, _I64, _P, _I64, _P, _EXEC]
    ),
    "thrifty_stac_residual_scatter": (c_int, [_P, _P, _P, _I64, _I64, _I32, _I32, _I32, _P, _I64, _EXEC]),
}


def package_dir() -> str:
    """The installed ``thrifty/`` folder (where the libraries and ``_stac_build.json`` are)."""
    return _PACKAGE_DIR


def library_path(stem: str) -> str:
    """Path of ``lib<stem>`` (platform suffix) inside the installed package."""
    if sys.platform == "win32":
        return os.path.join(_PACKAGE_DIR, f"{stem}.dll")
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    return os.path.join(_PACKAGE_DIR, f"lib{stem}{suffix}")


def source_tree() -> bool:
    """Whether the package runs from a source checkout (``python/thrifty`` next to ``CMakeLists.txt``)."""
    return os.path.isfile(os.path.join(_PACKAGE_DIR, os.pardir, os.pardir, "CMakeLists.txt"))


def rebuild_hint() -> str:
    """What to do when a kernel library is missing: a source tree builds it, an install reinstalls."""
    if source_tree():
        return "build the kernels in this source tree with `bash scripts/setup.sh`"
    return "this thrifty install lacks its compiled kernels; reinstall it (pip install --force-reinstall thrifty)"


class Library:
    """One kernel library: the C ABI entry points with their argument types, errors raised as exceptions.

    Raises OSError when the file is missing or cannot be loaded, RuntimeError on an ABI version mismatch.
    """

    def __init__(self, stem: str) -> None:
        self.path = library_path(stem)
        if not os.path.isfile(self.path):
            raise OSError(f"{os.path.basename(self.path)} not found in {_PACKAGE_DIR}")
        lib = ctypes.CDLL(self.path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        self._lib = lib
        version = int(lib.thrifty_stac_abi_version())
        if version != ABI_VERSION:
            raise RuntimeError(f"{self.path}: C ABI version {version}, this thrifty expects {ABI_VERSION}")
        self.simd = (lib.thrifty_stac_simd() or b"").decode()

    def _check(self, rc: int) -> None:
        if rc == _OK:
            return
        msg = (self._lib.thrifty_stac_last_error() or b"unknown error").decode()
        raise (ValueError if rc == _INVALID else RuntimeError)(msg)

    def supports_avx2(self) -> bool:
        return bool(self._lib.thrifty_stac_cpu_supports_avx2())

    def device_count(self) -> int:
        return int(self._lib.thrifty_stac_device_count())

    def compress(self, *args: int, where: Exec) -> int:
        """Arguments in the order of ``thrifty_stac_compress``; returns the non-finite count (CPU; 0 on CUDA)."""
        bad = c_int64(0)
        self._check(self._lib.thrifty_stac_compress(*args, ctypes.byref(where), ctypes.byref(bad)))
        return int(bad.value)

    def residual_grad_workspace(self, n: int, d: int, block: int, k: int, m: int) -> int:
        out = c_int64(0)
        self._check(self._lib.thrifty_stac_residual_grad_workspace(n, d, block, k, m, ctypes.byref(out)))
        return int(out.value)

    def residual_grad(self, *args: int, workspace: int, where: Exec) -> None:
        self._check(self._lib.thrifty_stac_residual_grad(*args, workspace, ctypes.byref(where)))

    def residual_scatter(self, *args: int, where: Exec) -> None:
        self._check(self._lib.thrifty_stac_residual_scatter(*args, ctypes.byref(where)))


def load_cpu() -> Library:
    """The CPU kernels at the best instruction-set level this CPU runs (the baseline when forced or missing)."""
    base = Library("thrifty_stac_cpu")
    forced = os.environ.get("THRIFTY_CPU_KERNELS", "").strip().lower()
    if forced not in ("", "auto", "generic", "avx2"):
        raise ValueError(f"THRIFTY_CPU_KERNELS: must be 'auto', 'generic' or 'avx2', got {forced!r}")
    if forced == "generic" or not os.path.isfile(library_path("thrifty_stac_cpu_avx2")):
        return base
    if not base.supports_avx2():
        if forced == "avx2":
            raise RuntimeError("THRIFTY_CPU_KERNELS=avx2: this CPU lacks AVX2/FMA/BMI2 (x86-64-v3)")
        return base
    return Library("thrifty_stac_cpu_avx2")


def load_cuda() -> Library:
    """The CUDA kernels (loading needs no CUDA library: the runtime is static; calling them needs a driver)."""
    return Library("thrifty_stac_cuda")
