"""Ctrl-C latency of thrifty.inference's long calls (issue 10, item B9): each call is started with far
more work than it could finish, Ctrl-C is simulated after 1 s (``_thread.interrupt_main``, which is
what the terminal's SIGINT does), and the time from the signal to the ``KeyboardInterrupt`` is printed.
Target: about a second or less.

    .venv/bin/python benches/interrupt_inference.py
"""

from __future__ import annotations

import _thread
import sys
import threading
import time
import warnings

import numpy as np
from sklearn.cross_decomposition import PLSRegression

from thrifty.inference import GateWarning, component_tests, subspace_test


def latency(fn) -> tuple[float, bool]:
    fired: list[float] = []

    def fire() -> None:
        fired.append(time.perf_counter())
        _thread.interrupt_main()

    timer = threading.Timer(1.0, fire)
    timer.start()
    try:
        fn()
    except KeyboardInterrupt:
        return time.perf_counter() - fired[0], True
    finally:
        timer.cancel()
    return float("nan"), False


def main() -> int:
    warnings.simplefilter("ignore", GateWarning)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(400, 200)), rng.normal(size=400)
    big = 10**7
    cases = {
        "nb-permutation, spca (refit per permutation)": lambda: subspace_test(X, y, learner="spca", n_perm=big, random_state=0),
        "nb-permutation, pls k=3 (Gram route)": lambda: subspace_test(X, y, 3, n_perm=big, random_state=0),
        "nb-permutation, ridge": lambda: subspace_test(X, y, learner="ridge", n_perm=big, random_state=0),
        "cv-permutation-q2, pls": lambda: subspace_test(X, y, method="cv-permutation-q2", n_perm=big, random_state=0),
        "permutation-score, spca": lambda: subspace_test(X, y, learner="spca", method="permutation-score", n_perm=big, random_state=0),
        "transformer learner (PLSRegression)": lambda: subspace_test(X, y, learner=PLSRegression(1), n_perm=big, random_state=0),
        "component_tests, nb-permutation": lambda: component_tests(X, y, method="nb-permutation", n_perm=big, random_state=0),
    }
    print(f"{'long call (Ctrl-C after 1 s)':<48}{'seconds to stop':>16}")
    ok = True
    for name, fn in cases.items():
        secs, stopped = latency(fn)
        ok &= stopped and secs < 1.5
        print(f"{name:<48}{secs:>16.3f}" + ("" if stopped else "  (finished before the signal)"), flush=True)
    print("every call stopped within 1.5 s:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
