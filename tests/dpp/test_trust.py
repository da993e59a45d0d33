"""Issue 10 ("Trust"), DPP part: sizes that come out smaller than asked say so (A5), the binned KDE
and float32 L-ensembles (A7), absurd sizes (B8), Ctrl-C and progress bars (B9), lazy minibatches
(B10), pickling (B11), the randomized orthonormality check (B12), one seed name (C14), pandas input
and argument names in messages (C15)."""

from __future__ import annotations

import copy
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
import warnings

import numpy as np
import pytest

from thrifty.dpp import (
    Coreset,
    LEnsemble,
    MinibatchSampler,
    ProjectionDPP,
    ReducedRankWarning,
    StratifiedDPP,
    discretize,
    greedy_map,
    orthonormalize,
    select_entropy,
)
from thrifty.dpp._kernels import binned_kde


def _run(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (an abort there cannot take the test run down)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, check=False)


# ---- A5: never smaller than asked without saying so ---------------------------------------------


@pytest.mark.parametrize("kernel", ["ope", "daubechies"])
@pytest.mark.parametrize("data", ["duplicated", "cauchy"])
def test_rank_deficient_coresets_warn_and_record_their_size(kernel: str, data: str) -> None:
    rng = np.random.default_rng(0)
    if data == "duplicated":
        X = np.repeat(rng.normal(size=(10, 2)), 60, axis=0)
    else:
        X = rng.standard_cauchy(size=(3000, 2))
    with pytest.warns(ReducedRankWarning, match="m = 64"):
        cs = Coreset(X, 64, kernel=kernel, random_state=0)
    assert cs.m == 64 and cs.size == cs.indices.size == cs.dpp.rank < 64
    assert len(np.unique(cs.indices)) == cs.size


def test_minibatch_sampler_names_batch_size_when_rank_is_short() -> None:
    X = np.repeat(np.random.default_rng(1).normal(size=(12, 2)), 40, axis=0)
    with pytest.warns(ReducedRankWarning, match="batch_size = 32"):
        ms = MinibatchSampler(X, 32, kernel="ope", random_state=0)
    assert ms.batch_size == ms.dpp.rank < 32
    idx, w = next(iter(ms))
    assert idx.shape == w.shape == (ms.batch_size,)


def test_empty_haar_boxes_warn() -> None:
    rng = np.random.default_rng(2)
    Y = np.vstack([rng.normal(0, 0.01, size=(500, 2)), rng.normal(1, 0.01, size=(500, 2))])
    with pytest.warns(ReducedRankWarning, match="split='quantile'"):
        d = discretize(Y, 64, kernel="haar")
    assert d.rank < 64
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReducedRankWarning)
        assert discretize(Y, 64, kernel="haar", split="quantile").rank == 64


def test_from_features_rescales_badly_scaled_columns_instead_of_losing_rank() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5)) * np.array([1.0, 1e-9, 1e8, 1.0, 1e-12])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReducedRankWarning)
        dpp = ProjectionDPP.from_features(X)
    assert dpp.rank == 5
    Q = dpp.U
    np.testing.assert_allclose(Q.T @ Q, np.eye(5), atol=1e-10)
    # Same column space: projecting each column onto span(Q) reproduces it (relative to its scale).
    R = X - Q @ (Q.T @ X)
    assert np.all(np.linalg.norm(R, axis=0) <= 1e-8 * np.linalg.norm(X, axis=0))
    # Genuinely dependent columns still lower the rank, with a warning.
    Xd = np.hstack([X, X[:, :1] * 3.0])
    with pytest.warns(ReducedRankWarning, match="rank 5 < 6"):
        assert ProjectionDPP.from_features(Xd).rank == 5
    # The old behaviour on request.
    assert orthonormalize(X, equilibrate=False).shape[1] < 5


def test_greedy_selection_that_runs_out_of_gains_warns_and_records_k() -> None:
    Z = np.random.default_rng(4).normal(size=(30, 3))
    with pytest.warns(ReducedRankWarning, match="k = 6"):
        sel = select_entropy(Z @ Z.T, 6)
    assert sel.indices.size == 3 and sel.requested == 6 and not sel.complete
    with pytest.warns(ReducedRankWarning):
        assert greedy_map(features=Z, k=5).requested == 5
    full = select_entropy(Z @ Z.T + np.eye(30), 6)
    assert full.complete and full.requested == 6


# ---- A7: binned KDE, float32 kernels --------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3])
def test_binned_kde_matches_the_exact_kde(d: int) -> None:
    Z = np.random.default_rng(d).normal(size=(1500, d))
    n = len(Z)
    h = Z.std(0) * n ** (-1 / (d + 4))
    diff = (Z[:, None, :] - Z[None, :, :]) / h
    exact = np.exp(-0.5 * (diff**2).sum(-1)).sum(1) / (n * np.prod(np.sqrt(2 * np.pi) * h))
    est = binned_kde(Z)
    assert np.abs(est / exact - 1).max() < 0.03


def test_high_dimensional_kde_is_positive_and_tracks_the_exact_kde() -> None:
    Z = np.random.default_rng(5).normal(size=(4000, 6))
    n, d = Z.shape
    h = Z.std(0) * n ** (-1 / (d + 4))
    exact = np.concatenate(
        [np.exp(-0.5 * (((Z[a : a + 500, None, :] - Z[None, :, :]) / h) ** 2).sum(-1)).sum(1) for a in range(0, n, 500)]
    ) / (n * np.prod(np.sqrt(2 * np.pi) * h))
    est = binned_kde(Z)  # d > 4: kernel sum over a subsample of 1000 points (unbiased)
    assert (est > 0).all() and np.isfinite(est).all()
    assert np.median(np.abs(est / exact - 1)) < 0.25
    assert np.corrcoef(np.log(est), np.log(exact))[0, 1] > 0.9


def test_float32_kernel_with_rounding_level_negative_eigenvalues_is_clipped() -> None:
    rng = np.random.default_rng(6)
    F = rng.normal(size=(80, 5))
    L32 = (F @ F.T).astype(np.float32)
    ens = LEnsemble(L32)
    assert ens.rank == 5 and (ens.eigenvalues_ > 0).all()
    ref = LEnsemble(F @ F.T)
    np.testing.assert_allclose(ens.inclusion_probabilities(), ref.inclusion_probabilities(), atol=1e-4)
    # A negative eigenvalue at float32's rounding level is clipped; the same in float64 is an error.
    lam_max = float(np.linalg.eigvalsh(F @ F.T).max())
    shifted = F @ F.T - 2e-6 * lam_max * np.eye(80)
    assert LEnsemble(shifted.astype(np.float32)).rank == 5
    with pytest.raises(ValueError, match="positive semi-definite"):
        LEnsemble(shifted)
    with pytest.raises(ValueError, match="positive semi-definite"):
        LEnsemble((F @ F.T - 0.05 * lam_max * np.eye(80)).astype(np.float32))
    assert len(ens.sample(random_state=0)) <= 5


# ---- B8: absurd sizes -----------------------------------------------------------------------------


def test_absurd_sample_counts_raise_value_error_naming_the_argument() -> None:
    # In a subprocess: before the fix these calls aborted the interpreter.
    out = _run(
        """
        import numpy as np
        from thrifty.dpp import LEnsemble, ProjectionDPP, StratifiedDPP
        rng = np.random.default_rng(0)
        dpp = ProjectionDPP.from_features(rng.normal(size=(200, 5)))
        ens = LEnsemble(features=rng.normal(size=(200, 5)))
        st = StratifiedDPP(np.arange(200) % 7, np.ones(200))
        for call in (lambda: dpp.sample_many(10**12), lambda: ens.sample_k_many(2, 10**12),
                     lambda: ens.sample_many(10**13), lambda: st.sample_many(10**12)):
            try:
                call()
                print("no error")
            except ValueError as e:
                print("ValueError", "n_samples" in str(e))
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ValueError", "True"] * 4


def test_absurd_kernel_and_batch_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    import thrifty.dpp._checks as checks

    # 195 GiB of features: refused before anything is allocated (the budget is pinned so the test
    # means the same on a machine with more memory).
    monkeypatch.setattr(checks, "memory_budget", lambda: 64 * 2**30)
    X = np.random.default_rng(7).uniform(size=(200_000, 2))
    with pytest.raises(ValueError, match="m = 131072 asks for .* GiB"):
        discretize(X, 2**17, kernel="daubechies")
    with pytest.raises(ValueError, match="batch_size = 131072 asks for"):
        MinibatchSampler(X, 2**17, kernel="ope")
    Xs = X[:500]
    with pytest.raises(ValueError, match="n_batches"):
        MinibatchSampler(Xs, 10, n_batches=10**30)
    ms = MinibatchSampler(Xs, 10, n_batches=10**15, random_state=0)
    assert next(iter(ms))[0].shape == (10,)


def test_n_jobs_is_capped_at_the_cpu_count() -> None:
    dpp = ProjectionDPP.from_features(np.random.default_rng(8).normal(size=(300, 4)))
    a = dpp.sample_many(20, random_state=1, n_jobs=10**6)
    assert np.array_equal(a, dpp.sample_many(20, random_state=1, n_jobs=1))


# ---- B9: Ctrl-C and progress bars ---------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        "ProjectionDPP.from_features(rng.normal(size=(100_000, 60))).sample_many(100_000, method='chain', progress=False)",
        "select_mutual_information(np.cov(rng.normal(size=(3000, 3000))) + np.eye(3000), 2999)",
    ],
)
def test_long_calls_stop_on_ctrl_c_within_about_a_second(call: str) -> None:
    code = f"""
        import sys, time, numpy as np
        from thrifty.dpp import ProjectionDPP, select_mutual_information
        rng = np.random.default_rng(0)
        print("ready", flush=True)
        try:
            {call}
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", time.perf_counter(), flush=True)
        """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(3.0)  # inside the long call by now
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    waited = time.perf_counter() - sent
    assert out.startswith("interrupted"), out
    assert waited < 3.0, waited  # about a second, with slack for a loaded CI machine


def test_no_progress_bar_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import thrifty.dpp._checks as checks

    clock = iter(np.arange(0.0, 1e6, 10.0))  # every chunk "takes" 10 s
    monkeypatch.setattr(checks.time, "perf_counter", lambda: float(next(clock)))
    dpp = ProjectionDPP.from_features(np.random.default_rng(9).normal(size=(400, 5)))
    a = dpp.sample_many(3000, random_state=3)
    assert capsys.readouterr().err == ""
    b = dpp.sample_many(3000, random_state=3, progress=True)  # asked for: shown
    assert "samples" in capsys.readouterr().err
    assert np.array_equal(a, b)


# ---- B10: lazy minibatches --------------------------------------------------------------------------


def test_minibatch_epoch_is_lazy_and_equals_the_eager_batches() -> None:
    X = np.random.default_rng(10).normal(size=(5000, 2))
    ms = MinibatchSampler(X, 10, n_batches=2_000_000, random_state=0)
    tracemalloc.start()
    t = time.perf_counter()
    it = iter(ms)
    first = [next(it)[0] for _ in range(200)]
    elapsed = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5 * 2**20, peak  # an eager epoch holds 2e6 × 10 int64 = 160 MB
    assert elapsed < 2.0
    epoch_seed = (ms.seed_ * 1_000_003 + 0) % (2**63 - 1)
    eager = ms.dpp.sample_many(200, epoch_seed)
    assert all(np.array_equal(a, b) for a, b in zip(first, eager))


# ---- B11: pickle and deepcopy -----------------------------------------------------------------------


def _objects() -> dict[str, object]:
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(600, 2))
    F = rng.normal(size=(60, 4))
    return {
        "projection": ProjectionDPP.from_features(rng.normal(size=(300, 6))),
        "projection32": ProjectionDPP(orthonormalize(rng.normal(size=(300, 6)).astype(np.float32))),
        "ensemble_L": LEnsemble(F @ F.T + 0.1 * np.eye(60)),
        "ensemble_features": LEnsemble(features=F),
        "stratified": StratifiedDPP(np.arange(50) % 4, rng.uniform(0.1, 1, size=50)),
        "coreset": Coreset(X, 16, kernel="ope", random_state=0),
        "minibatch": MinibatchSampler(X, 8, random_state=1),
    }


def _draw(obj: object) -> list[np.ndarray]:
    if isinstance(obj, (ProjectionDPP, StratifiedDPP)):
        return [obj.sample_many(5, random_state=4)]
    if isinstance(obj, LEnsemble):
        return list(obj.sample_many(5, random_state=4)) + [obj.sample_k_many(2, 3, random_state=5)]
    if isinstance(obj, Coreset):
        return [obj.indices, obj.weights, obj.dpp.sample_many(3, random_state=6)]
    assert isinstance(obj, MinibatchSampler)
    return [b for b, _ in obj]


@pytest.mark.parametrize("name", list(_objects()))
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_dpp_objects_round_trip_and_sample_the_same(name: str, how: str) -> None:
    obj = _objects()[name]
    clone = pickle.loads(pickle.dumps(obj)) if how == "pickle" else copy.deepcopy(obj)
    assert type(clone) is type(obj) and repr(clone) == repr(obj)
    a, b = _draw(obj), _draw(clone)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


# ---- B12: the randomized orthonormality check ---------------------------------------------------------


def test_randomized_check_rejects_slightly_non_orthonormal_bases() -> None:
    rng = np.random.default_rng(12)
    U = orthonormalize(rng.normal(size=(3000, 40)))  # n·p² = 4.8e6: the randomized path
    ProjectionDPP(U)
    bad = U.copy()
    bad[:, 7] *= 1 + 1e-3
    for _ in range(20):  # a fresh probe each time; false-accept ≤ (0.8·√40·1e-6/1e-3)² ≈ 3e-5
        with pytest.raises(ValueError, match="not orthonormal"):
            ProjectionDPP(bad)
    with pytest.raises(ValueError, match=r"max \|UᵀU − I\|"):
        ProjectionDPP(bad, check="exact")
    ProjectionDPP(bad, check=False)
    with pytest.raises(ValueError, match="check"):
        ProjectionDPP(U, check="sometimes")


# ---- C14: one seed name ---------------------------------------------------------------------------------


def test_seed_is_recorded_as_seed_everywhere_with_deprecated_aliases() -> None:
    objs = _objects()
    for name in ("projection", "ensemble_features", "stratified"):
        obj = objs[name]
        obj.sample(random_state=7)  # type: ignore[attr-defined]
        assert obj.seed_ == 7  # type: ignore[attr-defined]
        with pytest.warns(FutureWarning, match="seed_"):
            assert obj.last_seed_ == 7  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            obj.last_seed_ = 3  # type: ignore[attr-defined]
    for name in ("coreset", "minibatch"):
        obj = objs[name]
        assert isinstance(obj.seed_, int)  # type: ignore[attr-defined]
        with pytest.warns(FutureWarning, match="seed_"):
            assert obj.seed == obj.seed_  # type: ignore[attr-defined]


# ---- C15: pandas input, argument names in messages ----------------------------------------------------------


def test_pandas_frames_with_nullable_dtypes_booleans_and_na() -> None:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(13)
    X = rng.uniform(size=(300, 3))
    df = pd.DataFrame(
        {
            "a": pd.array(X[:, 0], dtype="Float64"),
            "b": pd.array((X[:, 1] * 100).round().astype(int), dtype="Int64"),
            "c": pd.array(X[:, 2] > 0.5, dtype="boolean"),
        }
    )
    ref = np.column_stack([X[:, 0], (X[:, 1] * 100).round(), X[:, 2] > 0.5]).astype(float)
    a = Coreset(df, 16, kernel="haar", split="quantile", random_state=0)
    b = Coreset(ref, 16, kernel="haar", split="quantile", random_state=0)
    assert np.array_equal(a.indices, b.indices)
    assert ProjectionDPP.from_features(df).rank == 3
    cov = pd.DataFrame(ref.T @ ref)
    assert select_entropy(cov, 2).indices.tolist() == select_entropy(ref.T @ ref, 2).indices.tolist()
    bad = df.copy()
    bad.loc[5, "b"] = pd.NA
    with pytest.raises(ValueError, match="X contains NaN"):
        Coreset(bad, 16)
    with pytest.raises(ValueError, match="features contains NaN"):
        ProjectionDPP.from_features(bad)
    with pytest.raises(TypeError, match="X must hold real numbers"):
        Coreset(pd.DataFrame({"s": ["a"] * 300, "x": X[:, 0]}), 16)
    assert LEnsemble(pd.DataFrame(ref[:20] @ ref[:20].T)).n_items == 20


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: MinibatchSampler(np.random.default_rng(0).uniform(size=(200, 2)), 24, kernel="daubechies"), "batch_size must be a power of two"),
        (lambda: MinibatchSampler(np.random.default_rng(0).uniform(size=(200, 2)), 0), "batch_size must be at least 1, got 0"),
        (lambda: ProjectionDPP(np.eye(4)).sample_many(0), "n_samples must be at least 1, got 0"),
        (lambda: select_entropy(np.eye(4), 9), "k must be between 1 and 4, got 9"),
    ],
)
def test_messages_name_the_users_argument(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
    try:
        call()
    except ValueError as e:
        assert "in [1]" not in str(e)
