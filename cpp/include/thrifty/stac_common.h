// STAC-R activation compression: the numerical contract shared by the CPU and the CUDA kernels.
//
// Every function in this header is compiled both by the host compiler (CPU kernels, tests) and by nvcc
// (device code), so the CPU twin and the CUDA kernel quantize, round and draw random numbers with the
// *same* function, and agree bit for bit. Only IEEE-exact float32 operations appear here (one multiply,
// one add or one division per rounding step; no fused multiply-add, no reciprocal approximations):
// the CPU build uses -ffp-contract=off and the device code the explicit _rn intrinsics.
//
// Layout (see python/thrifty/compress/_kernels.py for the full contract):
//   x      (n, d)   float32 / bfloat16 / float16, rows with a stride, unit column stride
//   ut     (r, d)   float32, the basis U transposed (U has orthonormal columns)
//   xu     (n, r)   float32, X·U (computed by a GEMM outside the kernel)
//   c      (n, r)   stored coefficients: float32, bfloat16 (round to nearest even) or int8 with c_scale (n,)
//   idx    (n, nb, k)            uint8 in-block column of each kept residual entry, ascending
//   vals   (n, nb, k) int8  |  (n, nb, ceil(k/2)) uint8 (two signed nibbles, low nibble first)
//   scales (n, nb)  float32 per row and block; value = q * scale
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STAC_HD __host__ __device__ __forceinline__
#else
#define STAC_HD inline
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// Turing (sm_75) has no warp-reduce instructions: the same integer reductions by a butterfly of shuffles
// (every caller passes the full mask), so the kernels compile for sm_75 with identical results.
__device__ __forceinline__ unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(mask, v, o));
  return v;
}
__device__ __forceinline__ int __reduce_add_sync(unsigned mask, int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
  return v;
}
#endif

namespace thrifty {
namespace stac {

// Element types of x and g.
enum DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };
// Storage formats of the coefficients c.
enum CoefFormat : int { kCoefF32 = 0, kCoefBF16 = 1, kCoefI8 = 2 };

constexpr int kMaxBlock = 256;  // in-block indices are uint8

STAC_HD float bits_to_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

STAC_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}

STAC_HD float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// float32 -> bfloat16, round to nearest even (torch's and the hardware's conversion); NaN stays NaN.
STAC_HD uint16_t float_to_bf16(float f) {
  uint32_t b = float_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

// IEEE half -> float32, exact (normals, subnormals, inf, NaN).
STAC_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t ex = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (ex == 0) {
    // subnormal or zero: man * 2^-24 is exact in float32
    const float mag = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -mag : mag;
  }
  if (ex == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((ex + 112u) << 23) | (man << 13));
}

template <int DT>
STAC_HD float load_as_float(const void* p, int64_t i) {
  if (DT == kF32) return static_cast<const float*>(p)[i];
  if (DT == kBF16) return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  return f16_to_float(static_cast<const uint16_t*>(p)[i]);
}

// IEEE float ops that never fuse (the device build would otherwise contract a*b+c into an FMA).
STAC_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
STAC_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
STAC_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

STAC_HD float abs_f(float v) { return bits_to_float(float_to_bits(v) & 0x7fffffffu); }

// Round half away from zero (C's roundf), written out so host and device agree without libm.
// Branch-free in the common path (the signs of residual values are random, so branches would mispredict).
STAC_HD float round_half_away(float y) {
  const float a = abs_f(y);
  if (!(a < 8388608.0f)) return y;  // already an integer (or NaN / inf)
  float t = static_cast<float>(static_cast<int32_t>(a));  // trunc(a), exact
  t += static_cast<float>(a - t >= 0.5f);                 // a - t is exact: the fractional part
  return bits_to_float(float_to_bits(t) | (float_to_bits(y) & 0x80000000u));
}

STAC_HD float floor_f(float y) {
  if (!(abs_f(y) < 8388608.0f)) return y;
  const float t = static_cast<float>(static_cast<int32_t>(y));  // trunc toward zero
  return t - static_cast<float>(t > y);
}

// splitmix64's finaliser.
STAC_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Counter-based uniform in [0, 1) on a 2^-24 grid, keyed by (seed, row, global column): a pure function,
// so any thread, tile order or device draws the same number for the same entry.
STAC_HD float uniform01(uint64_t seed, uint64_t row, uint64_t col) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull * (row + 1));
  h = mix64(h ^ (0xd1b54a32d192ed03ull * (col + 1)));
  return static_cast<float>(static_cast<uint32_t>(h >> 40)) * 5.9604644775390625e-08f;
}

// Quantize one value against a per-group scale (scale = absmax / qmax). Deterministic: round half away
// from zero; stochastic: floor(v/scale + u). Clamped to [-qmax, qmax]; a zero scale gives 0.
STAC_HD int quantize_value(float v, float scale, float qmax, bool stochastic, float u) {
  if (!(scale > 0.0f)) return 0;
  const float y = div_rn(v, scale);
  float q = stochastic ? floor_f(add_rn(y, u)) : round_half_away(y);
  if (q != q) return 0;  // NaN (the wrapper reports non-finite input separately)
  if (q > qmax) q = qmax;
  if (q < -qmax) q = -qmax;
  return static_cast<int>(q);
}

STAC_HD float group_scale(float absmax, float qmax) { return div_rn(absmax, qmax); }

// Composite selection key: larger |e| first, ties broken by the lower in-block index.
STAC_HD uint64_t select_key(float e, int j) {
  return (static_cast<uint64_t>(float_to_bits(e) & 0x7fffffffu) << 8) | static_cast<uint64_t>(255 - j);
}

STAC_HD int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace stac
}  // namespace thrifty
