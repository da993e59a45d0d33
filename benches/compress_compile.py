"""torch.compile of a STAC-R-compressed GPT-2 (transformers' Conv1D projections, 2 layers): compile time, graph
breaks and the compiled step against eager, with the plain (uncompressed) compiled model as the peer.

    nice .venv/bin/python benches/compress_compile.py [--label after] [--repeats 5]

Each case builds the model from ``GPT2Config`` (random weights), compiles it with the default backend
(inductor, caches off so every compile is a real one) and times the first compiled training step (trace +
compile + run) and the median of ``--repeats`` later steps. "cold": compiled before the first batch planned the
layers; "warm": one eager step first (or ``stac_r(plan=predict(...))``). Before thrifty::stac_layer each
CompressedLinear broke the graph twice (policy outside the op); the "before" figures in
``benches/output/compress_compile.txt`` come from this script run on the previous commit's ``python/`` tree.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from thrifty.compress import stac_r  # noqa: E402


def build(width: int, layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=2048, n_positions=128, n_embd=width, n_layer=layers, n_head=4,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def step(model: torch.nn.Module, ids: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    model(input_ids=ids, labels=ids).loss.backward()


def timed(model: torch.nn.Module, ids: torch.Tensor, repeats: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    step(model, ids)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(model, ids)
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def breaks(model: torch.nn.Module, ids: torch.Tensor) -> int:
    n = int(torch._dynamo.explain(copy.deepcopy(model))(input_ids=ids, labels=ids).graph_break_count)
    torch._dynamo.reset()
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="after")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ids = torch.randint(0, 2048, (4, 128), generator=torch.Generator().manual_seed(1))
    plain = build(args.width, args.layers)
    print(f"[{args.label}] torch {torch.__version__}, transformers {transformers.__version__}; GPT-2 "
          f"{args.layers} layers, width {args.width}, 4x128 tokens, ratio 8, inductor, 1 thread")  # fmt: skip
    _, eager_plain = timed(plain, ids, args.repeats)
    rows = []
    for case in ("plain", "cold", "warm"):
        model = copy.deepcopy(plain) if case == "plain" else stac_r(plain, 8)
        if case == "warm":
            step(model, ids)
        nbreaks = breaks(model, ids) if case != "cold" else -1
        eager = eager_plain if case == "plain" else timed(copy.deepcopy(model), ids, args.repeats)[1]
        torch._dynamo.reset()
        compiled = torch.compile(model)
        first, steady = timed(compiled, ids, args.repeats)
        rows.append((case, nbreaks, first, steady, eager))
    base_first, base_steady = rows[0][2], rows[0][3]
    print(f"[{args.label}] {'case':<6} {'breaks':>6} {'1st step s':>10} {'vs plain':>8} {'step ms':>8} "
          f"{'vs plain':>8} {'eager ms':>8} {'compiled/eager':>14}")  # fmt: skip
    for case, nb, first, steady, eager in rows:
        print(f"[{args.label}] {case:<6} {nb if nb >= 0 else '-':>6} {first:10.1f} {first / base_first:8.2f} "
              f"{steady * 1e3:8.1f} {steady / base_steady:8.2f} {eager * 1e3:8.1f} {steady / eager:14.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
