"""One rank of tests/compress/test_distributed.py (run as a script: ``python _dist_worker.py OUT``).

Trains a tiny compressed GPT-2 (transformers' Conv1D projections) under DDP and FSDP2 on gloo, each rank on its
half of a fixed global batch, and writes what the parent compares with a single-process run: the first step's
full gradients, the weights after a few SGD steps and every CompressedLinear's plan and basis.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from thrifty.compress import CompressedLinear, stac_r

SEQ, VOCAB, STEPS, LR = 16, 96, 3, 0.05
MODES = ("ddp", "fsdp")


def tiny_gpt2() -> Any:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def global_batch() -> torch.Tensor:
    return torch.randint(0, VOCAB, (8, SEQ), generator=torch.Generator().manual_seed(5))


def variants() -> dict[str, dict[str, Any]]:
    """stac_r settings per variant: exact, a basis fixed after rank 0's first batch, the default plan."""
    return {"exact": {"exact": True}, "fixed": {"refresh_every": 1000}, "default": {}}


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t  # FSDP2 holds DTensor shards


def layer_states(model: torch.nn.Module) -> dict[str, Any]:
    return {n: (m.config, m.codec.u.clone(), m.state.step) for n, m in model.named_modules() if isinstance(m, CompressedLinear)}


def train(mode: str, kw: dict[str, Any], ids: torch.Tensor) -> dict[str, Any]:
    model = stac_r(tiny_gpt2(), 8, inplace=True, **kw)
    if mode == "ddp":
        wrapped: Any = DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard

        for block in model.transformer.h:
            fully_shard(block)
        wrapped = fully_shard(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=LR)
    grads: dict[str, torch.Tensor] = {}
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = wrapped(input_ids=ids, labels=ids).loss
        loss.backward()
        losses.append(float(loss.detach()))
        if step == 0:
            grads = {n: full(p.grad).clone() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
    weights = {n: full(p.detach()).clone() for n, p in model.named_parameters()}
    return {"grads": grads, "weights": weights, "losses": losses, "layers": layer_states(model)}


def main() -> None:
    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ids = global_batch().chunk(dist.get_world_size())[rank]
    result = {mode: {name: train(mode, kw, ids) for name, kw in variants().items()} for mode in MODES}
    torch.save(result, f"{out}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
