"""thrifty's PEP 517 build backend: maturin for the Rust core, CMake for the C++/CUDA kernels, one wheel.

``pip wheel .`` / ``pip install .`` (and ``pip install`` of the sdist) call :func:`build_wheel`, which first
builds ``cpp/`` with CMake (the CPU kernels at two instruction-set levels and, on Linux x86-64, the CUDA kernels
with NVIDIA's nvcc from PyPI - a build requirement, no GPU needed) and installs the libraries into
``python/thrifty/``, then hands over to maturin, which compiles the Rust core (``thrifty/_core``, abi3), packs
the package with the libraries (``[tool.maturin] include``) and tags the wheel manylinux. Everything else
(metadata, the sdist, editable installs) is maturin's.

Environment: ``THRIFTY_CUDA=0`` builds without CUDA (``backends()["cuda_built"]`` then says so);
``THRIFTY_REQUIRE_CUDA=1`` (the default on Linux x86-64, where the nvcc wheels exist) makes a missing nvcc fatal;
``CUDACXX`` picks another nvcc; ``THRIFTY_BUILD_JOBS`` sets the parallel compile jobs (default: CPU count);
``THRIFTY_KERNEL_BUILD_DIR`` the CMake build folder (default ``build/cpp``, shared with ``scripts/setup.sh``,
so a development tree rebuilds nothing).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import maturin
from maturin import (  # noqa: F401 - re-exported PEP 517 hooks
    build_sdist,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_wheel,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CUDA_WHEELS = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def _find_nvcc() -> str | None:
    """CUDACXX, else the nvcc of the nvidia-cuda-nvcc wheel in this (build) environment, else nvcc on PATH."""
    if os.environ.get("CUDACXX"):
        return os.environ["CUDACXX"]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(base, "cu*", "bin", "nvcc")))
        if found:
            return found[-1]
    return shutil.which("nvcc")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"thrifty build: {name} not found (it is a build requirement: pip install {name})")
    return path


def build_kernels() -> None:
    """Configure, build and install cpp/ into python/thrifty/ (libthrifty_stac_*.so, _stac_build.json)."""
    build_dir = os.environ.get("THRIFTY_KERNEL_BUILD_DIR", os.path.join(ROOT, "build", "cpp"))
    cuda = os.environ.get("THRIFTY_CUDA", "1") != "0"
    require = os.environ.get("THRIFTY_REQUIRE_CUDA", "1" if (cuda and _CUDA_WHEELS) else "0") == "1"
    args = [_tool("cmake"), "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            f"-DTHRIFTY_CUDA={'ON' if cuda else 'OFF'}", f"-DTHRIFTY_REQUIRE_CUDA={'ON' if require else 'OFF'}",
            f"-DTHRIFTY_PY_DIR={os.path.join(ROOT, 'python', 'thrifty')}"]  # fmt: skip
    if shutil.which("ninja") and not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        args += ["-G", "Ninja"]
    nvcc = _find_nvcc() if cuda else None
    if nvcc:
        args.append(f"-DCMAKE_CUDA_COMPILER={os.path.abspath(nvcc)}")
    jobs = os.environ.get("THRIFTY_BUILD_JOBS", str(os.cpu_count() or 2))
    for cmd in (args, [_tool("cmake"), "--build", build_dir, "-j", jobs], [_tool("cmake"), "--install", build_dir]):
        print("thrifty build:", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=sys.stderr)


def _compatibility() -> None:
    """Hand [tool.maturin] compatibility (the manylinux policy) to `maturin pep517`, which defaults to "off"."""
    if not sys.platform.startswith("linux") or "--compatibility" in os.environ.get("MATURIN_PEP517_ARGS", ""):
        return
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as fh:
        found = re.search(r'^compatibility = "([^"]+)"', fh.read(), re.M)
    if found:
        os.environ["MATURIN_PEP517_ARGS"] = f"{os.environ.get('MATURIN_PEP517_ARGS', '')} --compatibility {found[1]}"


def build_wheel(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    build_kernels()
    _compatibility()
    return str(maturin.build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(
    wheel_directory: str, config_settings: Mapping[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    build_kernels()
    return str(maturin.build_editable(wheel_directory, config_settings, metadata_directory))
