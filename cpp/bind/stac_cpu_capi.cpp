// C ABI of the STAC-R CPU kernels (cpp/include/thrifty/stac_capi.h). Compiled once per instruction-set
// level (libthrifty_stac_cpu.so baseline, libthrifty_stac_cpu_avx2.so x86-64-v3); ctypes releases the GIL
// around each call.
#include "thrifty/stac_capi.h"

using namespace thrifty::stac;

#if defined(__AVX2__)
THRIFTY_STAC_CAPI_COMMON("avx2")
#else
THRIFTY_STAC_CAPI_COMMON("generic")
#endif

extern "C" {

int thrifty_stac_device_count(void) { return 0; }

int thrifty_stac_compress(const void* x, int32_t x_dtype, int64_t n, int64_t d, int64_t x_stride, const float* ut,
                          const float* xu, int64_t r, int32_t coef, void* c, float* c_scale, int32_t block,
                          int32_t k, int32_t bits, int32_t stochastic, uint64_t seed, void* vals, uint8_t* idx,
                          float* scales, const thrifty_stac_exec* exec, int64_t* nonfinite) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    if (nonfinite == nullptr) throw std::invalid_argument("nonfinite: null pointer");
    const CompressParams p = capi::compress_params(x, x_dtype, n, d, x_stride, ut, xu, r, coef, c, c_scale, block,
                                                   k, bits, stochastic, seed, vals, idx, scales);
    *nonfinite = compress_cpu(p, e.nthreads);
  });
}

int thrifty_stac_residual_grad_workspace(int64_t n, int64_t d, int32_t block, int32_t k, int64_t m,
                                         int64_t* elements) {
  return capi::guard([&] {
    check_residual_params(capi::residual_params(nullptr, nullptr, nullptr, n, d, block, k, 8), false);
    if (m < 0) throw std::invalid_argument("m: must be >= 0");
    if (elements == nullptr) throw std::invalid_argument("elements: null pointer");
    *elements = 0;
  });
}

int thrifty_stac_residual_grad(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                               int32_t block, int32_t k, int32_t bits, const void* g, int32_t g_dtype, int64_t m,
                               int64_t g_stride, float* out, int64_t out_stride, float* /*workspace*/,
                               const thrifty_stac_exec* exec) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    const ResidualParams p = capi::residual_params(vals, idx, scales, n, d, block, k, bits);
    check_residual_params(p);
    residual_grad_cpu(p, g, g_dtype, m, g_stride, out, out_stride, e.nthreads);
  });
}

int thrifty_stac_residual_scatter(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                                  int32_t block, int32_t k, int32_t bits, float* out, int64_t out_stride,
                                  const thrifty_stac_exec* exec) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    const ResidualParams p = capi::residual_params(vals, idx, scales, n, d, block, k, bits);
    check_residual_params(p);
    residual_scatter_cpu(p, out, out_stride, e.nthreads);
  });
}

}  // extern "C"
