"""Per-call hand-off overhead of small core calls (issue 21, point 6).

Every long core call runs while Python's main thread polls for Ctrl-C. It used to start a new OS
thread per call for the work (2-3x the wall time of a small call under load); now the work goes to
the rayon pool that is already running. This script times two small calls — a 10^4-row
``HartiganKMeans`` fit and a small ``subspace_test`` — in a fresh process per build, alternating the
builds, and prints the median wall time of each next to the other build's in the same run.

    python benches/handoff_overhead.py --baseline /path/to/old/site   # a dir holding an older thrifty/
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, time
import numpy as np
from thrifty.cluster import HartiganKMeans
from thrifty.inference import subspace_test
rng = np.random.default_rng(0)
X = rng.standard_normal((10_000, 8)); X[:5000] += 3
Xs = rng.standard_normal((200, 5)); ys = Xs[:, 0] + rng.standard_normal(200)
def med(f, reps):
    f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
    return float(np.median(t))
fit = med(lambda: HartiganKMeans(8, n_init=1, random_state=0).fit(X), {reps})
test = med(lambda: subspace_test(Xs, ys, n_components=1, n_perm=99, n_splits=10, random_state=0), {reps})
tiny = med(lambda: HartiganKMeans(2, n_init=1, random_state=0).fit(Xs), {reps} * 4)
print(json.dumps({{"fit": fit, "test": test, "tiny": tiny}}))
"""


def run(site: str | None, reps: int) -> dict[str, float]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site
    out = subprocess.run([sys.executable, "-c", _CHILD.format(reps=reps)], env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="directory holding the baseline build's thrifty package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if not (Path(args.baseline) / "thrifty").is_dir():
        parser.error(f"{args.baseline} holds no thrifty package")
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this build": []}
    for _ in range(args.rounds):  # alternate, so that load on the machine hits both alike
        runs["baseline"].append(run(args.baseline, args.reps))
        runs["this build"].append(run(None, args.reps))
    labels = {
        "fit": "HartiganKMeans(8).fit, 10^4 x 8",
        "test": "subspace_test 200 x 5, 10 splits, 99 perms",
        "tiny": "HartiganKMeans(2).fit, 200 x 5",
    }
    print(f"{'call':<44} | {'baseline ms':>11} | {'this build ms':>13} | ratio")
    for key, label in labels.items():
        base = sorted(r[key] for r in runs["baseline"])[len(runs["baseline"]) // 2] * 1e3
        new = sorted(r[key] for r in runs["this build"])[len(runs["this build"]) // 2] * 1e3
        print(f"{label:<44} | {base:11.3f} | {new:13.3f} | {base / new:.2f}x faster")


if __name__ == "__main__":
    main()
