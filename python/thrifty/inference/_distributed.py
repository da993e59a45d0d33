"""Split and permutation work of the subspace tests on a Dask cluster or any joblib backend (issue 11).

``backend="dask"`` runs it on the default ``dask.distributed`` client, ``backend="joblib"`` or an
active ``joblib.parallel_config`` / ``parallel_backend`` context on that joblib backend (Dask's,
Ray's, loky, threads). The problem (X, y, splits, options) is one object, shipped once to every
worker (Dask: scattered and broadcast, so that a lost worker does not lose it; joblib's Dask backend
scatters it once per call; loky memory-maps its arrays); the tasks are batches of (permutation block
× split group) that return their piece, and the driver puts the pieces back by index.

Why the p-values are those of the single-machine run for the same seed: permutation ``b`` draws from
its own stream ``(seed, b)``, split ``j`` from ``(seed, j)``; the permutation blocks are the ones the
single-machine call uses (:func:`_perm_chunk` without a progress bar), a split's null correlations
for a block do not depend on which other splits share its task (``thrifty-core``
``inference::blocks``), and the mean Fisher z over the splits is taken on the driver in split order
by the same core function. Every task runs the core on one thread.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from thrifty import _core
from thrifty.inference._problem import Problem, local_split_statistics, null_mean_z_refit
from thrifty.inference._results import FloatArray, IntArray

BACKENDS = ("local", "joblib", "dask")

# most tasks per run the split groups aim at (the grouping never changes a result)
_TARGET_TASKS = 64


def joblib_context_active() -> bool:
    """Whether the caller is inside a ``joblib.parallel_config``/``parallel_backend`` that names a backend."""
    try:
        jp: Any = importlib.import_module("joblib.parallel")
    except ImportError:  # pragma: no cover - joblib comes with scikit-learn
        return False
    config = getattr(jp._backend, "config", None)
    if not isinstance(config, dict):
        return False
    return config.get("backend") is not jp.default_parallel_config["backend"]


def resolve_backend(backend: Any) -> str | None:
    """``None`` (run in this process, on the core's threads) or the joblib backend to use."""
    if backend is None:
        return "joblib" if joblib_context_active() else None
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be None or one of {BACKENDS}, got {backend!r}")
    if backend == "local":
        return None
    if backend == "dask":
        try:
            from distributed import get_client
        except ImportError as e:  # pragma: no cover - distributed is a test dependency
            raise ImportError("backend='dask' needs the 'distributed' package (pip install distributed)") from e
        try:
            get_client()
        except ValueError as e:
            raise ValueError(
                "backend='dask' needs a running dask.distributed Client (e.g. `Client(LocalCluster())` or "
                "`Client('scheduler-address')`) before the call"
            ) from e
    return backend


_LOST = ("FutureCancelledError", "CancelledError", "KilledWorker", "CommClosedError")
_RETRIES = 2


def run_tasks(backend: str, fn: Callable[[Any, Any], Any], payload: Any, tasks: Sequence[Any]) -> Iterator[Any]:
    """``fn(payload, task)`` for every task on the backend, yielded in task order.

    On Dask, a task whose worker (or whose copy of the payload) is lost mid-run is resubmitted with
    the tasks not yet returned, the payload scattered afresh (at most twice); the results do not
    depend on where a task runs. After that a ``RuntimeError`` says what happened."""
    done, failures = 0, 0
    while done < len(tasks):
        try:
            for out in _parallel(backend, fn, payload, tasks[done:]):
                done += 1
                yield out
        except BaseException as e:
            if backend != "dask" or type(e).__name__ not in _LOST:
                raise
            failures += 1
            if failures > _RETRIES:
                raise RuntimeError(
                    f"the Dask cluster lost workers during the test ({type(e).__name__}) {failures} times; no "
                    "result was produced — rerun the call (results are reproducible from the seed)"
                ) from e


def _parallel(backend: str, fn: Callable[[Any, Any], Any], payload: Any, tasks: Sequence[Any]) -> Iterator[Any]:
    if backend == "dask":
        yield from _on_dask(fn, payload, tasks)
        return
    joblib: Any = importlib.import_module("joblib")
    yield from joblib.Parallel(return_as="generator")(joblib.delayed(fn)(payload, t) for t in tasks)


def _on_dask(fn: Callable[[Any, Any], Any], payload: Any, tasks: Sequence[Any]) -> Iterator[Any]:
    """The tasks on the default Dask client: the payload scattered once and broadcast to every
    worker (a lost worker loses no data; ``hash=False``: a fresh key per call, so a repeated call
    never races the release of the previous one's), results gathered in task order; the futures
    are cancelled when the caller stops early (an error, Ctrl-C)."""
    client: Any = importlib.import_module("distributed").get_client()
    data = client.scatter(payload, broadcast=True, hash=False)
    futures = [client.submit(fn, data, t, pure=False, retries=2) for t in tasks]
    try:
        for f in futures:
            yield f.result()
    finally:
        client.cancel([*futures, data])


def _workers(backend: str) -> int:
    """Workers the backend offers (Dask: the client's; joblib: the active n_jobs)."""
    if backend == "dask":
        client: Any = importlib.import_module("distributed").get_client()
        return max(1, len(client.scheduler_info().get("workers", {})))
    joblib: Any = importlib.import_module("joblib")
    return max(1, int(joblib.Parallel()._effective_n_jobs()))


def _groups(n_splits: int, n_blocks: int, workers: int) -> list[tuple[int, int]]:
    """Split groups: about 4 tasks per worker in all, but as few as the work allows, since every task
    draws its block's permutations afresh. Never changes a result."""
    target = min(_TARGET_TASKS, 4 * workers)
    per = max(1, -(-n_splits * n_blocks // target)) if n_blocks < target else n_splits
    return [(lo, min(n_splits, lo + per)) for lo in range(0, n_splits, per)]


@dataclasses.dataclass
class _Payload:
    """What every task needs: the validated problem and the splits (shipped once)."""

    pb: Problem
    trains: list[IntArray]


def _aligned(a: Any) -> Any:
    # arrays rebuilt from a transfer's frames can be unaligned or split views; the core wants
    # C-contiguous, aligned float64 (copied only when they are not)
    return None if a is None else np.require(a, dtype=np.float64, requirements=["C", "A"])


def _on_worker(pb: Problem) -> Problem:
    """The problem as a task runs it: one core thread, no bar, no nested backend, aligned arrays."""
    lr = copy.copy(pb.lr)  # a task's own learner (a callable's k is learned on it)
    lr.basis = _aligned(lr.basis)
    return dataclasses.replace(
        pb, x=_aligned(pb.x), y=_aligned(pb.y), w=_aligned(pb.w), xs=_aligned(pb.xs), ys=_aligned(pb.ys), lr=lr,
        jobs=1, progress=False, backend=None,
    )


def _trains(payload: _Payload, lo: int, hi: int) -> list[IntArray]:
    return [np.require(t, dtype=np.int64, requirements=["C", "A"]) for t in payload.trains[lo:hi]]


# ------------------------------------------------------------------------------------------------
# tasks (module-level functions: pickled by reference)


def _task_split_rs(payload: _Payload, group: tuple[int, int]) -> tuple[FloatArray, int, bool]:
    pb = _on_worker(payload.pb)
    rs = local_split_statistics(pb, _trains(payload, group[0], group[1]))
    return rs, pb.lr.k, pb.lr.k_known


def _task_null_rs(payload: _Payload, task: tuple[int, int, int, int]) -> FloatArray:
    start, count, lo, hi = task
    pb = _on_worker(payload.pb)
    lr = pb.lr
    return np.asarray(_core.inference_split_null_rs(
        pb.xs, pb.ys, pb.w, lr.core, lr.k, _trains(payload, lo, hi), pb.seed, start, count, basis=lr.basis,
        rotate=pb.rot, ridge_alpha=pb.ridge_alpha, spca_n_features=pb.spca_n_features, spls_keep=pb.spls_keep, n_jobs=1,
    ))


def _task_null_refit(payload: _Payload, block: tuple[int, int]) -> FloatArray:
    start, count = block
    pb = _on_worker(payload.pb)
    trains = _trains(payload, 0, len(payload.trains))
    return np.array([null_mean_z_refit(pb, trains, b) for b in range(start, start + count)])


def _task_cv(payload: _Payload, task: tuple[int, int, str, int, bool]) -> tuple[float, FloatArray]:
    start, count, core, folds, pooled = task
    pb = _on_worker(payload.pb)
    observed, part = _core.inference_cv_permutation(
        pb.xs, pb.ys, pb.w, core, pb.lr.k, folds, pb.seed, start, count, pooled, basis=pb.lr.basis,
        ridge_alpha=pb.ridge_alpha, spca_n_features=pb.spca_n_features, spls_keep=pb.spls_keep, n_jobs=1,
    )
    return float(observed), np.asarray(part)


# ------------------------------------------------------------------------------------------------
# driver side


def split_statistics(pb: Problem, trains: list[IntArray]) -> FloatArray:
    """Held-out r of every split, the splits spread over the backend."""
    assert pb.backend is not None
    groups = _groups(len(trains), 1, _workers(pb.backend))
    pieces = list(run_tasks(pb.backend, _task_split_rs, _Payload(pb, trains), groups))
    for _, k, known in pieces:
        if known:
            pb.lr.check_k(k, "learner")
    return np.concatenate([rs for rs, _, _ in pieces]).astype(np.float64, copy=False)


def nb_permutation_null(pb: Problem, trains: list[IntArray], n_perm: int, chunk: int, core_route: bool) -> FloatArray:
    """Mean Fisher z of permutations 0..n_perm over the fixed splits, spread over the backend."""
    assert pb.backend is not None
    blocks = [(s, min(chunk, n_perm - s)) for s in range(0, n_perm, chunk)]
    payload = _Payload(pb, trains)
    out = np.empty(n_perm)
    bar = _bar(pb, n_perm)
    try:
        if core_route:
            groups = _groups(len(trains), len(blocks), _workers(pb.backend))
            tasks = [(s, c, lo, hi) for s, c in blocks for lo, hi in groups]
            pieces = run_tasks(pb.backend, _task_null_rs, payload, tasks)
            for s, c in blocks:
                rs = np.vstack([next(pieces) for _ in groups])
                out[s : s + c] = _core.inference_null_mean_z(np.require(rs, np.float64, ["C", "A"]))
                if bar is not None:
                    bar.update(c)
        else:
            # learners fitted in Python (callables, transformers) and PLS2: one task per block of
            # permutations, each refitting every split
            per = max(1, math.ceil(n_perm / (4 * _TARGET_TASKS)))
            refit_blocks = [(s, min(per, n_perm - s)) for s in range(0, n_perm, per)]
            for (s, c), z in zip(refit_blocks, run_tasks(pb.backend, _task_null_refit, payload, refit_blocks)):
                out[s : s + c] = z
                if bar is not None:
                    bar.update(c)
    finally:
        if bar is not None:
            bar.close()
    return out


def cv_permutation(pb: Problem, core: str, folds: int, n_perm: int, chunk: int, pooled: bool) -> tuple[float, FloatArray]:
    """The CV baselines' observed statistic and null, blocks of permutations spread over the backend."""
    assert pb.backend is not None
    blocks = [(s, min(chunk, n_perm - s), core, folds, pooled) for s in range(0, n_perm, chunk)]
    out = np.empty(n_perm)
    observed = math.nan
    for (s, c, *_), (obs, part) in zip(blocks, run_tasks(pb.backend, _task_cv, _Payload(pb, []), blocks)):
        observed = obs
        out[s : s + c] = part
    return observed, out


def _bar(pb: Problem, total: int) -> Any:
    if not pb.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"NB-permutation ({pb.backend})", leave=False)
