"""Weight-gradient fidelity of STAC-R at ratio 8 on a *trained* GPT-2-shaped model (issue 18, point 3).

A GPT-2 as transformers ships it (``GPT2LMHeadModel``: ``Conv1D`` projections, tied head), width 512, 6 layers,
8 heads, byte-level vocabulary (256), dropout off (so the exact and the compressed passes see the same function),
random init with a fixed seed, trained uncompressed with AdamW on text that ships with Python: the standard
library's own ``.py`` sources (sorted by path, bytes; the last 5% held out). At step 0 and after training, on
held-out batches, the weight gradient of every projection of ``stac_r(copy, ratio=8)`` (its first step plans the
layouts on the first batch; the tracked bases then carry over) is compared with the exact one of the uncompressed
model on the same batch: the mean (and worst) cosine over layers and batches.

Usage::

    .venv/bin/python benches/compress_trained_cos.py                      # 200 steps (~30 min on 2 loaded cores)
    .venv/bin/python benches/compress_trained_cos.py --steps 5 --smoke    # checks the script runs
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from thrifty.compress import CompressedLinear, stac_r


def stdlib_text(limit: int) -> torch.Tensor:
    root = Path(os.__file__).parent
    chunks, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= limit:
            break
    return torch.frombuffer(bytearray(b"".join(chunks)[:limit]), dtype=torch.uint8).to(torch.long)


def make_model(width: int, layers: int, heads: int, seq: int) -> nn.Module:
    import transformers

    cfg = transformers.GPT2Config(
        vocab_size=256, n_positions=seq, n_embd=width, n_layer=layers, n_head=heads,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def batch_at(data: torch.Tensor, g: torch.Generator, b: int, seq: int) -> torch.Tensor:
    starts = torch.randint(0, data.numel() - seq - 1, (b,), generator=g)
    return torch.stack([data[s : s + seq] for s in starts.tolist()])


def grads(model: nn.Module, ids: torch.Tensor) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def cosines(model: nn.Module, batches: list[torch.Tensor], ratio: float) -> tuple[list[float], dict[str, float]]:
    comp = stac_r(copy.deepcopy(model), ratio=ratio)
    # the block projections (lm_head's weight is tied to the embedding: its gradient mixes in the exact one)
    wrapped = [n + ".weight" for n, m in comp.named_modules() if isinstance(m, CompressedLinear) and n != "lm_head"]
    out: list[float] = []
    by_kind: dict[str, list[float]] = {}
    for ids in batches:
        _, exact = grads(model, ids)
        _, approx = grads(comp, ids)
        for n in wrapped:
            a, e = approx[n].double().flatten(), exact[n].double().flatten()
            c = float(a @ e / (a.norm() * e.norm()))
            out.append(c)
            by_kind.setdefault(".".join(n.split(".")[-3:-1]), []).append(c)
    return out, {k: statistics.fmean(v) for k, v in by_kind.items()}


def report(tag: str, cos: list[float], kinds: dict[str, float], n_layers: int) -> None:
    print(f"{tag}: mean weight-gradient cosine at ratio 8 {statistics.fmean(cos):.4f}, worst {min(cos):.4f} "
          f"({len(cos)} = {n_layers} projections x batches); by kind "
          + ", ".join(f"{k} {v:.4f}" for k, v in sorted(kinds.items())), flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8, help="sequences per held-out batch (the cosine's batches)")
    ap.add_argument("--train-batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--smoke", action="store_true", help="tiny model and text")
    args = ap.parse_args()
    if args.smoke:
        args.width, args.layers = 64, 2
    torch.manual_seed(0)
    data = stdlib_text(4_000_000 if not args.smoke else 200_000)
    split = int(0.95 * data.numel())
    train, held = data[:split], data[split:]
    model = make_model(args.width, args.layers, max(1, args.width // 64), args.seq)
    n_proj = 4 * args.layers  # c_attn, attn.c_proj, c_fc, mlp.c_proj per block
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; GPT2LMHeadModel width {args.width}, "
          f"{args.layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"{n_proj} projections wrapped; stdlib text {data.numel():,} bytes (train {train.numel():,}); "
          f"training batch {args.train_batch} x {args.seq} tokens, held-out batches {args.batch} x {args.seq}",
          flush=True)  # fmt: skip
    g_eval = torch.Generator().manual_seed(7)
    evals = [batch_at(held, g_eval, args.batch, args.seq) for _ in range(args.eval_batches)]
    report("step 0 (random init)", *cosines(model, evals, 8.0), n_proj)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.01, betas=(0.9, 0.95))
    warm = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))
    )
    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        ids = batch_at(train, g, args.train_batch, args.seq)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0 or step == args.steps:
            with torch.no_grad():
                val = statistics.fmean(float(model(input_ids=e, labels=e).loss) for e in evals)
            print(f"step {step}: train loss {float(loss):.4f}, held-out loss {val:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    report(f"after {args.steps} steps (trained)", *cosines(model, evals, 8.0), n_proj)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
