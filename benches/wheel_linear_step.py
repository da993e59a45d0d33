"""One CompressedLinear(1024, 1024) training step (forward + backward, sparse residual) on a (16, 256, 1024)
input, timed in two Python environments in the same run: an installed wheel and the source-tree build.

    python benches/wheel_linear_step.py --python /path/to/wheel-venv/bin/python [--python .venv/bin/python]

Each interpreter runs this file with ``--one`` from a temporary folder (so an installed wheel cannot pick up the
source tree), rounds interleaved; prints the median step time of each and the ratio to the first (the
source-tree build when two are given, else this interpreter). Target (issue 19): the wheel within 1.2x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def one(steps: int) -> dict[str, object]:
    import torch
    from torch import nn

    import thrifty
    from thrifty.compress import CompressedLinear, backends

    torch.manual_seed(0)
    lin = nn.Linear(1024, 1024)
    layer = CompressedLinear(lin, ratio=8.0, residual_density=1 / 32, residual_bits=8)
    g = torch.Generator().manual_seed(1)
    base = torch.randn(16, 256, 24, generator=g) @ torch.randn(24, 1024, generator=g)
    x = (base + 0.05 * torch.randn(16, 256, 1024, generator=g)).requires_grad_(False)
    times = []
    for i in range(steps + 2):
        lin.weight.grad = None
        t0 = time.perf_counter()
        layer(x).square().mean().backward()
        if i >= 2:  # the first steps plan the layer and warm up
            times.append(time.perf_counter() - t0)
    b = backends()
    return {"median_s": statistics.median(times), "thrifty": os.path.dirname(thrifty.__file__),
            "cpu_library": b.get("cpu_library", ""), "cpu_fallback": b["cpu_fallback"], "threads": torch.get_num_threads()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", action="store_true", help="time in this interpreter, print JSON")
    ap.add_argument("--python", action="append", default=[], help="interpreter to time (repeatable)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.steps)))
        return
    pythons = [os.path.abspath(p) for p in a.python] or [sys.executable]  # run from a temporary folder
    here = os.path.abspath(__file__)
    runs: dict[str, list[float]] = {p: [] for p in pythons}
    info: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for p in pythons:
                out = subprocess.run([p, here, "--one", "--steps", str(a.steps)], cwd=tmp, check=True,
                                     capture_output=True, text=True).stdout  # fmt: skip
                got = json.loads(out.strip().splitlines()[-1])
                runs[p].append(float(got["median_s"]))
                info[p] = got
    ref = statistics.median(runs[pythons[-1]])
    print("Linear(1024, 1024) step, (16, 256, 1024) input, ratio 8, residual density 1/32, int8 residual")
    for p in pythons:
        med = statistics.median(runs[p])
        best = min(runs[p]) / min(runs[pythons[-1]])  # the least-disturbed round: robust on a shared machine
        print(f"{p}: {med * 1e3:.1f} ms/step (rounds {[round(t * 1e3, 1) for t in runs[p]]}) ratio {med / ref:.3f}, "
              f"ratio of the fastest rounds {best:.3f}")
        print(f"    thrifty from {info[p]['thrifty']}, {info[p]['cpu_library']}, fallback={info[p]['cpu_fallback']!r}, "
              f"threads {info[p]['threads']}")  # fmt: skip


if __name__ == "__main__":
    main()
