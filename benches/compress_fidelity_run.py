"""Fidelity over training (issue 18, point 4): STAC-R at ratio 8 trained >= 1000 steps against the exact run.

The GPT-2 of ``compress_trained_cos.py`` (transformers' ``GPT2LMHeadModel``: ``Conv1D`` projections, width 512,
6 layers, byte vocabulary, dropout off) on the standard library's ``.py`` sources: one run uncompressed and one
run of ``stac_r(model, ratio=8)`` from the same initial weights and the same batches (AdamW, warmup + cosine).
Every ``--every`` steps of the compressed run, the exact weight gradient of its current weights on the same batch
(a plain copy, ``unwrap``) gives each projection's cosine; at the end both held-out losses. Prints the mean
cosine over the run, over the first 10% of it (where the activations have no low-rank structure yet) and its
minimum, and the held-out loss difference (target: within 1.5%).

Usage::

    .venv/bin/python benches/compress_fidelity_run.py                       # 1000 steps (hours on 2 cores)
    .venv/bin/python benches/compress_fidelity_run.py --smoke --steps 20    # checks the script runs
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch
from compress_trained_cos import batch_at, grads, make_model, stdlib_text  # benches/ is the script's directory
from torch import nn
from transformers.pytorch_utils import Conv1D

from thrifty.compress import CompressedLinear, stac_r, unwrap


def train(model: nn.Module, data: torch.Tensor, args: argparse.Namespace, every: int | None,
          noise_cosine: float | None = None) -> list[tuple[int, float]]:
    """Train in place; with ``every``: (step, cosine) per wrapped projection at every ``every``-th step.

    With ``noise_cosine`` (the control run): isotropic Gaussian noise is added to the weight gradient of
    every block projection (``Conv1D``), scaled so that its cosine with the exact gradient is ``noise_cosine``
    in expectation - an unstructured perturbation of the size the compression makes.
    """
    noisy = [p for m in model.modules() if isinstance(m, Conv1D) for p in [m.weight]]
    gn = torch.Generator().manual_seed(2)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.01, betas=(0.9, 0.95))
    warm = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))
    )
    g = torch.Generator().manual_seed(1)
    wrapped = [n + ".weight" for n, m in model.named_modules() if isinstance(m, CompressedLinear) and n != "lm_head"]
    cos: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        ids = batch_at(data, g, args.batch, args.seq)
        loss, got = grads(model, ids)
        if every and (step == 1 or step % every == 0):
            _, exact = grads(unwrap(copy.deepcopy(model)), ids)
            for n in wrapped:
                a, e = got[n].double().flatten(), exact[n].double().flatten()
                cos.append((step, float(a @ e / (a.norm() * e.norm()))))
        if noise_cosine is not None:
            for p in noisy:
                assert p.grad is not None
                e = torch.randn(p.grad.shape, generator=gn, dtype=p.grad.dtype)
                # |g + e| at angle acos(c): e orthogonal to g in expectation, |e| = |g| tan(acos(c))
                scale = p.grad.norm() * math.tan(math.acos(noise_cosine)) / e.norm()
                p.grad.add_(e, alpha=float(scale))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == args.steps:
            print(f"  step {step}: train loss {loss:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return cos


def held_out_loss(model: nn.Module, held: torch.Tensor, args: argparse.Namespace) -> float:
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        return statistics.fmean(
            float(model(input_ids=(ids := batch_at(held, g, args.batch, args.seq)), labels=ids).loss) for _ in range(8)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--width", type=int, default=512, help="model width (the target is stated for >= 512)")
    ap.add_argument("--layers", type=int, default=6, help="number of blocks (the target is stated for >= 6)")
    ap.add_argument("--plain-head", action="store_true", help="leave lm_head (tied to the embedding) uncompressed")
    ap.add_argument("--stochastic", action="store_true", help="stac_r(stochastic=True): the unbiased estimator")
    ap.add_argument("--baseline-only", action="store_true", help="run only the uncompressed run, print its held-out loss")
    ap.add_argument("--compute-budget", type=float, default=None,
                    help="stac_r(compute_budget=...): the rank cap as a fraction of out_features (inf = bytes only)")
    ap.add_argument("--baseline-loss", type=float, help="the uncompressed run's held-out loss from an earlier run with "
                    "the same arguments (deterministic on one thread): skips that run")
    ap.add_argument("--noise-cosine", type=float, help="control: train the uncompressed model with isotropic "
                    "gradient noise at this cosine instead of the stac_r run (needs --baseline-loss)")
    args = ap.parse_args()
    width, layers = (64, 2) if args.smoke else (args.width, args.layers)
    torch.manual_seed(0)
    data = stdlib_text(4_000_000 if not args.smoke else 200_000)
    split = int(0.95 * data.numel())
    base = make_model(width, layers, max(1, width // 64), args.seq)
    select = (lambda name, m: name != "lm_head" and isinstance(m, (nn.Linear, Conv1D))) if args.plain_head else None
    comp = stac_r(copy.deepcopy(base), ratio=8.0, layers=select, stochastic=args.stochastic,
                 compute_budget=args.compute_budget)
    print(f"GPT2LMHeadModel width {width}, {layers} layers; {args.steps} steps of {args.batch} x {args.seq} tokens",
          flush=True)  # fmt: skip
    print(f"stac_r: lm_head {'plain' if args.plain_head else 'compressed'}, stochastic={args.stochastic}, "
          f"compute_budget={args.compute_budget}", flush=True)
    if args.baseline_loss is None:
        print("uncompressed run:", flush=True)
        train(base, data[:split], args, None)
        if args.baseline_only:
            print(f"held-out loss uncompressed {held_out_loss(base, data[split:], args):.4f}", flush=True)
            return
    if args.noise_cosine is not None:
        print(f"control run: uncompressed, isotropic gradient noise at cosine {args.noise_cosine}:", flush=True)
        train(base, data[:split], args, None, noise_cosine=args.noise_cosine)
        vn = held_out_loss(base, data[split:], args)
        vb = args.baseline_loss if args.baseline_loss is not None else float("nan")
        print(f"held-out loss uncompressed {vb:.4f}, noisy control {vn:.4f} ({100 * (vn - vb) / vb:+.2f}%)", flush=True)
        return
    print("stac_r ratio 8 run:", flush=True)
    cos = train(comp, data[:split], args, args.every)
    early = [c for s, c in cos if s <= max(1, args.steps // 10)]
    vc = held_out_loss(comp, data[split:], args)
    vb = held_out_loss(base, data[split:], args) if args.baseline_loss is None else args.baseline_loss
    print(f"mean weight-gradient cosine over the run {statistics.fmean(c for _, c in cos):.4f} "
          f"(first 10% of steps {statistics.fmean(early):.4f}, minimum {min(c for _, c in cos):.4f}, "
          f"{len(cos)} layer-steps); held-out loss uncompressed {vb:.4f}, stac_r {vc:.4f} "
          f"({100 * (vc - vb) / vb:+.2f}%)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
