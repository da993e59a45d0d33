"""Tour part: STAC-R activation compression on a small byte-level GPT (thrifty.compress)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

TITLE = "Activation compression (thrifty.compress): STAC-R vs per-batch SVD vs random projection at equal bytes"


def run(output_dir: Path) -> None:
    import torch

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    sys.path.insert(0, str(here.parent / "benches"))
    from compress_gpt import Capture, Frontier, measure_saved
    from tiny_gpt import GPT, GPTConfig, get_batch, load_corpus, make_optimizer

    from thrifty.compress import compression_report, stac_r
    from thrifty.compress._linear import DEFAULT_COMPUTE_BUDGET

    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=2, n_embd=128, n_head=4, block_size=64)
    train, _ = load_corpus()
    model = GPT(cfg)
    opt = make_optimizer(model, 2e-3)
    gen = torch.Generator().manual_seed(0)
    ratios = [4.0, 8.0, 16.0, 32.0]

    # 1) Train the exact model; at every step compare the weight gradients each method recovers from its
    #    compressed copy of every Linear's input (the benchmark benches/compress_gpt.py, in miniature).
    cap = Capture(model)
    widths = {n: m.in_features for n, m in cap.linears}
    outs = {n: m.out_features for n, m in cap.linears}
    frontier = Frontier(widths, ratios, 0, outs, DEFAULT_COMPUTE_BUDGET)  # stac_r's default compute cap
    steps = 30
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = get_batch(train, 8, cfg.block_size, gen)
        loss = model(x, y)[1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for name in frontier.widths:
            frontier.update(step, name, cap.x[name], cap.g[name], late=step >= steps // 2)
    cap.remove()
    print(f"GPT {cfg.n_layer}x{cfg.n_embd} on pydoc_data, {steps} steps ({time.perf_counter() - t0:.0f} s), "
          f"final loss {float(loss.detach()):.3f}")
    print(frontier.table())
    print(frontier.eps_summary())
    frontier.plot(output_dir / "compress_frontier.png", f"tour: GPT {cfg.n_layer}x{cfg.n_embd}, {steps} steps")
    print(f"frontier plot: {output_dir / 'compress_frontier.png'}")

    # 2) Wrap the trained model: the Linears now save int8 coefficients in a tracked basis instead of X.
    comp = stac_r(model, ratio=8)
    x, y = get_batch(train, 8, cfg.block_size, gen)
    comp(x, y)[1].backward()  # the first step plans each layer from its batch
    # SavedBytesMeter (storage de-duplicated; parameters and the layers' bases excluded)
    _, dense, _, _ = measure_saved(model, x, y)
    stored, _, _, state = measure_saved(comp, x, y)
    print(f"Saved by the Linears (SavedBytesMeter): dense inputs {dense:,} B, stac_r factors {stored:,} B "
          f"-> {dense / stored:.1f}x smaller (bases, layer state: {state:,} B)")
    print(compression_report(comp))

    # 3) Know before training: the Saved-Surface Predictor on one dry-run batch, beside the measured memory.
    #    predict() walks the autograd graph by storage: SSP = A_C+/P bounds what Linear-input compression can
    #    take off the peak P; layers whose input another op keeps alive, or whose compressed copy and basis
    #    cost more than they free on this batch, are refused with the reason.
    from thrifty.compress import SavedBytesMeter, predict

    x, y = get_batch(train, 16, cfg.block_size, gen)
    report = predict(model, (x, y), optimizer=opt)
    print(report)

    def saved_peak(m: torch.nn.Module) -> int:  # parameters and the batch are not activations
        held = {t.untyped_storage().data_ptr() for t in [*m.parameters(), x, y]}
        with SavedBytesMeter(exclude=lambda t: t.untyped_storage().data_ptr() in held) as meter:
            loss = m(x, y)[1]
        loss.backward()
        m.zero_grad(set_to_none=True)
        return meter.peak_bytes

    base = saved_peak(model)
    wrapped = stac_r(model, plan=report)  # exactly the accepted layers, with the report's plans and bases
    comp = saved_peak(wrapped)
    measured = (base - comp) / (report.fixed_bytes + base)
    print(f"peak reduction: predicted {100 * report.predicted_reduction:.2f}%, measured {100 * measured:.2f}% "
          f"(fixed terms + SavedBytesMeter: saved activations {base:,} B -> {comp:,} B); "
          f"SSP upper bound {100 * report.ssp:.2f}%")
