"""Past the paper's memory figures (issue 18, point 3): GPT-2-medium as shipped, STAC-R + the lean pieces.

``predict(model, batch, config={"ratio": 8, "lean": True})`` on GPT-2-medium as transformers ships it
(``GPT2Config`` medium sizes, random weights, nothing downloaded, dropout 0.1, SDPA attention) counts the Linear
inputs STAC-R compresses and what the library replaces by itself, exactly: the composite tanh-GELUs
(``lean_activations``) and the full-vocabulary loss (``lean_loss``: chunked linear cross-entropy). Reductions are
fractions of the shipped model's P (AdamW state).

1. Full depth (24 blocks), 4 x 1024 tokens, ratio 8, fp32 and bf16 autocast, planned under ``FakeTensorMode``
   (no memory): P, A_C+, SSP, the lean pieces' share and the predicted reduction.
2. The largest prefix that fits here (the same model cut to its first blocks, real weights, one real batch of
   4 x 1024 tokens): measured = (saved peak of the shipped prefix - saved peak of
   ``stac_r(lean_loss(lean_activations(prefix)), plan=report)``) / (report.fixed_bytes + shipped saved peak),
   against the fake run's prediction for that prefix; the saved peaks by ``SavedBytesMeter`` (step_saved_peak).

Usage::

    .venv/bin/python benches/ssp_lean.py                      # full depth + 1-block prefix (~15 min loaded)
    .venv/bin/python benches/ssp_lean.py --prefix-depth 2
    .venv/bin/python benches/ssp_lean.py --smoke              # tiny shapes: checks the script runs
"""

from __future__ import annotations

import argparse
import time

import torch
from ssp_meta import _batch, _measured_peak, _models, _predict_cfg  # benches/ is the script's directory
from torch._subclasses.fake_tensor import FakeTensorMode

from thrifty.compress import SSPReport, lean_activations, lean_loss, stac_r


def _line(tag: str, rep: SSPReport) -> str:
    p = rep.peak_bytes
    return (f"{tag}: P {p / 1e9:.2f} GB, saved {rep.saved_bytes / 1e9:.2f} GB, A_C+ {rep.surface_bytes / 1e9:.2f} GB "
            f"(SSP {100 * rep.ssp:.2f}%), lean pieces {100 * rep.lean_saving / p:.2f}% "
            f"({len(rep.lean)} exact pieces), STAC-R {100 * (rep.predicted_saving - rep.lean_saving) / p:.2f}% "
            f"({len(rep.accepted)}/{len(rep.layers)} layers) -> predicted reduction {100 * rep.predicted_reduction:.2f}%")  # fmt: skip


def full(smoke: bool, k: int) -> None:
    make = _models(smoke)["gpt2-medium"]
    seq = 64 if smoke else 1024
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = make(None)
        batch = _batch(k, seq, model.get_output_embeddings().weight.shape[0])
        for dtype in ("fp32", "bf16"):
            t0 = time.perf_counter()
            rep = _predict_cfg(model, batch, dtype, {"ratio": 8.0, "lean": True})
            print(_line(f"full gpt2-medium {len(model.transformer.h)} blocks, {k * seq} tokens, {dtype}, ratio 8 (fake run, "
                        f"{time.perf_counter() - t0:.0f} s)", rep), flush=True)  # fmt: skip


def prefix(smoke: bool, depth: int, k: int) -> None:
    make = _models(smoke)["gpt2-medium"]
    seq = 64 if smoke else 1024
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = make(depth)
        vocab = fake.get_output_embeddings().weight.shape[0]
        rep = _predict_cfg(fake, _batch(k, seq, vocab), "fp32", {"ratio": 8.0, "lean": True})
    del fake
    print(_line(f"prefix {depth} blocks, {k * seq} tokens, fp32, ratio 8 (fake run)", rep), flush=True)
    torch.manual_seed(0)
    model = make(depth)
    ids = torch.randint(0, vocab, (k, seq), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "labels": ids}
    t0 = time.perf_counter()
    base = _measured_peak(model, batch, "fp32")
    t_base = time.perf_counter() - t0
    assert base == rep.saved_bytes, (base, rep.saved_bytes)
    comp = stac_r(lean_loss(lean_activations(model, inplace=True), inplace=True), plan=rep)
    _measured_peak(comp, batch, "fp32")  # step 1: the bases from this batch (the fake run planned layouts only)
    got = _measured_peak(comp, batch, "fp32")
    measured = (base - got) / (rep.fixed_bytes + base)
    print(f"prefix {depth} blocks, {k * seq} tokens, fp32, ratio 8: shipped saved peak {base / 1e9:.3f} GB "
          f"(= predicted: {base == rep.saved_bytes}), with lean_activations + lean_loss + stac_r(plan) "
          f"{got / 1e9:.3f} GB; P {rep.peak_bytes / 1e9:.3f} GB; predicted reduction "
          f"{100 * rep.predicted_reduction:.2f}%, measured {100 * measured:.2f}% "
          f"(diff {100 * (measured - rep.predicted_reduction):+.2f} points); uncompressed step {t_base:.0f} s",
          flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--prefix-depth", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=4, help="sequences of 1024 tokens")
    ap.add_argument("--no-prefix", action="store_true")
    ap.add_argument("--no-full", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    if not args.no_full:
        full(args.smoke, args.tokens)
    if not args.no_prefix:
        prefix(args.smoke, args.prefix_depth, args.tokens)


if __name__ == "__main__":
    main()
