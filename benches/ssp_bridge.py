"""The gradient bridge of the Saved-Surface Predictor over the fidelity benchmark of part 1 (issue 9, acc. 3).

The model, corpus, optimizer and training step are those of ``benches/compress_gpt.py`` (byte-level GPT,
4 layers, width 256, pydoc_data, AdamW; imported, not copied). At every training step of the exact model,
``thrifty.compress.predict`` runs on the step's batch and, for every planned Linear, reports from the
reconstruction error ``E = X − X̂`` of the batch the gradient error ``ε = ‖GᵀE‖/‖GᵀX‖`` and the predicted
bound ``cos ≥ √(1 − ε²)``, next to the cosine of the weight gradient the STAC-R kernels compute from the
factors. Prints, per ratio, the number of (step, layer) cases, how many violate the bound (target 0), the
largest ``bound − cos``, and the mean measured cosine.

Usage::

    .venv/bin/python benches/ssp_bridge.py                    # 40 steps, ratios 4, 8, 16
    .venv/bin/python benches/ssp_bridge.py --smoke            # a 1-layer width-64 model, 3 steps
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))

from compress_gpt import (
    GPTConfig,
    get_batch,
    load_corpus,
    make_optimizer,
    new_model,
    train_step,
)

from thrifty.compress import PredictConfig, predict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ratios", default="4,8,16")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = GPTConfig()
    if args.smoke:
        cfg = GPTConfig(n_layer=1, n_embd=64, n_head=2, block_size=32)
        args.steps, args.batch = 3, 4
    ratios = [float(r) for r in args.ratios.split(",")]
    train, _ = load_corpus()
    model = new_model(args.seed, cfg)
    opt = make_optimizer(model, args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    cases: dict[float, list[tuple[int, str, float, float, float]]] = {r: [] for r in ratios}
    t0 = time.perf_counter()
    print(f"tiny GPT {cfg}, {args.steps} steps, batch {args.batch}, ratios {ratios}, {args.threads} threads")
    for step in range(args.steps):
        x, y = get_batch(train, args.batch, cfg.block_size, gen)
        for ratio in ratios:
            rep = predict(model, (x, y), optimizer=opt, config=PredictConfig(ratio=ratio, plan_all=True))
            for row in rep:
                if not math.isnan(row.cos):
                    cases[ratio].append((step, row.name, row.eps, row.cos_bound, row.cos))
        loss = train_step(model, opt, x, y)
        if step % 5 == 0 or step == args.steps - 1:
            at8 = cases.get(8.0) or cases[ratios[0]]
            print(f"step {step:3d} loss {loss:.3f}  mean cos so far {statistics.fmean(c[4] for c in at8):.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    print("\nGRADIENT BRIDGE (predict on every step's batch; cos of the kernels' weight gradient vs the exact one)")
    print(f"{'ratio':>6} {'cases':>6} {'violations':>10} {'max(bound-cos)':>15} {'mean eps':>9} {'mean bound':>11} {'mean cos':>9}")
    total_viol = 0
    for ratio in ratios:
        cs = cases[ratio]
        viol = sum(1 for c in cs if c[3] - c[4] > 1e-6)
        total_viol += viol
        gap = max(c[3] - c[4] for c in cs)
        print(f"{ratio:>5g}x {len(cs):>6} {viol:>10} {gap:>+15.2e} {statistics.fmean(c[2] for c in cs):>9.4f} "
              f"{statistics.fmean(c[3] for c in cs):>11.4f} {statistics.fmean(c[4] for c in cs):>9.4f}")  # fmt: skip
    print(f"bound cos >= sqrt(1-eps^2) held at every step: {'yes' if total_viol == 0 else 'NO'} "
          f"({sum(len(c) for c in cases.values())} cases, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
