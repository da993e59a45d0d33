"""STAC-R under DDP and FSDP2 (``fully_shard``), gloo, 2 processes on CPU: the compressed layers' plan and basis
agree across ranks, and gradients and weights equal a single-process run on the same global batch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if not torch.distributed.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))
import _dist_worker as worker  # noqa: E402

from thrifty.compress import stac_r  # noqa: E402

WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Both ranks' results for every mode and variant (one launch of 2 processes for the whole file)."""
    out = tmp_path_factory.mktemp("ranks")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(WORLD),
               OMP_NUM_THREADS="1")  # fmt: skip
    procs = [
        subprocess.Popen([sys.executable, worker.__file__, str(out)], env=dict(env, RANK=str(r)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        for r in range(WORLD)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.fixture(scope="module")
def single() -> dict[str, dict[str, Any]]:
    """The exact and fixed-basis variants trained on one process and the whole batch."""
    rank0_half = worker.global_batch().chunk(WORLD)[0]
    return {name: _single(worker.variants()[name], None if name == "exact" else rank0_half) for name in ("exact", "fixed")}


def _single(kw: dict[str, Any], plan_on: torch.Tensor | None) -> dict[str, Any]:
    """The same training on one process and the whole batch (``plan_on``: plan from rank 0's half first)."""
    model = stac_r(worker.tiny_gpt2(), 8, inplace=True, **kw)
    if plan_on is not None:
        model(input_ids=plan_on, labels=plan_on)  # plans every layer as rank 0 did; no step is taken
    ids = worker.global_batch()
    opt = torch.optim.SGD(model.parameters(), lr=worker.LR)
    grads: dict[str, torch.Tensor] = {}
    for step in range(worker.STEPS):
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        if step == 0:
            grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
    return {"grads": grads, "weights": {n: p.detach().clone() for n, p in model.named_parameters()}}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys() and len(a) > 10
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=2e-4, atol=2e-5, msg=name)


@pytest.mark.parametrize("mode", worker.MODES)
def test_compressed_gpt2_trains_alike_on_two_ranks_and_one(
    mode: str, ranks: list[dict[str, Any]], single: dict[str, dict[str, Any]]
) -> None:
    for name in worker.variants():
        r0, r1 = (r[mode][name] for r in ranks)
        # one plan and one basis everywhere, at every layer (each rank saw only its own half of the batch)
        assert r0["layers"].keys() == r1["layers"].keys() and len(r0["layers"]) == 9
        for layer, (cfg, u, steps) in r0["layers"].items():
            cfg1, u1, steps1 = r1["layers"][layer]
            assert cfg == cfg1 and steps == steps1 == worker.STEPS, (name, layer)
            assert torch.equal(u, u1), (name, layer)
        _close(r0["weights"], r1["weights"])
        if name == "default":  # rank 0's refreshes differ from the whole batch's: trains, tracks no reference
            assert all(torch.isfinite(torch.tensor(r0["losses"])))
            continue
        ref = single[name]
        _close(r0["grads"], ref["grads"])  # the averaged gradient of the halves is the whole batch's
        _close(r0["weights"], ref["weights"])
