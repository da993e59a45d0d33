"""``thrifty.show_versions()``: what a bug report needs, in the spirit of ``sklearn.show_versions``."""

from __future__ import annotations

import importlib
import platform
import sys
from typing import Any

_DEPENDENCIES = (
    "numpy", "scipy", "sklearn", "threadpoolctl", "tqdm", "pandas", "matplotlib", "torch", "dask", "distributed",
)


def _module_version(name: str) -> str | None:
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken optional install must not break the report
        return None
    return str(getattr(module, "__version__", "installed"))


def _native_backends() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        from thrifty import _core

        info["thrifty._core"] = getattr(_core, "__version__", "built")
    except ImportError as exc:  # pragma: no cover - the package cannot import without it
        info["thrifty._core"] = f"missing ({exc})"
    try:
        # Imported by name: thrifty.compress needs torch, which is optional.
        info["thrifty.compress"] = importlib.import_module("thrifty.compress").backends()
    except Exception as exc:  # noqa: BLE001 - torch or the C++ kernels may be absent
        info["thrifty.compress"] = f"unavailable ({type(exc).__name__}: {exc})"
    return info


def versions() -> dict[str, dict[str, Any]]:
    """The information :func:`show_versions` prints, as a dict of sections."""
    from thrifty._core import __version__

    system = {
        "python": sys.version.replace("\n", " "),
        "executable": sys.executable,
        "machine": platform.platform(),
        "thrifty": __version__,
    }
    deps: dict[str, Any] = {name: _module_version(name) for name in _DEPENDENCIES}
    return {"System": system, "Python dependencies": deps, "Native backends": _native_backends()}


def show_versions() -> None:
    """Print thrifty's version, Python's, the dependencies' and the native backends' (for bug reports).

    Examples
    --------
    >>> import thrifty
    >>> thrifty.show_versions()  # doctest: +SKIP
    """
    for section, entries in versions().items():
        print(f"\n{section}:")
        for key, value in entries.items():
            print(f"{key:>20}: {value}")
