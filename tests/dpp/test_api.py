"""API contracts: reproducibility, thread-count independence, float32, greedy selection against brute
force, coresets, minibatches (and the torch sampler when torch is installed), invariants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.dpp import (
    Coreset,
    LEnsemble,
    MinibatchSampler,
    ProjectionDPP,
    StratifiedDPP,
    discretize,
    greedy_map,
    orthonormalize,
    select_entropy,
    select_mutual_information,
)


def test_same_seed_same_samples_on_any_thread_count() -> None:
    rng = np.random.default_rng(0)
    dpp = ProjectionDPP.from_features(rng.normal(size=(5000, 20)))
    a = dpp.sample_many(64, random_state=42, n_jobs=1)
    b = dpp.sample_many(64, random_state=42, n_jobs=2)
    c = dpp.sample_many(64, random_state=42)
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert dpp.seed_ == 42
    assert np.array_equal(dpp.sample(random_state=42), a[0])
    ens = LEnsemble(features=rng.normal(size=(300, 8)))
    x = ens.sample_many(20, random_state=1, n_jobs=1)
    y = ens.sample_many(20, random_state=1, n_jobs=2)
    assert all(np.array_equal(p, q) for p, q in zip(x, y))
    assert np.array_equal(ens.sample_k_many(3, 10, random_state=5, n_jobs=1), ens.sample_k_many(3, 10, random_state=5, n_jobs=2))
    # A numpy Generator is accepted and the seed drawn from it is recorded.
    dpp.sample(random_state=np.random.default_rng(3))
    assert isinstance(dpp.seed_, int)


def test_float32_is_kept() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 10)).astype(np.float32)
    Q = orthonormalize(X)
    assert Q.dtype == np.float32
    assert np.abs(Q.T.astype(np.float64) @ Q - np.eye(10)).max() < 1e-4
    dpp = ProjectionDPP(Q)
    assert dpp.U.dtype == np.float32
    s = dpp.sample_many(50, random_state=0)
    assert all(len(np.unique(r)) == 10 for r in s)
    sel = greedy_map(features=X, k=5)
    assert sel.indices.size == 5


def test_orthonormalize_spans_input_and_drops_rank() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 6))
    X[:, 5] = X[:, 0] - X[:, 1]
    Q = orthonormalize(X)
    assert Q.shape == (500, 5)
    P = Q @ (Q.T @ X)
    np.testing.assert_allclose(P, X, atol=1e-9)


def test_greedy_entropy_matches_brute_force_greedy_and_log_det() -> None:
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(25, 10))
    C = Z @ Z.T + 0.1 * np.eye(25)
    sel = select_entropy(C, 4)
    chosen: list[int] = []
    for _ in range(4):
        best = max((i for i in range(25) if i not in chosen), key=lambda i: np.linalg.slogdet(C[np.ix_(chosen + [i], chosen + [i])])[1])
        chosen.append(best)
    assert sel.indices.tolist() == chosen
    assert np.isclose(sel.log_det, np.linalg.slogdet(C[np.ix_(chosen, chosen)])[1])
    assert greedy_map(features=Z, k=4).indices.tolist() == select_entropy(Z @ Z.T, 4).indices.tolist()


def test_select_entropy_validates_every_entry_it_reads() -> None:
    # The selection reads the diagonal and the chosen rows: check_input=True validates exactly those
    # (so damage elsewhere cannot change the answer), "full" validates the whole matrix.
    rng = np.random.default_rng(30)
    Z = rng.normal(size=(40, 6))
    C = Z @ Z.T + 0.1 * np.eye(40)
    sel = select_entropy(C, 3)
    unread = [i for i in range(40) if i not in sel.indices]
    D = C.copy()
    D[unread[0], unread[1]] = np.nan
    assert select_entropy(D, 3).indices.tolist() == sel.indices.tolist()
    assert select_entropy(D, 3, check_input=False).indices.tolist() == sel.indices.tolist()
    with pytest.raises(ValueError, match="NaN"):
        select_entropy(D, 3, check_input="full")
    D = C.copy()
    D[sel.indices[2], unread[0]] += 1.0  # a chosen row that no longer matches its column
    with pytest.raises(ValueError, match="symmetric"):
        select_entropy(D, 3)
    D = C.copy()
    D[sel.indices[0], unread[0]] = np.inf
    with pytest.raises(ValueError, match="infinite|NaN|finite"):
        select_entropy(D, 3)
    assert select_entropy(C.astype(np.float32), 3).indices.tolist() == sel.indices.tolist()
    C_before = C.copy()
    select_entropy(C, 3, check_input="full")
    np.testing.assert_array_equal(C, C_before)


def test_greedy_map_is_near_optimal_on_small_problem() -> None:
    rng = np.random.default_rng(4)
    F = rng.normal(size=(12, 5))
    L = F @ F.T
    sel = greedy_map(L, k=3)
    best = max(np.linalg.slogdet(L[np.ix_(s, s)])[1] for s in map(list, itertools.combinations(range(12), 3)))
    assert sel.log_det <= best + 1e-9
    assert sel.log_det >= best - np.log(np.e)  # greedy log-det within 1 nat here


def test_mutual_information_picks_spread_out_sensors() -> None:
    x = np.linspace(0, 1, 60)
    C = np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * 0.08**2))
    sel = select_mutual_information(C, 5, noise=1e-4)
    picked = np.sort(x[sel.indices])
    # MI avoids the boundary and spreads the sensors (entropy greedy goes to the edges first).
    assert picked.min() > 0.02 and picked.max() < 0.98
    assert np.min(np.diff(picked)) > 0.08
    ent = select_entropy(C + 1e-4 * np.eye(60), 2)
    assert {0, 59} & set(ent.indices.tolist())
    assert sel.gains is not None and sel.gains.shape == (5,)
    S = C + 1e-4 * np.eye(60)
    assert np.isclose(sel.log_det, np.linalg.slogdet(S[np.ix_(sel.indices, sel.indices)])[1])


def test_coreset_fields_and_reproducibility() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 2))
    a = Coreset(X, 100, random_state=7)
    b = Coreset(X, 100, random_state=a.seed_)
    assert np.array_equal(a.indices, b.indices)
    assert a.indices.size == a.weights.size <= 100
    assert "Coreset(" in repr(a)
    for kernel, kw in (("ope", {}), ("daubechies", {"order": 3}), ("haar", {"split": "quantile"})):
        c = Coreset(X, 64, kernel=kernel, random_state=1, density="kde", **kw)
        assert c.indices.size == 64
        assert np.all(c.weights > 0)


def test_anisotropic_haar_any_size_and_empty_cells() -> None:
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(4000, 3))
    for m in (5, 37, 300):
        assert discretize(X, m, kernel="haar").rank == m
    # Clustered data leaves some equal-volume cells empty: fewer points, still exact and unbiased.
    Y = np.vstack([rng.normal(0, 0.01, size=(500, 2)), rng.normal(1, 0.01, size=(500, 2))])
    d = discretize(Y, 64, kernel="haar")
    assert d.rank < 64
    q = discretize(Y, 64, kernel="haar", split="quantile")
    assert q.rank == 64


def test_minibatch_sampler_iterates_with_unbiased_weights() -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 2))
    ms = MinibatchSampler(X, 50, random_state=0)
    batches = list(ms)
    assert len(batches) == len(ms) == 40
    for idx, w in batches:
        assert idx.shape == (50,) and w.shape == (50,)
        assert np.isclose(w.sum(), 1.0)  # equal-count cells: exact for constants
    again = list(MinibatchSampler(X, 50, random_state=0))
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(batches, again))
    second_epoch = list(ms)
    assert not np.array_equal(second_epoch[0][0], batches[0][0])
    ope = MinibatchSampler(X, 16, kernel="ope", n_batches=3, random_state=1)
    assert len(list(ope)) == 3


def test_torch_sampler() -> None:
    torch = pytest.importorskip("torch")
    X = np.random.default_rng(8).normal(size=(500, 2))
    ms = MinibatchSampler(X, 20, random_state=0)
    sampler = ms.torch_sampler()
    assert isinstance(sampler, torch.utils.data.Sampler)
    ds = torch.utils.data.TensorDataset(torch.arange(500))
    loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler)
    batch = next(iter(loader))[0]
    assert batch.shape == (20,)


def test_torch_is_not_imported_by_the_package() -> None:
    import subprocess
    import sys

    code = "import sys, thrifty.dpp; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=40),
    p=st.integers(min_value=1, max_value=6),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    method=st.sampled_from(["chain", "accept_reject"]),
)
def test_projection_invariants(n: int, p: int, seed: int, method: str) -> None:
    p = min(p, n)
    rng = np.random.default_rng(seed)
    dpp = ProjectionDPP.from_features(rng.normal(size=(n, p)) * rng.uniform(0.1, 10, size=(n, 1)))
    s = dpp.sample_many(5, random_state=seed, method=method)
    assert s.shape == (5, dpp.rank)
    assert all(len(np.unique(r)) == dpp.rank for r in s)
    assert s.min() >= 0 and s.max() < n
    k = dpp.inclusion_probabilities()
    assert np.isclose(k.sum(), dpp.rank) and (k >= 0).all() and (k <= 1 + 1e-9).all()
    g = rng.normal(size=n)
    assert dpp.exact_variance(g) >= 0


@settings(max_examples=25, deadline=None)
@given(
    cells=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=50),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_stratified_invariants(cells: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 1.0, size=len(cells))
    dpp = StratifiedDPP(cells, p)
    s = dpp.sample_many(4, random_state=seed)
    lab = dpp.cells
    for r in s:
        assert sorted(lab[r].tolist()) == list(range(dpp.rank))
    k = dpp.inclusion_probabilities()
    assert np.allclose(np.bincount(lab, weights=k), 1.0)


def test_chunked_sampling_with_progress_gives_the_same_samples(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(9)
    dpp = ProjectionDPP.from_features(rng.normal(size=(400, 5)))
    a = dpp.sample_many(300, random_state=3, progress=True)
    b = dpp.sample_many(300, random_state=3, progress=False)
    assert np.array_equal(a, b)
    ens = LEnsemble(features=rng.normal(size=(100, 4)))
    x = ens.sample_many(300, random_state=4, progress=True)
    y = ens.sample_many(300, random_state=4, progress=False)
    assert all(np.array_equal(p, q) for p, q in zip(x, y))
    assert np.array_equal(ens.sample_k_many(2, 300, random_state=5, progress=True), ens.sample_k_many(2, 300, random_state=5))
    st_dpp = discretize(rng.uniform(size=(500, 2)), 10)
    assert np.array_equal(st_dpp.sample_many(300, random_state=6, progress=True), st_dpp.sample_many(300, random_state=6))
    assert "samples" in capsys.readouterr().err


def test_projection_keeps_a_read_only_view_by_default_and_copies_on_request() -> None:
    # Default copy=False (SciPy's cKDTree(copy_data=False) convention): no 8·n·p-byte copy, the
    # user's array stays writeable; copy=True detaches the sampler from later changes to U.
    U = orthonormalize(np.random.default_rng(3).normal(size=(200, 5)))
    view, private = ProjectionDPP(U), ProjectionDPP(U, copy=True)
    assert np.shares_memory(view.U, U) and not view.U.flags.writeable and U.flags.writeable
    assert not np.shares_memory(private.U, U) and not private.U.flags.writeable
    before = private.sample(random_state=1)
    U[:] = orthonormalize(np.random.default_rng(4).normal(size=(200, 5)))
    assert np.array_equal(private.sample(random_state=1), before)
