"""Robustness probe (issue 21, points 1-3): memory limits, Ctrl-C and extreme scales.

Every case runs in its own Python process. Memory cases run under an address-space limit
(``RLIMIT_AS``, 1 GB like ``ulimit -v 1000000``) and must end in a clean ``MemoryError`` (or
succeed), never an abort (``--room MB``: the limit is instead a warmed-up interpreter's peak plus MB,
and each memory child warms up first: on a VM that reports a huge L3 every thread's matrix-product
workspace alone can exceed 1 GB of address space, and the fixed limit then stops every call at it);
Ctrl-C cases get SIGINT once the call has run for a while and must stop
within about a second with ``KeyboardInterrupt``; scale cases print what the call returned or
raised. The table gives the call, the outcome and the time (for Ctrl-C: from the signal to the
process's end).

    python benches/probe_robustness.py [--only SUBSTRING] [--room MB] > benches/output/probe_robustness.txt
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

#: ``ulimit -v 1000000`` (KiB) in bytes.
MEMORY_LIMIT = 1_000_000 * 1024

_CHILD = """
import resource, signal, sys, time, warnings
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the parent ignores SIGINT
limit = {limit}
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import numpy as np
from thrifty.cluster import HartiganKMeans
from thrifty.dpp import LEnsemble, ProjectionDPP, greedy_map, orthonormalize, select_mutual_information
from thrifty.inference import subspace_test
rng = np.random.default_rng(0)
{warm_up}
{setup}
print("READY", flush=True)
t0 = time.perf_counter()
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = {call}
    note = "; ".join(sorted({{type(w.message).__name__ + ": " + str(w.message)[:60] for w in caught}}))
    print("OUTCOME ok " + {show} + (" [" + note + "]" if note else ""), flush=True)
except BaseException as e:  # noqa: BLE001 - the probe reports whatever ends the call
    print("OUTCOME " + type(e).__name__ + ": " + str(e).splitlines()[0][:110] if str(e) else "OUTCOME " + type(e).__name__, flush=True)
print("TIME %.2f" % (time.perf_counter() - t0), flush=True)
"""


@dataclass(frozen=True)
class Case:
    kind: str  # "memory", "ctrl-c" or "scale"
    call: str
    setup: str = ""
    show: str = "'done'"
    sigint_after: float = 1.5
    timeout: float = 120.0


# the calling thread's and the pool's matrix-product workspaces, made before a memory case under --room
_WARM_UP = """
ProjectionDPP(np.eye(40)[:, :5]).sample(random_state=0)
subspace_test(rng.standard_normal((30, 200)), rng.standard_normal(30), random_state=0)
orthonormalize(rng.standard_normal((2000, 30)))
"""


def warmed_peak() -> int:
    """Bytes of address space a fresh child reaches by the end of the warm-up (its VmPeak)."""
    show = 'next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmPeak:"))'
    code = _CHILD.format(limit=0, warm_up=_WARM_UP, setup="", call="0", show=show)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[2] for line in out.splitlines() if line.startswith("OUTCOME "))) << 10


def child_source(case: Case, limit: int, warm: bool) -> str:
    """The child's program: ``limit`` bytes of address space for a memory case (0: none)."""
    memory = case.kind == "memory"
    warm_up = _WARM_UP if memory and warm else ""
    return _CHILD.format(
        limit=limit if memory else 0, warm_up=warm_up, setup=textwrap.dedent(case.setup), call=case.call, show=case.show
    )


def run_case(case: Case, limit: int = MEMORY_LIMIT, warm: bool = False) -> tuple[str, float]:
    """(outcome, seconds) of one case in a fresh interpreter."""
    proc = subprocess.Popen(
        [sys.executable, "-c", child_source(case, limit, warm)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # unbuffered bytes: a text wrapper's readline would swallow the lines after READY of a call
        # that ends at once, and communicate() would not see them
        bufsize=0,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    ready = proc.stdout.readline().decode()
    if not ready.startswith("READY"):
        proc.wait()
        return f"setup failed (rc {proc.returncode}): {proc.stderr.read().decode().strip()[-120:]}", 0.0
    sent = None
    if case.kind == "ctrl-c":
        time.sleep(case.sigint_after)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            sent = time.perf_counter()
    try:
        out_b, err_b = proc.communicate(timeout=case.timeout)
        out, err = out_b.decode(errors="replace"), err_b.decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"TIMEOUT after {case.timeout:.0f} s (killed)", case.timeout
    ended = time.perf_counter()
    outcome = next((line[8:] for line in out.splitlines() if line.startswith("OUTCOME ")), None)
    took = next((float(line[5:]) for line in out.splitlines() if line.startswith("TIME ")), 0.0)
    if outcome is None:
        tail = err.strip().splitlines()[-1][:110] if err.strip() else ""
        name = signal.Signals(-proc.returncode).name if proc.returncode < 0 else f"rc {proc.returncode}"
        outcome = f"CRASH {name}: {tail}"
    if sent is not None:
        took = ended - sent
        if outcome.startswith("ok"):
            outcome = "finished before the signal took effect: " + outcome
    return outcome, took


# X (300 × 150000, 360 MB) fits under the limit beside the imports; not a copy of it besides
_WIDE = (
    "from thrifty.inference import PLSInference, select_n_components; "
    "X = rng.standard_normal((300, 150_000)); y = X[:, 0] + rng.standard_normal(300)"
)

MEMORY = [
    Case(
        "memory",
        "HartiganKMeans(2000, n_init=1, max_iter=2, random_state=0).fit(X)",
        "X = rng.standard_normal((1_000_000, 10))",
        timeout=300,  # a real fit: 95 s under the 1 GB limit on a loaded 2-core machine (2026-12-02), no abort
    ),
    Case(
        "memory",
        "HartiganKMeans(3000, n_init=1, max_iter=2, algorithm='lloyd', random_state=0).fit(X)",
        "X = rng.standard_normal((1_000_000, 10))",
        timeout=300,
    ),
    Case("memory", "LEnsemble(features=F).sample(random_state=0)", "F = rng.standard_normal((200, 20000))"),
    Case(
        "memory",
        "subspace_test(X, y, random_state=0)",
        "X = rng.standard_normal((30, 200000)); y = rng.standard_normal(30)",
    ),
    Case(
        "memory",
        "ProjectionDPP(Q, check=False).exact_variance(g)",
        "Q = np.zeros((1_000_000, 20)); Q[np.arange(20), np.arange(20)] = 1.0; g = rng.standard_normal(1_000_000)",
    ),
    Case(
        "memory",
        "ProjectionDPP(Q, check=False).sample_many(2000, random_state=0)",
        "Q = np.linalg.qr(rng.standard_normal((20000, 50)))[0]",
    ),
    Case(
        "memory",
        "ProjectionDPP(Q, check=False, method='chain').sample_many(4, random_state=0)",
        "Q = np.linalg.qr(rng.standard_normal((20000, 50)))[0]",
    ),
    Case("memory", "orthonormalize(A)", "A = rng.standard_normal((2000, 3000))", show="str(result.shape)"),
    Case("memory", "LEnsemble(np.eye(7000))"),
    Case("memory", "orthonormalize(A)", "A = rng.standard_normal((3, 100000))", show="str(result.shape)"),
    Case("memory", "ProjectionDPP.from_features(A)", "A = rng.standard_normal((4, 50000))", show="str(result.rank)"),
    # Same classes, other buffers (issue 21, point 1's audit): the proposal table and the chain
    # rule's residuals of a tall U, check="exact"'s p × p Gram matrices, the n × n inverse of
    # mutual-information greedy, the SVD of tall features.
    Case("memory", "ProjectionDPP(U).sample(random_state=0)", "n = 36_000_000; U = np.full((n, 1), n ** -0.5)"),
    Case(
        "memory",
        "ProjectionDPP(U, check=False, method='chain').sample(random_state=0)",
        "n = 30_000_000; U = np.full((n, 1), n ** -0.5)",
    ),
    Case("memory", "ProjectionDPP(np.eye(6000), check='exact')"),
    Case("memory", "select_mutual_information(np.eye(5500), 3)"),
    Case("memory", "LEnsemble(features=F).sample(random_state=0)", "F = rng.standard_normal((20000, 2000))"),
    # The discrete kernels' O(n) buffers (box partition, stratified sampler) and the distributed
    # sampler's proposal pairs, reached through the core entry points the public classes call.
    Case(
        "memory", "_core.dpp_partition(Z, 4, 'volume')", "from thrifty import _core; Z = np.full((28_000_000, 1), 0.5)"
    ),
    Case(
        "memory",
        "_core.DppStratified(c, 1, k)",
        "from thrifty import _core; c = np.zeros(20_000_000, dtype=np.int64); k = np.full(20_000_000, 1 / 20e6)",
    ),
    Case("memory", "_core.dpp_proposal_pairs(0, 0, 2**62, 1.0)", "from thrifty import _core"),
    # The inference core's X-sized buffers (2026-12-07 probe: each aborted): the rescaled copy of X,
    # every split's standardised rows, NIPALS' deflation copies, on every route and the estimator.
    *(
        Case("memory", call, _WIDE, timeout=300)
        for call in (
            "subspace_test(X, y, n_components=3, random_state=0)",
            "subspace_test(X, y, n_components=3, method='jackknife', random_state=0)",
            "subspace_test(X, y, n_components=3, method='cv-permutation-q2', n_perm=5, random_state=0)",
            "subspace_test(X, np.c_[y, y * y], n_components=2, method='nb', random_state=0)",
            "select_n_components(X, y, k_max=10)",
            "PLSInference(3).fit(X, y)",
        )
    ),
    # The same class, the smaller buffers (2026-12-07 audit): PLS2's per-split copies of a wide Y,
    # the two-block test's permutation batches, varimax's p × k loadings, the bootstrap of
    # rotation_stability, the confidence intervals, the lexicon test's vectors.
    *(
        Case("memory", call, setup, timeout=300)
        for call, setup in (
            (
                "subspace_test(X, Y, n_components=2, method='nb', random_state=0)",
                "X = rng.standard_normal((300, 40)); Y = X[:, :1] + rng.standard_normal((300, 150_000))",
            ),
            (
                "pls_svd_test(X, Y, 2, random_state=0)",
                "from thrifty.inference import pls_svd_test; "
                "X = rng.standard_normal((300, 75_000)); Y = X[:, :75_000] + rng.standard_normal((300, 75_000))",
            ),
            (
                "pls_svd_test(X, Y, 2, method='nb-permutation', n_perm=20, random_state=0)",
                "from thrifty.inference import pls_svd_test; "
                "X = rng.standard_normal((300, 75_000)); Y = X[:, :75_000] + rng.standard_normal((300, 75_000))",
            ),
            ("rotation_stability(X, y, 3, n_boot=5, random_state=0)", _WIDE + "; from thrifty.inference import rotation_stability"),
            ("subspace_test(X, y, n_components=3, learner='spls', spls_keep=100, random_state=0)", _WIDE),
            (
                "lexicon_test(E, lexicon, random_state=0)",
                "from thrifty.text import Embeddings, lexicon_test; V = rng.standard_normal((150_000, 300)); "
                "words = [f'w{i}' for i in range(150_000)]; E = Embeddings(words, V); "
                "lexicon = dict(zip(words, rng.standard_normal(150_000)))",
            ),
        )
    ),
]

CTRL_C = [
    Case("ctrl-c", "orthonormalize(A)", "A = rng.standard_normal((1_000_000, 300))", timeout=90),
    Case("ctrl-c", "LEnsemble(L).sample(random_state=0)", "L = np.eye(4000)", timeout=90),
    Case("ctrl-c", "greedy_map(features=F, k=300)", "F = rng.standard_normal((200000, 300))", timeout=90),
]

_W = "X = rng.standard_normal((3000, 4)); X[:1500] += 5"
_FAR = "X = rng.standard_normal((120, 30)); y = X[:, :3].sum(axis=1) + rng.standard_normal(120)"
_WORDS = "from thrifty.text import Embeddings; V = rng.standard_normal((200, 16)); words = [f'w{i}' for i in range(200)]"
SCALE = [
    Case(
        "scale",
        "HartiganKMeans(2, random_state=0).fit(X, sample_weight=np.full(len(X), 1e308))",
        _W,
        show="'inertia %.4g' % result.inertia_",
    ),
    Case(
        "scale",
        "HartiganKMeans(2, random_state=0).fit(X, sample_weight=np.ones(len(X)))",
        _W,
        show="'inertia %.4g' % result.inertia_",
    ),
    Case("scale", "HartiganKMeans(2, random_state=0).fit(X * 1e300)", _W, show="'inertia %.4g' % result.inertia_"),
    Case(
        "scale",
        "subspace_test(X, y, sample_weight=np.full(200, 1e308), random_state=0)",
        "X = rng.standard_normal((200, 5)); y = X[:, 0] + rng.standard_normal(200)",
        show="'pvalue %.3g' % result.pvalue",
    ),
    Case(
        "scale",
        "subspace_test(X, y, sample_weight=np.full(200, 1e-320), random_state=0)",
        "X = rng.standard_normal((200, 5)); y = X[:, 0] + rng.standard_normal(200)",
        show="'pvalue %.3g' % result.pvalue",
    ),
    Case(
        "scale",
        "subspace_test(X, y, random_state=0)",
        "X = rng.standard_normal((200, 5)); y = X[:, 0] + rng.standard_normal(200)",
        show="'pvalue %.3g' % result.pvalue",
    ),
    Case("scale", "orthonormalize(A * 1e-310)", "A = rng.standard_normal((500, 4))", show="str(result.shape)"),
    Case("scale", "orthonormalize(A * 1e300)", "A = rng.standard_normal((500, 4))", show="str(result.shape)"),
    # location far from the origin (2026-12-07 probe: every split undefined, "y is constant", another
    # statistic); each pair: the data far from the origin, then the same numbers moved to it exactly
    *(
        Case("scale", f"subspace_test({call}, n_components=2, random_state=0)", _FAR, show="'statistic %.9f' % result.statistic")
        for call in ("X, y + 1e12", "X, y + 1e12 - 1e12", "X + 1e12, y", "X + 1e12 - 1e12, y")
    ),
    Case("scale", "Embeddings(words, V * 1e300).most_similar('w3', 3)", _WORDS, show="str([w for w, _ in result])"),
    Case("scale", "Embeddings(words, V).most_similar('w3', 3)", _WORDS, show="str([w for w, _ in result])"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose call contains this text")
    parser.add_argument(
        "--room", type=float, default=None, help="MB above a warmed-up child's peak (default: 1 GB in all)"
    )
    args = parser.parse_args()
    limit = MEMORY_LIMIT if args.room is None else warmed_peak() + int(args.room * 2**20)
    how = "fixed" if args.room is None else f"a warmed-up child's peak + {args.room:g} MiB"
    print(f"memory limit {limit / 2**20:.0f} MiB ({how})")
    print(f"{'class':7} | {'call':<82} | {'time s':>6} | outcome")
    for case in MEMORY + CTRL_C + SCALE:
        if args.only not in case.call:
            continue
        outcome, took = run_case(case, limit, warm=args.room is not None)
        print(f"{case.kind:7} | {case.call:<82} | {took:6.2f} | {outcome}", flush=True)


if __name__ == "__main__":
    main()
