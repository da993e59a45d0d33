"""Saved-Surface Predictor: predicted vs measured peak reduction of STAC-R (issue 9, acceptance 1 and 2).

Models (random initialisation from a configuration, nothing downloaded; depth shortened to fit the shared
2-core, 24 GiB machine: every run stays well under 4 GiB):

- GPT-2-medium-shaped: width 1024, 16 heads, context 1024 (24 blocks in GPT-2; here 2), vocabulary cut from
  50257 to 8192 by default on CPU (``--vocab 50257`` for the real one: the head's GEMMs then dominate the run
  time of this loaded 2-core machine);
- GPT-2-large-shaped: width 1280, 20 heads (36 blocks in GPT-2; here 2);
- Pythia-1.4B-shaped block stack (GPT-NeoX): width 2048, 16 heads, parallel attention + MLP
  ``x + attn(ln1(x)) + mlp(ln2(x))``, MLP 4x (24 blocks; here 2; no embedding/head, rotary omitted: it
  saves only attention-internal tensors that no Linear consumes);
- SwiGLU MLP blocks (acceptance 2), HF-style ``down(silu(gate(x)) * up(x))`` after an RMSNorm, residual
  around it: Llama-3.2-1B-shaped (2048 -> 8192) and Qwen-2.5-0.5B-shaped (896 -> 4864), 2 blocks each.

For each model and ratio: ``predict`` on one batch (AdamW state assumed), then the measured peak of the
uncompressed model and of ``stac_r(model, plan=report)``. CPU measure (issue: "the meter plus the analytic
peak"): P_measured = report.fixed_bytes (parameters + gradients + optimizer state + backward transient) +
the saved-activation peak measured by ``SavedBytesMeter`` (storage de-duplicated, parameters excluded; the
layers' bases are saved tensors, so they are counted). With ``--device cuda``: the measured peak is
``torch.cuda.max_memory_allocated`` over forward + backward + an AdamW step (after a warm-up step, so the
optimizer state exists), against the same predicted reduction.

Usage::

    .venv/bin/python benches/ssp_predict.py                 # all models (CPU: a few minutes unloaded)
    .venv/bin/python benches/ssp_predict.py --smoke         # tiny shapes: checks the script runs
    .venv/bin/python benches/ssp_predict.py --device cuda   # on a GPU
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from tiny_gpt import GPT, GPTConfig

from thrifty.compress import PredictConfig, SavedBytesMeter, predict, stac_r, unwrap


class NeoXBlock(nn.Module):
    """GPT-NeoX (Pythia) block: parallel attention and MLP from the same residual stream."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.query_key_value = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)
        self.dense_h_to_4h = nn.Linear(d, 4 * d)
        self.dense_4h_to_h = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.query_key_value(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn = self.dense(a.transpose(1, 2).reshape(b, t, c))
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.ln2(x))))
        return x + attn + mlp


class SwiGLUBlock(nn.Module):
    """Llama/Qwen MLP sub-block: ``h + down(silu(gate(norm(h))) * up(norm(h)))``."""

    def __init__(self, d: int, m: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=1e-6)
        self.gate_proj = nn.Linear(d, m, bias=False)
        self.up_proj = nn.Linear(d, m, bias=False)
        self.down_proj = nn.Linear(m, d, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Stack(nn.Module):
    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x)
        return x


def stack_loss(out: torch.Tensor) -> torch.Tensor:
    return out.float().square().mean()


def gpt_loss(out: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    assert out[1] is not None
    return out[1]


def measured_saved_peak(model: nn.Module, batch: tuple[torch.Tensor, ...], loss_fn: Callable[[object], torch.Tensor]) -> int:
    """Saved-activation peak of one forward + backward (SavedBytesMeter; parameters and the batch, which the
    caller keeps alive anyway and the report counts apart, excluded)."""
    held = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), *batch]}
    with SavedBytesMeter(exclude=lambda t: t.untyped_storage().data_ptr() in held) as meter:
        loss = loss_fn(model(*batch))
    loss.backward()
    model.zero_grad(set_to_none=True)
    del loss
    gc.collect()
    return meter.peak_bytes


def measured_cuda_peak(model: nn.Module, batch: tuple[torch.Tensor, ...], loss_fn: Callable[[object], torch.Tensor]) -> int:
    """max_memory_allocated over a training step (forward, backward, AdamW step), after a warm-up step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for i in range(2):
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i == 1:
            torch.cuda.reset_peak_memory_stats()
        loss = loss_fn(model(*batch))
        loss.backward()
        opt.step()
        del loss
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del opt
    return peak


RESULTS: list[tuple[str, float, float, float]] = []  # (what, SSP %, predicted %, measured %)


def run_case(label: str, make: Callable[[], nn.Module], batch: tuple[torch.Tensor, ...], loss_fn: Callable[[object], torch.Tensor],
             ratios: list[float], device: str, force: list[str] | None = None) -> list[str]:
    rows = []
    torch.manual_seed(0)
    model = make().to(device)
    base_meter = measured_saved_peak(model, batch, loss_fn)
    base_cuda = measured_cuda_peak(model, batch, loss_fn) if device == "cuda" else 0
    for ratio in ratios:
        t0 = time.perf_counter()
        report = predict(model, batch, loss_fn=loss_fn, optimizer="adamw",
                         config=PredictConfig(ratio=ratio, plan_all=tuple(force or ())))  # fmt: skip
        t_pred = time.perf_counter() - t0
        print(report, flush=True)
        plans: list[tuple[str, list[str] | None]] = [("accepted", None)]
        if force is not None:
            plans.append(("forced " + ",".join(sorted({f.rsplit(".", 1)[-1] for f in force})), force))
        for what, layers in plans:
            if layers is None and not report.accepted:
                rows.append(f"{label:<26} {ratio:>5g}  {what:<24} {0:>5} {100 * report.ssp:7.2f} {0:>9.2f} "
                            f"{'-':>9} {'-':>7}   (nothing accepted)")  # fmt: skip
                continue
            if layers is None:
                comp = stac_r(model, plan=report, inplace=True)  # in place: one copy of the weights in memory
                predicted = -report.predicted_saving
            else:
                comp = stac_r(model, ratio=ratio, layers=layers, inplace=True)
                predicted = report.predicted_change(layers)
                # the forced wrap plans at its first step: use the report's plans and bases for the same bytes
                for n in layers:
                    codec = report._codecs[n]
                    mod = comp.get_submodule(n)
                    mod.codec.config, mod.codec.u = codec.config, codec.u.clone()  # type: ignore[union-attr]
            comp_meter = measured_saved_peak(comp, batch, loss_fn)
            p_base = report.fixed_bytes + base_meter
            measured = comp_meter - base_meter  # change of the peak (fixed terms cancel)
            pred_pct = -100 * predicted / report.peak_bytes
            meas_pct = -100 * measured / p_base
            line = (f"{label:<26} {ratio:>5g}  {what:<24} {len(layers or report.accepted):>5} {100 * report.ssp:7.2f} "
                    f"{pred_pct:9.2f} {meas_pct:9.2f} {meas_pct - pred_pct:+7.2f}")  # fmt: skip
            if device == "cuda":
                comp_cuda = measured_cuda_peak(comp, batch, loss_fn)
                line += f" {100 * (base_cuda - comp_cuda) / base_cuda:9.2f}"
            line += f"   (predict {t_pred:.0f} s; P {report.peak_bytes / 2**20:.0f} MiB)"
            print(line, flush=True)
            rows.append(line)
            RESULTS.append((what, 100 * report.ssp, pred_pct, meas_pct))
            model = unwrap(comp, inplace=True)
            del comp
            gc.collect()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--models", default="gpt2-medium,gpt2-large,pythia-1.4b,llama-3.2-mlp,qwen-2.5-mlp")
    ap.add_argument("--ratios", default="8,16")
    ap.add_argument("--blocks", type=int, default=2, help="depth (blocks) of every model")
    ap.add_argument("--vocab", type=int, default=8192, help="GPT-2 vocabulary (50257 in GPT-2)")
    ap.add_argument("--rows", type=int, default=2048, help="tokens per batch (batch 2 x context)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = args.device
    ratios = [float(r) for r in args.ratios.split(",")]
    s = 16 if args.smoke else 1  # shrink every width by s for the smoke run
    t = max(16, args.rows // 2 // (4 if args.smoke else 1))
    gen = torch.Generator().manual_seed(0)
    out: list[str] = []
    head = (f"{'model':<26} {'ratio':>5}  {'layers wrapped':<24} {'n':>5} {'SSP %':>7} {'pred %':>9} {'meas %':>9} "
            f"{'diff pp':>7}" + (f" {'cuda %':>9}" if dev == "cuda" else ""))  # fmt: skip
    print(f"device {dev}, {torch.get_num_threads()} threads, {2 * t} tokens per batch, GPT-2 vocabulary {args.vocab}; "
          "reductions are of the peak P")
    for name in args.models.split(","):
        if name.startswith("gpt2"):
            d, h = (1024, 16) if name == "gpt2-medium" else (1280, 20)
            cfg = GPTConfig(n_layer=args.blocks, n_embd=d // s, n_head=h // (4 if args.smoke else 1), block_size=t,
                            vocab_size=args.vocab // s)  # fmt: skip
            idx = torch.randint(0, cfg.vocab_size, (2, t + 1), generator=gen)
            batch = (idx[:, :-1].to(dev), idx[:, 1:].to(dev))
            out += run_case(f"{name}-shaped ({args.blocks} blk)", lambda cfg=cfg: GPT(cfg), batch, gpt_loss, ratios, dev)
        elif name == "pythia-1.4b":
            d = 2048 // s
            x = torch.randn(2, t, d, generator=gen).to(dev)
            heads = max(1, 16 // (4 if args.smoke else 1))
            out += run_case(f"pythia-1.4b-shaped ({args.blocks} blk)",
                            lambda d=d: Stack([NeoXBlock(d, heads) for _ in range(args.blocks)]),
                            (x,), stack_loss, ratios, dev)  # fmt: skip
        else:
            d, m = (2048, 8192) if name.startswith("llama") else (896, 4864)
            d, m = d // s, m // s
            x = torch.randn(2, t, d, generator=gen).to(dev)
            force = [f"blocks.{i}.{p}" for i in range(args.blocks) for p in ("gate_proj", "up_proj")]
            out += run_case(f"{name}-shaped SwiGLU ({args.blocks})", lambda d=d, m=m: Stack([SwiGLUBlock(d, m) for _ in range(args.blocks)]),
                            (x,), stack_loss, ratios[:1], dev, force=force)  # fmt: skip
    print("\nPREDICTED vs MEASURED peak reduction (positive = lower peak; measured on CPU = fixed terms + SavedBytesMeter peak)")
    print(head)
    for line in out:
        print(line)
    acc = [(w, ssp, p, m) for w, ssp, p, m in RESULTS if w == "accepted"]
    if acc:
        worst = max(abs(m - p) for _, _, p, m in acc)
        above = sum(m > ssp + 1e-9 for _, ssp, _, m in acc)
        print(f"accepted plans: largest |measured - predicted| = {worst:.2f} pp over {len(acc)} rows (target <= 2 pp); "
              f"measured above SSP in {above} rows (target 0)")
    forced = [(w, p, m) for w, _, p, m in RESULTS if w != "accepted"]
    for w, p, m in forced:
        print(f"{w}: predicted {p:+.2f}%, measured {m:+.2f}% ({'memory raised' if m < 0 else 'memory lowered'}, "
              f"{'as predicted' if (m < 0) == (p < 0) and abs(m - p) <= 2 else 'NOT as predicted'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
