"""``warn``: every warning of the package points at the user's line.

A fixed ``stacklevel`` is right for one call path only: the same warning raised through a public
function, an estimator's ``fit`` or a Dask wrapper sits at different depths. ``warn`` walks out of
the package's own frames instead (as pandas' ``find_stack_level`` does), so ``warning.filename`` is the
caller's file however deep the warning was raised. torch's frames are skipped too: the compression
kernels are reached through autograd and ``torch.library`` dispatch.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal_dirs() -> tuple[str, ...]:
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if torch_file is None:
        return (_PACKAGE_DIR,)
    return (_PACKAGE_DIR, os.path.dirname(os.path.abspath(torch_file)) + os.sep)


def stack_level() -> int:
    """The ``stacklevel``, for a ``warnings.warn`` called by the caller of this function, of the first frame
    outside ``thrifty`` (and torch): the user's line."""
    internal = _internal_dirs()
    frame = sys._getframe(1)  # the function that will call warnings.warn
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(internal):
        frame = frame.f_back
        level += 1
    return level


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside the package."""
    warnings.warn(message, category, stacklevel=stack_level())
