"""Issue 10 for k-means: drop-in parity with sklearn.cluster.KMeans (algorithm="elkan", the same
exception types), absurd sizes refused with a ValueError naming the argument (or interruptible
instead of allocated), n_jobs capped at the CPU count, and Ctrl-C honoured by predict and score."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from thrifty.cluster import HartiganKMeans, _hartigan

X: np.ndarray = make_blobs(300, n_features=4, centers=5, random_state=0)[0]


def test_elkan_is_accepted_and_gives_sklearn_elkans_result() -> None:
    init = X[:5].copy()
    ours = HartiganKMeans(5, init=init, tol=0, algorithm="elkan").fit(X)
    ref = KMeans(5, init=init, n_init=1, tol=0, algorithm="elkan").fit(X)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    assert ours.get_params()["algorithm"] == "elkan"


_BAD = {
    "complex": X + 1j,
    "complex-list": (X + 1j).tolist(),
    "strings": np.full((20, 3), "abc"),
    "mixed-list": [[1, "a", 2]] * 20,
    "objects": np.array([[object()] * 3] * 20),
    "object-none": np.array([[v if v > 0 else None for v in row] for row in X.tolist()], dtype=object),
    "dict": {"a": 1},
    "3-d": X.reshape(300, 2, 2),
}


@pytest.mark.parametrize("name", sorted(_BAD))
def test_bad_input_raises_what_sklearn_raises(name: str) -> None:
    def raised(fn: Any) -> type:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the type is what is compared
                return type(e)
        return type(None)

    data = _BAD[name]
    assert raised(lambda: HartiganKMeans(2).fit(data)) is raised(lambda: KMeans(2, n_init=1).fit(data))
    ours, ref = HartiganKMeans(2, random_state=0).fit(X[:, :3]), KMeans(2, n_init=1, random_state=0).fit(X[:, :3])
    for method in ("predict", "transform", "score"):
        mine, theirs = getattr(ours, method), getattr(ref, method)
        assert raised(lambda m=mine: m(data)) is raised(lambda m=theirs: m(data)), method


def test_n_jobs_beyond_the_cpu_count_is_capped() -> None:
    a = HartiganKMeans(5, random_state=0, n_jobs=100_000).fit(X)
    b = HartiganKMeans(5, random_state=0, n_jobs=1).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize(("params", "match"), [({"n_init": 2**70}, "n_init"), ({"max_iter": 2**64}, "max_iter")])
def test_absurd_counts_are_value_errors_naming_the_argument(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        HartiganKMeans(2, **params).fit(X)


def test_working_memory_beyond_the_machine_is_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    km = HartiganKMeans(5, random_state=0).fit(X)
    monkeypatch.setattr(_hartigan, "_physical_memory", lambda: 10_000)
    with pytest.raises(ValueError, match="n_clusters.*GiB"):
        HartiganKMeans(50).fit(X)
    with pytest.raises(ValueError, match="n_clusters.*transform"):
        km.transform(np.repeat(X, 10, axis=0))
    km.predict(X)  # O(n) memory: not refused
    km.score(X)


def test_huge_n_init_runs_in_constant_memory_and_stops_on_ctrl_c() -> None:
    # Before: the runs' results were collected into one vector of n_init entries (an allocation
    # abort for n_init = 10**12). Now they are reduced as they finish, and Ctrl-C stops the fit.
    code = textwrap.dedent(
        """
        import _thread, threading
        import numpy as np
        from thrifty.cluster import HartiganKMeans
        X = np.random.default_rng(0).normal(size=(200, 3))
        threading.Timer(0.5, _thread.interrupt_main).start()
        try:
            HartiganKMeans(3, init="random", n_init=10**12).fit(X)
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "interrupted" in out.stdout, out.stderr[-2000:]


@pytest.mark.parametrize("method", ["predict", "score"])
def test_ctrl_c_interrupts_predict_and_score_on_large_input(method: str) -> None:
    import _thread
    import threading

    rng = np.random.default_rng(0)
    Xl = rng.standard_normal((100_000, 64)).astype(np.float32)
    km = HartiganKMeans(4000, init="random", max_iter=1, n_init=1, random_state=0).fit(Xl[:4000])
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            getattr(km, method)(Xl)  # ~2.6e10 flops: many seconds uninterrupted
            time.sleep(5)  # if the call ended first, let the timer fire here (and fail the time check)
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < 1.5
