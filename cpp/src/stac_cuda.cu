// STAC-R CUDA kernels (the twins of stac_cpu.cpp; the shared contract is in stac_common.h).
//
// compress
//   coef_kernel      one warp per row: quantize X·U into the stored format (and the int8 row scale).
//   residual_kernel  one CTA per (8 rows, feature block): thread j accumulates the low-rank part of column j
//                    for the 8 rows (t in order, __fmul_rn/__fadd_rn: bit-identical to the CPU), E goes to
//                    shared memory only; then warp w selects row w's top-k by a 40-step bitwise search for the
//                    k-th largest (|E|, -index) key, computes ascending slots by ballots, quantizes and packs.
// residual_grad      one CTA per (feature block, 32 output rows, row split): a block x 32 accumulator in
//                    shared memory; warp w owns the columns == w (mod 8), so every accumulator cell has one
//                    writer and a fixed order (no atomics); row splits write partial sums to a workspace that a
//                    second kernel reduces in split order - deterministic.
// residual_scatter   one thread per kept entry: out[row, col] += q * scale (entries of a row are distinct).
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "thrifty/stac_common.h"
#include "thrifty/stac_cuda.h"

namespace thrifty {
namespace stac {
namespace {

constexpr int kTileRows = 8;   // rows per CTA in residual_kernel (one warp each for the selection)
constexpr int kTChunk = 64;    // coefficients staged in shared memory per step
constexpr int kGradMT = 32;    // output rows (of grad_W) per CTA in residual_grad_kernel
constexpr unsigned kFull = 0xffffffffu;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

__device__ __forceinline__ float load_x(const void* p, int dt, int64_t i) {
  if (dt == kF32) return load_as_float<kF32>(p, i);
  if (dt == kBF16) return load_as_float<kBF16>(p, i);
  return load_as_float<kF16>(p, i);
}

__device__ __forceinline__ float coef_deq(const void* c, int fmt, const float* c_scale, int64_t row, int64_t r,
                                          int64_t t) {
  const int64_t i = row * r + t;
  if (fmt == kCoefF32) return static_cast<const float*>(c)[i];
  if (fmt == kCoefBF16) return bf16_to_float(static_cast<const uint16_t*>(c)[i]);
  return mul_rn(static_cast<float>(static_cast<const int8_t*>(c)[i]), c_scale[row]);
}

__global__ void coef_kernel(const float* __restrict__ xu, int64_t n, int64_t r, int fmt, void* c,
                            float* c_scale) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= n) return;
  const float* src = xu + row * r;
  if (fmt == kCoefF32) {
    float* dst = static_cast<float*>(c) + row * r;
    if (dst != src)
      for (int64_t t = lane; t < r; t += 32) dst[t] = src[t];
    return;
  }
  if (fmt == kCoefBF16) {
    uint16_t* dst = static_cast<uint16_t*>(c) + row * r;
    for (int64_t t = lane; t < r; t += 32) dst[t] = float_to_bf16(src[t]);
    return;
  }
  unsigned amax_bits = 0;
  for (int64_t t = lane; t < r; t += 32) amax_bits = max(amax_bits, float_to_bits(abs_f(src[t])));
  amax_bits = __reduce_max_sync(kFull, amax_bits);
  const float scale = group_scale(bits_to_float(amax_bits), 127.0f);
  if (lane == 0) c_scale[row] = scale;
  int8_t* dst = static_cast<int8_t*>(c) + row * r;
  for (int64_t t = lane; t < r; t += 32) dst[t] = static_cast<int8_t>(quantize_value(src[t], scale, 127.0f, false, 0.0f));
}

struct ResidualArgs {
  const void* x;
  int x_dtype;
  int64_t n, d, x_stride, r;
  const float* ut;
  const void* c;
  int coef;
  const float* c_scale;
  int block, k, bits;
  bool stochastic;
  uint64_t seed;
  void* vals;
  uint8_t* idx;
  float* scales;
};

__global__ void __launch_bounds__(256) residual_kernel(ResidualArgs a) {
  __shared__ float cs[kTileRows][kTChunk];
  __shared__ float es[kTileRows][kMaxBlock];
  __shared__ int8_t qs[kTileRows][kMaxBlock];
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int64_t b = blockIdx.y;
  const int64_t nb = (a.d + a.block - 1) / a.block;
  const int64_t j0 = b * a.block;
  const int L = static_cast<int>(min(static_cast<int64_t>(a.block), a.d - j0));
  const int rows = static_cast<int>(min(static_cast<int64_t>(kTileRows), a.n - row0));

  // ---- E tile: thread tid owns column tid for the tile's rows --------------------------------------------
  float acc[kTileRows];
#pragma unroll
  for (int i = 0; i < kTileRows; ++i) acc[i] = 0.0f;
  for (int64_t t0 = 0; t0 < a.r; t0 += kTChunk) {
    const int tc = static_cast<int>(min(static_cast<int64_t>(kTChunk), a.r - t0));
    __syncthreads();
    for (int e = tid; e < kTileRows * kTChunk; e += blockDim.x) {
      const int i = e / kTChunk, t = e % kTChunk;
      cs[i][t] = (i < rows && t < tc) ? coef_deq(a.c, a.coef, a.c_scale, row0 + i, a.r, t0 + t) : 0.0f;
    }
    __syncthreads();
    if (tid < L) {
      const float* up = a.ut + t0 * a.d + j0 + tid;
      for (int t = 0; t < tc; ++t, up += a.d) {
        const float uv = __ldg(up);
#pragma unroll
        for (int i = 0; i < kTileRows; ++i) acc[i] = add_rn(acc[i], mul_rn(cs[i][t], uv));
      }
    }
  }
  if (tid < L) {
    for (int i = 0; i < rows; ++i) es[i][tid] = add_rn(load_x(a.x, a.x_dtype, (row0 + i) * a.x_stride + j0 + tid), -acc[i]);
  }
  __syncthreads();

  // ---- selection and packing: warp w handles row w --------------------------------------------------------
  const int w = tid >> 5, lane = tid & 31;
  if (w >= rows) return;
  const int64_t row = row0 + w;
  const int kk = min(a.k, L);
  constexpr int kPer = kMaxBlock / 32;
  uint64_t key[kPer];
  bool valid[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = lane + 32 * i;
    valid[i] = j < L;
    key[i] = valid[i] ? select_key(es[w][j], j) : 0ull;
  }
  uint64_t thr = 0;  // the kk-th largest key (keys are distinct); 0 keeps everything valid
  if (kk < L) {
    for (int bit = 39; bit >= 0; --bit) {
      const uint64_t cand = thr | (1ull << bit);
      int cnt = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) cnt += (valid[i] && key[i] >= cand) ? 1 : 0;
      cnt = __reduce_add_sync(kFull, cnt);
      if (cnt >= kk) thr = cand;
    }
  }
  unsigned amax_bits = 0;
  bool kept[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    kept[i] = valid[i] && key[i] >= thr;
    if (kept[i]) amax_bits = max(amax_bits, float_to_bits(abs_f(es[w][lane + 32 * i])));
  }
  amax_bits = __reduce_max_sync(kFull, amax_bits);
  const float qmax = a.bits == 8 ? 127.0f : 7.0f;
  const float scale = group_scale(bits_to_float(amax_bits), qmax);
  if (lane == 0 && a.k > 0) a.scales[row * nb + b] = scale;
  uint8_t* idx = a.idx + (row * nb + b) * a.k;
  const unsigned lt_mask = (1u << lane) - 1u;
  int base = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const unsigned ballot = __ballot_sync(kFull, kept[i]);
    if (kept[i]) {
      const int pos = base + __popc(ballot & lt_mask);
      const int j = lane + 32 * i;
      const float u = a.stochastic ? uniform01(a.seed, static_cast<uint64_t>(row), static_cast<uint64_t>(j0 + j)) : 0.0f;
      const int q = quantize_value(es[w][j], scale, qmax, a.stochastic, u);
      idx[pos] = static_cast<uint8_t>(j);
      if (a.bits == 8) {
        static_cast<int8_t*>(a.vals)[(row * nb + b) * a.k + pos] = static_cast<int8_t>(q);
      } else {
        qs[w][pos] = static_cast<int8_t>(q);
      }
    }
    base += __popc(ballot);
  }
  for (int s = kk + lane; s < a.k; s += 32) {
    idx[s] = 0;
    if (a.bits == 8) static_cast<int8_t*>(a.vals)[(row * nb + b) * a.k + s] = 0;
  }
  if (a.bits == 4) {
    __syncwarp();
    const int kb = (a.k + 1) / 2;
    uint8_t* v = static_cast<uint8_t*>(a.vals) + (row * nb + b) * kb;
    for (int s = lane; s < kb; s += 32) {
      const int lo = 2 * s < kk ? qs[w][2 * s] : 0;
      const int hi = 2 * s + 1 < kk ? qs[w][2 * s + 1] : 0;
      v[s] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
    }
  }
}

__device__ __forceinline__ int unpack_q(const void* vals, int64_t rb, int k, int bits, int s) {
  if (bits == 8) return static_cast<const int8_t*>(vals)[rb * k + s];
  const uint8_t byte = static_cast<const uint8_t*>(vals)[rb * ((k + 1) / 2) + (s >> 1)];
  const int nib = (s & 1) ? (byte >> 4) : (byte & 0xf);
  return (nib ^ 8) - 8;
}

struct GradArgs {
  const void* vals;
  const uint8_t* idx;
  const float* scales;
  int64_t n, d;
  int block, k, bits;
  const void* g;
  int g_dtype;
  int64_t m, g_stride;
  float* out;  // (m, d) row stride out_stride, or the workspace (splits, m, d) contiguous
  int64_t out_stride;
  int64_t rows_per_split;
  bool to_workspace;
};

__global__ void __launch_bounds__(256) residual_grad_kernel(GradArgs a) {
  __shared__ float acc[kMaxBlock][kGradMT];
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
  const int64_t b = blockIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kGradMT;
  const int64_t split = blockIdx.z;
  const int64_t nb = (a.d + a.block - 1) / a.block;
  const int L = static_cast<int>(min(static_cast<int64_t>(a.block), a.d - b * a.block));
  const int kk = min(a.k, L);
  const bool m_ok = m0 + lane < a.m;
  for (int e = tid; e < L * kGradMT; e += blockDim.x) (&acc[0][0])[e] = 0.0f;
  __syncthreads();
  const int64_t r_begin = split * a.rows_per_split;
  const int64_t r_end = min(a.n, r_begin + a.rows_per_split);
  for (int64_t row = r_begin; row < r_end; ++row) {
    const int64_t rb = row * nb + b;
    const float scale = a.scales[rb];
    if (!(scale != 0.0f)) continue;
    float gv = 0.0f;
    bool loaded = false;
    for (int s0 = 0; s0 < kk; s0 += 32) {
      const int s = s0 + lane;
      int col = 0, q = 0;
      if (s < kk) {
        col = a.idx[rb * a.k + s];
        q = unpack_q(a.vals, rb, a.k, a.bits, s);
      }
      unsigned mine = __ballot_sync(kFull, s < kk && q != 0 && (col & 7) == w);
      while (mine) {
        const int src = __ffs(mine) - 1;
        mine &= mine - 1;
        const int c = __shfl_sync(kFull, col, src);
        const int qq = __shfl_sync(kFull, q, src);
        if (!loaded) {
          gv = m_ok ? load_x(a.g, a.g_dtype, row * a.g_stride + m0 + lane) : 0.0f;
          loaded = true;
        }
        acc[c][lane] += mul_rn(static_cast<float>(qq), scale) * gv;
      }
    }
  }
  __syncthreads();
  // write: thread e -> (column e % L, output row e / L) for coalesced rows of out
  for (int e = tid; e < L * kGradMT; e += blockDim.x) {
    const int col = e % L, mm = e / L;
    if (m0 + mm >= a.m) continue;
    const float v = acc[col][mm];
    if (a.to_workspace) {
      a.out[(split * a.m + m0 + mm) * a.d + b * a.block + col] = v;
    } else {
      a.out[(m0 + mm) * a.out_stride + b * a.block + col] += v;
    }
  }
}

__global__ void reduce_splits_kernel(const float* __restrict__ ws, int64_t splits, int64_t m, int64_t d,
                                     float* out, int64_t out_stride) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m * d) return;
  const int64_t mm = e / d, j = e % d;
  float s = 0.0f;
  for (int64_t sp = 0; sp < splits; ++sp) s += ws[sp * m * d + e];
  out[mm * out_stride + j] += s;
}

__global__ void residual_scatter_kernel(const void* vals, const uint8_t* idx, const float* scales, int64_t n,
                                        int64_t d, int block, int k, int bits, float* out, int64_t out_stride) {
  const int64_t nb = (d + block - 1) / block;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n * nb * k) return;
  const int s = static_cast<int>(e % k);
  const int64_t rb = e / k, row = rb / nb, b = rb % nb;
  const int L = static_cast<int>(min(static_cast<int64_t>(block), d - b * block));
  if (s >= min(k, L)) return;
  const int q = unpack_q(vals, rb, k, bits, s);
  out[row * out_stride + b * block + idx[rb * k + s]] += mul_rn(static_cast<float>(q), scales[rb]);
}

int64_t grad_splits(const ResidualParams& p, int64_t m) {
  if (p.k == 0 || p.n == 0 || m == 0) return 0;
  const int64_t nb = ceil_div(p.d, p.block), nmt = ceil_div(m, kGradMT);
  // A fixed CTA target (about 4 waves of an H100/H200) rather than the device's SM count: the split count
  // (hence the workspace size the caller allocates, and the summation order) must not depend on the device.
  const int64_t target = 512;
  int64_t splits = ceil_div(target, nb * nmt);
  splits = std::min<int64_t>(splits, ceil_div(p.n, 64));  // at least 64 rows per split
  return std::max<int64_t>(splits, 1);
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void compress_cuda(const CompressParams& p, int device, void* stream) {
  check_compress_params(p);
  if (p.n == 0) return;
  check(cudaSetDevice(device), "stac compress: cudaSetDevice");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int warps = 8;
  coef_kernel<<<static_cast<unsigned>(ceil_div(p.n, warps)), 32 * warps, 0, s>>>(p.xu, p.n, p.r, p.coef, p.c,
                                                                                  p.c_scale);
  check(cudaGetLastError(), "stac coef_kernel launch");
  if (p.k == 0) return;
  ResidualArgs a{p.x,     p.x_dtype, p.n,     p.d,     p.x_stride, p.r,          p.ut,   p.c,   p.coef,
                 p.c_scale, p.block, p.k,     p.bits,  p.stochastic, p.seed,     p.vals, p.idx, p.scales};
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kTileRows)), static_cast<unsigned>(ceil_div(p.d, p.block)));
  residual_kernel<<<grid, 256, 0, s>>>(a);
  check(cudaGetLastError(), "stac residual_kernel launch");
}

int64_t residual_grad_workspace(const ResidualParams& p, int64_t m) {
  const int64_t splits = grad_splits(p, m);
  return splits > 1 ? splits * m * p.d : 0;
}

void residual_grad_cuda(const ResidualParams& p, const void* g, int g_dtype, int64_t m, int64_t g_stride,
                        float* out, int64_t out_stride, float* workspace, int device, void* stream) {
  check_residual_params(p);
  if (p.k == 0 || p.n == 0 || m == 0) return;
  check(cudaSetDevice(device), "stac residual_grad: cudaSetDevice");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t splits = grad_splits(p, m);
  if (splits > 1 && workspace == nullptr) throw std::invalid_argument("workspace: required for these sizes");
  GradArgs a{p.vals, p.idx, p.scales, p.n, p.d, p.block, p.k, p.bits, g, g_dtype, m, g_stride,
             splits > 1 ? workspace : out, out_stride, ceil_div(p.n, splits), splits > 1};
  const dim3 grid(static_cast<unsigned>(ceil_div(p.d, p.block)), static_cast<unsigned>(ceil_div(m, kGradMT)),
                  static_cast<unsigned>(splits));
  residual_grad_kernel<<<grid, 256, 0, s>>>(a);
  check(cudaGetLastError(), "stac residual_grad_kernel launch");
  if (splits > 1) {
    const int64_t total = m * p.d;
    reduce_splits_kernel<<<static_cast<unsigned>(ceil_div(total, 256)), 256, 0, s>>>(workspace, splits, m, p.d, out,
                                                                                   out_stride);
    check(cudaGetLastError(), "stac reduce_splits_kernel launch");
  }
}

void residual_scatter_cuda(const ResidualParams& p, float* out, int64_t out_stride, int device, void* stream) {
  check_residual_params(p);
  if (p.k == 0 || p.n == 0) return;
  check(cudaSetDevice(device), "stac residual_scatter: cudaSetDevice");
  const int64_t total = p.n * ceil_div(p.d, p.block) * p.k;
  residual_scatter_kernel<<<static_cast<unsigned>(ceil_div(total, 256)), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      p.vals, p.idx, p.scales, p.n, p.d, p.block, p.k, p.bits, out, out_stride);
  check(cudaGetLastError(), "stac residual_scatter_kernel launch");
}

}  // namespace stac
}  // namespace thrifty
