"""Smoke test of an INSTALLED thrifty (scripts/wheel_smoke.sh runs it from a temporary folder, in a fresh virtual
environment holding only the wheel): imports, one call per capability, the native pieces present and active.

Not collected by pytest (it must not see the source tree). Exits non-zero with a message on the first failure.
``THRIFTY_SOURCE_TREE`` (optional): the checkout, whose ``python/thrifty`` the imported package must not be.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np


def check(cond: bool, what: str) -> None:
    if not cond:
        sys.exit(f"smoke: FAILED: {what}")
    print(f"smoke: ok   {what}")


def main() -> None:
    warnings.simplefilter("error", RuntimeWarning)  # e.g. a fallback to the NumPy reference kernels
    import thrifty

    where = os.path.dirname(os.path.abspath(thrifty.__file__))
    tree = os.environ.get("THRIFTY_SOURCE_TREE")
    source = os.path.join(os.path.abspath(tree), "python", "thrifty") if tree else None
    check(where != source and "site-packages" in where, f"thrifty imported from {where} (installed, not the source)")
    check(thrifty.__version__ != "", f"thrifty {thrifty.__version__}")
    rng = np.random.default_rng(0)

    from thrifty.cluster import HartiganKMeans

    X = np.concatenate([rng.normal(c, 0.3, size=(60, 4)) for c in (0.0, 3.0, 6.0)])
    km = HartiganKMeans(n_clusters=3, random_state=0).fit(X)
    check(sorted(np.bincount(km.labels_).tolist()) == [60, 60, 60], "cluster: HartiganKMeans finds 3 x 60")

    from thrifty.inference import subspace_test

    Xi = rng.normal(size=(200, 6))
    yi = Xi[:, 0] + 0.5 * rng.normal(size=200)
    res = subspace_test(Xi, yi, random_state=0)
    check(0.0 <= float(res.pvalue) < 1e-3, f"inference: subspace_test p = {float(res.pvalue):.2e} on a real signal")

    from thrifty.dpp import ProjectionDPP, orthonormalize

    Q = orthonormalize(rng.normal(size=(100, 5)))
    S = ProjectionDPP(Q).sample(random_state=0)
    check(len(set(np.asarray(S).tolist())) == 5, "dpp: ProjectionDPP samples 5 distinct items")

    import torch
    from torch import nn

    from thrifty.compress import CompressedLinear, backends

    b = backends()
    check(b["cpu"] and b["cpu_fallback"] == "", f"compress: native CPU kernels ({b['cpu_library']}, {b['cpu_simd']})")
    check(b["cuda_built"], f"compress: CUDA library present (architectures {b['cuda_architectures']})")
    check(not b["errors"], f"compress: no load errors {b['errors']}")
    lin = nn.Linear(64, 32)
    layer = CompressedLinear(lin, ratio=4.0)
    x = torch.randn(128, 64)
    layer(x).sum().backward()
    check(lin.weight.grad is not None and bool(torch.isfinite(lin.weight.grad).all()), "compress: a training step")
    exact = CompressedLinear(nn.Linear(64, 32), exact=True)
    exact.weight.data.copy_(lin.weight.data)
    exact.bias.data.copy_(lin.bias.data)
    torch.testing.assert_close(exact(x), nn.functional.linear(x, lin.weight, lin.bias))
    check(True, "compress: exact=True equals nn.Linear")

    thrifty.show_versions()
    print("smoke: all passed")


if __name__ == "__main__":
    main()
