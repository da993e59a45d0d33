"""The paper's scale planned on any machine (issue 18, point 2): ``predict`` on full-depth models without memory.

Models as transformers ships them (configurations, random weights, nothing downloaded; GPT-2 with its default
dropout 0.1 and SDPA attention): GPT-2-medium (24 x 1024), GPT-2-large (36 x 1280), Pythia-1.4B (GPT-NeoX,
24 x 2048). Each is built under ``torch._subclasses.fake_tensor.FakeTensorMode`` (tensors with shapes, dtypes
and the cpu device but no memory, so autocast and the device's attention kernels apply as on a real run; the
plain meta device works too but runs attention's math path and no autocast), then ``predict`` gives P and its
terms, A_C+, SSP and the predicted reduction at {1, 2, 4, 8} x 1024 tokens per step, fp32 and bf16 autocast,
ratio 8 and 16 (AdamW state). Layouts come from the byte budget (no activations to plan on).

Then the check on the largest prefix that fits here (the shared machine: under ~6 GB): the same model cut to
its first blocks, real weights on the CPU, one batch: the fake-run prediction against the measured
``SavedBytesMeter`` peak of the uncompressed model and of ``stac_r(model, plan=report)`` (P_measured =
report.fixed_bytes + the measured saved peak), and the prediction planned on the real batch.

Usage::

    .venv/bin/python benches/ssp_meta.py                 # the table and the prefix check (~10 min loaded)
    .venv/bin/python benches/ssp_meta.py --no-prefix     # the table only (~1 min)
    .venv/bin/python benches/ssp_meta.py --smoke         # tiny shapes: checks the script runs
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from thrifty.compress import SSPReport, lean_activations, predict, stac_r
from thrifty.compress._meter import step_saved_peak

logging.getLogger("transformers").setLevel(logging.ERROR)


def _models(smoke: bool) -> dict[str, Callable[[int | None], nn.Module]]:
    import transformers

    def gpt2(layers: int, width: int, heads: int) -> Callable[[int | None], nn.Module]:
        def make(depth: int | None) -> nn.Module:
            cfg = transformers.GPT2Config(n_layer=depth or layers, n_embd=width, n_head=heads, n_positions=1024,
                                          vocab_size=50257 if not smoke else 512)  # fmt: skip
            return transformers.GPT2LMHeadModel(cfg)

        return make

    def pythia(depth: int | None) -> nn.Module:
        cfg = transformers.GPTNeoXConfig(
            hidden_size=2048 if not smoke else 128, num_hidden_layers=depth or 24, num_attention_heads=16,
            intermediate_size=8192 if not smoke else 512, vocab_size=50304 if not smoke else 512, rotary_pct=0.25,
            max_position_embeddings=2048, use_parallel_residual=True,
        )  # fmt: skip
        return transformers.GPTNeoXForCausalLM(cfg)

    if smoke:
        return {"gpt2-medium": gpt2(2, 64, 4), "pythia-1.4b": pythia}
    return {"gpt2-medium": gpt2(24, 1024, 16), "gpt2-large": gpt2(36, 1280, 20), "pythia-1.4b": pythia}


def _batch(k: int, seq: int, vocab: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, vocab, (k, seq), generator=None)
    return {"input_ids": ids, "labels": ids}


def _predict(model: nn.Module, batch: dict[str, torch.Tensor], dtype: str, ratio: float) -> SSPReport:
    return _predict_cfg(model, batch, dtype, {"ratio": ratio})


def _predict_cfg(model: nn.Module, batch: dict[str, torch.Tensor], dtype: str, config: dict[str, Any]) -> SSPReport:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        return predict(model, batch, optimizer="adamw", config=config)


def table(smoke: bool) -> list[dict[str, Any]]:
    rows = []
    seq = 64 if smoke else 1024
    tokens = (1, 2) if smoke else (1, 2, 4, 8)
    print(f"{'model':12} {'tokens':>7} {'dtype':>5} {'ratio':>5} {'P GB':>7} {'saved GB':>8} {'A_C+ GB':>7} "
          f"{'SSP %':>6} {'pred %':>6} {'acc':>7} {'s':>5}")  # fmt: skip
    for name, make in _models(smoke).items():
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = make(None)
            vocab = model.get_output_embeddings().weight.shape[0]
            for k in tokens:
                batch = _batch(k, seq, vocab)
                for dtype in ("fp32", "bf16"):
                    for ratio in (8.0, 16.0):
                        t0 = time.perf_counter()
                        rep = _predict(model, batch, dtype, ratio)
                        dt = time.perf_counter() - t0
                        row = {"model": name, "tokens": k * seq, "dtype": dtype, "ratio": ratio,
                               "P": rep.peak_bytes, "saved": rep.saved_bytes, "surface": rep.surface_bytes,
                               "ssp": rep.ssp, "pred": rep.predicted_reduction}  # fmt: skip
                        rows.append(row)
                        print(f"{name:12} {k * seq:7d} {dtype:>5} {ratio:5g} {rep.peak_bytes / 1e9:7.2f} "
                              f"{rep.saved_bytes / 1e9:8.2f} {rep.surface_bytes / 1e9:7.2f} {100 * rep.ssp:6.2f} "
                              f"{100 * rep.predicted_reduction:6.2f} {len(rep.accepted):3d}/{len(rep.layers):<3d} {dt:5.1f}",
                              flush=True)  # fmt: skip
            del model
        gc.collect()
    return rows


def _measured_peak(model: nn.Module, batch: dict[str, torch.Tensor], dtype: str) -> int:
    torch.manual_seed(0)  # the same dropout masks in every run
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        return step_saved_peak(model, batch, lambda out: out.loss)


def prefix_check(
    name: str, depth: int, k: int, dtype: str, ratios: tuple[float, ...], smoke: bool, lean: bool = False
) -> None:  # fmt: skip
    """Predicted (fake run) vs measured on a real prefix; ``lean``: the model with lean_activations, its
    reductions reported against the peak of the model as shipped."""
    make0 = _models(smoke)[name]

    def make(d: int | None) -> nn.Module:
        model = make0(d)
        return lean_activations(model, inplace=True) if lean else model

    seq = 64 if smoke else 1024
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = make(depth)
        vocab = fake.get_output_embeddings().weight.shape[0]
        fake_batch = _batch(k, seq, vocab)
        fake_reps = {r: _predict(fake, fake_batch, dtype, r) for r in ratios}
        shipped = _predict(make0(depth), fake_batch, dtype, ratios[0]) if lean else fake_reps[ratios[0]]
    del fake
    torch.manual_seed(0)
    model = make(depth)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (k, seq), generator=g)
    batch = {"input_ids": ids, "labels": ids}
    t0 = time.perf_counter()
    base = _measured_peak(model, batch, dtype)
    t_base = time.perf_counter() - t0
    p_shipped = shipped.peak_bytes  # the model as shipped (for lean: its measured saved peak checked too)
    if lean:
        shipped_base = _measured_peak(make0(depth), batch, dtype)
        assert shipped_base == shipped.saved_bytes, (shipped_base, shipped.saved_bytes)
    for ratio in ratios:
        rep = fake_reps[ratio]
        assert rep.saved_bytes == base, (rep.saved_bytes, base)
        comp = stac_r(model, plan=rep)
        _measured_peak(comp, batch, dtype)  # step 1 plans nothing (the report's layouts); bases from this batch
        got = _measured_peak(comp, batch, dtype)
        if lean:  # against the shipped model's measured peak: the lean activations' saving counts too
            measured = (shipped_base - got) / (shipped.fixed_bytes + shipped_base)
            predicted = 1.0 - rep.predicted_peak / p_shipped
        else:
            measured = (base - got) / (rep.fixed_bytes + base)
            predicted = rep.predicted_reduction
        real_rep = _predict(model, batch, dtype, ratio)
        real_pred = 1.0 - real_rep.predicted_peak / p_shipped if lean else real_rep.predicted_reduction
        tag = " + lean_activations" if lean else ""
        print(f"prefix {name}{tag} {depth} blocks, {k * seq} tokens, {dtype}, ratio {ratio:g}: P {rep.peak_bytes / 1e9:.3f} GB "
              f"(fake = real run: {rep.peak_bytes == real_rep.peak_bytes}), SSP {100 * rep.ssp:.2f}%, predicted "
              f"(fake run, budget layouts) {100 * predicted:.2f}%, measured {100 * measured:.2f}% "
              f"(diff {100 * (measured - predicted):+.2f} points); predicted on the real batch "
              f"(planned layouts) {100 * real_pred:.2f}%, mean bridge cos "
              f"{_mean_cos(real_rep):.4f}; uncompressed step {t_base:.0f} s", flush=True)  # fmt: skip
        del comp
        gc.collect()


def lean_full(smoke: bool, k: int = 4) -> None:
    """GPT-2-medium as shipped, full depth, k x 1024 tokens, fp32, ratio 8: stac_r alone and with lean_activations
    (reductions against the shipped model's P)."""
    make = _models(smoke)["gpt2-medium"]
    seq = 64 if smoke else 1024
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = make(None)
        batch = _batch(k, seq, model.get_output_embeddings().weight.shape[0])
        shipped = _predict(model, batch, "fp32", 8.0)
        lean = _predict(lean_activations(model, inplace=True), batch, "fp32", 8.0)  # no deepcopy of fake tensors
    p = shipped.peak_bytes
    print(f"full gpt2-medium, {k * seq} tokens, fp32, ratio 8: P {p / 1e9:.2f} GB; stac_r alone: SSP "
          f"{100 * shipped.ssp:.2f}%, predicted {100 * shipped.predicted_reduction:.2f}%; lean_activations + stac_r: "
          f"P {lean.peak_bytes / 1e9:.2f} GB, predicted peak {lean.predicted_peak / 1e9:.2f} GB = "
          f"{100 * (1 - lean.predicted_peak / p):.2f}% below the shipped P (lean alone {100 * (1 - lean.peak_bytes / p):.2f}%)",
          flush=True)  # fmt: skip


def _mean_cos(rep: SSPReport) -> float:
    cos = [r.cos for r in rep.layers if r.cos == r.cos]
    return sum(cos) / len(cos) if cos else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-prefix", action="store_true")
    ap.add_argument("--prefix-depth", type=int, default=2)
    ap.add_argument("--prefix-tokens", type=int, default=4, help="sequences of 1024 tokens in the prefix batch")
    ap.add_argument("--no-table", action="store_true")
    ap.add_argument("--prefix-ratios", type=float, nargs="+", default=[8.0, 16.0])
    ap.add_argument("--lean", action="store_true", help="point 3: GPT-2-medium with lean_activations (full + prefix)")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if not args.no_table:
        table(args.smoke)
    k = 2 if args.smoke else args.prefix_tokens
    if args.lean:
        lean_full(args.smoke, k)
    if not args.no_prefix:
        prefix_check("gpt2-medium", args.prefix_depth, k, "fp32", tuple(args.prefix_ratios), args.smoke, lean=args.lean)


if __name__ == "__main__":
    main()
