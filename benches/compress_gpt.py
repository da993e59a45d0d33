"""STAC-R on a byte-level GPT (4 layers, width 256, pydoc_data): fidelity frontier, training, speed and bytes.

Three parts, all on CPU with fixed seeds (issue 8, acceptance 3-5):

(a) frontier  Train the exact model; at every step capture each Linear's input X and output gradient G and,
              for every budget (stored bytes per row = 2·d / ratio, the bf16 convention), compute the weight
              gradient from compressed X with
              - STAC-R: the library's LayerCodec (stateful across steps: plans on the first batch, refreshes
                its basis from each batch) and the shipped kernels (compress + grad_weight), with the same
                compute cap as stac_r (rank <= max(32, compute_budget * out_features), --compute-budget);
                the two controls get STAC-R's actual stored bytes per row (a capped layer stores less);
              - SVD: the top-r right singular vectors of this step's X (the optimal basis for the batch),
                bf16 coefficients, the bf16 basis counted in the bytes (2r + 2rd/n per row);
              - random: an untracked random orthonormal subspace redrawn each step (regenerated from a seed,
                so no basis bytes), bf16 coefficients (2r per row).
              Prints the mean cosine with GᵀX per method × budget, bytes per token, the gradient-error
              ε = ‖ĝ − g‖/‖g‖ and the check cos ≥ √(1 − ε²); saves the frontier plot.
(b) train     The same seed trained exact (the run of part a) and with ``stac_r(model, ratio=R)``; validation
              loss of both.
(c) speed     Step time compressed / exact (medians of interleaved steps in the same process) and the saved
              bytes of the wrapped Linears measured with SavedBytesMeter (storage de-duplicated) against the
              configured ratio.

Usage::

    nice -n 10 .venv/bin/python benches/compress_gpt.py --parts frontier --batch 8 --threads 1   # (a), 200 steps
    nice -n 10 .venv/bin/python benches/compress_gpt.py --parts train --batch 8 --threads 1      # (b) + (c)
    .venv/bin/python benches/compress_gpt.py --quick               # both parts, 30 steps
    .venv/bin/python benches/compress_gpt.py --smoke               # 1-layer model, 3 steps: the script runs

The two parts can run as two processes at once. SIGINT/SIGTERM end a loop early and the figures of the
completed steps are still printed. On a loaded 2-core machine use ``--threads 1``: LAPACK (eigh, QR) with two
OpenMP threads slowed down 10-20x there while GEMMs did not gain from the second thread.

Bytes convention: the frontier's ratio is against bf16 dense activations (2·d bytes per row) whatever the
training dtype (the issue's table). ``stac_r(ratio=R)`` refers to the activation's own dtype (4·d for this
fp32 run); part (b)/(c) print both conventions.
"""

from __future__ import annotations

import argparse
import math
import signal
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from tiny_gpt import GPT, GPTConfig, evaluate, get_batch, load_corpus, make_optimizer

from thrifty.compress import (
    SavedBytesMeter,
    _kernels,
    stac_r,
    unwrap,
)
from thrifty.compress._codec import LayerCodec
from thrifty.compress._linear import DEFAULT_COMPUTE_BUDGET, compute_cap

METHODS = ("STAC-R", "SVD", "random")


# ------------------------------------------------------------------------------------------------------------
# capture


class Capture:
    """Forward hooks that keep each Linear's 2-D input and, through a tensor hook, its output gradient."""

    def __init__(self, model: nn.Module) -> None:
        self.linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
        self.x: dict[str, torch.Tensor] = {}
        self.g: dict[str, torch.Tensor] = {}
        self.handles = [m.register_forward_hook(self._hook(n)) for n, m in self.linears]

    def _hook(self, name: str) -> Callable[..., None]:
        def fwd(module: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            x = args[0].detach()
            self.x[name] = x.reshape(-1, x.shape[-1])

            def bwd(g: torch.Tensor) -> None:
                self.g[name] = g.detach().reshape(-1, g.shape[-1])

            out.register_hook(bwd)

        return fwd

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


class Frontier:
    """Per-step weight-gradient cosines of the three methods at every budget."""

    def __init__(
        self, widths: dict[str, int], ratios: list[float], seed: int, outs: dict[str, int], compute_budget: float
    ) -> None:
        self.widths = widths
        self.ratios = ratios
        self.seed = seed
        # the same compute cap as stac_r/CompressedLinear: planned rank <= max(32, compute_budget * out_features)
        caps = {name: compute_cap(compute_budget, outs[name]) for name in widths}
        self.codecs = {
            (ratio, name): LayerCodec(d, ratio=ratio, seed=seed, layer_index=i, reference_bytes_per_row=2.0 * d,
                                      overrides=caps[name])
            for ratio in ratios
            for i, (name, d) in enumerate(widths.items())
        }
        self.cos: dict[tuple[str, float], list[float]] = defaultdict(list)
        self.cos_by: dict[tuple[str, float, str], list[float]] = defaultdict(list)  # by layer kind
        self.late: dict[tuple[str, float], list[float]] = defaultdict(list)  # second half of the run
        self.bytes: dict[tuple[str, float, str], float] = {}
        self.eps: dict[tuple[str, float], list[float]] = defaultdict(list)
        self.bound_cases = 0
        self.bound_violations = 0
        self.max_bound_gap = -math.inf

    def _record(self, method: str, ratio: float, name: str, ghat: torch.Tensor, gw: torch.Tensor, late: bool) -> None:
        gn = float(gw.norm())
        hn = float(ghat.norm())
        c = float((ghat * gw).sum()) / (gn * hn) if gn > 0 and hn > 0 else 0.0
        eps = float((ghat - gw).norm()) / gn if gn > 0 else 0.0
        self.cos[(method, ratio)].append(c)
        self.cos_by[(method, ratio, name.rsplit(".", 1)[-1])].append(c)
        if late:
            self.late[(method, ratio)].append(c)
        self.eps[(method, ratio)].append(eps)
        if eps < 1.0:
            self.bound_cases += 1
            gap = math.sqrt(1.0 - eps * eps) - c
            self.max_bound_gap = max(self.max_bound_gap, gap)
            if gap > 1e-5:
                self.bound_violations += 1

    @torch.no_grad()
    def update(self, step: int, name: str, x: torch.Tensor, g: torch.Tensor, late: bool) -> None:
        x = x.to(torch.float32).contiguous()
        g = g.to(torch.float32).contiguous()
        n, d = x.shape
        gw = g.t() @ x
        _, vecs = torch.linalg.eigh(x.t() @ x)  # float32 is ample for the top subspace
        v = vecs.flip(1).to(torch.float32)
        layer = list(self.widths).index(name)
        for ratio in self.ratios:
            # STAC-R through the library's codec and kernels
            codec = self.codecs[(ratio, name)]
            u = codec.basis_for(x)
            packed = codec.encode(x, u)
            cfg = codec.config
            assert cfg is not None
            ghat = _kernels.grad_weight(g, u, *packed, d=d, block=cfg.block, bits=cfg.bits)
            self._record("STAC-R", ratio, name, ghat, gw, late)
            self.bytes[("STAC-R", ratio, name)] = float(cfg.bytes_per_row(d))
            # the controls store as many bytes per row as STAC-R actually does (at most the budget 2·d/ratio:
            # a compute-capped layer stores less)
            budget = min(2.0 * d / ratio, float(cfg.bytes_per_row(d)))
            # SVD of this batch: bf16 coefficients and bf16 basis, the basis amortised over the rows
            r = max(1, int(budget // (2.0 + 2.0 * d / n)))
            ub = v[:, :r]
            cb = (x @ ub).to(torch.bfloat16).to(torch.float32)
            self._record("SVD", ratio, name, (g.t() @ cb) @ ub.to(torch.bfloat16).to(torch.float32).t(), gw, late)
            self.bytes[("SVD", ratio, name)] = 2.0 * r + 2.0 * r * d / n
            # untracked random subspace, regenerated from a seed each step
            r = max(1, int(budget // 2))
            gen = torch.Generator().manual_seed(((self.seed * 1_000_003 + step) * 131 + layer) * 64 + int(ratio))
            p = torch.linalg.qr(torch.randn(d, r, generator=gen)).Q
            cp = (x @ p).to(torch.bfloat16).to(torch.float32)
            self._record("random", ratio, name, (g.t() @ cp) @ p.t(), gw, late)
            self.bytes[("random", ratio, name)] = 2.0 * r

    def bytes_per_token(self, method: str, ratio: float) -> float:
        return sum(self.bytes[(method, ratio, name)] for name in self.widths)

    def table(self) -> str:
        dense = sum(2 * d for d in self.widths.values())
        lines = [
            (
                f"Mean weight-gradient cosine over {len(self.cos[('SVD', self.ratios[0])]) // len(self.widths)} "
                f"steps x {len(self.widths)} Linears (dense bf16 = {dense:,} B/token for all Linears)"
            ),
            f"{'ratio':>6} | " + " | ".join(f"{m:>8} cos  B/token" for m in METHODS)
            + " | STAC-R - SVD | STAC-R late half",
        ]
        for ratio in self.ratios:
            row = f"{ratio:>5g}x | "
            row += " | ".join(
                f"{statistics.fmean(self.cos[(m, ratio)]):12.4f} {self.bytes_per_token(m, ratio):8.0f}" for m in METHODS
            )
            diff = statistics.fmean(self.cos[("STAC-R", ratio)]) - statistics.fmean(self.cos[("SVD", ratio)])
            late = self.late.get(("STAC-R", ratio))
            row += f" | {diff:+12.4f} | {statistics.fmean(late) if late else float('nan'):.4f}"
            lines.append(row)
        return "\n".join(lines)

    def by_kind(self, ratio: float) -> str:
        kinds = sorted({k for (_, r, k) in self.cos_by if r == ratio})
        out = [f"By layer kind at {ratio:g}x: " + ", ".join(
            f"{k}: " + "/".join(f"{statistics.fmean(self.cos_by[(m, ratio, k)]):.4f}" for m in METHODS) for k in kinds
        ) + "   (STAC-R/SVD/random)"]
        return "\n".join(out)

    def plans(self, ratio: float) -> str:
        parts = []
        for name in self.widths:
            cfg = self.codecs[(ratio, name)].config
            if cfg is not None:
                res = f"+k{cfg.k}/{cfg.block}@{cfg.bits}b" if cfg.k else ""
                parts.append(f"{name}: r={cfg.rank} {cfg.coef}{res}")
        return f"STAC-R plans at {ratio:g}x: " + "; ".join(parts)

    def eps_summary(self) -> str:
        lines = [
            (
                f"Gradient bridge: cos >= sqrt(1 - eps^2) checked in {self.bound_cases:,} cases (eps < 1), "
                f"violations: {self.bound_violations} (largest sqrt(1-eps^2) - cos = {self.max_bound_gap:+.2e})"
            ),
            "mean eps (STAC-R / SVD / random): "
            + ", ".join(
                f"{r:g}x " + "/".join(f"{statistics.fmean(self.eps[(m, r)]):.3f}" for m in METHODS) for r in self.ratios
            ),
        ]
        return "\n".join(lines)

    def plot(self, path: Path, title: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        dense = sum(2 * d for d in self.widths.values())
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for m, style in zip(METHODS, ("o-", "s--", "^:")):
            xs = [self.bytes_per_token(m, r) for r in self.ratios]
            ys = [statistics.fmean(self.cos[(m, r)]) for r in self.ratios]
            ax.plot(xs, ys, style, label=m)
            ax2.plot(xs, [1.0 - y for y in ys], style, label=m)
        for a in (ax, ax2):
            a.set_xscale("log")
            a.set_xlabel(f"stored bytes per token, all Linears (dense bf16 = {dense:,})")
            a.grid(alpha=0.3, which="both")
        ax.set_ylabel("mean cosine(compressed, exact weight gradient)")
        ax.axhline(0.98, color="grey", lw=0.8, ls="--")
        ax.set_title(title, fontsize=9)
        ax.legend()
        ax2.set_yscale("log")
        ax2.set_ylabel("1 - mean cosine (log)")
        ax2.axhline(0.02, color="grey", lw=0.8, ls="--")
        ax2.set_title("the same, 1 - cosine on a log scale", fontsize=9)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)


# ------------------------------------------------------------------------------------------------------------
# training helpers


def new_model(seed: int, cfg: GPTConfig) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = model(x, y)[1]
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def run_frontier(args: argparse.Namespace, train: torch.Tensor, val: torch.Tensor, cfg: GPTConfig) -> tuple[GPT, float, list[float]]:
    model = new_model(args.seed, cfg)
    opt = make_optimizer(model, args.lr)
    cap = Capture(model)
    widths = {n: m.in_features for n, m in cap.linears}
    outs = {n: m.out_features for n, m in cap.linears}
    fr = Frontier(widths, args.ratios, args.seed, outs, args.compute_budget) if args.frontier else None
    gen = torch.Generator().manual_seed(args.seed)
    times = []
    t_start = time.perf_counter()
    for step in range(args.steps):
        try:
            x, y = get_batch(train, args.batch, cfg.block_size, gen)
            t0 = time.perf_counter()
            loss = train_step(model, opt, x, y)
            times.append(time.perf_counter() - t0)
            if fr is not None:
                for name in widths:
                    fr.update(step, name, cap.x[name], cap.g[name], late=step >= args.steps // 2)
        except KeyboardInterrupt:
            print(f"interrupted during step {step}: reporting the steps completed so far", flush=True)
            break
        cap.x.clear()
        cap.g.clear()
        if step % args.log_every == 0 or step == args.steps - 1:
            msg = f"[exact] step {step:4d} loss {loss:.3f} ({time.perf_counter() - t_start:.0f} s)"
            if fr is not None:
                msg += "  STAC-R/SVD cos at 8x so far: " + "/".join(
                    f"{statistics.fmean(fr.cos[(m, 8.0)]):.4f}" for m in ("STAC-R", "SVD") if (m, 8.0) in fr.cos
                )
            print(msg, flush=True)
    cap.remove()
    vloss = evaluate(model, val, args.batch, cfg.block_size, args.val_batches)
    if fr is not None:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        raw = {"cos": dict(fr.cos), "bytes": fr.bytes, "eps": dict(fr.eps), "late": dict(fr.late), "widths": fr.widths}
        torch.save(raw, Path(args.out) / "compress_frontier_raw.pt")
        print("\n(a) FIDELITY FRONTIER")
        print(fr.table())
        for r in args.ratios:
            if r == 8.0:
                print(fr.by_kind(r))
                print(fr.plans(r))
        print(fr.eps_summary())
        path = Path(args.out) / "compress_frontier.png"
        fr.plot(path, f"tiny GPT (4x256, pydoc_data), {args.steps} steps, 17 Linears")
        print(f"frontier plot: {path}")
    return model, vloss, times


def codecs_of(model: nn.Module) -> list[LayerCodec]:
    return [m.codec for m in model.modules() if isinstance(getattr(m, "codec", None), LayerCodec)]


def measure_saved(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[int, int, int, int]:
    """One forward + backward under SavedBytesMeter (parameters and bases excluded, storages de-duplicated).

    Returns (bytes saved inside the Linear / CompressedLinear forwards, the bytes of the Linears' input
    storages (what an exact Linear keeps alive, even when another op saved the same storage first), all saved
    bytes, basis state bytes).
    """
    names = [(n, m) for n, m in model.named_modules() if n and (isinstance(m, nn.Linear) or hasattr(m, "codec"))]
    bases = codecs_of(model)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def excluded(t: torch.Tensor) -> bool:  # parameters and the layers' bases (layer state) are not activations
        ptr = t.untyped_storage().data_ptr()
        return ptr in params or any(c.u is not None and c.u.untyped_storage().data_ptr() == ptr for c in bases)

    inputs: dict[int, int] = {}

    def pre(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        st = args[0].untyped_storage()
        inputs[st.data_ptr()] = st.nbytes()

    handles = [m.register_forward_pre_hook(pre) for _, m in names]
    with SavedBytesMeter(exclude=excluded, modules=names) as meter:
        loss = model(x, y)[1]
    for h in handles:
        h.remove()
    inside = sum(meter.by_module.values())
    total = meter.saved_bytes
    loss.backward()
    model.zero_grad(set_to_none=True)
    return inside, sum(inputs.values()), total, sum(c.state_bytes for c in bases)


def run_training(args: argparse.Namespace, train: torch.Tensor, val: torch.Tensor, cfg: GPTConfig) -> None:
    """(b) + (c): exact and stac_r models from the same seed, trained on the same batches, steps interleaved
    (alternating which goes first) so that their step times are measured in the same process and moment."""
    exact = new_model(args.seed, cfg)
    comp = stac_r(new_model(args.seed, cfg), ratio=args.train_ratio, inplace=True, seed=args.seed,
                  compute_budget=args.compute_budget)
    opt_e, opt_c = make_optimizer(exact, args.lr), make_optimizer(comp, args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    te: list[float] = []
    tc: list[float] = []
    t_start = time.perf_counter()
    steps_done = 0
    for step in range(args.steps):
        x, y = get_batch(train, args.batch, cfg.block_size, gen)
        order = ((exact, opt_e, te), (comp, opt_c, tc))
        losses = []
        try:
            for model, opt, acc in order if step % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                losses.append(train_step(model, opt, x, y))
                acc.append(time.perf_counter() - t0)
        except KeyboardInterrupt:
            print(f"interrupted during step {step}: reporting the {steps_done} steps completed", flush=True)
            te, tc = te[:steps_done], tc[:steps_done]
            break
        steps_done = step + 1
        if step % args.log_every == 0 or step == args.steps - 1:
            le, lc = losses if step % 2 == 0 else losses[::-1]
            print(f"[train] step {step:4d} loss exact {le:.3f} stac_r {lc:.3f} "
                  f"(step {te[-1]:.2f} s / {tc[-1]:.2f} s; {time.perf_counter() - t_start:.0f} s)", flush=True)
    v_exact = evaluate(exact, val, args.batch, cfg.block_size, args.val_batches)
    v_comp = evaluate(unwrap(comp), val, args.batch, cfg.block_size, args.val_batches)
    rel = (v_comp - v_exact) / v_exact
    print(f"\n(b) VALIDATION LOSS after {steps_done} steps (seed {args.seed}, {args.val_batches} fixed batches): "
          f"exact {v_exact:.4f}, stac_r(ratio={args.train_ratio:g}) {v_comp:.4f} -> {100 * rel:+.2f}% "
          "(target within 1.5%)")
    plans: dict[str, int] = {}
    for m in comp.modules():
        c = getattr(m, "codec", None)
        if isinstance(c, LayerCodec) and c.config is not None:
            key = f"{c.config.coef}{'+res' if c.config.k else ''}"
            plans[key] = plans.get(key, 0) + 1
    print(f"    layer plans: {plans}")
    gen = torch.Generator().manual_seed(args.seed + 1)
    x, y = get_batch(train, args.batch, cfg.block_size, gen)
    in_e, dense_in, tot_e, _ = measure_saved(exact, x, y)
    in_c, _, tot_c, state = measure_saved(comp, x, y)
    print("\n(c) SAVED BYTES (SavedBytesMeter, storages de-duplicated, parameters and bases excluded)")
    print(f"  inputs of the wrapped Linears (dense, fp32): {dense_in:,} B; saved inside the exact Linears: {in_e:,} B "
          f"(the rest are storages another op saved first, e.g. attn.proj's input is SDPA's saved output)")
    print(f"  saved inside the compressed Linears: {in_c:,} B -> {dense_in / in_c:.2f}x smaller than their dense inputs "
          f"(configured ratio {args.train_ratio:g} against the fp32 activations = {args.train_ratio / 2:g}x vs bf16)")
    print(f"  bases (layer state like the weights, independent of the batch): {state:,} B; "
          f"ratio with them counted {dense_in / (in_c + state):.2f}x")
    print(f"  all saved activations of the model: exact {tot_e:,} B, compressed {tot_c:,} B "
          f"(-{100 * (1 - tot_c / tot_e):.1f}%)")
    skip = min(5, len(te) // 4)  # the first steps include planning
    me, mc = statistics.median(te[skip:]), statistics.median(tc[skip:])
    ratios = sorted(c / e for e, c in zip(te[skip:], tc[skip:]))
    print(f"\n(c) CPU STEP TIME ({torch.get_num_threads()} threads, B={args.batch}, L={cfg.block_size}, "
          f"interleaved steps {skip}..{len(te) - 1}): median exact {me:.3f} s, stac_r {mc:.3f} s -> {mc / me:.2f}x; "
          f"median of per-step ratios {statistics.median(ratios):.2f}x (target <= 1.5x, goal 1.2x)")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # SIGTERM / SIGINT end the training loops early; the figures of the steps done so far are still reported
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="30 steps")
    ap.add_argument("--ratios", type=str, default="4,6,8,16,32")
    ap.add_argument("--train-ratio", type=float, default=8.0)
    ap.add_argument("--compute-budget", type=float, default=DEFAULT_COMPUTE_BUDGET,
                    help="stac_r's compute cap: rank <= this * out_features (inf = off); default the library's")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--smoke", action="store_true", help="a 1-layer width-64 model, 3 steps: checks the script runs")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--val-batches", type=int, default=16)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--parts", type=str, default="frontier,train", help="frontier and/or train (b + c)")
    ap.add_argument("--out", type=str, default=str(ROOT / "benches" / "output"))
    args = ap.parse_args()
    if args.quick:
        args.steps = 30
    args.ratios = [float(r) for r in args.ratios.split(",")]
    parts = set(args.parts.split(","))
    args.frontier = True
    torch.set_num_threads(args.threads)
    cfg = GPTConfig()
    if args.smoke:
        cfg = GPTConfig(n_layer=1, n_embd=64, n_head=2, block_size=32)
        args.steps, args.batch, args.val_batches = 3, 4, 2
    train, val = load_corpus()
    print(f"tiny GPT {cfg}, {args.steps} steps, batch {args.batch}, lr {args.lr}, seed {args.seed}, "
          f"{args.threads} threads, parts {sorted(parts)}")
    if "frontier" in parts:
        t0 = time.perf_counter()
        _, v_exact, _ = run_frontier(args, train, val, cfg)
        print(f"exact model validation loss {v_exact:.4f} [frontier run: {time.perf_counter() - t0:.0f} s]")
    if "train" in parts:
        t0 = time.perf_counter()
        run_training(args, train, val, cfg)
        print(f"[training run: {time.perf_counter() - t0:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
