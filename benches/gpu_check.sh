#!/usr/bin/env bash
# GPU check of thrifty.compress (issue 8), prepared for one lease of a GPU machine (an H200; ~10 minutes;
# no network there; the machine's own python3 holds torch, CMake, ninja, pytest, hypothesis
# and nvcc). One call:
#   1. builds cpp/ with the machine's nvcc (the default architectures that nvcc has) and runs ctest;
#   2. checks every CUDA kernel against its CPU twin on random inputs: tests/compress/test_kernels_cuda.py
#      (compress bit for bit; contraction and dequantize-scatter to 1e-5 relative; determinism, streams,
#      opcheck) and the CPU suite tests/compress/test_kernels.py on that machine;
#   3. times the kernels on a GPT-2-medium-sized layer (n=8192 tokens, d=1024, m=4096) and a training step
#      of examples/tiny_gpt.py (the benchmark's 4x256 model and a 8x1024 one), uncompressed vs stac_r(ratio=8),
#      with CUDA events (medians) and torch.cuda.max_memory_allocated.
# The Rust extension cannot be built there (no cargo): carry the abi3 build from scripts/setup.sh.
# Device tool:  run(command="bash benches/gpu_check.sh", carry=["python/thrifty/_core.abi3.so"], timeout_s=540)
# Results: printed, and $OUT/gpu_check.log + $OUT/gpu_check.json when OUT is set.  GPU_CHECK_QUICK=1 skips
# the large model.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUTDIR=${OUT:-/tmp/thrifty_gpu_check}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/gpu_check.log") 2>&1
PY=${PYTHON:-python3}
fail=0
step() { echo; echo "== $* ($(date -u +%H:%M:%S)) =="; }

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" \
  || { echo "gpu_check: torch with CUDA is required"; exit 2; }
if ! ls python/thrifty/_core*.so >/dev/null 2>&1; then
  echo "gpu_check: python/thrifty/_core*.so is missing: build it with scripts/setup.sh and carry it"; exit 2
fi

step build
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
cmake -S . -B build/gpu "${gen[@]}" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DTHRIFTY_REQUIRE_CUDA=ON > "$OUTDIR/cmake.log" 2>&1 || { cat "$OUTDIR/cmake.log"; exit 1; }
grep "thrifty:" "$OUTDIR/cmake.log"
cmake --build build/gpu -j "$(nproc)" || exit 1
cmake --install build/gpu > /dev/null || exit 1
ctest --test-dir build/gpu --output-on-failure || fail=1
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
$PY -c "from thrifty.compress import _kernels as K; b = K.backends(); print(b); assert b['cuda'], b" || exit 1

step "CUDA kernels against their CPU twins"
$PY -m pytest -q -p no:cacheprovider -x tests/compress/test_kernels_cuda.py tests/compress/test_kernels.py || fail=1

step timings
$PY - "$OUTDIR" <<'EOF' || fail=1
import json, os, statistics, sys
import torch
sys.path.insert(0, "examples")
from thrifty.compress import _kernels as K

out_dir = sys.argv[1]
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
torch.backends.cuda.matmul.allow_tf32 = False


def cuda_ms(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


# --- kernels on a GPT-2-medium-sized fc1 layer --------------------------------------------------------
n, d, m, r, block, k = 8192, 1024, 4096, 128, 128, 8
g_ = torch.Generator(device="cuda").manual_seed(0)
x = (torch.randn(n, 16, device="cuda", generator=g_) @ torch.randn(16, d, device="cuda", generator=g_)
     + 0.3 * torch.randn(n, d, device="cuda", generator=g_)).to(torch.bfloat16)
u = torch.linalg.qr(torch.randn(d, r, device="cuda", generator=g_)).Q.contiguous()
g = torch.randn(n, m, device="cuda", generator=g_).to(torch.bfloat16)
xu = x.float() @ u
kern = {}
kern["X·U fp32 GEMM"] = cuda_ms(lambda: x.float() @ u)
for coef in ("bf16", "int8"):
    kern[f"compress kernel ({coef} coef, k={k}, xu given)"] = cuda_ms(
        lambda: K.compress(x, u, coef=coef, block=block, k=k, bits=8, xu=xu))
kern["compress total (incl. X·U)"] = cuda_ms(lambda: K.compress(x, u, coef="bf16", block=block, k=k, bits=8))
p = K.compress(x, u, coef="bf16", block=block, k=k, bits=8)
kern["grad_weight (factors)"] = cuda_ms(lambda: K.grad_weight(g, u, *p, d=d, block=block, bits=8))
kern["dense grad_W = Gᵀ X (bf16)"] = cuda_ms(lambda: g.t() @ x)
kern["dense grad_W = Gᵀ X (fp32)"] = cuda_ms(lambda: g.float().t() @ x.float())
kern["decompress"] = cuda_ms(lambda: K.decompress(u, *p, d=d, block=block, bits=8))
kern["refresh (incl. energy sync)"] = cuda_ms(lambda: K.refresh(x, u, return_projection=True), reps=10)
res["kernels_ms"] = kern
print(f"kernel timings, n={n} d={d} m={m} r={r} block={block} k={k} (median ms):")
for name, v in kern.items():
    print(f"  {name:45s} {v:8.3f}")

# --- training step of the tiny GPT: uncompressed vs stac_r(ratio=8) ------------------------------------
try:
    import tiny_gpt
    from thrifty.compress import stac_r
except Exception as exc:  # noqa: BLE001 - report and carry on
    print("training-step timing skipped:", repr(exc))
    stac_r = None
if stac_r is not None:
    configs = [("4x256 (benchmark), batch 16x128", dict(n_layer=4, n_embd=256, n_head=4, block_size=128), 16, None)]
    if not os.environ.get("GPU_CHECK_QUICK"):
        configs.append(("8x1024, batch 8x512, bf16 autocast",
                        dict(n_layer=8, n_embd=1024, n_head=16, block_size=512), 8, torch.bfloat16))
    steps = {}
    for label, cfg, batch, amp in configs:
        row = {}
        for mode in ("uncompressed", "stac_r ratio=8"):
            torch.manual_seed(0)
            model = tiny_gpt.GPT(tiny_gpt.GPTConfig(**cfg)).cuda()
            if mode != "uncompressed":
                model = stac_r(model, ratio=8)
            opt = tiny_gpt.make_optimizer(model)
            gen = torch.Generator().manual_seed(1)
            data = torch.randint(0, 256, (200_000,), dtype=torch.long)
            xb, yb = tiny_gpt.get_batch(data, batch, cfg["block_size"], gen)
            xb, yb = xb.cuda(), yb.cuda()

            def step():
                with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
                    _, loss = model(xb, yb)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            step(); torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            ms = cuda_ms(step, reps=10, warm=2)
            row[mode] = {"step_ms": ms, "peak_MiB": torch.cuda.max_memory_allocated() / 2**20}
            del model, opt
            torch.cuda.empty_cache()
        row["ratio"] = row["stac_r ratio=8"]["step_ms"] / row["uncompressed"]["step_ms"]
        steps[label] = row
        print(f"training step {label}: uncompressed {row['uncompressed']['step_ms']:.2f} ms "
              f"({row['uncompressed']['peak_MiB']:.0f} MiB peak), stac_r {row['stac_r ratio=8']['step_ms']:.2f} ms "
              f"({row['stac_r ratio=8']['peak_MiB']:.0f} MiB peak): {row['ratio']:.2f}x")
    res["training_step"] = steps
with open(os.path.join(out_dir, "gpu_check.json"), "w") as fh:
    json.dump(res, fh, indent=1)
EOF

step done
if [ "$fail" != 0 ]; then echo "gpu_check: FAILED (see above)"; exit 1; fi
echo "gpu_check: all checks passed"
