"""Optional dependencies: one helper so that a missing one always names the extra that installs it."""

from __future__ import annotations

import importlib.util


def require(module: str, extra: str, feature: str) -> None:
    """Raise ModuleNotFoundError (an ImportError) naming ``pip install 'thrifty[extra]'`` when ``module`` is missing.

    Parameters
    ----------
    module : str
        Top-level import name of the dependency (``"torch"``, ``"dask"``, ``"matplotlib"``).
    extra : str
        The extra of thrifty that installs it (``"torch"``, ``"dask"``, ``"plots"``, ``"text"``).
    feature : str
        What needs it, for the message (``"thrifty.compress"``).

    Raises
    ------
    ModuleNotFoundError
        With ``name=module``, when the module cannot be found.

    Examples
    --------
    >>> from thrifty._optional import require
    >>> require("numpy", "core", "thrifty")  # present: nothing happens
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a half-installed module
        found = False
    if not found:
        raise ModuleNotFoundError(
            f"{feature} needs {module!r}, which is not installed; install it with: pip install 'thrifty[{extra}]'",
            name=module,
        )
