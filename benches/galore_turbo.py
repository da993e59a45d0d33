"""GaLore "Turbo" vs STAC-R + GaLore without shared work: memory, step time, fidelity (issue 9, acceptance 5).

Configurations of the same byte-level GPT (examples/tiny_gpt.py, pydoc_data), same seed and batches:

- ``unshared``: ``stac_r(model, ratio)`` + :class:`GaLoreAdamW` on the compressed Linears' weights: the
  backward forms each (m, d) weight gradient from the STAC-R factors, the optimizer projects it (and takes an
  SVD of it every ``gap`` steps) - the two methods composed with no shared work;
- ``turbo-svd``: :func:`galore_turbo` with ``refresh="svd"``: between refreshes the projected gradient comes
  straight from the factors; on refresh steps GaLore's own SVD of the full gradient (identical updates);
- ``turbo-shared``: ``refresh="shared", share_schedule="none"``: the projector refresh is the SVD of the
  (m, r_s) matrix Gᵀ·deq(C) in STAC-R's basis, STAC-R still refreshes its basis on every batch;
- ``turbo-all``: ``share_schedule="all"``: every layer's STAC-R basis is refreshed only on GaLore's refresh
  steps (left-projected layers then see an aged basis);
- ``turbo-std``: ``share_schedule="right"`` with GaLore's own sides (``proj_type="std"``): right-projected
  layers share the schedule (exact projection up to quantisation, no residual), left-projected ones (m < d)
  keep the per-batch refresh (the default before ``proj_type="auto"``);
- ``turbo``: the default, ``proj_type="auto"``: as ``turbo-std``, but the m < d layers are projected on the
  right as well (their optimizer state is then smaller), so no layer keeps a per-batch refresh;
- ``unshared-right``: ``unshared`` with GaLore projecting on the right (``proj_type="right"``): the same
  sides as ``turbo`` when every layer's STAC-R rank holds GaLore's (true at these sizes), so ``turbo`` can be
  read against a baseline running the very same GaLore;
- ``turbo-left``: ``turbo-std`` with the left-projected layers' STAC-R basis refreshed every ``--left-every``
  steps (``stac_r(refresh_every=...)`` on those layers): a middle ground between ``turbo-std`` and ``turbo-all``;
- ``galore-only`` (timing only, a reference): GaLoreAdamW on the same Linears without STAC-R - what the
  model's own work plus GaLore cost, with dense saved inputs (so more memory).

Timing mode (default): per configuration, median step time (forward + backward + optimizer step + zero_grad)
over steps interleaved round-robin in one process, and the median of backward + step alone; memory =
parameters + gradients held after backward (``p.grad`` and the Turbo layers' ``low.grad``) + optimizer
state + peak saved activations (SavedBytesMeter, storage de-duplicated) - its maximum over the run (refresh
steps included). Ratios are against ``unshared``; ``--repeats`` runs the whole comparison again from
scratch. CPU timings on a loaded machine are noisy: read the ratios, not the seconds.

Fidelity mode (``--fidelity``): the configurations train one after the other, per step and per compressed
layer the cosine between the projected gradient the configuration hands to Adam and the exact one
``Gᵀ·X·Pᵀ`` (right) / ``Pᵀ·Gᵀ·X`` (left) from the uncompressed input X and the same P (so the basis's
aging is measured); mean and min per configuration and projection side; then the final losses (mean train
loss over the last 20 steps, validation loss) for ``--seeds`` data orders.

Profile mode (``--profile``): per configuration, the exclusive wall time per step of each phase (forward
GEMMs, STAC-R refresh, encoding, backward weight gradient, Turbo projection, GaLore SVD / projection / Adam /
project-back, the rest of the model), by wrapping the library's functions for the run.

Usage::

    .venv/bin/python benches/galore_turbo.py                      # d=256, 4 layers, 24 steps, gap 8
    .venv/bin/python benches/galore_turbo.py --gap 50 --steps 13 --repeats 3 --threads 1
    .venv/bin/python benches/galore_turbo.py --width 1024 --gap 50 --steps 12 --repeats 2 --threads 1 \
        --kinds unshared,unshared-right,turbo-std,turbo           # GPT-2-medium width: acceptance 5
    .venv/bin/python benches/galore_turbo.py --profile --width 1024 --steps 7 --gap 50 --threads 1 \
        --kinds unshared,unshared-right,turbo-std,turbo           # where the step time goes
    .venv/bin/python benches/galore_turbo.py --fidelity --width 128 --layers 2 --block 64 --steps 200 --gap 50 \
        --seeds 3 --threads 1
    .venv/bin/python benches/galore_turbo.py --smoke              # tiny, 3 steps: the script runs
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from tiny_gpt import GPT, GPTConfig, evaluate, get_batch, load_corpus

from thrifty.compress import (
    GaLoreAdamW,
    GaLoreProjector,
    SavedBytesMeter,
    TurboLinear,
    galore_turbo,
    stac_r,
)
from thrifty.compress._linear import CompressedLinear

KINDS = ("unshared", "unshared-right", "turbo-svd", "turbo-shared", "turbo-all", "turbo-std", "turbo",
         "turbo-left", "galore-only")  # fmt: skip
SCHEDULE = {"turbo-svd": "none", "turbo-shared": "none", "turbo-all": "all", "turbo-std": "auto", "turbo": "auto",
            "turbo-left": "auto"}  # fmt: skip
# GaLore projection side per configuration (galore_turbo's default proj_type is "auto")
PROJ = {"unshared": "std", "unshared-right": "right", "galore-only": "std", "turbo-svd": "std",
        "turbo-shared": "std", "turbo-all": "std", "turbo-std": "std", "turbo": "auto", "turbo-left": "std"}  # fmt: skip


def tensor_bytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def make(kind: str, base: nn.Module, args: argparse.Namespace) -> tuple[nn.Module, GaLoreAdamW]:
    common = {"rank": args.rank, "update_proj_gap": args.gap, "scale": 0.25, "proj_type": PROJ[kind]}
    if kind == "galore-only":  # reference: GaLore on the same Linears, no STAC-R (dense saved inputs)
        model = copy.deepcopy(base)
        lin = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
        ids = {id(p) for p in lin}
        rest = [p for p in model.parameters() if id(p) not in ids]
        return model, GaLoreAdamW([{"params": rest}, {"params": lin, **common}], lr=args.lr)
    every = None
    if kind == "turbo-left":  # the default Turbo with the left-projected layers' basis refreshed less often
        left = [n for n, m in base.named_modules() if isinstance(m, nn.Linear) and m.out_features < m.in_features]
        every = {n: args.left_every for n in left}
    model = stac_r(copy.deepcopy(base), ratio=args.ratio, seed=0, refresh_every=every)
    if kind in ("unshared", "unshared-right"):
        lin = [m.weight for m in model.modules() if isinstance(m, CompressedLinear)]
        ids = {id(p) for p in lin}
        rest = [p for p in model.parameters() if id(p) not in ids]
        return model, GaLoreAdamW([{"params": rest}, {"params": lin, **common}], lr=args.lr)
    refresh = "svd" if kind == "turbo-svd" else "shared"
    return model, galore_turbo(model, refresh=refresh, share_schedule=SCHEDULE[kind], lr=args.lr, **common)


def grads_bytes(model: nn.Module) -> int:
    total = sum(tensor_bytes(p.grad) for p in model.parameters())
    total += sum(tensor_bytes(m.low.grad) for m in model.modules() if isinstance(m, TurboLinear))
    return total


def header(args: argparse.Namespace, what: str) -> None:
    print(f"# {what}: GPT width {args.width}, {args.layers} layers, batch {args.batch}x{args.block} tokens, "
          f"STAC-R ratio {args.ratio:g}, GaLore rank {args.rank}, gap {args.gap}, {args.steps} steps, "
          f"{args.threads} threads, torch {torch.__version__}")  # fmt: skip


def timing(args: argparse.Namespace, kinds: tuple[str, ...], rep: int) -> dict[str, tuple[float, float, float, float]]:
    """One interleaved run of every configuration; returns {kind: (median step ratio, bwd+opt ratio, memory
    ratio, mean step ratio)} (the mean counts the rare refresh steps the median leaves out)."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=args.layers, n_embd=args.width, n_head=4, block_size=args.block)
    base = GPT(cfg)
    train, _val = load_corpus()
    gen = torch.Generator().manual_seed(1 + rep)
    batches = [get_batch(train, args.batch, args.block, gen) for _ in range(args.steps)]
    runs = {k: make(k, base, args) for k in kinds}
    step_t: dict[str, list[float]] = {k: [] for k in kinds}
    bwd_t: dict[str, list[float]] = {k: [] for k in kinds}
    mem: dict[str, int] = dict.fromkeys(kinds, 0)
    parts: dict[str, tuple[int, int, int, int]] = {}
    losses: dict[str, list[float]] = {k: [] for k in kinds}
    header(args, f"timing, repeat {rep + 1}/{args.repeats}")
    for step, (x, y) in enumerate(batches):
        order = kinds if step % 2 == 0 else kinds[::-1]  # interleave: load drifts hit every config alike
        for kind in order:
            model, opt = runs[kind]
            t0 = time.perf_counter()
            with SavedBytesMeter(exclude=model) as meter:
                _logits, loss = model(x, y)
            t1 = time.perf_counter()
            assert loss is not None
            loss.backward()
            held = grads_bytes(model)
            opt.step()
            opt.zero_grad(set_to_none=True)
            t2 = time.perf_counter()
            losses[kind].append(float(loss.detach()))
            if step > 0:  # step 0 plans every layer: not timed
                step_t[kind].append(t2 - t0)
                bwd_t[kind].append(t2 - t1)
            params = sum(tensor_bytes(p) for p in model.parameters())
            state = opt.state_bytes()
            total = params + held + state + meter.peak_bytes
            if total > mem[kind]:
                mem[kind] = total
                parts[kind] = (params, held, state, meter.peak_bytes)
    ref_t = statistics.median(step_t["unshared"])
    ref_b = statistics.median(bwd_t["unshared"])
    print(f"{'config':<14}{'step s':>9}{'ratio':>8}{'bwd+opt s':>11}{'ratio':>8}{'memory MB':>11}{'ratio':>8}"
          f"{'params':>9}{'grads':>9}{'opt':>9}{'saved':>9}{'loss':>8}")  # fmt: skip
    out: dict[str, tuple[float, float, float, float]] = {}
    ref_mean = statistics.mean(step_t["unshared"])
    for kind in kinds:
        st, bt = statistics.median(step_t[kind]), statistics.median(bwd_t[kind])
        p, g, s, a = parts[kind]
        out[kind] = (st / ref_t, bt / ref_b, mem[kind] / mem["unshared"], statistics.mean(step_t[kind]) / ref_mean)
        print(f"{kind:<14}{st:>9.3f}{st / ref_t:>8.3f}{bt:>11.3f}{bt / ref_b:>8.3f}{mem[kind] / 1e6:>11.2f}"
              f"{mem[kind] / mem['unshared']:>8.4f}{p / 1e6:>9.2f}{g / 1e6:>9.2f}{s / 1e6:>9.2f}{a / 1e6:>9.2f}"
              f"{losses[kind][-1]:>8.3f}")  # fmt: skip
    if "turbo-svd" in kinds:
        d = max(abs(a - b) for a, b in zip(losses["unshared"], losses["turbo-svd"]))
        print(
            f"# max |loss(unshared) - loss(turbo-svd)| over the run: {d:.2e} (the same updates up to float "
            "rounding, which the discontinuous top-k residual selection and the basis refreshes amplify)"
        )
    return out


class Probe:
    """Captures every compressed layer's input X and output gradient G of one step (forward/tensor hooks)."""

    def __init__(self, model: nn.Module) -> None:
        self.x: dict[str, torch.Tensor] = {}
        self.g: dict[str, torch.Tensor] = {}
        self.layers = {n: m for n, m in model.named_modules() if isinstance(m, (CompressedLinear, TurboLinear))}
        for name, mod in self.layers.items():
            mod.register_forward_hook(self._hook(name))

    def _hook(self, name: str):  # type: ignore[no-untyped-def]
        def fwd(mod: nn.Module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            if not out.requires_grad:
                return
            self.x[name] = inputs[0].detach().reshape(-1, inputs[0].shape[-1])

            def bwd(g: torch.Tensor) -> None:
                self.g[name] = g.detach().reshape(-1, g.shape[-1])

            out.register_hook(bwd)

        return fwd


def cosines(probe: Probe, opt: GaLoreAdamW) -> dict[str, tuple[str, float]]:
    """Per layer (side, cos(handed projected gradient, exact projected gradient with the same P)); call after
    ``opt.step()`` and before ``zero_grad`` (P is then the one this step used)."""
    out: dict[str, tuple[str, float]] = {}
    for name, mod in probe.layers.items():
        p = mod.weight
        proj: GaLoreProjector = mod.projector if isinstance(mod, TurboLinear) else opt.state[p]["projector"]
        assert proj.ortho is not None and proj.side is not None
        pt = proj.ortho.double()
        if isinstance(mod, TurboLinear) and mod.low.grad is not None:
            handed = mod.low.grad.double()
        else:
            assert p.grad is not None
            gw = p.grad.double()
            handed = gw @ pt.t() if proj.side == "right" else pt.t() @ gw
        full = probe.g[name].double().t() @ probe.x[name].double()
        exact = full @ pt.t() if proj.side == "right" else pt.t() @ full
        cos = float((handed * exact).sum() / (handed.norm() * exact.norm()).clamp_min(1e-300))
        out[name] = (proj.side, cos)
    return out


def fidelity(args: argparse.Namespace, kinds: tuple[str, ...]) -> None:
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=args.layers, n_embd=args.width, n_head=4, block_size=args.block)
    base = GPT(cfg)
    train, val = load_corpus()
    header(args, f"fidelity, {args.seeds} data orders")
    cos_all: dict[str, dict[str, list[float]]] = {k: {"right": [], "left": []} for k in kinds}
    per_layer: dict[str, dict[str, list[float]]] = {k: {} for k in kinds}
    final: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    for seed in range(args.seeds):
        gen = torch.Generator().manual_seed(100 + seed)
        batches = [get_batch(train, args.batch, args.block, gen) for _ in range(args.steps)]
        for kind in kinds:
            model, opt = make(kind, base, args)
            probe = Probe(model)
            losses = []
            for x, y in batches:
                _logits, loss = model(x, y)
                assert loss is not None
                loss.backward()
                opt.step()
                for name, (side, c) in cosines(probe, opt).items():
                    cos_all[kind][side].append(c)
                    per_layer[kind].setdefault(name.rsplit(".", 1)[-1], []).append(c)
                opt.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
            tail = statistics.mean(losses[-20:])
            print(f"# data order {seed}, {kind}: done", file=sys.stderr, flush=True)
            final[kind].append((tail, evaluate(model, val, args.batch, args.block)))
    names = sorted({n for k in kinds for n in per_layer[k]})
    print("# cos(handed, exact) over every step and layer: mean / min; by projection side and by layer name")
    print(f"{'config':<14}{'right mean':>11}{'min':>8}{'left mean':>11}{'min':>8}" + "".join(f"{n:>16}" for n in names))
    for kind in kinds:
        row = f"{kind:<14}"
        for side in ("right", "left"):
            v = cos_all[kind][side]
            row += f"{statistics.mean(v):>11.5f}{min(v):>8.4f}" if v else f"{'-':>11}{'-':>8}"
        for n in names:
            v = per_layer[kind].get(n, [])
            row += f"{statistics.mean(v):>9.5f}/{min(v):.3f}" if v else f"{'-':>16}"
        print(row)
    print("# final losses per data order: train = mean of the last 20 steps, val = evaluate() on 8 fixed windows")
    ref = final["unshared"]
    print(f"{'config':<14}" + "".join(f"{'train/val s' + str(i):>20}" for i in range(args.seeds))
          + f"{'mean val - unshared':>22}")  # fmt: skip
    for kind in kinds:
        row = f"{kind:<14}" + "".join(f"{t:>11.4f}/{v:<8.4f}" for t, v in final[kind])
        dv = statistics.mean(v - rv for (_t, v), (_rt, rv) in zip(final[kind], ref))
        print(row + f"{dv:>+22.4f}")
    spread = [max(v for _t, v in final[k]) - min(v for _t, v in final[k]) for k in kinds]
    print("# noise: val-loss spread over data orders per config: " + ", ".join(f"{s:.4f}" for s in spread))


class PhaseTimer:
    """Exclusive wall time per labelled phase: wraps library functions (monkeypatched for the run), each
    wrapper subtracts the time of the wrapped calls nested inside it, so the phases add up to the step."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.stack: list[float] = []
        self.side = "?"
        self.undo: list[tuple[object, str, object]] = []

    def enter(self) -> None:
        self.stack.append(0.0)

    def leave(self, label: str, dt: float) -> None:
        child = self.stack.pop()
        self.acc[label] = self.acc.get(label, 0.0) + dt - child
        if self.stack:
            self.stack[-1] += dt

    def timed(self, label: str, fn, *a, **k):  # type: ignore[no-untyped-def]
        self.enter()
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            self.leave(label, time.perf_counter() - t0)

    def wrap(self, owner: object, attr: str, label) -> None:  # type: ignore[no-untyped-def]
        orig = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        is_static = isinstance(orig, staticmethod)
        fn = orig.__func__ if is_static else orig

        def wrapper(*a, **k):  # type: ignore[no-untyped-def]
            return self.timed(label(a, k) if callable(label) else label, fn, *a, **k)

        self.undo.append((owner, attr, orig))
        setattr(owner, attr, staticmethod(wrapper) if is_static else wrapper)

    def restore(self) -> None:
        for owner, attr, orig in reversed(self.undo):
            setattr(owner, attr, orig)
        self.undo.clear()


def install_timers(pt: PhaseTimer) -> None:
    from thrifty.compress import _codec, _galore, _kernels

    def side_of_module(a, k):  # type: ignore[no-untyped-def]
        mod = a[0]
        pt.side = "m>=d" if mod.out_features >= mod.in_features else "m<d"
        return f"fwd: F.linear + module code [{pt.side}]"

    pt.wrap(CompressedLinear, "forward", side_of_module)
    pt.wrap(TurboLinear, "forward", side_of_module)
    pt.wrap(_codec.LayerCodec, "basis_for", lambda a, k: f"fwd: basis_for (plan/python) [{pt.side}]")
    pt.wrap(_kernels, "refresh", lambda a, k: f"fwd: STAC-R refresh (3 GEMM + QR) [{pt.side}]")
    pt.wrap(_kernels, "compress", lambda a, k: f"fwd: encode X·U + quantise [{pt.side}]")

    def gw_side(a, k):  # type: ignore[no-untyped-def]
        m, d = a[0].shape[1], k["d"]
        return "bwd: grad_weight from factors " + ("[m>=d]" if m >= d else "[m<d]")

    pt.wrap(_kernels, "grad_weight", gw_side)
    pt.wrap(_galore, "project_from_factors", lambda a, k: f"bwd: turbo projection from factors [{a[4]} P]")
    pt.wrap(_galore, "shared_basis", "bwd: shared P refresh (small SVD)")
    pt.wrap(GaLoreProjector, "refresh", "opt: GaLore SVD of the full gradient")
    pt.wrap(GaLoreProjector, "project", "opt: project full gradient (G·Pᵀ / Pᵀ·G)")
    pt.wrap(GaLoreProjector, "project_back", "opt: project back (low·P / P·low)")


def profile(args: argparse.Namespace, kinds: tuple[str, ...]) -> None:
    """Per-phase exclusive time per step (ms), per configuration, interleaved steps (refresh step 0 untimed).
    Layer labels: [m>=d] / [m<d] by the weight's shape (out m, in d), which GaLore's "std" projects on the
    right / left; "turbo" (proj_type="auto") projects the [m<d] layers on the right too."""
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=args.layers, n_embd=args.width, n_head=4, block_size=args.block)
    base = GPT(cfg)
    train, _val = load_corpus()
    gen = torch.Generator().manual_seed(1)
    batches = [get_batch(train, args.batch, args.block, gen) for _ in range(args.steps)]
    runs = {k: make(k, base, args) for k in kinds}
    header(args, "profile (exclusive ms per step, mean over timed steps)")
    pt = PhaseTimer()
    install_timers(pt)
    per: dict[str, dict[str, float]] = {k: {} for k in kinds}
    totals: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for step, (x, y) in enumerate(batches):
            order = kinds if step % 2 == 0 else kinds[::-1]
            for kind in order:
                model, opt = runs[kind]
                pt.acc = {}
                t0 = time.perf_counter()
                _logits, loss = pt.timed("fwd: rest of the model (attention, LN, GELU, embeddings, loss)", model, x, y)
                assert loss is not None
                pt.timed("bwd: rest (grad_x GEMMs, attention, LN, GELU, autograd)", loss.backward)
                pt.timed("opt: Adam on low + update p, python loop", opt.step)
                pt.timed("opt: zero_grad", opt.zero_grad, set_to_none=True)
                dt = time.perf_counter() - t0
                if step > 0:
                    totals[kind].append(dt)
                    for lab, v in pt.acc.items():
                        per[kind][lab] = per[kind].get(lab, 0.0) + v
    finally:
        pt.restore()
    n = max(1, args.steps - 1)
    labels = sorted({lab for k in kinds for lab in per[k]})
    print(f"{'phase':<62}" + "".join(f"{k:>15}" for k in kinds))
    for lab in labels:
        print(f"{lab:<62}" + "".join(f"{1e3 * per[k].get(lab, 0.0) / n:>15.1f}" for k in kinds))
    print(f"{'step (sum of phases)':<62}" + "".join(f"{1e3 * sum(per[k].values()) / n:>15.1f}" for k in kinds))
    print(f"{'step (median wall)':<62}" + "".join(f"{1e3 * statistics.median(totals[k]):>15.1f}" for k in kinds))
    ref = statistics.median(totals["unshared"])
    print(
        f"{'ratio vs unshared (median wall)':<62}"
        + "".join(f"{statistics.median(totals[k]) / ref:>15.3f}" for k in kinds)
    )
    layers = runs["unshared"][0]
    print(
        "# STAC-R plans (unshared run): "
        + "; ".join(
            f"{nm.split('.')[-1] if nm != 'head' else nm} {m.in_features}->{m.out_features} "
            f"r={m.codec.config.rank} {m.codec.config.coef} k={m.codec.config.k}"
            for nm, m in layers.named_modules()
            if isinstance(m, CompressedLinear) and (nm.startswith("blocks.0.") or nm == "head")
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--ratio", type=float, default=8.0)
    ap.add_argument("--rank", type=int, default=32, help="GaLore rank")
    ap.add_argument("--gap", type=int, default=8, help="GaLore update_proj_gap")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="timing: whole runs (fresh models, other batches)")
    ap.add_argument("--left-every", type=int, default=4, help="turbo-left: refresh_every of left-projected layers")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {KINDS}")
    ap.add_argument("--fidelity", action="store_true", help="gradient fidelity and final losses instead of timing")
    ap.add_argument("--profile", action="store_true", help="per-phase exclusive time per step instead of timing")
    ap.add_argument("--seeds", type=int, default=2, help="fidelity: data orders")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if "unshared" not in kinds or any(k not in KINDS for k in kinds):
        ap.error(f"--kinds: a subset of {KINDS} that includes unshared")
    if args.smoke:
        args.width, args.layers, args.batch, args.block, args.steps, args.gap = 64, 1, 2, 32, 3, 2
        args.rank, args.seeds = 8, 1
    torch.set_num_threads(args.threads)
    if args.profile:
        profile(args, tuple(k for k in kinds if k != "galore-only"))
        return
    if args.fidelity:
        fidelity(args, tuple(k for k in kinds if k != "galore-only"))
        return
    ratios = [timing(args, kinds, rep) for rep in range(args.repeats)]
    print(
        "# every repeat's ratios vs unshared: median step / median bwd+opt / memory (mean step); "
        "targets: step <= 0.67, memory <= 1.01"
    )
    for kind in kinds:
        reps = "  ".join(f"{s:.3f}/{b:.3f}/{m:.4f} ({a:.3f})" for s, b, m, a in (r[kind] for r in ratios))
        med = statistics.median(r[kind][0] for r in ratios)
        print(f"{kind:<14}{reps}   median over repeats: step {med:.3f}")


if __name__ == "__main__":
    main()
