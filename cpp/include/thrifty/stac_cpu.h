// STAC-R CPU kernels: plain C++17 over raw pointers, sizes and strides (no libtorch, no Python).
// Each has a CUDA twin in stac_cuda.h with the same numerical contract (see stac_common.h).
#pragma once

#include <cstdint>

namespace thrifty {
namespace stac {

// Inputs and outputs of the compress kernel. All outputs are written whole (padding slots included).
struct CompressParams {
  const void* x = nullptr;  // (n, d), element type x_dtype, row stride x_stride (elements), unit column stride
  int x_dtype = 0;
  int64_t n = 0, d = 0, x_stride = 0;
  const float* ut = nullptr;  // (r, d) float32 contiguous: U transposed
  const float* xu = nullptr;  // (n, r) float32 contiguous: X·U
  int64_t r = 0;
  int coef = 0;                // CoefFormat
  void* c = nullptr;           // (n, r) coefficients in the chosen format (may alias xu for kCoefF32)
  float* c_scale = nullptr;    // (n,) for kCoefI8, else unused
  int block = 128, k = 0, bits = 8;
  bool stochastic = false;
  uint64_t seed = 0;
  void* vals = nullptr;      // (n, nb, k) int8 or (n, nb, ceil(k/2)) uint8
  uint8_t* idx = nullptr;    // (n, nb, k)
  float* scales = nullptr;   // (n, nb) (unused when k == 0)
};

// The packed residual, read by the contraction and the scatter.
struct ResidualParams {
  const void* vals = nullptr;
  const uint8_t* idx = nullptr;
  const float* scales = nullptr;
  int64_t n = 0, d = 0;
  int block = 128, k = 0, bits = 8;
};

// Throws std::invalid_argument naming the offending argument.
void check_compress_params(const CompressParams& p);
void check_residual_params(const ResidualParams& p, bool pointers = true);

// Quantize the coefficients, then per tile E = X - deq(C)·Uᵀ (never materialised whole), per block keep the k
// entries of largest |E| (ties -> lower index), quantize them with a per-block scale and pack them.
// Returns the number of non-finite entries of xu plus the number of blocks with a non-finite residual (0 for
// finite input; otherwise the outputs are meaningless).
int64_t compress_cpu(const CompressParams& p, int nthreads);

// out (m, d) row stride out_stride, float32: out += Gᵀ·R with G (n, m) of type g_dtype (row stride g_stride).
// A segmented scatter per feature block, float32 accumulation, rows in ascending order (deterministic).
void residual_grad_cpu(const ResidualParams& p, const void* g, int g_dtype, int64_t m, int64_t g_stride,
                       float* out, int64_t out_stride, int nthreads);

// out (n, d) row stride out_stride, float32: out += R (dequantize-scatter).
void residual_scatter_cpu(const ResidualParams& p, float* out, int64_t out_stride, int nthreads);

}  // namespace stac
}  // namespace thrifty
